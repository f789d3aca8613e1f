"""mcplug's conformance client for the Python binding.

Run by @modelcontextprotocol/conformance (tests/conformance/run.sh): the scenario's name is in
MCP_CONFORMANCE_SCENARIO, the scenario server's URL is the last argument, and
MCP_CONFORMANCE_CONTEXT carries a scenario's extra data. It does what the scenario asks through
the binding's public API and exits 0; any error exits 1 with the error on stderr. The same
dispatch exists in client.c and client.js: a scenario must pass (or fail) the same way in all
three.
"""
import http.client
import json
import os
import sys
import urllib.parse

import mcplug


def log(*parts):
    print("[client.py]", *parts, file=sys.stderr, flush=True)


def context():
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    return json.loads(raw) if raw else {}


def accept_defaults(params):
    """Accepts a form elicitation leaving every field out: the library fills the defaults."""
    return {"action": "accept", "content": {}}


def accept_confirmed(params):
    return {"action": "accept", "content": {"confirmed": True}}


def connect(url, handlers=None, **kw):
    return mcplug.Client.connect({"type": "http", "url": url}, handlers=handlers,
                                 connect_timeout=20, request_timeout=20, tool_timeout=20, **kw)


def basic(url):
    """initialize, tools_call: list the tools, call the first with the numbers it adds."""
    with connect(url) as c:
        tools = c.list_tools()
        log("tools:", [t["name"] for t in tools])
        if tools:
            log("result:", c.call_tool(tools[0]["name"], {"a": 2, "b": 3}))


def list_only(url):
    """json-schema-ref-no-deref: the tool's schema has a network $ref that must not be fetched."""
    with connect(url) as c:
        log("tools:", [t["name"] for t in c.list_tools()])


def schema_preservation(url):
    """json-schema-2020-12-preservation: echo the focal tool's inputSchema back, untouched."""
    with connect(url) as c:
        tools = {t["name"]: t for t in c.list_tools()}
        focal = tools["json_schema_2020_12_tool"]
        log("result:", c.call_tool("json_schema_echo", {"schema": focal["inputSchema"]}))


def call_every_tool(url, handlers=None, **kw):
    """Lists the tools and calls each with no arguments (elicitation defaults, sse-retry)."""
    with connect(url, handlers, **kw) as c:
        for tool in c.list_tools():
            log(tool["name"], "->", c.call_tool(tool["name"], {}))


def request_metadata(url):
    """request-metadata (2026-07-28): every request carries the version header and _meta; roots,
    sampling and elicitation are declared so that their declarations are checked too."""
    with connect(url, roots=[{"uri": "file:///tmp", "name": "tmp"}],
                 capabilities={"sampling": {}, "elicitation": {}}) as c:
        log("era:", c.era, c.protocol_version)
        log("tools:", [t["name"] for t in c.list_tools()])


def request_state(url):
    """sep-2322: InputRequiredResult rounds, resolved inside call_tool by the library."""
    with connect(url, {"elicitation/create": accept_confirmed}) as c:
        c.list_tools()
        for name in ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state",
                     "test_mrtr_no_result_type"):
            log(name, "->", c.call_tool(name, {}))


def standard_headers(url):
    """http-standard-headers: one of each request that carries Mcp-Method / Mcp-Name."""
    with connect(url) as c:
        for tool in c.list_tools():
            c.call_tool(tool["name"], {})
        for resource in c.request("resources/list", all_pages=True)["resources"]:
            c.request("resources/read", {"uri": resource["uri"]})
        for prompt in c.request("prompts/list", all_pages=True)["prompts"]:
            c.request("prompts/get", {"name": prompt["name"]})


def custom_headers(url):
    """http-custom-headers: the calls the scenario's context names (x-mcp-header arguments)."""
    with connect(url) as c:
        c.list_tools()
        for call in context()["toolCalls"]:
            log(call["name"], "->", c.call_tool(call["name"], call["arguments"]))


def sample_value(schema):
    kind = schema.get("type")
    return {"string": "x", "integer": 1, "number": 1.5, "boolean": True, "object": {},
            "array": [], "null": None}.get(kind if isinstance(kind, str) else "string", "x")


def invalid_tool_headers(url):
    """http-invalid-tool-headers: call every tool the library kept; invalid ones must be gone."""
    with connect(url) as c:
        for tool in c.list_tools():
            schema = tool.get("inputSchema") or {}
            props = schema.get("properties") or {}
            args = {k: sample_value(props.get(k) or {}) for k in schema.get("required") or []}
            try:
                log(tool["name"], "->", c.call_tool(tool["name"], args))
            except mcplug.McpError as e:
                log(tool["name"], "refused:", e)


def skills(load):
    """sep-2640-*: the skills extension, as a host uses it. The skills are listed (no file may be
    fetched then: sep-2640-client-no-prefetch); with ``load``, each skill is loaded -- the library
    reads its SKILL.md and verifies it (size, digest, frontmatter) against the listed entry --
    and then each of its other files is read, verified the same way. A skill that fails
    verification is refused by the library, so its files are never read (the verify-* scenarios
    check that)."""
    def run(url):
        with connect(url) as c:
            listed = c.list_skills()
            log("skills:", listed)
            for entry in listed if load else []:
                try:
                    loaded = c.load_skill(entry["uri"])
                except mcplug.InvalidResultError as e:
                    log(entry["uri"], "refused:", e)
                    continue
                log(entry["uri"], "loaded:", loaded)
                for uri in loaded["files"] if isinstance(loaded["files"], list) else []:
                    if uri == entry["uri"]:
                        continue
                    try:
                        log(uri, "read:", c.read_skill_file(entry["uri"], uri))
                    except mcplug.InvalidResultError as e:
                        log(uri, "refused:", e)
    return run


def follow_redirect(params):
    """The headless follower: what a browser does at an authorization server whose /authorize
    redirects at once. The redirect's URL goes back as the callback."""
    url = urllib.parse.urlsplit(params["url"])
    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=10)
    conn.request("GET", url.path + ("?" + url.query if url.query else ""))
    resp = conn.getresponse()
    location = resp.getheader("Location")
    conn.close()
    if not location:
        raise RuntimeError(f"GET /authorize answered {resp.status} without a Location")
    return {"callback_url": location}


def auth_entry(url, scenario):
    """The server entry of an auth scenario: its `oauth` from the scenario and its context."""
    ctx = context()
    oauth = {"clientMetadataUrl": "https://conformance-test.local/client-metadata.json"}
    pick = {"client_id": "clientId", "client_secret": "clientSecret"}
    if "client-credentials" in scenario:
        oauth["grant"] = "client_credentials"
        pick.update(private_key_pem="privateKey", signing_algorithm="signingAlgorithm")
    elif "wif" in scenario:
        oauth["grant"] = "jwt_bearer"
        pick = {"client_id": "clientId", "valid_jwt": "assertion"}
    elif "idp_id_token" in ctx:
        oauth["grant"] = "enterprise"
        oauth["enterprise"] = {k: ctx[f] for f, k in (("idp_client_id", "idpClientId"), ("idp_id_token", "idToken"),
                                                     ("idp_issuer", "idpIssuer"), ("idp_token_endpoint", "idpTokenEndpoint"))
                               if f in ctx}
    else:
        pick["issuer"] = "issuer"
    oauth.update({key: ctx[field] for field, key in pick.items() if field in ctx})
    return {"type": "http", "url": url, "oauth": oauth}


def auth_flow(url):
    """auth/*: the library authorizes on the first 401; the handler follows the redirect."""
    scenario = os.environ["MCP_CONFORMANCE_SCENARIO"]
    with mcplug.Client.connect(auth_entry(url, scenario), handlers={"auth/authorize": follow_redirect},
                               connect_timeout=20, request_timeout=20, tool_timeout=20,
                               options={"auth_store": "memory", "auth_timeout_ms": 20000}) as c:
        c.list_tools()
        c.call_tool("test-tool", {})


SCENARIOS = {
    "initialize": basic,
    "tools_call": basic,
    "json-schema-ref-no-deref": list_only,
    "json-schema-2020-12-preservation": schema_preservation,
    "elicitation-sep1034-client-defaults": lambda url: call_every_tool(
        url, {"elicitation/create": accept_defaults}, elicitation_defaults=True),
    "sse-retry": call_every_tool,
    "request-metadata": request_metadata,
    "sep-2322-client-request-state": request_state,
    "http-standard-headers": standard_headers,
    "http-custom-headers": custom_headers,
    "http-invalid-tool-headers": invalid_tool_headers,
    "sep-2640-client-no-prefetch": skills(load=False),
}


def handler_for(name):
    if name in SCENARIOS:
        return SCENARIOS[name]
    if name.startswith("sep-2640-"):
        return skills(load=True)
    if name.startswith("auth/"):
        return auth_flow
    return None


def main():
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO")
    if not name or len(sys.argv) < 2:
        log("usage: MCP_CONFORMANCE_SCENARIO=<name> client.py <server-url>")
        return 1
    run = handler_for(name)
    if run is None:
        log(f"unknown scenario {name!r}")
        return 1
    try:
        run(sys.argv[-1])
    except mcplug.McpError as e:
        log(f"{name}: {type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
