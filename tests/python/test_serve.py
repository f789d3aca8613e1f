"""`mcplug serve` from the other side: the Python SDK's own client (mcp 2.3, `ClientSession` over
`stdio_client`) talks to `mcplug serve`, which fronts server-everything (and the 2026-07-28 test
server) over stdio. What the client sees must be what the upstream serves — tools as listed, results
as sent, progress under its own token, sampling and elicitation asked of it — and nothing may be
left behind when it goes away."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, AsyncIterator, Dict, List, Optional

import pytest

from conftest import EVERYTHING_JS, MODERN_SERVER, REPO, VENV_PYTHON, _require, wait_until

mcp = pytest.importorskip("mcp", reason="the Python SDK (mcp) runs in .deps/venv")
from mcp import ClientSession, StdioServerParameters, types  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

MCPLUG_BIN = REPO / "target" / "release" / "mcplug"


def _config(tmp_path: Path, servers: Dict[str, Any]) -> Path:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def _everything() -> Dict[str, Any]:
    _require(EVERYTHING_JS, "bash tests/install-deps.sh")
    return {"command": "node", "args": [str(EVERYTHING_JS)]}


def _params(tmp_path: Path, servers: Dict[str, Any], *extra: str, log: str = "warn") -> StdioServerParameters:
    _require(MCPLUG_BIN, "cargo build --release")
    config = _config(tmp_path, servers)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return StdioServerParameters(
        command=str(MCPLUG_BIN),
        args=["serve", "--strict-mcp-config", "--mcp-config", str(config), *extra],
        env={"HOME": str(home), "PATH": os.environ["PATH"], "MCPLUG_LOG": log},
        cwd=str(tmp_path),
    )


@contextlib.asynccontextmanager
async def _stdio(params: StdioServerParameters) -> AsyncIterator[Any]:
    """`stdio_client` to `mcplug serve`, its debug log kept beside and printed if the test
    fails inside (a stall shows where it stood)."""
    log = Path(params.cwd or ".") / "serve-debug.log"
    params = params.model_copy(update={"env": {**(params.env or {}), "MCPLUG_LOG": "debug"}})
    with log.open("w") as errlog:
        try:
            async with stdio_client(params, errlog=errlog) as streams:
                yield streams
        except BaseException:
            errlog.flush()
            print(f"--- mcplug serve's log ({log}):\n" + log.read_text(errors="replace")[-20000:])
            raise


async def _sampled(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    asked = params.messages[0].content
    text = asked.text if isinstance(asked, types.TextContent) else "?"
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=f"sampled: {text}"), model="test-model"
    )


async def _elicited(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


def _run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 45))


def _texts(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def test_the_pool_is_served_as_the_upstream_lists_and_answers(tmp_path: Path) -> None:
    async def body() -> None:
        async with _stdio(_params(tmp_path, {"everything": _everything()})) as (r, w):
            async with ClientSession(r, w) as s:
                init = await s.initialize()
                assert init.server_info.name == "mcplug"
                tools = {t.name: t for t in (await s.list_tools()).tools}
                assert "mcp__everything__echo" in tools and "mcp__everything__get-sum" in tools
                # Listed as the upstream listed it, but for the name.
                structured = tools["mcp__everything__get-structured-content"]
                assert structured.output_schema is not None
                assert structured.input_schema["properties"]["location"]["type"] == "string"
                echo = await s.call_tool("mcp__everything__echo", {"message": "hi"})
                assert _texts(echo) == "Echo: hi" and not echo.is_error
                total = await s.call_tool("mcp__everything__get-sum", {"a": 2, "b": 3})
                assert "5" in _texts(total)
                unknown = None
                try:
                    await s.call_tool("mcp__everything__nope", {})
                except Exception as e:  # noqa: BLE001 - the SDK raises its MCPError
                    unknown = str(e)
                assert unknown is not None and "unknown tool" in unknown
                # Resources, templates, prompts, completion: relayed to the server that has them.
                resources = (await s.list_resources()).resources
                assert any(str(x.uri).startswith("demo://resource/static/document/") for x in resources)
                read = await s.read_resource(resources[0].uri)
                assert read.contents and str(read.contents[0].uri) == str(resources[0].uri)
                templates = (await s.list_resource_templates()).resource_templates
                assert any("{resourceId}" in t.uri_template for t in templates)
                dynamic = await s.read_resource("demo://resource/dynamic/text/7")
                assert "7" in str(dynamic.contents[0].uri)
                prompts = {p.name for p in (await s.list_prompts()).prompts}
                assert "mcp__everything__simple-prompt" in prompts
                got = await s.get_prompt("mcp__everything__args-prompt", {"city": "Paris"})
                assert "Paris" in json.dumps([m.content.model_dump() for m in got.messages])
                done = await s.complete(
                    types.PromptReference(type="ref/prompt", name="mcp__everything__completable-prompt"),
                    {"name": "department", "value": "E"},
                )
                assert "Engineering" in done.completion.values

    _run(body())


def _time() -> Dict[str, Any]:
    """PyPI's mcp-server-time (tests/deps/requirements.txt), its local zone fixed."""
    binary = VENV_PYTHON.parent / "mcp-server-time"
    _require(binary, "bash tests/install-deps.sh")
    return {"command": str(binary), "args": ["--local-timezone", "UTC"]}


def test_two_real_servers_as_one_everything_and_mcp_server_time(tmp_path: Path) -> None:
    async def body() -> None:
        servers = {"everything": _everything(), "time": _time()}
        async with _stdio(_params(tmp_path, servers)) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                tools = {t.name for t in (await s.list_tools()).tools}
                assert {"mcp__time__get_current_time", "mcp__time__convert_time", "mcp__everything__echo"} <= tools
                now = await s.call_tool("mcp__time__get_current_time", {"timezone": "Europe/Paris"})
                assert not now.is_error, now
                assert json.loads(_texts(now))["timezone"] == "Europe/Paris"
                converted = await s.call_tool("mcp__time__convert_time", {
                    "source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
                assert json.loads(_texts(converted))["target"]["datetime"].startswith(
                    json.loads(_texts(converted))["source"]["datetime"][:10]), converted
                assert "T21:00:00" in _texts(converted), _texts(converted)
                # Its errors come back as it wrote them: a tool error, not a protocol one.
                wrong = await s.call_tool("mcp__time__get_current_time", {"timezone": "Nowhere/Atlantis"})
                assert wrong.is_error and "Atlantis" in _texts(wrong), wrong
                assert _texts(await s.call_tool("mcp__everything__echo", {"message": "both"})) == "Echo: both"

    _run(body())


def test_each_upstream_request_names_the_client_it_is_made_for(tmp_path: Path) -> None:
    """A per-client identity flows from the session to the manager's calls: each upstream
    request made for a client names it (its name, version and session) in the log."""
    log = tmp_path / "serve.log"

    async def body() -> None:
        params = _params(tmp_path, {"everything": _everything()}, log="mcplug::client=debug")
        with log.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w):
                me = types.Implementation(name="identity-test", version="9.9")
                async with ClientSession(r, w, client_info=me) as s:
                    await s.initialize()
                    await s.call_tool("mcp__everything__echo", {"message": "who"})
                    await s.list_resources()
                    await s.read_resource(str((await s.list_resources()).resources[0].uri))

    _run(body())
    lines = log.read_text().splitlines()
    called = [l for l in lines if 'method="tools/call"' in l]
    read = [l for l in lines if 'method="resources/read"' in l]
    assert called and all('caller="identity-test 9.9 (session' in l for l in called), called
    assert read and all('caller="identity-test 9.9 (session' in l for l in read), read
    # What the gateway does for itself (connecting, listing) names no client.
    assert not any("caller=" in l for l in lines if 'method="initialize"' in l)


def test_progress_reaches_the_client_under_its_own_token_before_the_result(tmp_path: Path) -> None:
    async def body() -> None:
        async with _stdio(_params(tmp_path, {"everything": _everything()})) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                seen: List[float] = []

                async def progress(value: float, total: Optional[float], message: Optional[str]) -> None:
                    seen.append(value)

                result = await s.call_tool(
                    "mcp__everything__trigger-long-running-operation",
                    {"duration": 1, "steps": 4},
                    progress_callback=progress,
                )
                assert "completed" in _texts(result)
                assert seen == [1, 2, 3, 4]

    _run(body())


def test_sampling_and_elicitation_are_asked_of_the_client_whose_call_runs(tmp_path: Path) -> None:
    async def body() -> None:
        async with _stdio(_params(tmp_path, {"everything": _everything()})) as (r, w):
            async with ClientSession(r, w, sampling_callback=_sampled, elicitation_callback=_elicited) as s:
                await s.initialize()
                names = {t.name for t in (await s.list_tools()).tools}
                assert "mcp__everything__trigger-sampling-request" in names
                sampled = await s.call_tool("mcp__everything__trigger-sampling-request", {"prompt": "hello"})
                assert "sampled: " in _texts(sampled) and "test-model" in _texts(sampled)
                elicited = await s.call_tool("mcp__everything__trigger-elicitation-request", {})
                assert "Ada" in _texts(elicited)

    _run(body())


def test_a_client_without_sampling_gets_an_answer_not_a_hang(tmp_path: Path) -> None:
    async def body() -> None:
        async with _stdio(_params(tmp_path, {"everything": _everything()})) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                started = time.monotonic()
                outcome: str
                try:
                    result = await s.call_tool("mcp__everything__trigger-sampling-request", {"prompt": "x"})
                    outcome = _texts(result)
                    assert result.is_error, outcome
                except Exception as e:  # noqa: BLE001
                    outcome = str(e)
                assert "sampling" in outcome
                assert time.monotonic() - started < 10

    _run(body())


def test_logging_is_fanned_out_and_log_messages_come_back_named_by_server(tmp_path: Path) -> None:
    async def body() -> None:
        got: List[types.LoggingMessageNotificationParams] = []

        async def logged(params: types.LoggingMessageNotificationParams) -> None:
            got.append(params)

        async with _stdio(_params(tmp_path, {"everything": _everything()})) as (r, w):
            async with ClientSession(r, w, logging_callback=logged) as s:
                await s.initialize()
                await s.set_logging_level("debug")
                await s.call_tool("mcp__everything__toggle-simulated-logging", {})
                await asyncio.sleep(0)
                for _ in range(100):
                    if got:
                        break
                    await asyncio.sleep(0.1)
                await s.call_tool("mcp__everything__toggle-simulated-logging", {})
        assert got, "a log message of the upstream reached the client"
        assert got[0].logger == "everything"

    _run(body())


def test_unprefixed_names_are_the_servers_own_and_the_first_server_wins(tmp_path: Path) -> None:
    async def body() -> None:
        servers = {"first": _everything(), "second": _everything()}
        async with _stdio(_params(tmp_path, servers, "--names", "unprefixed")) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                names = [t.name for t in (await s.list_tools()).tools]
                assert names.count("echo") == 1 and "get-sum" in names
                assert not any(n.startswith("mcp__") for n in names)
                echo = await s.call_tool("echo", {"message": "one"})
                assert _texts(echo) == "Echo: one"

    _run(body())


def test_a_2026_server_serves_a_legacy_client_sampling_included(tmp_path: Path) -> None:
    """The era bridge: the Python SDK client negotiates 2025-11-25 with mcplug serve, whose
    upstream speaks only 2026-07-28; the upstream's sampling (an InputRequiredResult round on its
    side) reaches the client as a legacy server-to-client request."""
    _require(VENV_PYTHON, "bash tests/install-deps.sh")
    modern = {"command": str(VENV_PYTHON), "args": [str(MODERN_SERVER)]}

    async def body() -> None:
        async with _stdio(_params(tmp_path, {"modern": modern})) as (r, w):
            async with ClientSession(r, w, sampling_callback=_sampled) as s:
                init = await s.initialize()
                assert init.protocol_version == "2025-11-25"
                echo = await s.call_tool("mcp__modern__echo", {"message": "bridged"})
                assert _texts(echo) == "Echo: bridged"
                summary = await s.call_tool("mcp__modern__summarize", {"text": "long story"})
                assert "model said: sampled: " in _texts(summary)

    _run(body())


def test_mcplugs_own_client_through_the_gateway(tmp_path: Path) -> None:
    import mcplug

    params = _params(tmp_path, {"everything": _everything()})
    spec = {"command": params.command, "args": params.args, "env": params.env, "cwd": params.cwd}
    # Both eras; in 2025-11-25 a tool that requires a task runs as one through the gateway
    # (tasks/get and tasks/result relayed), in 2026-07-28 the gateway awaits it upstream.
    for versions, era in ((["2025-11-25"], "legacy"), (None, "modern")):
        options = {"protocol_versions": versions} if versions else None
        with mcplug.Client.connect(spec, connect_timeout=30, options=options) as c:
            assert c.era == era, (c.era, c.protocol_version)
            names = [t["name"] for t in c.list_tools()]
            assert "mcp__everything__echo" in names
            result = c.call_tool("mcp__everything__echo", {"message": "nested"})
            assert result["content"][0]["text"] == "Echo: nested"
            research = c.call_tool("mcp__everything__simulate-research-query", {"topic": "rust"})
            assert research["content"][0]["text"].startswith("# Research Report: rust"), research


def _children(pid: int) -> List[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def test_a_client_that_goes_away_mid_call_leaves_nothing_behind(tmp_path: Path) -> None:
    """The client closes its end while a long call runs: the call is cancelled upstream, mcplug
    serve stops its upstream and exits."""
    params = _params(tmp_path, {"everything": _everything()}, log="mcplug::wire=trace")
    wire = tmp_path / "wire.log"
    child = subprocess.Popen(
        [params.command, *params.args], env=params.env, cwd=params.cwd,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=wire.open("wb"),
    )
    assert child.stdin is not None and child.stdout is not None

    def send(message: Dict[str, Any]) -> None:
        assert child.stdin is not None
        child.stdin.write((json.dumps(message) + "\n").encode())
        child.stdin.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    first = json.loads(child.stdout.readline())
    assert first.get("id") == 1, f"the first message is the answer to initialize: {first}"
    assert first["result"]["protocolVersion"] == "2025-11-25"
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    upstream = _children(child.pid)
    assert upstream, "mcplug serve runs its upstream"
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "mcp__everything__trigger-long-running-operation", "arguments": {"duration": 30, "steps": 3}}})
    # The client goes once the call is upstream (before that, there is nothing to cancel there).
    assert wait_until(lambda: _sent_upstream(wire, "tools/call"), 15, 0.05), "the call went upstream"
    child.stdin.close()
    assert child.wait(15) == 0, "mcplug serve exits once its client has gone"
    assert wait_until(lambda: not any(_alive(p) for p in upstream), 10, 0.05), "no upstream is left"
    assert _cancelled_upstream(wire), "the call in flight was cancelled upstream"


def _sent_upstream(wire: Path, method: str) -> bool:
    """Whether the wire log shows a `method` message sent to the upstream server."""
    return any(
        'server="everything"' in line and "-> " in line and f'"method":"{method}"' in line.replace(" ", "")
        for line in wire.read_text(errors="replace").splitlines()
    )


def _cancelled_upstream(wire: Path) -> bool:
    """Whether the wire log shows a notifications/cancelled sent to the upstream server."""
    return _sent_upstream(wire, "notifications/cancelled")


def test_a_cancelled_call_is_cancelled_upstream_and_the_next_one_answered(tmp_path: Path) -> None:
    wire = tmp_path / "wire.log"

    async def body() -> None:
        params = _params(tmp_path, {"everything": _everything()}, log="mcplug::wire=trace")
        with wire.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w):
                async with ClientSession(r, w) as s:
                    await s.initialize()
                    long = asyncio.ensure_future(
                        s.call_tool("mcp__everything__trigger-long-running-operation", {"duration": 30, "steps": 3})
                    )
                    await asyncio.sleep(0.5)
                    long.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await long
                    echo = await s.call_tool("mcp__everything__echo", {"message": "after"})
                    assert _texts(echo) == "Echo: after"
                    assert wait_until(lambda: _cancelled_upstream(wire), 5, 0.05), "cancelled upstream"

    _run(body())


# --- Streamable HTTP (`mcplug serve --http`) ------------------------------------------------

import urllib.error  # noqa: E402
import urllib.request  # noqa: E402
from typing import Iterator, Tuple  # noqa: E402


@contextlib.contextmanager
def _served_http(tmp_path: Path, servers: Dict[str, Any], *extra: str) -> Iterator[str]:
    """`mcplug serve --http 127.0.0.1:0`; yields the URL it prints; stops it with SIGTERM and
    checks that it exits cleanly, its upstreams stopped."""
    params = _params(tmp_path, servers, "--http", "127.0.0.1:0", *extra)
    child = subprocess.Popen(
        [params.command, *params.args], env=params.env, cwd=params.cwd,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        assert child.stdout is not None
        url = child.stdout.readline().decode().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp"), url
        upstream = _children(child.pid)
        yield url
        child.send_signal(signal.SIGTERM)
        assert child.wait(15) == 0, "mcplug serve --http exits on SIGTERM"
        assert wait_until(lambda: not any(_alive(p) for p in upstream), 10, 0.05), "no upstream is left"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def _post(url: str, body: Any, headers: Optional[Dict[str, str]] = None) -> Tuple[int, Dict[str, str], str]:
    h = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    h.update(headers or {})
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=h, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


async def _calls_progress_sampling_elicitation(s: ClientSession, via: str) -> None:
    """What every transport must carry through the gateway: the handshake, a call, progress
    in order before the answer, and sampling and elicitation asked of this client."""
    init = await s.initialize()
    assert init.server_info.name == "mcplug"
    assert "mcp__everything__echo" in {t.name for t in (await s.list_tools()).tools}
    assert _texts(await s.call_tool("mcp__everything__echo", {"message": via})) == f"Echo: {via}"
    seen: List[float] = []

    async def progress(value: float, total: Optional[float], message: Optional[str]) -> None:
        seen.append(value)

    long = await s.call_tool(
        "mcp__everything__trigger-long-running-operation", {"duration": 1, "steps": 3}, progress_callback=progress,
    )
    assert "completed" in _texts(long) and seen == [1, 2, 3], seen
    assert "sampled: " in _texts(await s.call_tool("mcp__everything__trigger-sampling-request", {"prompt": via}))
    assert "Ada" in _texts(await s.call_tool("mcp__everything__trigger-elicitation-request", {}))


def test_the_python_sdk_client_over_streamable_http(tmp_path: Path) -> None:
    from mcp.client.streamable_http import streamable_http_client

    async def body(url: str) -> None:
        async with streamable_http_client(url) as streams:
            async with ClientSession(streams[0], streams[1], sampling_callback=_sampled, elicitation_callback=_elicited) as s:
                await _calls_progress_sampling_elicitation(s, "over http")
                resources = (await s.list_resources()).resources
                assert resources and (await s.read_resource(resources[0].uri)).contents

    with _served_http(tmp_path, {"everything": _everything()}) as url:
        _run(body(url))


def test_an_old_client_over_http_sse_at_sse(tmp_path: Path) -> None:
    """The 2024-11-05 transport (GET /sse, POST /messages): the Python SDK's sse_client gets the
    same pool, progress, sampling and elicitation; the session ends with its stream."""
    from mcp.client.sse import sse_client

    async def body(url: str) -> None:
        async with sse_client(url.removesuffix("/mcp") + "/sse") as streams:
            async with ClientSession(streams[0], streams[1], sampling_callback=_sampled, elicitation_callback=_elicited) as s:
                await _calls_progress_sampling_elicitation(s, "over sse")
                prompts = (await s.list_prompts()).prompts
                assert any(p.name == "mcp__everything__simple-prompt" for p in prompts)

    with _served_http(tmp_path, {"everything": _everything()}) as url:
        _run(body(url))
        # A POST to no session, or to the stream's path, is refused as the transport says.
        status, _, text = _post(url.removesuffix("/mcp") + "/messages?sessionId=nope", _INIT)
        assert status == 404 and "Session not found" in text, (status, text)
        status, headers, _ = _post(url.removesuffix("/mcp") + "/sse", _INIT)
        assert status == 405 and headers.get("allow", headers.get("Allow")) == "GET"


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
def test_resource_updates_reach_the_clients_that_subscribed_and_no_other(tmp_path: Path) -> None:
    """Two clients over Streamable HTTP; one subscribes to a resource of server-everything, which
    then sends updates of it every 5 s: they reach that client, not the other."""
    from mcp.client.streamable_http import streamable_http_client

    async def body(url: str) -> None:
        updates: Dict[str, List[str]] = {"subscriber": [], "bystander": []}

        def handler(who: str) -> Any:
            async def handle(message: Any) -> None:
                root = getattr(message, "root", message)
                if isinstance(root, types.ResourceUpdatedNotification):
                    updates[who].append(str(root.params.uri))
            return handle

        async with streamable_http_client(url) as a, streamable_http_client(url) as b:
            async with ClientSession(a[0], a[1], message_handler=handler("subscriber")) as sa, \
                    ClientSession(b[0], b[1], message_handler=handler("bystander")) as sb:
                await sa.initialize()
                await sb.initialize()
                uri = str((await sa.list_resources()).resources[0].uri)
                await sa.subscribe_resource(uri)
                await sa.call_tool("mcp__everything__toggle-subscriber-updates", {})
                for _ in range(120):
                    if updates["subscriber"]:
                        break
                    await asyncio.sleep(0.1)
                assert updates["subscriber"] and set(updates["subscriber"]) == {uri}, updates
                assert updates["bystander"] == [], updates
                await sa.unsubscribe_resource(uri)

    with _served_http(tmp_path, {"everything": _everything()}) as url:
        _run(body(url))


def test_a_2026_client_reaches_a_legacy_server_sampling_and_elicitation_included(tmp_path: Path) -> None:
    """The era bridge the other way: mcplug's own client speaks 2026-07-28 to the gateway, whose
    upstream (server-everything) speaks only the legacy era; what the upstream asks through its
    session comes back to the client as InputRequiredResult rounds."""
    import mcplug

    asked: List[str] = []

    def sample(params: Dict[str, Any]) -> Dict[str, Any]:
        asked.append("sampling")
        return {"role": "assistant", "model": "own-model", "content": {"type": "text", "text": "own sampled"}}

    def elicit(params: Dict[str, Any]) -> Dict[str, Any]:
        asked.append("elicitation")
        return {"action": "accept", "content": {"name": "Lin"}}

    handlers = {"sampling/createMessage": sample, "elicitation/create": elicit}
    with _served_http(tmp_path, {"everything": _everything()}) as url:
        with mcplug.Client.connect({"type": "http", "url": url}, connect_timeout=30, handlers=handlers) as c:
            assert c.era == "modern" and c.protocol_version == "2026-07-28"
            assert c.server_info["name"] == "mcplug"
            names = [t["name"] for t in c.list_tools()]
            assert "mcp__everything__get-sum" in names
            total = c.call_tool("mcp__everything__get-sum", {"a": 20, "b": 22})
            assert total["resultType"] == "complete" and "42" in json.dumps(total)
            sampled = c.call_tool("mcp__everything__trigger-sampling-request", {"prompt": "x"})
            assert "own sampled" in json.dumps(sampled)
            elicited = c.call_tool("mcp__everything__trigger-elicitation-request", {})
            assert "Lin" in json.dumps(elicited)
    assert asked == ["sampling", "elicitation"]


def test_the_http_endpoint_answers_as_the_spec_asks(tmp_path: Path) -> None:
    with _served_http(tmp_path, {"everything": _everything()}) as url:
        # DNS rebinding: a foreign Origin or Host is refused.
        status, _, _ = _post(url, _INIT, {"origin": "http://evil.example"})
        assert status == 403
        status, _, _ = _post(url, _INIT, {"host": "evil.example:80"})
        assert status == 403
        # What is not MCP over HTTP.
        status, _, _ = _post(url, _INIT, {"accept": "application/json"})
        assert status == 406
        status, _, _ = _post(url, _INIT, {"content-type": "text/plain"})
        assert status == 415
        req = urllib.request.Request(url, data=b"{not json", headers={
            "content-type": "application/json", "accept": "application/json, text/event-stream"}, method="POST")
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(req, timeout=10)
        assert bad.value.code == 400 and json.loads(bad.value.read())["error"]["code"] == -32700
        # A session: opened by initialize, required after, ended by DELETE.
        status, headers, text = _post(url, _INIT)
        assert status == 200 and json.loads(text)["result"]["protocolVersion"] == "2025-11-25"
        session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert _post(url, ping)[0] == 400
        assert _post(url, ping, {"mcp-session-id": "no-such-session"})[0] == 404
        status, _, text = _post(url, ping, {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"})
        assert status == 200 and json.loads(text)["result"] == {}
        delete = urllib.request.Request(url, headers={"mcp-session-id": session}, method="DELETE")
        with urllib.request.urlopen(delete, timeout=10) as r:
            assert r.status == 200
        assert _post(url, ping, {"mcp-session-id": session})[0] == 404
        # The 2026-07-28 era: the headers must agree with the body.
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "mcp__everything__echo", "arguments": {"message": "m"}, "_meta": meta}}
        modern = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "mcp__everything__echo"}
        status, _, text = _post(url, call, modern)
        assert status == 200 and json.loads(text)["result"]["content"][0]["text"] == "Echo: m"
        status, _, text = _post(url, call, {**modern, "mcp-name": "mcp__everything__get-sum"})
        assert status == 400 and json.loads(text)["error"]["code"] == -32020
        status, _, text = _post(url, call, {**modern, "mcp-method": "tools/list"})
        assert status == 400 and json.loads(text)["error"]["code"] == -32020
        # What a 2026-07-28 request must carry, and the methods that era no longer has.
        bare = {**call, "params": {**call["params"], "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}
        status, _, text = _post(url, bare, modern)
        assert status == 400 and json.loads(text)["error"]["code"] == -32602 and json.loads(text)["id"] == 3
        ping = {"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"_meta": meta}}
        status, _, text = _post(url, ping, {"mcp-protocol-version": "2026-07-28", "mcp-method": "ping"})
        assert status == 404 and json.loads(text)["error"]["code"] == -32601
        unknown = {"jsonrpc": "2.0", "id": 5, "method": "unknown/method", "params": {"_meta": meta}}
        status, _, text = _post(url, unknown, {"mcp-protocol-version": "2026-07-28", "mcp-method": "unknown/method"})
        assert status == 404 and json.loads(text)["error"]["code"] == -32601 and json.loads(text)["id"] == 5
        future = {**call, "params": {**call["params"], "_meta": {**meta, "io.modelcontextprotocol/protocolVersion": "v999.0.0"}}}
        status, _, text = _post(url, future, {**modern, "mcp-protocol-version": "v999.0.0"})
        assert status == 400 and json.loads(text)["error"]["code"] == -32022
        assert json.loads(text)["error"]["data"]["requested"] == "v999.0.0"


def _sse_events(response: Any, until: Any) -> List[Tuple[Optional[str], Dict[str, Any]]]:
    """(id, message) of each SSE event read from `response` until `until(message)` holds."""
    events: List[Tuple[Optional[str], Dict[str, Any]]] = []
    event_id: Optional[str] = None
    while True:
        line = response.fp.readline().decode()
        assert line, f"the stream ended after {events}"
        line = line.rstrip("\r\n")
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:") and line[5:].strip():
            message = json.loads(line[5:])
            events.append((event_id, message))
            event_id = None
            if until(message):
                return events


def test_a_broken_sse_stream_is_resumed_from_its_last_event_id(tmp_path: Path) -> None:
    """Streamable HTTP (2025-11-25): each SSE event of a session has an id; a client whose POST's
    stream broke GETs with Last-Event-ID and gets what it missed — progress, then the answer."""
    import http.client
    from urllib.parse import urlsplit

    with _served_http(tmp_path, {"everything": _everything()}) as url:
        status, headers, _ = _post(url, _INIT)
        session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
        common = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        assert _post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, common)[0] == 202
        where = urlsplit(url)
        first = http.client.HTTPConnection(where.hostname, where.port, timeout=15)
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "mcp__everything__trigger-long-running-operation", "arguments": {"duration": 2, "steps": 4},
            "_meta": {"progressToken": "p7"}}}
        first.request("POST", where.path, json.dumps(call), {
            **common, "content-type": "application/json", "accept": "application/json, text/event-stream"})
        response = first.getresponse()
        assert response.status == 200 and response.getheader("content-type") == "text/event-stream"
        seen = _sse_events(response, lambda m: m.get("method") == "notifications/progress")
        last_id = seen[-1][0]
        assert last_id is not None and seen[-1][1]["params"]["progress"] == 1, seen
        first.close()  # the stream breaks mid-call
        again = http.client.HTTPConnection(where.hostname, where.port, timeout=15)
        again.request("GET", where.path, headers={**common, "accept": "text/event-stream", "last-event-id": last_id})
        resumed = again.getresponse()
        assert resumed.status == 200
        rest = _sse_events(resumed, lambda m: m.get("id") == 7)
        assert [m["params"]["progress"] for _, m in rest if m.get("method") == "notifications/progress"] == [2, 3, 4], rest
        assert "completed" in json.dumps(rest[-1][1]["result"]), rest
        ids = [int(i) for i, _ in rest if i is not None]
        assert len(ids) == len(rest) and ids == sorted(ids) and ids[0] > int(last_id), rest
        again.close()
        # An id the session does not know cannot be resumed from.
        unknown = urllib.request.Request(url, headers={**common, "accept": "text/event-stream", "last-event-id": "999999"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(unknown, timeout=10)
        assert refused.value.code == 409


# --- The experimental tasks of 2025-11-25, relayed --------------------------------------------

import queue  # noqa: E402
import threading  # noqa: E402


class _Lines:
    """A raw 2025-11-25 client of `mcplug serve` over stdio: requests by id, the server's own
    requests answered by `answer`, everything it sent kept in `seen`."""

    def __init__(self, child: "subprocess.Popen[bytes]") -> None:
        self.child = child
        self.lines: "queue.Queue[bytes]" = queue.Queue()
        self.seen: List[Dict[str, Any]] = []
        self.next = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.child.stdout is not None
        for line in self.child.stdout:
            self.lines.put(line)

    def send(self, message: Dict[str, Any]) -> None:
        assert self.child.stdin is not None
        self.child.stdin.write((json.dumps(message) + "\n").encode())
        self.child.stdin.flush()

    def call(self, method: str, params: Optional[Dict[str, Any]] = None, answer: Any = None) -> Dict[str, Any]:
        self.next += 1
        me = self.next
        self.send({"jsonrpc": "2.0", "id": me, "method": method, **({"params": params} if params else {})})
        while True:
            message = json.loads(self.lines.get(timeout=30))
            self.seen.append(message)
            if "method" in message and "id" in message:
                assert answer is not None, f"the server asked {message} during {method}"
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": answer(message)})
            elif message.get("id") == me:
                return message


def test_a_2025_11_25_client_runs_a_task_through_the_gateway(tmp_path: Path) -> None:
    """A 2025-11-25 client asks for a task: the upstream's CreateTaskResult comes back, tasks/get,
    tasks/list and tasks/result follow it to server-everything, the elicitation the task needs is
    asked of this client while its tasks/result waits, and tasks/cancel cancels one."""
    params = _params(tmp_path, {"everything": _everything()})
    child = subprocess.Popen(
        [params.command, *params.args], env=params.env, cwd=params.cwd,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        c = _Lines(child)
        init = c.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
                                     "clientInfo": {"name": "tasks", "version": "1"}})
        tasks = init["result"]["capabilities"]["tasks"]
        assert tasks == {"requests": {"tools": {"call": {}}}, "list": {}, "cancel": {}}, tasks
        c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = c.call("tools/list")["result"]["tools"]
        research = next(t for t in listed if t["name"] == "mcp__everything__simulate-research-query")
        assert research["execution"]["taskSupport"] in ("optional", "required"), research
        name = research["name"]

        created = c.call("tools/call", {"name": name, "arguments": {"topic": "tides", "ambiguous": True},
                                        "task": {"ttl": 60000}})
        task = created["result"]["task"]
        assert task["status"] == "working" and task["taskId"], created
        got = c.call("tasks/get", {"taskId": task["taskId"]})["result"]
        assert got["taskId"] == task["taskId"] and got["status"] in ("working", "input_required"), got
        assert task["taskId"] in [t["taskId"] for t in c.call("tasks/list")["result"]["tasks"]]

        asked: List[Dict[str, Any]] = []

        def clarify(request: Dict[str, Any]) -> Dict[str, Any]:
            asked.append(request)
            choice = request["params"]["requestedSchema"]["properties"]["interpretation"]["oneOf"][1]["const"]
            return {"action": "accept", "content": {"interpretation": choice}}

        final = c.call("tasks/result", {"taskId": task["taskId"]}, answer=clarify)
        assert [a["method"] for a in asked] == ["elicitation/create"], asked
        report = final["result"]["content"][0]["text"]
        assert "Research Report: tides (historical)" in report, report
        # The task's status notifications came to its client.
        statuses = [m["params"]["status"] for m in c.seen
                    if m.get("method") == "notifications/tasks/status" and m["params"]["taskId"] == task["taskId"]]
        assert "input_required" in statuses, c.seen

        second = c.call("tools/call", {"name": name, "arguments": {"topic": "ice"}, "task": {"ttl": 60000}})
        cancelled = c.call("tasks/cancel", {"taskId": second["result"]["task"]["taskId"]})
        assert cancelled["result"]["status"] == "cancelled", cancelled
        unknown = c.call("tasks/get", {"taskId": "no-such-task"})
        assert unknown["error"]["code"] == -32602 and "no-such-task" in unknown["error"]["message"], unknown
        # A call that asks for no task is answered with the tool's result, the gateway waiting.
        plain = c.call("tools/call", {"name": "mcp__everything__echo", "arguments": {"message": "hi"}})
        assert plain["result"]["content"][0]["text"] == "Echo: hi", plain
    finally:
        if child.stdin:
            child.stdin.close()
        assert child.wait(15) == 0


def _rpc(url: str, body: Any, headers: Dict[str, str]) -> Dict[str, Any]:
    """A request's answer over Streamable HTTP, whether it came as JSON or on an SSE stream."""
    status, _, text = _post(url, body, headers)
    assert status == 200, (status, text)
    if text.lstrip().startswith("{"):
        return json.loads(text)
    for line in text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            message = json.loads(line[5:])
            if message.get("id") == body["id"]:
                return message
    raise AssertionError(f"no answer to {body} in {text}")


def test_a_task_is_its_clients_alone(tmp_path: Path) -> None:
    """Two 2025-11-25 clients of one `mcplug serve --http`: the task one created is in its
    tasks/list and not in the other's, whose tasks/get and tasks/cancel of it are refused."""
    with _served_http(tmp_path, {"everything": _everything()}) as url:
        def opened(name: str) -> Dict[str, str]:
            hello = {**_INIT, "params": {**_INIT["params"], "clientInfo": {"name": name, "version": "1"}}}
            status, headers, _ = _post(url, hello)
            assert status == 200
            common = {"mcp-session-id": {k.lower(): v for k, v in headers.items()}["mcp-session-id"],
                      "mcp-protocol-version": "2025-11-25"}
            assert _post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, common)[0] == 202
            return common

        owner, other = opened("owner"), opened("other")
        created = _rpc(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "mcp__everything__simulate-research-query", "arguments": {"topic": "ice"},
            "task": {"ttl": 60000}}}, owner)
        task = created["result"]["task"]["taskId"]

        def listed(who: Dict[str, str]) -> List[str]:
            answer = _rpc(url, {"jsonrpc": "2.0", "id": 3, "method": "tasks/list"}, who)
            return [t["taskId"] for t in answer["result"]["tasks"]]

        assert listed(owner) == [task]
        assert listed(other) == []
        for method in ("tasks/get", "tasks/cancel", "tasks/result"):
            refused = _rpc(url, {"jsonrpc": "2.0", "id": 4, "method": method, "params": {"taskId": task}}, other)
            assert refused["error"]["code"] == -32602, refused
        got = _rpc(url, {"jsonrpc": "2.0", "id": 5, "method": "tasks/get", "params": {"taskId": task}}, owner)
        assert got["result"]["taskId"] == task


# --- A host serving its own manager (Manager.serve) -----------------------------------------


def test_a_python_host_serves_its_manager_its_own_tools_included(everything_server: Dict[str, Any]) -> None:
    import mcplug

    def shout(arguments: Dict[str, Any]) -> str:
        return str(arguments.get("text", "")).upper()

    with mcplug.Manager() as m:
        m.add_host_server("host", [{"name": "shout", "description": "Shouts", "inputSchema": {"type": "object"}, "handler": shout}])
        m.connect({"mcpServers": {"everything": {"command": everything_server["command"], "args": everything_server["args"]}}})
        m.wait(30)
        with pytest.raises(mcplug.InvalidArgumentError, match="names"):
            m.serve(names="loud")
        with m.serve(names="unprefixed") as served:
            assert served.url is not None and served.url.startswith("http://127.0.0.1:")

            async def body(url: str) -> None:
                from mcp.client.streamable_http import streamable_http_client

                async with streamable_http_client(url) as streams:
                    async with ClientSession(streams[0], streams[1]) as s:
                        await s.initialize()
                        names = {t.name for t in (await s.list_tools()).tools}
                        assert {"shout", "echo", "get-sum"} <= names
                        assert _texts(await s.call_tool("shout", {"text": "served"})) == "SERVED"
                        assert _texts(await s.call_tool("echo", {"message": "x"})) == "Echo: x"

            _run(body(served.url))
        assert served.closed
        # The manager is the host's again, and works.
        assert "Echo: after" in json.dumps(m.call_tool("mcp__everything__echo", {"message": "after"}))


def test_an_asyncio_host_serves_its_manager(everything_server: Dict[str, Any]) -> None:
    import mcplug
    import mcplug.aio

    async def body() -> None:
        async with mcplug.aio.Manager() as m:
            await m.connect({"mcpServers": {"everything": {"command": everything_server["command"], "args": everything_server["args"]}}})
            await m.wait(30)
            async with await m.serve() as served:
                assert served.url is not None
                async with await mcplug.aio.Client.connect({"type": "http", "url": served.url}) as c:
                    result = await c.call_tool("mcp__everything__echo", {"message": "aio"})
                    assert result["content"][0]["text"] == "Echo: aio"
            assert served.closed

    _run(body())


# --- Faults of an upstream, as the client of the gateway sees them ---------------------------


def test_an_upstream_that_crashes_hangs_or_garbles_gives_the_client_an_error_not_a_hang(tmp_path: Path, fault: Any) -> None:
    upstream = fault()
    servers = {"faulty": {"command": upstream["command"], "args": upstream["args"]}}

    async def failed(s: ClientSession, tool: str, arguments: Dict[str, Any], timeout: Optional[float] = None) -> str:
        started = time.monotonic()
        try:
            result = await s.call_tool(tool, arguments, read_timeout_seconds=timeout)
            assert result.is_error, f"{tool} answered {result}"
            why = _texts(result)
        except Exception as e:  # noqa: BLE001 - the SDK's MCPError, or its timeout
            why = str(e) or type(e).__name__
        assert time.monotonic() - started < 15, f"{tool}: an answer within its bound"
        return why

    async def body() -> None:
        async with _stdio(_params(tmp_path, servers)) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                assert _texts(await s.call_tool("mcp__faulty__echo", {"message": "ok"})) == "Echo: ok"
                # Hangs: the client's own timeout ends its wait, and its cancel reaches the upstream.
                await failed(s, "mcp__faulty__sleep", {"ms": 60000}, timeout=1.0)
                for _ in range(50):
                    ids = _texts(await s.call_tool("mcp__faulty__cancelled_ids", {}))
                    if ids not in ("", "[]"):
                        break
                    await asyncio.sleep(0.1)
                assert ids not in ("", "[]"), "the cancel of the hung call reached the upstream"
                # Garbage: half an answer, then the process is gone.
                assert await failed(s, "mcp__faulty__half", {})
        # A fresh gateway for the crash (the first one's upstream is reconnecting).
        async with _stdio(_params(tmp_path, servers)) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                assert await failed(s, "mcp__faulty__crash", {})

    _run(body())
