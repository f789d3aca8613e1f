"""Regression tests of the reliability and security classes (issue 20), through the Python
binding where they bit: a killed host leaves no server, misspelt options are refused, config
edits from threads and processes lose nothing and keep files private, files that are not
files are refused."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, List

import pytest

import mcplug

REPO = Path(__file__).resolve().parents[2]
FAULT_SERVER = REPO / "tests/servers/fault_server.py"


def _children(pid: int) -> List[int]:
    out: List[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out.extend(int(t) for t in text)
    return out


def _alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"


@pytest.mark.parametrize("where", ["thread", "main"])
def test_a_killed_host_leaves_no_server_behind_even_one_that_ignores_eof(where: str) -> None:
    # From a thread that ends at once, the server must outlive that thread (the kernel's
    # parent-death signal follows the forking thread) and die with the process; from the main
    # thread (which forks the server itself), the same.
    host = textwrap.dedent(f"""
        import sys, threading, time
        sys.path.insert(0, {str(REPO / 'bindings/python')!r})
        import mcplug
        box = {{}}
        def connect():
            c = mcplug.Client.connect({{"command": sys.executable, "args": [{str(FAULT_SERVER)!r}]}})
            c.call_tool("stop_reading", {{}})  # it never sees the end of its stdin now
            box["c"] = c
        if {where!r} == "thread":
            t = threading.Thread(target=connect); t.start(); t.join()
        else:
            connect()
        time.sleep(0.3)
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", host], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        servers = _children(proc.pid)
        assert servers, "the host has its server as a child"
        assert all(_alive(s) for s in servers), "alive after the connecting thread ended"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while any(_alive(s) for s in servers) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not any(_alive(s) for s in servers), "the server died with its host"
    finally:
        proc.kill()


def test_misspelt_options_are_refused_by_name() -> None:
    with pytest.raises(mcplug.InvalidArgumentError, match="unknown option `conect_timeout_ms`"):
        mcplug.Client.connect({"command": sys.executable, "args": [str(FAULT_SERVER)]},
                              options={"conect_timeout_ms": 5})


def _add(home: Path, cwd: Path, name: str) -> None:
    mcplug.add_config_server("user", name, {"command": "x", "env": {"TOKEN": "secret"}}, home=str(home), cwd=str(cwd))


def test_concurrent_config_edits_lose_nothing_and_stay_private(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    threads = [threading.Thread(target=_add, args=(home, cwd, f"t{i}")) for i in range(8)]
    child = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO / 'bindings/python')!r})
        import mcplug
        for i in range(8):
            mcplug.add_config_server("user", f"p{{sys.argv[1]}}-{{i}}", {{"command": "x"}}, home={str(home)!r}, cwd={str(cwd)!r})
    """)
    procs = [subprocess.Popen([sys.executable, "-c", child, str(n)]) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        assert p.wait(timeout=60) == 0
    config = home / ".claude.json"
    servers = json.loads(config.read_text())["mcpServers"]
    assert set(servers) == {f"t{i}" for i in range(8)} | {f"p{n}-{i}" for n in range(3) for i in range(8)}
    assert stat.S_IMODE(config.stat().st_mode) == 0o600, "a new file holding tokens is private"
    leftovers = [f.name for f in home.iterdir() if ".tmp." in f.name]
    assert not leftovers


def test_a_symlinked_config_is_edited_at_its_target(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    real = tmp_path / "dotfiles" / "claude.json"
    real.parent.mkdir()
    real.write_text('{"keep": 1}')
    real.chmod(0o640)
    (home / ".claude.json").symlink_to(real)
    _add(home, cwd, "a")
    assert (home / ".claude.json").is_symlink()
    data = json.loads(real.read_text())
    assert data["keep"] == 1 and "a" in data["mcpServers"]
    assert stat.S_IMODE(real.stat().st_mode) == 0o640, "the original's mode is kept"


def test_a_fifo_or_a_device_named_as_a_config_file_is_an_error_not_a_hang(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    os.mkfifo(cwd / ".mcp.json")
    (home / ".claude.json").symlink_to("/dev/zero")
    started = time.monotonic()
    found = mcplug.discover_config({"home": str(home), "cwd": str(cwd)})
    assert time.monotonic() - started < 5
    text = json.dumps(found)
    assert "is a FIFO, not a regular file" in text, text[:2000]
    assert "character device" in text
    with pytest.raises(mcplug.ConfigError, match="character device"):
        _add(home, cwd, "b")


def _oauth_peer(*flags: str) -> Any:
    proc = subprocess.Popen([sys.executable, str(REPO / "tests/servers/oauth_server.py"), *flags], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    assert line.startswith("PORT "), line
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


def test_secrets_in_a_url_never_reach_an_error() -> None:
    with pytest.raises(mcplug.McpError) as e:
        mcplug.Client.connect({"type": "http", "url": "http://bob:hunter2@127.0.0.1:1/mcp?api_key=K3Y&x=1"}, connect_timeout=5)
    text = str(e.value) + json.dumps(getattr(e.value, "data", None))
    assert "hunter2" not in text and "K3Y" not in text, text
    assert "***@127.0.0.1:1/mcp?api_key=***&x=1" in text, text


def test_configured_headers_never_follow_a_cross_origin_redirect() -> None:
    target, b = _oauth_peer("--static-token", "t")
    hop, a = _oauth_peer("--redirect-to", b + "/mcp")
    try:
        with pytest.raises(mcplug.McpError, match="redirected to another origin"):
            mcplug.Client.connect({"type": "http", "url": a + "/mcp", "headers": {"X-Api-Key": "k-secret", "Authorization": "Bearer t"}},
                                  connect_timeout=10)
        import urllib.request
        seen = json.loads(urllib.request.urlopen(b + "/stats", timeout=5).read())["seen_key"]
        assert "k-secret" not in seen
    finally:
        target.kill()
        hop.kill()


def test_an_entrys_timeout_limits_its_calls() -> None:
    entry = {"command": sys.executable, "args": [str(FAULT_SERVER)], "timeout": 300}
    with mcplug.Client.connect(entry) as c:
        started = time.monotonic()
        with pytest.raises(mcplug.TimeoutError):
            c.call_tool("sleep", {"ms": 5000})
        assert time.monotonic() - started < 3
    with mcplug.Manager() as m:
        m.connect({"mcpServers": {"f": entry}})
        assert m.wait(20)["servers"]["f"]["state"] == "connected"
        started = time.monotonic()
        with pytest.raises(mcplug.TimeoutError):
            m.call_tool("mcp__f__sleep", {"ms": 5000})
        assert time.monotonic() - started < 3
