"""A raw JSON-RPC MCP server over stdio, for faults the SDK's own server will not produce.

It speaks the 2025 handshake by hand and lists `echo` and `shout`; with RAW_BAD set, beside them `bad` (its
inputSchema is "oops", not a JSON Schema) and `listy` (its inputSchema is not an object's). With RAW_NOISE set, it
writes a line holding bytes that are not UTF-8 and a line that is not JSON before each answer to a tools/call; with
RAW_PIDS naming a file, it appends its PID and its parent's there at start.
"""
import json
import os
import sys

TOOLS = [
    {"name": "echo", "description": "Repeat the given text back unchanged.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "shout", "description": "Repeat the given text back in capital letters.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
]
BAD = [{"name": "bad", "description": "A tool whose schema is not a schema.", "inputSchema": "oops"},
       {"name": "listy", "description": "A tool whose arguments are a list.", "inputSchema": {"type": "array"}}]


def answer(method: str, params: dict) -> dict:
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {"listChanged": True}}, "serverInfo": {"name": "raw", "version": "0"}}
    if method == "tools/list":
        return {"tools": TOOLS[:1] + BAD + TOOLS[1:] if os.environ.get("RAW_BAD") else TOOLS}
    if method == "tools/call":
        text = str((params.get("arguments") or {}).get("text", ""))
        text = text.upper() if params.get("name") == "shout" else text
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return {}  # ping


def main() -> None:
    if os.environ.get("RAW_PIDS"):
        with open(os.environ["RAW_PIDS"], "a") as pids:
            pids.write(f"{os.getpid()} {os.getppid()}\n")
    out = sys.stdout.buffer
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request:
            continue  # a notification
        if request["method"] == "tools/call" and os.environ.get("RAW_NOISE"):
            out.write(b'{"jsonrpc": "2.0", "method": "notifications/message", "params": "\xff\xfe"}\n')
            out.write(b"server starting up, please wait\n")
        result = answer(request["method"], request.get("params") or {})
        out.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
