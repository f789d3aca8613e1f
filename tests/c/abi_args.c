/* Bad input through the C ABI: NULL for every pointer parameter of every function, invalid
 * UTF-8, malformed JSON, arguments that are not a JSON object, unusable options. Each gets
 * MCPLUG_INVALID_ARGUMENT (or the documented status) with an error object whose message names the
 * parameter, never a crash; and the connection still works afterwards (nothing is lost). */
#include "check.h"

#define BAD_UTF8 "\xff\xfe"

/* A call that must fail with INVALID_ARGUMENT and name `param` in its message. */
#define CHECK_INVALID(call_expr, param, what)                                                   \
    do {                                                                                         \
        char *out = NULL;                                                                        \
        mcplug_status st_ = (call_expr);                                                         \
        CHECK_OUT(st_ == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", param),   \
                  out, "%s -> INVALID_ARGUMENT naming %s (got %s)", what, param, status_name(st_)); \
        drop(&out);                                                                              \
    } while (0)

static void static_functions(void) {
    const char *v = mcplug_version();
    CHECK(v != NULL && strlen(v) > 0 && strchr(v, '.') != NULL, "mcplug_version() is \"%s\"", v ? v : "(null)");
    CHECK(mcplug_abi_version() == MCPLUG_ABI_VERSION, "mcplug_abi_version() == MCPLUG_ABI_VERSION (%u)",
          (unsigned)mcplug_abi_version());
    CHECK(MCPLUG_OK == 0 && MCPLUG_INVALID_ARGUMENT == 1 && MCPLUG_TIMEOUT == 2 && MCPLUG_CANCELLED == 3 &&
              MCPLUG_CLOSED == 4 && MCPLUG_TRANSPORT == 5 && MCPLUG_PROTOCOL == 6 && MCPLUG_RPC == 7 &&
              MCPLUG_NOT_FOUND == 12 && MCPLUG_NOT_IMPLEMENTED == 13 && MCPLUG_INVALID_RESULT == 14,
          "status numbers are the fixed ones");
    mcplug_string_free(NULL);
    CHECK(1, "mcplug_string_free(NULL) is a no-op");
    mcplug_client_free(NULL);
    CHECK(1, "mcplug_client_free(NULL) is a no-op");
    CHECK(mcplug_cancel(NULL) == MCPLUG_INVALID_ARGUMENT, "mcplug_cancel(NULL) -> INVALID_ARGUMENT");
    CHECK(mcplug_cancel(BAD_UTF8) == MCPLUG_INVALID_ARGUMENT, "mcplug_cancel(invalid UTF-8) -> INVALID_ARGUMENT");
    CHECK(mcplug_cancel("no-call-has-this-tag") == MCPLUG_NOT_FOUND, "mcplug_cancel(unknown tag) -> NOT_FOUND");
    {
        const char *kinds = mcplug_error_kinds();
        CHECK(kinds != NULL && strncmp(kinds, "[{\"kind\":\"invalid_argument\",\"status\":1,\"meaning\":\"", 50) == 0 &&
                  strstr(kinds, "{\"kind\":\"invalid_result\",\"status\":14,") != NULL && kinds == mcplug_error_kinds(),
              "mcplug_error_kinds: the table of kinds, from invalid_argument (1) to invalid_result (14), static");
    }
    CHECK(mcplug_cancel_token_new(NULL) == MCPLUG_INVALID_ARGUMENT, "mcplug_cancel_token_new(NULL) -> INVALID_ARGUMENT");
    CHECK(mcplug_cancel_token_cancel(0) == MCPLUG_NOT_FOUND, "mcplug_cancel_token_cancel(0) -> NOT_FOUND");
    CHECK(mcplug_cancel_token_free(0) == MCPLUG_NOT_FOUND, "mcplug_cancel_token_free(0) -> NOT_FOUND");
}

static void connect_arguments(const char *good) {
    mcplug_client *sentinel = (mcplug_client *)&check_count; /* never dereferenced */
    mcplug_client *c = sentinel;
    char *out = NULL;
    mcplug_status st;

    CHECK_INVALID(mcplug_client_connect(NULL, NULL, &c, &out), "server_json", "connect(server_json=NULL)");
    CHECK(c == sentinel, "a failed connect leaves *client untouched");
    CHECK_INVALID(mcplug_client_connect(good, NULL, NULL, &out), "client", "connect(client=NULL)");
    st = mcplug_client_connect(NULL, NULL, &c, NULL);
    CHECK(st == MCPLUG_INVALID_ARGUMENT, "connect(server_json=NULL, out=NULL) -> INVALID_ARGUMENT, no crash");
    st = mcplug_client_connect(NULL, NULL, NULL, NULL);
    CHECK(st == MCPLUG_INVALID_ARGUMENT, "connect(all NULL) -> INVALID_ARGUMENT, no crash");
    CHECK_INVALID(mcplug_client_connect("{\"command\": ", NULL, &c, &out), "server_json", "connect(malformed server_json)");
    CHECK_INVALID(mcplug_client_connect("{\"command\":\"" BAD_UTF8 "\"}", NULL, &c, &out), "server_json",
                  "connect(server_json with invalid UTF-8)");
    CHECK_INVALID(mcplug_client_connect("[\"python3\"]", NULL, &c, &out), "server", "connect(server_json is an array)");
    CHECK_INVALID(mcplug_client_connect("\"python3\"", NULL, &c, &out), "server", "connect(server_json is a string)");
    CHECK_INVALID(mcplug_client_connect("{\"args\":[]}", NULL, &c, &out), "command", "connect(no command)");
    CHECK_INVALID(mcplug_client_connect(good, "{nope", &c, &out), "options_json", "connect(malformed options_json)");
    CHECK_INVALID(mcplug_client_connect(good, "{\"tag\":\"" BAD_UTF8 "\"}", &c, &out), "options_json",
                  "connect(options_json with invalid UTF-8)");
    CHECK_INVALID(mcplug_client_connect(good, "{\"connect_timeout_ms\":0}", &c, &out), "connect_timeout_ms",
                  "connect(connect_timeout_ms: 0)");
    CHECK_INVALID(mcplug_client_connect(good, "{\"connect_timeout_ms\":-5}", &c, &out), "connect_timeout_ms",
                  "connect(connect_timeout_ms: -5)");
    CHECK_INVALID(mcplug_client_connect(good, "{\"request_timeout_ms\":\"soon\"}", &c, &out), "request_timeout_ms",
                  "connect(request_timeout_ms: \"soon\")");
    CHECK_INVALID(mcplug_client_connect(good, "{\"tag\":7}", &c, &out), "tag", "connect(tag: 7)");
    CHECK(c == sentinel, "*client is still untouched after every failed connect");

    st = mcplug_client_connect("{\"command\":\"/nonexistent/mcplug-no-such-server\"}", NULL, &c, &out);
    if (reduced() && st == MCPLUG_CLOSED) {
        /* valgrind emulates the spawn: the exec failure shows as a child that exited at once */
        CHECK_OUT(is_error(out, "closed", NULL), out, "a command that does not exist -> CLOSED (under valgrind)");
    } else {
        CHECK_STATUS(st, MCPLUG_TRANSPORT, out, "a command that does not exist -> TRANSPORT (got %s)", status_name(st));
        CHECK_OUT(is_error(out, "transport", "mcplug-no-such-server"), out, "... and the message names the command");
    }
    drop(&out);
    st = mcplug_client_connect("{\"type\":\"http\",\"url\":\"http://127.0.0.1:9/mcp\"}", NULL, &c, &out);
    CHECK_STATUS(st, MCPLUG_TRANSPORT, out, "type http, nothing listening -> TRANSPORT (got %s)", status_name(st));
    CHECK_OUT(is_error(out, "transport", "http://127.0.0.1:9/mcp"), out, "... naming the URL");
    drop(&out);
    st = mcplug_client_connect("{\"type\":\"sdk\",\"name\":\"x\"}", NULL, &c, &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "type sdk on a client -> INVALID_ARGUMENT (got %s)", status_name(st));
    CHECK_OUT(is_error(out, "invalid_argument", "mcplug_manager_connect"), out, "... pointing to the manager, which serves them");
    drop(&out);
    CHECK(c == sentinel, "*client untouched");

    /* out may be NULL on success too. */
    c = NULL;
    st = mcplug_client_connect(good, NULL, &c, NULL);
    CHECK(st == MCPLUG_OK && c != NULL, "connect with out=NULL works");
    mcplug_client_free(c);
}

static void handle_arguments(mcplug_client *c) {
    char *out = NULL;
    mcplug_status st;

    /* client == NULL for every function that takes one */
    CHECK_INVALID(mcplug_client_list_tools(NULL, NULL, &out), "client", "list_tools(client=NULL)");
    CHECK_INVALID(mcplug_client_call_tool(NULL, "echo", "{}", NULL, &out), "client", "call_tool(client=NULL)");
    CHECK_INVALID(mcplug_client_request(NULL, "ping", NULL, NULL, &out), "client", "request(client=NULL)");
    CHECK_INVALID(mcplug_client_notify(NULL, "notifications/x", NULL, &out), "client", "notify(client=NULL)");
    CHECK_INVALID(mcplug_client_next_event(NULL, 0, &out), "client", "next_event(client=NULL)");
    CHECK_INVALID(mcplug_client_respond(NULL, "{\"id\":\"s1\",\"result\":{}}", &out), "client", "respond(client=NULL)");
    CHECK(mcplug_client_list_tools(NULL, NULL, NULL) == MCPLUG_INVALID_ARGUMENT, "list_tools(NULL, NULL, NULL) -> INVALID_ARGUMENT");
    CHECK(mcplug_client_call_tool(NULL, NULL, NULL, NULL, NULL) == MCPLUG_INVALID_ARGUMENT, "call_tool(all NULL) -> INVALID_ARGUMENT");
    CHECK(mcplug_client_request(NULL, NULL, NULL, NULL, NULL) == MCPLUG_INVALID_ARGUMENT, "request(all NULL) -> INVALID_ARGUMENT");
    CHECK(mcplug_client_notify(NULL, NULL, NULL, NULL) == MCPLUG_INVALID_ARGUMENT, "notify(all NULL) -> INVALID_ARGUMENT");
    CHECK(mcplug_client_next_event(NULL, 0, NULL) == MCPLUG_INVALID_ARGUMENT, "next_event(NULL, 0, NULL) -> INVALID_ARGUMENT");
    CHECK(mcplug_client_respond(NULL, NULL, NULL) == MCPLUG_INVALID_ARGUMENT, "respond(all NULL) -> INVALID_ARGUMENT");

    /* list_tools */
    CHECK_INVALID(mcplug_client_list_tools(c, "{\"timeout_ms\":", &out), "options_json", "list_tools(malformed options_json)");
    CHECK_INVALID(mcplug_client_list_tools(c, "{\"tag\":\"" BAD_UTF8 "\"}", &out), "options_json",
                  "list_tools(options_json with invalid UTF-8)");
    CHECK_INVALID(mcplug_client_list_tools(c, "{\"timeout_ms\":0}", &out), "timeout_ms", "list_tools(timeout_ms: 0)");
    st = mcplug_client_list_tools(c, NULL, NULL);
    CHECK(st == MCPLUG_OK, "list_tools(out=NULL) -> OK");

    /* call_tool */
    CHECK_INVALID(mcplug_client_call_tool(c, NULL, "{}", NULL, &out), "name", "call_tool(name=NULL)");
    CHECK_INVALID(mcplug_client_call_tool(c, "ec" BAD_UTF8 "ho", "{}", NULL, &out), "name", "call_tool(name with invalid UTF-8)");
    CHECK_INVALID(mcplug_client_call_tool(c, "echo", "{\"message\":\"\\ud800\"}", NULL, &out), "surrogate",
                  "call_tool(arguments_json with a lone surrogate escape) -> refused, as request() refuses it");
    CHECK_INVALID(mcplug_client_call_tool(c, "echo", "{\"message\":\"x\\uDC00y\"}", NULL, &out), "surrogate",
                  "call_tool(arguments_json with a lone low surrogate escape)");
    CHECK_INVALID(mcplug_client_call_tool(c, "echo", "{\"message\": hi}", NULL, &out), "arguments_json",
                  "call_tool(arguments_json not JSON)");
    CHECK_INVALID(mcplug_client_call_tool(c, "echo", "", NULL, &out), "arguments_json", "call_tool(arguments_json empty)");
    CHECK_INVALID(mcplug_client_call_tool(c, "echo", "{\"message\":\"" BAD_UTF8 "\"}", NULL, &out), "arguments_json",
                  "call_tool(arguments_json with invalid UTF-8)");
    CHECK_INVALID(mcplug_client_call_tool(c, "echo", "[1,2]", NULL, &out), "arguments_json", "call_tool(arguments_json an array)");
    CHECK_INVALID(mcplug_client_call_tool(c, "echo", "\"hi\"", NULL, &out), "arguments_json", "call_tool(arguments_json a string)");
    CHECK_INVALID(mcplug_client_call_tool(c, "echo", "42", NULL, &out), "arguments_json", "call_tool(arguments_json a number)");
    CHECK_INVALID(mcplug_client_call_tool(c, "echo", "true", NULL, &out), "arguments_json", "call_tool(arguments_json true)");
    CHECK_INVALID(mcplug_client_call_tool(c, "echo", "{}", "{\"tag\":", &out), "options_json", "call_tool(malformed options_json)");
    CHECK_INVALID(mcplug_client_call_tool(c, "echo", "{}", "[]", &out), "options_json", "call_tool(options_json an array)");
    CHECK_INVALID(mcplug_client_call_tool(c, "echo", "{}", "{\"timeout_ms\":-1}", &out), "timeout_ms",
                  "call_tool(timeout_ms: -1)");
    CHECK_INVALID(mcplug_client_call_tool(c, "echo", "{}", "{\"tag\":false}", &out), "tag", "call_tool(tag: false)");
    CHECK_INVALID(mcplug_client_call_tool(c, "echo", "{}", "{\"progress\":\"yes\"}", &out), "progress",
                  "call_tool(progress: \"yes\")");
    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"no out\"}", NULL, NULL);
    CHECK(st == MCPLUG_OK, "call_tool(out=NULL) -> OK");
    st = mcplug_client_call_tool(c, "no-such-tool", "{}", NULL, &out);
    CHECK_STATUS(st, MCPLUG_RPC, out, "unknown tool -> RPC (got %s)", status_name(st));
    CHECK_OUT(is_error(out, "rpc", "no-such-tool") && contains(out, "\"code\":-32602"), out,
              "... kind rpc, code -32602, message names the tool");
    drop(&out);

    /* request */
    CHECK_INVALID(mcplug_client_request(c, NULL, NULL, NULL, &out), "method", "request(method=NULL)");
    CHECK_INVALID(mcplug_client_request(c, "pi" BAD_UTF8 "ng", NULL, NULL, &out), "method", "request(method with invalid UTF-8)");
    CHECK_INVALID(mcplug_client_request(c, "tools/list", "{cursor}", NULL, &out), "params_json", "request(malformed params_json)");
    CHECK_INVALID(mcplug_client_request(c, "tools/list", "[\"a\"]", NULL, &out), "params_json", "request(params_json an array)");
    CHECK_INVALID(mcplug_client_request(c, "tools/list", "7", NULL, &out), "params_json", "request(params_json a number)");
    CHECK_INVALID(mcplug_client_request(c, "tools/list", "{\"cursor\":\"" BAD_UTF8 "\"}", NULL, &out), "params_json",
                  "request(params_json with invalid UTF-8)");
    CHECK_INVALID(mcplug_client_request(c, "tools/list", NULL, "{,}", &out), "options_json", "request(malformed options_json)");
    CHECK_INVALID(mcplug_client_request(c, "ping", NULL, "{\"all_pages\":true}", &out), "all_pages",
                  "request(all_pages on a method that is not a list)");
    st = mcplug_client_request(c, "ping", NULL, NULL, NULL);
    CHECK(st == MCPLUG_OK, "request(ping, out=NULL) -> OK");
    st = mcplug_client_request(c, "no/such/method", NULL, NULL, &out);
    CHECK_STATUS(st, MCPLUG_RPC, out, "an unknown method -> RPC (got %s)", status_name(st));
    CHECK_OUT(is_error(out, "rpc", NULL) && contains(out, "\"code\":-32601"), out, "... with code -32601");
    drop(&out);

    /* notify */
    CHECK_INVALID(mcplug_client_notify(c, NULL, NULL, &out), "method", "notify(method=NULL)");
    CHECK_INVALID(mcplug_client_notify(c, "notifications/" BAD_UTF8, NULL, &out), "method", "notify(method with invalid UTF-8)");
    CHECK_INVALID(mcplug_client_notify(c, "notifications/x", "{oops", &out), "params_json", "notify(malformed params_json)");
    CHECK_INVALID(mcplug_client_notify(c, "notifications/x", "[1]", &out), "params_json", "notify(params_json an array)");
    CHECK_INVALID(mcplug_client_notify(c, "notifications/x", "\"s\"", &out), "params_json", "notify(params_json a string)");
    st = mcplug_client_notify(c, "notifications/roots/list_changed", NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "notify(notifications/roots/list_changed) -> OK");
    CHECK_OUT(out != NULL && strcmp(out, "{}") == 0, out, "... and out is {}");
    drop(&out);
    st = mcplug_client_notify(c, "notifications/roots/list_changed", "{}", NULL);
    CHECK(st == MCPLUG_OK, "notify(out=NULL) -> OK");

    /* next_event */
    st = mcplug_client_next_event(c, 0, NULL);
    CHECK(st == MCPLUG_OK || st == MCPLUG_TIMEOUT, "next_event(out=NULL) -> %s, no crash", status_name(st));
    {
        /* drain what is there (stderr lines, etc.), then a poll times out with an error object */
        int n = 0;
        while (mcplug_client_next_event(c, 0, &out) == MCPLUG_OK && n++ < 1000) drop(&out);
        CHECK_OUT(is_error(out, "timeout", NULL), out, "next_event(0) with nothing queued -> TIMEOUT with an error object");
        drop(&out);
    }

    /* respond */
    CHECK_INVALID(mcplug_client_respond(c, NULL, &out), "response_json", "respond(response_json=NULL)");
    CHECK_INVALID(mcplug_client_respond(c, "{\"id\":", &out), "response_json", "respond(malformed response_json)");
    CHECK_INVALID(mcplug_client_respond(c, "{\"id\":\"" BAD_UTF8 "\",\"result\":{}}", &out), "response_json",
                  "respond(response_json with invalid UTF-8)");
    CHECK_INVALID(mcplug_client_respond(c, "[1]", &out), "response_json", "respond(response_json an array)");
    CHECK_INVALID(mcplug_client_respond(c, "{\"result\":{}}", &out), "id", "respond(no id)");
    CHECK_INVALID(mcplug_client_respond(c, "{\"id\":\"s999\",\"result\":{}}", &out), "s999", "respond(an id nobody waits for)");
    CHECK_INVALID(mcplug_client_respond(c, "{\"id\":\"s999\"}", &out), "result", "respond(neither result nor error)");
    CHECK_INVALID(mcplug_client_respond(c, "{\"id\":\"s999\",\"error\":{\"message\":\"x\"}}", &out), "code",
                  "respond(error without code)");
    CHECK(mcplug_client_respond(c, "{\"id\":\"s999\",\"result\":{}}", NULL) == MCPLUG_INVALID_ARGUMENT,
          "respond(out=NULL) -> INVALID_ARGUMENT, no crash");

    /* Unicode passes through both ways. */
    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"h\xc3\xa9llo \xe2\x9c\x93\"}", NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "echo with UTF-8 text -> OK");
    CHECK_OUT(contains(out, "\"text\":\"Echo: h\xc3\xa9llo \xe2\x9c\x93\""), out, "... answers \"Echo: h\xc3\xa9llo \xe2\x9c\x93\"");
    drop(&out);

    /* Nothing was lost: the connection still works. */
    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"still here\"}", NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "after all the bad input, echo -> OK");
    CHECK_OUT(contains(out, "\"text\":\"Echo: still here\""), out, "... and answers \"Echo: still here\"");
    drop(&out);
    st = mcplug_client_list_tools(c, NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "list_tools -> OK");
    CHECK_OUT(contains(out, "\"name\":\"echo\"") && contains(out, "\"name\":\"cancelled_ids\""), out,
              "... lists echo and cancelled_ids");
    drop(&out);
}

int main(void) {
    char good[4096];
    mcplug_client *c;
    fault_server_json(good, sizeof good, "normal");
    test_init();

    static_functions();
    connect_arguments(good);
    c = connect_or_die(good, "{\"connect_timeout_ms\":20000}", "the fault server (normal)");
    handle_arguments(c);
    mcplug_client_free(c);
    CHECK(1, "mcplug_client_free returned");
    return finish("abi_args");
}
