"""mcplug.aio: the same client as coroutines; the loop is never blocked, cancelling a task cancels
the call on the server, and handlers may be async."""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Dict, List

import pytest

import mcplug
import mcplug.aio
from conftest import FaultFactory, alive, pids_with, text_of


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 45))


async def cancelled_ids(client: mcplug.aio.Client) -> List[Any]:
    return list(json.loads(text_of(await client.call_tool("cancelled_ids", {}, timeout=5))))


def test_connect_call_and_close(everything_server: Dict[str, Any]) -> None:
    async def main() -> None:
        async with await mcplug.aio.Client.connect(everything_server) as client:
            assert client.protocol_version == "2025-11-25" and client.era == "legacy"
            assert client.server_info["name"] == "mcp-servers/everything"
            names = [t["name"] for t in await client.list_tools()]
            assert "echo" in names and "get-sum" in names
            assert text_of(await client.call_tool("echo", {"message": "async hi"}, timeout=5)) == "Echo: async hi"
            assert text_of(await client.call_tool("get-sum", {"a": 2, "b": 3})) == "The sum of 2 and 3 is 5."
            prompts = await client.request("prompts/list", all_pages=True)
            assert len(prompts["prompts"]) == 4
            await client.notify("notifications/roots/list_changed")
            with pytest.raises(mcplug.RpcError):
                await client.request("no/such/method")
        assert client.closed

    run(main())


def test_named_methods_and_subscribe(everything_server: Dict[str, Any]) -> None:
    async def main() -> None:
        async with await mcplug.aio.Client.connect(everything_server, connect_timeout=30) as client:
            uri = "demo://resource/static/document/features.md"
            assert uri in [r["uri"] for r in await client.list_resources()]
            read = await client.read_resource(uri)
            assert read["contents"][0]["mimeType"] == "text/markdown"
            assert len(await client.list_resource_templates()) == 2
            assert len(await client.list_prompts()) == 4
            simple = await client.get_prompt("simple-prompt")
            assert simple["messages"][0]["content"]["text"] == "This is a simple prompt without arguments."
            done = await client.complete({"type": "ref/prompt", "name": "completable-prompt"}, {"name": "department", "value": "E"})
            assert done["values"] == ["Engineering"]
            await client.ping()
            await client.subscribe(uri)
            await client.unsubscribe(uri)

    run(main())


def test_fifty_concurrent_calls(fault: FaultFactory) -> None:
    async def main() -> None:
        async with await mcplug.aio.Client.connect(fault()) as client:
            started = time.monotonic()
            results = await asyncio.gather(
                *(client.call_tool("sleep", {"ms": 300}) for _ in range(50)),
                *(client.call_tool("echo", {"message": f"m{i}"}) for i in range(50)),
            )
            elapsed = time.monotonic() - started
            assert [text_of(r) for r in results[:50]] == ["slept"] * 50
            assert [text_of(r) for r in results[50:]] == [f"Echo: m{i}" for i in range(50)]
            assert elapsed < 5, f"50 concurrent 300 ms calls took {elapsed:.1f} s: they ran one by one"

    run(main())


def test_the_loop_is_never_blocked(fault: FaultFactory) -> None:
    async def main() -> None:
        async with await mcplug.aio.Client.connect(fault()) as client:
            ticks = 0
            done = False

            async def ticker() -> None:
                nonlocal ticks
                while not done:
                    await asyncio.sleep(0.01)
                    ticks += 1

            task = asyncio.ensure_future(ticker())
            await client.call_tool("sleep", {"ms": 600})
            done = True
            await task
            assert ticks >= 20, f"the loop ticked only {ticks} times during a 600 ms call"

    run(main())


def test_cancelling_the_task_cancels_the_call(fault: FaultFactory) -> None:
    async def main() -> None:
        async with await mcplug.aio.Client.connect(fault()) as client:
            task = asyncio.ensure_future(client.call_tool("sleep", {"ms": 20000}))
            await asyncio.sleep(0.3)
            started = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            ids: List[Any] = []
            for _ in range(100):  # the cancellation reaches the server asynchronously
                ids = await cancelled_ids(client)
                if ids:
                    break
                await asyncio.sleep(0.02)
            assert len(ids) == 1, "notifications/cancelled never reached the server"
            assert time.monotonic() - started < 3
            assert text_of(await client.call_tool("echo", {"message": "after"})) == "Echo: after"

    run(main())


def test_cancelling_right_away_still_cancels(fault: FaultFactory) -> None:
    """A cancel that lands before the call reached the library must not be lost."""

    async def main() -> None:
        async with await mcplug.aio.Client.connect(fault()) as client:
            tags = [f"py-aio-early-{i}" for i in range(8)]
            for i, tag in enumerate(tags):
                task = asyncio.ensure_future(client.call_tool("sleep", {"ms": 20000}, tag=tag))
                for _ in range(i % 4):  # cancel at different points of the call's start
                    await asyncio.sleep(0)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            await asyncio.sleep(0.5)
            # A lost cancel would leave the call in flight in the library, still cancellable.
            assert [mcplug.cancel(tag) for tag in tags] == [False] * len(tags)
            assert text_of(await client.call_tool("echo", {"message": "x"})) == "Echo: x"

    run(main())


def test_timeout_and_errors(fault: FaultFactory) -> None:
    async def main() -> None:
        async with await mcplug.aio.Client.connect(fault()) as client:
            with pytest.raises(mcplug.TimeoutError):
                await client.call_tool("sleep", {"ms": 3000}, timeout=0.2)
            with pytest.raises(mcplug.RpcError) as info:
                await client.call_tool("no-such-tool", {})
            assert info.value.code == -32602
            with pytest.raises(mcplug.InvalidArgumentError):
                await client.call_tool("echo", {"message": object()})
            assert text_of(await client.call_tool("echo", {"message": "ok"})) == "Echo: ok"

    run(main())


def test_connect_failures(fault: FaultFactory) -> None:
    async def main() -> None:
        with pytest.raises(mcplug.TransportError):
            await mcplug.aio.Client.connect({"command": "/nonexistent/mcplug-aio"})
        with pytest.raises(mcplug.TimeoutError):
            await mcplug.aio.Client.connect(fault("hang-init"), connect_timeout=0.5)

    run(main())


def test_cancelling_connect_leaves_no_process(fault: FaultFactory) -> None:
    server = fault("hang-init")

    async def main() -> None:
        task = asyncio.ensure_future(mcplug.aio.Client.connect(server, connect_timeout=20))
        await asyncio.sleep(0.4)
        assert pids_with(server["args"][-1]), "the server did not start"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(150):
            if not pids_with(server["args"][-1]):
                return
            await asyncio.sleep(0.02)
        raise AssertionError("the server outlived a cancelled connect")

    run(main())


def test_async_and_plain_handlers(everything_server: Dict[str, Any]) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        logs: "asyncio.Queue[str]" = asyncio.Queue()
        stderr: List[str] = []
        on_loop: List[bool] = []

        async def roots(params: Dict[str, Any]) -> Dict[str, Any]:
            on_loop.append(asyncio.get_running_loop() is loop)
            await asyncio.sleep(0.01)
            return {"roots": [{"uri": "file:///tmp/mcplug-aio-root", "name": "aio-root"}]}

        async def on_message(params: Dict[str, Any]) -> None:
            await logs.put(str(params.get("data")))

        def on_other(event: Dict[str, Any]) -> None:  # a plain function runs on the pump thread
            if event["type"] == "stderr":
                stderr.append(event["line"])

        handlers = {"roots/list": roots, "notifications/message": on_message, "*": on_other}
        async with await mcplug.aio.Client.connect(everything_server, handlers=handlers) as client:
            while True:
                message = await asyncio.wait_for(logs.get(), 10)
                if "Roots updated" in message:
                    break
            text = text_of(await client.call_tool("get-roots-list"))
            assert "aio-root" in text and "file:///tmp/mcplug-aio-root" in text
        assert on_loop == [True]
        assert stderr and stderr[0] == "Starting default (STDIO) server..."

    run(main())


def test_async_progress_callback(everything_server: Dict[str, Any]) -> None:
    async def main() -> None:
        seen: List[int] = []

        async def progress(params: Dict[str, Any]) -> None:
            seen.append(params["progress"])

        async with await mcplug.aio.Client.connect(everything_server) as client:
            result = await client.call_tool("trigger-long-running-operation", {"duration": 0.3, "steps": 3}, progress=progress)
            assert text_of(result).startswith("Long running operation completed.")
            await asyncio.sleep(0)  # scheduled callbacks run before we look
            assert seen == [1, 2, 3]

    run(main())


def test_next_event_and_the_end_of_the_connection(fault: FaultFactory) -> None:
    async def main() -> None:
        async with await mcplug.aio.Client.connect(fault()) as client:
            assert await client.next_event(timeout=0.05) is None
            await client.call_tool("stderr", {"line": "aio stderr"})
            assert await client.next_event(timeout=5) == {"type": "stderr", "line": "aio stderr"}
            with pytest.raises(mcplug.ClosedError):
                await client.call_tool("crash", {})
            events = []
            with pytest.raises(mcplug.ClosedError):
                for _ in range(10):
                    event = await client.next_event(timeout=5)
                    assert event is not None
                    events.append(event)
            assert events[-1]["type"] == "closed"

    run(main())


def test_async_with_closes_the_server(fault: FaultFactory) -> None:
    server = fault()

    async def main() -> int:
        async with await mcplug.aio.Client.connect(server) as client:
            (pid,) = pids_with(server["args"][-1])
            assert alive(pid)
        assert client.closed
        with pytest.raises(mcplug.ClosedError):
            await client.call_tool("echo", {"message": "x"})
        await client.close()  # twice is fine
        return pid

    pid = run(main())
    assert not alive(pid)
