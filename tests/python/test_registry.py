"""The official registry's marks (M9): option `registry` against a registry of the tests' own
(tests/servers/registry_server.py, the `/v0.1/servers` format, paged by cursor), with a
connected server-everything over Streamable HTTP; the cache and `updated_since`; a slow, a
failing and a dead registry never in a connect's way; and the environment switch that turns
the requests off."""
from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import mcplug
import mcplug.aio
from conftest import wait_until

SERVER = Path(__file__).resolve().parent.parent / "servers" / "registry_server.py"
OFFICIAL = "io.modelcontextprotocol.registry/official"


def item(name: str, updated: str, status: str = "active", message: str = "", **server: Any) -> Dict[str, Any]:
    meta: Dict[str, Any] = {"status": status, "updatedAt": updated, "publishedAt": updated, "isLatest": True}
    if message:
        meta["statusMessage"] = message
    return {"server": {"name": name, "description": name, "version": "1.0.0", **server}, "_meta": {OFFICIAL: meta}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Registry:
    def __init__(self, tmp: Path, items: List[Dict[str, Any]], *extra: str) -> None:
        self.entries = tmp / "entries.json"
        self.write(items)
        self.port = free_port()
        self.child = subprocess.Popen(
            [sys.executable, str(SERVER), str(self.port), str(self.entries), *extra],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )
        assert self.child.stdout is not None
        assert self.child.stdout.readline().startswith("listening")
        self.url = f"http://127.0.0.1:{self.port}"

    def write(self, items: List[Dict[str, Any]]) -> None:
        self.entries.write_text(json.dumps(items))

    def requests(self) -> List[Dict[str, str]]:
        log = Path(str(self.entries) + ".log")
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def close(self) -> None:
        self.child.kill()
        self.child.wait()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache directory of the test's own, and the switch off."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", raising=False)
    return tmp_path / "cache"


def settled(m: mcplug.Manager) -> Dict[str, Any]:
    assert wait_until(lambda: m.status()["registry"]["state"] != "loading", 30), m.status()
    return m.status()


def items_for(everything_url: str) -> List[Dict[str, Any]]:
    host_port = everything_url.split("/")[2]
    return [
        item("io.test/filler-a", "2026-01-01T00:00:00Z"),
        # The registry writes the URL with a trailing slash and an upper-case host: still it.
        item("io.test/everything", "2026-01-02T00:00:00Z",
             remotes=[{"type": "streamable-http", "url": f"HTTP://{host_port.upper()}/mcp/"}]),
        item("io.test/filler-b", "2026-01-03T00:00:00Z"),
        item("io.test/old-cli", "2026-01-04T00:00:00Z", status="deprecated", message="use io.test/new-cli",
             packages=[{"registryType": "npm", "identifier": "@acme/old-cli", "version": "1.0.0",
                        "transport": {"type": "stdio"}}]),
        item("io.test/tenant", "2026-01-05T00:00:00Z",
             remotes=[{"type": "streamable-http", "url": "https://{tenant}.acme.example/mcp",
                       "variables": {"tenant": {"description": "your tenant"}}}]),
        item("io.test/fetch", "2026-01-06T00:00:00Z",
             packages=[{"registryType": "pypi", "identifier": "mcp-server-fetch", "version": "0.6.2",
                        "transport": {"type": "stdio"}},
                       {"registryType": "oci", "identifier": "docker.io/mcp/fetch:0.6.2",
                        "transport": {"type": "stdio"}}]),
    ]


def config_for(everything_url: str) -> Dict[str, Any]:
    return {"mcpServers": {
        "ev": {"type": "http", "url": everything_url},
        "old": {"command": "npx", "args": ["-y", "@acme/old-cli@1.0.0"]},
        "tenant": {"type": "http", "url": "https://Globex.acme.example:443/mcp?x=1"},
        "fetch": {"command": "uvx", "args": ["mcp-server-fetch"]},
        "fetch-docker": {"command": "docker", "args": ["run", "-i", "--rm", "mcp/fetch"]},
        "unknown": {"command": "npx", "args": ["-y", "@acme/nobody"]},
    }}


# Only ev connects: the rest are matched by their entries, never started.
DISABLED = ["old", "tenant", "fetch", "fetch-docker", "unknown"]


def test_marks_from_a_paged_registry_then_only_what_changed(cache: Path, tmp_path: Path, everything_http: str) -> None:
    reg = Registry(tmp_path, items_for(everything_http))
    try:
        with mcplug.Manager({"registry": reg.url, "disabled": DISABLED}) as m:
            m.connect(config_for(everything_http))
            m.wait(30)
            status = settled(m)
            assert status["registry"]["state"] == "ready", status["registry"]
            assert status["registry"]["servers"] == 6 and status["registry"]["url"] == reg.url
            s = status["servers"]
            assert s["ev"]["state"] == "connected"
            assert s["ev"]["registry"] == {"name": "io.test/everything", "status": "active", "match": "url", "version": "1.0.0"}
            assert s["old"]["registry"] == {"name": "io.test/old-cli", "status": "deprecated", "match": "package",
                                             "version": "1.0.0", "statusMessage": "use io.test/new-cli"}
            assert s["tenant"]["registry"]["match"] == "url_template"
            assert s["fetch"]["registry"]["name"] == "io.test/fetch"
            assert s["fetch-docker"]["registry"]["name"] == "io.test/fetch"
            assert "registry" not in s["unknown"]
            tools = m.list_tools()["tools"]
            assert tools and all(t["registry"]["name"] == "io.test/everything" for t in tools if t["server"] == "ev")
            assert m.search_tools("echo")["tools"][0]["registry"]["name"] == "io.test/everything"
            # The model's view has no marks: they are for the host.
            assert "registry" not in m.list_tools(format="anthropic")["tools"][0]
        first = reg.requests()
        # Six entries, two a page: three pages, each after the cursor of the one before.
        assert [r.get("cursor") for r in first] == [None, "2", "4"], first
        assert all(r["path"] == "/v0.1/servers" and r["version"] == "latest" and "updated_since" not in r for r in first)
        [cached] = list((cache / "mcplug" / "registry").iterdir())
        assert json.loads(cached.read_text())["servers"]["io.test/old-cli"]["status"] == "deprecated"

        # The entry is deleted in the registry: the next manager asks only for what changed
        # since the first fetch, and knows the rest from its cache.
        items = items_for(everything_http)
        items[1] = item("io.test/everything", "2099-01-01T00:00:00Z", status="deleted", message="gone",
                        remotes=items[1]["server"]["remotes"])
        reg.write(items)
        with mcplug.Manager({"registry": reg.url, "disabled": DISABLED}) as m:
            m.connect(config_for(everything_http))
            status = settled(m)
            assert status["servers"]["ev"]["registry"]["status"] == "deleted"
            assert status["servers"]["ev"]["registry"]["statusMessage"] == "gone"
            assert status["servers"]["old"]["registry"]["status"] == "deprecated", "from the cache"
        again = reg.requests()[len(first):]
        assert len(again) == 1 and again[0]["updated_since"].endswith("Z"), again
    finally:
        reg.close()


def test_a_slow_failing_or_dead_registry_is_never_in_a_connects_way(cache: Path, tmp_path: Path, everything_server: Dict[str, Any]) -> None:
    config = {"mcpServers": {"ev": {"command": everything_server["command"], "args": everything_server["args"]}}}
    slow = Registry(tmp_path, [], "--delay", "8")
    try:
        with mcplug.Manager({"registry": slow.url}) as m:
            m.connect(config)
            status = m.wait(30)
            # Connected while the registry's first request still waits for its answer.
            assert status["servers"]["ev"]["state"] == "connected"
            assert status["registry"]["state"] == "loading", status["registry"]
            status = settled(m)
            assert status["registry"]["state"] == "failed" and "timed out" in status["registry"]["error"]
            assert "registry" not in status["servers"]["ev"]
    finally:
        slow.close()
    failing = Registry(tmp_path, [], "--status", "503")
    dead = f"http://127.0.0.1:{free_port()}"
    try:
        for url, says in [(failing.url, "HTTP 503"), (dead, "cannot connect")]:
            with mcplug.Manager({"registry": url}) as m:
                m.connect(config)
                status = settled(m)
                assert status["registry"]["state"] == "failed" and says in status["registry"]["error"], status["registry"]
                assert m.wait(30)["servers"]["ev"]["state"] == "connected"
    finally:
        failing.close()


def test_the_nonessential_traffic_switch_means_no_request(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = Registry(tmp_path, [])
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    try:
        with mcplug.Manager({"registry": reg.url}) as m:
            m.connect({"mcpServers": {}})
            assert settled(m)["registry"]["state"] == "skipped"
        assert reg.requests() == []
    finally:
        reg.close()


def test_the_option_is_checked() -> None:
    for bad, says in [("ftp://x", "http(s) URL"), (3, "true or an http(s) URL"), ("not a url", "http(s) URL")]:
        with pytest.raises(mcplug.McpError) as e:
            mcplug.Manager({"registry": bad})
        assert e.value.kind == "invalid_argument" and says in str(e.value), e.value
    with mcplug.Manager({"registry": False}) as m:
        assert "registry" not in m.status()
    with mcplug.Manager({"registry": True}) as m:
        assert m.status()["registry"]["url"] == "https://registry.modelcontextprotocol.io"
        assert m.status()["registry"]["state"] == "idle", "nothing is fetched before a connect"


def test_asyncio_manager_marks(cache: Path, tmp_path: Path, everything_http: str) -> None:
    reg = Registry(tmp_path, items_for(everything_http))

    async def main() -> None:
        async with mcplug.aio.Manager({"registry": reg.url, "disabled": DISABLED}) as m:
            await m.connect(config_for(everything_http))
            await m.wait(30)
            for _ in range(600):
                status = await m.status()
                if status["registry"]["state"] != "loading":
                    break
                await asyncio.sleep(0.05)
            assert status["servers"]["ev"]["registry"]["name"] == "io.test/everything"
            tools = (await m.list_tools())["tools"]
            assert any(t.get("registry", {}).get("name") == "io.test/everything" for t in tools)

    try:
        asyncio.run(main())
    finally:
        reg.close()
