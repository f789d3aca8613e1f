"""Everything a server asks of the host, through the sync client and its handlers: sampling,
elicitation (form with schema defaults, URL, the -32042 retry), roots (answered by the library,
set again later, handed back to a handler), logging at a chosen level, tasks (awaited, handed
over, cancelled, timed out, hosted for the server), channel notifications — against
server-everything (the legacy era: real server requests) and the Python SDK's 2026-07-28 server
(tests/servers/modern_server.py: the same needs as InputRequiredResult rounds), served by the same
handlers. Also: a handler that raises (the exact JSON-RPC error the server gets, through the
fault server's `ask`), an answer for an unknown id, a host without a sampling handler (not
declared: -32601 to a legacy server, ProtocolError for a modern call), the round limit, a host
that is too slow (request_expired) or whose call is cancelled (request_cancelled)."""
from __future__ import annotations

import json
import logging
import re
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

import mcplug
from conftest import FaultFactory, text_of, wait_until
from hosting import SAMPLING_ANSWER, Host

EVERYTHING_CAPS = {"elicitation": {"form": {}, "url": {}}}


def texts(result: Dict[str, Any]) -> List[str]:
    return [str(c.get("text")) for c in result["content"] if c.get("type") == "text"]


def ask(client: mcplug.Client, method: str, params: Dict[str, Any]) -> Dict[str, Any]:
    """Has the fault server send `method` to the client; returns the client's raw answer
    ({"result": ...} or {"error": ...})."""
    answer = json.loads(text_of(client.call_tool("ask", {"method": method, "params": params, "wait_ms": 10000}, timeout=20)))
    assert isinstance(answer, dict), answer
    return answer


# -- server-everything (legacy era) ---------------------------------------------------------------


def test_everything_sampling_elicitation_and_url_elicitation(everything_server: Dict[str, Any]) -> None:
    host = Host()
    with mcplug.Client.connect(
        everything_server, handlers=host.handlers(), capabilities=EVERYTHING_CAPS, elicitation_defaults=True, tool_timeout=60
    ) as client:
        names = {t["name"] for t in client.list_tools()}
        assert {"trigger-sampling-request", "trigger-elicitation-request", "trigger-url-elicitation", "get-roots-list"} <= names

        result = client.call_tool("trigger-sampling-request", {"prompt": "ping", "maxTokens": 7})
        assert texts(result)[0].startswith("LLM sampling result:"), result
        assert json.loads(texts(result)[0][len("LLM sampling result:"):]) == SAMPLING_ANSWER
        (asked,) = host.asked("sampling/createMessage")
        assert asked["messages"] == [{"role": "user", "content": {"type": "text", "text": "Resource trigger-sampling-request context: ping"}}]
        assert asked["maxTokens"] == 7
        assert set(host.threads) == {"mcplug-pump"}, "sync handlers run on the client's pump thread"

        # Form elicitation: the host answered two fields; the schema's defaults filled the rest.
        result = client.call_tool("trigger-elicitation-request", {})
        assert texts(result)[1] == "User inputs:\n- Name: Ada Lovelace\n- Agreed to terms: true\n- Favorite Integer: 42\n- Favorite Number: 3.14"

        # URL elicitation: the request path, then the -32042 error path and its retry.
        host.clear()
        result = client.call_tool("trigger-url-elicitation", {"url": "https://example.com/consent"})
        assert texts(result)[0].startswith("✅ User completed the URL elicitation flow.")
        assert texts(result)[0].endswith("URL: https://example.com/consent")
        (asked,) = host.asked("elicitation/create")
        assert asked["mode"] == "url" and asked["url"] == "https://example.com/consent"
        host.clear()
        result = client.call_tool("trigger-url-elicitation", {"url": "https://example.com/second", "errorPath": True})
        assert texts(result)[0].endswith("URL: https://example.com/second")
        urls = [p["url"] for p in host.asked("elicitation/create")]
        assert len(urls) == 2 and urls[1] == "https://example.com/second", urls
        assert urls[0].startswith("https://modelcontextprotocol.io"), "the -32042 error's elicitation reached the handler first"


def test_everything_elicitation_without_defaults(everything_server: Dict[str, Any]) -> None:
    host = Host()
    with mcplug.Client.connect(everything_server, handlers=host.handlers()) as client:
        result = client.call_tool("trigger-elicitation-request", {})
        assert texts(result)[1] == "User inputs:\n- Name: Ada Lovelace\n- Agreed to terms: true"


def test_everything_roots_logging_and_levels(everything_server: Dict[str, Any]) -> None:
    host = Host()
    with mcplug.Client.connect(
        everything_server, handlers=host.handlers(sampling=False), roots=[{"uri": "file:///tmp/mcplug-root-1", "name": "one"}]
    ) as client:
        text = text_of(client.call_tool("get-roots-list", {}))
        assert text.startswith("Current MCP Roots (1 total):\n\n1. one\n   URI: file:///tmp/mcplug-root-1\n"), text
        assert "roots/list" not in host.methods(), "roots given at connect are answered by the library"

        assert client.set_roots([{"uri": "file:///tmp/mcplug-root-1", "name": "one"}, Path("/tmp/mcplug-root-2")]) is True
        assert wait_until(lambda: "Roots updated: 2 root(s) received from client" in host.log_texts(), 10), host.log_texts()
        text = text_of(client.call_tool("get-roots-list", {}))
        assert "Current MCP Roots (2 total)" in text and "2. mcplug-root-2\n   URI: file:///tmp/mcplug-root-2\n" in text

        with pytest.raises(mcplug.InvalidArgumentError) as info:
            client.set_roots(["https://example.com"])
        assert "file://" in info.value.message

        # At level error the server's info messages stop; back at info they come again.
        assert client.set_log_level("error") == "logging/setLevel"
        client.set_roots(["file:///a", "file:///b", "file:///c"])
        # The server asks for the roots, stores them and logs (or not) in one step: once its tool
        # shows 3 roots, the message was decided at level error.
        assert wait_until(lambda: "(3 total)" in text_of(client.call_tool("get-roots-list", {})), 10)
        assert client.set_log_level("info") == "logging/setLevel"
        client.set_roots(["file:///a", "file:///b", "file:///c", "file:///d"])
        assert wait_until(lambda: "Roots updated: 4 root(s) received from client" in host.log_texts(), 10), host.log_texts()
        assert "Roots updated: 3 root(s) received from client" not in host.log_texts(), "at level error, no info message"
        with pytest.raises(mcplug.InvalidArgumentError) as info:
            client.set_log_level("loud")
        assert "emergency" in info.value.message

        # Simulated logging at level debug: the first message comes at once, whatever its level.
        host.clear()
        client.set_log_level("debug")
        client.call_tool("toggle-simulated-logging", {})
        try:
            assert wait_until(lambda: any(t.endswith("message") for t in host.log_texts()), 10), host.log_texts()
            first = host.logs[0]
            assert first["level"] in ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
        finally:
            client.call_tool("toggle-simulated-logging", {})

        # None hands roots/list back to the handler.
        host.clear()
        assert client.set_roots(None) is True
        assert wait_until(lambda: "Roots updated: 1 root(s) received from client" in host.log_texts(), 10), host.log_texts()
        text = text_of(client.call_tool("get-roots-list", {}))
        assert "Current MCP Roots (1 total)" in text and "file:///tmp/from-the-py-host" in text, text
        assert "roots/list" in host.methods()


def test_log_level_at_connect(everything_server: Dict[str, Any]) -> None:
    host = Host()
    with mcplug.Client.connect(everything_server, handlers=host.handlers(), roots=["file:///one"], log_level="error") as client:
        client.set_roots(["file:///one", "file:///two"])
        # Stored (and its message decided at level error) before the level changes.
        assert wait_until(lambda: "(2 total)" in text_of(client.call_tool("get-roots-list", {})), 10)
        client.set_log_level("info")
        client.set_roots(["file:///one", "file:///two", "file:///three"])
        assert wait_until(lambda: "Roots updated: 3 root(s) received from client" in host.log_texts(), 10), host.log_texts()
        assert host.log_texts() == ["Roots updated: 3 root(s) received from client"], "at level error from connect on, no info"


def test_roots_need_the_capability(everything_server: Dict[str, Any]) -> None:
    with mcplug.Client.connect(everything_server, tasks=False) as client:
        names = {t["name"] for t in client.list_tools()}
        assert "echo" in names
        assert not names & {"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"}
        with pytest.raises(mcplug.InvalidArgumentError) as info:
            client.set_roots(["file:///x"])
        assert "roots capability" in info.value.message


def test_everything_tasks_awaited_and_with_input(everything_server: Dict[str, Any]) -> None:
    host = Host()
    with mcplug.Client.connect(everything_server, handlers=host.handlers()) as client:
        client.list_tools()  # where the library learns which tools require tasks
        result = client.call_tool("simulate-research-query", {"topic": "rust"})
        text = texts(result)[0]
        assert text.startswith("# Research Report: rust"), text
        assert "io.modelcontextprotocol/related-task" in result.get("_meta", {}), result.get("_meta")

        result = client.call_tool("simulate-research-query", {"topic": "python", "ambiguous": True})
        assert "**Clarification**: programming" in texts(result)[0], texts(result)
        (asked,) = host.asked("elicitation/create")
        assert "io.modelcontextprotocol/related-task" in asked.get("_meta", {}), asked


def test_everything_task_handles_cancel_and_timeout(everything_server: Dict[str, Any]) -> None:
    with mcplug.Client.connect(everything_server, handlers=Host().handlers()) as client:
        client.list_tools()
        created = client.call_tool("simulate-research-query", {"topic": "handles"}, task="handle", task_ttl=120)
        task = created["task"]
        assert task["status"] == "working" and task["taskId"]
        got = client.request("tasks/get", {"taskId": task["taskId"]})
        assert got["taskId"] == task["taskId"] and got["status"] in ("working", "completed")
        cancelled = client.request("tasks/cancel", {"taskId": task["taskId"]})
        assert cancelled["status"] == "cancelled"

        # A cancel during the transparent wait sends tasks/cancel.
        timer = threading.Timer(1.0, lambda: wait_until(lambda: mcplug.cancel("py-research"), 3))
        timer.start()
        started = time.monotonic()
        with pytest.raises(mcplug.CancelledError) as info:
            client.call_tool("simulate-research-query", {"topic": "cancel me"}, tag="py-research")
        timer.join()
        assert "tasks/cancel" in info.value.message
        assert time.monotonic() - started < 3

        with pytest.raises(mcplug.TimeoutError) as timeout:
            client.call_tool("simulate-research-query", {"topic": "too slow"}, timeout=1.2)
        assert "tasks/cancel" in timeout.value.message

        def cancelled_count() -> int:
            tasks = client.request("tasks/list")["tasks"]
            return sum(1 for t in tasks if t["status"] == "cancelled")

        assert wait_until(lambda: cancelled_count() >= 3, 5), client.request("tasks/list")


def test_everything_sampling_and_elicitation_as_client_tasks(everything_server: Dict[str, Any]) -> None:
    host = Host()
    with mcplug.Client.connect(everything_server, handlers=host.handlers()) as client:
        result = client.call_tool("trigger-sampling-request-async", {"prompt": "async ping"})
        text = "\n".join(texts(result))
        assert "[COMPLETED] Async sampling completed!" in text and "pong from the Python host" in text, text
        (asked,) = host.asked("sampling/createMessage")
        assert "async ping" in json.dumps(asked["messages"])
        result = client.call_tool("trigger-elicitation-request-async", {})
        text = "\n".join(texts(result))
        assert "completed" in text and "Blue" in text, text


def test_a_task_option_that_is_not_one(fault: FaultFactory) -> None:
    with mcplug.Client.connect(fault()) as client:
        with pytest.raises(mcplug.InvalidArgumentError) as info:
            client.call_tool("echo", {"message": "x"}, task="later")
        assert "`task`" in info.value.message
        with pytest.raises(mcplug.InvalidArgumentError):
            client.call_tool("echo", {"message": "x"}, task_ttl=-1)
        assert text_of(client.call_tool("echo", {"message": "x"}, task=False)) == "Echo: x"


# -- what the server gets when a handler raises, and undeclared capabilities (fault server) -------


def test_a_raising_handler_becomes_the_exact_json_rpc_error(fault: FaultFactory) -> None:
    behaviour: Dict[str, Any] = {}

    def sampling(params: Dict[str, Any]) -> Any:
        outcome = behaviour["next"]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    with mcplug.Client.connect(fault(), handlers={"sampling/createMessage": sampling}) as client:
        msg = {"messages": [], "maxTokens": 5}
        behaviour["next"] = RuntimeError("the model is down")
        assert ask(client, "sampling/createMessage", msg) == {"error": {"code": -32603, "message": "the model is down"}}
        behaviour["next"] = mcplug.DeniedError("the user said no")
        assert ask(client, "sampling/createMessage", msg) == {"error": {"code": -1, "message": "the user said no"}}
        behaviour["next"] = mcplug.McpError("quota", code=-32000, data={"retry_after": 30})
        assert ask(client, "sampling/createMessage", msg) == {"error": {"code": -32000, "message": "quota", "data": {"retry_after": 30}}}
        behaviour["next"] = KeyError("model")
        assert ask(client, "sampling/createMessage", msg) == {"error": {"code": -32603, "message": "'model'"}}
        behaviour["next"] = {"not json": {1, 2}}
        answer = ask(client, "sampling/createMessage", msg)
        assert answer["error"]["code"] == -32603 and "not JSON" in answer["error"]["message"], answer
        behaviour["next"] = SAMPLING_ANSWER
        assert ask(client, "sampling/createMessage", msg) == {"result": SAMPLING_ANSWER}, "the pump survived"


def test_a_raising_handler_against_server_everything(everything_server: Dict[str, Any]) -> None:
    def sampling(params: Dict[str, Any]) -> Dict[str, Any]:
        raise RuntimeError("the model is down")

    with mcplug.Client.connect(everything_server, handlers={"sampling/createMessage": sampling}) as client:
        result = client.call_tool("trigger-sampling-request", {"prompt": "x"})
        assert result == {"content": [{"type": "text", "text": "MCP error -32603: the model is down"}], "isError": True}
        assert text_of(client.call_tool("echo", {"message": "after"})) == "Echo: after"


def test_the_sync_client_refuses_coroutine_handlers(fault: FaultFactory) -> None:
    async def sampling(params: Dict[str, Any]) -> Dict[str, Any]:
        return SAMPLING_ANSWER

    with pytest.raises(mcplug.InvalidArgumentError) as info:
        mcplug.Client.connect(fault(), handlers={"sampling/createMessage": sampling})
    assert "mcplug.aio" in info.value.message and "sampling/createMessage" in info.value.message
    # A plain function that returns an awaitable anyway: the server gets an error, not a hang.
    with mcplug.Client.connect(fault(), handlers={"sampling/createMessage": lambda p: sampling(p)}) as client:
        answer = ask(client, "sampling/createMessage", {"messages": [], "maxTokens": 5})
        assert answer["error"]["code"] == -32603 and "mcplug.aio" in answer["error"]["message"], answer


def test_capabilities_follow_the_handlers(fault: FaultFactory) -> None:
    host = Host()
    with mcplug.Client.connect(fault(), handlers={"elicitation/create": host.elicitation}) as client:
        answer = ask(client, "sampling/createMessage", {"messages": [], "maxTokens": 5})
        assert answer["error"]["code"] == -32601 and "did not declare the sampling capability" in answer["error"]["message"], answer
        answer = ask(client, "roots/list", {})
        assert answer["error"]["code"] == -32601, answer
        form = {"mode": "form", "message": "What is your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}
        assert ask(client, "elicitation/create", form) == {"result": {"action": "accept", "content": {"name": "Ada"}}}
        url = {"mode": "url", "message": "open it", "url": "https://example.com", "elicitationId": "e1"}
        answer = ask(client, "elicitation/create", url)
        assert answer["error"]["code"] == -32602, "a handler declares form mode only: " + json.dumps(answer)
        assert host.methods() == ["elicitation/create"]
    with mcplug.Client.connect(
        fault(), handlers={"elicitation/create": host.elicitation, "sampling/createMessage": host.sampling},
        capabilities={"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}},
    ) as client:
        assert ask(client, "elicitation/create", url) == {"result": {"action": "accept"}}
        tools = {"messages": [], "maxTokens": 5, "tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
        assert ask(client, "sampling/createMessage", tools) == {"result": SAMPLING_ANSWER}


def test_an_answer_for_an_unknown_id(fault: FaultFactory) -> None:
    with mcplug.Client.connect(fault(), capabilities={"sampling": {}}) as client:
        with pytest.raises(mcplug.InvalidArgumentError) as info:
            client.respond("s999999", {"action": "accept"})
        assert "s999999" in info.value.message
        # A request answered by hand (capability declared, no handler), then answered again.
        box: Dict[str, Any] = {}
        asker = threading.Thread(target=lambda: box.update(answer=ask(client, "sampling/createMessage", {"messages": []})))
        asker.start()
        event = client.next_event(timeout=10)
        while event is not None and event["type"] != "request":
            event = client.next_event(timeout=10)
        assert event is not None and event["method"] == "sampling/createMessage"
        client.respond(event["id"], SAMPLING_ANSWER)
        asker.join(15)
        assert box["answer"] == {"result": SAMPLING_ANSWER}
        with pytest.raises(mcplug.InvalidArgumentError) as again:
            client.respond(event["id"], SAMPLING_ANSWER)
        assert "already answered" in again.value.message


def test_connect_options_are_checked(fault: FaultFactory) -> None:
    server = fault()
    bad: List[Dict[str, Any]] = [
        {"log_level": "loud"},
        {"tasks": "yes"},
        {"max_input_rounds": 0},
        {"elicitation_defaults": 1},
        {"roots": "file:///x"},
        {"roots": [42]},
        {"host_request_timeout": float("inf")},
        {"capabilities": {"tasks": {}}},
        {"log_level": "info", "options": {"log_level": "debug"}},
    ]
    for kwargs in bad:
        with pytest.raises(mcplug.InvalidArgumentError):
            mcplug.Client.connect(server, **kwargs)


# -- the Python SDK's 2026-07-28 server: InputRequiredResult rounds, same handlers ------------------


def test_modern_input_requests_are_served_by_the_same_handlers(modern_server: Dict[str, Any]) -> None:
    host = Host()
    with mcplug.Client.connect(modern_server, handlers=host.handlers(roots=False), roots=["file:///tmp/modern-a"]) as client:
        assert client.era == "modern"
        assert text_of(client.call_tool("greet", {})) == "Hello, Ada!"
        (asked,) = host.asked("elicitation/create")
        assert asked["message"] == "What is your name?"
        assert text_of(client.call_tool("summarize", {"text": "a long story"})) == "model said: pong from the Python host"
        (asked,) = host.asked("sampling/createMessage")
        assert asked["messages"] == [{"role": "user", "content": {"type": "text", "text": "Summarize: a long story"}}]
        host.clear()
        assert text_of(client.call_tool("greet_and_sample", {"text": "both"})) == "Hello, Ada; model said: pong from the Python host"
        assert sorted(host.methods()) == ["elicitation/create", "sampling/createMessage"]

        assert text_of(client.call_tool("list_roots", {})) == "roots: file:///tmp/modern-a"
        assert client.set_roots({"roots": [{"uri": "file:///tmp/modern-b"}, {"uri": "file:///tmp/modern-c"}]}) is False
        assert text_of(client.call_tool("list_roots", {})) == "roots: file:///tmp/modern-b, file:///tmp/modern-c"

        state = text_of(client.call_tool("state_echo", {}))
        found = re.fullmatch(r"state ok; action accept; ids (\d+) (\d+)", state)
        assert found and found.group(1) != found.group(2), state

        with pytest.raises(mcplug.ProtocolError) as info:
            client.call_tool("endless", {})
        assert "after 16 rounds" in info.value.message
        assert text_of(client.call_tool("echo", {"message": "still here"})) == "Echo: still here"


def test_modern_roots_from_the_handler_and_the_round_limit(modern_server: Dict[str, Any]) -> None:
    host = Host()
    with mcplug.Client.connect(modern_server, handlers=host.handlers(), max_input_rounds=3) as client:
        assert text_of(client.call_tool("list_roots", {})) == "roots: file:///tmp/from-the-py-host"
        host.clear()
        with pytest.raises(mcplug.ProtocolError) as info:
            client.call_tool("endless", {})
        assert "after 3 rounds" in info.value.message
        assert host.methods() == ["roots/list"] * 3


def test_modern_logging_channels_and_tasks(modern_server: Dict[str, Any]) -> None:
    host = Host()
    channel: List[Dict[str, Any]] = []
    permission: List[Dict[str, Any]] = []
    handlers = dict(host.handlers(), **{
        "notifications/claude/channel": channel.append,
        "notifications/claude/channel/permission": permission.append,
    })
    with mcplug.Client.connect(modern_server, handlers=handlers) as client:
        assert text_of(client.call_tool("log_levels", {})) == "logged"
        assert client.set_log_level("info") == "per request"
        client.call_tool("log_levels", {})
        assert wait_until(lambda: "warning line" in host.log_texts(), 5), host.log_texts()
        assert host.log_texts() == ["info line", "warning line"], "nothing before the level was set, no debug line after"

        client.call_tool("channel_push", {"text": "hello from the channel"})
        assert wait_until(lambda: bool(channel), 5)
        assert channel == [{"content": "hello from the channel", "meta": {"chat_id": "42"}}]
        client.notify("notifications/claude/channel/permission_request",
                      {"request_id": "abcde", "tool_name": "Bash", "description": "list", "input_preview": "ls"})
        assert wait_until(lambda: bool(permission), 5)
        assert permission == [{"request_id": "abcde", "behavior": "allow"}]

        assert text_of(client.call_tool("slow_task", {"ms": 300})) == "slow done"
        host.clear()
        assert text_of(client.call_tool("ask_task", {})) == "colour: teal"
        assert [p["message"] for p in host.asked("elicitation/create")] == ["Which colour?"]
        handle = client.call_tool("slow_task", {"ms": 100}, task="handle")
        assert handle["resultType"] == "task" and handle["status"] == "working", handle
        assert wait_until(lambda: client.request("tasks/get", {"taskId": handle["taskId"]})["status"] == "completed", 5)
        with pytest.raises(mcplug.TimeoutError) as info:
            client.call_tool("forever_task", {}, timeout=0.5)
        assert "tasks/cancel" in info.value.message
        assert wait_until(lambda: text_of(client.call_tool("cancelled_tasks", {})) != "", 3)


def test_channels_only_from_servers_that_declare_them(modern_server: Dict[str, Any]) -> None:
    server = dict(modern_server, args=modern_server["args"] + ["--no-channel"])
    host = Host()
    channel: List[Dict[str, Any]] = []
    with mcplug.Client.connect(server, handlers=dict(host.handlers(), **{"notifications/claude/channel": channel.append}), log_level="info") as client:
        client.call_tool("channel_push", {"text": "sneaky"})
        client.call_tool("log_levels", {})  # a later event: once it arrived, the channel one would have
        assert wait_until(lambda: "warning line" in host.log_texts(), 5), host.log_texts()
        assert channel == []


def test_modern_host_errors_and_undeclared_sampling(modern_server: Dict[str, Any]) -> None:
    def refuse(params: Dict[str, Any]) -> Dict[str, Any]:
        raise mcplug.DeniedError("the user rejected sampling")

    def explode(params: Dict[str, Any]) -> Dict[str, Any]:
        raise RuntimeError("the model exploded")

    with mcplug.Client.connect(modern_server, handlers={"sampling/createMessage": refuse}) as client:
        with pytest.raises(mcplug.DeniedError) as info:
            client.call_tool("summarize", {"text": "no"})
        assert info.value.code == -1 and "the user rejected sampling" in info.value.message
    with mcplug.Client.connect(modern_server, handlers={"sampling/createMessage": explode}) as client:
        with pytest.raises(mcplug.DeniedError) as info:
            client.call_tool("summarize", {"text": "no"})
        assert info.value.code == -32603 and "the model exploded" in info.value.message
        assert text_of(client.call_tool("echo", {"message": "after"})) == "Echo: after"

    host = Host()
    with mcplug.Client.connect(modern_server, handlers=host.handlers(sampling=False)) as client:
        with pytest.raises(mcplug.ProtocolError) as proto:
            client.call_tool("sample_anyway", {})
        assert "did not declare the sampling capability" in proto.value.message
        with pytest.raises(mcplug.RpcError) as rpc:
            client.call_tool("summarize", {"text": "x"})
        assert rpc.value.code == -32021 and "sampling" in rpc.value.message
        assert "sampling/createMessage" not in host.methods()


def test_a_host_too_slow_gets_request_expired(modern_server: Dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    events: List[Dict[str, Any]] = []

    def slow(params: Dict[str, Any]) -> Dict[str, Any]:
        time.sleep(1.0)
        return {"action": "accept", "content": {"name": "Late"}}

    caplog.set_level(logging.DEBUG, logger="mcplug")
    handlers = {"elicitation/create": slow, "request_expired": events.append}
    with mcplug.Client.connect(modern_server, handlers=handlers, host_request_timeout=0.4) as client:
        with pytest.raises(mcplug.TimeoutError) as info:
            client.call_tool("greet", {})
        assert "did not answer elicitation/create within 400 ms" in info.value.message
        assert wait_until(lambda: bool(events), 5)
        (event,) = events
        assert event["type"] == "request_expired" and event["method"] == "elicitation/create" and event["id"].startswith("s")
        assert text_of(client.call_tool("echo", {"message": "next"})) == "Echo: next"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "a late answer is no failure"


def test_a_cancelled_call_tells_the_host(modern_server: Dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    events: List[Dict[str, Any]] = []
    asked = threading.Event()
    release = threading.Event()

    def hold(params: Dict[str, Any]) -> Dict[str, Any]:
        asked.set()
        release.wait(10)  # the user takes their time
        return {"action": "accept", "content": {"name": "Too late"}}

    caplog.set_level(logging.DEBUG, logger="mcplug")
    handlers = {"elicitation/create": hold, "request_cancelled": events.append}
    with mcplug.Client.connect(modern_server, handlers=handlers) as client:
        def cancel() -> None:
            asked.wait(10)
            wait_until(lambda: mcplug.cancel("py-greeting"), 3)

        canceller = threading.Thread(target=cancel)
        canceller.start()
        with pytest.raises(mcplug.CancelledError):
            client.call_tool("greet", {}, tag="py-greeting")
        canceller.join()
        release.set()
        assert wait_until(lambda: bool(events), 5)
        (event,) = events
        assert event["type"] == "request_cancelled" and event["method"] == "elicitation/create"
        assert text_of(client.call_tool("echo", {"message": "next"})) == "Echo: next"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "an answer nobody waits for is no failure"


def test_the_same_handlers_in_the_legacy_era(modern_server: Dict[str, Any]) -> None:
    host = Host()
    with mcplug.Client.connect(modern_server, handlers=host.handlers(), options={"protocol_versions": ["2025-11-25"]}) as client:
        assert client.era == "legacy"
        assert text_of(client.call_tool("greet", {})) == "Hello, Ada!"
        assert text_of(client.call_tool("summarize", {"text": "legacy"})) == "model said: pong from the Python host"
        assert text_of(client.call_tool("list_roots", {})) == "roots: file:///tmp/from-the-py-host"
        assert host.methods() == ["elicitation/create", "sampling/createMessage", "roots/list"]


def test_schema_warnings_and_argument_checks_per_call(modern_server: Dict[str, Any]) -> None:
    host = Host()
    with mcplug.Client.connect(modern_server, handlers=host.handlers()) as client:
        client.list_tools()
        assert wait_until(lambda: any(e.get("tool") == "unschemable" for e in host.events), 5), host.events
        (warning,) = [e for e in host.events if e.get("tool") == "unschemable"]
        assert warning["type"] == "warning" and warning["reason"] == "invalid_schema" and warning["schema"] == "outputSchema"
        with pytest.raises(mcplug.InvalidArgumentError) as info:
            client.call_tool("add", {"a": "two", "b": 3}, validate_arguments=True)
        assert "at /a" in info.value.message and info.value.data["tool"] == "add"
        assert "add" not in json.loads(text_of(client.call_tool("calls", {}))), "nothing was sent"
        assert client.call_tool("add", {"a": "two", "b": 3})["isError"] is True
        with pytest.raises(mcplug.InvalidResultError) as bad:
            client.request("tools/call", {"name": "misreport", "arguments": {"city": "Oslo"}})
        assert bad.value.data["result"]["structuredContent"] == {"temperature": "hot", "sky": "clear"}
