"""mcplug.Manager against real servers: one manager over server-everything (stdio and Streamable
HTTP), server-filesystem, server-memory, the fault server, one that cannot start and one slow to
start. Shown through Python: the states as events, the pool's names, every call routed to its
server, the slow server delaying nobody, handlers called with (params, server), a killed server
failing, reconnecting and its tools coming back, set_enabled and reconnect, 50 stdio servers
connected 3 at a time, host (in-process) servers, resources, prompts and search across servers,
and bad input named."""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest

import mcplug
from conftest import FaultFactory, alive, pids_with, text_of, wait_until
from managing import SLOW_S, ManagerHost, ask_sampling_args, many_servers, pids_with_env, texts


class Events:
    """Pulls a manager's events, keeping every one seen (for the failure messages)."""

    def __init__(self, m: mcplug.Manager) -> None:
        self.m = m
        self.seen: List[Dict[str, Any]] = []

    def wait(self, predicate: Callable[[Dict[str, Any]], bool], timeout: float, what: str) -> Dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            event = self.m.next_event(max(0.0, left)) if left > 0 else None
            if event is None:
                recent = [json.dumps(e)[:160] for e in self.seen[-12:]]
                raise AssertionError(f"no event {what} within {timeout} s; the last events:\n" + "\n".join(recent))
            self.seen.append(event)
            if predicate(event):
                return event

    def state(self, server: str, state: str, timeout: float = 20, **extra: Any) -> Dict[str, Any]:
        def match(e: Dict[str, Any]) -> bool:
            return (
                e.get("type") == "state" and e.get("server") == server and e.get("state") == state
                and all(e.get(k) == v for k, v in extra.items())
            )

        return self.wait(match, timeout, f"state {server} -> {state} {extra or ''}")


def states(status: Dict[str, Any]) -> Dict[str, str]:
    return {name: s["state"] for name, s in status["servers"].items()}


def test_one_manager_over_many_servers(everything_server: Dict[str, Any], everything_http: str, fault: FaultFactory, tmp_path: Path) -> None:
    config, fault_entry, files, memory_file = many_servers(everything_server, everything_http, fault, tmp_path)
    host = ManagerHost(files)
    with mcplug.Manager({"reconnect_initial_ms": 100}, handlers=host.handlers()) as m:
        events = Events(m)
        t0 = time.monotonic()
        status = m.connect(config)
        took = time.monotonic() - t0
        assert took < 1.0, f"connect returns at once, it took {took:.2f} s"
        assert list(status["servers"]) == list(config["mcpServers"]), "servers in configuration order"
        assert set(states(status).values()) == {"pending"}, status

        # The fault server (in a slot beside the slow one) connects while the slow one sleeps.
        connected = events.state("fault", "connected")
        assert "mcp__fault__echo" in connected["tools"], connected
        assert time.monotonic() - t0 < SLOW_S, "the fault server did not wait for the slow one"
        assert states(m.status())["slow"] == "pending"
        assert text_of(m.call_tool("mcp__fault__echo", {"message": "while slow starts"})) == "Echo: while slow starts"

        status = m.wait(45)
        assert time.monotonic() - t0 >= SLOW_S, "wait() waited for the slow server"
        assert states(status) == {
            "slow": "connected", "fault": "connected", "everything": "connected", "everything-http": "connected",
            "fs": "connected", "memory": "connected", "broken": "failed",
        }, status
        broken = status["servers"]["broken"]
        assert broken["error"]["kind"] == "transport" and "/nonexistent/mcp-server" in broken["error"]["message"], broken
        assert status["servers"]["everything-http"]["transport"] == "http"
        assert status["servers"]["memory"]["server_info"]["name"] == "memory-server"

        # The pool: mcp__<server>__<tool>, each naming its server and its own tool name.
        pool = m.list_tools()
        names = {t["name"] for t in pool["tools"]}
        assert {
            "mcp__everything__echo", "mcp__everything-http__echo", "mcp__fs__list_directory", "mcp__memory__read_graph",
            "mcp__memory__create_entities", "mcp__fault__ask", "mcp__slow__echo",
        } <= names, sorted(names)
        assert not any(n.startswith("mcp__broken__") for n in names)
        assert status["tools"] == len(pool["tools"]) == sum(len(s["tools"]) for s in status["servers"].values())
        entry = next(t for t in pool["tools"] if t["name"] == "mcp__fs__list_directory")
        assert entry["server"] == "fs" and entry["tool"] == "list_directory" and entry["read_only"] is True, entry
        assert "path" in entry["inputSchema"]["properties"]
        only_fs = m.list_tools("fs")["tools"]
        assert only_fs and {t["server"] for t in only_fs} == {"fs"}

        # Every call goes to its own server.
        assert text_of(m.call_tool("mcp__everything__echo", {"message": "stdio"})) == "Echo: stdio"
        assert text_of(m.call_tool("mcp__everything-http__echo", {"message": "over http"})) == "Echo: over http"
        assert text_of(m.call_tool("mcp__slow__echo", {"message": "late"})) == "Echo: late"
        assert text_of(m.call_tool("mcp__fs__list_directory", {"path": str(files)})) == "[FILE] hello.txt"
        created = m.call_tool("mcp__memory__create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote programs"]}]})
        assert not created.get("isError"), created
        graph = m.call_tool("mcp__memory__read_graph", {})
        assert graph["structuredContent"]["entities"] == [{"name": "Ada", "entityType": "person", "observations": ["wrote programs"]}], graph
        # Output hygiene: bidi controls and zero-width characters are gone from tool text.
        assert text_of(m.call_tool("mcp__fault__echo", {"message": "a\u202eb\u200bc\u2066d"})) == "Echo: abcd"

        # Handlers get (params, server): each server's requests name it.
        # (server-everything over HTTP asks for roots on the GET stream the client opens after
        # `initialized`: a race it may lose, so its roots are not counted on here.)
        assert wait_until(lambda: {"everything", "fs"} <= set(host.asked_by("roots/list")), 10), host.requests
        assert wait_until(lambda: host.logged("everything", "Roots updated: 1 root(s)"), 10), host.logs
        asked = json.loads(texts(m.call_tool("mcp__fault__ask", ask_sampling_args(), timeout=20))[0])
        assert asked["result"]["content"]["text"] == "sampled for fault", asked
        for server in ("everything", "everything-http"):
            sampled = texts(m.call_tool(f"mcp__{server}__trigger-sampling-request", {"prompt": "hi", "maxTokens": 5}, timeout=20))[0]
            assert json.loads(sampled[len("LLM sampling result:"):])["content"]["text"] == f"sampled for {server}", sampled
        assert host.asked_by("sampling/createMessage") == ["fault", "everything", "everything-http"]

        # Progress of a pool call reaches its callback before the call returns.
        steps: List[Any] = []
        m.call_tool("mcp__everything__trigger-long-running-operation", {"duration": 0.2, "steps": 2}, timeout=10, progress=lambda p: steps.append(p["progress"]))
        assert steps == [1, 2]

        # Kill server-memory: failed, reconnected at once, its tools back (its file kept Ada).
        (pid,) = pids_with_env(f"MEMORY_FILE_PATH={memory_file}")
        os.kill(pid, signal.SIGKILL)
        failed = events.state("memory", "failed")
        assert failed["error"]["kind"] in ("closed", "transport"), failed
        with pytest.raises((mcplug.NotFoundError, mcplug.ClosedError)):
            m.call_tool("mcp__memory__read_graph", {})
        events.state("memory", "pending", attempt=1)
        back = events.state("memory", "connected")
        assert "mcp__memory__read_graph" in back["tools"]
        (new_pid,) = pids_with_env(f"MEMORY_FILE_PATH={memory_file}")
        assert new_pid != pid and not alive(pid)
        graph = m.call_tool("mcp__memory__read_graph", {})
        assert [e["name"] for e in graph["structuredContent"]["entities"]] == ["Ada"], graph

        # set_enabled and reconnect.
        off = m.set_enabled("fs", False)
        assert off["state"] == "disabled" and off["tools"] == [], off
        with pytest.raises(mcplug.NotFoundError, match="disabled"):
            m.call_tool("mcp__fs__list_directory", {"path": str(files)})
        assert "mcp__fs__list_directory" not in {t["name"] for t in m.list_tools()["tools"]}
        m.set_enabled("fs", True)
        events.state("fs", "connected")
        assert text_of(m.call_tool("mcp__fs__list_directory", {"path": str(files)})) == "[FILE] hello.txt"
        (fault_pid,) = pids_with(fault_entry["args"][-1])
        again = m.reconnect("fault")
        assert again["state"] == "connected" and "mcp__fault__echo" in again["tools"], again
        assert wait_until(lambda: not alive(fault_pid), 5), "reconnect replaced the fault server's process"
        assert text_of(m.call_tool("mcp__fault__echo", {"message": "again"})) == "Echo: again"

        live = pids_with(fault_entry["args"][-1]) + pids_with_env(f"MEMORY_FILE_PATH={memory_file}")
        assert len(live) == 2, live
    assert not [p for p in live if alive(p)], "close: every server process is gone"


def test_the_state_handler_and_events_after_close(fault: FaultFactory) -> None:
    seen: List[Dict[str, Any]] = []
    lock = threading.Lock()

    def on_state(event: Dict[str, Any]) -> None:
        with lock:
            seen.append(event)

    entry = {k: v for k, v in fault("normal").items() if k != "name"}
    m = mcplug.Manager(handlers={"state": on_state})
    m.connect({"mcpServers": {"one": entry, "two": entry}})
    m.wait(20)
    assert wait_until(lambda: [(e["server"], e["state"]) for e in seen].count(("two", "connected")) == 1, 5), seen
    with lock:
        assert [(e["server"], e["state"]) for e in seen if e["server"] == "one"] == [("one", "pending"), ("one", "connected")]
    # A new configuration without "two": it is closed and a "removed" event (no handler) waits.
    m.connect({"mcpServers": {"one": entry}})
    removed = m.next_event(5)
    assert removed == {"type": "removed", "server": "two"}, removed
    assert list(m.status()["servers"]) == ["one"]
    m.close()
    assert [e["type"] for e in m.events(5)] == ["closed"], "the last event, then the end of the iteration"
    with pytest.raises(mcplug.ClosedError):
        m.next_event(0)
    with pytest.raises(mcplug.ClosedError, match="manager is closed"):
        m.status()
    m.close()  # twice is fine


def test_fifty_stdio_servers_three_at_a_time(fault: FaultFactory) -> None:
    n = 50
    entries = [fault("normal") for _ in range(n)]
    config = {"mcpServers": {f"s{i:02d}": {k: v for k, v in e.items() if k != "name"} for i, e in enumerate(entries)}}
    with mcplug.Manager({"local_concurrency": 3}) as m:
        t0 = time.monotonic()
        m.connect(config)
        status = m.wait(120)
        took = time.monotonic() - t0
        assert set(states(status).values()) == {"connected"}, states(status)
        assert status["tools"] == n * 11, "11 tools each"
        print(f"\n# {n} stdio servers (the fault server, Python) connected 3 at a time in {took:.2f} s")
        assert text_of(m.call_tool("mcp__s49__echo", {"message": "fiftieth"})) == "Echo: fiftieth"
        markers = [e["args"][-1] for e in entries]
        assert sum(len(pids_with(mk)) for mk in markers) == n
    assert wait_until(lambda: not any(pids_with(mk) for mk in markers), 5), "every process is gone after close"


def test_bad_input_is_named(fault: FaultFactory) -> None:
    with pytest.raises(mcplug.InvalidArgumentError, match="bogus"):
        mcplug.Manager({"bogus": 1})
    with pytest.raises(mcplug.InvalidArgumentError, match="options"):
        mcplug.Manager(["not", "a", "dict"])  # type: ignore[arg-type]

    async def sample(params: Any, server: Any) -> Any:
        return {}

    with pytest.raises(mcplug.InvalidArgumentError, match="async function.*mcplug.aio.Manager"):
        mcplug.Manager(handlers={"sampling/createMessage": sample})
    with mcplug.Manager() as m:
        with pytest.raises(mcplug.InvalidArgumentError, match="mcpServers"):
            m.connect({"nope": {}})
        with pytest.raises(mcplug.InvalidArgumentError, match="not JSON"):
            m.connect("{not json")
        with pytest.raises(mcplug.InvalidArgumentError, match="`config` must be a dict"):
            m.connect(42)  # type: ignore[arg-type]
        entry = {k: v for k, v in fault("normal").items() if k != "name"}
        m.connect(json.dumps({"mcpServers": {"f": entry}}))  # a config file's text
        m.wait(20)
        with pytest.raises(mcplug.NotFoundError, match="mcp__nowhere__x"):
            m.call_tool("mcp__nowhere__x")
        with pytest.raises(mcplug.InvalidArgumentError, match="arguments"):
            m.call_tool("mcp__f__echo", ["not", "a", "dict"])  # type: ignore[arg-type]
        with pytest.raises(mcplug.NotFoundError):
            m.reconnect("nobody")
        with pytest.raises(mcplug.NotFoundError):
            m.set_enabled("nobody", True)
        with pytest.raises(mcplug.InvalidArgumentError, match="enabled"):
            m.set_enabled("f", "yes")  # type: ignore[arg-type]
        with pytest.raises(mcplug.NotFoundError):
            m.respond("m999", {})
        with pytest.raises(mcplug.TimeoutError, match="slow"):
            m.connect({"mcpServers": {"f": entry, "slow": {"command": "/bin/sh", "args": ["-c", "sleep 30"]}}})
            m.wait(0.3)
        with pytest.raises(mcplug.InvalidArgumentError, match="handler"):
            m.add_host_server("h", [{"name": "t"}])
        with pytest.raises(mcplug.InvalidArgumentError, match="two tools named"):
            m.add_host_server("h", [{"name": "t", "handler": str}, {"name": "t", "handler": str}])
        with pytest.raises(mcplug.InvalidArgumentError, match="server of the configuration"):
            m.add_host_server("f", [{"name": "t", "handler": str}])
        assert m.host_servers == []
