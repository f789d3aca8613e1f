"""A host that forks after mcplug started (issue 32, item 10), run by test_regress_fork.py in a
process of its own (forking pytest itself would copy its threads). Prints one JSON object: what
each side saw.

    fork_host.py os-fork | multiprocessing
"""
from __future__ import annotations

import json
import logging
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bindings" / "python"))

import mcplug  # noqa: E402

FAULT_SERVER = REPO / "tests" / "servers" / "fault_server.py"


def entry(marker: str) -> Dict[str, Any]:
    return {"command": sys.executable, "args": [str(FAULT_SERVER), "normal", marker]}


def refusal(call: Any) -> Dict[str, Any]:
    """What a call gave: its error's kind, reason and time, or that it answered."""
    t0 = time.monotonic()
    try:
        call()
        return {"answered": True, "s": time.monotonic() - t0}
    except mcplug.McpError as e:
        data = e.data if isinstance(e.data, dict) else {}
        return {"kind": e.kind, "reason": data.get("reason"), "parent_pid": data.get("parent_pid"),
                "message": e.message, "s": time.monotonic() - t0}


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record.getMessage())


def echo(client: mcplug.Client, text: str) -> str:
    return client.call_tool("echo", {"message": text})["content"][0]["text"]


def os_fork(marker: str) -> Dict[str, Any]:
    client = mcplug.Client.connect(entry(marker))
    manager = mcplug.Manager()
    manager.connect({"mcpServers": {"f": entry(marker)}})
    manager.wait(20)
    report: Dict[str, Any] = {"parent_pid": os.getpid()}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, then leave the way a script does
        os.close(read)
        warnings = Warnings()
        logging.getLogger().addHandler(warnings)
        seen = {
            "call": refusal(lambda: echo(client, "from the child")),
            "manager_call": refusal(lambda: manager.call_tool("mcp__f__echo", {"message": "x"})),
            "new_client": refusal(lambda: mcplug.Client.connect(entry(marker))),
            "new_manager": refusal(lambda: mcplug.Manager()),
        }
        t0 = time.monotonic()
        client.close()
        manager.close()
        seen["close_s"] = time.monotonic() - t0
        seen["warnings"] = warnings.seen
        os.write(write, json.dumps(seen).encode())
        os.close(write)
        # A normal interpreter exit (atexit, finalizers), not os._exit: it must not hang either.
        sys.exit(0)
    os.close(write)
    deadline = time.monotonic() + 20
    status = None
    while time.monotonic() < deadline:
        got, st = os.waitpid(pid, os.WNOHANG)
        if got == pid:
            status = st
            break
        time.sleep(0.01)
    if status is None:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as f:
        child = f.read()
    report["child"] = json.loads(child) if child else None
    report["child_exit"] = os.waitstatus_to_exitcode(status) if status is not None else "hung"
    report["parent_echo"] = echo(client, "parent after")
    report["parent_manager"] = manager.call_tool("mcp__f__echo", {"message": "manager after"})["content"][0]["text"]
    t0 = time.monotonic()
    client.close()
    manager.close()
    report["parent_close_s"] = time.monotonic() - t0
    return report


def inherited_call(client: mcplug.Client, queue: Any) -> None:
    queue.put(refusal(lambda: echo(client, "from a fork worker")))


def own_client(marker: str, queue: Any) -> None:
    with mcplug.Client.connect(entry(marker)) as client:
        queue.put({"echo": echo(client, "from a spawn worker")})


def in_worker(method: str, target: Any, first: Any) -> Any:
    """Runs ``target(first, queue)`` in a multiprocessing worker started by ``method``; what it
    put on the queue and its exit code ("hung" if it did not exit within 20 s)."""
    context = multiprocessing.get_context(method)
    queue = context.Queue()
    worker = context.Process(target=target, args=(first, queue))
    worker.start()
    said = queue.get(timeout=40)
    worker.join(20)
    if worker.is_alive():
        worker.kill()
        return said, "hung"
    return said, worker.exitcode


def with_multiprocessing(marker: str) -> Dict[str, Any]:
    report: Dict[str, Any] = {}
    with mcplug.Client.connect(entry(marker)) as client:
        report["fork_worker"], report["fork_exit"] = in_worker("fork", inherited_call, client)
        report["spawn_worker"], report["spawn_exit"] = in_worker("spawn", own_client, marker)
        report["parent_echo"] = echo(client, "parent after")
    return report


if __name__ == "__main__":
    marker = f"mcplug-fork-{os.getpid()}"
    scenario = sys.argv[1]
    out = os_fork(marker) if scenario == "os-fork" else with_multiprocessing(marker)
    print(json.dumps(out), flush=True)
