#!/usr/bin/env python3
"""A Streamable HTTP MCP server (legacy era, 2025-11-25, with sessions) that injects the faults
no real server produces on demand, for mcplug's remote transport tests. A test fixture only:
features are proven against server-everything and the Python SDK; this one breaks things.

    python3 tests/servers/http_fault_server.py <port>

Prints "listening <port>" once it accepts connections. Endpoints:
  POST /mcp         the MCP endpoint (sessions via Mcp-Session-Id; unknown session => 404)
  GET  /mcp         405, or with Last-Event-ID the rest of a cut stream
  DELETE /mcp       ends the session (202), counted
  POST /always500   HTTP 500 to everything
  POST /locked      (and GET) HTTP 401 with a WWW-Authenticate challenge (a server that needs OAuth)
  POST /modern      the same tools in the 2026-07-28 era: server/discover offers only that
                    version, no sessions (a cut stream is not resumable there)
  POST /redirect    307 to /modern
  POST /mcp400      /mcp, but an unknown session gets 400 "No valid session ID provided" (as
                    the reference SDKs' servers answer after a restart), not 404
  POST /xredirect   307 to /modern on another origin (http://localhost:<port>); a GET, to /sse
  /p/<tag>/<path>   any endpoint below under any tag: one process answering on many paths
  GET  /sse         the legacy HTTP+SSE transport (2024-11-05): an `endpoint` event naming
                    /messages?sid=..., then every answer as a `message` event
  POST /messages    its messages (202); an unknown sid gets 404. Over it the tools echo, slow,
                    big, raw (the bytes as one event's data), restart, and: drop (the stream
                    ends before the answer), endless_line (a data line that never ends)
Tools (tools/call):
  echo {message}          SSE answer with event ids: "Echo: <message>"
  echo_kept {message}     the same, on a connection kept alive (chunked), the stream's end
                          0.5 s after the answer
  cut_echo {message}      SSE: a priming event (id, retry: 100), a progress notification (id),
                          then the connection is cut before the answer; a GET with
                          Last-Event-ID gets the answer
  cut_noid {}             SSE cut before the answer, no event ids (cannot be resumed)
  slow {ms}               answers (JSON) after ms milliseconds
  endless {}              an SSE stream of keep-alive comments that never answers
  big {bytes}             a JSON answer with a text of that many bytes
  big_sse {bytes}         the same as one SSE event
  fail500 {}              HTTP 500 with a text body
  restart {}              forgets every session (as a restarted server would), then answers
  status {code, challenge?}  HTTP <code> with a text body (and that WWW-Authenticate)
  reset {}                a Content-Length of 1000, 10 bytes of body, then a TCP reset
  loris {}                the status line and headers one byte every 100 ms, never done
  endless_line {}         SSE: one data line that never ends
  dup {}                  SSE: the answer twice under the same id
  stats {}                {"initializes", "deletes", "resumes", "connections", "sessions",
                          "endless_closed", "headers": {...}}
                          (headers: the last request's MCP headers and X-Test)
"""
import base64
import json
import queue
import socket
import struct
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1])
lock = threading.Lock()
sessions = set()
stats = {"initializes": 0, "deletes": 0, "resumes": 0, "connections": 0, "endless_closed": 0}
last_headers = {}
# Answers waiting for a resuming GET, by the last event id the client saw.
parked = {}

TOOLS = [
    {"name": n, "inputSchema": {"type": "object"}}
    for n in ["echo", "echo_kept", "cut_echo", "cut_noid", "slow", "endless", "big", "big_sse", "fail500", "restart", "stats",
              "raw", "status", "reset", "loris", "endless_line", "dup", "drop"]
]
# The legacy HTTP+SSE sessions: sid -> the queue its GET stream writes out (None ends it).
sse_sessions = {}


def result(rid, value):
    return {"jsonrpc": "2.0", "id": rid, "result": value}


def text(rid, t):
    return result(rid, {"content": [{"type": "text", "text": t}]})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def parse_request(self):
        # /p/<tag>/<endpoint> is <endpoint>: one process answering on many paths (the scale
        # run's 1,000 servers; a matrix cell whose URL must not share another's auth cache).
        ok = super().parse_request()
        if ok and self.path.startswith("/p/"):
            rest = self.path[3:]
            self.path = rest[rest.find("/"):] if "/" in rest else "/"
        if ok and "?" in self.path and not self.path.startswith("/messages?"):
            self.path = self.path.split("?", 1)[0]  # an entry's query (a key in the URL) is not routed on
        return ok

    def setup(self):
        super().setup()
        with lock:
            stats["connections"] += 1  # TCP connections accepted

    def json_reply(self, status, body, headers=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def plain(self, status, text_body):
        data = text_body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def sse_start(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def sse(self, data, eid=None, retry=None):
        out = ""
        if eid is not None:
            out += f"id: {eid}\n"
        if retry is not None:
            out += f"retry: {retry}\n"
        out += "data: " + (json.dumps(data) if data is not None else "") + "\n\n"
        self.wfile.write(out.encode())
        self.wfile.flush()

    def do_DELETE(self):
        sid = self.headers.get("Mcp-Session-Id")
        with lock:
            known = sid in sessions
            sessions.discard(sid)
            if known:
                stats["deletes"] += 1
        self.json_reply(202 if known else 404, None)

    def sse_stream(self):
        sid = uuid.uuid4().hex
        q = queue.Queue()
        with lock:
            sse_sessions[sid] = q
        self.sse_start()
        self.wfile.write(f"event: endpoint\ndata: /messages?sid={sid}\n\n".encode())
        self.wfile.flush()
        try:
            while True:
                item = q.get()
                if item is None:
                    return  # the stream ends (drop)
                if item == "endless_line":
                    self.wfile.write(b"event: message\ndata: ")
                    while True:
                        self.wfile.write(b"x" * 65536)
                        self.wfile.flush()
                if isinstance(item, bytes):
                    self.wfile.write(b"event: message\ndata: " + item + b"\n\n")
                else:
                    self.wfile.write(("event: message\ndata: " + json.dumps(item) + "\n\n").encode())
                self.wfile.flush()
        except OSError:
            pass
        finally:
            with lock:
                if sse_sessions.get(sid) is q:
                    del sse_sessions[sid]

    def sse_message(self, sid, msg):
        """A message POSTed to the legacy HTTP+SSE endpoint: its answer goes to the stream."""
        with lock:
            q = sse_sessions.get(sid)
        if q is None:
            self.plain(404, "unknown session")
            return
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()
        method = msg.get("method")
        rid = msg.get("id")
        if rid is None or method is None:
            return
        if method == "initialize":
            q.put(result(rid, {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                               "serverInfo": {"name": "http-fault-server-sse", "version": "1"}}))
            return
        if method == "tools/list":
            q.put(result(rid, {"tools": TOOLS}))
            return
        if method != "tools/call":
            q.put({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no " + method}})
            return
        name = msg["params"]["name"]
        args = msg["params"].get("arguments") or {}

        def answer():
            if name == "echo":
                q.put(text(rid, "Echo: " + args.get("message", "")))
            elif name == "slow":
                time.sleep(args.get("ms", 1000) / 1000)
                q.put(text(rid, "slow done"))
            elif name == "big":
                q.put(text(rid, "x" * int(args.get("bytes", 1000))))
            elif name == "raw":
                q.put(base64.b64decode(args["b64"]).replace(b"@ID@", json.dumps(rid).encode()))
            elif name == "drop":
                q.put(None)
            elif name == "endless_line":
                q.put("endless_line")
            elif name == "restart":
                with lock:
                    sse_sessions.clear()
                q.put(text(rid, "restarted"))
            else:
                q.put({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no tool " + name}})

        threading.Thread(target=answer, daemon=True).start()

    def do_GET(self):
        if self.path == "/sse":
            self.sse_stream()
            return
        if self.path == "/locked":
            self.locked()
            return
        if self.path == "/xredirect":
            self.json_reply(307, None, {"Location": "http://localhost:%d/sse" % PORT})
            return
        last = self.headers.get("Last-Event-ID")
        if last is None or self.path != "/mcp":
            self.json_reply(405, None)
            return
        with lock:
            answer = parked.pop(last, None)
            if answer is not None:
                stats["resumes"] += 1
        if answer is None:
            self.json_reply(404, None)
            return
        self.sse_start()
        self.sse(answer, eid=last + "-r")

    def locked(self):
        self.json_reply(401, {"error": "invalid_token"}, {
            "WWW-Authenticate": 'Bearer resource_metadata="http://127.0.0.1:%d/.well-known/oauth-protected-resource"' % PORT})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path == "/always500":
            self.plain(500, "boom: this server always fails")
            return
        if self.path.startswith("/messages?sid="):
            self.sse_message(self.path.split("=", 1)[1], json.loads(body))
            return
        if self.path == "/xredirect":
            self.json_reply(307, None, {"Location": "http://localhost:%d/modern" % PORT})
            return
        if self.path == "/redirect":
            self.json_reply(307, None, {"Location": "/modern"})
            return
        if self.path == "/locked":
            self.locked()
            return
        if self.path not in ("/mcp", "/modern", "/mcp400"):
            self.plain(404, "not here")
            return
        msg = json.loads(body)
        modern = self.path == "/modern"
        with lock:
            last_headers.clear()
            for k in ["Mcp-Session-Id", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "X-Test", "Accept"]:
                if self.headers.get(k) is not None:
                    last_headers[k] = self.headers.get(k)
        method = msg.get("method")
        rid = msg.get("id")
        if modern and method == "server/discover":
            self.json_reply(200, result(rid, {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "http-fault-server", "version": "1"},
            }))
            return
        if method == "initialize":
            sid = uuid.uuid4().hex
            with lock:
                sessions.add(sid)
                stats["initializes"] += 1
            asked = msg["params"].get("protocolVersion")
            version = asked if asked in ("2025-11-25", "2025-06-18", "2025-03-26") else "2025-11-25"
            self.json_reply(200, result(rid, {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "http-fault-server", "version": "1"},
            }), {"Mcp-Session-Id": sid})
            return
        sid = self.headers.get("Mcp-Session-Id")
        with lock:
            known = modern or sid in sessions
        if sid is None and not modern:
            self.json_reply(400, {"jsonrpc": "2.0", "id": None,
                                  "error": {"code": -32000, "message": "Bad Request: no session"}})
            return
        if not known and self.path == "/mcp400":
            # What the reference SDKs' servers answer an old session after a restart.
            self.json_reply(400, {"jsonrpc": "2.0", "id": None,
                                  "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"}})
            return
        if not known:
            self.json_reply(404, {"jsonrpc": "2.0", "id": None,
                                  "error": {"code": -32001, "message": "Session not found"}})
            return
        if rid is None or method is None:
            self.json_reply(202, None)  # a notification or a response
            return
        if method == "tools/list":
            self.json_reply(200, result(rid, {"tools": TOOLS}))
            return
        if method != "tools/call":
            self.json_reply(200, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no " + method}})
            return
        name = msg["params"]["name"]
        args = msg["params"].get("arguments") or {}
        token = (msg["params"].get("_meta") or {}).get("progressToken")
        if name == "raw":
            # A 200 application/json answer of these bytes (base64), @ID@ replaced by the id.
            data = base64.b64decode(args["b64"]).replace(b"@ID@", json.dumps(rid).encode())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif name == "echo":
            self.sse_start()
            self.sse(None, eid="e1")
            self.sse(text(rid, "Echo: " + args.get("message", "")), eid="e2")
        elif name == "echo_kept":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            event = ("id: k1\ndata: " + json.dumps(text(rid, "Echo: " + args.get("message", ""))) + "\n\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
            time.sleep(0.5)
            self.wfile.write(b"0\r\n\r\n")  # the stream's end; the connection stays open
            self.wfile.flush()
        elif name == "cut_echo":
            eid = uuid.uuid4().hex
            with lock:
                parked[eid + "-2"] = text(rid, "Echo: " + args.get("message", ""))
            self.sse_start()
            self.sse(None, eid=eid + "-1", retry=100)
            self.sse({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token if token is not None else 0, "progress": 1}}, eid=eid + "-2")
            # Cut: the answer never comes on this stream.
        elif name == "cut_noid":
            self.sse_start()
            self.sse({"jsonrpc": "2.0", "method": "notifications/message",
                      "params": {"level": "info", "data": "about to cut"}})
        elif name == "slow":
            time.sleep(args.get("ms", 1000) / 1000)
            self.json_reply(200, text(rid, "slow done"))
        elif name == "endless":
            self.sse_start()
            try:
                while True:
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                with lock:
                    stats["endless_closed"] += 1
        elif name == "big":
            self.json_reply(200, text(rid, "x" * int(args.get("bytes", 1000))))
        elif name == "big_sse":
            self.sse_start()
            try:
                self.sse(text(rid, "x" * int(args.get("bytes", 1000))))
            except OSError:
                pass
        elif name == "status":
            data = ("status %d on purpose" % args["code"]).encode()
            self.send_response(int(args["code"]))
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            if args.get("challenge"):
                self.send_header("WWW-Authenticate", args["challenge"])
            self.end_headers()
            self.wfile.write(data)
        elif name == "reset":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"jsonrpc":')
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
        elif name == "loris":
            try:
                for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" * 1000:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass
            self.close_connection = True
        elif name == "endless_line":
            self.sse_start()
            try:
                self.wfile.write(b"data: ")
                while True:
                    self.wfile.write(b"x" * 65536)
                    self.wfile.flush()
            except OSError:
                pass
        elif name == "dup":
            self.sse_start()
            self.sse(text(rid, "first"))
            self.sse(text(rid, "second"))
        elif name == "fail500":
            self.plain(500, "tool exploded")
        elif name == "restart":
            with lock:
                sessions.clear()
            self.json_reply(200, text(rid, "restarted"))
        elif name == "stats":
            with lock:
                s = dict(stats, sessions=len(sessions), headers=dict(last_headers))
            self.json_reply(200, text(rid, json.dumps(s)))
        else:
            self.json_reply(200, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no tool " + name}})


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the scale run connects 20 at a time
    allow_reuse_address = True


httpd = Server(("127.0.0.1", PORT), Handler)
print(f"listening {PORT}", flush=True)
httpd.serve_forever()
