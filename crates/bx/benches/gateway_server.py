"""A small fast MCP server over stdio, for `cargo bench -p bx --bench gateway`.

No SDK: newline-delimited JSON-RPC on standard input and output, one tool, `echo`, that answers
its text at once, so that what a gateway in front of it adds is what the bench sees.
"""

import json
import sys

TOOL = {
    "name": "echo",
    "description": "Echoes its text.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


def answer(request):
    method = request.get("method")
    params = request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fast", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "tools/call":
        text = (params.get("arguments") or {}).get("text", "")
        return {"content": [{"type": "text", "text": "echo: " + str(text)}], "isError": False}
    if method == "ping":
        return {}
    return None


def main():
    out = sys.stdout
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if not isinstance(request, dict) or "id" not in request:
            continue
        result = answer(request)
        if result is None:
            reply = {"jsonrpc": "2.0", "id": request["id"],
                     "error": {"code": -32601, "message": "no such method"}}
        else:
            reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        out.write(json.dumps(reply) + "\n")
        out.flush()


main()
