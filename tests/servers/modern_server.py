#!/usr/bin/env python3
"""A 2026-07-28 ("modern" era) MCP server over stdio for mcplug's tests, built on the Python SDK
(mcp 2.3.0, `MCPServer`). server-everything only speaks the legacy era; this one proves that
mcplug negotiates the modern one and that tools work there.

    .deps/venv/bin/python tests/servers/modern_server.py

Tools: echo {message} -> text "Echo: <message>"; add {a, b} -> a + b (text, and structured
content as the SDK produces it for an int return).
"""
from mcp.server.mcpserver import MCPServer

server = MCPServer(name="modern-test-server", version="1.0.0", instructions="mcplug modern-era test server")


@server.tool()
def echo(message: str) -> str:
    """Echoes the message back."""
    return "Echo: " + message


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


if __name__ == "__main__":
    server.run("stdio")
