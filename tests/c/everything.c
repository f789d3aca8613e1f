/* server-everything (the reference TS server, legacy era) through the C ABI: the handshake,
 * every always-offered tool listed and called with valid arguments and its result checked,
 * the generic requests (resources, templates, prompts, completion, ping), progress events that
 * carry the call's tag, the progress-reset timeout, and log messages as events.
 * Over stdio by default; with MCPLUG_EVERYTHING_TYPE ("http" or "sse") and MCPLUG_EVERYTHING_URL
 * the same program runs against server-everything's streamableHttp or sse mode. */
#include "check.h"

static mcplug_client *c;

/* Calls a tool that must succeed; returns its CallToolResult (owned). */
static char *call_ok(const char *name, const char *args, const char *options) {
    char *out = NULL;
    mcplug_status st = mcplug_client_call_tool(c, name, args, options, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "call %s %s -> OK (got %s)", name, args ? args : "", status_name(st));
    CHECK_OUT(!contains(out, "\"isError\":true"), out, "... and %s is not an error result", name);
    return out;
}

static char *request_ok(const char *method, const char *params, const char *options) {
    char *out = NULL;
    mcplug_status st = mcplug_client_request(c, method, params, options, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "request %s %s -> OK (got %s)", method, params ? params : "", status_name(st));
    return out;
}

static void handshake(const char *server) {
    char *out = NULL;
    mcplug_status st = mcplug_client_connect(
        server, "{\"connect_timeout_ms\":30000,\"client_info\":{\"name\":\"mcplug-c-test\",\"version\":\"9.9.9\"}}", &c, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "connect to server-everything -> OK (got %s)", status_name(st));
    CHECK_OUT(contains(out, "\"era\":\"legacy\""), out, "era is legacy");
    CHECK_OUT(contains(out, "\"protocol_version\":\"2025-11-25\""), out, "protocol_version is 2025-11-25");
    CHECK_OUT(contains(out, "\"name\":\"everything\""), out, "the connect result names the server (\"everything\")");
    CHECK_OUT(contains(out, "\"name\":\"mcp-servers/everything\""), out, "server_info.name is mcp-servers/everything");
    CHECK_OUT(contains(out, "\"capabilities\":{") && contains(out, "\"tools\":"), out, "capabilities include tools");
    CHECK_OUT(contains(out, "\"instructions\":\""), out, "instructions are a string");
    CHECK_OUT(contains(out, "\"result\":{\"protocolVersion\":\"2025-11-25\"") || contains(out, "\"result\":{"), out,
              "the raw initialize result is there");
    drop(&out);
}

static void tool_list(void) {
    static const char *tools[] = {"echo", "get-sum", "get-structured-content", "get-annotated-message",
                                  "get-resource-links", "get-resource-reference", "get-tiny-image",
                                  "gzip-file-as-resource", "trigger-long-running-operation",
                                  "toggle-simulated-logging", "toggle-subscriber-updates", "get-env"};
    char *out = NULL, want[128];
    size_t i;
    mcplug_status st = mcplug_client_list_tools(c, NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "list_tools -> OK");
    CHECK_OUT(strncmp(out, "{\"tools\":[", 10) == 0, out, "list_tools gives {\"tools\":[...]}");
    for (i = 0; i < sizeof tools / sizeof tools[0]; i++) {
        snprintf(want, sizeof want, "\"name\":\"%s\"", tools[i]);
        CHECK_OUT(contains(out, want), out, "tool %s is listed", tools[i]);
    }
    CHECK_OUT(contains(out, "\"outputSchema\":{"), out, "get-structured-content's outputSchema is passed through");
    CHECK_OUT(contains(out, "\"readOnlyHint\":true"), out, "tool annotations are passed through");
    drop(&out);
    out = request_ok("tools/list", NULL, "{\"all_pages\":true}");
    CHECK_OUT(contains(out, "\"name\":\"get-env\""), out, "tools/list through request with all_pages lists get-env");
    drop(&out);
}

static void tools(void) {
    char *out;

    out = call_ok("echo", "{\"message\":\"hi\"}", NULL);
    CHECK_OUT(contains(out, "{\"type\":\"text\",\"text\":\"Echo: hi\"}"), out, "echo answers text \"Echo: hi\"");
    drop(&out);

    out = call_ok("get-sum", "{\"a\":2,\"b\":3}", NULL);
    CHECK_OUT(contains(out, "\"text\":\"The sum of 2 and 3 is 5.\""), out, "get-sum 2+3 answers 5");
    drop(&out);

    out = call_ok("get-structured-content", "{\"location\":\"New York\"}", NULL);
    CHECK_OUT(contains(out, "\"structuredContent\":{\"temperature\":33,\"conditions\":\"Cloudy\",\"humidity\":82}"), out,
              "get-structured-content New York: structuredContent {temperature 33, Cloudy, humidity 82}");
    CHECK_OUT(contains(out, "\"type\":\"text\""), out, "... with its backward-compatible text block");
    drop(&out);

    out = call_ok("get-annotated-message", "{\"messageType\":\"error\",\"includeImage\":true}", NULL);
    CHECK_OUT(contains(out, "\"text\":\"Error: Operation failed\",\"annotations\":{\"audience\":[\"user\",\"assistant\"],\"priority\":1}"),
              out, "get-annotated-message error: text with annotations audience [user, assistant], priority 1");
    CHECK_OUT(contains(out, "\"mimeType\":\"image/png\",\"annotations\":{\"audience\":[\"user\"],\"priority\":0.5}"), out,
              "... and an image/png with annotations audience [user], priority 0.5");
    drop(&out);

    out = call_ok("get-resource-links", "{\"count\":2}", NULL);
    CHECK_OUT(contains(out, "\"text\":\"Here are 2 resource links to resources available in this server:\""), out,
              "get-resource-links 2: the intro text");
    CHECK_OUT(count_of(out, "\"type\":\"resource_link\"") == 2, out, "... exactly 2 resource_link blocks");
    CHECK_OUT(contains(out, "\"uri\":\"demo://resource/dynamic/blob/1\"") &&
                  contains(out, "\"uri\":\"demo://resource/dynamic/text/2\""),
              out, "... linking demo://resource/dynamic/blob/1 and demo://resource/dynamic/text/2");
    CHECK_OUT(contains(out, "\"name\":\"Text Resource 2\""), out, "... named \"Text Resource 2\"");
    drop(&out);

    out = call_ok("get-resource-reference", "{\"resourceType\":\"Text\",\"resourceId\":3}", NULL);
    CHECK_OUT(contains(out, "\"type\":\"resource\",\"resource\":{\"uri\":\"demo://resource/dynamic/text/3\""), out,
              "get-resource-reference Text 3: an embedded resource demo://resource/dynamic/text/3");
    CHECK_OUT(contains(out, "\"text\":\"Resource 3: This is a plaintext resource created at "), out,
              "... whose text is \"Resource 3: This is a plaintext resource ...\"");
    drop(&out);

    out = call_ok("get-tiny-image", NULL, NULL);
    CHECK_OUT(contains(out, "\"type\":\"image\",\"data\":\"iVBORw0KGgo"), out, "get-tiny-image: an image block of PNG data");
    CHECK_OUT(contains(out, "\"mimeType\":\"image/png\""), out, "... mimeType image/png");
    CHECK_OUT(contains(out, "\"text\":\"The image above is the MCP logo.\""), out, "... and its caption");
    drop(&out);

    /* a data: URL, so no network is needed */
    out = call_ok("gzip-file-as-resource",
                  "{\"name\":\"hello.txt.gz\",\"data\":\"data:text/plain;base64,aGVsbG8=\",\"outputType\":\"resourceLink\"}", NULL);
    CHECK_OUT(contains(out, "\"uri\":\"demo://resource/session/hello.txt.gz\"") && contains(out, "\"type\":\"resource_link\"") &&
                  contains(out, "\"mimeType\":\"application/gzip\""),
              out, "gzip-file-as-resource: a resource_link to demo://resource/session/hello.txt.gz (application/gzip)");
    drop(&out);
    out = request_ok("resources/read", "{\"uri\":\"demo://resource/session/hello.txt.gz\"}", NULL);
    CHECK_OUT(contains(out, "\"blob\":\"H4sI"), out, "... which resources/read returns as a gzip blob (H4sI...)");
    drop(&out);
    out = call_ok("gzip-file-as-resource",
                  "{\"name\":\"inline.gz\",\"data\":\"data:text/plain;base64,aGVsbG8=\",\"outputType\":\"resource\"}", NULL);
    CHECK_OUT(contains(out, "\"type\":\"resource\",\"resource\":{\"uri\":\"demo://resource/session/inline.gz\"") &&
                  contains(out, "\"blob\":\"H4sI"),
              out, "gzip-file-as-resource outputType resource: an embedded gzip blob");
    drop(&out);

    out = call_ok("get-env", NULL, NULL);
    CHECK_OUT(contains(out, "MCPLUG_TEST_MARKER") && contains(out, "marker-42"), out,
              "get-env shows the env given in server_json (MCPLUG_TEST_MARKER=marker-42)");
    drop(&out);

    out = call_ok("toggle-subscriber-updates", NULL, NULL);
    CHECK_OUT(contains(out, "\"text\":\"Started simulated resource updated notifications"), out, "toggle-subscriber-updates starts");
    drop(&out);
    out = call_ok("toggle-subscriber-updates", NULL, NULL);
    CHECK_OUT(contains(out, "\"text\":\"Stopped simulated resource updates"), out, "toggle-subscriber-updates again stops");
    drop(&out);

    /* Bad calls are results with isError, per the spec, and lose nothing. */
    {
        char *bad = NULL;
        mcplug_status st = mcplug_client_call_tool(c, "no-such-tool", "{}", NULL, &bad);
        CHECK_STATUS(st, MCPLUG_OK, bad, "an unknown tool -> OK status with a result (got %s)", status_name(st));
        CHECK_OUT(contains(bad, "\"isError\":true") && contains(bad, "Tool no-such-tool not found"), bad,
                  "... isError: true, \"Tool no-such-tool not found\"");
        drop(&bad);
        st = mcplug_client_call_tool(c, "get-sum", "{\"a\":\"two\"}", NULL, &bad);
        CHECK_STATUS(st, MCPLUG_OK, bad, "get-sum with a string -> OK status with a result");
        CHECK_OUT(contains(bad, "\"isError\":true") && contains(bad, "Input validation error"), bad,
                  "... isError: true, input validation error");
        drop(&bad);
        st = mcplug_client_call_tool(c, "get-sum", "{\"a\": 2, \"b\": ", NULL, &bad);
        CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(bad, "invalid_argument", "arguments_json"), bad,
                  "arguments that are not JSON -> INVALID_ARGUMENT naming arguments_json, nothing sent");
        drop(&bad);
    }
    out = call_ok("get-sum", "{\"a\":40,\"b\":2}", NULL);
    CHECK_OUT(contains(out, "\"text\":\"The sum of 40 and 2 is 42.\""), out, "the connection still works: 40+2 is 42");
    drop(&out);
}

static void generic_requests(void) {
    char *out;

    out = request_ok("ping", NULL, NULL);
    CHECK_OUT(strcmp(out, "{}") == 0, out, "ping answers {}");
    drop(&out);

    out = request_ok("resources/list", "{}", NULL);
    CHECK_OUT(contains(out, "\"uri\":\"demo://resource/static/document/features.md\""), out,
              "resources/list has demo://resource/static/document/features.md");
    drop(&out);
    out = request_ok("resources/list", NULL, "{\"all_pages\":true}");
    CHECK_OUT(strncmp(out, "{\"resources\":[", 14) == 0 && contains(out, "demo://resource/static/document/architecture.md"), out,
              "resources/list with all_pages gives {\"resources\":[...]} with architecture.md");
    drop(&out);

    out = request_ok("resources/read", "{\"uri\":\"demo://resource/static/document/features.md\"}", NULL);
    CHECK_OUT(contains(out, "\"mimeType\":\"text/markdown\"") && contains(out, "\"text\":\"# Everything Server - Features"), out,
              "resources/read features.md: text/markdown \"# Everything Server - Features...\"");
    drop(&out);
    out = request_ok("resources/read", "{\"uri\":\"demo://resource/dynamic/text/7\"}", NULL);
    CHECK_OUT(contains(out, "\"text\":\"Resource 7: This is a plaintext resource"), out, "resources/read of a template URI (text/7)");
    drop(&out);

    out = request_ok("resources/templates/list", "{}", NULL);
    CHECK_OUT(contains(out, "\"uriTemplate\":\"demo://resource/dynamic/text/{resourceId}\"") &&
                  contains(out, "\"uriTemplate\":\"demo://resource/dynamic/blob/{resourceId}\""),
              out, "resources/templates/list has the text and blob templates");
    drop(&out);

    out = request_ok("prompts/list", NULL, NULL);
    CHECK_OUT(contains(out, "\"name\":\"simple-prompt\"") && contains(out, "\"name\":\"args-prompt\"") &&
                  contains(out, "\"name\":\"completable-prompt\"") && contains(out, "\"name\":\"resource-prompt\""),
              out, "prompts/list has simple-prompt, args-prompt, completable-prompt, resource-prompt");
    drop(&out);

    out = request_ok("prompts/get", "{\"name\":\"simple-prompt\"}", NULL);
    CHECK_OUT(contains(out, "\"text\":\"This is a simple prompt without arguments.\""), out, "prompts/get simple-prompt");
    drop(&out);
    out = request_ok("prompts/get", "{\"name\":\"args-prompt\",\"arguments\":{\"city\":\"Paris\",\"state\":\"Texas\"}}", NULL);
    CHECK_OUT(contains(out, "\"text\":\"What's weather in Paris, Texas?\""), out, "prompts/get args-prompt Paris, Texas");
    drop(&out);
    out = request_ok("prompts/get", "{\"name\":\"resource-prompt\",\"arguments\":{\"resourceType\":\"Text\",\"resourceId\":\"2\"}}", NULL);
    CHECK_OUT(contains(out, "\"uri\":\"demo://resource/dynamic/text/2\""), out, "prompts/get resource-prompt embeds text/2");
    drop(&out);

    out = request_ok("completion/complete",
                     "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"completable-prompt\"},\"argument\":{\"name\":\"department\",\"value\":\"Eng\"}}",
                     NULL);
    CHECK_OUT(contains(out, "\"values\":[\"Engineering\"]"), out, "completion/complete department \"Eng\" -> [Engineering]");
    drop(&out);
    out = request_ok("completion/complete",
                     "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"completable-prompt\"},\"argument\":{\"name\":\"name\",\"value\":\"\"},"
                     "\"context\":{\"arguments\":{\"department\":\"Sales\"}}}",
                     NULL);
    CHECK_OUT(contains(out, "\"values\":[\"David\",\"Eve\",\"Frank\"]"), out,
              "completion/complete name with context department Sales -> [David, Eve, Frank]");
    drop(&out);

    {
        char *bad = NULL;
        mcplug_status st = mcplug_client_request(c, "resources/read", "{\"uri\":\"demo://resource/nope\"}", NULL, &bad);
        CHECK_STATUS(st, MCPLUG_RPC, bad, "resources/read of an unknown URI -> RPC (got %s)", status_name(st));
        CHECK_OUT(is_error(bad, "rpc", "demo://resource/nope") && contains(bad, "\"code\":"), bad,
                  "... an rpc error with a code, naming the URI");
        drop(&bad);
    }
}

/* Pulls every queued event for `wait_s` and returns how many progress events carried `tag`,
 * checking that their progress counts up 1, 2, ... */
static int progress_events(const char *tag, double wait_s, int expected_total) {
    char want_tag[128];
    int n = 0;
    double until = now_s() + wait_s;
    snprintf(want_tag, sizeof want_tag, "\"tag\":\"%s\"", tag);
    while (now_s() < until) {
        char *ev = NULL;
        mcplug_status st = mcplug_client_next_event(c, 100, &ev);
        if (st == MCPLUG_OK && contains(ev, "\"method\":\"notifications/progress\"")) {
            CHECK_OUT(contains(ev, want_tag), ev, "progress event %d carries the call's tag %s", n + 1, tag);
            CHECK_OUT(json_int(ev, "progress") == n + 1 && json_int(ev, "total") == expected_total && contains(ev, "\"progressToken\":"),
                      ev, "... progress %d of %d, with the progressToken", n + 1, expected_total);
            n++;
        }
        mcplug_string_free(ev);
        if (st == MCPLUG_TIMEOUT && n >= expected_total) break;
        if (st != MCPLUG_OK && st != MCPLUG_TIMEOUT) CHECK(0, "next_event while waiting for progress -> %s", status_name(st));
    }
    return n;
}

static void progress(void) {
    char *out;
    double t0;
    int n;

    /* drain what is queued so far */
    while (mcplug_client_next_event(c, 0, &out) == MCPLUG_OK) drop(&out);
    drop(&out);

    out = call_ok("trigger-long-running-operation", "{\"duration\":0.5,\"steps\":5}", "{\"progress\":true,\"tag\":\"lro-1\"}");
    CHECK_OUT(contains(out, "\"text\":\"Long running operation completed. Duration: 0.5 seconds, Steps: 5.\""), out,
              "trigger-long-running-operation 0.5 s / 5 steps completes");
    drop(&out);
    n = progress_events("lro-1", bound_s(3.0), 5);
    CHECK(n == 5, "exactly 5 progress events arrived, each with tag lro-1 (got %d)", n);

    /* Without progress:true, no progress token is sent and no progress event comes. */
    out = call_ok("trigger-long-running-operation", "{\"duration\":0.2,\"steps\":2}", "{\"tag\":\"lro-quiet\"}");
    drop(&out);
    n = progress_events("lro-quiet", 0.5, 0);
    CHECK(n == 0, "without progress:true, no progress event (got %d)", n);

    /* A 2 s operation reporting every 250 ms outlives a 1 s timeout only when progress resets it. */
    t0 = now_s();
    out = call_ok("trigger-long-running-operation", "{\"duration\":2,\"steps\":8}",
                  "{\"progress\":true,\"tag\":\"lro-reset\",\"timeout_ms\":1000,\"reset_timeout_on_progress\":true}");
    CHECK_OUT(contains(out, "Steps: 8."), out, "with reset_timeout_on_progress, a 2 s call under a 1 s timeout completes (%.2f s)",
              now_s() - t0);
    drop(&out);
    n = progress_events("lro-reset", bound_s(2.0), 8);
    CHECK(n == 8, "... and its 8 progress events arrived with its tag (got %d)", n);
    {
        mcplug_status st;
        out = NULL;
        t0 = now_s();
        st = mcplug_client_call_tool(c, "trigger-long-running-operation", "{\"duration\":2,\"steps\":8}",
                                     "{\"progress\":true,\"timeout_ms\":1000}", &out);
        CHECK_STATUS(st, MCPLUG_TIMEOUT, out, "without the reset, the same call times out (got %s)", status_name(st));
        CHECK_OUT(is_error(out, "timeout", NULL) && now_s() - t0 < bound_s(1.9), out, "... kind timeout, after %.2f s",
                  now_s() - t0);
        drop(&out);
        t0 = now_s();
        st = mcplug_client_call_tool(c, "trigger-long-running-operation", "{\"duration\":2,\"steps\":8}",
                                     "{\"progress\":true,\"timeout_ms\":1000,\"reset_timeout_on_progress\":true,"
                                     "\"max_total_timeout_ms\":1200}",
                                     &out);
        CHECK_STATUS(st, MCPLUG_TIMEOUT, out, "with the reset but max_total_timeout_ms 1200, it times out (got %s)",
                     status_name(st));
        CHECK_OUT(now_s() - t0 > 1.1 && now_s() - t0 < bound_s(1.9), out, "... after %.2f s", now_s() - t0);
        drop(&out);
    }
}

static void logging(void) {
    char *out, *ev;
    out = call_ok("toggle-simulated-logging", NULL, NULL);
    CHECK_OUT(contains(out, "\"text\":\"Started simulated, random-leveled logging"), out, "toggle-simulated-logging starts logging");
    drop(&out);
    /* One message at once, then one every 5 s. */
    ev = wait_event(c, 8.0, "\"method\":\"notifications/message\"", NULL);
    CHECK_OUT(ev != NULL, ev, "a notifications/message event arrived");
    CHECK_OUT(contains(ev, "\"type\":\"notification\"") && contains(ev, "\"level\":\"") &&
                  (contains(ev, "-level message") || contains(ev, "level-message")),
              ev, "... a notification with params.level and the server's message text");
    mcplug_string_free(ev);
    out = call_ok("toggle-simulated-logging", NULL, NULL);
    CHECK_OUT(contains(out, "\"text\":\"Stopped simulated logging"), out, "toggle-simulated-logging again stops it");
    drop(&out);
    out = request_ok("logging/setLevel", "{\"level\":\"error\"}", NULL);
    CHECK_OUT(strcmp(out, "{}") == 0, out, "logging/setLevel error -> {}");
    drop(&out);
}

int main(void) {
    char server[4096];
    double t0;
    test_init();
    if (getenv("MCPLUG_EVERYTHING_URL") != NULL) {
        /* The HTTP peer was started with MCPLUG_TEST_MARKER=marker-42 in its environment. */
        snprintf(server, sizeof server, "{\"name\":\"everything\",\"type\":\"%s\",\"url\":\"%s\"}",
                 peer("MCPLUG_EVERYTHING_TYPE"), peer("MCPLUG_EVERYTHING_URL"));
        printf("# over %s: %s\n", peer("MCPLUG_EVERYTHING_TYPE"), peer("MCPLUG_EVERYTHING_URL"));
    } else {
        server_json(server, sizeof server, "\"name\":\"everything\",\"env\":{\"MCPLUG_TEST_MARKER\":\"marker-42\"}",
                    peer("MCPLUG_NODE"), peer("MCPLUG_EVERYTHING"), (const char *)NULL);
    }
    handshake(server);
    tool_list();
    tools();
    generic_requests();
    progress();
    logging();
    t0 = now_s();
    mcplug_client_free(c);
    CHECK(now_s() - t0 < bound_s(3.0), "mcplug_client_free returned in %.2f s", now_s() - t0);
    return finish("everything");
}
