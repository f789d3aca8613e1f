"""server-everything through the sync Python API, over stdio, Streamable HTTP and HTTP+SSE (each
test runs once per transport): every always-offered tool called with valid arguments and its
result checked against the tool's source, the generic requests, progress and log messages."""
from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from typing import Any, Dict, Iterator, List

import pytest

import mcplug
from conftest import EVERYTHING_JS, text_of, wait_until

ALWAYS_OFFERED = [
    "echo", "get-sum", "get-structured-content", "get-annotated-message", "get-resource-links",
    "get-resource-reference", "get-tiny-image", "gzip-file-as-resource", "trigger-long-running-operation",
    "toggle-simulated-logging", "toggle-subscriber-updates", "get-env",
]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", params=["stdio", "http", "sse"])
def everything_server(request: pytest.FixtureRequest) -> Iterator[Dict[str, Any]]:
    """server-everything over stdio, or its streamableHttp / sse mode on a port of its own (this
    module's tests run once per transport)."""
    node = shutil.which("node")
    assert node is not None and EVERYTHING_JS.exists(), "run tests/install-deps.sh first"
    env = {"MCPLUG_PY_TEST": "from-pytest"}
    if request.param == "stdio":
        yield {"command": node, "args": [str(EVERYTHING_JS)], "name": "everything", "env": env}
        return
    port = _free_port()
    mode, path = {"http": ("streamableHttp", "/mcp"), "sse": ("sse", "/sse")}[request.param]
    proc = subprocess.Popen([node, str(EVERYTHING_JS), mode], env={**os.environ, **env, "PORT": str(port)},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, f"server-everything ({mode}) exited before listening"
                assert time.monotonic() < deadline, f"server-everything ({mode}) did not listen on {port}"
                time.sleep(0.05)
        yield {"type": request.param, "url": f"http://127.0.0.1:{port}{path}", "name": "everything"}
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def everything(everything_server: Dict[str, Any]) -> Iterator[mcplug.Client]:
    """One connection per transport, shared by the read-only tests."""
    with mcplug.Client.connect(everything_server, connect_timeout=30) as client:
        yield client


def test_negotiates_legacy_2025_11_25(everything: mcplug.Client) -> None:
    assert everything.era == "legacy"
    assert everything.protocol_version == "2025-11-25"
    assert everything.server_info["name"] == "mcp-servers/everything"
    assert "tools" in everything.capabilities and "prompts" in everything.capabilities
    assert everything.instructions and "Everything" in everything.instructions
    assert everything.connect_result["result"]["protocolVersion"] == "2025-11-25"
    assert everything.name == "everything"


def test_lists_every_always_offered_tool(everything: mcplug.Client) -> None:
    tools = {t["name"]: t for t in everything.list_tools(timeout=10)}
    missing = [name for name in ALWAYS_OFFERED if name not in tools]
    assert not missing, f"tools missing from tools/list: {missing}"
    for name in ALWAYS_OFFERED:
        assert tools[name]["inputSchema"]["type"] == "object", name
    assert tools["echo"]["annotations"]["readOnlyHint"] is True
    assert "outputSchema" in tools["get-structured-content"]


def test_echo(everything: mcplug.Client) -> None:
    result = everything.call_tool("echo", {"message": "hi"}, timeout=10)
    assert result["content"] == [{"type": "text", "text": "Echo: hi"}]
    assert not result.get("isError")


def test_echo_keeps_unicode(everything: mcplug.Client) -> None:
    message = "héllo ✓ 𝄞 \"quoted\" \n newline"
    assert text_of(everything.call_tool("echo", {"message": message})) == "Echo: " + message


def test_get_sum(everything: mcplug.Client) -> None:
    assert text_of(everything.call_tool("get-sum", {"a": 2, "b": 3})) == "The sum of 2 and 3 is 5."
    assert text_of(everything.call_tool("get-sum", {"a": 1.5, "b": -4})) == "The sum of 1.5 and -4 is -2.5."


def _check_schema(value: Dict[str, Any], schema: Dict[str, Any]) -> None:
    """The subset of JSON Schema the output schema uses: object, required, property types."""
    types: Dict[str, Any] = {"number": (int, float), "string": str, "integer": int, "boolean": bool, "object": dict, "array": list}
    assert schema["type"] == "object" and isinstance(value, dict)
    for key in schema.get("required", []):
        assert key in value, f"required {key!r} missing from {value}"
    for key, prop in schema.get("properties", {}).items():
        if key in value and "type" in prop:
            assert isinstance(value[key], types[prop["type"]]), (key, value[key], prop)


@pytest.mark.parametrize(
    "location, expected",
    [
        ("New York", {"temperature": 33, "conditions": "Cloudy", "humidity": 82}),
        ("Chicago", {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}),
        ("Los Angeles", {"temperature": 73, "conditions": "Sunny / Clear", "humidity": 48}),
    ],
)
def test_get_structured_content(everything: mcplug.Client, location: str, expected: Dict[str, Any]) -> None:
    result = everything.call_tool("get-structured-content", {"location": location})
    assert result["structuredContent"] == expected
    assert json.loads(text_of(result)) == expected  # the backward-compatible text block
    schema = next(t for t in everything.list_tools() if t["name"] == "get-structured-content")["outputSchema"]
    assert set(schema["required"]) == {"temperature", "conditions", "humidity"}
    _check_schema(result["structuredContent"], schema)


def test_get_annotated_message(everything: mcplug.Client) -> None:
    result = everything.call_tool("get-annotated-message", {"messageType": "error", "includeImage": True})
    text, image = result["content"]
    assert text["text"] == "Error: Operation failed"
    assert text["annotations"] == {"priority": 1, "audience": ["user", "assistant"]}
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    assert image["annotations"] == {"priority": 0.5, "audience": ["user"]}
    success = everything.call_tool("get-annotated-message", {"messageType": "success"})
    assert success["content"] == [
        {"type": "text", "text": "Operation completed successfully", "annotations": {"priority": 0.7, "audience": ["user"]}}
    ]
    debug = everything.call_tool("get-annotated-message", {"messageType": "debug"})["content"][0]
    assert debug["annotations"] == {"priority": 0.3, "audience": ["assistant"]}


def test_get_resource_links(everything: mcplug.Client) -> None:
    result = everything.call_tool("get-resource-links", {"count": 3})
    intro, *links = result["content"]
    assert intro == {"type": "text", "text": "Here are 3 resource links to resources available in this server:"}
    assert [link["type"] for link in links] == ["resource_link"] * 3
    # Even ids are text resources, odd ids blobs (as the tool's source does it).
    assert [link["uri"] for link in links] == [
        "demo://resource/dynamic/blob/1", "demo://resource/dynamic/text/2", "demo://resource/dynamic/blob/3",
    ]
    assert [link["name"] for link in links] == ["Blob Resource 1", "Text Resource 2", "Blob Resource 3"]
    assert links[1]["description"] == "Resource 2: plaintext resource"
    assert all(link["mimeType"] == "text/plain" for link in links)
    # A link is readable with resources/read.
    read = everything.request("resources/read", {"uri": links[1]["uri"]})
    assert read["contents"][0]["text"].startswith("Resource 2: This is a plaintext resource created at ")


def test_get_resource_reference(everything: mcplug.Client) -> None:
    result = everything.call_tool("get-resource-reference", {"resourceType": "Text", "resourceId": 2})
    first, embedded, last = result["content"]
    assert first == {"type": "text", "text": "Returning resource reference for Resource 2:"}
    assert embedded["type"] == "resource"
    assert embedded["resource"]["uri"] == "demo://resource/dynamic/text/2"
    assert embedded["resource"]["mimeType"] == "text/plain"
    assert embedded["resource"]["text"].startswith("Resource 2: This is a plaintext resource created at ")
    assert last["text"] == "You can access this resource using the URI: demo://resource/dynamic/text/2"
    blob = everything.call_tool("get-resource-reference", {"resourceType": "Blob", "resourceId": 5})["content"][1]
    decoded = base64.b64decode(blob["resource"]["blob"]).decode()
    assert decoded.startswith("Resource 5: This is a base64 blob created at ")


def test_get_tiny_image(everything: mcplug.Client) -> None:
    before, image, after = everything.call_tool("get-tiny-image")["content"]
    assert before == {"type": "text", "text": "Here's the image you requested:"}
    assert after == {"type": "text", "text": "The image above is the MCP logo."}
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"], validate=True).startswith(PNG_SIGNATURE)


def test_gzip_file_as_resource(everything: mcplug.Client) -> None:
    # A data: URI keeps the test off the network.
    data = "data:text/plain;base64," + base64.b64encode(b"hello mcplug").decode()
    embedded = everything.call_tool("gzip-file-as-resource", {"name": "py-a.txt.gz", "data": data, "outputType": "resource"})
    resource = embedded["content"][0]["resource"]
    assert resource["uri"] == "demo://resource/session/py-a.txt.gz"
    assert resource["mimeType"] == "application/gzip"
    assert gzip.decompress(base64.b64decode(resource["blob"])) == b"hello mcplug"

    linked = everything.call_tool("gzip-file-as-resource", {"name": "py-b.txt.gz", "data": data, "outputType": "resourceLink"})
    (link,) = linked["content"]
    assert link["type"] == "resource_link" and link["uri"] == "demo://resource/session/py-b.txt.gz"
    read = everything.request("resources/read", {"uri": link["uri"]})
    assert gzip.decompress(base64.b64decode(read["contents"][0]["blob"])) == b"hello mcplug"


def test_trigger_long_running_operation_result(everything: mcplug.Client) -> None:
    result = everything.call_tool("trigger-long-running-operation", {"duration": 0.2, "steps": 2}, timeout=10)
    assert text_of(result) == "Long running operation completed. Duration: 0.2 seconds, Steps: 2."


def test_toggles_start_then_stop(everything_server: Dict[str, Any]) -> None:
    # Its own connection: simulated logging would keep talking to the shared one.
    with mcplug.Client.connect(everything_server) as client:
        for tool, started in (
            ("toggle-simulated-logging", "Started simulated, random-leveled logging"),
            ("toggle-subscriber-updates", "Started simulated resource updated notifications"),
        ):
            assert text_of(client.call_tool(tool)).startswith(started)
            assert text_of(client.call_tool(tool)).startswith("Stopped simulated")


def test_get_env_sees_the_configured_environment(everything: mcplug.Client) -> None:
    env = json.loads(text_of(everything.call_tool("get-env")))
    assert env["MCPLUG_PY_TEST"] == "from-pytest"


def test_unknown_tool_is_an_error_result_and_loses_nothing(everything: mcplug.Client) -> None:
    # server-everything reports an unknown tool as an isError result, not a JSON-RPC error.
    result = everything.call_tool("no-such-tool", {})
    assert result["isError"] is True
    assert "no-such-tool" in text_of(result)
    assert text_of(everything.call_tool("echo", {"message": "still here"})) == "Echo: still here"


# -- generic requests --------------------------------------------------------------------------


def test_resources_list_and_read(everything: mcplug.Client) -> None:
    resources = everything.request("resources/list")["resources"]
    uris = [r["uri"] for r in resources]
    assert "demo://resource/static/document/architecture.md" in uris
    # Static documents, plus session resources other tests may have made (gzip-file-as-resource).
    assert all(u.startswith(("demo://resource/static/document/", "demo://resource/session/")) for u in uris), uris
    assert everything.request("resources/list", all_pages=True)["resources"] == resources
    read = everything.request("resources/read", {"uri": "demo://resource/static/document/architecture.md"})
    (content,) = read["contents"]
    assert content["uri"] == "demo://resource/static/document/architecture.md"
    assert content["mimeType"] == "text/markdown"
    assert len(content["text"]) > 100


def test_resource_templates_list(everything: mcplug.Client) -> None:
    templates = everything.request("resources/templates/list", all_pages=True)["resourceTemplates"]
    assert {t["uriTemplate"] for t in templates} == {
        "demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/{resourceId}",
    }
    read = everything.request("resources/read", {"uri": "demo://resource/dynamic/text/7"})
    assert read["contents"][0]["text"].startswith("Resource 7: This is a plaintext resource created at ")


def test_prompts_list_and_get(everything: mcplug.Client) -> None:
    names = [p["name"] for p in everything.request("prompts/list")["prompts"]]
    assert names == ["simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"]
    simple = everything.request("prompts/get", {"name": "simple-prompt"})
    assert simple["messages"] == [{"role": "user", "content": {"type": "text", "text": "This is a simple prompt without arguments."}}]
    args = everything.request("prompts/get", {"name": "args-prompt", "arguments": {"city": "Paris", "state": "TX"}})
    assert args["messages"][0]["content"]["text"] == "What's weather in Paris, TX?"


def test_completion_complete(everything: mcplug.Client) -> None:
    result = everything.request(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "completable-prompt"}, "argument": {"name": "department", "value": "S"}},
    )
    assert result["completion"]["values"] == ["Sales", "Support"]
    result = everything.request(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "completable-prompt"},
            "argument": {"name": "name", "value": ""},
            "context": {"arguments": {"department": "Engineering"}},
        },
    )
    assert result["completion"]["values"] == ["Alice", "Bob", "Charlie"]


def test_named_methods_for_resources_prompts_and_completions(everything: mcplug.Client) -> None:
    """The Client's own methods give what the raw requests above give, all pages followed."""
    resources = everything.list_resources(cache=False)
    assert resources == everything.request("resources/list", all_pages=True)["resources"]
    uri = "demo://resource/static/document/architecture.md"
    assert uri in [r["uri"] for r in resources]
    assert everything.read_resource(uri) == everything.request("resources/read", {"uri": uri})
    assert sorted(t["uriTemplate"] for t in everything.list_resource_templates()) == [
        "demo://resource/dynamic/blob/{resourceId}", "demo://resource/dynamic/text/{resourceId}",
    ]
    assert [p["name"] for p in everything.list_prompts()] == ["simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"]
    got = everything.get_prompt("args-prompt", {"city": "Paris", "state": "TX"})
    assert got["messages"][0]["content"]["text"] == "What's weather in Paris, TX?"
    prompt = {"type": "ref/prompt", "name": "completable-prompt"}
    assert everything.complete(prompt, {"name": "department", "value": "S"})["values"] == ["Sales", "Support"]
    named = everything.complete(prompt, {"name": "name", "value": "A"}, context={"department": "Engineering"})
    assert named["values"] == ["Alice"]
    template = {"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"}
    assert everything.complete(template, {"name": "resourceId", "value": "42"})["values"] == ["42"]
    assert everything.ping(timeout=5) is None


def test_named_methods_name_what_was_wrong(everything: mcplug.Client) -> None:
    with pytest.raises(mcplug.InvalidArgumentError, match="ref"):
        everything.complete({"type": "ref/tool", "name": "x"}, {"name": "a", "value": ""})
    with pytest.raises(mcplug.InvalidArgumentError, match="argument"):
        everything.complete({"type": "ref/prompt", "name": "x"}, {"name": "a"})
    with pytest.raises(mcplug.InvalidArgumentError, match="uri"):
        everything.read_resource(7)  # type: ignore[arg-type]
    with pytest.raises(mcplug.InvalidArgumentError, match="arguments"):
        everything.get_prompt("args-prompt", ["Paris"])  # type: ignore[arg-type]
    with pytest.raises(mcplug.RpcError):
        everything.get_prompt("no-such-prompt")
    assert everything.list_prompts()  # the connection stays usable


def test_ping_and_unknown_method(everything: mcplug.Client) -> None:
    assert everything.request("ping") == {}
    with pytest.raises(mcplug.RpcError) as info:
        everything.request("no/such/method")
    assert info.value.code == -32601
    assert info.value.kind == "rpc"


def test_all_pages_on_a_non_list_method_is_invalid(everything: mcplug.Client) -> None:
    with pytest.raises(mcplug.InvalidArgumentError) as info:
        everything.request("ping", all_pages=True)
    assert "all_pages" in info.value.message


# -- progress and log messages -------------------------------------------------------------------


def test_progress_callback_gets_every_step_before_the_call_returns(everything: mcplug.Client) -> None:
    seen: List[Dict[str, Any]] = []
    result = everything.call_tool(
        "trigger-long-running-operation", {"duration": 0.3, "steps": 3}, timeout=10, progress=seen.append,
    )
    assert text_of(result) == "Long running operation completed. Duration: 0.3 seconds, Steps: 3."
    assert [(p["progress"], p["total"]) for p in seen] == [(1, 3), (2, 3), (3, 3)]
    assert len({json.dumps(p["progressToken"]) for p in seen}) == 1


def test_a_slow_progress_callback_still_finishes_before_the_call_returns(everything: mcplug.Client) -> None:
    seen: List[int] = []

    def slow(params: Dict[str, Any]) -> None:
        time.sleep(0.1)  # the last step's callback is still running when the result arrives
        seen.append(params["progress"])

    everything.call_tool("trigger-long-running-operation", {"duration": 0.2, "steps": 2}, timeout=10, progress=slow)
    assert seen == [1, 2]


def test_progress_events_carry_the_tag(everything_server: Dict[str, Any]) -> None:
    with mcplug.Client.connect(everything_server) as client:
        client.call_tool("trigger-long-running-operation", {"duration": 0.2, "steps": 2}, tag="py-progress", progress=True)
        progress: List[Dict[str, Any]] = []
        while len(progress) < 2:
            event = client.next_event(timeout=5)
            assert event is not None, f"only {len(progress)} progress events arrived"
            if event.get("method") == "notifications/progress":
                progress.append(event)
        assert all(e["tag"] == "py-progress" and e["type"] == "notification" for e in progress)
        assert [e["params"]["progress"] for e in progress] == [1, 2]


def test_log_messages_reach_the_handler(everything_server: Dict[str, Any]) -> None:
    messages: List[Dict[str, Any]] = []
    arrived = threading.Event()

    def on_message(params: Dict[str, Any]) -> None:
        messages.append(params)
        arrived.set()

    with mcplug.Client.connect(everything_server, handlers={"notifications/message": on_message}) as client:
        assert client.request("logging/setLevel", {"level": "debug"}) == {}
        client.call_tool("toggle-simulated-logging")
        assert arrived.wait(10), "no notifications/message within 10 s of toggle-simulated-logging"
        client.call_tool("toggle-simulated-logging")
    levels = {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}
    assert messages[0]["level"] in levels
    assert "message" in messages[0]["data"]


def test_log_messages_as_events_without_a_handler(everything_server: Dict[str, Any]) -> None:
    with mcplug.Client.connect(everything_server) as client:
        client.call_tool("toggle-simulated-logging")
        found = None
        for _ in range(200):
            event = client.next_event(timeout=10)
            assert event is not None, "no notifications/message event within 10 s"
            if event.get("method") == "notifications/message":
                found = event
                break
        assert found is not None and found["type"] == "notification"
        assert "level" in found["params"] and "data" in found["params"]


def test_star_handler_gets_stderr(everything_server: Dict[str, Any]) -> None:
    if "command" not in everything_server:
        pytest.skip("a remote server's stderr is not the client's to read")
    events: List[Dict[str, Any]] = []
    with mcplug.Client.connect(everything_server, handlers={"*": events.append}):
        assert wait_until(lambda: any(e["type"] == "stderr" for e in events), 10)
    line = next(e for e in events if e["type"] == "stderr")["line"]
    assert line == "Starting default (STDIO) server..."


def test_roots_handler_answers_the_server(everything_server: Dict[str, Any]) -> None:
    logs: List[str] = []
    roots = {"roots": [{"uri": "file:///tmp/mcplug-py-root", "name": "py-root"}]}
    handlers = {"roots/list": lambda params: roots, "notifications/message": lambda p: logs.append(str(p.get("data")))}
    with mcplug.Client.connect(everything_server, handlers=handlers) as client:
        assert wait_until(lambda: any("Roots updated: 1 root(s)" in m for m in logs), 10), logs
        text = text_of(client.call_tool("get-roots-list"))
    assert "Current MCP Roots (1 total)" in text
    assert "py-root" in text and "file:///tmp/mcplug-py-root" in text


def test_a_raising_request_handler_becomes_a_json_rpc_error(everything_server: Dict[str, Any]) -> None:
    if "command" not in everything_server:
        pytest.skip("server-everything reports the error on its stderr, which only stdio shows the client")
    stderr: List[str] = []

    def boom(params: Any) -> Any:
        raise RuntimeError("no roots for you")

    handlers = {"roots/list": boom, "*": lambda e: stderr.append(e.get("line", "")) if e["type"] == "stderr" else None}
    with mcplug.Client.connect(everything_server, handlers=handlers) as client:
        assert wait_until(lambda: any("no roots for you" in line for line in stderr), 10), stderr
        assert text_of(client.call_tool("echo", {"message": "ok"})) == "Echo: ok"  # the pump lives on
    failure = next(line for line in stderr if "no roots for you" in line)
    assert "-32603" in failure


def test_answering_a_server_request_by_hand(everything_server: Dict[str, Any]) -> None:
    # The capability declared in options without a handler: the request comes to next_event.
    with mcplug.Client.connect(everything_server, options={"capabilities": {"roots": {}}}) as client:
        request = None
        for _ in range(50):
            event = client.next_event(timeout=10)
            assert event is not None, "no roots/list request within 10 s"
            if event["type"] == "request":
                request = event
                break
        assert request is not None and request["method"] == "roots/list"
        client.respond(request["id"], {"roots": [{"uri": "file:///tmp/by-hand", "name": "by-hand"}]})
        with pytest.raises(mcplug.InvalidArgumentError, match="no server request"):
            client.respond(request["id"], {"roots": []})  # answered already
        text = text_of(client.call_tool("get-roots-list"))
        assert "Current MCP Roots (1 total)" in text and "file:///tmp/by-hand" in text
