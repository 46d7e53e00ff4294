"""Funes as a drop-in proxy: Ollama's and OpenAI's chat APIs, the client's own tools filtered per message.

`ollama` and `openai` are the two blueprints (each answers errors in its client's shape); `gateway` runs
one request; `filter` decides which tools go upstream; `upstream` forwards and relays bytes.
"""
