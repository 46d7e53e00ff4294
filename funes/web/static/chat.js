// The inspector's chat box: POST /chat with "stream": true and show the server-sent events as they come.
"use strict";
let conversation = null;

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

const RESULT_CHARS = 600;  // longer results are cut here; the decision page has them whole

function showCall(turn, call) {
  const item = el("li", call.error ? "call err" : "call");
  item.append(el("code", "", `${call.name}(${JSON.stringify(call.arguments)})`));
  if (call.error) {
    item.append(" failed: ", el("span", "error", call.error));
  } else {
    const text = typeof call.result === "string" ? call.result : JSON.stringify(call.result);
    const shown = text.length > RESULT_CHARS ? `${text.slice(0, RESULT_CHARS)}…` : text;
    item.append(" → ", el("code", "result", shown));
  }
  turn.calls.append(item);
}

function show(turn, kind, data) {
  if (kind === "decision") {
    turn.route.textContent = data.selected.length ? `tools: ${data.selected.join(", ")}` : "no tool (memory)";
  } else if (kind === "tool_call") {
    showCall(turn, data);
  } else if (kind === "token") {
    turn.reply.textContent += data.text;
  } else if (kind === "done") {
    conversation = data.conversation_id;
    // a replayed turn (same Idempotency-Key) streams no calls: the response still lists them
    if (!turn.calls.children.length) for (const call of data.tool_calls || []) showCall(turn, call);
    turn.reply.textContent = data.reply;  // the turn's own reply: the words streamed were a preview of it
    const link = el("a", "", `decision ${data.decision_id}`);
    link.href = `${data.decision_id}`;
    link.className = "decision-link";
    turn.route.append(" · ", link);
  } else if (kind === "error") {
    turn.reply.textContent = `error ${data.status}: ${data.error}`;
    turn.reply.className = "reply err";
  }
}

async function send(message) {
  const turn = {box: el("div", "turn")};
  turn.box.append(el("p", "user", `you: ${message}`));
  turn.route = turn.box.appendChild(el("p", "none", "routing…"));
  turn.calls = turn.box.appendChild(el("ul", "calls"));
  turn.reply = turn.box.appendChild(el("p", "reply", ""));
  document.getElementById("turns").append(turn.box);
  const body = {message, stream: true};
  if (conversation) body.conversation_id = conversation;
  const response = await fetch("../chat", {method: "POST", headers: {"Content-Type": "application/json"},
                                           body: JSON.stringify(body)});
  if (!response.ok) {
    const problem = await response.json().catch(() => ({error: response.statusText}));
    return show(turn, "error", {status: response.status, error: problem.error});
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const fields = {};
      for (const line of block.split("\n")) {
        const at = line.indexOf(": ");
        if (at > 0 && !line.startsWith(":")) fields[line.slice(0, at)] = line.slice(at + 2);
      }
      if (fields.event) show(turn, fields.event, JSON.parse(fields.data));
    }
  }
}

document.getElementById("chat").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("message-input");
  const button = document.getElementById("send");
  const message = input.value.trim();
  if (!message) return;
  input.value = "";
  button.disabled = true;
  document.getElementById("status").textContent = "working…";
  try {
    await send(message);
  } catch (e) {
    document.getElementById("status").textContent = `failed: ${e}`;
  } finally {
    button.disabled = false;
    if (document.getElementById("status").textContent === "working…") document.getElementById("status").textContent = "";
  }
});
