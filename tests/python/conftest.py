"""Shared fixtures: the test peers (paths relative to the repository root), process helpers, and
a hard per-test time limit so that a hang fails the run instead of stalling it."""
from __future__ import annotations

import faulthandler
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bindings" / "python"))  # works without PYTHONPATH too

# The default OAuth store (where a 401's needs-auth is remembered) under the build folder, never
# the user's: every connection of these tests finds it there.
os.environ["XDG_STATE_HOME"] = str(REPO / "target" / "test-state" / f"py-{os.getpid()}")

import mcplug  # noqa: E402

EVERYTHING_JS = REPO / ".deps/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
FAULT_SERVER = REPO / "tests/servers/fault_server.py"
MODERN_SERVER = REPO / "tests/servers/modern_server.py"
VENV_PYTHON = REPO / ".deps/venv/bin/python"
NPM_BIN = REPO / ".deps/npm/node_modules/.bin"

NPM_INSTALL = (
    "mkdir -p .deps/npm && cd .deps/npm && echo '{\"private\":true}' > package.json && "
    "npm install @modelcontextprotocol/server-everything@2026.8.31 koffi@3.3.4"
)
VENV_INSTALL = "python3 -m venv .deps/venv && .deps/venv/bin/pip install pytest mcp==2.3.0"

#: No single test may take longer than this (the whole suite runs in well under two minutes).
TEST_LIMIT_S = 60


_real_stderr: Optional[int] = None


def pytest_configure(config: pytest.Config) -> None:
    # A copy of stderr taken before any test runs, so a hang's tracebacks escape output capture.
    global _real_stderr
    _real_stderr = os.dup(sys.stderr.fileno())


@pytest.fixture(autouse=True)
def _hard_time_limit() -> Iterator[None]:
    faulthandler.dump_traceback_later(TEST_LIMIT_S, exit=True, file=_real_stderr if _real_stderr is not None else sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()


def _require(path: Path, install: str) -> None:
    if not path.exists():
        pytest.fail(
            f"test peer missing: {path}\nInstall the peers from the repository root ({REPO}) with:\n  {install}",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def everything_server() -> Dict[str, Any]:
    """server-everything over stdio (a legacy-era server: it negotiates 2025-11-25)."""
    _require(EVERYTHING_JS, NPM_INSTALL)
    node = shutil.which("node")
    if node is None:
        pytest.fail("`node` is not on PATH; server-everything needs Node.js", pytrace=False)
    return {"command": node, "args": [str(EVERYTHING_JS)], "name": "everything", "env": {"MCPLUG_PY_TEST": "from-pytest"}}


@pytest.fixture(scope="session")
def everything(everything_server: Dict[str, Any]) -> Iterator[mcplug.Client]:
    """One server-everything connection shared by the read-only tests."""
    with mcplug.Client.connect(everything_server, connect_timeout=30) as client:
        yield client


@pytest.fixture(scope="session")
def everything_http() -> Iterator[str]:
    """server-everything over Streamable HTTP on a port of its own; yields its /mcp URL."""
    _require(EVERYTHING_JS, NPM_INSTALL)
    node = shutil.which("node")
    if node is None:
        pytest.fail("`node` is not on PATH; server-everything needs Node.js", pytrace=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    child = subprocess.Popen(
        [node, str(EVERYTHING_JS), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        def listening() -> bool:
            if child.poll() is not None:
                pytest.fail(f"server-everything (streamableHttp) exited with {child.returncode}", pytrace=False)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return True
            except OSError:
                return False

        if not wait_until(listening, 30, 0.05):
            pytest.fail(f"server-everything (streamableHttp) did not listen on {port} within 30 s", pytrace=False)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        child.terminate()
        try:
            child.wait(5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def npm_server(name: str) -> str:
    """The path of an npm test peer's command (``mcp-server-filesystem``, ``mcp-server-memory``)."""
    path = NPM_BIN / name
    _require(path, "bash tests/install-deps.sh")
    return str(path)


@pytest.fixture(scope="session")
def modern_server() -> Dict[str, Any]:
    """The 2026-07-28 server on the Python SDK."""
    _require(VENV_PYTHON, VENV_INSTALL)
    _require(MODERN_SERVER, "git checkout tests/servers/modern_server.py")
    return {"command": str(VENV_PYTHON), "args": [str(MODERN_SERVER)], "name": "modern"}


FaultFactory = Callable[..., Dict[str, Any]]


@pytest.fixture
def fault() -> FaultFactory:
    """fault("mode") -> a server entry for the fault server; its command line carries a unique
    marker (the server ignores extra arguments) so the test can find its process."""
    _require(FAULT_SERVER, "git checkout tests/servers/fault_server.py")

    def make(mode: str = "normal", env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        marker = f"mcplug-pytest-{uuid.uuid4().hex}"
        entry: Dict[str, Any] = {"command": sys.executable, "args": [str(FAULT_SERVER), mode, marker], "name": f"fault-{mode}"}
        if env:
            entry["env"] = env
        return entry

    return make


def pids_with(marker: str) -> List[int]:
    """Live processes whose command line contains `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if marker.encode() in cmdline and alive(int(entry)):
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """True if `pid` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return False


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    """Polls `predicate` until it holds or `timeout` seconds pass; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def text_of(result: Dict[str, Any]) -> str:
    """The text of a CallToolResult whose content is one text item."""
    content = result["content"]
    assert len(content) == 1 and content[0]["type"] == "text", result
    return str(content[0]["text"])
