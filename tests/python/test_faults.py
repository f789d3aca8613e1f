"""Bad input and bad servers through the sync Python API, against the fault server: every case
gets a clear error of the right kind, loses nothing, and leaves no process behind."""
from __future__ import annotations

import builtins
import gc
import json
import math
import os
import signal
import threading
import time
from ctypes import c_void_p
from pathlib import Path
from typing import Any, Dict, List

import pytest

import mcplug
from mcplug import _ffi
from conftest import FaultFactory, alive, pids_with, text_of, wait_until


def marker_of(server: Dict[str, Any]) -> str:
    return str(server["args"][-1])


def server_pid(server: Dict[str, Any]) -> int:
    pids = pids_with(marker_of(server))
    assert len(pids) == 1, pids
    return pids[0]


def cancelled_ids(client: mcplug.Client) -> List[Any]:
    return list(json.loads(text_of(client.call_tool("cancelled_ids", {}, timeout=5))))


def raw_call_tool(client: mcplug.Client, name: bytes, arguments: Any) -> mcplug.McpError:
    """Calls the C function directly, to reach the library's own argument checks."""
    handle = client._core._handle
    status, text = _ffi.invoke(_ffi.lib.mcplug_client_call_tool, c_void_p(handle), name, arguments, None)
    assert status != _ffi.OK, text
    return mcplug._errors.error_from_json(status, text)


# -- bad input -----------------------------------------------------------------------------------


def test_unknown_tool_is_an_rpc_error_and_loses_nothing(fault: FaultFactory) -> None:
    with mcplug.Client.connect(fault()) as client:
        with pytest.raises(mcplug.RpcError) as info:
            client.call_tool("no-such-tool", {})
        assert info.value.code == -32602
        assert info.value.message == "Unknown tool: no-such-tool"
        assert text_of(client.call_tool("echo", {"message": "after"})) == "Echo: after"


def test_arguments_that_are_not_json(fault: FaultFactory) -> None:
    with mcplug.Client.connect(fault()) as client:
        for bad in ({"message": object()}, {"message": {1, 2}}, {"message": math.nan}, {"message": math.inf}):
            with pytest.raises(mcplug.InvalidArgumentError) as info:
                client.call_tool("echo", bad)
            assert "arguments" in info.value.message and "JSON" in info.value.message
        with pytest.raises(mcplug.InvalidArgumentError, match="must be a dict"):
            client.call_tool("echo", ["not", "an", "object"])  # type: ignore[arg-type]
        # The library's own check, for hosts that hand it text.
        error = raw_call_tool(client, b"echo", b'{"message": "unterminated')
        assert isinstance(error, mcplug.InvalidArgumentError)
        assert "`arguments_json` is not valid JSON" in error.message
        error = raw_call_tool(client, b"echo", b'["an array"]')
        assert "`arguments_json` must be a JSON object" in error.message
        # A lone surrogate is no Unicode text: refused before it reaches a server that would choke.
        with pytest.raises(mcplug.InvalidArgumentError, match="`arguments` holds a string that is not valid Unicode"):
            client.call_tool("echo", {"message": "\ud800"})
        # Nothing was lost: the server never saw a call, and the connection works.
        assert text_of(client.call_tool("echo", {"message": "fine"})) == "Echo: fine"
        assert cancelled_ids(client) == []


def test_invalid_utf8(fault: FaultFactory) -> None:
    with mcplug.Client.connect(fault()) as client:
        error = raw_call_tool(client, b"ec\xffho", b"{}")
        assert isinstance(error, mcplug.InvalidArgumentError)
        assert error.message.startswith("`name` is not valid UTF-8")
        with pytest.raises(mcplug.InvalidArgumentError, match="`name` cannot be encoded as UTF-8"):
            client.call_tool("ec\udcffho", {})
        with pytest.raises(mcplug.InvalidArgumentError, match="`method`"):
            client.request("tools/\ud800list")
        assert text_of(client.call_tool("echo", {"message": "ok"})) == "Echo: ok"


def test_bad_server_entries() -> None:
    with pytest.raises(mcplug.InvalidArgumentError, match="needs a `command`"):
        mcplug.Client.connect({"args": ["x"]})
    with pytest.raises(mcplug.InvalidArgumentError, match=r"args\[0\]"):
        mcplug.Client.connect({"command": "x", "args": [1]})
    with pytest.raises(mcplug.InvalidArgumentError, match="must be a dict"):
        mcplug.Client.connect("node server.js")  # type: ignore[arg-type]
    with pytest.raises(mcplug.TransportError, match="http://127.0.0.1:9/mcp"):
        mcplug.Client.connect({"type": "http", "url": "http://127.0.0.1:9/mcp"})
    with pytest.raises(mcplug.InvalidArgumentError, match="through a manager"):
        mcplug.Client.connect({"type": "sdk", "name": "x"})  # an in-process server: Manager.add_host_server


@pytest.mark.parametrize("bad", [0, -1, math.nan, "5", True])
def test_bad_timeouts_are_refused_before_any_call(fault: FaultFactory, bad: Any) -> None:
    with pytest.raises(mcplug.InvalidArgumentError, match="timeout"):
        mcplug.Client.connect(fault(), connect_timeout=bad)


def test_bad_options_name_the_field(fault: FaultFactory) -> None:
    with pytest.raises(mcplug.InvalidArgumentError, match="protocol_versions"):
        mcplug.Client.connect(fault(), options={"protocol_versions": ["1999-01-01"]})
    with pytest.raises(mcplug.InvalidArgumentError, match="client_info"):
        mcplug.Client.connect(fault(), options={"client_info": {"name": "x"}})


# -- bad servers ---------------------------------------------------------------------------------


def test_command_that_does_not_exist() -> None:
    started = time.monotonic()
    with pytest.raises(mcplug.TransportError) as info:
        mcplug.Client.connect({"command": "/nonexistent/mcplug-no-such-server", "args": []})
    assert time.monotonic() - started < 5
    assert "/nonexistent/mcplug-no-such-server" in info.value.message
    assert info.value.kind == "transport"


def test_server_that_exits_at_once(fault: FaultFactory) -> None:
    server = fault("exit-now")
    with pytest.raises(mcplug.ClosedError) as info:
        mcplug.Client.connect(server, connect_timeout=10)
    assert "exit code 3" in info.value.message
    assert "fatal: exiting at once" in info.value.message  # the server's last stderr line
    assert pids_with(marker_of(server)) == []


def test_server_that_prints_garbage_then_works(fault: FaultFactory) -> None:
    with mcplug.Client.connect(fault("garbage"), connect_timeout=10) as client:
        assert client.server_info["name"] == "fault-server"
        assert client.instructions == "mode garbage"
        assert text_of(client.call_tool("echo", {"message": "through"})) == "Echo: through"
        invalid: List[str] = []
        while len(invalid) < 3:
            event = client.next_event(timeout=5)
            assert event is not None
            if event["type"] == "invalid_message":
                invalid.append(event["line"])
    assert invalid == ["this is not json", "{broken", "Server starting on stdout, sorry"]


def test_server_that_prints_garbage_and_exits(fault: FaultFactory) -> None:
    with pytest.raises(mcplug.ClosedError, match="exit code 1"):
        mcplug.Client.connect(fault("garbage-exit"), connect_timeout=10)


def test_server_that_never_answers_initialize(fault: FaultFactory) -> None:
    server = fault("hang-init")
    started = time.monotonic()
    with pytest.raises(mcplug.TimeoutError) as info:
        mcplug.Client.connect(server, connect_timeout=1.0)
    elapsed = time.monotonic() - started
    assert 0.9 < elapsed < 5, elapsed
    assert isinstance(info.value, builtins.TimeoutError)
    assert "connect timed out after 1000 ms" in info.value.message
    assert pids_with(marker_of(server)) == []


def test_connect_can_be_cancelled_by_tag(fault: FaultFactory) -> None:
    server = fault("hang-init")
    timer = threading.Timer(0.3, lambda: mcplug.cancel("py-connect-cancel"))
    timer.start()
    started = time.monotonic()
    with pytest.raises(mcplug.CancelledError):
        mcplug.Client.connect(server, connect_timeout=20, options={"tag": "py-connect-cancel"})
    assert time.monotonic() - started < 5
    assert pids_with(marker_of(server)) == []


def test_server_crashing_during_a_call(fault: FaultFactory) -> None:
    with mcplug.Client.connect(fault()) as client:
        started = time.monotonic()
        with pytest.raises(mcplug.ClosedError) as info:
            client.call_tool("crash", {}, timeout=30)
        assert time.monotonic() - started < 1.0
        assert "exit code 3" in info.value.message
        with pytest.raises(mcplug.ClosedError):
            client.call_tool("echo", {"message": "x"})
        # The remaining events end with "closed", then next_event says so.
        events = []
        with pytest.raises(mcplug.ClosedError):
            for _ in range(10):
                event = client.next_event(timeout=5)
                assert event is not None
                events.append(event)
        assert events[-1]["type"] == "closed" and "exit code 3" in events[-1]["reason"]
        assert {"type": "stderr", "line": "crashing on purpose"} in events


def test_server_killed_during_a_call(fault: FaultFactory) -> None:
    server = fault()
    with mcplug.Client.connect(server) as client:
        pid = server_pid(server)
        threading.Timer(0.3, lambda: os.kill(pid, signal.SIGKILL)).start()
        started = time.monotonic()
        with pytest.raises(mcplug.ClosedError):
            client.call_tool("sleep", {"ms": 20000})
        assert time.monotonic() - started < 1.3  # 0.3 s before the kill, then within a second


def test_call_timeout_keeps_the_connection(fault: FaultFactory) -> None:
    with mcplug.Client.connect(fault()) as client:
        started = time.monotonic()
        with pytest.raises(mcplug.TimeoutError) as info:
            client.call_tool("sleep", {"ms": 3000}, timeout=0.3)
        assert time.monotonic() - started < 2
        assert isinstance(info.value, builtins.TimeoutError) and info.value.kind == "timeout"
        assert "timed out after 300 ms" in info.value.message
        assert text_of(client.call_tool("echo", {"message": "alive"})) == "Echo: alive"
        assert len(cancelled_ids(client)) == 1  # the server was told


def test_tool_timeout_set_at_connect(fault: FaultFactory) -> None:
    with mcplug.Client.connect(fault(), tool_timeout=0.2) as client:
        with pytest.raises(mcplug.TimeoutError):
            client.call_tool("sleep", {"ms": 3000})
        # math.inf lifts the limit for one call.
        assert text_of(client.call_tool("sleep", {"ms": 400}, timeout=math.inf)) == "slept"


def test_cancel_from_another_thread(fault: FaultFactory) -> None:
    with mcplug.Client.connect(fault()) as client:
        assert mcplug.cancel("py-no-such-call") is False
        results: List[bool] = []

        def canceller() -> None:
            time.sleep(0.5)  # the call is in flight by then
            results.append(mcplug.cancel("py-cancel-me"))

        thread = threading.Thread(target=canceller)
        started = time.monotonic()
        thread.start()
        with pytest.raises(mcplug.CancelledError) as info:
            client.call_tool("sleep", {"ms": 10000}, tag="py-cancel-me")
        thread.join(5)
        assert results == [True]
        assert time.monotonic() - started < 2
        assert info.value.kind == "cancelled"
        ids = cancelled_ids(client)
        assert len(ids) == 1, f"notifications/cancelled did not reach the server: {ids}"
        assert text_of(client.call_tool("echo", {"message": "after cancel"})) == "Echo: after cancel"


def test_thousand_calls_from_sixteen_threads(fault: FaultFactory) -> None:
    errors: List[str] = []
    counts = [0] * 16
    with mcplug.Client.connect(fault()) as client:

        def worker(index: int) -> None:
            for j in range(1000 // 16 + (1 if index < 1000 % 16 else 0)):
                message = f"thread {index} call {j}"
                try:
                    got = text_of(client.call_tool("echo", {"message": message}, timeout=30))
                except Exception as e:  # collected, asserted below
                    errors.append(repr(e))
                    continue
                if got != "Echo: " + message:
                    errors.append(f"{message!r} got {got!r}")
                counts[index] += 1

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert sum(counts) == 1000


def test_big_results_and_max_message_bytes(fault: FaultFactory) -> None:
    with mcplug.Client.connect(fault()) as client:
        assert text_of(client.call_tool("big", {"bytes": 3_000_000})) == "x" * 3_000_000
    with mcplug.Client.connect(fault(), options={"max_message_bytes": 1000}) as client:
        with pytest.raises(mcplug.TransportError, match="max_message_bytes"):
            client.call_tool("big", {"bytes": 5000}, timeout=5)


def test_owned_strings_are_freed(fault: FaultFactory) -> None:
    """60 one-megabyte results: if out-strings leaked, the process would grow by 60 MB."""

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    with mcplug.Client.connect(fault()) as client:
        for _ in range(5):  # warm up allocator pools
            client.call_tool("big", {"bytes": 1_000_000})
        gc.collect()
        before = rss()
        for _ in range(60):
            client.call_tool("big", {"bytes": 1_000_000})
        gc.collect()
        grown = rss() - before
    assert grown < 25_000_000, f"RSS grew by {grown / 1e6:.1f} MB over 60 MB of results"


# -- events and handlers ---------------------------------------------------------------------------


def test_stderr_as_events_and_through_the_star_handler(fault: FaultFactory) -> None:
    with mcplug.Client.connect(fault()) as client:
        client.call_tool("stderr", {"line": "to the queue"})
        event = client.next_event(timeout=5)
        assert event == {"type": "stderr", "line": "to the queue"}
        assert client.next_event(timeout=0.05) is None
    seen: List[Dict[str, Any]] = []
    with mcplug.Client.connect(fault(), handlers={"*": seen.append}) as client:
        client.call_tool("stderr", {"line": "to the handler"})
        assert wait_until(lambda: {"type": "stderr", "line": "to the handler"} in seen, 5), seen
        assert client.next_event(timeout=0.05) is None


def test_a_raising_handler_never_kills_the_pump(fault: FaultFactory) -> None:
    seen: List[str] = []

    def flaky(event: Dict[str, Any]) -> None:
        seen.append(event.get("line", ""))
        raise ValueError("handler bug")

    with mcplug.Client.connect(fault(), handlers={"*": flaky}) as client:
        client.call_tool("stderr", {"line": "one"})
        client.call_tool("stderr", {"line": "two"})
        assert wait_until(lambda: seen[-2:] == ["one", "two"], 5), seen


# -- closing and leaks -------------------------------------------------------------------------------


def test_close_leaves_no_process_behind(fault: FaultFactory, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    server = fault("grandchild", env={"FAULT_PIDFILE": str(pidfile)})
    client = mcplug.Client.connect(server)
    assert wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "", 5)
    grandchild = int(pidfile.read_text())
    parent = server_pid(server)
    assert alive(grandchild) and alive(parent)
    client.close()
    assert client.closed
    # The contract: when close returns, the server and its children are gone (a short grace
    # for the reaper of the orphaned grandchild).
    assert not alive(parent)
    assert wait_until(lambda: not alive(grandchild), 1.0), f"grandchild {grandchild} outlived close()"


def test_close_kills_a_server_that_ignores_sigterm(fault: FaultFactory, tmp_path: Path) -> None:
    record = tmp_path / "signals"
    server = fault("ignore-term", env={"FAULT_SIGNALS": str(record)})
    client = mcplug.Client.connect(server, options={"shutdown_grace_ms": 200})
    pid = server_pid(server)
    started = time.monotonic()
    client.close()
    assert time.monotonic() - started < 5
    assert not alive(pid)
    # Claude Code's order: SIGINT, then SIGTERM, then (ignored both) SIGKILL.
    assert record.read_text().split() == ["SIGINT", "SIGTERM"]


def test_finalizer_closes_a_forgotten_client(fault: FaultFactory) -> None:
    server = fault()
    client = mcplug.Client.connect(server)
    pid = server_pid(server)
    del client
    gc.collect()
    assert wait_until(lambda: not alive(pid), 5), "the finalizer did not close the server"


def test_close_wakes_a_blocked_call_and_later_calls_fail(fault: FaultFactory) -> None:
    client = mcplug.Client.connect(fault())
    outcome: List[BaseException] = []

    def blocked() -> None:
        try:
            client.call_tool("sleep", {"ms": 20000})
        except BaseException as e:
            outcome.append(e)

    thread = threading.Thread(target=blocked)
    thread.start()
    time.sleep(0.2)
    started = time.monotonic()
    client.close()
    thread.join(5)
    assert time.monotonic() - started < 3
    assert len(outcome) == 1 and isinstance(outcome[0], mcplug.ClosedError)
    with pytest.raises(mcplug.ClosedError):
        client.call_tool("echo", {"message": "x"})
    with pytest.raises(mcplug.ClosedError):
        client.list_tools()
    client.close()  # twice is fine


def test_close_while_sixteen_threads_keep_calling(fault: FaultFactory) -> None:
    """The gate counts calls without a lock: close() racing with calls that start, run and return
    on 16 threads must fail each late call with ClosedError, wait for the running ones, and free
    the handle exactly once — with no call ever reaching a freed handle (that would crash)."""
    server = fault()
    client = mcplug.Client.connect(server)
    pid = server_pid(server)
    outcomes: List[str] = []
    started = threading.Barrier(17)

    def worker(index: int) -> None:
        started.wait(10)
        for j in range(100_000):
            try:
                # odd threads with a timeout (the general path), even ones without (the fast one)
                got = text_of(client.call_tool("echo", {"message": f"{index}.{j}"}, timeout=30 if index % 2 else None))
            except mcplug.ClosedError:
                outcomes.append("closed")
                return
            except Exception as e:  # collected, asserted below
                outcomes.append(repr(e))
                return
            if got != f"Echo: {index}.{j}":
                outcomes.append(f"{index}.{j} got {got!r}")
                return
        outcomes.append("never closed")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    started.wait(10)
    time.sleep(0.3)  # calls in every state: starting, inside the library, returning
    t0 = time.monotonic()
    client.close()
    assert time.monotonic() - t0 < 5
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert outcomes == ["closed"] * 16
    assert client._core._handle is None and client._core._calls == []
    assert wait_until(lambda: not alive(pid), 5)


def test_close_from_inside_a_handler(fault: FaultFactory) -> None:
    closed = threading.Event()
    holder: Dict[str, mcplug.Client] = {}

    def on_event(event: Dict[str, Any]) -> None:
        if event["type"] == "stderr":
            holder["client"].close()  # on the pump thread: must not join itself
            closed.set()

    client = mcplug.Client.connect(fault(), handlers={"*": on_event})
    holder["client"] = client
    try:  # the handler may close the client before this call's answer arrives
        client.call_tool("stderr", {"line": "close now"})
    except mcplug.ClosedError:
        pass
    assert closed.wait(5)
    assert client.closed
    client.close()
    assert wait_until(lambda: not client._core._pump.is_alive(), 2)
    assert client._core._handle is None  # freed, once


def test_the_star_handler_sees_the_end_after_close(fault: FaultFactory) -> None:
    events: List[Dict[str, Any]] = []
    with mcplug.Client.connect(fault(), handlers={"*": events.append}) as client:
        client.call_tool("stderr", {"line": "before close"})
    assert events[-1]["type"] == "closed" and "closed by the host" in events[-1]["reason"]
    assert {"type": "stderr", "line": "before close"} in events


def test_with_block_closes(fault: FaultFactory) -> None:
    server = fault()
    with mcplug.Client.connect(server) as client:
        pid = server_pid(server)
        assert not client.closed
    assert client.closed and not alive(pid)
