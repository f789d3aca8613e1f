"""Cross-App Access (`oauth.xaa: true`, Claude Code's enterprise flow) against a test IdP of the
project's own (tests/servers/xaa_server.py: an IdP, an authorization server and two MCP servers):
one login at the IdP, through the `auth/authorize` handler, unlocks both servers; the ID token is
kept in the store per IdP and used by the next manager without a browser; an ID token the IdP no
longer honours means one new login; `xaa: true` without an IdP is an error naming what to give.
Through the Python binding (sync and asyncio), so through the C ABI and the engine."""
from __future__ import annotations

import asyncio
import http.client
import json
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import mcplug
import mcplug.aio

SERVER = Path(__file__).resolve().parents[2] / "tests/servers/xaa_server.py"


class Peer:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(SERVER)], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        assert line.startswith("PORT "), line
        self.base = f"http://127.0.0.1:{int(line.split()[1])}"

    def counts(self) -> Dict[str, int]:
        with urllib.request.urlopen(self.base + "/stats", timeout=5) as r:
            out: Dict[str, int] = json.loads(r.read())["counts"]
            return out

    def revoke_id_tokens(self) -> None:
        urllib.request.urlopen(urllib.request.Request(self.base + "/idp/admin/revoke", data=b"{}"), timeout=5).read()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def peer() -> Iterator[Peer]:
    p = Peer()
    yield p
    p.stop()


class Browser:
    """The user's browser at the IdP: logs in at once (the IdP's redirect is the callback the
    host hands back); keeps every authorization it was sent to."""

    def __init__(self) -> None:
        self.asked: List[Dict[str, Any]] = []

    def follow(self, authorization: Dict[str, Any]) -> str:
        self.asked.append(authorization)
        url = urllib.parse.urlsplit(authorization["url"])
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        conn.request("GET", url.path + "?" + url.query)
        location = conn.getresponse().getheader("Location")
        conn.close()
        assert location and location.startswith(authorization["redirect_uri"]), location
        return location


def login(m: mcplug.Manager, name: str, browser: Browser) -> Dict[str, Any]:
    """`authenticate`: when it needs the user, the browser, then the callback handed back."""
    started = m.authenticate(name)
    if started["state"] == "connected":
        return started
    assert started["state"] == "pending" and "authorization" in started, started
    return m.authenticate(name, callback_url=browser.follow(started["authorization"]), timeout=30)


def options(peer: Peer, store: Path, **extra: Any) -> Dict[str, Any]:
    return {"connection": {"auth_store": str(store), "connect_timeout_ms": 20000,
                           "xaa_idp": {"issuer": peer.base + "/idp", "client_id": "idp-client"}, **extra}}


def config(peer: Peer) -> Dict[str, Any]:
    oauth = {"xaa": True, "clientId": "mcp-client", "clientSecret": "mcp-secret"}
    return {"mcpServers": {name: {"type": "http", "url": f"{peer.base}/mcp/{name}", "oauth": oauth} for name in ("a", "b")}}


def test_one_idp_login_unlocks_both_servers_and_the_next_manager(peer: Peer, tmp_path: Path) -> None:
    store = tmp_path / "auth"
    browser = Browser()
    with mcplug.Manager(options(peer, store)) as m:
        m.connect(config(peer))
        status = m.wait(30)["servers"]
        # No ID token yet, and the manager never logs in on its own.
        for name in ("a", "b"):
            assert status[name]["state"] == "needs-auth", status[name]
            assert status[name]["auth"]["reason"] == "no_token" and status[name]["auth"]["idp"] is True
        assert peer.counts()["logins"] == 0 and browser.asked == []
        done = login(m, "a", browser)
        assert done["state"] == "connected", done
        # The login was at the IdP, sent to the host as any authorization, for no resource.
        [asked] = browser.asked
        assert asked["issuer"] == peer.base + "/idp" and "/idp/authorize?" in asked["url"]
        assert "resource=" not in asked["url"] and "scope=openid" in asked["url"]
        # The second server of that IdP: no second login, no browser.
        done = m.authenticate("b", wait=True, timeout=30)
        assert done["state"] == "connected", done
        assert len(browser.asked) == 1
        c = peer.counts()
        assert (c["logins"], c["code_grants"], c["exchanges"], c["jwt_bearer"]) == (1, 1, 2, 2), c
        assert m.call_tool("mcp__a__whoami", {})["content"][0]["text"] == "a for alice"
        assert m.call_tool("mcp__b__whoami", {})["content"][0]["text"] == "b for alice"
        # Each server's own token forgotten: the IdP's ID token stays.
        m.logout("a")
        m.logout("b")
    # The next manager (another process would do the same) connects both without a login: the
    # ID token is in the store under the IdP's issuer.
    browser2 = Browser()
    with mcplug.Manager(options(peer, store)) as m:
        m.connect(config(peer))
        status = m.wait(30)["servers"]
        assert status["a"]["state"] == "connected" and status["b"]["state"] == "connected", status
        assert browser2.asked == []
        c = peer.counts()
        assert (c["logins"], c["exchanges"], c["jwt_bearer"]) == (1, 4, 4), c
        # The IdP stops honouring its ID tokens: the exchange is refused, the kept token is
        # forgotten, and one new login follows.
        peer.revoke_id_tokens()
        m.logout("b")
        done = login(m, "b", browser2)
        assert done["state"] == "connected", done
        assert len(browser2.asked) == 1 and peer.counts()["logins"] == 2
    files = [p for p in store.iterdir() if p.is_file() and p.suffix == ".json"]
    kept = [f for f in files if json.loads(f.read_text())["record"].get("id_token")]
    assert len(kept) == 1, "one ID token, kept under its IdP"
    assert json.loads(kept[0].read_text())["key"] == f"xaa-idp {peer.base}/idp"
    assert kept[0].stat().st_mode & 0o777 == 0o600


def test_xaa_without_an_idp_is_an_error_naming_what_to_give(peer: Peer, tmp_path: Path) -> None:
    with mcplug.Manager({"connection": {"auth_store": str(tmp_path / "auth"), "connect_timeout_ms": 20000}}) as m:
        m.connect(config(peer))
        st = m.wait(30)["servers"]["a"]
        assert st["state"] == "failed", st
        assert "xaa_idp" in st["error"]["message"] and "oauth.xaa" in st["error"]["message"], st
    for bad, says in [({"issuer": peer.base + "/idp"}, "needs `client_id`"), ("x", "must be an object"),
                      ({"issuer": "ftp://x", "client_id": "c"}, "http(s) URL")]:
        with pytest.raises(mcplug.McpError) as e:
            mcplug.Manager({"connection": {"xaa_idp": bad}})
        assert e.value.kind == "invalid_argument" and "xaa_idp" in str(e.value) and says in str(e.value), e.value


def test_asyncio_manager_one_login_two_servers(peer: Peer, tmp_path: Path) -> None:
    browser = Browser()

    async def main() -> None:
        async with mcplug.aio.Manager(options(peer, tmp_path / "auth")) as m:
            await m.connect(config(peer))
            await m.wait(30)
            started = await m.authenticate("a")
            loc = await asyncio.get_running_loop().run_in_executor(None, browser.follow, started["authorization"])
            assert (await m.authenticate("a", callback_url=loc, timeout=30))["state"] == "connected"
            assert (await m.authenticate("b", wait=True, timeout=30))["state"] == "connected"
            assert len(browser.asked) == 1 and peer.counts()["logins"] == 1
            assert (await m.call_tool("mcp__b__whoami", {}))["content"][0]["text"] == "b for alice"

    asyncio.run(main())
