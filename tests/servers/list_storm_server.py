#!/usr/bin/env python3
"""A hostile MCP server for mcplug's list tests (Python 3 standard library only): lists too big
to hold, and storms of list_changed notifications. Legacy handshake (initialize -> 2025-11-25;
server/discover is -32601) over stdio, one thread.

    list_storm_server.py [--page-kib N] [--pages N] [--cursor-kib N] [--slow-list-ms N] [--paged M,...]
                         [--many-tools N]

The lists named by `--paged` (default: tools/list,resources/list,prompts/list) answer in pages of about `--page-kib` KiB (default
1: one small page), each page one item whose description fills it, with a new cursor of
`--cursor-kib` KiB (default 0: short) until `--pages` pages (default 1) were sent. Each list
request is counted by method; `--slow-list-ms` delays each tools/list answer. `--many-tools N`
instead lists N small tools besides its own (`{"name": "t<i>", "description": "d", "inputSchema":
{"type": "object"}}`, about 66 bytes each), in pages of 1,000.

Tools:
  storm {n, what?}  sends n notifications/<what: tools (default), resources, prompts>/list_changed,
                    then answers "sent n"
  counts {}         the list requests so far, as text: "tools/list=N resources/list=N prompts/list=N"
  echo {message}    answers the message (to see the connection still works)
"""
import json
import sys
import time

ARGS = {"--page-kib": 1, "--pages": 1, "--cursor-kib": 0, "--slow-list-ms": 0, "--many-tools": 0}
PAGED = {"tools/list", "resources/list", "prompts/list"}
argv = sys.argv[1:]
while argv:
    key = argv.pop(0)
    if key == "--paged" and argv:
        PAGED = set(argv.pop(0).split(","))
        continue
    if key not in ARGS or not argv:
        sys.exit(f"list_storm_server.py: unknown or incomplete argument {key!r}")
    ARGS[key] = int(argv.pop(0))

counts = {}
out = sys.stdout.buffer

TOOLS = [
    {"name": "storm", "description": "Sends n list_changed notifications", "inputSchema": {"type": "object"}},
    {"name": "counts", "description": "The list requests so far", "inputSchema": {"type": "object"}},
    {"name": "echo", "description": "Echoes the message", "inputSchema": {"type": "object"}},
]


def send(msg, flush=True):
    out.write(json.dumps(msg, separators=(",", ":")).encode("utf-8") + b"\n")
    if flush:
        out.flush()


def text(s):
    return {"content": [{"type": "text", "text": s}]}


MANY_PAGE = 1000


def many_tools_page(params):
    """A page of `--many-tools`: the server's own tools first, then MANY_PAGE small ones each."""
    cursor = (params or {}).get("cursor")
    start = int(cursor) if cursor else 0
    end = min(start + MANY_PAGE, ARGS["--many-tools"])
    items = (list(TOOLS) if start == 0 else []) + [
        {"name": f"t{i}", "description": "d", "inputSchema": {"type": "object"}} for i in range(start, end)]
    result = {"tools": items}
    if end < ARGS["--many-tools"]:
        result["nextCursor"] = str(end)
    return result


def page(method, params):
    """One page of a list: page number from the cursor, a filler item, the next cursor."""
    if method == "tools/list" and ARGS["--many-tools"]:
        return many_tools_page(params)
    field = {"tools/list": "tools", "resources/list": "resources", "prompts/list": "prompts"}[method]
    cursor = (params or {}).get("cursor")
    n = int(cursor.split("-", 1)[0]) if cursor else 0
    paged = method in PAGED
    filler = "d" * max(ARGS["--page-kib"] * 1024 - 200, 0) if paged else "small"
    if n == 0 and method == "tools/list":
        items = list(TOOLS)
        if paged and ARGS["--pages"] > 1:
            items.append({"name": "filler-0", "description": filler, "inputSchema": {"type": "object"}})
    elif method == "tools/list":
        items = [{"name": f"filler-{n}", "description": filler, "inputSchema": {"type": "object"}}]
    elif method == "resources/list":
        items = [{"uri": f"test://r/{n}", "name": f"r{n}", "description": filler}]
    else:
        items = [{"name": f"p{n}", "description": filler}]
    result = {field: items}
    if paged and n + 1 < ARGS["--pages"]:
        result["nextCursor"] = f"{n + 1}-" + "c" * (ARGS["--cursor-kib"] * 1024)
    return result


def handle(msg):
    method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if rid is None:
        return  # notifications
    if method == "server/discover":
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
    elif method == "initialize":
        caps = {"tools": {"listChanged": True}, "resources": {"listChanged": True}, "prompts": {"listChanged": True}}
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": "2025-11-25", "capabilities": caps,
                                                       "serverInfo": {"name": "list-storm", "version": "1"}}})
    elif method in ("tools/list", "resources/list", "prompts/list"):
        counts[method] = counts.get(method, 0) + 1
        if method == "tools/list" and ARGS["--slow-list-ms"]:
            time.sleep(ARGS["--slow-list-ms"] / 1000)
        send({"jsonrpc": "2.0", "id": rid, "result": page(method, params)})
    elif method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        if name == "storm":
            what = args.get("what", "tools")
            n = int(args.get("n", 1))
            for _ in range(n):
                send({"jsonrpc": "2.0", "method": f"notifications/{what}/list_changed"}, flush=False)
            out.flush()
            send({"jsonrpc": "2.0", "id": rid, "result": text(f"sent {n}")})
        elif name == "counts":
            shown = " ".join(f"{m}={counts.get(m, 0)}" for m in ("tools/list", "resources/list", "prompts/list"))
            send({"jsonrpc": "2.0", "id": rid, "result": text(shown)})
        elif name == "echo":
            send({"jsonrpc": "2.0", "id": rid, "result": text(str(args.get("message", "")))})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"no tool {name}"}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})


for line in sys.stdin.buffer:
    line = line.strip()
    if line:
        handle(json.loads(line))
