"""A Cross-App Access test peer (Claude Code's `oauth.xaa`, SEP-990), one process on 127.0.0.1:
an enterprise IdP, the authorization server of two MCP servers, and those two servers.

    python xaa_server.py [--id-token-ttl S]

Prints `PORT <n>` once listening. The parts:
  IdP  /idp             OpenID configuration at /idp/.well-known/openid-configuration; GET
                        /idp/authorize (a login: counted, the browser sent back at once with a
                        code, PKCE S256 required); POST /idp/token: `authorization_code` (client
                        `idp-client`, public) gives an id_token (a JWT, `exp` after
                        --id-token-ttl, default 3600 s); the token exchange (RFC 8693) of a valid
                        id_token for an ID-JAG whose `aud` is the `audience` asked and whose
                        `resource` is the `resource` asked. POST /idp/admin/revoke: every id_token
                        issued so far is refused from now on.
  AS   /as              metadata at /.well-known/oauth-authorization-server/as; POST /as/token:
                        the jwt-bearer grant (RFC 7523) of an ID-JAG for this AS, with HTTP Basic
                        `mcp-client:mcp-secret`, gives an access token for the JAG's resource.
  MCP  /mcp/a, /mcp/b   two MCP servers (2025-06-18, JSON answers; a 401 names their protected
                        resource metadata); tool `whoami` answers "<server> for <sub>".
`GET /stats`: the counts (logins, codes, exchanges, jwt_bearer, mcp 401s) and what was refused.
"""
import argparse
import base64
import hashlib
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
state = {
    "codes": {},  # code -> code_challenge
    "id_tokens": set(),
    "jags": {},  # jag -> resource
    "access": {},  # token -> resource
    "counts": {"logins": 0, "code_grants": 0, "exchanges": 0, "jwt_bearer": 0, "mcp_401": 0},
    "refused": [],
}
args = None
PORT = 0
n = [0]


def next_id(prefix):
    with lock:
        n[0] += 1
        return f"{prefix}-{n[0]}"


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(claims, typ="JWT"):
    """An unsigned-looking JWT (alg none): the client treats them as opaque, this peer keeps the
    ones it issued."""
    head = b64(json.dumps({"alg": "none", "typ": typ}).encode())
    return f"{head}.{b64(json.dumps(claims).encode())}.x"


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

    def refuse(self, why, error="invalid_grant", status=400):
        with lock:
            state["refused"].append(why)
        return self.send_json(status, {"error": error, "error_description": why})

    def form(self):
        length = int(self.headers.get("Content-Length") or 0)
        return dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))

    def do_GET(self):
        path, _, query = self.path.partition("?")
        base = self.base()
        if path == "/stats":
            with lock:
                return self.send_json(200, {"counts": state["counts"], "refused": state["refused"]})
        if path == "/idp/.well-known/openid-configuration":
            return self.send_json(200, {
                "issuer": base + "/idp",
                "authorization_endpoint": base + "/idp/authorize",
                "token_endpoint": base + "/idp/token",
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
                "grant_types_supported": ["authorization_code", "urn:ietf:params:oauth:grant-type:token-exchange"],
            })
        if path == "/.well-known/oauth-authorization-server/as":
            return self.send_json(200, {
                "issuer": base + "/as",
                "token_endpoint": base + "/as/token",
                "grant_types_supported": ["urn:ietf:params:oauth:grant-type:jwt-bearer"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                "authorization_grant_profiles_supported": ["urn:ietf:params:oauth:grant-profile:id-jag"],
            })
        for name in ("a", "b"):
            if path == f"/.well-known/oauth-protected-resource/mcp/{name}":
                return self.send_json(200, {"resource": f"{base}/mcp/{name}", "authorization_servers": [base + "/as"]})
        if path == "/idp/authorize":
            q = dict(urllib.parse.parse_qsl(query))
            if q.get("client_id") != "idp-client" or q.get("code_challenge_method") != "S256" or "openid" not in q.get("scope", "").split():
                return self.refuse(f"a login asked with {q}", "invalid_request")
            code = next_id("code")
            with lock:
                state["counts"]["logins"] += 1
                state["codes"][code] = q["code_challenge"]
            loc = q["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": q.get("state", ""), "iss": base + "/idp"})
            self.send_response(302)
            self.send_header("Location", loc)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path.startswith("/mcp/"):
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_json(404, {"error": "not found"})

    def do_POST(self):
        path = self.path.split("?")[0]
        base = self.base()
        if path == "/idp/admin/revoke":
            with lock:
                state["id_tokens"].clear()
            return self.send_json(200, {})
        if path == "/idp/token":
            f = self.form()
            if f.get("grant_type") == "authorization_code":
                with lock:
                    challenge = state["codes"].pop(f.get("code"), None)
                    state["counts"]["code_grants"] += 1
                if challenge is None or f.get("client_id") != "idp-client":
                    return self.refuse("an unknown code or client at the IdP")
                if b64(hashlib.sha256(f.get("code_verifier", "").encode()).digest()) != challenge:
                    return self.refuse("the PKCE verifier does not match")
                now = int(time.time())
                token = jwt({"iss": base + "/idp", "aud": "idp-client", "sub": "alice", "iat": now,
                             "exp": now + args.id_token_ttl, "jti": next_id("id")})
                with lock:
                    state["id_tokens"].add(token)
                return self.send_json(200, {"id_token": token, "access_token": next_id("idp-at"), "token_type": "Bearer", "expires_in": 3600})
            if f.get("grant_type") == "urn:ietf:params:oauth:grant-type:token-exchange":
                with lock:
                    state["counts"]["exchanges"] += 1
                    known = f.get("subject_token") in state["id_tokens"]
                if not known:
                    return self.refuse("the subject_token is not an ID token this IdP honours")
                if (f.get("subject_token_type") != "urn:ietf:params:oauth:token-type:id_token"
                        or f.get("requested_token_type") != "urn:ietf:params:oauth:token-type:id-jag"
                        or f.get("client_id") != "idp-client"):
                    return self.refuse(f"a token exchange asked with {sorted(f)}", "invalid_request")
                if f.get("audience") != base + "/as":
                    return self.refuse(f"the audience {f.get('audience')!r} is not the AS", "invalid_target")
                now = int(time.time())
                jag = jwt({"iss": base + "/idp", "aud": base + "/as", "sub": "alice", "client_id": "mcp-client",
                           "resource": f.get("resource"), "iat": now, "exp": now + 300, "jti": next_id("jag")},
                          "oauth-id-jag+jwt")
                with lock:
                    state["jags"][jag] = f.get("resource")
                return self.send_json(200, {"access_token": jag, "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                                            "token_type": "N_A", "expires_in": 300})
            return self.refuse("unsupported grant at the IdP", "unsupported_grant_type")
        if path == "/as/token":
            f = self.form()
            basic = "Basic " + base64.b64encode(b"mcp-client:mcp-secret").decode()
            if self.headers.get("Authorization") != basic:
                return self.refuse("the AS wants HTTP Basic mcp-client:mcp-secret", "invalid_client", 401)
            if f.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
                return self.refuse("the AS takes the jwt-bearer grant only", "unsupported_grant_type")
            with lock:
                state["counts"]["jwt_bearer"] += 1
                resource = state["jags"].pop(f.get("assertion"), None)
            if resource is None:
                return self.refuse("the assertion is not an ID-JAG of the IdP (or was used)")
            token = next_id("at")
            with lock:
                state["access"][token] = resource
            return self.send_json(200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600})
        for name in ("a", "b"):
            if path == f"/mcp/{name}":
                return self.mcp(name)
        self.send_json(404, {"error": "not found"})

    def mcp(self, name):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        auth = self.headers.get("Authorization") or ""
        token = auth[7:] if auth.startswith("Bearer ") else None
        with lock:
            valid = state["access"].get(token) == f"{self.base()}/mcp/{name}"
            if not valid:
                state["counts"]["mcp_401"] += 1
        if not valid:
            prm = f"{self.base()}/.well-known/oauth-protected-resource/mcp/{name}"
            return self.send_json(401, {"error": "invalid_token"},
                                  {"WWW-Authenticate": f'Bearer error="invalid_token", resource_metadata="{prm}"'})
        msg = json.loads(raw)
        if "id" not in msg:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        method = msg.get("method")
        if method == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": f"xaa-{name}", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": f"{name} for alice"}]}
        else:
            return self.send_json(200, {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})
        return self.send_json(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result})


def main():
    global args, PORT
    p = argparse.ArgumentParser()
    p.add_argument("--id-token-ttl", type=int, default=3600)
    args = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    PORT = server.server_address[1]
    print(f"PORT {PORT}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
