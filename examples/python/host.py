"""A Python host that serves what an MCP server asks of it: sampling (its "model"), elicitation
(its "user"), roots and log messages — the same handlers for a legacy server's requests and for a
2026-07-28 server's InputRequiredResult rounds.

    PYTHONPATH=bindings/python python3 examples/python/host.py        # server-everything, via npx
    PYTHONPATH=bindings/python python3 examples/python/host.py node .deps/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js
"""
import pathlib
import sys

import mcplug


def sample(params):
    """sampling/createMessage: a host would run its model here."""
    prompt = params["messages"][-1]["content"].get("text", "")
    return {"role": "assistant", "content": {"type": "text", "text": f"(a model's answer to {prompt!r})"},
            "model": "example-model", "stopReason": "endTurn"}


def elicit(params):
    """elicitation/create: a host would ask its user here (form mode, or a URL to open)."""
    if params.get("mode") == "url":
        print("  the server asks the user to open", params["url"])
        return {"action": "accept"}
    print("  the server asks the user:", params["message"])
    if "name" not in params["requestedSchema"].get("properties", {}):
        raise mcplug.DeniedError("this example only knows its user's name")  # the server gets code -1
    return {"action": "accept", "content": {"name": "Ada Lovelace", "check": True}}


def on_log(params):
    print(f"  [server log, {params['level']}] {params.get('data')}")


argv = sys.argv[1:] or ["npx", "-y", "@modelcontextprotocol/server-everything"]
handlers = {"sampling/createMessage": sample, "elicitation/create": elicit, "notifications/message": on_log}
with mcplug.Client.connect({"command": argv[0], "args": argv[1:]}, handlers=handlers,
                           roots=[pathlib.Path.cwd()], log_level="info", elicitation_defaults=True) as client:
    print("connected:", client.server_info.get("name"), client.protocol_version)
    tools = {t["name"] for t in client.list_tools()}
    if "trigger-sampling-request" in tools:
        print(client.call_tool("trigger-sampling-request", {"prompt": "hello"})["content"][0]["text"])
    if "trigger-elicitation-request" in tools:
        print(client.call_tool("trigger-elicitation-request", {})["content"][1]["text"])
    if "get-roots-list" in tools:
        client.set_roots([pathlib.Path.cwd(), pathlib.Path.home()])   # the server is told, and asks again
        print(client.call_tool("get-roots-list", {})["content"][0]["text"].split("\n\nNote")[0])
