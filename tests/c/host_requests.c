/* Everything a server asks of the host, through the C ABI: sampling, elicitation (form and URL,
 * and the -32042 retry), roots (answered by the engine, and set again later), logging at a chosen
 * level, tasks, and channel notifications — against server-everything (the legacy era, where the
 * server sends real requests) and the Python SDK's 2026-07-28 server (tests/servers/
 * modern_server.py, where the same needs come back as InputRequiredResult rounds). One host
 * thread serves both with the same code: it pulls `request` events and answers with
 * mcplug_client_respond. Also: an answer for an unknown id, a capability the host did not declare
 * (legacy: -32601 to the server; modern: the call fails), the round limit, a host that answers
 * with an error, a host that never answers, a cancel while the host holds a request. */
#include "check.h"

#include <pthread.h>

/* ---- the host: one thread per connection that answers every request event ---- */

typedef struct {
    mcplug_client *c;
    pthread_t thread;
    pthread_mutex_t lock;
    char *log;      /* every event pulled, one per line */
    size_t len, cap;
    int requests;   /* request events seen */
    int answered;   /* ... and answered */
    int silent;     /* 1: answer nothing (the host timer / a cancel must end the wait) */
    int sampling_error; /* 1: answer sampling with a JSON-RPC error */
} host_t;

static void host_log(host_t *h, const char *event) {
    size_t n = strlen(event);
    pthread_mutex_lock(&h->lock);
    if (h->len + n + 2 > h->cap) {
        size_t cap = (h->cap + n + 2) * 2;
        char *grown = realloc(h->log, cap);
        if (grown == NULL) abort();
        h->log = grown;
        h->cap = cap;
    }
    memcpy(h->log + h->len, event, n);
    h->len += n;
    h->log[h->len++] = '\n';
    h->log[h->len] = '\0';
    pthread_mutex_unlock(&h->lock);
}

/* The request event's own id ("s12"): the first "id" member, which the engine writes second. */
static void event_id(const char *event, char *id, size_t cap) {
    const char *at = strstr(event, "\"id\":\"");
    size_t n = 0;
    id[0] = '\0';
    if (at == NULL) return;
    at += 6;
    while (at[n] != '"' && at[n] != '\0' && n + 1 < cap) n++;
    memcpy(id, at, n);
    id[n] = '\0';
}

/* The host's answer to one request: what a real host would compute, by what is asked. */
static const char *answer_for(host_t *h, const char *ev, int *is_error) {
    *is_error = 0;
    if (contains(ev, "\"method\":\"sampling/createMessage\"")) {
        if (h->sampling_error) {
            *is_error = 1;
            return "{\"code\":-1,\"message\":\"the user rejected sampling\"}";
        }
        return "{\"role\":\"assistant\",\"content\":{\"type\":\"text\",\"text\":\"pong from C host\"},"
               "\"model\":\"c-host-model\",\"stopReason\":\"endTurn\"}";
    }
    if (contains(ev, "\"method\":\"elicitation/create\"")) {
        if (contains(ev, "\"mode\":\"url\"")) return "{\"action\":\"accept\"}";
        if (contains(ev, "What is your name?")) return "{\"action\":\"accept\",\"content\":{\"name\":\"Ada\"}}";
        if (contains(ev, "Which colour?")) return "{\"action\":\"accept\",\"content\":{\"colour\":\"teal\"}}";
        if (contains(ev, "Confirm?")) return "{\"action\":\"accept\",\"content\":{\"ok\":true}}";
        if (contains(ev, "\"interpretation\"")) return "{\"action\":\"accept\",\"content\":{\"interpretation\":\"programming\"}}";
        if (contains(ev, "async task demo")) return "{\"action\":\"accept\",\"content\":{\"name\":\"Ada\",\"favoriteColor\":\"Blue\"}}";
        /* server-everything's big form: only two fields; the engine fills the schema defaults. */
        return "{\"action\":\"accept\",\"content\":{\"name\":\"Ada Lovelace\",\"check\":true}}";
    }
    if (contains(ev, "\"method\":\"roots/list\""))
        return "{\"roots\":[{\"uri\":\"file:///tmp/from-the-host\",\"name\":\"host\"}]}";
    *is_error = 1;
    return "{\"code\":-32601,\"message\":\"this host does not serve that\"}";
}

static void *host_run(void *arg) {
    host_t *h = arg;
    for (;;) {
        char *ev = NULL;
        mcplug_status st = mcplug_client_next_event(h->c, 200, &ev);
        if (st == MCPLUG_TIMEOUT) {
            mcplug_string_free(ev);
            continue;
        }
        if (st != MCPLUG_OK) {
            mcplug_string_free(ev);
            return NULL;
        }
        host_log(h, ev);
        if (contains(ev, "\"type\":\"request\"")) {
            pthread_mutex_lock(&h->lock);
            h->requests++;
            pthread_mutex_unlock(&h->lock);
            if (!h->silent) {
                char id[64], *response, *out = NULL;
                int is_error;
                const char *answer = answer_for(h, ev, &is_error);
                size_t cap = strlen(answer) + 128;
                event_id(ev, id, sizeof id);
                response = malloc(cap);
                if (response == NULL) abort();
                snprintf(response, cap, "{\"id\":\"%s\",\"%s\":%s}", id, is_error ? "error" : "result", answer);
                if (mcplug_client_respond(h->c, response, &out) == MCPLUG_OK) {
                    pthread_mutex_lock(&h->lock);
                    h->answered++;
                    pthread_mutex_unlock(&h->lock);
                }
                mcplug_string_free(out);
                free(response);
            }
        }
        mcplug_string_free(ev);
    }
}

static void host_start(host_t *h, mcplug_client *c) {
    memset(h, 0, sizeof *h);
    h->c = c;
    pthread_mutex_init(&h->lock, NULL);
    CHECK(pthread_create(&h->thread, NULL, host_run, h) == 0, "the host thread pumps events");
}

/* Close (the pump sees CLOSED), join, free. */
static void host_stop(host_t *h) {
    mcplug_client_close(h->c, NULL);
    pthread_join(h->thread, NULL);
    mcplug_client_free(h->c);
    pthread_mutex_destroy(&h->lock);
    free(h->log);
}

static void host_clear(host_t *h) {
    pthread_mutex_lock(&h->lock);
    h->len = 0;
    if (h->log) h->log[0] = '\0';
    h->requests = h->answered = 0;
    pthread_mutex_unlock(&h->lock);
}

/* Whether some logged event has both needles (needle2 NULL: any). */
static int host_saw(host_t *h, const char *needle1, const char *needle2) {
    int found = 0;
    pthread_mutex_lock(&h->lock);
    if (h->log != NULL) {
        char *line = h->log;
        while (*line && !found) {
            char *end = strchr(line, '\n');
            if (end) *end = '\0';
            found = contains(line, needle1) && (needle2 == NULL || contains(line, needle2));
            if (end) {
                *end = '\n';
                line = end + 1;
            } else {
                break;
            }
        }
    }
    pthread_mutex_unlock(&h->lock);
    return found;
}

static int host_wait(host_t *h, double seconds, const char *needle1, const char *needle2) {
    double until = now_s() + bound_s(seconds);
    while (now_s() < until) {
        if (host_saw(h, needle1, needle2)) return 1;
        sleep_ms(20);
    }
    return host_saw(h, needle1, needle2);
}

static int host_requests(host_t *h) {
    int n;
    pthread_mutex_lock(&h->lock);
    n = h->requests;
    pthread_mutex_unlock(&h->lock);
    return n;
}

/* ---- calls on another thread (for cancels) ---- */

typedef struct {
    mcplug_client *c;
    const char *tool, *args, *options;
    mcplug_status st;
    char *out;
    pthread_t thread;
} bg_call;

static void *bg_run(void *arg) {
    bg_call *b = arg;
    b->st = mcplug_client_call_tool(b->c, b->tool, b->args, b->options, &b->out);
    return NULL;
}

static void cancel_until_found(const char *tag, double seconds) {
    double until = now_s() + bound_s(seconds);
    while (mcplug_cancel(tag) != MCPLUG_OK && now_s() < until) sleep_ms(10);
}

static char *call(mcplug_client *c, const char *tool, const char *args, const char *options, mcplug_status want,
                  const char *what) {
    char *out = NULL;
    mcplug_status st = mcplug_client_call_tool(c, tool, args, options, &out);
    CHECK_STATUS(st, want, out, "%s -> %s (got %s)", what, status_name(want), status_name(st));
    return out;
}

/* ---- server-everything: the legacy era ---- */

static void everything(const char *server) {
    host_t h;
    char *out = NULL;
    mcplug_status st;
    mcplug_client *c = connect_or_die(
        server,
        "{\"capabilities\":{\"sampling\":{},\"elicitation\":{\"form\":{},\"url\":{}}},"
        "\"roots\":[{\"uri\":\"file:///tmp/mcplug-root-1\",\"name\":\"one\"}],"
        "\"elicitation_defaults\":true,\"tool_timeout_ms\":60000}",
        "server-everything with sampling, elicitation (form, url), roots");
    host_start(&h, c);

    st = mcplug_client_list_tools(c, NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "list_tools -> OK");
    CHECK_OUT(contains(out, "\"trigger-sampling-request\"") && contains(out, "\"trigger-elicitation-request\"") &&
                  contains(out, "\"trigger-url-elicitation\"") && contains(out, "\"get-roots-list\""),
              out, "the tools a server offers only to a client declaring sampling, elicitation and roots are listed");
    CHECK_OUT(contains(out, "\"simulate-research-query\"") && contains(out, "\"trigger-sampling-request-async\"") &&
                  contains(out, "\"trigger-elicitation-request-async\""),
              out, "... and the task tools (the client hosts sampling/elicitation tasks: tasks on by default)");
    drop(&out);

    /* sampling */
    out = call(c, "trigger-sampling-request", "{\"prompt\":\"ping\",\"maxTokens\":7}", NULL, MCPLUG_OK,
               "trigger-sampling-request");
    CHECK_OUT(contains(out, "LLM sampling result") && contains(out, "pong from C host") && contains(out, "c-host-model"),
              out, "... the host's sampling answer reached the server and came back in the tool result");
    drop(&out);
    CHECK(host_saw(&h, "\"method\":\"sampling/createMessage\"", "Resource trigger-sampling-request context: ping"),
          "the host got a sampling/createMessage request event with the server's messages");
    CHECK(host_saw(&h, "\"method\":\"sampling/createMessage\"", "\"maxTokens\":7"), "... and maxTokens 7");

    /* elicitation, form mode: defaults filled where the host gave none */
    out = call(c, "trigger-elicitation-request", "{}", NULL, MCPLUG_OK, "trigger-elicitation-request");
    CHECK_OUT(contains(out, "User provided the requested information") && contains(out, "- Name: Ada Lovelace") &&
                  contains(out, "- Agreed to terms: true"),
              out, "... the host's accepted form reached the server");
    CHECK_OUT(contains(out, "- Favorite Integer: 42") && contains(out, "- Favorite Number: 3.14"), out,
              "... with the schema's defaults (42, 3.14) filled in where the host gave none (elicitation_defaults)");
    drop(&out);

    /* elicitation, URL mode: the request path, then the -32042 error path with its retry */
    out = call(c, "trigger-url-elicitation", "{\"url\":\"https://example.com/consent\"}", NULL, MCPLUG_OK,
               "trigger-url-elicitation (request path)");
    CHECK_OUT(contains(out, "User completed the URL elicitation flow") && contains(out, "https://example.com/consent"),
              out, "... the host accepted the URL elicitation");
    drop(&out);
    CHECK(host_saw(&h, "\"mode\":\"url\"", "https://example.com/consent"), "the host saw the URL to show the user");
    host_clear(&h);
    out = call(c, "trigger-url-elicitation", "{\"url\":\"https://example.com/second\",\"errorPath\":true}", NULL,
               MCPLUG_OK, "trigger-url-elicitation with errorPath (-32042, then a retry)");
    CHECK_OUT(contains(out, "User completed the URL elicitation flow") && contains(out, "https://example.com/second"),
              out, "... succeeded after the engine handed the required elicitation to the host and retried");
    drop(&out);
    CHECK(host_saw(&h, "\"mode\":\"url\"", "https://modelcontextprotocol.io"),
          "the host got the -32042 error's elicitation (its prerequisite URL) as an elicitation/create event");
    CHECK(host_requests(&h) == 2, "... then the retry's own URL elicitation: 2 requests (%d)", host_requests(&h));

    /* roots: answered by the engine, no event */
    host_clear(&h);
    out = call(c, "get-roots-list", "{}", NULL, MCPLUG_OK, "get-roots-list");
    CHECK_OUT(contains(out, "Current MCP Roots (1 total)") && contains(out, "file:///tmp/mcplug-root-1"), out,
              "... lists the root given at connect");
    drop(&out);
    CHECK(!host_saw(&h, "\"method\":\"roots/list\"", NULL), "... answered by the engine (no roots/list event)");

    /* roots set later: notifications/roots/list_changed, the server asks again, logs at info */
    st = mcplug_client_set_roots(c,
                                 "[{\"uri\":\"file:///tmp/mcplug-root-1\",\"name\":\"one\"},"
                                 "{\"uri\":\"file:///tmp/mcplug-root-2\",\"name\":\"two\"}]",
                                 &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "mcplug_client_set_roots (2 roots) -> OK");
    CHECK_OUT(contains(out, "\"notified\":true"), out, "... notifications/roots/list_changed was sent");
    drop(&out);
    CHECK(host_wait(&h, 10.0, "notifications/message", "Roots updated: 2 root(s)"),
          "the server asked again and logged \"Roots updated: 2 root(s)\"");
    out = call(c, "get-roots-list", "{}", NULL, MCPLUG_OK, "get-roots-list");
    CHECK_OUT(contains(out, "Current MCP Roots (2 total)") && contains(out, "file:///tmp/mcplug-root-2"), out,
              "... now lists both roots");
    drop(&out);
    st = mcplug_client_set_roots(c, "[{\"uri\":\"https://example.com\"}]", &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "file://"), out,
              "a root that is not a file:// URI -> INVALID_ARGUMENT naming file://");
    drop(&out);

    /* logging at a chosen level: logging/setLevel filters the server's info messages */
    st = mcplug_client_set_log_level(c, "error", &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "mcplug_client_set_log_level(error) -> OK");
    CHECK_OUT(contains(out, "\"sent\":\"logging/setLevel\""), out, "... through logging/setLevel (legacy)");
    drop(&out);
    st = mcplug_client_set_roots(c,
                                 "[{\"uri\":\"file:///a\"},{\"uri\":\"file:///b\"},{\"uri\":\"file:///c\"}]", &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "set_roots (3 roots) -> OK");
    drop(&out);
    /* The server asks for the roots, stores them and logs (or not) in one step: once its tool
     * shows 3 roots, the message was decided at level error. */
    {
      int listed = 0;
      for (int i = 0; i < 500 && !listed; i++) {
        char *text = NULL;
        if (mcplug_client_call_tool(c, "get-roots-list", "{}", NULL, &text) == MCPLUG_OK)
          listed = contains(text, "(3 total)");
        mcplug_string_free(text);
        if (!listed) sleep_ms(20);
      }
      CHECK(listed, "the server lists the 3 roots");
    }
    sleep_ms(100);
    CHECK(!host_saw(&h, "notifications/message", "Roots updated: 3 root(s)"),
          "at level error, the server's info message \"Roots updated: 3 root(s)\" never came");
    st = mcplug_client_set_log_level(c, "info", &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "set_log_level(info) -> OK");
    drop(&out);
    st = mcplug_client_set_roots(c,
                                 "[{\"uri\":\"file:///a\"},{\"uri\":\"file:///b\"},{\"uri\":\"file:///c\"},"
                                 "{\"uri\":\"file:///d\"}]",
                                 &out);
    drop(&out);
    CHECK(host_wait(&h, 10.0, "notifications/message", "Roots updated: 4 root(s)"),
          "at level info, \"Roots updated: 4 root(s)\" arrived as a notifications/message event");
    st = mcplug_client_set_log_level(c, "loud", &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "emergency"), out,
              "an unknown level -> INVALID_ARGUMENT listing the levels");
    drop(&out);
    st = mcplug_client_set_log_level(c, "debug", &out);
    drop(&out);
    out = call(c, "toggle-simulated-logging", "{}", NULL, MCPLUG_OK, "toggle-simulated-logging");
    drop(&out);
    CHECK(host_wait(&h, 10.0, "notifications/message", "level message") ||
              host_saw(&h, "notifications/message", "level-message"),
          "at level debug, the simulated log messages arrive");
    out = call(c, "toggle-simulated-logging", "{}", NULL, MCPLUG_OK, "toggle-simulated-logging (off)");
    drop(&out);

    /* tasks: a tool that requires one is awaited transparently */
    host_clear(&h);
    out = call(c, "simulate-research-query", "{\"topic\":\"rust\"}", NULL, MCPLUG_OK,
               "simulate-research-query (taskSupport required)");
    CHECK_OUT(contains(out, "# Research Report: rust") && contains(out, "Stage 4: Generating report"), out,
              "... the task was created, polled and its result fetched for the host");
    CHECK_OUT(contains(out, "io.modelcontextprotocol/related-task"), out, "... the result is the task's (related-task _meta)");
    drop(&out);
    out = call(c, "simulate-research-query", "{\"topic\":\"python\",\"ambiguous\":true}", NULL, MCPLUG_OK,
               "simulate-research-query, ambiguous (the task needs input)");
    CHECK_OUT(contains(out, "Clarification**: programming"), out,
              "... the task's elicitation reached the host and its answer the task");
    drop(&out);
    CHECK(host_saw(&h, "\"method\":\"elicitation/create\"", "io.modelcontextprotocol/related-task"),
          "... the elicitation event carried the task it belongs to");

    /* the task handle, on request; then tasks/get and tasks/cancel by hand */
    {
        char task_id[128] = "", params[256];
        const char *at;
        out = call(c, "simulate-research-query", "{\"topic\":\"handles\"}", "{\"task\":\"handle\"}", MCPLUG_OK,
                   "simulate-research-query with task:\"handle\"");
        CHECK_OUT(contains(out, "\"task\":{") && contains(out, "\"status\":\"working\""), out,
                  "... returns the CreateTaskResult, the task working");
        at = out ? strstr(out, "\"taskId\":\"") : NULL;
        if (at) {
            size_t n = 0;
            at += 10;
            while (at[n] && at[n] != '"' && n + 1 < sizeof task_id) n++;
            memcpy(task_id, at, n);
            task_id[n] = '\0';
        }
        drop(&out);
        CHECK(task_id[0] != '\0', "... with a taskId (%s)", task_id);
        snprintf(params, sizeof params, "{\"taskId\":\"%s\"}", task_id);
        st = mcplug_client_request(c, "tasks/get", params, NULL, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, task_id), out, "tasks/get through mcplug_client_request -> the task");
        drop(&out);
        st = mcplug_client_request(c, "tasks/cancel", params, NULL, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"status\":\"cancelled\""), out, "tasks/cancel -> cancelled");
        drop(&out);
    }

    /* a cancel during the transparent wait sends tasks/cancel */
    {
        bg_call b = {c, "simulate-research-query", "{\"topic\":\"cancel me\"}", "{\"tag\":\"research\"}", MCPLUG_OK,
                     NULL, 0};
        double t0;
        CHECK(pthread_create(&b.thread, NULL, bg_run, &b) == 0, "a thread awaits simulate-research-query (tag research)");
        sleep_ms(1500);
        t0 = now_s();
        cancel_until_found("research", 2.0);
        pthread_join(b.thread, NULL);
        CHECK_OUT(b.st == MCPLUG_CANCELLED && is_error(b.out, "cancelled", "tasks/cancel"), b.out,
                  "mcplug_cancel -> CANCELLED, the task sent tasks/cancel (%s)", status_name(b.st));
        CHECK(now_s() - t0 < bound_s(1.0), "... at once (%.2f s)", now_s() - t0);
        mcplug_string_free(b.out);
        sleep_ms(300);
        st = mcplug_client_request(c, "tasks/list", NULL, NULL, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"status\":\"cancelled\"") && count_of(out, "\"status\":\"cancelled\"") >= 2,
                  out, "tasks/list shows the cancelled tasks (the handle's and this one)");
        drop(&out);
    }
    out = call(c, "simulate-research-query", "{\"topic\":\"too slow\"}", "{\"timeout_ms\":1200}", MCPLUG_TIMEOUT,
               "simulate-research-query with timeout_ms 1200 (the task takes 4 s)");
    CHECK_OUT(is_error(out, "timeout", "tasks/cancel"), out, "... a timeout error; the task was sent tasks/cancel");
    drop(&out);

    /* client-hosted tasks: the server's task-augmented sampling and elicitation */
    host_clear(&h);
    out = call(c, "trigger-sampling-request-async", "{\"prompt\":\"async ping\"}", NULL, MCPLUG_OK,
               "trigger-sampling-request-async");
    CHECK_OUT(contains(out, "[COMPLETED] Async sampling completed!") && contains(out, "pong from C host"), out,
              "... the engine ran the sampling as a task (CreateTaskResult, tasks/get, tasks/result) around the host's answer");
    drop(&out);
    CHECK(host_saw(&h, "\"method\":\"sampling/createMessage\"", "async ping"), "... the host got the same sampling request event");
    out = call(c, "trigger-elicitation-request-async", "{}", NULL, MCPLUG_OK, "trigger-elicitation-request-async");
    CHECK_OUT(contains(out, "completed") && contains(out, "Blue"), out, "... the elicitation task completed with the host's answer");
    drop(&out);

    /* an answer for an id nobody waits for */
    st = mcplug_client_respond(c, "{\"id\":\"s999999\",\"result\":{}}", &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "s999999"), out,
              "respond for an unknown id -> INVALID_ARGUMENT naming it");
    drop(&out);
    st = mcplug_client_respond(c, "{\"id\":\"s1\",\"result\":{}}", &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "already answered"), out,
              "respond again for an id already answered -> INVALID_ARGUMENT");
    drop(&out);

    host_stop(&h);
}

/* No capability declared: the server hides its tools; a server that asks anyway gets -32601. */
static void undeclared(const char *everything_server, const char *fault_server) {
    char *out = NULL;
    mcplug_status st;
    mcplug_client *c = connect_or_die(everything_server, "{\"tasks\":false}", "server-everything, nothing declared");
    st = mcplug_client_list_tools(c, NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && !contains(out, "trigger-sampling-request") && !contains(out, "get-roots-list") &&
                  !contains(out, "trigger-elicitation-request"),
              out, "without the capabilities, server-everything offers no sampling, elicitation or roots tool");
    drop(&out);
    st = mcplug_client_set_roots(c, "[{\"uri\":\"file:///x\"}]", &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "roots capability"), out,
              "set_roots without the roots capability -> INVALID_ARGUMENT");
    drop(&out);
    mcplug_client_free(c);

    c = connect_or_die(fault_server, NULL, "the fault server, nothing declared");
    out = call(c, "ask", "{\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[]},\"wait_ms\":5000}", NULL,
               MCPLUG_OK, "a server that asks for sampling anyway (fault server `ask`)");
    CHECK_OUT(contains(out, "-32601") && contains(out, "did not declare the sampling capability"), out,
              "... got -32601 from the client, naming the undeclared capability");
    drop(&out);
    mcplug_client_free(c);
}

/* ---- the Python SDK's 2026-07-28 server: InputRequiredResult rounds ---- */

static void modern(const char *server) {
    host_t h;
    char *out = NULL, *events = NULL;
    mcplug_status st;
    mcplug_client *c = connect_or_die(server,
                                      "{\"capabilities\":{\"sampling\":true,\"elicitation\":{}},"
                                      "\"roots\":[{\"uri\":\"file:///tmp/modern-a\",\"name\":\"a\"}]}",
                                      "the modern server with sampling, elicitation, roots");
    host_start(&h, c);

    out = call(c, "greet", "{}", NULL, MCPLUG_OK, "greet (the server elicits the name)");
    CHECK_OUT(contains(out, "Hello, Ada!"), out, "... \"Hello, Ada!\": the same host code answered the input request");
    drop(&out);
    CHECK(host_saw(&h, "\"type\":\"request\"", "\"method\":\"elicitation/create\"") &&
              host_saw(&h, "\"method\":\"elicitation/create\"", "What is your name?"),
          "the InputRequiredResult's elicitation came as the same request event as in the legacy era");

    out = call(c, "summarize", "{\"text\":\"a long story\"}", NULL, MCPLUG_OK, "summarize (the server samples)");
    CHECK_OUT(contains(out, "model said: pong from C host"), out, "... the host's sampling answer came back");
    drop(&out);
    CHECK(host_saw(&h, "\"method\":\"sampling/createMessage\"", "Summarize: a long story"), "... the host saw the prompt");

    host_clear(&h);
    out = call(c, "greet_and_sample", "{\"text\":\"both\"}", NULL, MCPLUG_OK, "greet_and_sample (two input requests, one round)");
    CHECK_OUT(contains(out, "Hello, Ada; model said: pong from C host"), out, "... both answers reached the tool");
    drop(&out);
    CHECK(host_requests(&h) == 2, "... the host got both requests (%d)", host_requests(&h));

    out = call(c, "list_roots", "{}", NULL, MCPLUG_OK, "list_roots");
    CHECK_OUT(contains(out, "roots: file:///tmp/modern-a"), out, "... the roots given at connect, answered by the engine");
    drop(&out);
    st = mcplug_client_set_roots(c, "{\"roots\":[{\"uri\":\"file:///tmp/modern-b\"},{\"uri\":\"file:///tmp/modern-c\"}]}", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"notified\":false"), out,
              "set_roots on a modern connection -> OK, nothing to notify (roots are asked per request)");
    drop(&out);
    out = call(c, "list_roots", "{}", NULL, MCPLUG_OK, "list_roots again");
    CHECK_OUT(contains(out, "roots: file:///tmp/modern-b, file:///tmp/modern-c"), out, "... the new roots");
    drop(&out);

    out = call(c, "state_echo", "{}", NULL, MCPLUG_OK, "state_echo (a hand-written InputRequiredResult)");
    CHECK_OUT(contains(out, "state ok; action accept; ids "), out, "... requestState came back untouched");
    if (out != NULL && contains(out, "ids ")) {
        const char *ids = strstr(out, "ids ") + 4;
        long first = strtol(ids, (char **)&ids, 10);
        long second = strtol(ids, NULL, 10);
        CHECK(first > 0 && second > 0 && first != second, "... and the retry had a new JSON-RPC id (%ld, then %ld)", first, second);
    }
    drop(&out);

    out = call(c, "endless", "{}", NULL, MCPLUG_PROTOCOL, "endless (asks for more input every round)");
    CHECK_OUT(is_error(out, "protocol", "after 16 rounds"), out, "... a protocol error after 16 rounds");
    drop(&out);
    out = call(c, "echo", "{\"message\":\"still here\"}", NULL, MCPLUG_OK, "echo after that");
    CHECK_OUT(contains(out, "Echo: still here"), out, "... the connection still works");
    drop(&out);

    /* logging: per request, at the level set */
    host_clear(&h);
    out = call(c, "log_levels", "{}", NULL, MCPLUG_OK, "log_levels with no level set");
    drop(&out);
    sleep_ms(200);
    CHECK(!host_saw(&h, "notifications/message", NULL), "... no log message (the client did not opt in)");
    st = mcplug_client_set_log_level(c, "info", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"sent\":\"per request\""), out,
              "set_log_level(info) on a modern connection -> sent per request");
    drop(&out);
    out = call(c, "log_levels", "{}", NULL, MCPLUG_OK, "log_levels at level info");
    drop(&out);
    CHECK(host_wait(&h, 5.0, "notifications/message", "info line") && host_wait(&h, 5.0, "notifications/message", "warning line"),
          "... info and warning lines arrived");
    CHECK(!host_saw(&h, "notifications/message", "debug line"), "... the debug line did not");

    /* channels: the server declares experimental claude/channel */
    out = call(c, "channel_push", "{\"text\":\"hello from the channel\"}", NULL, MCPLUG_OK, "channel_push");
    drop(&out);
    CHECK(host_wait(&h, 5.0, "\"method\":\"notifications/claude/channel\"", "hello from the channel"),
          "the channel message arrived as a notification event");
    st = mcplug_client_notify(c, "notifications/claude/channel/permission_request",
                              "{\"request_id\":\"abcde\",\"tool_name\":\"Bash\",\"description\":\"list\",\"input_preview\":\"ls\"}",
                              &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "the host relays a permission request (notify)");
    drop(&out);
    CHECK(host_wait(&h, 5.0, "notifications/claude/channel/permission\"", "\"behavior\":\"allow\"") &&
              host_saw(&h, "notifications/claude/channel/permission\"", "abcde"),
          "... the server's verdict came back as a notifications/claude/channel/permission event");

    /* tasks (the io.modelcontextprotocol/tasks extension) */
    out = call(c, "slow_task", "{\"ms\":300}", NULL, MCPLUG_OK, "slow_task (the server answers with a task)");
    CHECK_OUT(contains(out, "slow done") && !contains(out, "resultType\":\"task"), out,
              "... awaited: the host got the task's result");
    drop(&out);
    host_clear(&h);
    out = call(c, "ask_task", "{}", NULL, MCPLUG_OK, "ask_task (the task needs input)");
    CHECK_OUT(contains(out, "colour: teal"), out, "... the task's input request reached the host, its answer went back with tasks/update");
    drop(&out);
    CHECK(host_saw(&h, "\"method\":\"elicitation/create\"", "Which colour?"), "... as a request event");
    out = call(c, "slow_task", "{\"ms\":100}", "{\"task\":\"handle\"}", MCPLUG_OK, "slow_task with task:\"handle\"");
    CHECK_OUT(contains(out, "\"resultType\":\"task\"") && contains(out, "\"taskId\""), out, "... the task itself");
    drop(&out);
    out = call(c, "forever_task", "{}", "{\"timeout_ms\":500}", MCPLUG_TIMEOUT, "forever_task with timeout_ms 500");
    CHECK_OUT(is_error(out, "timeout", "tasks/cancel"), out, "... timeout; the task was sent tasks/cancel");
    drop(&out);
    {
        double until = now_s() + bound_s(3.0);
        int cancelled = 0;
        while (!cancelled && now_s() < until) {
            out = call(c, "cancelled_tasks", "{}", NULL, MCPLUG_OK, "cancelled_tasks");
            cancelled = contains(out, "-");
            drop(&out);
            if (!cancelled) sleep_ms(50);
        }
        CHECK(cancelled, "the server recorded the tasks/cancel");
    }

    /* the host answers with an error; the host never answers; the host's call is cancelled */
    h.sampling_error = 1;
    out = call(c, "summarize", "{\"text\":\"no\"}", NULL, MCPLUG_DENIED, "summarize, the host refusing sampling");
    CHECK_OUT(is_error(out, "denied", "the user rejected sampling") && contains(out, "\"code\":-1"), out,
              "... DENIED with the host's message and code");
    drop(&out);
    h.sampling_error = 0;
    h.silent = 1;
    {
        bg_call b = {c, "greet", "{}", "{\"tag\":\"greeting\"}", MCPLUG_OK, NULL, 0};
        host_clear(&h);
        CHECK(pthread_create(&b.thread, NULL, bg_run, &b) == 0, "a thread calls greet (tag greeting); the host stays silent");
        CHECK(host_wait(&h, 5.0, "\"method\":\"elicitation/create\"", NULL), "... the request reached the host");
        cancel_until_found("greeting", 2.0);
        pthread_join(b.thread, NULL);
        CHECK_OUT(b.st == MCPLUG_CANCELLED && is_error(b.out, "cancelled", NULL), b.out,
                  "mcplug_cancel while the host holds the input request -> CANCELLED (%s)", status_name(b.st));
        mcplug_string_free(b.out);
        CHECK(host_wait(&h, 2.0, "\"type\":\"request_cancelled\"", NULL),
              "... and the host was told with a request_cancelled event");
    }
    h.silent = 0;
    host_stop(&h);

    /* the host timer, on a connection with a short one */
    c = connect_or_die(server, "{\"capabilities\":{\"elicitation\":{}},\"host_request_timeout_ms\":400}",
                       "the modern server, host_request_timeout_ms 400");
    out = call(c, "greet", "{}", NULL, MCPLUG_TIMEOUT, "greet with nobody answering");
    CHECK_OUT(is_error(out, "timeout", "did not answer elicitation/create within 400 ms"), out,
              "... the host timer ended the call");
    drop(&out);
    events = wait_event(c, bound_s(2.0), "\"type\":\"request_expired\"", NULL);
    CHECK_OUT(events != NULL, events, "... with a request_expired event");
    mcplug_string_free(events);
    mcplug_client_free(c);

    /* sampling not declared: a server that asks anyway fails the call */
    c = connect_or_die(server, "{\"capabilities\":{\"elicitation\":{}}}", "the modern server without sampling");
    out = call(c, "sample_anyway", "{}", NULL, MCPLUG_PROTOCOL, "sample_anyway (asks for sampling regardless)");
    CHECK_OUT(is_error(out, "protocol", "did not declare the sampling capability"), out,
              "... a protocol error naming the undeclared capability");
    drop(&out);
    out = call(c, "summarize", "{\"text\":\"x\"}", NULL, MCPLUG_RPC, "summarize (the SDK checks the capability itself)");
    CHECK_OUT(is_error(out, "rpc", "sampling") && contains(out, "-32021"), out, "... -32021, missing client capability");
    drop(&out);
    mcplug_client_free(c);
}

/* The same server held to 2025-11-25: the same needs arrive as server requests. */
static void same_host_legacy(const char *server) {
    host_t h;
    char *out = NULL;
    mcplug_client *c = connect_or_die(server,
                                      "{\"protocol_versions\":[\"2025-11-25\"],\"capabilities\":{\"sampling\":{},\"elicitation\":{}}}",
                                      "the Python SDK server held to the legacy era");
    host_start(&h, c);
    out = call(c, "greet", "{}", NULL, MCPLUG_OK, "greet in the legacy era");
    CHECK_OUT(contains(out, "Hello, Ada!"), out, "... \"Hello, Ada!\" from the same host code (a real elicitation/create request)");
    drop(&out);
    out = call(c, "summarize", "{\"text\":\"legacy\"}", NULL, MCPLUG_OK, "summarize in the legacy era");
    CHECK_OUT(contains(out, "model said: pong from C host"), out, "... the same sampling answer");
    drop(&out);
    host_stop(&h);
}

/* Channels only from a server that declared them. */
static void undeclared_channel(const char *server_without_channel) {
    char *out = NULL, *ev;
    mcplug_client *c = connect_or_die(server_without_channel, NULL, "the modern server, channels not declared");
    out = call(c, "channel_push", "{\"text\":\"sneaky\"}", NULL, MCPLUG_OK, "channel_push from a server that did not declare claude/channel");
    drop(&out);
    ev = wait_event(c, bound_s(1.0), "notifications/claude/channel", NULL);
    CHECK_OUT(ev == NULL, ev, "... the channel message was not delivered");
    mcplug_string_free(ev);
    mcplug_client_free(c);
}

int main(void) {
    char everything_server[4096], fault[4096], modern_server[4096], quiet_server[4096];
    test_init();
    server_json(everything_server, sizeof everything_server, NULL, peer("MCPLUG_NODE"), peer("MCPLUG_EVERYTHING"),
                (const char *)NULL);
    fault_server_json(fault, sizeof fault, "normal");
    server_json(modern_server, sizeof modern_server, NULL, peer("MCPLUG_PYTHON"), peer("MCPLUG_MODERN_SERVER"),
                (const char *)NULL);
    server_json(quiet_server, sizeof quiet_server, NULL, peer("MCPLUG_PYTHON"), peer("MCPLUG_MODERN_SERVER"),
                "--no-channel", (const char *)NULL);
    everything(everything_server);
    undeclared(everything_server, fault);
    modern(modern_server);
    same_host_legacy(modern_server);
    undeclared_channel(quiet_server);
    return finish("host_requests");
}
