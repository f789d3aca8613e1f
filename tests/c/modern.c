/* The 2026-07-28 ("modern") era through the C ABI, against tests/servers/modern_server.py (the
 * Python SDK's MCPServer): the negotiation picks 2026-07-28, tools are listed and called, the
 * same server can be held to the legacy era with protocol_versions, and an unknown tool is an
 * error that loses nothing. With --cache-ttl-ms: cacheable results come from the connection's
 * cache (the option "cache": false asks the server), and the subscriptions/listen stream brings
 * list changes and resource updates as events, which also make the cache forget. */
#include "check.h"

static void modern(const char *server) {
    char *out = NULL;
    mcplug_client *c = NULL;
    mcplug_status st = mcplug_client_connect(server, NULL, &c, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "connect to the modern server -> OK (got %s)", status_name(st));
    CHECK_OUT(contains(out, "\"era\":\"modern\""), out, "era is modern");
    CHECK_OUT(contains(out, "\"protocol_version\":\"2026-07-28\""), out, "protocol_version is 2026-07-28");
    CHECK_OUT(contains(out, "\"server_info\":{\"name\":\"modern-test-server\""), out, "server_info.name is modern-test-server");
    CHECK_OUT(contains(out, "\"supported_versions\":[") && contains(out, "\"2026-07-28\"]"), out, "supported_versions lists 2026-07-28");
    CHECK_OUT(contains(out, "\"instructions\":\"mcplug modern-era test server\""), out, "instructions came through");
    drop(&out);

    st = mcplug_client_list_tools(c, NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "list_tools -> OK");
    CHECK_OUT(contains(out, "\"name\":\"echo\"") && contains(out, "\"name\":\"add\""), out, "lists echo and add");
    drop(&out);

    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"hi\"}", NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "echo -> OK");
    CHECK_OUT(contains(out, "{\"text\":\"Echo: hi\",\"type\":\"text\"}") || contains(out, "{\"type\":\"text\",\"text\":\"Echo: hi\"}"),
              out, "echo answers text \"Echo: hi\"");
    drop(&out);

    st = mcplug_client_call_tool(c, "add", "{\"a\":2,\"b\":3}", NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "add -> OK");
    CHECK_OUT(contains(out, "\"text\":\"5\""), out, "add 2+3 answers text \"5\"");
    CHECK_OUT(contains(out, "\"structuredContent\":{\"result\":5}"), out, "... and structuredContent {\"result\":5}");
    drop(&out);

    st = mcplug_client_call_tool(c, "no-such-tool", "{}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"isError\":true") && contains(out, "\"text\":\"Unknown tool: no-such-tool\""),
              out, "an unknown tool -> a result with isError and \"Unknown tool: no-such-tool\" (%s)", status_name(st));
    drop(&out);

    st = mcplug_client_call_tool(c, "add", "{\"a\":\"two\",\"b\":3}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"isError\":true") && contains(out, "Error executing tool add"), out,
              "add with a string -> a result with isError, \"Error executing tool add...\" (%s)", status_name(st));
    drop(&out);

    st = mcplug_client_call_tool(c, "add", "{\"a\":40,\"b\":2}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"structuredContent\":{\"result\":42}"), out, "the connection still works: 40+2 is 42");
    drop(&out);

    st = mcplug_client_request(c, "tools/list", NULL, "{\"all_pages\":true}", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"name\":\"add\""), out, "tools/list through request (all_pages) lists add");
    drop(&out);

    mcplug_client_free(c);
    CHECK(1, "freed the modern connection");
}

static void held_to_legacy(const char *server) {
    char *out = NULL;
    mcplug_client *c = NULL;
    mcplug_status st = mcplug_client_connect(server, "{\"protocol_versions\":[\"2025-11-25\"]}", &c, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "connect with protocol_versions [2025-11-25] -> OK (got %s)", status_name(st));
    CHECK_OUT(contains(out, "\"era\":\"legacy\"") && contains(out, "\"protocol_version\":\"2025-11-25\""), out,
              "... negotiates the legacy era, 2025-11-25");
    drop(&out);
    st = mcplug_client_call_tool(c, "add", "{\"a\":2,\"b\":3}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"text\":\"5\""), out, "add 2+3 is 5 in the legacy era too");
    drop(&out);
    mcplug_client_free(c);
}

/* The text of note://current, read through the request call with `options`. */
static int note_is(mcplug_client *c, const char *options, const char *want) {
    char *out = NULL, quoted[128];
    mcplug_status st = mcplug_client_request(c, "resources/read", "{\"uri\":\"note://current\"}", options, &out);
    int ok;
    snprintf(quoted, sizeof quoted, "\"text\":\"%s\"", want);
    ok = st == MCPLUG_OK && contains(out, quoted);
    if (!ok) printf("    out: %s\n", out ? out : "(null)");
    drop(&out);
    return ok;
}

static void call_ok(mcplug_client *c, const char *tool, const char *args) {
    char *out = NULL;
    mcplug_status st = mcplug_client_call_tool(c, tool, args, NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && !contains(out, "\"isError\":true"), out, "%s %s -> OK", tool, args);
    drop(&out);
}

static void cache_and_listen(const char *server) {
    char *out = NULL, *ev;
    mcplug_client *c = connect_or_die(server, "{\"listen\":true}", "the modern server with caching hints");
    mcplug_status st;

    ev = wait_event(c, bound_s(10), "\"type\":\"listening\"", "\"toolsListChanged\":true");
    CHECK_OUT(ev != NULL, ev, "listen: true opens the stream at connect; once acknowledged, a listening event says what comes");
    CHECK_OUT(contains(ev, "\"reopened\":false"), ev, "... the first stream: reopened false");
    drop(&ev);

    st = mcplug_client_list_tools(c, NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && !contains(out, "\"name\":\"c_quiet\""), out, "list_tools before a tool is added");
    drop(&out);
    call_ok(c, "add_tool", "{\"name\":\"c_quiet\"}");
    st = mcplug_client_list_tools(c, NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && !contains(out, "\"name\":\"c_quiet\""), out,
              "a tool added without telling is not listed: the list came from the cache (ttlMs 60000)");
    drop(&out);
    st = mcplug_client_list_tools(c, "{\"cache\":false}", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"name\":\"c_quiet\""), out, "with {\"cache\":false} the server is asked: c_quiet is there");
    drop(&out);

    call_ok(c, "add_tool", "{\"name\":\"c_loud\",\"notify\":true}");
    ev = wait_event(c, bound_s(10), "notifications/tools/list_changed", "io.modelcontextprotocol/subscriptionId");
    CHECK_OUT(ev != NULL, ev, "a tool added with notify: tools/list_changed arrives on the stream, with its subscriptionId");
    drop(&ev);
    st = mcplug_client_request(c, "tools/list", NULL, "{\"all_pages\":true}", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"name\":\"c_loud\""), out, "... and the cached list is forgotten: c_loud is listed");
    drop(&out);

    CHECK(note_is(c, NULL, "first"), "resources/read note://current is \"first\"");
    call_ok(c, "set_note", "{\"text\":\"second\"}");
    CHECK(note_is(c, NULL, "first"), "changed without telling: the cached read is still \"first\"");
    st = mcplug_client_request(c, "resources/subscribe", "{\"uri\":\"note://current\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && strcmp(out, "{}") == 0, out, "resources/subscribe on a modern connection -> {} (the listen stream carries it)");
    drop(&out);
    call_ok(c, "set_note", "{\"text\":\"third\",\"notify\":true}");
    ev = wait_event(c, bound_s(10), "notifications/resources/updated", "note://current");
    CHECK_OUT(ev != NULL, ev, "the update of note://current arrives as an event");
    drop(&ev);
    CHECK(note_is(c, NULL, "third"), "... and the read is fresh: \"third\"");
    st = mcplug_client_request(c, "resources/subscribe", "{}", NULL, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "uri"), out, "resources/subscribe without a uri -> INVALID_ARGUMENT");
    drop(&out);
    st = mcplug_client_request(c, "resources/unsubscribe", "{\"uri\":\"note://current\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && strcmp(out, "{}") == 0, out, "resources/unsubscribe -> {}");
    drop(&out);
    mcplug_client_free(c);
    CHECK(1, "freed the connection with its listen stream");
}

int main(void) {
    char server[4096], cached[4096];
    test_init();
    server_json(server, sizeof server, NULL, peer("MCPLUG_PYTHON"), peer("MCPLUG_MODERN_SERVER"), (const char *)NULL);
    server_json(cached, sizeof cached, NULL, peer("MCPLUG_PYTHON"), peer("MCPLUG_MODERN_SERVER"), "--cache-ttl-ms", "60000",
                (const char *)NULL);
    modern(server);
    held_to_legacy(server);
    cache_and_listen(cached);
    return finish("modern");
}
