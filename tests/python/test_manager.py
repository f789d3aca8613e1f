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
from conftest import FaultFactory, alive, npm_server, pids_with, text_of, wait_until
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
        m.add_host_server("host", [{"name": "where", "description": "Where the host runs", "handler": lambda a: f"pid {os.getpid()}"}])
        events = Events(m)
        t0 = time.monotonic()
        status = m.connect(config)
        took = time.monotonic() - t0
        assert took < 1.0, f"connect returns at once, it took {took:.2f} s"
        assert list(status["servers"]) == list(config["mcpServers"]) + ["host"], "servers in configuration order, the host's added"
        assert states(status) == {**{name: "pending" for name in config["mcpServers"]}, "host": "connected"}, status
        assert status["servers"]["host"]["transport"] == "sdk"

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
            "fs": "connected", "memory": "connected", "broken": "failed", "host": "connected",
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
            "mcp__memory__create_entities", "mcp__fault__ask", "mcp__slow__echo", "mcp__host__where",
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
        assert text_of(m.call_tool("mcp__host__where")) == f"pid {os.getpid()}", "the host server is this process"
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
    # The handler runs on the pump thread: the events reach it soon after wait() returns.
    assert wait_until(lambda: {("one", "connected"), ("two", "connected")} <= {(e["server"], e["state"]) for e in seen}, 5), seen
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
        assert status["tools"] == n * 14, "14 tools each"
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


# -- host (in-process) servers ---------------------------------------------------------------------


def test_host_server_tools_are_served_by_python(fault: FaultFactory) -> None:
    seen: List[Any] = []
    entry = {k: v for k, v in fault("normal").items() if k != "name"}

    def add(arguments: Dict[str, Any]) -> Dict[str, Any]:
        seen.append(("add", arguments, threading.current_thread().name))
        return {"content": [{"type": "text", "text": str(arguments["a"] + arguments["b"])}]}

    def slow(arguments: Dict[str, Any]) -> str:
        time.sleep(float(arguments.get("s", 1.0)))
        return "late"

    def fail(arguments: Dict[str, Any]) -> Any:
        raise ValueError("no such luck")

    tools = [
        {"name": "add", "description": "Adds two numbers", "handler": add,
         "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}},
        {"name": "shout", "description": "Upper-cases text", "handler": lambda a: str(a["text"]).upper()},
        {"name": "fail", "handler": fail},
        {"name": "number", "handler": lambda a: 42},
        {"name": "not_a_result", "handler": lambda a: {"content": "not a list"}},
        {"name": "not_json", "handler": lambda a: {"content": [{"type": "text", "text": {1, 2}}]}},
        {"name": "slow", "handler": slow, "annotations": {"readOnlyHint": True}},
    ]
    with mcplug.Manager() as m:
        assert m.add_host_server("host", tools) is None, "before the first connect it waits for it"
        assert m.host_servers == ["host"]
        status = m.connect({"mcpServers": {"fault": entry}})
        assert status["servers"]["host"]["state"] == "connected" and status["servers"]["host"]["transport"] == "sdk", status
        m.wait(20)
        names = [t["name"] for t in m.list_tools()["tools"]]
        host_names = ["mcp__host__add", "mcp__host__fail", "mcp__host__not_a_result", "mcp__host__not_json", "mcp__host__number", "mcp__host__shout", "mcp__host__slow"]
        assert sorted(names[:7]) == host_names, f"host tools come first in the pool: {names}"
        assert "mcp__fault__echo" in names
        add_entry = next(t for t in m.list_tools("host")["tools"] if t["tool"] == "add")
        assert add_entry["description"] == "Adds two numbers" and add_entry["inputSchema"]["required"] == ["a", "b"]
        assert next(t for t in m.list_tools("host")["tools"] if t["tool"] == "slow")["read_only"] is True

        assert text_of(m.call_tool("mcp__host__add", {"a": 2, "b": 40})) == "42"
        assert seen == [("add", {"a": 2, "b": 40}, "mcplug-pump")], "the function got the arguments, on the pump thread"
        assert m.call_tool("mcp__host__shout", {"text": "hi"}) == {"content": [{"type": "text", "text": "HI"}]}, "a str is one text item"
        failed = m.call_tool("mcp__host__fail", {})
        assert failed["isError"] is True and text_of(failed) == "no such luck", failed
        number = m.call_tool("mcp__host__number", {})
        assert number["isError"] is True and "returned int" in text_of(number), number
        malformed = m.call_tool("mcp__host__not_a_result", {})
        assert malformed["isError"] is True and "`content` list" in text_of(malformed), malformed
        refused = m.call_tool("mcp__host__not_json", {})
        assert refused["isError"] is True and "refused" in text_of(refused) and "JSON" in text_of(refused), refused
        assert text_of(m.call_tool("mcp__fault__echo", {"message": "beside"})) == "Echo: beside"

        # A call the function answers too late times out; its late answer goes nowhere.
        t0 = time.monotonic()
        with pytest.raises(mcplug.TimeoutError):
            m.call_tool("mcp__host__slow", {"s": 1.0}, timeout=0.2)
        assert time.monotonic() - t0 < 0.9
        cancelled = Events(m).wait(lambda e: e.get("type") == "request_cancelled", 5, "request_cancelled")
        assert cancelled["server"] == "host", cancelled
        assert text_of(m.call_tool("mcp__host__add", {"a": 1, "b": 1}, timeout=5)) == "2", "the host server still works"

        # Calls from several threads at once all get their own answer.
        out: Dict[int, str] = {}

        def call(i: int) -> None:
            out[i] = text_of(m.call_tool("mcp__host__add", {"a": i, "b": 1000}))

        threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert out == {i: str(i + 1000) for i in range(8)}

        # The same name again replaces the tools (set_tools): tools_changed, the old ones gone.
        entry_now = m.add_host_server("host", [{"name": "mul", "handler": lambda a: str(a["a"] * a["b"])}])
        assert entry_now is not None and entry_now["tools"] == ["mcp__host__mul"], entry_now
        changed = Events(m).wait(lambda e: e.get("type") == "tools_changed" and e.get("server") == "host", 5, "tools_changed host")
        assert changed["tools"] == ["mcp__host__mul"]
        assert text_of(m.call_tool("mcp__host__mul", {"a": 6, "b": 7})) == "42"
        with pytest.raises(mcplug.NotFoundError):
            m.call_tool("mcp__host__add", {"a": 1, "b": 2})

        # Another host server after connect is added at once; a new configuration keeps both.
        second = m.add_host_server("second", [{"name": "ping", "handler": lambda a: "pong"}])
        assert second is not None and second["state"] == "connected"
        assert text_of(m.call_tool("mcp__second__ping")) == "pong"
        status = m.connect({"mcpServers": {}})
        assert list(status["servers"]) == ["host", "second"], "the fault server went, the host servers stayed"
        assert text_of(m.call_tool("mcp__host__mul", {"a": 2, "b": 2})) == "4"
        assert m.remove_host_server("second") is True
        assert m.remove_host_server("second") is False
        assert "second" not in m.status()["servers"]
        with pytest.raises(mcplug.NotFoundError):
            m.call_tool("mcp__second__ping")
        with pytest.raises(mcplug.InvalidArgumentError, match="host server"):
            m.connect({"mcpServers": {"host": entry}})


# -- resources, prompts and search across servers -----------------------------------------------


def test_resources_prompts_and_search_across_servers(everything_server: Dict[str, Any], everything_http: str, fault: FaultFactory, tmp_path: Path) -> None:
    changed: List[Any] = []
    everything = {k: v for k, v in everything_server.items() if k != "name"}
    fault_entry = {k: v for k, v in fault("normal").items() if k != "name"}
    handlers = {
        "resources_changed": lambda e: changed.append(("resources", e["server"])),
        "prompts_changed": lambda e: changed.append(("prompts", e["server"])),
    }
    config = {"mcpServers": {
        "everything": everything, "everything-http": {"type": "http", "url": everything_http},
        "files": {"command": npm_server("mcp-server-filesystem"), "args": [str(tmp_path)]}, "fault": fault_entry,
    }}
    with mcplug.Manager(handlers=handlers) as m:
        m.add_host_server("host", [{"name": "echo", "description": "Echoes on the host", "handler": lambda a: "host echo"}])
        m.connect(config)
        status = m.wait(45)
        assert {s["state"] for s in status["servers"].values()} == {"connected"}, status

        found = m.search_tools("echo", 3)
        assert len(found["tools"]) == 3 and found["total"] >= 4, found
        assert all("score" in t for t in found["tools"])
        assert found["tools"][0]["name"] == "mcp__host__echo", "host tools first among equal scores"
        listing = m.search_tools("directory +list")
        assert "mcp__files__list_directory" in [t["name"] for t in listing["tools"]], listing
        picked = m.search_tools("select:mcp__fault__echo,mcp__everything-http__echo")
        assert [t["name"] for t in picked["tools"]] == ["mcp__fault__echo", "mcp__everything-http__echo"], picked
        assert {t["server"] for t in m.search_tools("echo", 10, server="fault")["tools"]} == {"fault"}
        with pytest.raises(mcplug.InvalidArgumentError, match="empty"):
            m.search_tools("  ")
        with pytest.raises(mcplug.InvalidArgumentError, match="max_results"):
            m.search_tools("echo", 0)

        resources = m.list_resources()
        by_server = {r["server"] for r in resources["resources"]}
        assert {"everything", "everything-http"} <= by_server, by_server
        assert any(t["uriTemplate"].startswith("demo://resource/dynamic/text/{") for t in resources["templates"]), resources["templates"]
        assert resources["errors"] == {}, resources["errors"]
        mine = m.list_resources("everything")
        assert mine["resources"] and {r["server"] for r in mine["resources"]} == {"everything"}
        uri = next(r["uri"] for r in mine["resources"] if r["uri"].startswith("demo://resource/static/document/"))
        read = m.read_resource("everything", uri, timeout=10)
        assert read["contents"][0]["uri"] == uri, read
        with pytest.raises(mcplug.NotFoundError, match="nobody"):
            m.read_resource("nobody", uri)

        prompts = m.list_prompts()
        names = {p["name"]: p for p in prompts["prompts"]}
        assert {"mcp__everything__simple-prompt", "mcp__everything-http__simple-prompt"} <= set(names), sorted(names)
        assert names["mcp__everything__simple-prompt"]["prompt"] == "simple-prompt"
        assert names["mcp__everything__simple-prompt"]["server"] == "everything"
        got = m.get_prompt("mcp__everything-http__args-prompt", {"city": "Paris", "state": "TX"})
        assert "Paris" in json.dumps(got["messages"]), got
        with pytest.raises(mcplug.NotFoundError, match="no-such-prompt"):
            m.get_prompt("mcp__everything__no-such-prompt")

        templates = m.request("everything", "resources/templates/list")
        assert templates["resourceTemplates"], templates
        with pytest.raises(mcplug.InvalidArgumentError, match="in-process"):
            m.request("host", "resources/list")
        with pytest.raises(mcplug.NotFoundError):
            m.request("nobody", "ping")

        m.call_tool("mcp__fault__list_changed", {"what": "resources"})
        m.call_tool("mcp__fault__list_changed", {"what": "prompts"})
        assert wait_until(lambda: {("resources", "fault"), ("prompts", "fault")} <= set(changed), 10), changed


def test_a_request_without_handler_is_answered_by_hand(fault: FaultFactory) -> None:
    # The capability declared for every server without a handler: the request comes to
    # next_event with its server and the manager's own id, and respond() answers it.
    entry = {k: v for k, v in fault("normal").items() if k != "name"}
    with mcplug.Manager({"connection": {"capabilities": {"elicitation": {}}}}) as m:
        m.connect({"mcpServers": {"a": entry, "b": entry}})
        m.wait(20)
        answers: Dict[str, Any] = {}
        ask = {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": {"type": "object"}}, "wait_ms": 10000}

        def call(server: str) -> None:
            answers[server] = json.loads(texts(m.call_tool(f"mcp__{server}__ask", ask, timeout=15))[0])

        threads = [threading.Thread(target=call, args=(s,)) for s in ("a", "b")]
        for t in threads:
            t.start()
        events = Events(m)
        requests = [events.wait(lambda e: e.get("type") == "request", 10, "a request") for _ in range(2)]
        assert sorted(r["server"] for r in requests) == ["a", "b"]
        assert all(r["method"] == "elicitation/create" and r["id"].startswith("m") for r in requests), requests
        assert requests[0]["id"] != requests[1]["id"], "ids of the manager's own, unique across servers"
        for r in requests:
            m.respond(r["id"], {"action": "accept", "content": {"name": f"from {r['server']}"}})
        for t in threads:
            t.join(15)
        assert answers == {s: {"result": {"action": "accept", "content": {"name": f"from {s}"}}} for s in ("a", "b")}, answers
        with pytest.raises(mcplug.NotFoundError):
            m.respond(requests[0]["id"], {"action": "decline"})


def test_a_remote_server_costs_its_connections_and_no_more_descriptors(everything_http: str) -> None:
    # A manager's servers are many (the scale run has 1,000): each costs its sockets — the POST
    # connection and the session's listening GET stream — and no descriptor of the library's
    # own (its event pump once held a pipe and a duplicate of it: 3 fds a server).
    n = 12
    with mcplug.Manager() as warm:  # the library's lasting descriptors come with a first manager
        warm.connect({"mcpServers": {"warm": {"type": "http", "url": everything_http}}})
        warm.wait(30)
    time.sleep(0.5)
    before = len(os.listdir("/proc/self/fd"))
    with mcplug.Manager() as m:
        m.connect({"mcpServers": {f"e{i}": {"type": "http", "url": everything_http} for i in range(n)}})
        m.wait(60)
        assert all(s["state"] == "connected" for s in m.status()["servers"].values()), m.status()
        assert texts(m.call_tool("mcp__e0__echo", {"message": "fd"})) == ["Echo: fd"]
        grown = len(os.listdir("/proc/self/fd")) - before
        assert grown <= 2 * n, f"{grown} fds for {n} servers (2 sockets each at most)"
