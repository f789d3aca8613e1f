#!/usr/bin/env python3
"""The upstream of the gateway benchmark: a stdio MCP server with one tool, `echo`, written
straight on the wire (no SDK), so that its own cost is small and the same behind every gateway."""
import json
import sys

TOOL = {"name": "echo", "description": "Echoes its text", "inputSchema": {
    "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}


def main() -> None:
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            continue
        if method == "initialize":
            version = msg["params"].get("protocolVersion", "2025-06-18")
            result = {"protocolVersion": version, "capabilities": {"tools": {}},
                      "serverInfo": {"name": "echo", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [TOOL]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": msg["params"]["arguments"]["text"]}]}
        elif method == "ping":
            result = {}
        else:
            out.write(json.dumps({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": method}}) + "\n")
            out.flush()
            continue
        out.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
