"""A fault-injecting OAuth test peer: one process that is both a protected MCP server (Streamable
HTTP, JSON answers, 2025-06-18) and its authorization server, on 127.0.0.1. For what the
conformance suite cannot check — its authorization server never issues a refresh token:
refresh before expiry and after a 401, rotating refresh tokens raced by two processes, a stale
dynamic registration, Slack-style errors sent with HTTP 200, cross-origin redirects.

    python oauth_server.py [--expires-in S] [--stale-client] [--slack] [--redirect-to URL]
                           [--static-token T] [--require-key K] [--auth-server URL]
                           [--resource-metadata URL] [--era legacy|dual|modern]
                           [--token-trickle S]

--era: which protocol eras the MCP server speaks (legacy: 2025-06-18 only, `server/discover` is
-32601; modern: 2026-07-28 only, `initialize` is -32601; dual: both). --token-trickle S: the
token endpoint's answer to the authorization code comes a byte a second for S seconds (a slow
authorization server). `--expires-in` takes any integer (an absurd lifetime included).

Prints `PORT <n>` once listening. Everything it issued and saw is at `GET /stats` (JSON):
tokens, refresh tokens, codes and client secrets issued (so a test can grep the client's output
for them), the Authorization headers each path saw, counts per grant. `POST /admin/revoke`
invalidates every access token (the next MCP request gets 401); `POST /admin/revoke-refresh`
invalidates the refresh tokens too.
"""
import argparse
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
state = {
    "access": set(),
    "refresh": set(),
    "issued": {"access": [], "refresh": [], "codes": [], "secrets": []},
    "seen_auth": {},
    "seen_key": [],
    "counts": {"as_metadata": 0, "discover": 0, "initialize": 0, "authorize": 0, "register": 0, "token": 0, "refresh": 0, "refresh_failed": 0, "mcp_posts": 0, "prm": 0},
    "clients": {},
    "stale": set(),
}
args = None
n = [0]


def next_id(prefix):
    with lock:
        n[0] += 1
        return f"{prefix}-{PORT}-{n[0]}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def base(self):
        return f"http://127.0.0.1:{PORT}"

    def send_json(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def note_auth(self):
        with lock:
            state["seen_auth"].setdefault(self.path.split("?")[0], []).append(self.headers.get("Authorization"))

    def do_GET(self):
        self.note_auth()
        path, _, query = self.path.partition("?")
        if path == "/stats":
            with lock:
                out = {
                    "issued": state["issued"],
                    "seen_auth": state["seen_auth"],
                    "seen_key": state["seen_key"],
                    "counts": state["counts"],
                    "valid_access": sorted(state["access"]),
                    "valid_refresh": sorted(state["refresh"]),
                }
            return self.send_json(200, out)
        if path == "/.well-known/oauth-protected-resource/mcp":
            with lock:
                state["counts"]["prm"] += 1
            return self.send_json(200, {"resource": self.base() + "/mcp", "authorization_servers": [args.auth_server or self.base()]})
        if path == "/.well-known/oauth-authorization-server":
            with lock:
                state["counts"]["as_metadata"] += 1
            return self.send_json(200, {
                "issuer": self.base(),
                "authorization_endpoint": self.base() + "/authorize",
                "token_endpoint": self.base() + "/token",
                "registration_endpoint": self.base() + "/register",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_post"],
                "authorization_response_iss_parameter_supported": True,
            })
        if path == "/authorize":
            q = dict(urllib.parse.parse_qsl(query))
            code = next_id("code")
            with lock:
                state["counts"]["authorize"] += 1
                state["issued"]["codes"].append(code)
            loc = q["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": q.get("state", ""), "iss": self.base()})
            self.send_response(302)
            self.send_header("Location", loc)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path == "/mcp":
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_json(404, {"error": "not found"})

    def token_error(self, error, status=400):
        if args.slack:
            # Slack: the error with HTTP 200, in its own shape.
            return self.send_json(200, {"ok": False, "error": "invalid_refresh_token" if error == "invalid_grant" else error})
        return self.send_json(status, {"error": error})

    def issue(self, trickle=0):
        at, rt = next_id("at"), next_id("rt")
        with lock:
            state["access"].add(at)
            state["refresh"].add(rt)
            state["issued"]["access"].append(at)
            state["issued"]["refresh"].append(rt)
        body = {"access_token": at, "token_type": "Bearer", "expires_in": args.expires_in, "refresh_token": rt}
        if not trickle:
            return self.send_json(200, body)
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        for i in range(trickle):
            try:
                self.wfile.write(data[i:i + 1])
                self.wfile.flush()
            except OSError:
                return
            time.sleep(1)
        try:
            self.wfile.write(data[trickle:])
        except OSError:
            pass

    def do_POST(self):
        self.note_auth()
        path = self.path.split("?")[0]
        raw = self.body()
        if path == "/admin/revoke" or path == "/admin/revoke-refresh":
            with lock:
                state["access"].clear()
                if path == "/admin/revoke-refresh":
                    state["refresh"].clear()
            return self.send_json(200, {})
        if path == "/register":
            meta = json.loads(raw or b"{}")
            cid, secret = next_id("client"), next_id("secret")
            with lock:
                state["counts"]["register"] += 1
                state["clients"][cid] = secret
                state["issued"]["secrets"].append(secret)
                if args.stale_client and state["counts"]["register"] == 1:
                    state["stale"].add(cid)  # deleted at the server right after
            return self.send_json(201, {"client_id": cid, "client_secret": secret, "redirect_uris": meta.get("redirect_uris"),
                                        "token_endpoint_auth_method": "client_secret_post"})
        if path == "/token":
            form = dict(urllib.parse.parse_qsl(raw.decode()))
            with lock:
                state["counts"]["token"] += 1
                cid = form.get("client_id")
                known = cid in state["clients"] and cid not in state["stale"] and state["clients"][cid] == form.get("client_secret")
            if not known:
                return self.token_error("invalid_client", 401)
            if form.get("grant_type") == "authorization_code":
                return self.issue(args.token_trickle)
            if form.get("grant_type") == "refresh_token":
                with lock:
                    state["counts"]["refresh"] += 1
                    ok = form.get("refresh_token") in state["refresh"]
                    if ok:
                        state["refresh"].discard(form["refresh_token"])  # rotation: one use only
                    else:
                        state["counts"]["refresh_failed"] += 1
                if not ok:
                    return self.token_error("invalid_grant")
                return self.issue()
            return self.token_error("unsupported_grant_type")
        if path == "/mcp":
            with lock:
                state["counts"]["mcp_posts"] += 1
            if args.redirect_to:
                self.send_response(307)
                self.send_header("Location", args.redirect_to)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            with lock:
                state["seen_key"].append(self.headers.get("X-Api-Key"))
            if args.require_key and self.headers.get("X-Api-Key") != args.require_key:
                return self.send_json(403, {"error": "forbidden", "error_description": "a wrong X-Api-Key"})
            auth = self.headers.get("Authorization") or ""
            token = auth[7:] if auth.startswith("Bearer ") else None
            with lock:
                valid = token in state["access"] or (args.static_token is not None and token == args.static_token)
            if not valid:
                prm = args.resource_metadata or f"{self.base()}/.well-known/oauth-protected-resource/mcp"
                challenge = f'Bearer error="invalid_token", resource_metadata="{prm}"'
                return self.send_json(401, {"error": "invalid_token"}, {"WWW-Authenticate": challenge})
            msg = json.loads(raw)
            if "id" not in msg:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            method = msg.get("method")
            if method in ("initialize", "server/discover"):
                with lock:
                    state["counts"]["discover" if method == "server/discover" else "initialize"] += 1
            if method == "server/discover" and args.era != "legacy":
                result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                          "serverInfo": {"name": "oauth-fault", "version": "1"}}
            elif method == "initialize" and args.era != "modern":
                result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                          "serverInfo": {"name": "oauth-fault", "version": "1"}}
            elif method == "tools/list":
                result = {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]}
            elif method == "tools/call":
                result = {"content": [{"type": "text", "text": "ok"}]}
            else:
                return self.send_json(200, {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})
            return self.send_json(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result})
        self.send_json(404, {"error": "not found"})


def main():
    global args, PORT
    p = argparse.ArgumentParser()
    p.add_argument("--expires-in", type=int, default=3600)
    p.add_argument("--era", choices=["legacy", "dual", "modern"], default="legacy")
    p.add_argument("--token-trickle", type=int, default=0)
    p.add_argument("--stale-client", action="store_true")
    p.add_argument("--slack", action="store_true")
    p.add_argument("--redirect-to")
    p.add_argument("--static-token", help="an access token valid besides those it issues")
    p.add_argument("--require-key", help="MCP requests without this X-Api-Key get 403")
    p.add_argument("--auth-server", help="the authorization server its metadata names (an SSRF probe)")
    p.add_argument("--resource-metadata", help="the resource_metadata URL of its challenge (an SSRF probe)")
    args = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    PORT = server.server_address[1]
    print(f"PORT {PORT}", flush=True)
    server.serve_forever()


PORT = 0
if __name__ == "__main__":
    sys.exit(main())
