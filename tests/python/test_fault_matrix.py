"""The fault matrix: every fault a hostile or broken peer can produce, on every transport it
applies to, each cell a real connection through the C ABI. A cell runs its fault with a
bystander call in flight and states what the faulting call got and whether the connection
lives on ("alive": the next call is answered) or is gone ("dead": the next call fails with a
kind at once). Every cell, whatever its outcome, must also: end within CELL_LIMIT_S; answer the
bystander (a result or an error kind, never silence); leave no server process once the client
is closed, no fd beyond the baseline and no more than RSS_LIMIT_MIB of memory.

The table below is the expectation and RELIABILITY.md shows it; a test keeps the two equal:
    python3 tests/python/test_fault_matrix.py      # prints the table for RELIABILITY.md
"""
from __future__ import annotations

import base64
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[2]
FAULT_SERVER = REPO / "tests/servers/fault_server.py"
HTTP_FAULT_SERVER = REPO / "tests/servers/http_fault_server.py"
WS_BRIDGE = REPO / "tests/servers/ws_bridge.py"

TRANSPORTS = ("stdio", "http-modern", "http-legacy", "sse", "ws")
TRANSPORT_TITLES = {
    "stdio": "stdio",
    "http-modern": "Streamable HTTP 2026-07-28",
    "http-legacy": "Streamable HTTP 2025-11-25",
    "sse": "HTTP+SSE 2024-11-05",
    "ws": "WebSocket",
}
#: The message cap of every matrix connection (option max_message_bytes).
CAP = 1 << 20
CELL_LIMIT_S = 20.0
RSS_LIMIT_MIB = 48
ANSWER = b'{"jsonrpc":"2.0","id":@ID@,"result":{"content":[{"type":"text","text":"fine"}]}}'

# fault: (what the peer does, {transport: expected "<the call's outcome>, <alive|dead>"}); a
# transport the fault cannot occur on is absent (n/a in the table).
MATRIX: Dict[str, Tuple[str, Dict[str, str]]] = {
    "crash": ("the server process dies during a call", {
        "stdio": "closed, dead", "http-modern": "transport, alive", "http-legacy": "transport, alive",
        "sse": "closed, dead", "ws": "closed, dead"}),
    "hang": ("the server never answers (call time-out 0.5 s)", {
        "stdio": "timeout, alive", "http-modern": "timeout, alive", "http-legacy": "timeout, alive",
        "sse": "timeout, alive", "ws": "timeout, alive"}),
    "garbage": ("a message that is not JSON, then (where there is a then) the answer", {
        "stdio": "ok, alive", "http-modern": "protocol, alive", "http-legacy": "protocol, alive",
        "sse": "ok, alive", "ws": "ok, alive"}),
    "partial line": ("half a message, then the end (of the process or the body)", {
        "stdio": "closed, dead", "http-modern": "protocol, alive", "http-legacy": "protocol, alive",
        "sse": "protocol, alive", "ws": "protocol, dead"}),
    "oversize": (f"an answer of 2 MiB over a cap of {CAP >> 20} MiB", {
        "stdio": "transport, dead", "http-modern": "transport, alive", "http-legacy": "transport, alive",
        "sse": "transport, dead", "ws": "transport, dead"}),
    "invalid UTF-8": ("an answer with a byte 0xFF inside a string", {
        "stdio": "protocol, alive", "http-modern": "protocol, alive", "http-legacy": "protocol, alive",
        "sse": "transport, dead", "ws": "transport, dead"}),
    "deep nesting": ("an answer nested 100,000 arrays deep", {
        "stdio": "protocol, alive", "http-modern": "protocol, alive", "http-legacy": "protocol, alive",
        "sse": "protocol, alive", "ws": "protocol, alive"}),
    "wrong id": ("the answer under another id (call time-out 1 s)", {
        "stdio": "timeout, alive", "http-modern": "protocol, alive", "http-legacy": "protocol, alive",
        "sse": "timeout, alive", "ws": "timeout, alive"}),
    "duplicate id": ("the answer twice under the call's id", {
        "stdio": "ok, alive", "http-modern": "ok, alive", "http-legacy": "ok, alive",
        "sse": "ok, alive", "ws": "ok, alive"}),
    "5xx": ("HTTP 500 to a call", {"http-modern": "transport, alive", "http-legacy": "transport, alive"}),
    "4xx": ("HTTP 422 to a call", {"http-modern": "transport, alive", "http-legacy": "transport, alive"}),
    "reset mid-body": ("a TCP reset 10 bytes into a 1,000-byte body", {
        "http-modern": "transport, alive", "http-legacy": "transport, alive"}),
    "dropped stream": ("the stream carrying the answer ends before it", {
        "stdio": "closed, dead", "http-modern": "transport, alive", "http-legacy": "transport, alive",
        "sse": "closed, dead"}),
    "404 stale session": ("the server forgot the session and answers 404", {
        "http-legacy": "ok, alive", "sse": "transport, dead"}),
    "400 stale session": ("the server forgot the session and answers 400 (the reference SDKs)", {
        "http-legacy": "ok, alive"}),
    "401": ("HTTP 401 with a Bearer challenge at connect", {
        "http-modern": "needs_auth, dead", "http-legacy": "needs_auth, dead", "sse": "needs_auth, dead"}),
    "403": ("HTTP 403 insufficient_scope to a call", {
        "http-modern": "needs_auth, alive", "http-legacy": "needs_auth, alive"}),
    "slow loris": ("the answer one piece every 100 ms, never done in time (call time-out 1 s)", {
        "stdio": "timeout, alive", "http-modern": "timeout, alive", "http-legacy": "timeout, alive",
        "ws": "timeout, alive"}),
    "cross-origin redirect": ("a 307 to another origin, with a credential header configured", {
        "http-modern": "transport, dead", "http-legacy": "transport, dead", "sse": "transport, dead"}),
    "endless line": ("one line (an SSE data line, a stdio line) that never ends", {
        "stdio": "transport, dead", "http-modern": "transport, alive", "http-legacy": "transport, alive",
        "sse": "transport, dead"}),
}


def markdown() -> str:
    """The table of RELIABILITY.md."""
    head = "| fault | what the peer does | " + " | ".join(TRANSPORT_TITLES[t] for t in TRANSPORTS) + " |"
    rule = "|" + "---|" * (2 + len(TRANSPORTS))
    rows = [head, rule]
    for fault, (what, cells) in MATRIX.items():
        rows.append(f"| {fault} | {what} | " + " | ".join(cells.get(t, "n/a") for t in TRANSPORTS) + " |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
    sys.exit(0)

import pytest  # noqa: E402  (the table above prints without it)
from conftest import pids_with  # noqa: E402


# --- the peers -------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port




class Listener:
    """A test server process that prints "listening <port>"; restartable on its port."""

    def __init__(self, argv: Callable[[int], List[str]]) -> None:
        self.argv = argv
        self.port = free_port()
        self.proc: Optional[subprocess.Popen[str]] = None
        self.start()

    def start(self) -> None:
        for _ in range(100):
            self.proc = subprocess.Popen(self.argv(self.port), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         text=True, start_new_session=True)
            assert self.proc.stdout is not None
            if self.proc.stdout.readline().startswith("listening"):
                return
            self.proc.wait()
            time.sleep(0.1)
        raise RuntimeError(f"{self.argv(self.port)} did not start")

    def stop(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None


class Peers:
    """The servers of the matrix: one HTTP fault server (Streamable HTTP in both eras and
    HTTP+SSE) and one WebSocket bridge whose every connection starts a fault server carrying
    the bridge's marker."""

    def __init__(self) -> None:
        self.http = Listener(lambda port: [sys.executable, str(HTTP_FAULT_SERVER), str(port)])
        self.ws_marker = f"mcplug-matrix-ws-{uuid.uuid4().hex}"
        self.ws = Listener(lambda port: [sys.executable, str(WS_BRIDGE), str(port), sys.executable, str(FAULT_SERVER),
                                         "normal", self.ws_marker])

    def entry(self, transport: str, marker: str, path: Optional[str] = None) -> Dict[str, Any]:
        # Every cell its own URL: a 401 or 403 marks a URL as needing authorization for a while.
        base = f"http://127.0.0.1:{self.http.port}/p/{marker}"
        if transport == "stdio":
            return {"command": sys.executable, "args": [str(FAULT_SERVER), "normal", marker]}
        if transport == "ws":
            return {"type": "ws", "url": f"ws://127.0.0.1:{self.ws.port}/"}
        if transport == "sse":
            return {"type": "sse", "url": base + (path or "/sse")}
        return {"type": "http", "url": base + (path or ("/modern" if transport == "http-modern" else "/mcp"))}

    def bridge_children(self) -> List[int]:
        """The fault servers the bridge runs (its own arguments carry the marker too)."""
        bridge = self.ws.proc.pid if self.ws.proc else None
        return [pid for pid in pids_with(self.ws_marker) if pid != bridge]

    def close(self) -> None:
        self.http.stop()
        self.ws.stop()


# --- one cell ---------------------------------------------------------------------------------

def outcome_of(fn: Callable[[], Any]) -> Tuple[str, Any]:
    """("ok", result) or (error kind, error); anything but an McpError fails the cell."""
    import mcplug

    try:
        return "ok", fn()
    except mcplug.McpError as e:
        return e.kind, e


def text(result: Any) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []))


class Cell:
    def __init__(self, peers: Peers, transport: str) -> None:
        self.peers = peers
        self.transport = transport
        self.marker = f"mcplug-matrix-{uuid.uuid4().hex}"
        self.client: Any = None
        self.remote = transport.startswith("http") or transport == "sse"

    def connect(self, path: Optional[str] = None, **extra: Any) -> None:
        import mcplug

        entry = self.peers.entry(self.transport, self.marker, path)
        entry.update(extra)
        self.client = mcplug.Client.connect(entry, connect_timeout=15, options={"max_message_bytes": CAP})

    def call(self, tool: str, arguments: Optional[Dict[str, Any]] = None, timeout: float = 10.0) -> Tuple[str, Any]:
        return outcome_of(lambda: self.client.call_tool(tool, arguments or {}, timeout=timeout))

    def raw(self, data: bytes, timeout: float = 10.0) -> Tuple[str, Any]:
        return self.call("raw", {"b64": base64.b64encode(data).decode()}, timeout)

    def hang_tool(self, ms: int) -> Tuple[str, Dict[str, Any]]:
        return ("slow", {"ms": ms}) if self.remote else ("sleep", {"ms": ms})

    def after(self) -> str:
        """Whether the connection lives: the next call is answered (alive) or fails at once (dead)."""
        kind, result = self.call("echo", {"message": "after"}, timeout=10)
        if kind == "ok" and text(result) == "Echo: after":
            return "alive"
        if kind in ("closed", "transport"):
            return "dead"
        return f"after-{kind}"


def fault_crash(c: Cell) -> str:
    if not c.remote:
        return c.call("crash")[0]
    got: List[str] = []
    t = threading.Thread(target=lambda: got.append(c.call("slow", {"ms": 5000})[0]))
    t.start()
    time.sleep(0.3)
    c.peers.http.stop()
    t.join(CELL_LIMIT_S)
    c.peers.http.start()
    return got[0] if got else "no answer"


def fault_hang(c: Cell) -> str:
    tool, args = c.hang_tool(60_000)
    return c.call(tool, args, timeout=0.5)[0]


def fault_garbage(c: Cell) -> str:
    if c.transport == "sse":
        return c.raw(b"this is not json\n\nevent: message\ndata: " + ANSWER)[0]
    if c.remote:
        return c.raw(b"this is not json")[0]
    kind, result = c.raw(b"this is not json\n" + ANSWER)
    return kind if kind != "ok" or text(result) == "fine" else "wrong"


def fault_partial(c: Cell) -> str:
    if c.remote:
        return c.raw(ANSWER[: len(ANSWER) // 2], timeout=1)[0]
    return c.call("half")[0]


def fault_oversize(c: Cell) -> str:
    return c.call("big", {"bytes": 2 << 20})[0]


def fault_utf8(c: Cell) -> str:
    return c.raw(ANSWER.replace(b"fine", b"bad \xff byte"), timeout=2)[0]


def fault_deep(c: Cell) -> str:
    depth = 100_000
    return c.raw(ANSWER.replace(b'"result":{', b'"result":{"deep":' + b"[" * depth + b"]" * depth + b","), timeout=2)[0]


def fault_wrong_id(c: Cell) -> str:
    return c.raw(ANSWER.replace(b"@ID@", b"987654321"), timeout=1)[0]


def fault_duplicate(c: Cell) -> str:
    if c.transport.startswith("http"):
        kind, result = c.call("dup")
        return kind if kind != "ok" or text(result) == "first" else "wrong"
    sep = b"\n\nevent: message\ndata: " if c.transport == "sse" else b"\n"
    kind, result = c.raw(ANSWER + sep + ANSWER.replace(b"fine", b"second"))
    return kind if kind != "ok" or text(result) == "fine" else "wrong"


def fault_5xx(c: Cell) -> str:
    return c.call("fail500")[0]


def fault_4xx(c: Cell) -> str:
    return c.call("status", {"code": 422})[0]


def fault_reset(c: Cell) -> str:
    return c.call("reset")[0]


def fault_dropped(c: Cell) -> str:
    if c.transport == "stdio":
        return c.call("close_stdout")[0]
    if c.transport == "sse":
        return c.call("drop")[0]
    return c.call("cut_noid")[0]


def fault_stale_404(c: Cell) -> str:
    kind, _ = c.call("restart")
    if kind != "ok":
        return f"restart-{kind}"
    kind, result = c.call("echo", {"message": "again"})
    return kind if kind != "ok" or text(result) == "Echo: again" else "wrong"


def fault_401(c: Cell) -> str:
    return "needs_auth" if c.client is None else "connected"


def fault_403(c: Cell) -> str:
    return c.call("status", {"code": 403, "challenge": 'Bearer error="insufficient_scope", scope="admin"'})[0]


def fault_loris(c: Cell) -> str:
    if c.remote:
        return c.call("loris", timeout=1)[0]
    return c.call("dribble", {"message": "slowly", "pieces": 40, "pause_ms": 100}, timeout=1)[0]


def fault_redirect(c: Cell) -> str:
    return "connected" if c.client is not None else "refused"


def fault_endless(c: Cell) -> str:
    return c.call("endless_line")[0]


FAULTS: Dict[str, Callable[[Cell], str]] = {
    "crash": fault_crash, "hang": fault_hang, "garbage": fault_garbage, "partial line": fault_partial,
    "oversize": fault_oversize, "invalid UTF-8": fault_utf8, "deep nesting": fault_deep, "wrong id": fault_wrong_id,
    "duplicate id": fault_duplicate, "5xx": fault_5xx, "4xx": fault_4xx, "reset mid-body": fault_reset,
    "dropped stream": fault_dropped, "404 stale session": fault_stale_404, "400 stale session": fault_stale_404,
    "401": fault_401, "403": fault_403, "slow loris": fault_loris, "cross-origin redirect": fault_redirect,
    "endless line": fault_endless,
}
#: Cells whose connection is the fault: the connect's own error kind is the call's outcome.
CONNECT_FAULTS = {"401": "/locked", "cross-origin redirect": "/xredirect"}


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def run_cell(peers: Peers, fault: str, transport: str) -> Tuple[str, str]:
    """(what the cell observed, the marker of its stdio server)."""
    cell = Cell(peers, transport)
    return observe(cell, fault, transport), cell.marker


def observe(cell: Cell, fault: str, transport: str) -> str:
    import mcplug

    peers = cell.peers
    if fault in CONNECT_FAULTS:
        path = CONNECT_FAULTS[fault]
        kind, error = outcome_of(lambda: cell.connect(path, headers={"X-Api-Key": "secret-key-never-sent"}))
        why = {"401": "authoriz", "cross-origin redirect": "redirect"}[fault]
        if kind != "ok" and why not in str(error).lower():
            return f"{kind} ({error})"
        return f"{kind}, dead"
    path = "/mcp400" if fault == "400 stale session" else None
    cell.connect(path)
    try:
        bystander: List[str] = []
        tool, args = cell.hang_tool(300)
        by = threading.Thread(target=lambda: bystander.append(cell.call(tool, args, timeout=10)[0]))
        by.start()
        time.sleep(0.05)
        got = FAULTS[fault](cell)
        by.join(CELL_LIMIT_S)
        assert not by.is_alive(), f"{fault} on {transport}: the bystander call was never answered"
        assert bystander and bystander[0] in ("ok", "closed", "transport", "timeout"), bystander
        return f"{got}, {cell.after()}"
    finally:
        cell.client.close()
        assert isinstance(cell.client, mcplug.Client)


@pytest.fixture(scope="module")
def peers() -> Iterator[Peers]:
    import mcplug

    p = Peers()
    # The library's lasting fds (runtime, /dev/null for children) come with a first connection.
    with mcplug.Client.connect(p.entry("stdio", "mcplug-matrix-warm")) as warm:
        warm.call_tool("echo", {"message": "warm"})
    yield p
    p.close()


CELLS = [(fault, t) for fault, (_, cells) in MATRIX.items() for t in TRANSPORTS if t in cells]


@pytest.mark.parametrize("fault,transport", CELLS, ids=[f"{f}-{t}".replace(" ", "_") for f, t in CELLS])
def test_cell(peers: Peers, fault: str, transport: str) -> None:
    gc.collect()
    fds = fd_count()
    rss = rss_mib()
    started = time.monotonic()
    got, marker = run_cell(peers, fault, transport)
    elapsed = time.monotonic() - started
    expected = MATRIX[fault][1][transport]
    assert got == expected, f"{fault} on {transport}: got {got!r}, the matrix says {expected!r}"
    assert elapsed < CELL_LIMIT_S, f"{fault} on {transport} took {elapsed:.1f} s"
    deadline = time.monotonic() + 5
    while (pids_with(marker) or peers.bridge_children() or fd_count() > fds) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids_with(marker) == [], f"{fault} on {transport}: the server process outlived close()"
    assert peers.bridge_children() == [], f"{fault} on {transport}: the bridge's server outlived the connection"
    assert fd_count() <= fds, f"{fault} on {transport}: {fd_count() - fds} fds more than before"
    grown = rss_mib() - rss
    assert grown < RSS_LIMIT_MIB, f"{fault} on {transport}: RSS grew {grown:.0f} MiB"


def test_reliability_md_shows_the_matrix() -> None:
    doc = (REPO / "RELIABILITY.md").read_text()
    assert markdown() in doc, "RELIABILITY.md's table differs from the matrix: run python3 tests/python/test_fault_matrix.py"

