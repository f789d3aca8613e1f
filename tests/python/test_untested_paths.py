"""Paths the code takes that no other test asserts: at most 3 local and 20 remote servers
connecting at once (the peak measured), a request after the connection idled past the request
timeout, and the 2,048-character description cap at its default."""
from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import mcplug
from conftest import FaultFactory, text_of

FAULT_SERVER = Path(__file__).resolve().parent.parent / "servers" / "fault_server.py"

# Counts the servers between their start and their exec, under a lock; the peak is what the
# manager let start at once (it holds a slot until the server's initialize is answered).
COUNTING_WRAPPER = """
dir=$1; shift
( flock 9; n=$(( $(cat "$dir/now") + 1 )); echo $n > "$dir/now"; echo $n >> "$dir/seen" ) 9>"$dir/lock"
sleep 0.4
( flock 9; n=$(( $(cat "$dir/now") - 1 )); echo $n > "$dir/now" ) 9>"$dir/lock"
exec "$@"
"""


def test_at_most_three_local_servers_connect_at_once_by_default(tmp_path: Path) -> None:
    if shutil.which("flock") is None:
        pytest.fail("`flock` (util-linux) is not on PATH", pytrace=False)
    (tmp_path / "now").write_text("0\n")
    config = {"mcpServers": {
        f"s{i}": {"command": "sh", "args": ["-c", COUNTING_WRAPPER, "sh", str(tmp_path), sys.executable, str(FAULT_SERVER)]}
        for i in range(8)
    }}
    with mcplug.Manager() as m:
        m.connect(config)
        status = m.wait(60)
        assert {s["state"] for s in status["servers"].values()} == {"connected"}, status
    seen = [int(n) for n in (tmp_path / "seen").read_text().split()]
    assert len(seen) == 8
    print(f"\n# local servers starting at once, at most: {max(seen)} (of 8)")
    assert max(seen) == 3, f"the peak of local servers starting at once: {seen}"


class SlowInitialize(BaseHTTPRequestHandler):
    """A Streamable HTTP server (2025-11-25) whose initialize takes 0.5 s; counts the initializes
    in flight and keeps the peak."""

    lock = threading.Lock()
    now = 0
    peak = 0

    def log_message(self, *args: Any) -> None:
        pass

    def reply(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.reply(405)

    def do_DELETE(self) -> None:
        self.reply(200)

    def do_POST(self) -> None:
        msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:
            return self.reply(202)
        if method == "initialize":
            cls = SlowInitialize
            with cls.lock:
                cls.now += 1
                cls.peak = max(cls.peak, cls.now)
            time.sleep(0.5)
            with cls.lock:
                cls.now -= 1
            return self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "slow-initialize", "version": "1"}}})
        if method == "tools/list":
            return self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": {"tools": []}})
        self.reply(200, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no " + str(method)}})


@pytest.fixture()
def slow_http() -> Iterator[str]:
    class Server(ThreadingHTTPServer):
        request_queue_size = 128  # the default backlog (5) would itself cap the connects

    server = Server(("127.0.0.1", 0), SlowInitialize)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_at_most_twenty_remote_servers_connect_at_once_by_default(slow_http: str) -> None:
    SlowInitialize.now = SlowInitialize.peak = 0
    config = {"mcpServers": {f"r{i:02d}": {"type": "http", "url": f"{slow_http}/mcp/{i}"} for i in range(26)}}
    with mcplug.Manager() as m:
        m.connect(config)
        status = m.wait(60)
        assert {s["state"] for s in status["servers"].values()} == {"connected"}, status
    print(f"\n# remote servers initializing at once, at most: {SlowInitialize.peak} (of 26)")
    assert SlowInitialize.peak == 20


def test_a_request_after_an_idle_longer_than_the_request_timeout(fault: FaultFactory, everything_http: str) -> None:
    for server in (fault(), {"type": "http", "url": everything_http}):
        with mcplug.Client.connect(server, request_timeout=0.3, tool_timeout=0.3) as c:
            assert text_of(c.call_tool("echo", {"message": "before"})) == "Echo: before"
            time.sleep(0.9)  # three request timeouts of idle: no timer may be left to fire
            assert text_of(c.call_tool("echo", {"message": "after"})) == "Echo: after"
            c.ping()


def test_descriptions_are_capped_at_2048_characters_by_default() -> None:
    long = "d" * 3000
    with mcplug.Manager() as m:
        m.add_host_server("host", [{"name": "wordy", "description": long, "handler": lambda a: "ok"}])
        m.connect({"mcpServers": {}})
        m.wait(10)
        tool = next(t for t in m.list_tools()["tools"] if t["name"] == "mcp__host__wordy")
    assert len(tool["description"]) == 2048, len(tool["description"])
    assert tool["description"].endswith("… [truncated]")
    assert tool["description_cut"] == 3000 - (2048 - len("… [truncated]"))
