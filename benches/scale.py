#!/usr/bin/env python3
"""Scale: one manager with many servers — 1, 10 and 100 stdio servers, then 1, 10, 100 and 1,000
Streamable HTTP servers (one local server process answering on 1,000 paths, each path its own
server to the manager). For each count it prints the connect time of the whole batch, the RSS
and fds the connections added (per connection), and the CPU of one pool call
(``mcp__<server>__echo``) with that many servers and their tools in the pool, as a ratio to the
one-server figure of the same run.

    python3 benches/scale.py [--calls 3000] [--stdio 1,10,100] [--http 1,10,100,1000]

Uses the release library (``cargo build --release``) unless MCPLUG_LIBRARY names another. The
CPU of a call is this process's (the Python caller and the library's threads; the servers are
other processes); while the calls run the host is pinned to one CPU (the servers, started
before, are not), so that a call costs what it costs and not what the scheduler spreads.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bindings" / "python"))
os.environ.setdefault("MCPLUG_LIBRARY", str(REPO / "target" / "release" / "libmcplug.so"))
os.environ["XDG_STATE_HOME"] = str(REPO / "target" / "scale-state")

import mcplug  # noqa: E402
from hostinfo import fd_count, free_port, rss_kib  # noqa: E402

FAULT_SERVER = REPO / "tests" / "servers" / "fault_server.py"
HTTP_FAULT_SERVER = REPO / "tests" / "servers" / "http_fault_server.py"








def pin(cpus: Any) -> None:
    """Every thread of this process (the library's too) on ``cpus``."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass  # a thread that just ended


def measure(servers: Dict[str, Dict[str, Any]], target: str, calls: int, options: Dict[str, Any]) -> Dict[str, Any]:
    """Connects ``servers`` through one manager and calls ``target``'s echo ``calls`` times."""
    gc.collect()
    rss0, fds0 = rss_kib(), fd_count()
    manager = mcplug.Manager(options, handlers={"*": lambda event: None})
    try:
        t0, c0 = time.monotonic(), time.process_time()
        manager.connect({"mcpServers": servers})
        manager.wait(600)
        connect_s = time.monotonic() - t0
        connect_cpu_s = time.process_time() - c0
        status = manager.status()
        down = [n for n, s in status["servers"].items() if s["state"] != "connected"]
        if down:
            raise RuntimeError(f"{len(down)} servers not connected, e.g. {down[:3]}: {status['servers'][down[0]]}")
        gc.collect()
        rss1, fds1 = rss_kib(), fd_count()
        tool = f"mcp__{target}__echo"
        args = {"message": "scale"}
        for _ in range(200):  # warm: the pool's lookups, the connection's buffers
            manager.call_tool(tool, args)
        cpus = os.sched_getaffinity(0)
        if len(cpus) > 1:  # the calls only: the servers started unpinned
            pin({max(cpus)})
        try:
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for _ in range(calls):
                manager.call_tool(tool, args)
            cpu = (time.process_time() - cpu0) / calls
            wall = (time.perf_counter() - wall0) / calls
        finally:
            pin(cpus)
        n = len(servers)
        return {
            "servers": n,
            "tools": status["tools"],
            "connect_s": round(connect_s, 3),
            "connect_cpu_s": round(connect_cpu_s, 3),
            "rss_kib_per_server": round((rss1 - rss0) / n, 1),
            "fds_per_server": round((fds1 - fds0) / n, 2),
            "cpu_us_per_call": round(cpu * 1e6, 1),
            "wall_us_per_call": round(wall * 1e6, 1),
        }
    finally:
        manager.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--stdio", default="1,10,100")
    ap.add_argument("--http", default="1,10,100,1000")
    args = ap.parse_args()
    results: Dict[str, List[Dict[str, Any]]] = {"stdio": [], "http": []}
    marker = f"mcplug-scale-{os.getpid()}"
    local = {"local_concurrency": 20}

    with mcplug.Manager() as warm:  # the library's lasting fds and threads, before any baseline
        warm.connect({"mcpServers": {"warm": {"command": sys.executable, "args": [str(FAULT_SERVER), "normal", marker]}}})
        warm.wait(30)

    for n in [int(x) for x in args.stdio.split(",") if x]:
        servers = {f"s{i:04d}": {"command": sys.executable, "args": [str(FAULT_SERVER), "normal", marker]}
                   for i in range(n)}
        results["stdio"].append(measure(servers, "s0000", args.calls, local))
        print(json.dumps({"stdio": results["stdio"][-1]}), flush=True)

    port = free_port()
    http = subprocess.Popen([sys.executable, str(HTTP_FAULT_SERVER), str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        assert http.stdout is not None and http.stdout.readline().startswith("listening")
        for n in [int(x) for x in args.http.split(",") if x]:
            servers = {f"h{i:04d}": {"type": "http", "url": f"http://127.0.0.1:{port}/p/{i}/modern"}
                       for i in range(n)}
            results["http"].append(measure(servers, "h0000", args.calls, {"remote_concurrency": 20}))
            print(json.dumps({"http": results["http"][-1]}), flush=True)
    finally:
        os.killpg(http.pid, signal.SIGKILL)
        http.wait()

    print()
    print("| transport | servers | tools in the pool | connect (s) | host CPU of the connect (s) | RSS per server (KiB) "
          "| fds per server | CPU per pool call (us) | vs 1 server |")
    print("|---|---|---|---|---|---|---|---|---|")
    for transport, rows in results.items():
        for r in rows:
            base = rows[0]["cpu_us_per_call"]
            print(f"| {transport} | {r['servers']} | {r['tools']} | {r['connect_s']} | {r['connect_cpu_s']} "
                  f"| {r['rss_kib_per_server']} "
                  f"| {r['fds_per_server']} | {r['cpu_us_per_call']} | {r['cpu_us_per_call'] / base:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
