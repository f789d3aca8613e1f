"""MCPLUG_LOG: the library's logs on stderr, off by default. A host process (a subprocess here:
the filter is read once per process) connects to a stdio server and a Streamable HTTP server
whose entries carry secrets in every place a config can hold them; its stderr shows each
request's method, the messages on the wire at trace, and none of the secrets."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Iterator, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
SECRETS = ["arg-secret-3141", "env-secret-2718", "query-secret-1618", "header-secret-1414", "userinfo-secret-1732"]

HOST = textwrap.dedent("""
    import sys, mcplug
    fault, port = sys.argv[1], sys.argv[2]
    stdio = {"command": sys.executable, "args": [fault, "normal", "--token=arg-secret-3141"],
             "env": {"API_TOKEN": "env-secret-2718"}}
    http = {"type": "http", "url": f"http://user:userinfo-secret-1732@127.0.0.1:{port}/mcp?api_key=query-secret-1618",
            "headers": {"X-Api-Key": "header-secret-1414"}}
    for entry in (stdio, http):
        with mcplug.Client.connect(entry) as c:
            print(c.call_tool("echo", {"message": "logged"})["content"][0]["text"])
""")


@pytest.fixture(scope="module")
def http_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(REPO / "tests/servers/http_fault_server.py"), str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None and proc.stdout.readline().startswith("listening")
    yield port
    proc.kill()
    proc.wait()


def run_host(port: int, log: Optional[str]) -> subprocess.CompletedProcess[str]:
    env: Dict[str, str] = {k: v for k, v in os.environ.items() if k != "MCPLUG_LOG"}
    env["PYTHONPATH"] = str(REPO / "bindings/python")
    if log is not None:
        env["MCPLUG_LOG"] = log
    done = subprocess.run([sys.executable, "-c", HOST, str(REPO / "tests/servers/fault_server.py"), str(port)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Echo:", "logged", "Echo:", "logged"], done.stdout
    return done


def test_debug_shows_the_requests_and_no_secret(http_port: int) -> None:
    err = run_host(http_port, "debug,mcplug::wire=trace").stderr
    for needed in ['transport="stdio"', 'transport="http"', 'method="initialize"', 'method="tools/call"',
                   "connected", "mcplug::wire: -> {", "mcplug::wire: <- {", '"Echo: logged"']:
        assert needed in err, f"{needed!r} is not in the log:\n{err}"
    for secret in SECRETS:
        assert secret not in err, f"the log shows {secret!r}:\n{err}"


def test_without_mcplug_log_nothing_is_written(http_port: int) -> None:
    assert run_host(http_port, None).stderr == ""
    assert run_host(http_port, "").stderr == ""


def test_a_bad_filter_is_named_once_and_logging_stays_off(http_port: int) -> None:
    err = run_host(http_port, "mcplug=[[").stderr
    assert err.count("MCPLUG_LOG") == 1 and "is not a filter" in err, err
    assert "DEBUG" not in err and "TRACE" not in err


FORWARDING_HOST = textwrap.dedent("""
    import json, logging, sys, mcplug
    fault, port = sys.argv[1], sys.argv[2]
    taken = []
    class Keep(logging.Handler):
        def emit(self, record):
            taken.append({"logger": record.name, "level": record.levelno, "text": record.getMessage(),
                          "raw": getattr(record, "mcplug", None)})
    logging.getLogger("mcplug").addHandler(Keep())
    logging.getLogger("mcplug").setLevel(1)
    stdio = {"command": sys.executable, "args": [fault, "normal", "--token=arg-secret-3141"],
             "env": {"API_TOKEN": "env-secret-2718"}}
    http = {"type": "http", "url": f"http://user:userinfo-secret-1732@127.0.0.1:{port}/mcp?api_key=query-secret-1618",
            "headers": {"X-Api-Key": "header-secret-1414"}}
    with mcplug.forward_logs("debug,mcplug::wire=trace") as forwarder:
        for entry in (stdio, http):
            with mcplug.Client.connect(entry) as c:
                print(c.call_tool("echo", {"message": "logged"})["content"][0]["text"])
    json.dump(taken, sys.stderr)
""")


def test_forward_logs_makes_logging_records_on_the_hosts_loggers(http_port: int) -> None:
    """With a capture, records reach the host's logging handlers, and stderr stays clean."""
    env = {k: v for k, v in os.environ.items() if k != "MCPLUG_LOG"}
    env["PYTHONPATH"] = str(REPO / "bindings/python")
    done = subprocess.run([sys.executable, "-c", FORWARDING_HOST, str(REPO / "tests/servers/fault_server.py"), str(http_port)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Echo:", "logged", "Echo:", "logged"], done.stdout
    import json

    taken = json.loads(done.stderr)  # nothing but the host's own dump went to stderr
    loggers = {t["logger"] for t in taken}
    assert {"mcplug.client", "mcplug.wire"} <= loggers, loggers
    calls = [t for t in taken if t["logger"] == "mcplug.client" and "method=tools/call" in t["text"]]
    assert len(calls) == 2, [t["text"] for t in taken if t["logger"] == "mcplug.client"]
    assert all(t["level"] == 10 for t in calls)
    wire = [t for t in taken if t["logger"] == "mcplug.wire"]
    assert wire and all(t["level"] == 5 for t in wire) and any('"Echo: logged"' in t["text"] for t in wire)
    assert all(t["raw"]["type"] == "log" for t in taken)
    # Each logger is the target under "mcplug" (the HTTP stack's own records included).
    odd = [t for t in taken
           if t["logger"] != "mcplug." + t["raw"]["target"].removeprefix("mcplug::").replace("::", ".")]
    assert not odd, odd[:3]
    for secret in SECRETS:
        assert secret not in done.stderr, f"a record shows {secret!r}"


def test_capture_options_are_checked_by_name() -> None:
    import mcplug

    with pytest.raises(mcplug.InvalidArgumentError, match="`filter`"):
        mcplug.capture_logs("mcplug=[[")
    with pytest.raises(mcplug.InvalidArgumentError, match="max_records"):
        mcplug.capture_logs("debug", max_records=0)
    with pytest.raises(mcplug.InvalidArgumentError, match="timeout"):
        mcplug.next_log_records(timeout=-1)
    assert mcplug.release_logs() is False
    with pytest.raises(mcplug.ClosedError, match="mcplug_log_capture"):
        mcplug.next_log_records(timeout=0)
