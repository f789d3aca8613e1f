"""Issue 32, item 10: a Python host that forks after mcplug started (``os.fork``,
``multiprocessing``'s "fork" start method, gunicorn's preload). The child gets ClosedError
(reason "forked") at once from every call, its close() returns quietly, and the parent's
connections, servers and close are untouched. Before, the child's call read the parent's
server's answer off the shared pipe, and its close (an interpreter exit) hung.

The forking host runs in a process of its own (tests/python/fork_host.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict


FORK_HOST = Path(__file__).resolve().parent / "fork_host.py"


def run(scenario: str) -> Dict[str, Any]:
    done = subprocess.run([sys.executable, str(FORK_HOST), scenario], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, f"fork_host.py {scenario} failed:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def refused_as_forked(seen: Dict[str, Any], parent_pid: Any = None) -> None:
    assert seen.get("kind") == "closed", seen
    assert seen.get("reason") == "forked", seen
    assert "forked from process" in seen["message"] and "spawn" in seen["message"], seen
    if parent_pid is not None:
        assert seen.get("parent_pid") == parent_pid, seen
    assert seen["s"] < 2.0, seen


def test_os_fork_child_is_refused_and_the_parent_is_untouched() -> None:
    report = run("os-fork")
    child = report["child"]
    assert report["child_exit"] == 0, report
    assert child is not None, report
    for what in ("call", "manager_call", "new_client", "new_manager"):
        refused_as_forked(child[what], report["parent_pid"])
    assert child["close_s"] < 2.0, child
    assert child["warnings"] == [], "the child's close() is quiet"
    assert report["parent_echo"] == "Echo: parent after"
    assert report["parent_manager"] == "Echo: manager after"
    assert report["parent_close_s"] < 10.0, report


def test_multiprocessing_fork_worker_is_refused_and_a_spawn_worker_connects() -> None:
    report = run("multiprocessing")
    refused_as_forked(report["fork_worker"])
    assert report["fork_exit"] == 0, report
    assert report["spawn_worker"] == {"echo": "Echo: from a spawn worker"}, report
    assert report["spawn_exit"] == 0, report
    assert report["parent_echo"] == "Echo: parent after"
