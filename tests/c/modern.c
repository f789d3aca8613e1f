/* The 2026-07-28 ("modern") era through the C ABI, against tests/servers/modern_server.py (the
 * Python SDK's MCPServer): the negotiation picks 2026-07-28, tools are listed and called, the
 * same server can be held to the legacy era with protocol_versions, and an unknown tool is an
 * error that loses nothing. */
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

int main(void) {
    char server[4096];
    test_init();
    server_json(server, sizeof server, NULL, peer("MCPLUG_PYTHON"), peer("MCPLUG_MODERN_SERVER"), (const char *)NULL);
    modern(server);
    held_to_legacy(server);
    return finish("modern");
}
