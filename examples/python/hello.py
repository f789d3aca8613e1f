"""A minimal Python host: connect to an MCP server over stdio, list its tools, call one.

    cargo build --release --examples
    PYTHONPATH=bindings/python python3 examples/python/hello.py              # the bundled demo server
    PYTHONPATH=bindings/python python3 examples/python/hello.py node server.js
"""
import sys

import mcplug

argv = sys.argv[1:] or ["target/release/examples/demo", "--serve"]
server = {"command": argv[0], "args": argv[1:]}

with mcplug.Client.connect(server, connect_timeout=10) as client:
    print("connected:", client.server_info.get("name"), "protocol", client.protocol_version)
    for tool in client.list_tools():
        print(" -", tool["name"])
    result = client.call_tool("echo", {"message": "hello from Python"}, timeout=5)
    print("echo:", result["content"][0]["text"])
    try:
        client.call_tool("no-such-tool", {})
    except mcplug.McpError as e:  # a JSON-RPC error from the server: kind "rpc", with its code
        print("no-such-tool:", e.kind, e.code, e.message)
