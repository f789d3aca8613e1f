/* OAuth in the manager through the C ABI, against tests/servers/oauth_server.py (a protected MCP
 * server and its authorization server in one, MCPLUG_OAUTH_URL). Shown: the manager never
 * authorizes on its own — the server is needs-auth with its `auth` details and its only pool
 * tool is mcp__srv__authenticate; calling that tool starts the flow and answers with the URL;
 * a headless browser follows it to the library's loopback listener and the server connects,
 * its real tools replacing the pseudo-tool; mcplug_manager_logout forgets the token and the
 * server is needs-auth again; mcplug_manager_authenticate with the callback the host captured
 * itself (`callback_url`); a 401 after connect (every token revoked) makes the connected server
 * needs-auth again, and authenticate brings its tools back; the errors of bad calls; the stored token reused by a new manager. */
#include "check.h"

#include "http_get.h"

static mcplug_manager *M;

static char *status_now(void) {
    char *out = NULL;
    mcplug_status st = mcplug_manager_status(M, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "status -> OK");
    return out;
}

/* Polls the status until it holds `needle` (the server's state); returns whether it did. */
static int wait_status(const char *needle, double wait_s) {
    double until = now_s() + wait_s;
    while (now_s() < until) {
        char *s = NULL;
        int ok = mcplug_manager_status(M, &s) == MCPLUG_OK && contains(s, needle);
        mcplug_string_free(s);
        if (ok) return 1;
        sleep_ms(20);
    }
    return 0;
}

static char *tools_now(void) {
    char *out = NULL;
    mcplug_status st = mcplug_manager_list_tools(M, NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "list_tools -> OK");
    return out;
}

int main(void) {
    const char *url = getenv("MCPLUG_OAUTH_URL");
    const char *tmp = getenv("MCPLUG_TEST_TMPDIR");
    CHECK(url != NULL && tmp != NULL, "MCPLUG_OAUTH_URL and MCPLUG_TEST_TMPDIR are set");
    char store[512], options[1024], config[1024];
    snprintf(store, sizeof store, "%s/oauth-store-%d", tmp, (int)getpid());
    snprintf(options, sizeof options,
             "{\"connection\":{\"auth_store\":\"%s\",\"connect_timeout_ms\":20000}}", store);
    snprintf(config, sizeof config, "{\"mcpServers\":{\"srv\":{\"type\":\"http\",\"url\":\"%s\"}}}", url);

    char *out = NULL;
    mcplug_status st = mcplug_manager_new(options, &M, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "manager_new -> OK");
    mcplug_string_free(out);
    st = mcplug_manager_connect(M, config, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "connect -> OK");
    mcplug_string_free(out);
    st = mcplug_manager_wait(M, "{\"timeout_ms\":20000}", &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "wait -> OK");
    CHECK_OUT(contains(out, "\"state\":\"needs-auth\"") && contains(out, "\"reason\":\"no_token\""), out,
              "the server is needs-auth with its auth details (the manager never authorizes on its own)");
    mcplug_string_free(out);
    out = tools_now();
    CHECK_OUT(contains(out, "\"mcp__srv__authenticate\"") && !contains(out, "whoami"), out,
              "its only pool tool is the authenticate pseudo-tool");
    mcplug_string_free(out);

    /* The pseudo-tool: the URL for the user, as text; a browser to the loopback listener. */
    st = mcplug_manager_call_tool(M, "mcp__srv__authenticate", "{}", NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "calling mcp__srv__authenticate -> OK");
    CHECK_OUT(contains(out, "/authorize?") && contains(out, "open this URL"), out, "its result is the URL for the user");
    mcplug_string_free(out);
    char *status = status_now();
    char *auth_url = string_after(status, "url");
    CHECK_OUT(auth_url != NULL && contains(status, "\"state\":\"pending\""), status,
              "the status has the authorization under way");
    mcplug_string_free(status);
    char *loc = location_of(auth_url);
    CHECK(loc != NULL && contains(loc, "code="), "the authorization server redirects with a code: %s", loc ? loc : "(none)");
    CHECK(http_get(loc) == 0, "the browser comes back to the loopback listener");
    free(loc);
    free(auth_url);
    CHECK(wait_status("\"srv\":{\"state\":\"connected\"", 20), "the server connects once authorized");
    out = tools_now();
    CHECK_OUT(contains(out, "\"mcp__srv__whoami\"") && !contains(out, "mcp__srv__authenticate"), out,
              "its real tools replaced the pseudo-tool");
    mcplug_string_free(out);
    st = mcplug_manager_call_tool(M, "mcp__srv__whoami", "{}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"ok\""), out, "a real tool answers");
    mcplug_string_free(out);

    /* Logout: needs-auth again. */
    st = mcplug_manager_logout(M, "srv", &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "logout -> OK");
    CHECK_OUT(contains(out, "\"forgotten\":true") && contains(out, "\"state\":\"needs-auth\""), out,
              "logout forgot the token; the server is needs-auth");
    mcplug_string_free(out);

    /* The host's authenticate, with the callback it captured itself. */
    st = mcplug_manager_authenticate(M, "srv", NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "authenticate -> OK");
    auth_url = string_after(out, "url");
    CHECK_OUT(auth_url != NULL && contains(out, "\"authorization\""), out, "authenticate gives the URL");
    mcplug_string_free(out);
    loc = location_of(auth_url);
    CHECK(loc != NULL, "redirected");
    char cb[4096];
    snprintf(cb, sizeof cb, "{\"callback_url\":\"%s\"}", loc);
    st = mcplug_manager_authenticate(M, "srv", cb, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "authenticate with callback_url -> OK");
    CHECK_OUT(contains(out, "\"state\":\"connected\"") && contains(out, "mcp__srv__whoami"), out,
              "the callback the host captured completes it");
    mcplug_string_free(out);
    free(loc);
    free(auth_url);

    /* A 401 after connect (the tokens revoked, the refresh refused): the call fails NEEDS_AUTH
     * and the server is needs-auth again, its pseudo-tool in place of its tools. */
    {
        char admin[512], head[1024];
        const char *host_end = strchr(url + 7, '/');
        snprintf(admin, sizeof admin, "%.*s/admin/revoke-refresh", host_end ? (int)(host_end - url) : (int)strlen(url), url);
        CHECK(http_request_head("POST", admin, head, sizeof head) > 0 && contains(head, " 200 "), "the server revoked every token: %s", head);
        st = mcplug_manager_call_tool(M, "mcp__srv__whoami", "{}", NULL, &out);
        CHECK_OUT(st == MCPLUG_NEEDS_AUTH, out, "a call after the revocation -> NEEDS_AUTH");
        mcplug_string_free(out);
        CHECK(wait_status("\"state\":\"needs-auth\"", bound_s(5)), "the connected server is needs-auth again");
        out = tools_now();
        CHECK_OUT(contains(out, "mcp__srv__authenticate") && !contains(out, "mcp__srv__whoami"), out,
                  "its tools replaced by the authenticate pseudo-tool");
        mcplug_string_free(out);
        st = mcplug_manager_authenticate(M, "srv", NULL, &out);
        CHECK_STATUS(st, MCPLUG_OK, out, "authenticate again -> OK");
        auth_url = string_after(out, "url");
        mcplug_string_free(out);
        loc = location_of(auth_url);
        snprintf(cb, sizeof cb, "{\"callback_url\":\"%s\"}", loc);
        st = mcplug_manager_authenticate(M, "srv", cb, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"state\":\"connected\"") && contains(out, "mcp__srv__whoami"), out,
                  "after authenticate the real tools return");
        mcplug_string_free(out);
        free(loc);
        free(auth_url);
    }

    /* Bad calls are clear errors. */
    st = mcplug_manager_authenticate(M, "nope", NULL, &out);
    CHECK_STATUS(st, MCPLUG_NOT_FOUND, out, "an unknown server -> NOT_FOUND");
    mcplug_string_free(out);
    st = mcplug_manager_authenticate(M, "srv", "{\"wait\":\"yes\"}", &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "wait"), out, "a bad option -> INVALID_ARGUMENT naming it");
    mcplug_string_free(out);
    st = mcplug_manager_authenticate(M, "srv", "{\"callback_url\":\"http://localhost:1/callback?code=x\"}", &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "no authorization"), out,
              "a callback_url with nothing waiting -> INVALID_ARGUMENT");
    mcplug_string_free(out);
    st = mcplug_manager_logout(M, NULL, &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "logout(NULL) -> INVALID_ARGUMENT");
    mcplug_string_free(out);
    mcplug_manager_free(M);

    /* The stored token, by a new manager, without asking. */
    st = mcplug_manager_new(options, &M, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "a second manager");
    mcplug_string_free(out);
    st = mcplug_manager_connect(M, config, &out);
    mcplug_string_free(out);
    st = mcplug_manager_wait(M, "{\"timeout_ms\":20000}", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"state\":\"connected\""), out, "the stored token is used");
    mcplug_string_free(out);
    mcplug_manager_free(M);
    printf("# %d checks passed\n", check_count);
    return 0;
}
