"""What the manager tests share: the configuration of one manager over many real servers, how to
find a managed server's process, and the host side a manager's handlers play (each call records
the server that asked)."""
from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from conftest import FAULT_SERVER, FaultFactory, alive, npm_server

#: The slow server sleeps this long before it execs the fault server.
SLOW_S = 3.0


def slow_entry() -> Dict[str, Any]:
    """A server slow to start: a shell that sleeps, then execs the fault server."""
    return {"command": "/bin/sh", "args": ["-c", f'sleep {SLOW_S}; exec "$1" "$2"', "sh", sys.executable, str(FAULT_SERVER)]}


def many_servers(
    everything_server: Dict[str, Any], http_url: str, fault: FaultFactory, tmp: Path
) -> Tuple[Dict[str, Any], Dict[str, Any], Path, Path]:
    """The configuration: server-everything (stdio and Streamable HTTP), server-filesystem over
    ``tmp/files`` (which holds hello.txt), server-memory (its file ``tmp/memory.jsonl``), the
    fault server, one that cannot start and one slow to start — the slow one first, so it holds a
    connection slot from the start. Returns the config, the fault entry, the files directory
    and the memory file."""
    files = tmp / "files"
    files.mkdir()
    (files / "hello.txt").write_text("hello from the manager test\n")
    memory = tmp / "memory.jsonl"
    fault_entry = fault("normal")
    everything = {k: v for k, v in everything_server.items() if k != "name"}
    config = {
        "mcpServers": {
            "slow": slow_entry(),
            "fault": {k: v for k, v in fault_entry.items() if k != "name"},
            "everything": everything,
            "everything-http": {"type": "http", "url": http_url},
            "fs": {"command": npm_server("mcp-server-filesystem"), "args": [str(files)]},
            "memory": {"command": npm_server("mcp-server-memory"), "env": {"MEMORY_FILE_PATH": str(memory)}},
            "broken": {"command": "/nonexistent/mcp-server"},
        }
    }
    return config, fault_entry, files, memory


def pids_with_env(assignment: str) -> List[int]:
    """Live processes whose environment holds ``assignment`` (``NAME=value``)."""
    found = []
    needle = assignment.encode() + b"\0"
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if (env.startswith(needle) or b"\0" + needle in env) and alive(int(entry)):
            found.append(int(entry))
    return found


def sampling_answer(server: Optional[str]) -> Dict[str, Any]:
    return {
        "role": "assistant",
        "content": {"type": "text", "text": f"sampled for {server}"},
        "model": "py-manager-host",
        "stopReason": "endTurn",
    }


class ManagerHost:
    """The host behind a manager's handlers: records (method, server, params) of every request
    and (server, params) of every log message; answers roots with the files directory."""

    def __init__(self, root: Path) -> None:
        self.lock = threading.Lock()
        self.root = root
        self.requests: List[Tuple[str, Optional[str], Dict[str, Any]]] = []
        self.logs: List[Tuple[Optional[str], Dict[str, Any]]] = []

    def _record(self, method: str, server: Optional[str], params: Dict[str, Any]) -> None:
        with self.lock:
            self.requests.append((method, server, params))

    def sampling(self, params: Dict[str, Any], server: Optional[str]) -> Dict[str, Any]:
        self._record("sampling/createMessage", server, params)
        return sampling_answer(server)

    def roots(self, params: Dict[str, Any], server: Optional[str]) -> Dict[str, Any]:
        self._record("roots/list", server, params)
        return {"roots": [{"uri": self.root.as_uri(), "name": f"root-for-{server}"}]}

    def on_log(self, params: Dict[str, Any], server: Optional[str]) -> None:
        with self.lock:
            self.logs.append((server, params))

    def handlers(self) -> Dict[str, Callable[..., Any]]:
        return {
            "sampling/createMessage": self.sampling,
            "roots/list": self.roots,
            "notifications/message": self.on_log,
        }

    def asked_by(self, method: str) -> List[Optional[str]]:
        with self.lock:
            return [server for m, server, _ in self.requests if m == method]

    def logged(self, server: str, needle: str) -> bool:
        with self.lock:
            return any(s == server and needle in json.dumps(p) for s, p in self.logs)


def ask_sampling_args() -> Dict[str, Any]:
    """The fault server's ``ask`` tool sending sampling/createMessage to the host."""
    return {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}, "wait_ms": 10000}


def texts(result: Dict[str, Any]) -> List[str]:
    return [c["text"] for c in result.get("content", []) if c.get("type") == "text"]
