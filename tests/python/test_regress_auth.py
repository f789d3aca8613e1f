"""Issue 32, items 1-4: what a slow human and a hostile or slow authorization server did to a
connect, against tests/servers/oauth_server.py, through the Python binding (so the C ABI and the
engine): a login slower than the `server/discover` probe, tokens that live 60 s, 299 s or an
absurd time, a loopback listener held by idle connections and forged callbacks, a token answer
that trickles."""
from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import mcplug

from test_oauth import Peer, connect, follow, peers  # noqa: F401  (the fixture)


def slow(seconds: float) -> Any:
    """A person who takes `seconds` to log in, then the headless follower."""

    def handler(params: Dict[str, Any]) -> Dict[str, Any]:
        time.sleep(seconds)
        return follow(params)

    return handler


@pytest.mark.parametrize("era", ["modern", "dual"])
def test_a_login_slower_than_the_probe_still_finds_the_modern_era(peers: Any, tmp_path: Path, era: str) -> None:
    peer = peers("--era", era)
    started = time.monotonic()
    with connect(peer, tmp_path / "auth", slow(6.5)) as c:
        assert c.protocol_version == "2026-07-28", "taken for a legacy server while the user logged in"
        assert c.call_tool("whoami", {})["content"][0]["text"] == "ok"
    s = peer.stats()
    assert s["counts"]["authorize"] == 1, "the user was asked once"
    assert s["counts"]["initialize"] == 0, "no fall back to initialize"
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("lifetime", ["60", "299", "18446744073709551615"])
def test_a_short_or_absurd_token_lifetime_is_sent(peers: Any, tmp_path: Path, lifetime: str) -> None:
    peer = peers("--expires-in", lifetime)
    with connect(peer, tmp_path / "auth") as c:
        for _ in range(3):
            assert c.call_tool("whoami", {})["content"][0]["text"] == "ok"
    s = peer.stats()
    assert s["counts"]["authorize"] == 1 and s["counts"]["refresh"] == 0, s["counts"]
    seen = s["seen_auth"]["/mcp"]
    # The first request had no token (the 401 that started the login); every one after it did.
    first = seen.index("Bearer " + s["issued"]["access"][0])
    assert all(a is not None for a in seen[first:]), seen


def test_a_stored_short_lived_token_is_sent_from_the_next_connection(peers: Any, tmp_path: Path) -> None:
    peer = peers("--expires-in", "120")
    store = tmp_path / "auth"
    with connect(peer, store) as c:
        c.call_tool("whoami", {})
    with connect(peer, store, None) as c:
        c.call_tool("whoami", {})
    s = peer.stats()
    assert s["counts"]["authorize"] == 1 and s["counts"]["refresh"] == 0, s["counts"]


def _query(url: str) -> Dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))


def _get(url: str) -> Tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_the_loopback_listener_serves_side_by_side_and_checks_state_first(peers: Any, tmp_path: Path) -> None:
    peer = peers()
    pages: List[Tuple[int, str]] = []
    idle: List[socket.socket] = []

    def browser(params: Dict[str, Any]) -> None:
        redirect = urllib.parse.urlsplit(params["redirect_uri"])
        # Eight connections that never send a request line.
        for _ in range(8):
            idle.append(socket.create_connection(("127.0.0.1", redirect.port), timeout=5))
        loc = follow(params)["callback_url"]

        def later() -> None:
            time.sleep(0.2)
            forged = params["redirect_uri"] + "?" + urllib.parse.urlencode({"code": "evil", "state": "forged"})
            pages.append(_get(forged))
            pages.append(_get(params["redirect_uri"] + "?code=evil"))
            pages.append(_get(loc))

        threads.append(threading.Thread(target=later, daemon=True))
        threads[-1].start()
        return None

    threads: List[threading.Thread] = []
    started = time.monotonic()
    try:
        with connect(peer, tmp_path / "auth", browser) as c:
            assert c.call_tool("whoami", {})["content"][0]["text"] == "ok"
    finally:
        for s in idle:
            s.close()
    assert time.monotonic() - started < 5, "idle connections delayed the real callback"
    for t in threads:
        t.join(10)
    (forged_status, forged_page), (missing_status, _), (real_status, real_page) = pages
    assert forged_status == 400 and "does not belong" in forged_page, forged_page
    assert missing_status == 400
    assert real_status == 200 and "received the authorization" in real_page, real_page
    assert peer.stats()["counts"]["authorize"] == 1


def test_a_refusal_is_told_to_the_browser_and_fails_the_connect(peers: Any, tmp_path: Path) -> None:
    peer = peers()
    pages: List[Tuple[int, str]] = []

    def browser(params: Dict[str, Any]) -> None:
        state = _query(params["url"])["state"]
        denied = params["redirect_uri"] + "?" + urllib.parse.urlencode({
            "error": "access_denied", "error_description": "the user said <no>", "state": state,
            "iss": params["issuer"]})

        def later() -> None:
            time.sleep(0.2)
            pages.append(_get(denied))

        threads.append(threading.Thread(target=later, daemon=True))
        threads[-1].start()
        return None

    threads: List[threading.Thread] = []
    with pytest.raises(mcplug.NeedsAuthError) as e:
        connect(peer, tmp_path / "auth", browser)
    for t in threads:
        t.join(10)
    assert e.value.data["reason"] == "declined" and "access_denied" in str(e.value)
    [(status, page)] = pages
    assert status == 400 and "did not succeed" in page and "access_denied" in page, page
    assert "<no>" not in page and "&lt;no&gt;" in page, "the server's words are escaped"
    assert "authorization is complete" not in page


def test_a_trickling_token_answer_is_a_timeout_and_asks_once(peers: Any, tmp_path: Path) -> None:
    peer = peers("--token-trickle", "30")
    asked = []

    def handler(params: Dict[str, Any]) -> Dict[str, Any]:
        asked.append(1)
        return follow(params)

    started = time.monotonic()
    with pytest.raises(mcplug.NeedsAuthError) as e:
        connect(peer, tmp_path / "auth", handler, auth_request_timeout_ms=2000)
    assert e.value.data["reason"] == "timeout", (e.value.data, str(e.value))
    assert "refused" not in str(e.value)
    assert len(asked) == 1 and peer.stats()["counts"]["authorize"] == 1, "the user was asked once"
    assert time.monotonic() - started < 15
