#!/usr/bin/env python3
"""Soak: one manager, 20 servers (15 stdio, 5 Streamable HTTP in both eras), mixed calls from
several threads for an hour while servers are killed at random and the HTTP server restarts.

    python3 benches/soak.py [--seconds 3600] [--workers 4] [--seed N]

Every call must be answered or fail with an error kind (an ``mcplug.McpError``); a call that
raises anything else, returns the wrong content or outlives its time-out by more than
``--slack`` seconds is a defect. At the end every server must be connected again, and once the
manager is closed no server process may remain and the host's fd count must be back where it
started. Prints a progress line a minute and a JSON summary last; exits 1 on any defect.
Uses the release library (``cargo build --release``) unless MCPLUG_LIBRARY names another.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bindings" / "python"))
os.environ.setdefault("MCPLUG_LIBRARY", str(REPO / "target" / "release" / "libmcplug.so"))
os.environ["XDG_STATE_HOME"] = str(REPO / "target" / "soak-state")

import mcplug  # noqa: E402
from hostinfo import fd_count, free_port, pids_with, rss_kib  # noqa: E402

FAULT_SERVER = REPO / "tests" / "servers" / "fault_server.py"
HTTP_FAULT_SERVER = REPO / "tests" / "servers" / "http_fault_server.py"
#: The kinds a call may fail with while its server is killed, restarted or slow.
EXPECTED_KINDS = {"closed", "transport", "not_found", "timeout", "protocol", "rpc", "cancelled"}










class HttpServer:
    """The HTTP fault server on one port, restartable (a restart forgets every session)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: Optional[subprocess.Popen[str]] = None
        self.start()

    def start(self) -> None:
        for _ in range(100):
            self.proc = subprocess.Popen(
                [sys.executable, str(HTTP_FAULT_SERVER), str(self.port)],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
            )
            assert self.proc.stdout is not None
            if self.proc.stdout.readline().startswith("listening"):
                return
            self.proc.wait()
            time.sleep(0.1)  # the port is still held by the old one
        raise RuntimeError("the HTTP fault server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.outcomes: Dict[Tuple[str, str], int] = collections.Counter()
        self.defects: List[str] = []
        self.calls = 0
        self.slowest = 0.0

    def add(self, op: str, outcome: str, elapsed: float) -> None:
        with self.lock:
            self.outcomes[(op, outcome)] += 1
            self.calls += 1
            self.slowest = max(self.slowest, elapsed)

    def defect(self, text: str) -> None:
        with self.lock:
            if len(self.defects) < 200:
                self.defects.append(text)
            print("DEFECT:", text, file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3600)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--stdio", type=int, default=15)
    ap.add_argument("--kill-every", type=float, default=3.0, help="mean seconds between kills of a stdio server")
    ap.add_argument("--restart-every", type=float, default=60.0, help="seconds between restarts of the HTTP server")
    ap.add_argument("--slack", type=float, default=5.0, help="seconds a call may outlive its time-out")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    marker = f"mcplug-soak-{os.getpid()}"

    # The library's own lasting fds (its runtime, /dev/null for children) come with the first
    # manager that starts a server: one is made and closed before the baseline is taken.
    with mcplug.Manager() as warm:
        warm.connect({"mcpServers": {"warm": {"command": sys.executable, "args": [str(FAULT_SERVER), "normal", marker]}}})
        warm.wait(30)
    time.sleep(1.0)
    fds_before = fd_count()
    http = HttpServer(free_port())
    base = f"http://127.0.0.1:{http.port}"
    servers: Dict[str, Dict[str, Any]] = {}
    stdio_names = [f"s{i:02d}" for i in range(args.stdio)]
    for i, name in enumerate(stdio_names):
        servers[name] = {"command": sys.executable, "args": [str(FAULT_SERVER), "normal", f"{marker}-{i}"]}
    http_names = {"h0": "/mcp", "h1": "/mcp", "h2": "/mcp400", "h3": "/modern", "h4": "/modern"}
    for name, path in http_names.items():
        servers[name] = {"type": "http", "url": base + path}
    names = list(servers)

    states: Dict[str, int] = collections.Counter()

    def on_state(event: Dict[str, Any]) -> None:
        states[event.get("state", "?")] += 1

    options = {
        "local_concurrency": 8,
        "reconnect_initial_ms": 100,
        "reconnect_max_ms": 1000,
        "reconnect_attempts": 1_000_000,
    }
    manager = mcplug.Manager(options, handlers={"state": on_state, "*": lambda event: None})
    manager.connect({"mcpServers": servers})
    manager.wait(60)
    not_up = [n for n, s in manager.status()["servers"].items() if s["state"] != "connected"]
    if not_up:
        print(f"servers not connected at the start: {not_up}", file=sys.stderr)
        return 1

    tally = Tally()
    stop = threading.Event()
    kills = {"stdio": 0, "http_restarts": 0}

    def call(op: str, server: str, tool: str, arguments: Dict[str, Any], timeout: float, expect: Optional[str] = None,
             expect_kind: Optional[str] = None) -> None:
        started = time.monotonic()
        try:
            result = manager.call_tool(f"mcp__{server}__{tool}", arguments, timeout=timeout)
        except mcplug.McpError as e:
            elapsed = time.monotonic() - started
            tally.add(op, e.kind, elapsed)
            if e.kind not in EXPECTED_KINDS:
                tally.defect(f"{op} on {server}: unexpected kind {e.kind}: {e}")
        except Exception as e:  # noqa: BLE001 - anything but an McpError is the defect we look for
            elapsed = time.monotonic() - started
            tally.add(op, "exception", elapsed)
            tally.defect(f"{op} on {server}: {type(e).__name__}: {e}")
        else:
            elapsed = time.monotonic() - started
            text = "".join(c.get("text", "") for c in result.get("content", []) if isinstance(c, dict))
            if result.get("isError"):
                tally.add(op, "is_error", elapsed)
            elif expect is not None and text != expect:
                tally.add(op, "wrong", elapsed)
                tally.defect(f"{op} on {server}: expected {expect!r}, got {text[:200]!r}")
            else:
                tally.add(op, "ok", elapsed)
            if expect_kind is not None:
                tally.defect(f"{op} on {server}: expected a {expect_kind} error, got a result")
        if elapsed > timeout + args.slack:
            tally.defect(f"{op} on {server}: took {elapsed:.1f} s with a time-out of {timeout} s")

    def worker(seed: int) -> None:
        wrng = random.Random(seed)
        n = 0
        while not stop.is_set():
            n += 1
            server = wrng.choice(names)
            remote = server in http_names
            r = wrng.random()
            if r < 0.70:
                message = f"m{seed}-{n}"
                call("echo", server, "echo", {"message": message}, 10.0, expect="Echo: " + message)
            elif r < 0.80:
                ms = wrng.randint(10, 200)
                if remote:
                    call("slow", server, "slow", {"ms": ms}, 10.0, expect="slow done")
                else:
                    call("slow", server, "sleep", {"ms": ms}, 10.0, expect="slept")
            elif r < 0.85:
                if remote:
                    call("timeout", server, "slow", {"ms": 1500}, 0.2)
                else:
                    call("timeout", server, "sleep", {"ms": 1500}, 0.2)
            elif r < 0.90:
                size = wrng.randint(1, 60_000)
                call("big", server, "big", {"bytes": size}, 10.0, expect="x" * size)
            elif r < 0.998:
                started = time.monotonic()
                try:
                    listed = manager.list_tools(server)
                    tally.add("list_tools", "ok" if isinstance(listed.get("tools"), list) else "wrong", time.monotonic() - started)
                except mcplug.McpError as e:
                    tally.add("list_tools", e.kind, time.monotonic() - started)
                except Exception as e:  # noqa: BLE001
                    tally.add("list_tools", "exception", time.monotonic() - started)
                    tally.defect(f"list_tools {server}: {type(e).__name__}: {e}")
            elif not remote:
                call("crash", server, "crash", {}, 10.0)

    def killer() -> None:
        next_restart = time.monotonic() + args.restart_every
        while not stop.wait(rng.expovariate(1.0 / args.kill_every)):
            victim = rng.randrange(args.stdio)
            for pid in pids_with(f"{marker}-{victim}"):
                try:
                    os.kill(pid, signal.SIGKILL)
                    kills["stdio"] += 1
                except ProcessLookupError:
                    pass
            if time.monotonic() >= next_restart:
                http.restart()
                kills["http_restarts"] += 1
                next_restart = time.monotonic() + args.restart_every

    threads = [threading.Thread(target=worker, args=(seed + i,), daemon=True) for i in range(args.workers)]
    threads.append(threading.Thread(target=killer, daemon=True))
    started = time.monotonic()
    cpu0 = time.process_time()
    rss_start = rss_kib()
    for t in threads:
        t.start()
    deadline = started + args.seconds
    last_print = started
    print(f"soak: {len(names)} servers, {args.workers} workers, {args.seconds:.0f} s, seed {seed}", flush=True)
    rss_samples = []
    while time.monotonic() < deadline:
        time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
        now = time.monotonic()
        if now - last_print >= 60 or now >= deadline:
            last_print = now
            rss_samples.append(rss_kib())
            with tally.lock:
                ok = sum(v for (op, o), v in tally.outcomes.items() if o == "ok")
                calls = tally.calls
            print(f"  {now - started:6.0f} s  calls {calls}  ok {ok}  kills {kills['stdio']}  http restarts "
                  f"{kills['http_restarts']}  defects {len(tally.defects)}  rss {rss_samples[-1] // 1024} MiB  "
                  f"fds {fd_count()}", flush=True)
    stop.set()
    for t in threads:
        t.join(30)
        if t.is_alive():
            tally.defect(f"thread {t.name} did not stop within 30 s")
    elapsed = time.monotonic() - started
    cpu = time.process_time() - cpu0

    # Every server back: the manager reconnects them on its own.
    recovered_in = None
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60:
        down = [n for n, s in manager.status()["servers"].items() if s["state"] != "connected"]
        if not down:
            recovered_in = time.monotonic() - t0
            break
        time.sleep(0.2)
    if recovered_in is None:
        tally.defect(f"servers not connected 60 s after the end: {down}")
    # One more echo on every server: each answers.
    for name in names:
        call("final_echo", name, "echo", {"message": "final"}, 10.0, expect="Echo: final")
    rss_end = rss_kib()
    manager.close()
    left = [p for i in range(args.stdio) for p in pids_with(f"{marker}-{i}")]
    if left:
        tally.defect(f"server processes left after close: {left}")
    http.stop()
    t0 = time.monotonic()
    fds_after = fd_count()
    while fds_after > fds_before and time.monotonic() - t0 < 5:
        time.sleep(0.1)  # pipes the runtime's tasks still close after close() returned
        fds_after = fd_count()
    if fds_after > fds_before:
        tally.defect(f"fds: {fds_before} before, {fds_after} after close")

    outcomes: Dict[str, Dict[str, int]] = {}
    for (op, outcome), count in sorted(tally.outcomes.items()):
        outcomes.setdefault(op, {})[outcome] = count
    summary = {
        "seconds": round(elapsed),
        "seed": seed,
        "servers": len(names),
        "calls": tally.calls,
        "calls_per_s": round(tally.calls / elapsed, 1),
        "outcomes": outcomes,
        "stdio_kills": kills["stdio"],
        "http_restarts": kills["http_restarts"],
        "state_events": dict(states),
        "slowest_call_s": round(tally.slowest, 2),
        "recovered_in_s": None if recovered_in is None else round(recovered_in, 2),
        "host_cpu_s": round(cpu, 1),
        "rss_mib": {"start": rss_start // 1024, "end": rss_end // 1024,
                    "max": max(rss_samples + [rss_end]) // 1024},
        "fds": {"before": fds_before, "after": fds_after},
        "processes_left": len(left),
        "defects": tally.defects,
    }
    print(json.dumps(summary, indent=1))
    return 1 if tally.defects else 0


if __name__ == "__main__":
    sys.exit(main())
