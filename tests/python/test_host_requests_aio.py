"""Everything a server asks of the host, through mcplug.aio with `async def` handlers: they run
as tasks on the caller's loop (several at once), answer both eras the same way, and are cancelled
when the server no longer needs their answer (request_cancelled, request_expired). Against
server-everything, the Python SDK's 2026-07-28 server and the fault server."""
from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Dict, List

import pytest

import mcplug
import mcplug.aio
from conftest import FaultFactory, text_of
from hosting import SAMPLING_ANSWER, AsyncHost


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 50))


def texts(result: Dict[str, Any]) -> List[str]:
    return [str(c.get("text")) for c in result["content"] if c.get("type") == "text"]


async def until(predicate: Any, timeout: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def ask(client: mcplug.aio.Client, method: str, params: Dict[str, Any]) -> Dict[str, Any]:
    result = await client.call_tool("ask", {"method": method, "params": params, "wait_ms": 10000}, timeout=20)
    answer = json.loads(text_of(result))
    assert isinstance(answer, dict), answer
    return answer


def test_everything_with_async_handlers(everything_server: Dict[str, Any]) -> None:
    async def main() -> None:
        host = AsyncHost()
        async with await mcplug.aio.Client.connect(
            everything_server, handlers=host.handlers(roots=False), roots=["file:///tmp/aio-root"],
            capabilities={"elicitation": {"form": {}, "url": {}}}, elicitation_defaults=True,
        ) as client:
            sampled, elicited, url = await asyncio.gather(
                client.call_tool("trigger-sampling-request", {"prompt": "aio ping", "maxTokens": 9}),
                client.call_tool("trigger-elicitation-request", {}),
                client.call_tool("trigger-url-elicitation", {"url": "https://example.com/aio"}),
            )
            assert json.loads(texts(sampled)[0][len("LLM sampling result:"):]) == SAMPLING_ANSWER
            assert texts(elicited)[1] == "User inputs:\n- Name: Ada Lovelace\n- Agreed to terms: true\n- Favorite Integer: 42\n- Favorite Number: 3.14"
            assert texts(url)[0].endswith("URL: https://example.com/aio")
            assert sorted(host.methods()) == ["elicitation/create", "elicitation/create", "sampling/createMessage"]
            assert host.on_loop == [True, True, True], "async handlers run on the caller's loop"

            text = text_of(await client.call_tool("get-roots-list", {}))
            assert "Current MCP Roots (1 total)" in text and "URI: file:///tmp/aio-root\n" in text
            assert await client.set_roots(["file:///tmp/aio-root", "file:///tmp/aio-two"]) is True
            assert await until(lambda: "Roots updated: 2 root(s) received from client" in host.log_texts(), 10), host.log_texts()
            assert await client.set_log_level("error") == "logging/setLevel"
            await client.set_roots(["file:///x"] * 1 + ["file:///y", "file:///z"])
            await client.call_tool("get-roots-list", {})
            await client.set_log_level("info")
            await client.set_roots(["file:///w", "file:///x", "file:///y", "file:///z"])
            assert await until(lambda: "Roots updated: 4 root(s) received from client" in host.log_texts(), 10)
            assert "Roots updated: 3 root(s) received from client" not in host.log_texts()
            with pytest.raises(mcplug.InvalidArgumentError):
                await client.set_log_level("loud")

    run(main())


def test_everything_tasks_with_async_handlers(everything_server: Dict[str, Any]) -> None:
    async def main() -> None:
        host = AsyncHost()
        async with await mcplug.aio.Client.connect(everything_server, handlers=host.handlers()) as client:
            await client.list_tools()
            result = await client.call_tool("simulate-research-query", {"topic": "asyncio", "ambiguous": True})
            assert texts(result)[0].startswith("# Research Report: asyncio")
            assert "**Clarification**: programming" in texts(result)[0]
            result = await client.call_tool("trigger-sampling-request-async", {"prompt": "async ping"})
            assert "pong from the Python host" in "\n".join(texts(result))

            # Cancelling the awaiting asyncio task cancels the task on the server (tasks/cancel).
            call = asyncio.ensure_future(client.call_tool("simulate-research-query", {"topic": "cancel me"}))
            await asyncio.sleep(1.0)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call

            async def cancelled() -> int:
                listed = await client.request("tasks/list")
                return sum(1 for t in listed["tasks"] if t["status"] == "cancelled")

            for _ in range(100):
                if await cancelled() == 1:
                    break
                await asyncio.sleep(0.05)
            assert await cancelled() == 1

            created = await client.call_tool("simulate-research-query", {"topic": "handle"}, task="handle")
            assert created["task"]["status"] == "working"
            assert (await client.request("tasks/cancel", {"taskId": created["task"]["taskId"]}))["status"] == "cancelled"

    run(main())


def test_modern_with_async_handlers(modern_server: Dict[str, Any]) -> None:
    async def main() -> None:
        host = AsyncHost()
        async with await mcplug.aio.Client.connect(modern_server, handlers=host.handlers()) as client:
            assert client.era == "modern"
            greet, summary, both, roots = await asyncio.gather(
                client.call_tool("greet", {}),
                client.call_tool("summarize", {"text": "aio"}),
                client.call_tool("greet_and_sample", {"text": "both"}),
                client.call_tool("list_roots", {}),
            )
            assert text_of(greet) == "Hello, Ada!"
            assert text_of(summary) == "model said: pong from the Python host"
            assert text_of(both) == "Hello, Ada; model said: pong from the Python host"
            assert text_of(roots) == "roots: file:///tmp/from-the-py-host"
            assert sorted(host.methods()) == sorted(["elicitation/create"] * 2 + ["sampling/createMessage"] * 2 + ["roots/list"])
            assert all(host.on_loop) and len(host.on_loop) == 5

            state = text_of(await client.call_tool("state_echo", {}))
            assert re.fullmatch(r"state ok; action accept; ids (\d+) (\d+)", state), state
            assert await client.set_log_level("info") == "per request"
            await client.call_tool("log_levels", {})
            assert await until(lambda: "warning line" in host.log_texts(), 5)
            assert host.log_texts() == ["info line", "warning line"]
            assert text_of(await client.call_tool("ask_task", {})) == "colour: teal"
            with pytest.raises(mcplug.ProtocolError) as info:
                await client.call_tool("endless", {})
            assert "after 16 rounds" in info.value.message

    run(main())


def test_async_handler_errors(fault: FaultFactory, modern_server: Dict[str, Any]) -> None:
    async def main() -> None:
        async def refuse(params: Dict[str, Any]) -> Dict[str, Any]:
            await asyncio.sleep(0)
            raise mcplug.DeniedError("the user rejected sampling")

        async def explode(params: Dict[str, Any]) -> Dict[str, Any]:
            await asyncio.sleep(0)
            raise ValueError("bad prompt")

        async with await mcplug.aio.Client.connect(fault(), handlers={"sampling/createMessage": explode}) as client:
            msg = {"messages": [], "maxTokens": 5}
            assert await ask(client, "sampling/createMessage", msg) == {"error": {"code": -32603, "message": "bad prompt"}}
            answer = await ask(client, "elicitation/create", {"message": "x", "requestedSchema": {"type": "object"}})
            assert answer["error"]["code"] == -32601, "no elicitation handler: not declared"
        async with await mcplug.aio.Client.connect(modern_server, handlers={"sampling/createMessage": refuse}) as client:
            with pytest.raises(mcplug.DeniedError) as info:
                await client.call_tool("summarize", {"text": "no"})
            assert info.value.code == -1 and "the user rejected sampling" in info.value.message
            with pytest.raises(mcplug.DeniedError) as denied:
                await client.call_tool("sample_anyway", {})  # a hand-written InputRequiredResult
            assert denied.value.code == -1
            with pytest.raises(mcplug.RpcError) as rpc:
                await client.call_tool("greet", {})  # no elicitation handler: not declared; the SDK checks
            assert rpc.value.code == -32021 and "elicitation" in rpc.value.message

    run(main())


def test_withdrawn_requests_cancel_the_async_handler(modern_server: Dict[str, Any]) -> None:
    async def main() -> None:
        started: "asyncio.Queue[str]" = asyncio.Queue()
        stopped: List[str] = []
        events: List[Dict[str, Any]] = []

        async def hold(params: Dict[str, Any]) -> Dict[str, Any]:
            await started.put(params["message"])
            try:
                await asyncio.sleep(60)  # the user never answers
            except asyncio.CancelledError:
                stopped.append(params["message"])
                raise
            return {"action": "decline"}

        async def on_event(event: Dict[str, Any]) -> None:
            events.append(event)

        handlers = {"elicitation/create": hold, "request_cancelled": on_event, "request_expired": on_event}
        async with await mcplug.aio.Client.connect(modern_server, handlers=handlers, host_request_timeout=1.0) as client:
            # The call's task is cancelled while the handler holds its elicitation.
            call = asyncio.ensure_future(client.call_tool("greet", {}))
            assert await asyncio.wait_for(started.get(), 10) == "What is your name?"
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            assert await until(lambda: bool(stopped) and bool(events), 5), (stopped, events)
            assert stopped == ["What is your name?"]
            assert [(e["type"], e["method"]) for e in events] == [("request_cancelled", "elicitation/create")]

            # The host timer runs out: the call fails, the handler is stopped, the host is told.
            stopped.clear()
            events.clear()
            with pytest.raises(mcplug.TimeoutError) as info:
                await client.call_tool("greet", {})
            assert "did not answer elicitation/create within 1000 ms" in info.value.message
            assert await until(lambda: bool(stopped) and bool(events), 5), (stopped, events)
            assert [(e["type"], e["method"]) for e in events] == [("request_expired", "elicitation/create")]
            assert text_of(await client.call_tool("echo", {"message": "still"})) == "Echo: still"

    run(main())


def test_output_schemas_and_warnings_in_aio(modern_server: Dict[str, Any]) -> None:
    async def main() -> None:
        warnings: List[Dict[str, Any]] = []
        async with await mcplug.aio.Client.connect(modern_server, handlers={"warning": warnings.append}) as client:
            await client.list_tools()
            with pytest.raises(mcplug.InvalidResultError) as info:
                await client.call_tool("misreport", {"city": "Oslo"})
            assert info.value.kind == "invalid_result" and info.value.data["errors"][0]["instance_path"] == "/temperature"
            with pytest.raises(mcplug.InvalidArgumentError):
                await client.call_tool("add", {"a": "two", "b": 3}, validate_arguments=True)
            assert (await client.call_tool("add", {"a": 2, "b": 3}, validate_arguments=True))["structuredContent"] == {"result": 5}
            assert await until(lambda: bool(warnings), 5)
            assert [(w["tool"], w["reason"]) for w in warnings] == [("unschemable", "invalid_schema")]

    run(main())


def test_closing_cancels_the_async_handlers_still_at_work(modern_server: Dict[str, Any]) -> None:
    async def main() -> None:
        started = asyncio.Event()
        stopped: List[str] = []

        async def hold(params: Dict[str, Any]) -> Dict[str, Any]:
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                stopped.append(params["message"])
                raise
            return {"action": "decline"}

        client = await mcplug.aio.Client.connect(modern_server, handlers={"elicitation/create": hold})
        call = asyncio.ensure_future(client.call_tool("greet", {}))
        await asyncio.wait_for(started.wait(), 10)
        await client.close()
        with pytest.raises(mcplug.ClosedError):
            await call
        assert await until(lambda: bool(stopped), 5)
        assert stopped == ["What is your name?"]

    run(main())
