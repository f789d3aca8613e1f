"""Company networks, part one: trust and client certificates. server-everything (Streamable
HTTP) behind Debian's nginx with TLS from a private CA made at test time: refused with a clear
error without the CA, connected with it through `tls.ca_file` (entry and connection), `ca_pem`,
`SSL_CERT_FILE` and `NODE_EXTRA_CA_CERTS`; nginx requiring a client certificate: refused without
one, connected with `tls.client_cert`/`client_key` (also an encrypted key and its passphrase) and
with the `CLAUDE_CODE_CLIENT_*` variables. The 2026-07-28 era's server behind the same nginx: its
calls on the direct path over TLS, one handshake per connection, sessions resumed. Then proxies
(tinyproxy): every remote transport through one, NO_PROXY, a server's own proxy, a proxy that is
down or wants credentials, the OAuth flow through one. Through the Python binding (so the C ABI)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import mcplug
from conftest import EVERYTHING_JS
from test_oauth import follow  # the headless browser of the OAuth tests
from netpeers import PASSPHRASE, Nginx, Tinyproxy, free_port, make_pki

WS_BRIDGE = Path(__file__).resolve().parents[2] / "tests/servers/ws_bridge.py"
MODERN_HTTP = Path(__file__).resolve().parents[2] / "tests/servers/modern_http_server.py"

ENV = ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "CLAUDE_CODE_CLIENT_CERT",
       "CLAUDE_CODE_CLIENT_KEY", "CLAUDE_CODE_CLIENT_KEY_PASSPHRASE", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY",
       "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy")


def _spawn(args: List[str], port: int, env: Optional[Dict[str, str]] = None) -> subprocess.Popen:  # type: ignore[type-arg]
    child = subprocess.Popen(args, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return child
        except OSError:
            if child.poll() is not None or time.monotonic() > deadline:
                child.kill()
                pytest.fail(f"{args} did not listen on {port}", pytrace=False)
            time.sleep(0.05)


@pytest.fixture(scope="module")
def tls_peer(tmp_path_factory: pytest.TempPathFactory, everything_http: str) -> Iterator[Tuple[Nginx, Dict[str, Path]]]:
    """nginx with TLS in front of server-everything over Streamable HTTP (/mcp), over HTTP+SSE
    (/sse, /message) and over WebSocket (/ws, through tests/servers/ws_bridge.py), and of the
    2026-07-28 era's server over Streamable HTTP (/modern)."""
    d = tmp_path_factory.mktemp("net")
    pki = make_pki(d / "pki")
    sse_port, ws_port, modern_port = free_port(), free_port(), free_port()
    node = shutil.which("node") or "node"
    sse = _spawn([node, str(EVERYTHING_JS), "sse"], sse_port, {"PORT": str(sse_port)})
    ws = _spawn([sys.executable, str(WS_BRIDGE), str(ws_port), node, str(EVERYTHING_JS), "stdio"], ws_port)
    modern = _spawn([sys.executable, str(MODERN_HTTP), str(modern_port)], modern_port)
    routes = {"/sse": f"127.0.0.1:{sse_port}", "/message": f"127.0.0.1:{sse_port}", "/ws": f"127.0.0.1:{ws_port}",
              "/modern": f"127.0.0.1:{modern_port}/mcp"}
    nginx = Nginx(d / "nginx", pki, everything_http.split("/")[2], routes)
    nginx.ws_port = ws_port  # type: ignore[attr-defined]
    yield nginx, pki
    nginx.stop()
    for child in (sse, ws, modern):
        child.kill()
        child.wait()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for v in ENV:
        monkeypatch.delenv(v, raising=False)


def connect(url: str, entry_tls: Any = None, kind: str = "http", **options: Any) -> mcplug.Client:
    server: Dict[str, Any] = {"type": kind, "url": url}
    if entry_tls is not None:
        server["tls"] = entry_tls
    return mcplug.Client.connect(server, connect_timeout=20, request_timeout=20, options=options or None)


def echo(c: mcplug.Client) -> str:
    return str(c.call_tool("echo", {"message": "over TLS"})["content"][0]["text"])


def test_a_private_ca_is_refused_until_trusted(tls_peer: Tuple[Nginx, Dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    nginx, pki = tls_peer
    url = nginx.url("/mcp")
    with pytest.raises(mcplug.TransportError) as e:
        connect(url)
    text = str(e.value)
    assert "the TLS connection to localhost failed" in text and "unknown issuer" in text, text
    assert "trusted: the system's trust store" in text, "the error names the trust consulted"
    # A CA that is not the server's is no better.
    with pytest.raises(mcplug.TransportError, match="unknown issuer"):
        connect(url, {"ca_file": str(pki["other_ca"])})
    # The entry's tls.ca_file, the connection's tls option, tls.ca_pem.
    with connect(url, {"ca_file": str(pki["ca"])}) as c:
        assert echo(c) == "Echo: over TLS"
    with connect(url, tls={"ca_file": str(pki["ca"])}) as c:
        assert echo(c) == "Echo: over TLS"
    with connect(nginx.url("/mcp", host="127.0.0.1"), {"ca_pem": pki["ca"].read_text()}) as c:
        assert echo(c) == "Echo: over TLS", "a certificate for the IP address too"
    # SSL_CERT_FILE (in place of the system's store), NODE_EXTRA_CA_CERTS (added to it).
    monkeypatch.setenv("SSL_CERT_FILE", str(pki["ca"]))
    with connect(url) as c:
        assert echo(c) == "Echo: over TLS"
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(pki["ca"]))
    with connect(url) as c:
        assert echo(c) == "Echo: over TLS"


def test_bad_tls_options_are_named(tls_peer: Tuple[Nginx, Dict[str, Path]], tmp_path: Path) -> None:
    nginx, pki = tls_peer
    url = nginx.url("/mcp")
    for tls, says in [({"ca_file": str(tmp_path / "none.pem")}, "tls.ca_file"), ({"cafile": "x"}, "unknown key `cafile`"),
                      ({"client_cert": str(pki["client_cert"])}, "go together"), ("x", "must be an object")]:
        with pytest.raises(mcplug.InvalidArgumentError) as e:
            connect(url, tls)
        assert says in str(e.value), e.value
    (tmp_path / "empty.pem").write_text("nothing here\n")
    with pytest.raises(mcplug.InvalidArgumentError, match="no certificate in it"):
        connect(url, {"ca_file": str(tmp_path / "empty.pem")})


def test_a_client_certificate_when_the_server_requires_one(tls_peer: Tuple[Nginx, Dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    nginx, pki = tls_peer
    url = nginx.url("/mcp", mtls=True)
    ca = str(pki["ca"])
    # nginx asks for a certificate and answers 400 to a request without one.
    with pytest.raises(mcplug.McpError) as e:
        connect(url, {"ca_file": ca})
    assert "400" in str(e.value) or "client certificate" in str(e.value), e.value
    cert, key = str(pki["client_cert"]), str(pki["client_key"])
    with connect(url, {"ca_file": ca, "client_cert": cert, "client_key": key}) as c:
        assert echo(c) == "Echo: over TLS"
    enc = str(pki["client_key_enc"])
    with connect(url, {"ca_file": ca, "client_cert": cert, "client_key": enc, "client_key_passphrase": PASSPHRASE}) as c:
        assert echo(c) == "Echo: over TLS"
    with pytest.raises(mcplug.InvalidArgumentError, match="is encrypted: give its passphrase"):
        connect(url, {"ca_file": ca, "client_cert": cert, "client_key": enc})
    with pytest.raises(mcplug.InvalidArgumentError, match="cannot be decrypted"):
        connect(url, {"ca_file": ca, "client_cert": cert, "client_key": enc, "client_key_passphrase": "wrong"})
    # Claude Code's variables, as defaults.
    monkeypatch.setenv("CLAUDE_CODE_CLIENT_CERT", cert)
    monkeypatch.setenv("CLAUDE_CODE_CLIENT_KEY", enc)
    monkeypatch.setenv("CLAUDE_CODE_CLIENT_KEY_PASSPHRASE", PASSPHRASE)
    with connect(url, {"ca_file": ca}) as c:
        assert echo(c) == "Echo: over TLS"


def test_a_manager_server_entry_carries_its_tls(tls_peer: Tuple[Nginx, Dict[str, Path]]) -> None:
    nginx, pki = tls_peer
    entry = {"type": "http", "url": nginx.url("/mcp", mtls=True),
             "tls": {"ca_file": str(pki["ca"]), "client_cert": str(pki["client_cert"]), "client_key": str(pki["client_key"])}}
    with mcplug.Manager() as m:
        m.connect({"mcpServers": {"corp": entry, "untrusted": {"type": "http", "url": nginx.url("/mcp")}}})
        st = m.wait(30)["servers"]
        assert st["corp"]["state"] == "connected", st["corp"]
        assert st["untrusted"]["state"] == "failed" and "unknown issuer" in st["untrusted"]["error"]["message"]
        assert m.call_tool("mcp__corp__echo", {"message": "m"})["content"][0]["text"] == "Echo: m"


def test_every_remote_transport_over_tls(tls_peer: Tuple[Nginx, Dict[str, Path]]) -> None:
    nginx, pki = tls_peer
    ca = {"ca_file": str(pki["ca"])}
    for kind, path, scheme in [("http", "/mcp", "https"), ("http", "/modern", "https"), ("sse", "/sse", "https"),
                               ("ws", "/ws", "wss")]:
        url = nginx.url(path).replace("https://", f"{scheme}://")
        with pytest.raises(mcplug.TransportError) as e:
            connect(url, kind=kind)
        assert "unknown issuer" in str(e.value) and "trusted:" in str(e.value), (kind, str(e.value))
        with connect(url, ca, kind=kind) as c:
            assert echo(c) == "Echo: over TLS", kind


def test_the_modern_era_over_https_on_the_direct_path_one_handshake_per_connection(
        tls_peer: Tuple[Nginx, Dict[str, Path]]) -> None:
    """A host thread's calls of the 2026-07-28 era go by the direct path over TLS too: each new
    connection does one handshake, later ones resume the session, and a connection carries many
    calls. nginx's `short` port closes a connection after 4 requests, so new ones are needed."""
    nginx, pki = tls_peer
    ca = {"ca_file": str(pki["ca"])}
    logged = len(nginx.requests())
    mcplug.capture_logs("mcplug::transport=debug")
    try:
        mcplug.next_log_records(timeout=0, max_records=10000)
        with connect(nginx.url("/modern", short=True), ca) as c:
            assert c.protocol_version == "2026-07-28"
            for i in range(14):
                assert echo(c) == "Echo: over TLS", i
        records = mcplug.next_log_records(timeout=0, max_records=10000)
    finally:
        mcplug.release_logs()
    direct = [r["message"] for r in records if "a direct connection" in r["message"]]
    assert direct, [r["message"] for r in records]
    assert all("/modern: a direct connection (TLS 1.3, " in m for m in direct), direct
    assert any("session resumed" in m for m in direct), direct
    # nginx's side (it logs a request once its response ended): the 14 calls' POSTs went over
    # connections of 4 requests each, and every connection after the first resumed its session.
    deadline = time.monotonic() + 10
    while True:
        posts = [r for r in nginx.requests()[logged:] if r[3] == "POST" and r[6] == nginx.short_port]
        if len(posts) >= 14 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(posts) >= 14, posts
    connections = sorted({r[0] for r in posts})
    assert len(connections) <= len(posts) // 4 + 2, posts
    first_of_each = [r for r in posts if r[1] == 1]
    assert sum(1 for r in first_of_each if r[2]) >= len(first_of_each) - 2, posts


def test_the_modern_era_over_https_refused_and_with_a_client_certificate(
        tls_peer: Tuple[Nginx, Dict[str, Path]]) -> None:
    """On the direct path a TLS failure is explained as on the general path (the request goes
    there), and a client certificate is presented."""
    nginx, pki = tls_peer
    with pytest.raises(mcplug.TransportError) as e:
        connect(nginx.url("/modern"))
    assert "unknown issuer" in str(e.value) and "trusted:" in str(e.value), e.value
    identity = {"ca_file": str(pki["ca"]), "client_cert": str(pki["client_cert"]),
                "client_key": str(pki["client_key"])}
    with connect(nginx.url("/modern", mtls=True), identity) as c:
        for _ in range(3):
            assert echo(c) == "Echo: over TLS"


def test_auth_server_metadata_url_is_read_over_https_instead_of_discovery(tls_peer: Tuple[Nginx, Dict[str, Path]], tmp_path: Path) -> None:
    """`oauth.authServerMetadataUrl` (an https URL, as Claude Code requires): the authorization
    server's metadata is read there — through the connection's trust — and not discovered."""
    import json
    import urllib.request

    nginx, pki = tls_peer
    server = Path(__file__).resolve().parents[2] / "tests/servers/oauth_server.py"
    proc = subprocess.Popen([sys.executable, str(server)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        base = f"http://127.0.0.1:{int(line.split()[1])}"
        meta = {"issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
                "registration_endpoint": base + "/register", "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"], "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_post"]}
        (nginx.dir / "static" / "as.json").write_text(json.dumps(meta))
        metadata_url = nginx.url("/static/as.json")

        def stats() -> Dict[str, int]:
            with urllib.request.urlopen(base + "/stats", timeout=5) as r:
                out: Dict[str, int] = json.loads(r.read())["counts"]
                return out

        entry = {"type": "http", "url": base + "/mcp", "oauth": {"authServerMetadataUrl": metadata_url}}
        options = {"auth_store": str(tmp_path / "auth")}
        # Without the CA the metadata cannot be read: the error says why.
        with pytest.raises(mcplug.NeedsAuthError) as e:
            mcplug.Client.connect(entry, handlers={"auth/authorize": follow}, connect_timeout=20, options=options)
        assert "authServerMetadataUrl" in str(e.value) and "unknown issuer" in str(e.value), e.value
        with mcplug.Client.connect(entry, handlers={"auth/authorize": follow}, connect_timeout=20,
                                   options={**options, "tls": {"ca_file": str(pki["ca"])}}) as c:
            assert c.call_tool("whoami", {})["content"][0]["text"] == "ok"
        counts = stats()
        assert counts["authorize"] == 1 and counts["as_metadata"] == 0, counts
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Tinyproxy]:
    p = Tinyproxy(tmp_path / "proxy")
    yield p
    p.stop()


def test_every_remote_transport_through_a_proxy(tls_peer: Tuple[Nginx, Dict[str, Path]], proxy: Tinyproxy,
                                                 everything_http: str, monkeypatch: pytest.MonkeyPatch) -> None:
    nginx, pki = tls_peer
    ca = {"ca_file": str(pki["ca"])}
    monkeypatch.setenv("HTTPS_PROXY", proxy.url())
    monkeypatch.setenv("http_proxy", proxy.url())
    # HTTPS (both eras), HTTP+SSE over TLS and WebSocket over TLS: CONNECT tunnels.
    for kind, path, scheme in [("http", "/mcp", "https"), ("http", "/modern", "https"), ("sse", "/sse", "https"),
                               ("ws", "/ws", "wss")]:
        with connect(nginx.url(path).replace("https://", f"{scheme}://"), ca, kind=kind) as c:
            assert echo(c) == "Echo: over TLS", kind
            if path == "/modern":
                assert c.protocol_version == "2026-07-28"
    assert f"CONNECT localhost:{nginx.https_port}" in proxy.seen(), proxy.seen()
    # Plain HTTP goes as absolute-form requests, as curl sends them; a plain WebSocket through a
    # tunnel too.
    with connect(everything_http) as c:
        assert echo(c) == "Echo: over TLS"
    assert f"POST {everything_http} " in proxy.seen(), proxy.seen()
    ws_port = nginx.ws_port  # type: ignore[attr-defined]
    with connect(f"ws://127.0.0.1:{ws_port}/", kind="ws") as c:
        assert echo(c) == "Echo: over TLS"
    assert f"CONNECT 127.0.0.1:{ws_port}" in proxy.seen(), proxy.seen()


def test_no_proxy_a_servers_own_proxy_and_a_proxy_that_is_down(tls_peer: Tuple[Nginx, Dict[str, Path]], proxy: Tinyproxy,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    nginx, pki = tls_peer
    ca = {"ca_file": str(pki["ca"])}
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("HTTPS_PROXY", dead)
    for kind, path, scheme in [("http", "/mcp", "https"), ("ws", "/ws", "wss")]:
        with pytest.raises(mcplug.TransportError) as e:
            connect(nginx.url(path).replace("https://", f"{scheme}://"), ca, kind=kind)
        assert dead in str(e.value), (kind, str(e.value))
    # NO_PROXY names the host (curl's rules: a suffix, an IP, a CIDR range).
    for skip in ("localhost", ".localhost", "localhost,10.0.0.0/8"):
        monkeypatch.setenv("NO_PROXY", skip)
        with connect(nginx.url("/mcp"), ca) as c:
            assert echo(c) == "Echo: over TLS", skip
    monkeypatch.setenv("NO_PROXY", "127.0.0.0/8")
    with connect(nginx.url("/mcp", host="127.0.0.1"), ca) as c:
        assert echo(c) == "Echo: over TLS", "a CIDR range"
    monkeypatch.delenv("NO_PROXY")
    # A server's own `proxy`: false for none, or a URL over the environment's.
    server = {"type": "http", "url": nginx.url("/mcp"), "tls": ca, "proxy": False}
    with mcplug.Client.connect(server, connect_timeout=20) as c:
        assert echo(c) == "Echo: over TLS"
    tunnels = f"CONNECT localhost:{nginx.https_port}"
    before = proxy.seen().count(tunnels)
    with mcplug.Client.connect({**server, "proxy": proxy.url()}, connect_timeout=20) as c:
        assert echo(c) == "Echo: over TLS"
    assert proxy.seen().count(tunnels) > before, "the server's own proxy was used"
    with connect(nginx.url("/mcp"), ca, proxy=proxy.url()) as c:
        assert echo(c) == "Echo: over TLS", "the connection's proxy option"
    with pytest.raises(mcplug.InvalidArgumentError, match="or false for none"):
        connect(nginx.url("/mcp"), ca, proxy=True)


def test_a_proxy_that_wants_credentials(tls_peer: Tuple[Nginx, Dict[str, Path]], tmp_path: Path) -> None:
    nginx, pki = tls_peer
    ca = {"ca_file": str(pki["ca"])}
    guarded = Tinyproxy(tmp_path / "guarded", auth="alice:pa55word")
    try:
        for kind, path, scheme in [("http", "/mcp", "https"), ("ws", "/ws", "wss")]:
            url = nginx.url(path).replace("https://", f"{scheme}://")
            with pytest.raises(mcplug.TransportError) as e:
                connect(url, ca, kind=kind, proxy=guarded.url())
            assert "407" in str(e.value) and "credentials" in str(e.value), (kind, str(e.value))
            with pytest.raises(mcplug.TransportError) as e:
                connect(url, ca, kind=kind, proxy=guarded.url("alice:wrong"))
            assert "wrong" not in str(e.value), "the credentials are never shown"
            with connect(url, ca, kind=kind, proxy=guarded.url("alice:pa55word")) as c:
                assert echo(c) == "Echo: over TLS", kind
    finally:
        guarded.stop()


def test_the_oauth_flow_through_the_proxy(proxy: Tinyproxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = Path(__file__).resolve().parents[2] / "tests/servers/oauth_server.py"
    proc = subprocess.Popen([sys.executable, str(server)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        base = f"http://127.0.0.1:{int(line.split()[1])}"

        monkeypatch.setenv("HTTP_PROXY", proxy.url())
        with mcplug.Client.connect({"type": "http", "url": base + "/mcp"}, handlers={"auth/authorize": follow},
                                   connect_timeout=20, options={"auth_store": str(tmp_path / "auth")}) as c:
            assert c.call_tool("whoami", {})["content"][0]["text"] == "ok"
        seen = proxy.seen()
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server", "/register", "/token", "/mcp"):
            assert f"{base}{path} " in seen, (path, seen)
    finally:
        proc.kill()
        proc.wait()
