#!/usr/bin/env python3
"""A registry in the official MCP registry's own format, for mcplug's registry tests (M9): the
`GET /v0.1/servers` list of `{"server": <server.json>, "_meta": {...}}` items, paged by cursor.
A test fixture only: it serves what the test wrote, as the registry would.

    python3 tests/servers/registry_server.py <port> <entries.json> [--page-size N] [--delay S]
                                             [--status CODE]

Prints "listening <port>" once it accepts connections. The entries file (a JSON array of
items, re-read at every request, so a test can change it between fetches) is served in its
order, `--page-size` (default 2) items a page, `metadata.nextCursor` naming the next one.
`updated_since` (RFC 3339) keeps the items whose
`_meta["io.modelcontextprotocol.registry/official"].updatedAt` is later; `version=latest` keeps
those whose `isLatest` is not false. `--delay S` answers every request S seconds late (a slow
registry); `--status CODE` answers every request with that HTTP status. Each request's query is
appended to `<entries.json>.log`, one JSON object a line.
"""
import json
import sys
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

PORT = int(sys.argv[1])
ENTRIES = sys.argv[2]
OPTS = sys.argv[3:]


def opt(name: str, default: str) -> str:
    return OPTS[OPTS.index(name) + 1] if name in OPTS else default


PAGE = int(opt("--page-size", "2"))
DELAY = float(opt("--delay", "0"))
STATUS = int(opt("--status", "200"))
OFFICIAL = "io.modelcontextprotocol.registry/official"


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def answer(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        with open(ENTRIES + ".log", "a") as log:
            log.write(json.dumps({"path": url.path, **query}) + "\n")
        if DELAY:
            time.sleep(DELAY)
        if STATUS != 200:
            self.answer(STATUS, {"title": "unavailable", "status": STATUS})
            return
        if url.path != "/v0.1/servers":
            self.answer(404, {"title": "Not Found", "status": 404})
            return
        with open(ENTRIES) as f:
            items = json.load(f)
        if "updated_since" in query:
            since = when(query["updated_since"])
            items = [i for i in items if when(i["_meta"][OFFICIAL]["updatedAt"]) > since]
        if query.get("version") == "latest":
            items = [i for i in items if i["_meta"][OFFICIAL].get("isLatest", True)]
        start = int(query.get("cursor", "0") or 0)
        limit = min(int(query.get("limit", str(PAGE))), PAGE)
        page = items[start : start + limit]
        metadata: dict = {"count": len(page)}
        if start + limit < len(items):
            metadata["nextCursor"] = str(start + limit)
        self.answer(200, {"servers": page, "metadata": metadata})


server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
server.daemon_threads = True
print(f"listening {PORT}", flush=True)
server.serve_forever()
