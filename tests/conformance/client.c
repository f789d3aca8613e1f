/* mcplug's conformance client for the C ABI.
 *
 * Run by @modelcontextprotocol/conformance (tests/conformance/run.sh builds it against the
 * library): the scenario's name is in MCP_CONFORMANCE_SCENARIO, the scenario server's URL is the
 * last argument, and MCP_CONFORMANCE_CONTEXT carries a scenario's extra data. It does what the
 * scenario asks through include/mcplug.h and exits 0; an error exits 1 with the library's error
 * JSON on stderr. client.py and client.js dispatch the same way: a scenario must pass (or fail)
 * alike through all three.
 *
 * The JSON the library returns is read with a small span scanner below (no JSON library: the
 * client needs only to find a member and to walk an array, and copies values verbatim). */
#define _POSIX_C_SOURCE 200809L

#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mcplug.h"
#include "../c/http_get.h"

static const char *scenario = "";

static void logf_(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[client.c] ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

/* Fails the scenario with the library's error. */
static void die(const char *what, enum mcplug_status st, char *out) {
    logf_("%s: %s failed (status %d): %s", scenario, what, (int)st, out ? out : "(null)");
    mcplug_string_free(out);
    exit(1);
}

/* ---- a JSON span scanner: values are (pointer, length) into the library's text ---- */

typedef struct {
    const char *p;
    size_t n;
} span;

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

/* The end of the JSON value starting at p (which must be valid JSON from the library). */
static const char *value_end(const char *p) {
    p = skip_ws(p);
    if (*p == '"') {
        for (p++; *p && *p != '"'; p++)
            if (*p == '\\' && p[1]) p++;
        return *p ? p + 1 : p;
    }
    if (*p == '{' || *p == '[') {
        int depth = 0;
        for (; *p; p++) {
            if (*p == '"') {
                p = value_end(p) - 1;
            } else if (*p == '{' || *p == '[') {
                depth++;
            } else if (*p == '}' || *p == ']') {
                if (--depth == 0) return p + 1;
            }
        }
        return p;
    }
    while (*p && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n') p++;
    return p;
}

/* The member `key` of the object `obj` (a key without escapes), or {NULL, 0}. */
static span member(span obj, const char *key) {
    span none = {NULL, 0};
    if (obj.p == NULL) return none;
    const char *p = skip_ws(obj.p);
    if (*p != '{') return none;
    p = skip_ws(p + 1);
    size_t klen = strlen(key);
    while (*p == '"') {
        const char *kend = value_end(p);
        int match = (size_t)(kend - p) == klen + 2 && strncmp(p + 1, key, klen) == 0;
        p = skip_ws(kend);
        if (*p != ':') return none;
        const char *v = skip_ws(p + 1);
        const char *vend = value_end(v);
        if (match) return (span){v, (size_t)(vend - v)};
        p = skip_ws(vend);
        if (*p != ',') return none;
        p = skip_ws(p + 1);
    }
    return none;
}

/* Walks an array: `*it` starts NULL; returns 0 after the last element. */
static int next_item(span arr, const char **it, span *item) {
    const char *p = *it ? *it : skip_ws(arr.p) + 1;
    p = skip_ws(p);
    if (*p == ',') p = skip_ws(p + 1);
    if (arr.p == NULL || *p == ']' || *p == '\0' || p >= arr.p + arr.n) return 0;
    const char *end = value_end(p);
    *item = (span){p, (size_t)(end - p)};
    *it = end;
    return 1;
}

static char *dup_span(span s) {
    char *c = malloc(s.n + 1);
    if (c == NULL) abort();
    memcpy(c, s.p, s.n);
    c[s.n] = '\0';
    return c;
}

/* A string member's value (no escapes are decoded: names and URIs are passed back as JSON). */
static char *string_member(span obj, const char *key) {
    span v = member(obj, key);
    if (v.p == NULL || *v.p != '"') return NULL;
    return dup_span((span){v.p + 1, v.n - 2});
}

static int span_is(span s, const char *text) { return s.p && s.n == strlen(text) && strncmp(s.p, text, s.n) == 0; }

static span whole(const char *s) { return (span){s, strlen(s)}; }

/* ---- the library ---- */

static mcplug_client *connect_to(const char *url, const char *options) {
    char server[2048];
    snprintf(server, sizeof server, "{\"type\":\"http\",\"url\":\"%s\"}", url);
    mcplug_client *client = NULL;
    char *out = NULL;
    enum mcplug_status st = mcplug_client_connect(server, options, &client, &out);
    if (st != MCPLUG_OK) die("connect", st, out);
    logf_("connected: %s", out);
    mcplug_string_free(out);
    return client;
}

static const char *DEFAULT_OPTIONS =
    "{\"connect_timeout_ms\":20000,\"request_timeout_ms\":20000,\"tool_timeout_ms\":20000}";

/* tools/list, all pages: the caller frees the result. */
static char *list_tools(mcplug_client *c) {
    char *out = NULL;
    enum mcplug_status st = mcplug_client_list_tools(c, NULL, &out);
    if (st != MCPLUG_OK) die("tools/list", st, out);
    return out;
}

static char *request(mcplug_client *c, const char *method, const char *params, const char *options) {
    char *out = NULL;
    enum mcplug_status st = mcplug_client_request(c, method, params, options, &out);
    if (st != MCPLUG_OK) die(method, st, out);
    return out;
}

/* A tool call; `elicit` (or NULL) is the result given to each elicitation the call needs. The
 * call is started, and the events are served here until it completes (no thread needed). */
static void call_tool(mcplug_client *c, const char *name, const char *args, const char *elicit) {
    char *out = NULL;
    uint64_t call = 0;
    enum mcplug_status st = mcplug_client_call_tool_start(c, name, args, NULL, &call, &out);
    if (st != MCPLUG_OK) die(name, st, out);
    for (;;) {
        st = mcplug_client_next_event(c, 30000, &out);
        if (st != MCPLUG_OK) die("next_event", st, out);
        span ev = whole(out);
        span type = member(ev, "type");
        if (span_is(type, "\"request\"")) {
            span id = member(ev, "id");
            span method = member(ev, "method");
            char resp[1024];
            if (elicit != NULL && span_is(method, "\"elicitation/create\"")) {
                snprintf(resp, sizeof resp, "{\"id\":%.*s,\"result\":%s}", (int)id.n, id.p, elicit);
            } else {
                snprintf(resp, sizeof resp,
                         "{\"id\":%.*s,\"error\":{\"code\":-32601,\"message\":\"not served\"}}",
                         (int)id.n, id.p);
            }
            char *rout = NULL;
            enum mcplug_status rs = mcplug_client_respond(c, resp, &rout);
            if (rs != MCPLUG_OK) die("respond", rs, rout);
            mcplug_string_free(rout);
        } else if (span_is(type, "\"completion\"")) {
            span err = member(ev, "error");
            if (err.p != NULL) {
                logf_("%s: %s failed: %s", scenario, name, out);
                exit(1);
            }
            logf_("%s -> %s", name, out);
            mcplug_string_free(out);
            return;
        }
        mcplug_string_free(out);
    }
}

static void close_client(mcplug_client *c) {
    char *out = NULL;
    enum mcplug_status st = mcplug_client_close(c, &out);
    mcplug_string_free(out);
    mcplug_client_free(c);
    if (st != MCPLUG_OK) die("close", st, NULL);
}

/* ---- scenarios ---- */

/* initialize, tools_call: list the tools, call the first with the numbers it adds. */
static void basic(const char *url) {
    mcplug_client *c = connect_to(url, DEFAULT_OPTIONS);
    char *tools = list_tools(c);
    const char *it = NULL;
    span tool;
    if (next_item(member(whole(tools), "tools"), &it, &tool)) {
        char *name = string_member(tool, "name");
        call_tool(c, name, "{\"a\":2,\"b\":3}", NULL);
        free(name);
    }
    mcplug_string_free(tools);
    close_client(c);
}

/* json-schema-ref-no-deref: the schema's network $ref must not be fetched. */
static void list_only(const char *url) {
    mcplug_client *c = connect_to(url, DEFAULT_OPTIONS);
    mcplug_string_free(list_tools(c));
    close_client(c);
}

/* json-schema-2020-12-preservation: echo the focal tool's inputSchema back, untouched. */
static void schema_preservation(const char *url) {
    mcplug_client *c = connect_to(url, DEFAULT_OPTIONS);
    char *tools = list_tools(c);
    const char *it = NULL;
    span tool;
    int found = 0;
    while (next_item(member(whole(tools), "tools"), &it, &tool)) {
        if (!span_is(member(tool, "name"), "\"json_schema_2020_12_tool\"")) continue;
        span schema = member(tool, "inputSchema");
        size_t n = schema.n + 16;
        char *args = malloc(n);
        if (args == NULL) abort();
        snprintf(args, n, "{\"schema\":%.*s}", (int)schema.n, schema.p);
        call_tool(c, "json_schema_echo", args, NULL);
        free(args);
        found = 1;
    }
    mcplug_string_free(tools);
    close_client(c);
    if (!found) {
        logf_("json_schema_2020_12_tool was not listed");
        exit(1);
    }
}

/* Lists the tools and calls each with no arguments, answering elicitations with `elicit`. */
static void call_every_tool(const char *url, const char *options, const char *elicit) {
    mcplug_client *c = connect_to(url, options);
    char *tools = list_tools(c);
    const char *it = NULL;
    span tool;
    while (next_item(member(whole(tools), "tools"), &it, &tool)) {
        char *name = string_member(tool, "name");
        call_tool(c, name, "{}", elicit);
        free(name);
    }
    mcplug_string_free(tools);
    close_client(c);
}

/* request-metadata (2026-07-28): every request carries the version header and _meta; the
 * client declares roots, sampling and elicitation so that their declarations are checked. */
static void request_metadata(const char *url) {
    mcplug_client *c = connect_to(
        url, "{\"connect_timeout_ms\":20000,\"request_timeout_ms\":20000,"
             "\"roots\":[{\"uri\":\"file:///tmp\",\"name\":\"tmp\"}],"
             "\"capabilities\":{\"sampling\":{},\"elicitation\":{}}}");
    mcplug_string_free(list_tools(c));
    close_client(c);
}

/* sep-2322: InputRequiredResult rounds, resolved inside the call by the library. */
static void request_state(const char *url) {
    static const char *const names[] = {"test_mrtr_echo_state", "test_mrtr_unrelated",
                                        "test_mrtr_no_state", "test_mrtr_no_result_type"};
    mcplug_client *c = connect_to(
        url, "{\"connect_timeout_ms\":20000,\"request_timeout_ms\":20000,"
             "\"capabilities\":{\"elicitation\":{}}}");
    mcplug_string_free(list_tools(c));
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        call_tool(c, names[i], "{}", "{\"action\":\"accept\",\"content\":{\"confirmed\":true}}");
    close_client(c);
}

/* http-standard-headers: one of each request that carries Mcp-Method / Mcp-Name. */
static void standard_headers(const char *url) {
    mcplug_client *c = connect_to(url, DEFAULT_OPTIONS);
    char *tools = list_tools(c);
    const char *it = NULL;
    span item;
    while (next_item(member(whole(tools), "tools"), &it, &item)) {
        char *name = string_member(item, "name");
        call_tool(c, name, "{}", NULL);
        free(name);
    }
    mcplug_string_free(tools);

    char *resources = request(c, "resources/list", NULL, "{\"all_pages\":true}");
    for (it = NULL; next_item(member(whole(resources), "resources"), &it, &item);) {
        span uri = member(item, "uri");
        char params[2048];
        snprintf(params, sizeof params, "{\"uri\":%.*s}", (int)uri.n, uri.p);
        mcplug_string_free(request(c, "resources/read", params, NULL));
    }
    mcplug_string_free(resources);

    char *prompts = request(c, "prompts/list", NULL, "{\"all_pages\":true}");
    for (it = NULL; next_item(member(whole(prompts), "prompts"), &it, &item);) {
        span name = member(item, "name");
        char params[2048];
        snprintf(params, sizeof params, "{\"name\":%.*s}", (int)name.n, name.p);
        mcplug_string_free(request(c, "prompts/get", params, NULL));
    }
    mcplug_string_free(prompts);
    close_client(c);
}

/* http-custom-headers: the calls the scenario's context names (x-mcp-header arguments). */
static void custom_headers(const char *url) {
    const char *ctx = getenv("MCP_CONFORMANCE_CONTEXT");
    if (ctx == NULL) {
        logf_("MCP_CONFORMANCE_CONTEXT is not set");
        exit(1);
    }
    mcplug_client *c = connect_to(url, DEFAULT_OPTIONS);
    mcplug_string_free(list_tools(c));
    const char *it = NULL;
    span call;
    while (next_item(member(whole(ctx), "toolCalls"), &it, &call)) {
        char *name = string_member(call, "name");
        char *args = dup_span(member(call, "arguments"));
        call_tool(c, name, args, NULL);
        free(args);
        free(name);
    }
    close_client(c);
}

/* A sample value of a property's type, as JSON. */
static const char *sample_value(span schema) {
    span type = member(schema, "type");
    if (span_is(type, "\"integer\"")) return "1";
    if (span_is(type, "\"number\"")) return "1.5";
    if (span_is(type, "\"boolean\"")) return "true";
    if (span_is(type, "\"object\"")) return "{}";
    if (span_is(type, "\"array\"")) return "[]";
    if (span_is(type, "\"null\"")) return "null";
    return "\"x\"";
}

/* http-invalid-tool-headers: call every tool the library kept; invalid ones must be gone. */
static void invalid_tool_headers(const char *url) {
    mcplug_client *c = connect_to(url, DEFAULT_OPTIONS);
    char *tools = list_tools(c);
    const char *it = NULL;
    span tool;
    while (next_item(member(whole(tools), "tools"), &it, &tool)) {
        char *name = string_member(tool, "name");
        span schema = member(tool, "inputSchema");
        span props = member(schema, "properties");
        char args[4096] = "{";
        size_t used = 1;
        const char *rit = NULL;
        span req;
        while (used < sizeof args - 64 && next_item(member(schema, "required"), &rit, &req)) {
            char *key = dup_span((span){req.p + 1, req.n - 2});
            used += (size_t)snprintf(args + used, sizeof args - used, "%s%.*s:%s",
                                     used > 1 ? "," : "", (int)req.n, req.p,
                                     sample_value(member(props, key)));
            free(key);
        }
        snprintf(args + used, sizeof args - used, "}");
        char *out = NULL;
        enum mcplug_status st = mcplug_client_call_tool(c, name, args, NULL, &out);
        logf_("%s %s -> %s", name, st == MCPLUG_OK ? "called" : "refused", out);
        mcplug_string_free(out);
        free(name);
    }
    mcplug_string_free(tools);
    close_client(c);
}

/* sep-2640-*: the skills extension, as a host uses it. The skills are listed (no file may be
 * fetched then: sep-2640-client-no-prefetch); with `load`, each skill is loaded — the library
 * reads its SKILL.md and verifies it (size, digest, frontmatter) against the listed entry — and
 * then each of its other files is read, verified the same way. A skill that fails verification
 * is refused by the library, so its files are never read (the verify-* scenarios check that). */
static void skills(const char *url, int load) {
    mcplug_client *c = connect_to(url, DEFAULT_OPTIONS);
    char *list = NULL;
    enum mcplug_status st = mcplug_client_list_skills(c, NULL, &list);
    if (st != MCPLUG_OK) die("skills/list", st, list);
    logf_("skills: %s", list);
    const char *it = NULL;
    span entry;
    while (load && next_item(member(whole(list), "skills"), &it, &entry)) {
        char *uri = string_member(entry, "uri");
        char *loaded = NULL;
        st = mcplug_client_load_skill(c, uri, NULL, &loaded);
        if (st == MCPLUG_INVALID_RESULT) {
            logf_("%s refused: %s", uri, loaded);
        } else if (st != MCPLUG_OK) {
            die("load_skill", st, loaded);
        } else {
            logf_("%s loaded: %s", uri, loaded);
            const char *fit = NULL;
            span file;
            while (next_item(member(whole(loaded), "files"), &fit, &file)) {
                char *furi = dup_span((span){file.p + 1, file.n - 2});
                if (strcmp(furi, uri) != 0) {
                    char *read = NULL;
                    st = mcplug_client_read_skill_file(c, uri, furi, NULL, &read);
                    if (st == MCPLUG_INVALID_RESULT) {
                        logf_("%s refused: %s", furi, read);
                    } else if (st != MCPLUG_OK) {
                        die("read_skill_file", st, read);
                    } else {
                        logf_("%s read: %s", furi, read);
                    }
                    mcplug_string_free(read);
                }
                free(furi);
            }
        }
        mcplug_string_free(loaded);
        free(uri);
    }
    mcplug_string_free(list);
    close_client(c);
}

/* ---- auth scenarios: OAuth through the library, with a headless follower ---- */

/* The follower: answers every auth/authorize with the redirect's URL as callback_url. */
static void *follow(void *arg) {
    (void)arg;
    for (;;) {
        char *ev = NULL;
        enum mcplug_status st = mcplug_auth_next_event(-1, &ev);
        if (st != MCPLUG_OK) {
            mcplug_string_free(ev);
            continue;
        }
        span e = whole(ev);
        if (span_is(member(e, "method"), "\"auth/authorize\"")) {
            span id = member(e, "id");
            char *url = string_member(member(e, "params"), "url");
            char *loc = url ? location_of(url) : NULL;
            logf_("authorize: %s -> %s", url ? url : "?", loc ? loc : "(no Location)");
            size_t n = (loc ? 2 * strlen(loc) : 0) + 256;
            char *resp = malloc(n);
            if (resp == NULL) abort();
            if (loc) {
                size_t used = (size_t)snprintf(resp, n, "{\"id\":%.*s,\"result\":{\"callback_url\":\"", (int)id.n, id.p);
                for (const char *c = loc; *c; c++) {
                    if (*c == '"' || *c == '\\') resp[used++] = '\\';
                    resp[used++] = *c;
                }
                snprintf(resp + used, n - used, "\"}}");
            } else {
                snprintf(resp, n, "{\"id\":%.*s,\"error\":{\"code\":-1,\"message\":\"no redirect\"}}", (int)id.n, id.p);
            }
            char *out = NULL;
            mcplug_auth_respond(resp, &out);
            mcplug_string_free(out);
            free(resp);
            free(url);
            free(loc);
        }
        mcplug_string_free(ev);
    }
    return NULL;
}

/* Appends `"key":<the context's member>` (copied as JSON) when the context has it. */
static size_t put(char *buf, size_t used, size_t cap, const char *key, span ctx, const char *field) {
    span v = member(ctx, field);
    if (v.p == NULL) return used;
    return used + (size_t)snprintf(buf + used, cap - used, ",\"%s\":%.*s", key, (int)v.n, v.p);
}

/* The server entry of an auth scenario: its `oauth` from the scenario and its context. */
static char *auth_entry(const char *url) {
    const char *ctx_text = getenv("MCP_CONFORMANCE_CONTEXT");
    span ctx = whole(ctx_text ? ctx_text : "{}");
    size_t cap = strlen(url) + (ctx_text ? 2 * strlen(ctx_text) : 0) + 1024;
    char *buf = malloc(cap);
    if (buf == NULL) abort();
    size_t used = (size_t)snprintf(buf, cap,
        "{\"type\":\"http\",\"url\":\"%s\",\"oauth\":{"
        "\"clientMetadataUrl\":\"https://conformance-test.local/client-metadata.json\"", url);
    if (strstr(scenario, "client-credentials")) {
        used += (size_t)snprintf(buf + used, cap - used, ",\"grant\":\"client_credentials\"");
        used = put(buf, used, cap, "privateKey", ctx, "private_key_pem");
        used = put(buf, used, cap, "signingAlgorithm", ctx, "signing_algorithm");
        used = put(buf, used, cap, "clientSecret", ctx, "client_secret");
        used = put(buf, used, cap, "clientId", ctx, "client_id");
    } else if (strstr(scenario, "wif")) {
        used += (size_t)snprintf(buf + used, cap - used, ",\"grant\":\"jwt_bearer\"");
        used = put(buf, used, cap, "assertion", ctx, "valid_jwt");
        used = put(buf, used, cap, "clientId", ctx, "client_id");
    } else if (member(ctx, "idp_id_token").p != NULL) {
        used += (size_t)snprintf(buf + used, cap - used, ",\"grant\":\"enterprise\",\"enterprise\":{\"x\":0");
        used = put(buf, used, cap, "idpClientId", ctx, "idp_client_id");
        used = put(buf, used, cap, "idToken", ctx, "idp_id_token");
        used = put(buf, used, cap, "idpIssuer", ctx, "idp_issuer");
        used = put(buf, used, cap, "idpTokenEndpoint", ctx, "idp_token_endpoint");
        used += (size_t)snprintf(buf + used, cap - used, "}");
        used = put(buf, used, cap, "clientId", ctx, "client_id");
        used = put(buf, used, cap, "clientSecret", ctx, "client_secret");
    } else {
        used = put(buf, used, cap, "clientId", ctx, "client_id");
        used = put(buf, used, cap, "clientSecret", ctx, "client_secret");
        used = put(buf, used, cap, "issuer", ctx, "issuer");
    }
    snprintf(buf + used, cap - used, "}}");
    return buf;
}

/* auth scenarios: connect (the library authorizes on the first 401, the follower answers the host's
 * part), list the tools, call test-tool. */
static void auth_flow(const char *url) {
    pthread_t t;
    if (pthread_create(&t, NULL, follow, NULL) != 0) abort();
    pthread_detach(t);
    char *server = auth_entry(url);
    mcplug_client *c = NULL;
    char *out = NULL;
    enum mcplug_status st = mcplug_client_connect(
        server,
        "{\"connect_timeout_ms\":20000,\"request_timeout_ms\":20000,\"tool_timeout_ms\":20000,"
        "\"auth_interactive\":true,\"auth_store\":\"memory\",\"auth_timeout_ms\":20000}",
        &c, &out);
    free(server);
    if (st != MCPLUG_OK) die("connect", st, out);
    logf_("connected: %s", out);
    mcplug_string_free(out);
    mcplug_string_free(list_tools(c));
    call_tool(c, "test-tool", "{}", NULL);
    close_client(c);
}

int main(int argc, char **argv) {
    const char *name = getenv("MCP_CONFORMANCE_SCENARIO");
    if (name == NULL || argc < 2) {
        logf_("usage: MCP_CONFORMANCE_SCENARIO=<name> client <server-url>");
        return 1;
    }
    scenario = name;
    const char *url = argv[argc - 1];
    if (strcmp(name, "initialize") == 0 || strcmp(name, "tools_call") == 0) {
        basic(url);
    } else if (strcmp(name, "json-schema-ref-no-deref") == 0) {
        list_only(url);
    } else if (strcmp(name, "json-schema-2020-12-preservation") == 0) {
        schema_preservation(url);
    } else if (strcmp(name, "elicitation-sep1034-client-defaults") == 0) {
        call_every_tool(url,
                        "{\"connect_timeout_ms\":20000,\"request_timeout_ms\":20000,"
                        "\"capabilities\":{\"elicitation\":{}},\"elicitation_defaults\":true}",
                        "{\"action\":\"accept\",\"content\":{}}");
    } else if (strcmp(name, "sse-retry") == 0) {
        call_every_tool(url, DEFAULT_OPTIONS, NULL);
    } else if (strcmp(name, "request-metadata") == 0) {
        request_metadata(url);
    } else if (strcmp(name, "sep-2322-client-request-state") == 0) {
        request_state(url);
    } else if (strcmp(name, "http-standard-headers") == 0) {
        standard_headers(url);
    } else if (strcmp(name, "http-custom-headers") == 0) {
        custom_headers(url);
    } else if (strcmp(name, "http-invalid-tool-headers") == 0) {
        invalid_tool_headers(url);
    } else if (strcmp(name, "sep-2640-client-no-prefetch") == 0) {
        skills(url, 0);
    } else if (strncmp(name, "sep-2640-", 9) == 0) {
        skills(url, 1);
    } else if (strncmp(name, "auth/", 5) == 0) {
        auth_flow(url);
    } else {
        logf_("unknown scenario '%s'", name);
        return 1;
    }
    return 0;
}
