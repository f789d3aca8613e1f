#!/usr/bin/env python3
"""A call through a gateway (stdio upstream -> Streamable HTTP) beside the same call made directly,
in one run: `mcplug serve --http` against the bridges people run today (supergateway, mcp-proxy
from npm, mcp-proxy from PyPI). One sequential client (Python's http.client over one keep-alive
connection, initialize then N `tools/call echo`), the same stdio upstream behind each
(benches/gateway/echo_stdio.py). Printed per gateway: p50 and p99 latency of a call, and the
gateway process's own CPU per call (its utime + stime from /proc, the upstream excluded), and
each figure's ratio to mcplug's. Run it pinned to one CPU so that CPU time is comparable:

    taskset -c 0 python3 benches/gateway/bench.py [N]

Needs: target/release/mcplug; supergateway and mcp-proxy (npm) and mcp-proxy (PyPI), found in
$GATEWAY_BENCH_DEPS (default /tmp/gwb: npm/node_modules/.bin and venv/bin); a gateway that is
missing is left out of the table, named. Install them there with:

    mkdir -p /tmp/gwb/npm && cd /tmp/gwb/npm && echo '{"private":true}' > package.json &&
      npm install supergateway@4.0.0 mcp-proxy@6.7.19
    python3 -m venv /tmp/gwb/venv && /tmp/gwb/venv/bin/pip install mcp-proxy==0.13.0

supergateway runs with --stateful (one upstream process for the session, as the others; without
it, it starts an upstream per request).
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
ECHO = ROOT / "benches" / "gateway" / "echo_stdio.py"
DEPS = Path(os.environ.get("GATEWAY_BENCH_DEPS", "/tmp/gwb"))
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


class HttpClient:
    """One keep-alive connection; answers as JSON or as an SSE stream."""

    def __init__(self, port: int, path: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.path = path
        self.session: Optional[str] = None
        self.next_id = 0

    def post(self, message: Dict[str, object]) -> Optional[Dict[str, object]]:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                   "mcp-protocol-version": "2025-06-18"}
        if self.session:
            headers["mcp-session-id"] = self.session
        self.conn.request("POST", self.path, body=json.dumps(message), headers=headers)
        r = self.conn.getresponse()
        session = r.getheader("mcp-session-id")
        if session:
            self.session = session
        body = r.read()
        if r.status >= 300:
            raise RuntimeError(f"HTTP {r.status}: {body[:300]!r}")
        if "id" not in message:
            return None
        if (r.getheader("content-type") or "").startswith("text/event-stream"):
            for line in body.decode().splitlines():
                if line.startswith("data:"):
                    data = json.loads(line[5:].strip() or "null")
                    if isinstance(data, dict) and data.get("id") == message["id"]:
                        return data
            raise RuntimeError(f"no answer in the stream: {body[:300]!r}")
        answer: Dict[str, object] = json.loads(body)
        return answer

    def request(self, method: str, params: Dict[str, object]) -> Dict[str, object]:
        self.next_id += 1
        answer = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert answer is not None
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer


def wait_listening(port: int, child: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"{what} exited with {child.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port}")


def measure(name: str, cmd: List[str], port: int, path: str, n: int) -> Tuple[float, float, float]:
    child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        wait_listening(port, child, name)
        c = HttpClient(port, path)
        c.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "bench", "version": "1"}})
        c.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools = c.request("tools/list", {})["result"]["tools"]  # type: ignore[index]
        tool = next(t["name"] for t in tools if t["name"].endswith("echo"))  # type: ignore[index]
        for _ in range(max(50, n // 10)):  # warm-up
            c.request("tools/call", {"name": tool, "arguments": {"text": "warm"}})
        cpu0 = cpu_seconds(child.pid)
        times = []
        for i in range(n):
            t0 = time.perf_counter()
            out = c.request("tools/call", {"name": tool, "arguments": {"text": f"call {i}"}})
            times.append(time.perf_counter() - t0)
            assert out["result"]["content"][0]["text"] == f"call {i}", out  # type: ignore[index]
        cpu = (cpu_seconds(child.pid) - cpu0) / n
        times.sort()
        return statistics.median(times), times[int(len(times) * 0.99) - 1], cpu
    finally:
        os.killpg(child.pid, 15)
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, 9)
            child.wait()


def direct(n: int) -> float:
    """p50 of the same call made straight over stdio (a raw client, no gateway)."""
    child = subprocess.Popen([sys.executable, str(ECHO)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin and child.stdout

    def ask(i: int, method: str, params: Dict[str, object]) -> Dict[str, object]:
        child.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        answer: Dict[str, object] = json.loads(child.stdout.readline())  # type: ignore[union-attr]
        return answer

    ask(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}})
    times = []
    for i in range(1, n + 1):
        t0 = time.perf_counter()
        ask(i, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
        times.append(time.perf_counter() - t0)
    child.stdin.close()
    child.wait()
    return statistics.median(times)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    upstream = [sys.executable, str(ECHO)]
    mcplug = ROOT / "target" / "release" / "mcplug"
    config = Path(tempfile.mkdtemp()) / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"echo": {"command": upstream[0], "args": upstream[1:]}}}))
    npm_bin, venv_bin = DEPS / "npm" / "node_modules" / ".bin", DEPS / "venv" / "bin"
    gateways = []
    p = free_port()
    gateways.append(("mcplug serve --http", [str(mcplug), "serve", "--strict-mcp-config", "--mcp-config", str(config),
                                             "--http", f"127.0.0.1:{p}"], p, "/mcp", mcplug.exists()))
    p = free_port()
    gateways.append(("supergateway 4.0.0", [str(npm_bin / "supergateway"), "--stdio", " ".join(upstream),
                                            "--outputTransport", "streamableHttp", "--stateful", "--port", str(p)],
                     p, "/mcp", (npm_bin / "supergateway").exists()))
    p = free_port()
    gateways.append(("mcp-proxy 6.7.19 (npm)", [str(npm_bin / "mcp-proxy"), "--port", str(p), "--", *upstream],
                     p, "/mcp", (npm_bin / "mcp-proxy").exists()))
    p = free_port()
    gateways.append(("mcp-proxy 0.13.0 (PyPI)", [str(venv_bin / "mcp-proxy"), "--port", str(p), "--host", "127.0.0.1",
                                                 *upstream], p, "/mcp", (venv_bin / "mcp-proxy").exists()))
    rows = []
    for name, cmd, port, path, present in gateways:
        if not present:
            print(f"# {name}: not installed, left out", file=sys.stderr)
            continue
        try:
            rows.append((name, *measure(name, cmd, port, path, n)))
        except Exception as e:  # noqa: BLE001 - a gateway that fails is reported, not fatal
            print(f"# {name}: failed: {e}", file=sys.stderr)
    base = direct(n)
    ours = next((r for r in rows if r[0].startswith("mcplug")), None)
    print(f"calls: {n} sequential tools/call echo per gateway, after a warm-up; CPU: the gateway process only")
    print(f"{'gateway':<26} {'p50 µs':>9} {'p99 µs':>9} {'CPU µs/call':>12} {'p50 ÷ ours':>11} {'CPU ÷ ours':>11}")
    for name, p50, p99, cpu in rows:
        r50 = f"{p50 / ours[1]:.1f}" if ours else "-"
        rcpu = f"{cpu / ours[3]:.1f}" if ours and ours[3] > 0 else "-"
        print(f"{name:<26} {p50 * 1e6:>9.0f} {p99 * 1e6:>9.0f} {cpu * 1e6:>12.0f} {r50:>11} {rcpu:>11}")
    print(f"{'direct stdio (no gateway)':<26} {base * 1e6:>9.0f}")


if __name__ == "__main__":
    main()
