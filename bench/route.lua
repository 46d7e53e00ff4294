-- wrk script: POST /route with a fresh message each time (a counter defeats the message cache).
local messages = {
  "What's the weather in Oslo tomorrow?", "Find my Starbucks purchases", "How many people live in Moscow?",
  "Plan a relaxed 2-day trip to Jaipur with forts and food", "What did I watch about astronomy last month?",
  "How does the budget jar feature work?", "Write a haiku about autumn", "what time is it in Sydney",
}
local counter = 0
request = function()
  counter = counter + 1
  local text = messages[(counter % #messages) + 1] .. " #" .. counter
  local body = '{"messages": [{"role": "user", "content": "' .. text .. '"}]}'
  return wrk.format("POST", "/route", {["Content-Type"] = "application/json"}, body)
end
done = function(summary, latency, requests)
  io.write(string.format('{"requests": %d, "errors": %d, "rps": %.1f, "p50_ms": %.2f, "p95_ms": %.2f, "p99_ms": %.2f}\n',
    summary.requests, summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000, latency:percentile(95) / 1000,
    latency:percentile(99) / 1000))
end
