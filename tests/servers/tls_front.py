#!/usr/bin/env python3
"""Real network pieces for the company-network tests, made at test time: a private CA and its
certificates (`openssl`), and Debian's `nginx` terminating TLS in front of plain-HTTP servers —
once as any HTTPS server, once requiring a client certificate (`ssl_verify_client on`).

As a program, for the C and Node tests:

    python3 tests/servers/tls_front.py <dir> <upstream host:port> [--proxy] [<path prefix>=<host:port> ...]

prints one JSON line — {"https_port", "mtls_port", "short_port", "access_log", "ca", "other_ca",
"client_cert", "client_key", "client_key_enc", "passphrase"}; with --proxy also "proxy_port" and
"proxy_log" of a tinyproxy beside, and "guarded_proxy_port" and "guarded_proxy_auth" of one that
wants those credentials — once they listen, and stops them when it is terminated (or its
standard input closes)."""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, Optional


PASSPHRASE = "s3cret pass"
#: The credentials of the proxy that wants them (--proxy).
GUARDED_AUTH = "alice:pa55word"


def _require(program: str) -> str:
    found = shutil.which(program) or (f"/usr/sbin/{program}" if Path(f"/usr/sbin/{program}").exists() else None)
    if found is None:
        raise RuntimeError(f"`{program}` is missing: install it with tests/install-deps.sh (Debian's package)")
    return found


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run([_require("openssl"), *args], cwd=cwd, check=True, capture_output=True)


def die_with_us() -> None:
    """In a child before its exec: it goes when the process that started it goes, however that
    ends (PR_SET_PDEATHSIG)."""
    import ctypes
    import signal
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def end_process(proc: "subprocess.Popen[bytes] | subprocess.Popen[str]") -> None:
    """Terminates a child and waits for it (killed after 5 s)."""
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_pki(d: Path) -> Dict[str, Path]:
    """A CA, a server certificate for localhost and 127.0.0.1, a client certificate, its key in
    the clear and encrypted (PKCS#8, AES-256-CBC), and a second CA nobody trusts."""
    d.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for name in ("ca", "other-ca"):
        _openssl("req", "-x509", *ec, "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
                 "-subj", f"/CN=mcplug test {name}", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    (d / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                                  "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
    (d / "client.ext").write_text("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n")
    for name, ext in (("server", "server.ext"), ("client", "client.ext")):
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={'localhost' if name == 'server' else 'mcplug client'}", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.pem", "-days", "2", "-extfile", ext, cwd=d)
    _openssl("pkcs8", "-topk8", "-in", "client.key", "-out", "client-enc.key", "-v2", "aes-256-cbc",
             "-passout", f"pass:{PASSPHRASE}", cwd=d)
    return {k: d / f for k, f in {
        "ca": "ca.pem", "other_ca": "other-ca.pem", "server_cert": "server.pem", "server_key": "server.key",
        "client_cert": "client.pem", "client_key": "client.key", "client_key_enc": "client-enc.key",
    }.items()}


class Nginx:
    """nginx in front of `upstream` (host:port, plain HTTP), and of `routes` (a path prefix to
    another upstream, host:port with an optional path that replaces the prefix): `https` on one
    port, `mtls` on another that requires a client certificate of the CA, `short` on a third
    that closes a connection after 4 requests (a client must open new ones: resumed sessions
    show), and plain HTTP on `http_port` (the same hop without TLS, for the benchmarks).
    WebSocket upgrades pass through; nothing is buffered (SSE streams flow). With
    `keepalive_upstream`, nginx keeps its connections to `upstream` open between requests (as a
    production front does) and a client's connection for any number of requests (the benchmarks
    want both). `static/` under its folder is served at
    /static/. Every request is logged in `access_log`: the connection's number, its request
    count, `r` for a resumed TLS session (else `.`), the method, URI, status and port."""

    def __init__(self, d: Path, pki: Dict[str, Path], upstream: str, routes: Optional[Dict[str, str]] = None,
                 keepalive_upstream: bool = False) -> None:
        nginx = _require("nginx")
        self.dir = d
        d.mkdir(parents=True, exist_ok=True)
        (d / "static").mkdir(exist_ok=True)
        self.https_port, self.mtls_port, self.short_port, self.http_port = (free_port(), free_port(), free_port(),
                                                                             free_port())
        self.access_log = d / "access.log"
        def location(prefix: str, to: str) -> str:
            return f"""
            location {prefix} {{
                proxy_pass http://{to};
                proxy_http_version 1.1;
                proxy_buffering off;
                proxy_request_buffering off;
                proxy_set_header Host $http_host;
                proxy_set_header Upgrade $http_upgrade;
                proxy_set_header Connection $connection_upgrade;
                proxy_read_timeout 300s;
            }}"""
        pool = ""
        main = upstream
        if keepalive_upstream:
            # ... and on the clients' side, connections last: a handshake per connection shows,
            # not nginx's default of a new connection every 1000 requests.
            pool = f"upstream main {{ server {upstream}; keepalive 16; }} keepalive_requests 1000000;"
            main = "main"
        proxy = f"location /static/ {{ alias {d}/static/; default_type application/json; }}" + location("/", main)
        for prefix, to in (routes or {}).items():
            proxy += location(prefix, to)
        tls = f"ssl_certificate {pki['server_cert']}; ssl_certificate_key {pki['server_key']}; ssl_protocols TLSv1.2 TLSv1.3;"
        (d / "nginx.conf").write_text(f"""
user root root;
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 256; }}
http {{
    log_format conns '$connection $connection_requests $ssl_session_reused $request_method $request_uri $status $server_port';
    access_log {self.access_log} conns;
    client_body_temp_path {d}/tmp-body;
    proxy_temp_path {d}/tmp-proxy;
    fastcgi_temp_path {d}/tmp-fcgi;
    uwsgi_temp_path {d}/tmp-uwsgi;
    scgi_temp_path {d}/tmp-scgi;
    keepalive_timeout 60s;
    map $http_upgrade $connection_upgrade {{ default upgrade; '' {'""' if keepalive_upstream else 'close'}; }}
    {pool}
    server {{
        listen 127.0.0.1:{self.https_port} ssl;
        server_name localhost;
        {tls}
        {proxy}
    }}
    server {{
        listen 127.0.0.1:{self.mtls_port} ssl;
        server_name localhost;
        {tls}
        ssl_client_certificate {pki['ca']};
        ssl_verify_client on;
        {proxy}
    }}
    server {{
        listen 127.0.0.1:{self.short_port} ssl;
        server_name localhost;
        {tls}
        keepalive_requests 4;
        {proxy}
    }}
    server {{
        listen 127.0.0.1:{self.http_port};
        server_name localhost;
        {proxy}
    }}
}}
""")
        self.proc = subprocess.Popen([nginx, "-p", str(d), "-c", str(d / "nginx.conf")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=die_with_us)
        deadline = time.monotonic() + 15
        while True:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                log = (d / "error.log").read_text() if (d / "error.log").exists() else ""
                raise RuntimeError(f"nginx exited at start: {err}\n{log}")
            try:
                for port in (self.https_port, self.mtls_port, self.short_port, self.http_port):
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("nginx did not listen within 15 s")
                time.sleep(0.05)

    def url(self, path: str, mtls: bool = False, host: str = "localhost", short: bool = False) -> str:
        port = self.mtls_port if mtls else self.short_port if short else self.https_port
        return f"https://{host}:{port}{path}"

    def requests(self) -> "list[tuple[int, int, bool, str, str, int, int]]":
        """The requests logged so far: (connection, its request number, TLS session resumed,
        method, URI, status, port)."""
        out = []
        for line in self.access_log.read_text().splitlines() if self.access_log.exists() else []:
            conn, n, reused, method, uri, status, port = line.split(" ")
            out.append((int(conn), int(n), reused == "r", method, uri, int(status), int(port)))
        return out

    def stop(self) -> None:
        end_process(self.proc)



class Tinyproxy:
    """Debian's tinyproxy on a port of its own, a forward proxy (CONNECT to any port), its log
    at `log`; with `auth` ("user:password") it answers 407 without those credentials."""

    def __init__(self, d: Path, auth: Optional[str] = None) -> None:
        program = _require("tinyproxy")
        d.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log = d / "tinyproxy.log"
        conf = [f"Port {self.port}", "Listen 127.0.0.1", "Timeout 120", f'LogFile "{self.log}"', "LogLevel Connect",
                "MaxClients 100", "Allow 127.0.0.1", "DisableViaHeader Yes"]
        if auth:
            user, password = auth.split(":", 1)
            conf.append(f"BasicAuth {user} {password}")
        (d / "tinyproxy.conf").write_text("\n".join(conf) + "\n")

        self.proc = subprocess.Popen([program, "-d", "-c", str(d / "tinyproxy.conf")], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=die_with_us)
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"tinyproxy did not listen on {self.port}")
                time.sleep(0.05)

    def url(self, auth: Optional[str] = None) -> str:
        return f"http://{auth + '@' if auth else ''}127.0.0.1:{self.port}"

    def seen(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def stop(self) -> None:
        end_process(self.proc)


if __name__ == "__main__":
    import json
    import signal
    import sys

    where = Path(sys.argv[1])
    pki = make_pki(where / "pki")
    rest = sys.argv[3:]
    routes = dict(a.split("=", 1) for a in rest if a != "--proxy")
    front = Nginx(where / "nginx", pki, sys.argv[2], routes)
    proxy = Tinyproxy(where / "proxy") if "--proxy" in rest else None
    guarded = Tinyproxy(where / "guarded", auth=GUARDED_AUTH) if "--proxy" in rest else None

    def stop() -> None:
        front.stop()
        for p in (proxy, guarded):
            if p:
                p.stop()

    signal.signal(signal.SIGTERM, lambda *_: (stop(), sys.exit(0)))
    info = {"https_port": front.https_port, "mtls_port": front.mtls_port, "short_port": front.short_port,
            "access_log": str(front.access_log), "passphrase": PASSPHRASE,
            **{k: str(v) for k, v in pki.items()}}
    if proxy and guarded:
        info.update(proxy_port=proxy.port, proxy_log=str(proxy.log), guarded_proxy_port=guarded.port,
                    guarded_proxy_auth=GUARDED_AUTH)
    print(json.dumps(info), flush=True)
    try:
        sys.stdin.read()
    finally:
        stop()
