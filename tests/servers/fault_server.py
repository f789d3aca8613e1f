#!/usr/bin/env python3
"""A small fault-injecting MCP server for mcplug's tests (Python 3 standard library only).

It speaks the legacy handshake (initialize -> 2025-11-25) over stdio and does, on demand, what
real servers will not: exit at once, print garbage, never answer, crash mid-call, ignore SIGINT
and SIGTERM,
leave a grandchild behind, send an oversized message. Features are proven against real servers;
this one exists only for the faults.

    fault_server.py [MODE]
    MODE: normal (default) | exit-now | garbage | garbage-exit | hang-init | ignore-term | grandchild
          | modern (answers server/discover: 2026-07-28) | future-only (-32022, supports only 2099-01-01)
          | discover-legacy (discover answers with legacy versions only) | old (initialize -> 2024-11-05)
          | bad-version (initialize -> 1999-01-01)
          | paged (tools/list in pages of 2; the second page's cursor is "", which is valid)
          | loop-cursor (tools/list always answers the same nextCursor)
          | batch (2025-03-26: `echo` answers in a JSON-RPC batch, after a log notification)
          | modern-listen (modern, offering tools.listChanged and resources.subscribe; serves
            subscriptions/listen by hand: acknowledges every URI except deny://..., and
            list_changed sends a notification tagged with a subscription id it never had, then
            one tagged with the newest listen request's id)
          | modern-nolisten (the same capabilities, but subscriptions/listen is -32601)
          | silent-discover (legacy; never answers server/discover)
          | deep-schema (tools/list adds a tool whose outputSchema nests 60 properties deep)

Tools (every mode that answers): echo {message}, sleep {ms}, cancelled_ids {}, crash {},
big {bytes}, stderr {line}, dribble {message, pieces, pause_ms} (not listed: writes its answer
line in pieces, pause_ms apart), last_meta {} (the `_meta` of this very request, as JSON text),
ask {method, params, wait_ms} (sends that request to the client and answers with the client's
response as JSON text, or "no answer" after wait_ms), stop_reading {} (never reads stdin again),
weather {mode} (declares an outputSchema {temperature: number}; mode "ok" matches it, "bad" breaks
it, "missing" has no structuredContent, "error" is an isError result that breaks it),
raw {b64} (not listed: answers with those bytes, base64, "@ID@" replaced by the request's id),
list_changed {what?} (sends notifications/<what: tools (default), resources, prompts>/list_changed,
  then answers).
In modern-listen mode also: listens {} (the ids of the subscriptions/listen requests so far, and
the request ids named by notifications/cancelled, as JSON text), end_listen {} (ends the newest
listen stream the stdio way: notifications/cancelled naming its request).
"""
import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "normal"
out_lock = threading.Lock()
cancelled = []
stop_reading = threading.Event()
answers = {}  # id of a request we sent -> [threading.Event, response]
ask_counter = [0]
listens = []  # ids of the subscriptions/listen requests, oldest first


def send(msg):
    data = json.dumps(msg, separators=(",", ":"), ensure_ascii=False) + "\n"
    with out_lock:
        sys.stdout.buffer.write(data.encode("utf-8"))  # UTF-8 whatever the locale
        sys.stdout.buffer.flush()


def text(s):
    return {"content": [{"type": "text", "text": s}]}


TOOLS = [
    {"name": "echo", "description": "Echoes the message", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}},
    {"name": "sleep", "description": "Sleeps ms milliseconds, then answers", "inputSchema": {"type": "object", "properties": {"ms": {"type": "integer"}}}},
    {"name": "cancelled_ids", "description": "The request ids named by notifications/cancelled so far", "inputSchema": {"type": "object"}},
    {"name": "crash", "description": "Exits the process at once, never answering", "inputSchema": {"type": "object"}},
    {"name": "big", "description": "Answers with `bytes` bytes of text", "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}}},
    {"name": "stderr", "description": "Writes a line to stderr", "inputSchema": {"type": "object", "properties": {"line": {"type": "string"}}}},
    {"name": "last_meta", "description": "The _meta of this request", "inputSchema": {"type": "object"}},
    {"name": "stop_reading", "description": "Stops reading stdin for good", "inputSchema": {"type": "object"}},
    {"name": "ask", "description": "Sends a request to the client and returns its response", "inputSchema": {"type": "object"}},
    {"name": "weather", "description": "Structured content that matches its outputSchema, or not, by mode",
     "inputSchema": {"type": "object", "properties": {"mode": {"enum": ["ok", "bad", "missing", "error"]}}, "required": ["mode"]},
     "outputSchema": {"type": "object", "properties": {"temperature": {"type": "number"}}, "required": ["temperature"]}},
    {"name": "list_changed", "description": "Sends notifications/tools/list_changed, then answers", "inputSchema": {"type": "object"}},
    {"name": "half", "description": "Half an answer line, then exits", "inputSchema": {"type": "object"}},
    {"name": "close_stdout", "description": "Closes stdout and stops reading, alive", "inputSchema": {"type": "object"}},
    {"name": "endless_line", "description": "A line that never ends", "inputSchema": {"type": "object"}},
]
if MODE == "modern-listen":
    TOOLS += [
        {"name": "listens", "description": "The subscriptions/listen ids and cancelled ids so far", "inputSchema": {"type": "object"}},
        {"name": "end_listen", "description": "Ends the newest listen stream with notifications/cancelled", "inputSchema": {"type": "object"}},
    ]


def call_tool(rid, params):
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "echo" and MODE == "batch":
        return send([
            {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "batched"}},
            {"jsonrpc": "2.0", "id": rid, "result": text("Echo: " + str(args.get("message")))},
        ])
    if name == "echo":
        return send({"jsonrpc": "2.0", "id": rid, "result": text("Echo: " + str(args.get("message")))})
    if name == "sleep":
        time.sleep(int(args.get("ms", 1000)) / 1000.0)
        return send({"jsonrpc": "2.0", "id": rid, "result": text("slept")})
    if name == "cancelled_ids":
        return send({"jsonrpc": "2.0", "id": rid, "result": text(json.dumps(cancelled))})
    if name == "crash":
        sys.stderr.write("crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    if name == "dribble":
        # One answer line written in `pieces` parts, `pause_ms` apart: a server flushing a long
        # line as it goes. The client's reader is woken meanwhile (its drive slice is shorter).
        line = (json.dumps({"jsonrpc": "2.0", "id": rid, "result": text(str(args.get("message")))},
                           separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
        pieces = max(1, int(args.get("pieces", 4)))
        step = max(1, -(-len(line) // pieces))
        with out_lock:
            for i in range(0, len(line), step):
                if i:
                    time.sleep(int(args.get("pause_ms", 50)) / 1000.0)
                sys.stdout.buffer.write(line[i:i + step])
                sys.stdout.buffer.flush()
        return
    if name == "big":
        return send({"jsonrpc": "2.0", "id": rid, "result": text("x" * int(args.get("bytes", 1024)))})
    if name == "raw":
        # The answer is these bytes (base64), @ID@ replaced by the request's id.
        data = base64.b64decode(args["b64"]).replace(b"@ID@", json.dumps(rid).encode())
        with out_lock:
            sys.stdout.buffer.write(data + b"\n")
            sys.stdout.buffer.flush()
        return
    if name == "half":
        # The first half of the answer line, no newline, then the process exits.
        line = json.dumps({"jsonrpc": "2.0", "id": rid, "result": text("half")}).encode()
        with out_lock:
            sys.stdout.buffer.write(line[: len(line) // 2])
            sys.stdout.buffer.flush()
        os._exit(4)
    if name == "close_stdout":
        # Stdout closed, the process alive (reading nothing more): only the client's close ends it.
        with out_lock:
            os.close(1)
        stop_reading.set()
        return
    if name == "endless_line":
        # One line that never ends, until the reader goes away.
        try:
            with out_lock:
                while True:
                    sys.stdout.buffer.write(b"x" * 65536)
                    sys.stdout.buffer.flush()
        except OSError:
            os._exit(5)
    if name == "stderr":
        sys.stderr.write(str(args.get("line")) + "\n")
        sys.stderr.flush()
        return send({"jsonrpc": "2.0", "id": rid, "result": text("ok")})
    if name == "stop_reading":
        stop_reading.set()
        return send({"jsonrpc": "2.0", "id": rid, "result": text("ok")})
    if name == "ask":
        with out_lock:
            ask_counter[0] += 1
            qid = "srv-%d" % ask_counter[0]
        slot = [threading.Event(), None]
        answers[qid] = slot
        send({"jsonrpc": "2.0", "id": qid, "method": args.get("method"), "params": args.get("params") or {}})
        if slot[0].wait(int(args.get("wait_ms", 10000)) / 1000.0):
            return send({"jsonrpc": "2.0", "id": rid, "result": text(json.dumps(slot[1]))})
        return send({"jsonrpc": "2.0", "id": rid, "result": text("no answer")})
    if name == "weather":
        mode = args.get("mode")
        result = text("weather " + str(mode))
        if mode == "ok":
            result["structuredContent"] = {"temperature": 21.5}
        elif mode in ("bad", "error"):
            result["structuredContent"] = {"temperature": "hot"}
        if mode == "error":
            result["isError"] = True
        return send({"jsonrpc": "2.0", "id": rid, "result": result})
    if name == "list_changed" and MODE == "modern-listen":
        meta = lambda sid: {"_meta": {"io.modelcontextprotocol/subscriptionId": sid}}
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": meta(987654)})
        if listens:
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": meta(listens[-1])})
        return send({"jsonrpc": "2.0", "id": rid, "result": text("ok")})
    if name == "list_changed":
        what = args.get("what", "tools") if isinstance(args, dict) else "tools"
        send({"jsonrpc": "2.0", "method": "notifications/%s/list_changed" % what})
        return send({"jsonrpc": "2.0", "id": rid, "result": text("ok")})
    if name == "listens":
        return send({"jsonrpc": "2.0", "id": rid, "result": text(json.dumps({"listens": listens, "cancelled": cancelled}))})
    if name == "end_listen":
        if listens:
            send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": listens[-1], "reason": "ending"}})
        return send({"jsonrpc": "2.0", "id": rid, "result": text("ended")})
    if name == "last_meta":
        return send({"jsonrpc": "2.0", "id": rid, "result": text(json.dumps(params.get("_meta")))})
    send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "Unknown tool: %s" % name}})


def handle(msg):
    method = msg.get("method")
    rid = msg.get("id")
    params = msg.get("params") or {}
    if method is None:
        slot = answers.pop(rid, None)
        if slot is not None:
            slot[1] = {k: v for k, v in msg.items() if k in ("result", "error")}
            slot[0].set()
        return
    if rid is None:
        if method == "notifications/cancelled":
            cancelled.append(params.get("requestId"))
        return
    if method == "server/discover":
        if MODE == "silent-discover":
            return  # a legacy server that ignores methods it does not know
        if MODE in ("modern-listen", "modern-nolisten"):
            return send({"jsonrpc": "2.0", "id": rid, "result": {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {"listChanged": True}, "resources": {"subscribe": True}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fault-server-" + MODE, "version": "1.0.0"}},
            }})
        if MODE == "modern":
            return send({"jsonrpc": "2.0", "id": rid, "result": {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "instructions": "mode modern",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fault-server-modern", "version": "1.0.0"}},
            }})
        if MODE == "future-only":
            requested = ((params.get("_meta") or {}).get("io.modelcontextprotocol/protocolVersion"))
            return send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32022, "message": "Unsupported protocol version",
                         "data": {"supported": ["2099-01-01"], "requested": requested}}})
        if MODE == "discover-legacy":
            return send({"jsonrpc": "2.0", "id": rid, "result": {"supportedVersions": ["2025-06-18"], "capabilities": {}}})
    if method == "initialize":
        version = {"old": "2024-11-05", "bad-version": "1999-01-01", "batch": "2025-03-26"}.get(MODE, "2025-11-25")
        return send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fault-server", "version": "1.0.0"},
            "instructions": "mode " + MODE,
        }})
    if method == "ping":
        return send({"jsonrpc": "2.0", "id": rid, "result": {}})
    if method == "tools/list":
        if MODE == "paged":
            cursors = ["", "page-%d"]  # the first page's nextCursor is "", a valid cursor
            cursor = params.get("cursor")
            start = 0 if cursor is None else (2 if cursor == "" else int(cursor.split("-")[1]))
            page = {"tools": TOOLS[start:start + 2]}
            if start + 2 < len(TOOLS):
                page["nextCursor"] = cursors[0] if start == 0 else cursors[1] % (start + 2)
            return send({"jsonrpc": "2.0", "id": rid, "result": page})
        if MODE == "loop-cursor":
            return send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS[:1], "nextCursor": "again"}})
        if MODE == "deep-schema":
            schema = {"type": "string"}
            for _ in range(60):
                schema = {"type": "object", "properties": {"a": schema}}
            deep = {"name": "deep", "description": "nested", "inputSchema": {"type": "object"}, "outputSchema": schema}
            return send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS + [deep]}})
        return send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    if method == "subscriptions/listen" and MODE == "modern-listen":
        listens.append(rid)
        asked = params.get("notifications") or {}
        honored = {k: v for k, v in asked.items() if k == "toolsListChanged"}
        uris = [u for u in asked.get("resourceSubscriptions") or [] if not u.startswith("deny://")]
        if uris:
            honored["resourceSubscriptions"] = uris
        return send({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                     "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": rid}, "notifications": honored}})
    if method == "tools/call":
        threading.Thread(target=call_tool, args=(rid, params), daemon=True).start()
        return
    send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found: %s" % method}})


def main():
    if MODE == "exit-now":
        sys.stderr.write("fatal: exiting at once\n")
        sys.stderr.flush()
        sys.exit(3)
    if MODE in ("garbage", "garbage-exit"):
        for line in ("this is not json", "{broken", "Server starting on stdout, sorry"):
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
        if MODE == "garbage-exit":
            sys.exit(1)
    if MODE == "ignore-term":
        # Ignores SIGINT and SIGTERM (only SIGKILL ends it); with FAULT_SIGNALS, appends the name
        # of each it got to that file.
        record = os.environ.get("FAULT_SIGNALS")

        def ignored(signum, _frame):
            if record:
                with open(record, "a") as f:
                    f.write(signal.Signals(signum).name + "\n")

        signal.signal(signal.SIGINT, ignored)
        signal.signal(signal.SIGTERM, ignored)
    if MODE == "grandchild":
        child = subprocess.Popen(["sleep", "300"])
        with open(os.environ["FAULT_PIDFILE"], "w") as f:
            f.write(str(child.pid))
    for line in sys.stdin:
        if MODE == "hang-init":
            continue
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("method") == "tools/call" and (msg.get("params") or {}).get("name") == "stop_reading":
            call_tool(msg.get("id"), msg.get("params"))
        else:
            handle(msg)
        if stop_reading.is_set():
            while True:
                time.sleep(1)
    if MODE == "ignore-term":
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main()
