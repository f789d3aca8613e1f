"""mcplug.aio.Manager against real servers: the same manager as coroutines. Shown: one manager
over server-everything (stdio and Streamable HTTP), server-filesystem, server-memory, the fault
server, one that cannot start and one slow to start, with async handlers called with
(params, server); calls to every server at once; the events as an async iterator; a killed
server reconnecting; cancelling a task cancels its call on the server; the loop never blocked;
50 stdio servers 3 at a time; host servers, resources and prompts across servers."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

import mcplug
import mcplug.aio
from conftest import FaultFactory, alive, pids_with, text_of
from managing import SLOW_S, ManagerHost, ask_sampling_args, many_servers, sampling_answer, slow_entry, texts


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 55))


class AsyncEvents:
    """Pulls a manager's events through ``async for``, keeping every one seen."""

    def __init__(self, m: mcplug.aio.Manager) -> None:
        self.m = m
        self.seen: List[Dict[str, Any]] = []

    async def state(self, server: str, state: str, timeout: float = 20, **extra: Any) -> Dict[str, Any]:
        async def find() -> Dict[str, Any]:
            async for event in self.m:
                self.seen.append(event)
                if (
                    event.get("type") == "state" and event.get("server") == server and event.get("state") == state
                    and all(event.get(k) == v for k, v in extra.items())
                ):
                    return event
            raise AssertionError("the manager closed")

        try:
            return await asyncio.wait_for(find(), timeout)
        except asyncio.TimeoutError:
            recent = "\n".join(json.dumps(e)[:160] for e in self.seen[-12:])
            raise AssertionError(f"no state {server} -> {state} {extra or ''} within {timeout} s; the last events:\n{recent}") from None


class AsyncHost(ManagerHost):
    """The recording host, with coroutine handlers for sampling (the roots one stays plain)."""

    async def async_sampling(self, params: Dict[str, Any], server: Optional[str]) -> Dict[str, Any]:
        await asyncio.sleep(0.01)
        return self.sampling(params, server)

    def handlers(self) -> Dict[str, Any]:
        h = super().handlers()
        h["sampling/createMessage"] = self.async_sampling
        return h


def states(status: Dict[str, Any]) -> Dict[str, str]:
    return {name: s["state"] for name, s in status["servers"].items()}


def test_async_manager_over_many_servers(everything_server: Dict[str, Any], everything_http: str, fault: FaultFactory, tmp_path: Path) -> None:
    config, fault_entry, files, memory_file = many_servers(everything_server, everything_http, fault, tmp_path)
    host = AsyncHost(files)

    async def main() -> None:
        async with mcplug.aio.Manager({"reconnect_initial_ms": 100}, handlers=host.handlers()) as m:
            async def where(arguments: Dict[str, Any]) -> str:
                await asyncio.sleep(0.01)
                return f"loop {id(asyncio.get_running_loop())}"

            await m.add_host_server("host", [{"name": "where", "handler": where}])
            events = AsyncEvents(m)
            t0 = time.monotonic()
            status = await m.connect(config)
            assert time.monotonic() - t0 < 1.0, "connect returns at once"
            assert states(status) == {**{name: "pending" for name in config["mcpServers"]}, "host": "connected"}, status

            await events.state("fault", "connected")
            assert time.monotonic() - t0 < SLOW_S, "the fault server did not wait for the slow one"
            assert states(await m.status())["slow"] == "pending"
            assert text_of(await m.call_tool("mcp__fault__echo", {"message": "early"})) == "Echo: early"

            # The loop keeps running while wait() waits for the slow server.
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            ticker = asyncio.create_task(tick())
            status = await m.wait(45)
            ticker.cancel()
            assert ticks > 20, f"the loop ran while wait() waited ({ticks} ticks)"
            assert states(status)["slow"] == "connected" and states(status)["broken"] == "failed", status
            assert {s for s, st in states(status).items() if st == "connected"} == {"slow", "fault", "everything", "everything-http", "fs", "memory", "host"}

            # Calls to every server at once, each answered by its own.
            results = await asyncio.gather(
                m.call_tool("mcp__everything__echo", {"message": "stdio"}),
                m.call_tool("mcp__everything-http__echo", {"message": "http"}),
                m.call_tool("mcp__fs__list_directory", {"path": str(files)}),
                m.call_tool("mcp__memory__create_entities", {"entities": [{"name": "Grace", "entityType": "person", "observations": ["COBOL"]}]}),
                m.call_tool("mcp__slow__echo", {"message": "slow"}),
                m.call_tool("mcp__fault__echo", {"message": "fault"}),
                m.call_tool("mcp__host__where", {}),
            )
            assert [text_of(r) for r in (results[0], results[1], results[2], results[4], results[5], results[6])] == [
                "Echo: stdio", "Echo: http", "[FILE] hello.txt", "Echo: slow", "Echo: fault", f"loop {id(asyncio.get_running_loop())}",
            ]
            graph = await m.call_tool("mcp__memory__read_graph", {})
            assert [e["name"] for e in graph["structuredContent"]["entities"]] == ["Grace"], graph

            # Async handlers get (params, server).
            asked = json.loads(texts(await m.call_tool("mcp__fault__ask", ask_sampling_args(), timeout=20))[0])
            assert asked["result"] == sampling_answer("fault"), asked
            sampled = texts(await m.call_tool("mcp__everything-http__trigger-sampling-request", {"prompt": "x", "maxTokens": 5}, timeout=20))[0]
            assert json.loads(sampled[len("LLM sampling result:"):])["content"]["text"] == "sampled for everything-http"
            assert host.asked_by("sampling/createMessage") == ["fault", "everything-http"]
            assert "everything" in host.asked_by("roots/list") and "fs" in host.asked_by("roots/list")

            # Cancelling the awaiting task cancels the call on its server.
            call = asyncio.create_task(m.call_tool("mcp__fault__sleep", {"ms": 20000}))
            await asyncio.sleep(0.3)
            t1 = time.monotonic()
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            assert time.monotonic() - t1 < 1.0
            for _ in range(50):
                cancelled = json.loads(text_of(await m.call_tool("mcp__fault__cancelled_ids", {})))
                if cancelled:
                    break
                await asyncio.sleep(0.05)
            assert len(cancelled) == 1, "the fault server was sent notifications/cancelled"

            # Kill the fault server: failed, then back with its tools.
            (pid,) = pids_with(fault_entry["args"][-1])
            os.kill(pid, signal.SIGKILL)
            await events.state("fault", "failed")
            await events.state("fault", "pending", attempt=1)
            back = await events.state("fault", "connected")
            assert "mcp__fault__echo" in back["tools"]
            (new_pid,) = pids_with(fault_entry["args"][-1])
            assert new_pid != pid
            assert text_of(await m.call_tool("mcp__fault__echo", {"message": "back"})) == "Echo: back"
        assert not alive(new_pid), "the server process is gone once `async with` closed the manager"
        assert m.closed

    run(main())


def test_async_fifty_stdio_servers_three_at_a_time(fault: FaultFactory) -> None:
    n = 50
    entries = [fault("normal") for _ in range(n)]
    config = {"mcpServers": {f"s{i:02d}": {k: v for k, v in e.items() if k != "name"} for i, e in enumerate(entries)}}

    async def main() -> float:
        m = await mcplug.aio.Manager.create({"local_concurrency": 3})
        async with m:
            t0 = time.monotonic()
            await m.connect(config)
            status = await m.wait(120)
            took = time.monotonic() - t0
            assert set(states(status).values()) == {"connected"}, states(status)
            assert status["tools"] == n * 14
            echoes = await asyncio.gather(*(m.call_tool(f"mcp__s{i:02d}__echo", {"message": str(i)}) for i in range(n)))
            assert [text_of(r) for r in echoes] == [f"Echo: {i}" for i in range(n)]
        return took

    took = run(main())
    print(f"\n# {n} stdio servers (the fault server, Python) connected 3 at a time in {took:.2f} s (asyncio)")
    assert not any(pids_with(e["args"][-1]) for e in entries)


def test_cancelled_wait_and_construction_outside_a_loop(fault: FaultFactory) -> None:
    with pytest.raises(RuntimeError, match="running event loop"):
        mcplug.aio.Manager()

    async def main() -> None:
        async with mcplug.aio.Manager() as m:
            await m.connect({"mcpServers": {"slow": slow_entry()}})
            waiting = asyncio.create_task(m.wait())
            await asyncio.sleep(0.2)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            with pytest.raises(mcplug.TimeoutError, match="slow"):
                await m.wait(0.2)
            events = [e async for e in m.events(0.2)]
            assert [(e["type"], e["server"], e["state"]) for e in events] == [("state", "slow", "pending")], events

    run(main())


def test_async_host_server_tools(fault: FaultFactory) -> None:
    entry = {k: v for k, v in fault("normal").items() if k != "name"}
    stopped: List[str] = []

    async def wait_then_answer(arguments: Dict[str, Any]) -> str:
        try:
            await asyncio.sleep(float(arguments["s"]))
        except asyncio.CancelledError:
            stopped.append(str(arguments.get("who")))
            raise
        return f"waited {arguments['s']}"

    async def fail(arguments: Dict[str, Any]) -> Any:
        await asyncio.sleep(0)
        raise RuntimeError("async no")

    async def main() -> None:
        async with mcplug.aio.Manager() as m:
            await m.add_host_server("host", [
                {"name": "wait", "handler": wait_then_answer,
                 "inputSchema": {"type": "object", "properties": {"s": {"type": "number"}}, "required": ["s"]}},
                {"name": "fail", "handler": fail},
                {"name": "plain", "handler": lambda a: {"content": [{"type": "text", "text": "plain"}], "structuredContent": {"ok": True}}},
            ])
            await m.connect({"mcpServers": {"fault": entry}})
            await m.wait(20)

            # Async host tools run as tasks on this loop, several at once.
            t0 = time.monotonic()
            results = await asyncio.gather(*(m.call_tool("mcp__host__wait", {"s": 0.5}) for _ in range(6)))
            took = time.monotonic() - t0
            assert [text_of(r) for r in results] == ["waited 0.5"] * 6
            assert took < 2.0, f"six 0.5 s host calls at once took {took:.2f} s"
            failed = await m.call_tool("mcp__host__fail", {})
            assert failed["isError"] is True and text_of(failed) == "async no", failed
            plain = await m.call_tool("mcp__host__plain", {})
            assert plain["structuredContent"] == {"ok": True}

            # A call that times out cancels the task answering it.
            with pytest.raises(mcplug.TimeoutError):
                await m.call_tool("mcp__host__wait", {"s": 10, "who": "timed out"}, timeout=0.3)
            for _ in range(100):
                if stopped:
                    break
                await asyncio.sleep(0.02)
            assert stopped == ["timed out"]
            # And so does cancelling the task that awaits the call.
            call = asyncio.create_task(m.call_tool("mcp__host__wait", {"s": 10, "who": "cancelled"}))
            await asyncio.sleep(0.2)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            for _ in range(100):
                if len(stopped) == 2:
                    break
                await asyncio.sleep(0.02)
            assert stopped == ["timed out", "cancelled"]

            # Replacing the tools, and removing the server.
            replaced = await m.add_host_server("host", [{"name": "only", "handler": lambda a: "only"}])
            assert replaced is not None and replaced["tools"] == ["mcp__host__only"]
            assert text_of(await m.call_tool("mcp__host__only")) == "only"
            assert await m.remove_host_server("host") is True
            assert "host" not in (await m.status())["servers"]
            assert m.host_servers == []

    run(main())


def test_async_resources_and_prompts(everything_server: Dict[str, Any], everything_http: str) -> None:
    everything = {k: v for k, v in everything_server.items() if k != "name"}

    async def main() -> None:
        async with mcplug.aio.Manager() as m:
            await m.connect({"mcpServers": {"everything": everything, "everything-http": {"type": "http", "url": everything_http}}})
            await m.wait(30)
            resources, prompts, found = await asyncio.gather(m.list_resources(), m.list_prompts(), m.search_tools("echo"))
            assert {r["server"] for r in resources["resources"]} == {"everything", "everything-http"}
            assert {"mcp__everything__simple-prompt", "mcp__everything-http__simple-prompt"} <= {p["name"] for p in prompts["prompts"]}
            assert {t["name"] for t in found["tools"]} >= {"mcp__everything__echo", "mcp__everything-http__echo"}
            uri = next(r["uri"] for r in resources["resources"] if r["server"] == "everything-http")
            read = await m.read_resource("everything-http", uri)
            assert read["contents"][0]["uri"] == uri
            got = await m.get_prompt("mcp__everything__simple-prompt")
            assert got["messages"], got
            templates = await m.request("everything-http", "resources/templates/list")
            assert templates["resourceTemplates"]

    run(main())


# -- started calls: no thread per call ---------------------------------------------------------


class ThreadPeak:
    """The most threads alive while it ran (sampled on the loop every few ms)."""

    def __init__(self) -> None:
        self.before = threading.active_count()
        self.peak = self.before
        self._task: Optional["asyncio.Task[None]"] = None

    async def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, threading.active_count())
            await asyncio.sleep(0.002)

    def __enter__(self) -> "ThreadPeak":
        self._task = asyncio.get_running_loop().create_task(self._sample())
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._task is not None
        self._task.cancel()


def test_two_hundred_calls_at_once_hold_no_thread_each(everything_server: Dict[str, Any], fault: FaultFactory) -> None:
    """200 calls gathered across three servers and a host tool: 80 of them to a host tool that
    answers only once all 80 are in it — more than any thread pool of the binding ever held (64),
    so only calls that hold no thread can all get there."""
    everything = {k: v for k, v in everything_server.items() if k != "name"}
    config = {"mcpServers": {"fault": {k: v for k, v in fault("normal").items() if k != "name"}, "everything": everything}}
    gated = 80

    async def main() -> None:
        arrived = 0
        all_in = asyncio.Event()

        async def gate(arguments: Dict[str, Any]) -> str:
            nonlocal arrived
            arrived += 1
            if arrived == gated:
                all_in.set()
            try:
                await asyncio.wait_for(all_in.wait(), 20)
            except asyncio.TimeoutError:
                return f"gate {arguments['i']}: only {arrived} of {gated} calls arrived"
            return f"gate {arguments['i']}"

        async with mcplug.aio.Manager() as m:
            await m.add_host_server("host", [{"name": "gate", "handler": gate}])
            await m.connect(config)
            status = await m.wait(30)
            assert {s["state"] for s in status["servers"].values()} == {"connected"}, status

            calls = []
            for i in range(200):
                if i % 5 in (0, 1):
                    calls.append((m.call_tool("mcp__host__gate", {"i": i}), f"gate {i}"))
                elif i % 5 in (2, 3):
                    calls.append((m.call_tool("mcp__fault__echo", {"message": f"f{i}"}), f"Echo: f{i}"))
                else:
                    calls.append((m.call_tool("mcp__everything__echo", {"message": f"e{i}"}), f"Echo: e{i}"))
            assert sum(1 for _, want in calls if want.startswith("gate")) == gated
            with ThreadPeak() as threads:
                results = await asyncio.gather(*(c for c, _ in calls))
            assert [text_of(r) for r in results] == [want for _, want in calls]
            assert threads.peak <= threads.before + 4, f"threads rose from {threads.before} to {threads.peak} for 200 calls"
            # Nothing left behind: every started call's completion was taken.
            assert m._core._started == {} and m._core._early == {}

    run(main())


def test_cancelling_the_task_cancels_the_started_call(fault: FaultFactory) -> None:
    entry = {k: v for k, v in fault("normal").items() if k != "name"}
    stopped: List[str] = []
    withdrawn: List[Dict[str, Any]] = []

    async def wait_forever(arguments: Dict[str, Any]) -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            stopped.append(str(arguments["who"]))
            raise
        return "never"

    async def fault_cancelled(m: mcplug.aio.Manager, n: int) -> List[Any]:
        for _ in range(100):
            ids = json.loads(text_of(await m.call_tool("mcp__fault__cancelled_ids", {})))
            if len(ids) >= n:
                return list(ids)
            await asyncio.sleep(0.02)
        return list(ids)

    async def main() -> None:
        async with mcplug.aio.Manager(handlers={"request_cancelled": withdrawn.append}) as m:
            await m.add_host_server("host", [{"name": "wait", "handler": wait_forever}])
            await m.connect({"mcpServers": {"fault": entry}})
            await m.wait(20)

            # A call on the server: cancelled there (notifications/cancelled).
            call = asyncio.create_task(m.call_tool("mcp__fault__sleep", {"ms": 20000}))
            await asyncio.sleep(0.3)
            t0 = time.monotonic()
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            assert time.monotonic() - t0 < 0.5
            assert len(await fault_cancelled(m, 1)) == 1, "the fault server was sent notifications/cancelled"

            # asyncio.wait_for's timeout cancels the same way.
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(m.call_tool("mcp__fault__sleep", {"ms": 20000}), 0.3)
            assert len(await fault_cancelled(m, 2)) == 2

            # A host tool's call: its task is cancelled, and the host sees request_cancelled.
            call = asyncio.create_task(m.call_tool("mcp__host__wait", {"who": "task"}))
            await asyncio.sleep(0.2)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            for _ in range(100):
                if stopped and withdrawn:
                    break
                await asyncio.sleep(0.02)
            assert stopped == ["task"]
            assert [(e["type"], e["server"]) for e in withdrawn] == [("request_cancelled", "host")], withdrawn

            # The library's own timer: a TimeoutError from the completion, the server told too.
            with pytest.raises(mcplug.TimeoutError):
                await m.call_tool("mcp__fault__sleep", {"ms": 20000}, timeout=0.2)
            assert len(await fault_cancelled(m, 3)) == 3

            # Cancelled before anything came back: the manager goes on, nothing is left behind.
            for _ in range(20):
                quick = asyncio.create_task(m.call_tool("mcp__fault__echo", {"message": "gone"}))
                await asyncio.sleep(0)
                quick.cancel()
                try:
                    await quick
                except asyncio.CancelledError:
                    pass
            assert text_of(await m.call_tool("mcp__fault__echo", {"message": "after"})) == "Echo: after"
            for _ in range(100):
                if not m._core._started:
                    break
                await asyncio.sleep(0.02)
            assert m._core._started == {} and m._core._early == {}


    run(main())


def test_an_async_host_tool_awaits_other_manager_calls(fault: FaultFactory) -> None:
    """70 host calls at once, each awaiting two more calls of the same manager (a server's tool
    and another host tool): with a thread held per call, 64 of them would hold every thread and
    wait for calls that need one."""
    entry = {k: v for k, v in fault("normal").items() if k != "name"}
    n = 70

    async def main() -> None:
        async with mcplug.aio.Manager() as m:
            async def inner(arguments: Dict[str, Any]) -> str:
                await asyncio.sleep(0.05)
                return f"inner {arguments['i']}"

            async def relay(arguments: Dict[str, Any]) -> Dict[str, Any]:
                i = arguments["i"]
                echoed, inside = await asyncio.gather(
                    m.call_tool("mcp__fault__echo", {"message": f"r{i}"}, timeout=15),
                    m.call_tool("mcp__host__inner", {"i": i}, timeout=15),
                )
                return {"content": [{"type": "text", "text": f"{text_of(echoed)} + {text_of(inside)}"}]}

            await m.add_host_server("host", [{"name": "relay", "handler": relay}, {"name": "inner", "handler": inner}])
            await m.connect({"mcpServers": {"fault": entry}})
            await m.wait(20)
            results = await asyncio.gather(*(m.call_tool("mcp__host__relay", {"i": i}, timeout=30) for i in range(n)))
            assert [text_of(r) for r in results] == [f"Echo: r{i} + inner {i}" for i in range(n)]

    run(main())


def test_started_call_errors_progress_and_close(everything_server: Dict[str, Any], fault: FaultFactory) -> None:
    everything = {k: v for k, v in everything_server.items() if k != "name"}
    entry = {k: v for k, v in fault("normal").items() if k != "name"}

    async def main() -> None:
        m = mcplug.aio.Manager()
        async with m:
            await m.connect({"mcpServers": {"everything": everything, "fault": entry}})
            await m.wait(30)
            # Refused at the start, raised in the awaiting task.
            with pytest.raises(mcplug.NotFoundError, match="mcp__nowhere__x"):
                await m.call_tool("mcp__nowhere__x", {})
            with pytest.raises(mcplug.InvalidArgumentError, match="arguments"):
                await m.call_tool("mcp__fault__echo", {"bad": {1, 2}})  # type: ignore[dict-item]
            # An error of the call comes through its completion as its exception, data and all.
            with pytest.raises(mcplug.InvalidResultError) as bad:
                await m.call_tool("mcp__fault__weather", {"mode": "bad"})
            assert bad.value.kind == "invalid_result" and bad.value.data["errors"][0]["instance_path"] == "/temperature", bad.value.data
            with pytest.raises(mcplug.InvalidArgumentError, match="message"):
                await m.call_tool("mcp__fault__echo", {"message": 42}, validate_arguments=True)

            # A progress callback gets every step before the call's result is back (the last
            # progress event can reach the manager's queue just after the completion: without
            # waiting for it, about a third of these calls returned with two steps).
            for _ in range(8):
                seen: List[Dict[str, Any]] = []
                await m.call_tool("mcp__everything__trigger-long-running-operation", {"duration": 0.05, "steps": 3}, timeout=10, progress=seen.append)
                assert [(p["progress"], p["total"]) for p in seen] == [(1, 3), (2, 3), (3, 3)]
            assert m._core._routes == {} and m._core._after_idle == []
            # progress=True: the events, with the tag and the server, for the iterator.
            await m.call_tool("mcp__everything__trigger-long-running-operation", {"duration": 0.2, "steps": 2}, tag="py-started", progress=True)
            progress = [e async for e in m.events(0.3) if e.get("method") == "notifications/progress"]
            assert [(e["tag"], e["server"], e["params"]["progress"]) for e in progress] == [("py-started", "everything", 1), ("py-started", "everything", 2)]

            # A completion the pump takes before the start has returned the call's number (held
            # back here until it has) still reaches its call.
            core = m._core
            real_invoke = core._invoke
            raced: List[bool] = []

            def late_start(fn: Any, *args: Any) -> Any:
                status, text = real_invoke(fn, *args)
                if fn is mcplug._ffi.lib.mcplug_manager_call_tool_start:
                    deadline = time.monotonic() + 5
                    while not core._early and time.monotonic() < deadline:
                        time.sleep(0.005)
                    raced.append(bool(core._early))
                return status, text

            core._invoke = late_start  # type: ignore[method-assign]
            try:
                assert text_of(await m.call_tool("mcp__fault__echo", {"message": "raced"}, timeout=10)) == "Echo: raced"
            finally:
                core._invoke = real_invoke  # type: ignore[method-assign]
            assert raced == [True] and core._early == {} and core._started == {}

            # A call in flight when the manager closes ends with it.
            pending = asyncio.create_task(m.call_tool("mcp__fault__sleep", {"ms": 20000}))
            await asyncio.sleep(0.3)
        with pytest.raises(mcplug.McpError) as closed:
            await pending
        assert closed.value.kind in ("closed", "cancelled"), closed.value
        with pytest.raises(mcplug.ClosedError):
            await m.call_tool("mcp__fault__echo", {"message": "late"})

    run(main())


def test_configurations_given_at_once_apply_in_call_order() -> None:
    """connect and add_host_server gathered without awaiting each: they apply in the order they
    were called (the pool's threads once ran a later configuration before an earlier one)."""

    async def main() -> List[str]:
        m = await mcplug.aio.Manager.create()
        try:
            calls: List[Any] = [
                m.connect({"mcpServers": {f"s{i}": {"command": "mcplug-no-such-command", "args": [str(i)]}}})
                for i in range(12)
            ]
            calls.append(m.add_host_server("host", [{"name": "ping", "handler": lambda args: "pong"}]))
            await asyncio.gather(*calls)
            return sorted((await m.status())["servers"])
        finally:
            await m.close()

    assert asyncio.run(main()) == ["host", "s11"]
