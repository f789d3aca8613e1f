/* Cross-App Access (`oauth.xaa: true`, Claude Code's enterprise flow) through the C ABI, against
 * the test IdP of the project's own (tests/servers/xaa_server.py: an IdP, an authorization server
 * and two MCP servers). Shown: with the connection option `xaa_idp`, both servers are needs-auth
 * (no ID token yet; the manager never logs in on its own); authenticate on the first gives the
 * IdP's login URL, a headless browser logs in and the callback the host captured completes it;
 * the second server then connects with no login (the ID token kept per IdP); a server whose
 * entry says `xaa: true` with no IdP configured fails naming `xaa_idp`. */
#include "check.h"

#include "http_get.h"

int main(void) {
    char options[2048], config[2048], store[1024], cb[4096];
    const char *base = peer("MCPLUG_XAA_BASE");
    char *out = NULL, *auth_url, *loc;
    mcplug_manager *m, *bare;
    mcplug_status st;

    test_init();
    snprintf(store, sizeof store, "%s/xaa-store-%ld", peer("MCPLUG_TEST_TMPDIR"), (long)getpid());
    snprintf(options, sizeof options,
             "{\"connection\":{\"auth_store\":\"%s\",\"connect_timeout_ms\":20000,"
             "\"xaa_idp\":{\"issuer\":\"%s/idp\",\"client_id\":\"idp-client\"}}}",
             store, base);
    snprintf(config, sizeof config,
             "{\"mcpServers\":{"
             "\"a\":{\"type\":\"http\",\"url\":\"%s/mcp/a\",\"oauth\":{\"xaa\":true,\"clientId\":\"mcp-client\",\"clientSecret\":\"mcp-secret\"}},"
             "\"b\":{\"type\":\"http\",\"url\":\"%s/mcp/b\",\"oauth\":{\"xaa\":true,\"clientId\":\"mcp-client\",\"clientSecret\":\"mcp-secret\"}}}}",
             base, base);
    m = manager_or_die(options);
    st = mcplug_manager_connect(m, config, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "connect -> OK");
    drop(&out);
    st = mcplug_manager_wait(m, "{\"timeout_ms\":30000}", &out);
    CHECK_OUT(st == MCPLUG_OK && count_of(out, "\"state\":\"needs-auth\"") == 2 && contains(out, "\"idp\":true"), out,
              "both servers need the IdP login first");
    drop(&out);

    st = mcplug_manager_authenticate(m, "a", NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "authenticate a -> OK");
    auth_url = string_after(out, "url");
    CHECK_OUT(auth_url != NULL && contains(auth_url, "/idp/authorize?") && contains(auth_url, "scope=openid"), out,
              "the authorization is the login at the IdP");
    drop(&out);
    loc = auth_url ? location_of(auth_url) : NULL;
    CHECK(loc != NULL, "the IdP sends the browser back");
    snprintf(cb, sizeof cb, "{\"callback_url\":\"%s\",\"timeout_ms\":30000}", loc ? loc : "");
    st = mcplug_manager_authenticate(m, "a", cb, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"state\":\"connected\""), out, "a is connected after the login");
    drop(&out);
    free(loc);
    free(auth_url);

    st = mcplug_manager_authenticate(m, "b", "{\"wait\":true,\"timeout_ms\":30000}", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"state\":\"connected\"") && !contains(out, "\"authorization\""), out,
              "b connects with the same login: no second one");
    drop(&out);
    st = mcplug_manager_call_tool(m, "mcp__b__whoami", "{}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "b for alice"), out, "b's tool answers for the IdP's user");
    drop(&out);
    mcplug_manager_free(m);

    /* No IdP: named, not ignored. */
    snprintf(options, sizeof options, "{\"connection\":{\"auth_store\":\"%s-bare\",\"connect_timeout_ms\":20000}}", store);
    bare = manager_or_die(options);
    st = mcplug_manager_connect(bare, config, &out);
    drop(&out);
    st = mcplug_manager_wait(bare, "{\"timeout_ms\":30000}", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"state\":\"failed\"") && contains(out, "xaa_idp"), out,
              "`xaa: true` with no IdP fails naming `xaa_idp`");
    drop(&out);
    mcplug_manager_free(bare);
    return finish("xaa");
}
