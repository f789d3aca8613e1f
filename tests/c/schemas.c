/* Output schemas and argument validation through the C ABI, against real peers:
 * - tests/servers/modern_server.py (the Python SDK's MCPServer), in the 2026-07-28 era and held
 *   to the legacy one: `forecast` matches its outputSchema, `misreport` breaks it
 *   (MCPLUG_INVALID_RESULT with the validator's message, path and the untouched result), an
 *   isError result is not checked, `unschemable` declares a schema that does not compile (a
 *   warning event, the call unchecked), and `validate_arguments` stops bad arguments before
 *   anything is sent (the server's own call log shows it);
 * - server-everything: `get-structured-content` matches its outputSchema;
 * - the fault server: a missing structuredContent, an isError result, and
 *   notifications/tools/list_changed forgetting the schemas until the next list. */
#include "check.h"

static char *call(mcplug_client *c, const char *name, const char *args, const char *options, mcplug_status *st) {
    char *out = NULL;
    *st = mcplug_client_call_tool(c, name, args, options, &out);
    return out;
}

static void list_tools(mcplug_client *c, const char *what) {
    char *out = NULL;
    mcplug_status st = mcplug_client_list_tools(c, NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "list_tools (%s) -> OK (got %s)", what, status_name(st));
    drop(&out);
}

static void sdk_server(const char *server, const char *options, const char *era) {
    char *out = NULL;
    mcplug_status st;
    mcplug_client *c = connect_or_die(server, options, era);

    /* Before any tools/list the client knows no schema: nothing is checked, and no hidden
     * tools/list is sent for it. */
    out = call(c, "misreport", "{\"city\":\"Oslo\"}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_OK, out, "[%s] misreport before any list -> OK, unchecked (got %s)", era, status_name(st));
    drop(&out);

    list_tools(c, era);

    out = call(c, "forecast", "{\"city\":\"Oslo\"}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_OK, out, "[%s] forecast matches its outputSchema -> OK (got %s)", era, status_name(st));
    CHECK_OUT(contains(out, "\"structuredContent\":{\"temperature\":21.5,\"sky\":\"clear over Oslo\"}"), out,
              "[%s] ... the result untouched", era);
    drop(&out);

    out = call(c, "misreport", "{\"city\":\"Oslo\"}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_INVALID_RESULT, out, "[%s] misreport breaks its outputSchema -> INVALID_RESULT (got %s)", era,
                 status_name(st));
    CHECK_OUT(is_error(out, "invalid_result", "misreport"), out, "[%s] ... kind invalid_result, naming the tool", era);
    CHECK_OUT(contains(out, "at /temperature") && contains(out, "is not of type \\\"number\\\""), out,
              "[%s] ... the message says where and why", era);
    CHECK_OUT(contains(out, "\"instance_path\":\"/temperature\"") && contains(out, "\"schema_path\":\"/properties/temperature/type\""),
              out, "[%s] ... data.errors has the instance and schema paths", era);
    CHECK_OUT(contains(out, "\"result\":{") && contains(out, "\"text\":\"Oslo: hot\""), out,
              "[%s] ... data.result is the server's result", era);
    drop(&out);

    out = call(c, "misreport", "{\"city\":\"Oslo\",\"fail\":true}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_OK, out, "[%s] an isError result is not checked -> OK (got %s)", era, status_name(st));
    CHECK_OUT(contains(out, "\"isError\":true"), out, "[%s] ... and comes back as it is", era);
    drop(&out);

    /* The generic request checks tools/call the same way. */
    st = mcplug_client_request(c, "tools/call", "{\"name\":\"misreport\",\"arguments\":{\"city\":\"Oslo\"}}", NULL, &out);
    CHECK_STATUS(st, MCPLUG_INVALID_RESULT, out, "[%s] request(\"tools/call\") of misreport -> INVALID_RESULT (got %s)", era,
                 status_name(st));
    drop(&out);

    /* A schema that does not compile: one warning event, and the tool works unchecked. */
    out = wait_event(c, bound_s(5.0), "\"type\":\"warning\"", "\"tool\":\"unschemable\"");
    CHECK_OUT(out != NULL && contains(out, "\"reason\":\"invalid_schema\"") && contains(out, "\"schema\":\"outputSchema\""), out,
              "[%s] the schema that does not compile gave a warning event", era);
    drop(&out);
    out = call(c, "unschemable", "{}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_OK, out, "[%s] unschemable is called without a check -> OK (got %s)", era, status_name(st));
    drop(&out);

    /* Arguments: checked only when asked, and then nothing is sent. */
    out = call(c, "add", "{\"a\":\"two\",\"b\":3}", "{\"validate_arguments\":true}", &st);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "[%s] add {a:\"two\"} with validate_arguments -> INVALID_ARGUMENT (got %s)",
                 era, status_name(st));
    CHECK_OUT(is_error(out, "invalid_argument", "inputSchema") && contains(out, "at /a"), out,
              "[%s] ... naming the inputSchema and the place", era);
    drop(&out);
    out = call(c, "calls", "{}", NULL, &st);
    CHECK_OUT(st == MCPLUG_OK && !contains(out, "add"), out, "[%s] ... and the server never saw that call", era);
    drop(&out);
    out = call(c, "add", "{\"a\":\"two\",\"b\":3}", NULL, &st);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"isError\":true"), out,
              "[%s] without the option the server gets it (and answers isError) (%s)", era, status_name(st));
    drop(&out);
    out = call(c, "add", "{\"a\":2,\"b\":3}", "{\"validate_arguments\":true}", &st);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"structuredContent\":{\"result\":5}"), out,
              "[%s] good arguments with validate_arguments -> OK, and the result matches add's outputSchema", era);
    drop(&out);

    mcplug_client_free(c);
}

static void connect_default_validates_arguments(const char *server) {
    char *out = NULL;
    mcplug_status st;
    mcplug_client *c = connect_or_die(server, "{\"validate_arguments\":true}", "the SDK server, validate_arguments");
    list_tools(c, "validate_arguments");
    out = call(c, "echo", "{\"message\":7}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "the connect option validate_arguments applies to every call (got %s)",
                 status_name(st));
    drop(&out);
    out = call(c, "echo", "{\"message\":7}", "{\"validate_arguments\":false}", &st);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"isError\":true"), out, "... and a call can turn it off (%s)", status_name(st));
    drop(&out);
    mcplug_client_free(c);
}

static void everything(void) {
    char server[4096];
    char *out = NULL;
    mcplug_status st;
    server_json(server, sizeof server, NULL, peer("MCPLUG_NODE"), peer("MCPLUG_EVERYTHING"), (const char *)NULL);
    mcplug_client *c = connect_or_die(server, NULL, "server-everything");
    list_tools(c, "server-everything");
    out = call(c, "get-structured-content", "{\"location\":\"Chicago\"}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_OK, out, "server-everything get-structured-content matches its outputSchema -> OK (got %s)",
                 status_name(st));
    CHECK_OUT(contains(out, "\"structuredContent\":{\"temperature\":36"), out, "... with its structuredContent");
    drop(&out);
    out = call(c, "get-structured-content", "{\"location\":\"Paris\"}", "{\"validate_arguments\":true}", &st);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "a location outside its enum with validate_arguments -> INVALID_ARGUMENT (got %s)",
                 status_name(st));
    CHECK_OUT(contains(out, "at /location"), out, "... at /location");
    drop(&out);
    mcplug_client_free(c);
}

static void fault_server(void) {
    char server[4096];
    char *out = NULL;
    mcplug_status st;
    fault_server_json(server, sizeof server, "normal");
    mcplug_client *c = connect_or_die(server, NULL, "the fault server");
    list_tools(c, "fault server");

    out = call(c, "weather", "{\"mode\":\"ok\"}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_OK, out, "weather ok -> OK (got %s)", status_name(st));
    drop(&out);
    out = call(c, "weather", "{\"mode\":\"missing\"}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_INVALID_RESULT, out, "an outputSchema but no structuredContent -> INVALID_RESULT (got %s)",
                 status_name(st));
    CHECK_OUT(is_error(out, "invalid_result", "no structuredContent"), out, "... saying so");
    drop(&out);
    out = call(c, "weather", "{\"mode\":\"error\"}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_OK, out, "isError with structuredContent that breaks the schema -> OK, unchecked (got %s)",
                 status_name(st));
    drop(&out);
    out = call(c, "weather", "{\"mode\":\"bad\"}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_INVALID_RESULT, out, "weather bad -> INVALID_RESULT (got %s)", status_name(st));
    drop(&out);

    /* notifications/tools/list_changed: the schemas are forgotten until the next list. */
    out = call(c, "list_changed", "{}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_OK, out, "list_changed -> OK");
    drop(&out);
    out = call(c, "weather", "{\"mode\":\"bad\"}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_OK, out, "after tools/list_changed, weather bad is not checked -> OK (got %s)", status_name(st));
    drop(&out);
    st = mcplug_client_request(c, "tools/list", NULL, NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "tools/list through request -> OK");
    drop(&out);
    out = call(c, "weather", "{\"mode\":\"bad\"}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_INVALID_RESULT, out, "a tools/list through request teaches the schema again -> INVALID_RESULT (got %s)",
                 status_name(st));
    drop(&out);
    mcplug_client_free(c);
}

int main(void) {
    char server[4096];
    test_init();
    server_json(server, sizeof server, NULL, peer("MCPLUG_PYTHON"), peer("MCPLUG_MODERN_SERVER"), (const char *)NULL);
    sdk_server(server, NULL, "modern");
    sdk_server(server, "{\"protocol_versions\":[\"2025-11-25\"]}", "legacy");
    connect_default_validates_arguments(server);
    everything();
    fault_server();
    return finish("schemas");
}
