/* The remote transports through the C ABI: server-everything over Streamable HTTP and over
 * HTTP+SSE (tools, echo, progress, a sampling request answered by the host, free = close with
 * the session DELETE), the Python SDK's 2026-07-28 server over Streamable HTTP, and the faults of
 * tests/servers/http_fault_server.py (500, refused, a lost session, a cut stream, too slow, too
 * big) — each a clear error or a recovery. tests/c_abi.rs starts the servers on free ports and
 * passes their URLs: MCPLUG_HTTP_URL, MCPLUG_SSE_URL, MCPLUG_MODERN_HTTP_URL, MCPLUG_FAULT_HTTP_URL. */
#include "check.h"

#include <inttypes.h>
#include <pthread.h>

static void remote_json(char *buf, size_t cap, const char *type, const char *url) {
    snprintf(buf, cap, "{\"type\":\"%s\",\"url\":\"%s\",\"headers\":{\"X-Test\":\"c\"}}", type, url);
}

static void everything(const char *type, const char *url) {
    char server[1024], *out = NULL, *ev;
    mcplug_client *c = NULL;
    uint64_t call = 0;
    mcplug_status st;
    remote_json(server, sizeof server, type, url);
    st = mcplug_client_connect(server, "{\"capabilities\":{\"sampling\":{}}}", &c, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "%s: connect to server-everything at %s (got %s)", type, url, status_name(st));
    CHECK_OUT(contains(out, "\"era\":\"legacy\""), out, "%s: the legacy era", type);
    drop(&out);

    st = mcplug_client_list_tools(c, NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "%s: list_tools -> OK", type);
    CHECK_OUT(contains(out, "\"name\":\"echo\"") && contains(out, "\"name\":\"trigger-sampling-request\""), out,
              "%s: lists echo and trigger-sampling-request", type);
    drop(&out);

    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"over the wire\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "Echo: over the wire"), out, "%s: echo answers", type);
    drop(&out);

    st = mcplug_client_call_tool(c, "trigger-long-running-operation", "{\"duration\":1,\"steps\":2}",
                                 "{\"progress\":true,\"tag\":\"lro\"}", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "completed"), out, "%s: a long-running operation completes", type);
    drop(&out);
    ev = wait_event(c, bound_s(2.0), "notifications/progress", "\"tag\":\"lro\"");
    CHECK(ev != NULL, "%s: its progress arrived as events with the call's tag", type);
    mcplug_string_free(ev);

    /* Sampling: start the call, answer the server's request from this thread, take the completion. */
    st = mcplug_client_call_tool_start(c, "trigger-sampling-request", "{\"prompt\":\"hi\",\"maxTokens\":5}", NULL,
                                       &call, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "%s: start trigger-sampling-request", type);
    ev = wait_event(c, bound_s(10.0), "\"type\":\"request\"", "sampling/createMessage");
    CHECK(ev != NULL, "%s: the server's sampling request arrived as an event", type);
    {
        char id[64] = {0}, response[512];
        const char *at = strstr(ev, "\"id\":\"");
        if (at != NULL) sscanf(at + 6, "%63[^\"]", id);
        snprintf(response, sizeof response,
                 "{\"id\":\"%s\",\"result\":{\"role\":\"assistant\",\"model\":\"c-host\",\"content\":{\"type\":\"text\",\"text\":\"from the C host\"}}}",
                 id);
        st = mcplug_client_respond(c, response, &out);
        CHECK_STATUS(st, MCPLUG_OK, out, "%s: respond to %s", type, id);
        drop(&out);
    }
    mcplug_string_free(ev);
    ev = wait_event(c, bound_s(10.0), "\"type\":\"completion\"", "from the C host");
    CHECK(ev != NULL, "%s: the tool's result carries the host's answer", type);
    mcplug_string_free(ev);

    mcplug_client_free(c);
    CHECK(1, "%s: freed", type);
}

static void modern(const char *url) {
    char server[1024], *out = NULL;
    mcplug_client *c = NULL;
    mcplug_status st;
    remote_json(server, sizeof server, "http", url);
    st = mcplug_client_connect(server, NULL, &c, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "modern: connect to %s", url);
    CHECK_OUT(contains(out, "\"era\":\"modern\"") && contains(out, "\"protocol_version\":\"2026-07-28\""), out,
              "modern: the 2026-07-28 era over Streamable HTTP");
    drop(&out);
    st = mcplug_client_call_tool(c, "add", "{\"a\":40,\"b\":2}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"structuredContent\":{\"result\":42}"), out, "modern: add 40+2 is 42");
    drop(&out);
    mcplug_client_free(c);
}

static void faults(const char *base) {
    char server[1024], url[512], *out = NULL;
    mcplug_client *c = NULL;
    mcplug_status st;
    double t0;

    snprintf(url, sizeof url, "%s/always500", base);
    remote_json(server, sizeof server, "http", url);
    st = mcplug_client_connect(server, NULL, &c, &out);
    CHECK_OUT(st == MCPLUG_TRANSPORT && is_error(out, "transport", "500") && contains(out, url), out,
              "HTTP 500 -> TRANSPORT naming the status and the URL (%s)", status_name(st));
    drop(&out);

    remote_json(server, sizeof server, "http", "http://127.0.0.1:9/mcp");
    t0 = now_s();
    st = mcplug_client_connect(server, NULL, &c, &out);
    CHECK_OUT(st == MCPLUG_TRANSPORT && is_error(out, "transport", "127.0.0.1:9"), out,
              "connection refused -> TRANSPORT naming the URL (%s)", status_name(st));
    CHECK(now_s() - t0 < bound_s(5.0), "... at once");
    drop(&out);

    snprintf(url, sizeof url, "%s/mcp", base);
    remote_json(server, sizeof server, "http", url);
    st = mcplug_client_connect(server, "{\"max_message_bytes\":100000}", &c, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "connect to the HTTP fault server");
    drop(&out);

    st = mcplug_client_call_tool(c, "restart", "{}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "restarted"), out, "the server forgets its sessions");
    drop(&out);
    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"new session\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "Echo: new session"), out, "404 on the session -> a new session, the call succeeds");
    drop(&out);

    st = mcplug_client_call_tool(c, "cut_echo", "{\"message\":\"resumed\"}", "{\"timeout_ms\":5000}", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "Echo: resumed"), out, "a stream cut before the answer is resumed with Last-Event-ID");
    drop(&out);

    t0 = now_s();
    st = mcplug_client_call_tool(c, "slow", "{\"ms\":5000}", "{\"timeout_ms\":300}", &out);
    CHECK_OUT(st == MCPLUG_TIMEOUT && now_s() - t0 < bound_s(2.0), out, "slower than the timeout -> TIMEOUT on time (%s)", status_name(st));
    drop(&out);

    st = mcplug_client_call_tool(c, "big", "{\"bytes\":300000}", "{\"timeout_ms\":5000}", &out);
    CHECK_OUT(st == MCPLUG_TRANSPORT && is_error(out, "transport", "max_message_bytes"), out,
              "an answer past max_message_bytes -> TRANSPORT naming the limit (%s)", status_name(st));
    drop(&out);

    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"still here\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "Echo: still here"), out, "the connection still works");
    drop(&out);
    mcplug_client_free(c);
}

/* A host thread with a small stack (koffi runs a Node binding's asynchronous calls on 128 KiB):
 * the HTTP stack's futures must not run on it, nor the connect future sit in its frames. The
 * legacy connect used to POST notifications/initialized with reqwest on the caller's thread and
 * overflowed such a stack. This test links the debug build, whose frames are larger: 192 KiB
 * (it needed 384 before; the release build now connects on 64 KiB). */
struct small_stack_args {
    const char *type, *url;
    int connected, echoed;
};

static void *small_stack_host(void *arg) {
    struct small_stack_args *a = arg;
    char server[1024], *out = NULL;
    mcplug_client *c = NULL;
    remote_json(server, sizeof server, a->type, a->url);
    if (mcplug_client_connect(server, NULL, &c, &out) == MCPLUG_OK) {
        a->connected = 1;
        mcplug_string_free(out);
        out = NULL;
        if (mcplug_client_call_tool(c, "echo", "{\"message\":\"small stack\"}", NULL, &out) == MCPLUG_OK)
            a->echoed = contains(out, "Echo: small stack");
        mcplug_client_free(c);
    }
    mcplug_string_free(out);
    return NULL;
}

static void small_stack(const char *type, const char *url) {
    struct small_stack_args a = {type, url, 0, 0};
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 192 * 1024);
    CHECK(pthread_create(&t, &attr, small_stack_host, &a) == 0, "%s: a host thread with a 192 KiB stack", type);
    pthread_join(t, NULL);
    pthread_attr_destroy(&attr);
    CHECK(a.connected && a.echoed, "%s: connects, calls and closes on that thread (connected %d, echoed %d)", type,
          a.connected, a.echoed);
}

int main(void) {
    test_init();
    small_stack("http", peer("MCPLUG_HTTP_URL"));
    small_stack("sse", peer("MCPLUG_SSE_URL"));
    everything("http", peer("MCPLUG_HTTP_URL"));
    everything("sse", peer("MCPLUG_SSE_URL"));
    modern(peer("MCPLUG_MODERN_HTTP_URL"));
    faults(peer("MCPLUG_FAULT_HTTP_URL"));
    return finish("remote");
}
