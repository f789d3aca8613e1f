/* The manager through the C ABI: one manager over server-everything (stdio and Streamable HTTP),
 * server-filesystem, server-memory, the fault server (stdio and HTTP), the 2026-07-28 Python
 * server, an in-process (sdk) server the test serves itself, a server that cannot start, one slow
 * to start (sh -c 'sleep 2; exec ...') and one disabled. Shown: connect returns at once; the states as
 * events; the fast servers' tools are callable while the slow one is still pending; the pool's
 * names; calls routed by pool name; output hygiene (bidi/zero-width stripped, a large output
 * capped with a marker); a server request answered through the manager's own id; list_changed;
 * the in-process server's calls answered as events (result, error, timeout), set_tools; tool
 * search; resources and prompts across servers by qualified name; three consecutive connection
 * failures (TCP resets; HTTP 500s do not count) close and reconnect a server;
 * a killed server goes failed, reconnects and its tools return; set_enabled; reconnect; free
 * leaves no process. Then 50 stdio servers connect, 3 at a time, and the time is printed. */
#include "check.h"

#include <pthread.h>
#include <sys/stat.h>

static mcplug_manager *M;

static char *mcall(const char *name, const char *args, mcplug_status *st) {
    char *out = NULL;
    *st = mcplug_manager_call_tool(M, name, args, NULL, &out);
    return out;
}

/* Pulls manager events until one holds all three needles (NULL: any); returns it (owned) or NULL. */
static char *wait_mevent(double wait_s, const char *n1, const char *n2, const char *n3) {
    double until = now_s() + wait_s;
    while (now_s() < until) {
        char *ev = NULL;
        int32_t left = (int32_t)((until - now_s()) * 1000.0) + 1;
        mcplug_status st = mcplug_manager_next_event(M, left, &ev);
        if (st == MCPLUG_OK) {
            if (getenv("MCPLUG_DEBUG")) printf("# event: %s\n", ev);
            if (contains(ev, n1) && (n2 == NULL || contains(ev, n2)) && (n3 == NULL || contains(ev, n3))) return ev;
            mcplug_string_free(ev);
            continue;
        }
        mcplug_string_free(ev);
        if (st != MCPLUG_TIMEOUT) return NULL;
    }
    return NULL;
}

static char *state_of(const char *name) {
    char *out = NULL;
    mcplug_status st = mcplug_manager_status(M, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "status -> OK");
    (void)name;
    return out;
}

/* The `"state":"..."` of one server in a status (the text after `"<name>":{`). */
static int server_in_state(const char *status, const char *name, const char *state) {
    char key[256], want[128];
    const char *at;
    snprintf(key, sizeof key, "\"%s\":{\"state\":\"", name);
    at = strstr(status, key);
    if (at == NULL) return 0;
    snprintf(want, sizeof want, "%s\"", state);
    return strncmp(at + strlen(key), want, strlen(want)) == 0;
}

struct asker {
    char *out;
    mcplug_status st;
};

static void *ask_thread(void *arg) {
    struct asker *a = arg;
    a->out = mcall("mcp__fault__ask",
                   "{\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[],\"maxTokens\":5},\"wait_ms\":10000}",
                   &a->st);
    return NULL;
}

/* A host thread that calls a tool and keeps the outcome. */
struct caller {
    const char *name, *args, *options;
    char *out;
    mcplug_status st;
};

static void *call_thread(void *arg) {
    struct caller *c = arg;
    c->st = mcplug_manager_call_tool(M, c->name, c->args, c->options, &c->out);
    return NULL;
}

/* The manager id ("m12") of a request event, into id. */
static void event_id(const char *ev, char *id, size_t cap) {
    const char *at = strstr(ev, "\"id\":\"m");
    id[0] = 0;
    if (at != NULL) snprintf(id, cap, "%.*s", (int)strcspn(at + 6, "\""), at + 6);
}

/* The in-process server: its tool calls arrive as request events the test answers. */
static void in_process(void) {
    pthread_t t;
    struct caller c = {"mcp__in_process__add", "{\"a\":2,\"b\":40}", NULL, NULL, MCPLUG_OK};
    char id[64], answer[512], *ev, *out = NULL;
    mcplug_status st;

    pthread_create(&t, NULL, call_thread, &c);
    ev = wait_mevent(bound_s(10), "\"method\":\"tools/call\"", "\"server\":\"in.process\"", "\"name\":\"add\"");
    CHECK(ev != NULL, "a call of the in-process tool reaches the host as a tools/call request event");
    CHECK_OUT(ev && contains(ev, "\"arguments\":{\"a\":2,\"b\":40}"), ev, "with its arguments");
    event_id(ev ? ev : "", id, sizeof id);
    drop(&ev);
    st = mcplug_manager_respond(M, "{\"id\":\"m999999\",\"result\":{\"content\":[]}}", &out);
    CHECK_OUT(st == MCPLUG_NOT_FOUND, out, "an answer to an unknown id is not_found");
    drop(&out);
    snprintf(answer, sizeof answer, "{\"id\":\"%s\",\"result\":7}", id);
    st = mcplug_manager_respond(M, answer, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "CallToolResult"), out, "a malformed answer is refused, naming what is wanted");
    drop(&out);
    snprintf(answer, sizeof answer,
             "{\"id\":\"%s\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"4\u200b2\"}]}}", id);
    st = mcplug_manager_respond(M, answer, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "the host answers the call");
    drop(&out);
    pthread_join(t, NULL);
    CHECK_OUT(c.st == MCPLUG_OK && contains(c.out, "\"text\":\"42\""), c.out,
              "the caller gets the host's result, cleaned like any tool output");
    drop(&c.out);

    c.out = NULL;
    pthread_create(&t, NULL, call_thread, &c);
    ev = wait_mevent(bound_s(10), "\"method\":\"tools/call\"", "\"server\":\"in.process\"", NULL);
    event_id(ev ? ev : "", id, sizeof id);
    drop(&ev);
    snprintf(answer, sizeof answer, "{\"id\":\"%s\",\"error\":{\"code\":-32000,\"message\":\"host says no\"}}", id);
    st = mcplug_manager_respond(M, answer, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "the host answers with an error");
    drop(&out);
    pthread_join(t, NULL);
    CHECK_OUT(c.st == MCPLUG_RPC && is_error(c.out, "rpc", "host says no"), c.out, "the caller gets it as an rpc error");
    drop(&c.out);

    {
        struct caller slow = {"mcp__in_process__echo", "{}", "{\"timeout_ms\":200}", NULL, MCPLUG_OK};
        call_thread(&slow);
        CHECK_OUT(slow.st == MCPLUG_TIMEOUT && contains(slow.out, "did not answer"), slow.out,
                  "a call the host never answers times out");
        drop(&slow.out);
        ev = wait_mevent(bound_s(5), "\"type\":\"request_cancelled\"", "\"server\":\"in.process\"", NULL);
        CHECK(ev != NULL, "and the host is told (request_cancelled)");
        drop(&ev);
    }

    st = mcplug_manager_set_tools(M, "in.process", "[{\"name\":\"add\"},{\"name\":\"mul\",\"description\":\"multiplies\"}]", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "mcp__in_process__mul"), out, "set_tools replaces the in-process tools");
    drop(&out);
    ev = wait_mevent(bound_s(5), "\"type\":\"tools_changed\"", "\"server\":\"in.process\"", "mcp__in_process__mul");
    CHECK(ev != NULL, "with a tools_changed event");
    CHECK_OUT(ev && !contains(ev, "mcp__in_process__echo\""), ev, "echo is gone from it");
    drop(&ev);
    st = mcplug_manager_set_tools(M, "in.process", "[{\"name\":\"a\"},{\"name\":\"a\"}]", &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "twice"), out, "a tool listed twice is refused");
    drop(&out);
    st = mcplug_manager_set_tools(M, "everything", "[]", &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "not an in-process"), out, "set_tools on a real server is refused");
    drop(&out);
}

/* Started calls: many in flight from this one thread, completions pulled in batches; a cancel. */
static void started_calls(void) {
    enum { N = 20 };
    uint64_t calls[N], cancel_me = 0;
    int seen[N] = {0}, done = 0, i, cancelled_seen = 0;
    char args[128], *out = NULL;
    mcplug_status st;
    double until;
    for (i = 0; i < N; i++) {
        snprintf(args, sizeof args, "{\"message\":\"started %d\"}", i);
        st = mcplug_manager_call_tool_start(M, i % 2 ? "mcp__fault__echo" : "mcp__everything__echo", args, NULL, &calls[i], &out);
        if (st != MCPLUG_OK || out != NULL) break;
    }
    CHECK_OUT(i == N, out, "%d calls started on two servers, out NULL each time", N);
    drop(&out);
    st = mcplug_manager_call_tool_start(M, "mcp__nowhere__x", NULL, NULL, &cancel_me, &out);
    CHECK_OUT(st == MCPLUG_NOT_FOUND && contains(out, "mcp__nowhere__x"), out, "an unknown pool name is refused at once");
    drop(&out);
    st = mcplug_manager_call_tool_start(M, "mcp__in_process__echo", "{}", NULL, &cancel_me, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "a call the host will not answer, started");
    st = mcplug_manager_call_tool_start(M, "mcp__fault__echo", "{\"message\":", NULL, &calls[0], &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "arguments_json"), out, "bad arguments are refused at once");
    drop(&out);
    until = now_s() + bound_s(20);
    while ((done < N || !cancelled_seen) && now_s() < until) {
        const char *at;
        st = mcplug_manager_next_events(M, 64, 1000, &out);
        if (st != MCPLUG_OK) { drop(&out); continue; }
        if (!cancelled_seen && contains(out, "\"method\":\"tools/call\"") && contains(out, "\"server\":\"in.process\"")) {
            char *r = NULL;
            mcplug_manager_cancel_call(M, cancel_me, &r);
            CHECK_OUT(r && contains(r, "\"cancelled\":true"), r, "cancel_call of the host call in flight");
            drop(&r);
        }
        for (at = strstr(out, "\"type\":\"completion\""); at; at = strstr(at + 1, "\"type\":\"completion\"")) {
            unsigned long long n = strtoull(strstr(at, "\"call\":") + 7, NULL, 10);
            if (n == cancel_me) {
                CHECK_OUT(strstr(at, "\"kind\":\"cancelled\"") != NULL, out, "the cancelled call completes with a cancelled error");
                cancelled_seen = 1;
                continue;
            }
            for (i = 0; i < N; i++) {
                if (calls[i] == n) {
                    char want[64];
                    snprintf(want, sizeof want, "Echo: started %d\"", i);
                    if (!seen[i] && strstr(at, want) != NULL) { seen[i] = 1; done++; }
                }
            }
        }
        drop(&out);
    }
    CHECK(done == N, "every started call completed once with its own answer (%d of %d)", done, N);
    CHECK(cancelled_seen, "the cancelled one too");
    st = mcplug_manager_cancel_call(M, calls[1], &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"cancelled\":false"), out, "cancelling a finished call says false");
    drop(&out);

    /* Progress the server sent before its answer comes out before the completion, every time. */
    for (i = 0; i < 5; i++) {
        uint64_t call = 0;
        int progress = 0, completed = 0;
        char want[64];
        st = mcplug_manager_call_tool_start(M, "mcp__everything__trigger-long-running-operation",
                                            "{\"duration\":0.05,\"steps\":3}", "{\"progress\":true}", &call, &out);
        CHECK_STATUS(st, MCPLUG_OK, out, "a call with progress, started (%d)", i + 1);
        snprintf(want, sizeof want, "\"call\":%llu,", (unsigned long long)call);
        until = now_s() + bound_s(20);
        while (!completed && now_s() < until) {
            if (mcplug_manager_next_event(M, 1000, &out) == MCPLUG_OK) {
                if (contains(out, "notifications/progress") && contains(out, "\"server\":\"everything\"")) progress++;
                if (contains(out, "\"type\":\"completion\"") && contains(out, want)) completed = 1;
            }
            drop(&out);
        }
        CHECK(completed && progress == 3, "its 3 progress events came before its completion (%d)", progress);
    }
}

/* Tool search, resources and prompts across servers. */
static void catalogue(void) {
    char *out = NULL, uri[512] = {0};
    const char *at;
    mcplug_status st;

    st = mcplug_manager_search_tools(M, "echo", "{\"max_results\":3}", &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "search_tools(echo)");
    CHECK_OUT(contains(out, "\"tools\":[{\"name\":\"mcp__in_process__echo\",\"server\":\"in.process\",\"tool\":\"echo\""), out,
              "results come as pool entries, host tools first among equal scores");
    CHECK_OUT(count_of(out, "\"score\":") == 3 && json_int(out, "total") >= 4, out,
              "three results (max_results) of more matches (total %ld)", json_int(out, "total"));
    drop(&out);
    st = mcplug_manager_search_tools(M, "directory +list", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"name\":\"mcp__files__list_directory\""), out,
              "words find server-filesystem's list_directory");
    drop(&out);
    st = mcplug_manager_search_tools(M, "select:mcp__memory__read_graph,echo", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && json_int(out, "total") == 2 && contains(out, "mcp__memory__read_graph"), out,
              "select: picks tools by name");
    drop(&out);
    st = mcplug_manager_search_tools(M, "  ", NULL, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "empty"), out, "an empty query is refused");
    drop(&out);

    st = mcplug_manager_list_resources(M, NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "list_resources");
    CHECK_OUT(contains(out, "demo://resource/static/document/") && contains(out, "\"server\":\"everything\"") &&
                  contains(out, "\"server\":\"everything-http\""),
              out, "server-everything's resources from both connections, each with its server");
    CHECK_OUT(contains(out, "\"templates\":[") && contains(out, "demo://resource/dynamic/text/{"), out, "and its templates");
    drop(&out);
    st = mcplug_manager_list_resources(M, "{\"server\":\"everything\"}", &out);
    CHECK_OUT(st == MCPLUG_OK && !contains(out, "everything-http"), out, "one server's resources");
    at = out ? strstr(out, "\"uri\":\"demo://resource/static/document/") : NULL;
    if (at) snprintf(uri, sizeof uri, "%.*s", (int)strcspn(at + 7, "\""), at + 7);
    drop(&out);
    CHECK(uri[0] != 0, "a resource uri to read (%s)", uri);
    st = mcplug_manager_read_resource(M, "everything", uri, NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"contents\":[") && contains(out, uri), out, "read_resource on the server named");
    drop(&out);
    st = mcplug_manager_read_resource(M, "nobody", uri, NULL, &out);
    CHECK_OUT(st == MCPLUG_NOT_FOUND && contains(out, "nobody"), out, "read_resource of an unknown server is not_found");
    drop(&out);

    st = mcplug_manager_list_prompts(M, NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "list_prompts");
    CHECK_OUT(contains(out, "\"name\":\"mcp__everything__simple-prompt\"") && contains(out, "\"prompt\":\"simple-prompt\""), out,
              "prompts carry qualified names and their own");
    drop(&out);
    st = mcplug_manager_get_prompt(M, "mcp__everything__args-prompt", "{\"city\":\"Paris\",\"state\":\"TX\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"messages\":[") && contains(out, "Paris"), out,
              "get_prompt by qualified name, with arguments");
    drop(&out);
    st = mcplug_manager_get_prompt(M, "mcp__everything__no-such-prompt", NULL, NULL, &out);
    CHECK_OUT(st == MCPLUG_NOT_FOUND && contains(out, "no-such-prompt"), out, "an unknown prompt is not_found");
    drop(&out);
    st = mcplug_manager_request(M, "everything", "resources/templates/list", NULL, NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "resourceTemplates"), out, "request() reaches one named server");
    drop(&out);
    st = mcplug_manager_request(M, "in.process", "resources/list", NULL, NULL, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "in-process"), out, "an in-process server serves tools only");
    drop(&out);
}

/* How many sessions the HTTP fault server has initialized (its stats tool). */
static long initializes(void) {
    mcplug_status st;
    char *out = mcall("mcp__hfault__stats", NULL, &st);
    const char *at = out ? strstr(out, "initializes\\\": ") : NULL;
    long n = at ? atol(at + strlen("initializes\\\": ")) : -1;
    CHECK_OUT(st == MCPLUG_OK && n > 0, out, "the HTTP fault server's session count (%ld)", n);
    drop(&out);
    return n;
}

/* As Claude Code counts them: HTTP 500s are answers and never close the connection; two TCP resets,
 * a success, then three resets in a row: only the three close and reconnect it. */
static void terminal_errors(void) {
    char *out = NULL, *ev;
    mcplug_status st;
    int i;
    long before = initializes();
    for (i = 0; i < 4; i++) {
        out = mcall("mcp__hfault__fail500", NULL, &st);
        CHECK_OUT(st == MCPLUG_TRANSPORT && contains(out, "\"http_status\":500"), out,
                  "HTTP 500 -> transport with data.http_status (%d)", i + 1);
        drop(&out);
    }
    {
        char *s = state_of("hfault");
        CHECK_OUT(server_in_state(s, "hfault", "connected"), s, "four HTTP 500s leave it connected");
        drop(&s);
    }
    for (i = 0; i < 2; i++) {
        out = mcall("mcp__hfault__reset", NULL, &st);
        CHECK_OUT(st == MCPLUG_TRANSPORT && !contains(out, "http_status"), out, "a reset -> transport (%d)", i + 1);
        drop(&out);
    }
    out = mcall("mcp__hfault__echo", "{\"message\":\"fine\"}", &st);
    CHECK_OUT(st == MCPLUG_OK, out, "a success between them resets the count");
    drop(&out);
    for (i = 0; i < 3; i++) {
        out = mcall("mcp__hfault__reset", NULL, &st);
        CHECK_OUT(st == MCPLUG_TRANSPORT, out, "a reset again (%d of 3)", i + 1);
        drop(&out);
        if (i < 2) {
            char *s = state_of("hfault");
            CHECK_OUT(server_in_state(s, "hfault", "connected"), s, "still connected after %d", i + 1);
            drop(&s);
        }
    }
    ev = wait_mevent(bound_s(5), "\"server\":\"hfault\"", "\"state\":\"failed\"", "3 consecutive connection errors");
    CHECK(ev != NULL, "the third closes the connection: failed, saying why");
    drop(&ev);
    ev = wait_mevent(bound_s(10), "\"server\":\"hfault\"", "\"state\":\"connected\"", NULL);
    CHECK(ev != NULL, "and it reconnects");
    drop(&ev);
    CHECK(initializes() > before, "a new session was initialized");
}

static void pid_file(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/manager-%ld-%s.pid", peer("MCPLUG_TEST_TMPDIR"), (long)getpid(), name);
    unlink(buf);
}

static void fifty(void) {
    char *config = malloc(64 * 1024), entry[2048], *out = NULL;
    mcplug_manager *m = NULL;
    mcplug_status st;
    double t0, took;
    int i, n = reduced() ? 12 : 50;
    strcpy(config, "{\"mcpServers\":{");
    for (i = 0; i < n; i++) {
        char name[32];
        fault_server_json(entry, sizeof entry, "normal");
        snprintf(name, sizeof name, "%s\"s%02d\":", i ? "," : "", i);
        strcat(config, name);
        strcat(config, entry);
    }
    strcat(config, "}}");
    st = mcplug_manager_new("{\"local_concurrency\":3}", &m, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "a second manager (local_concurrency 3)");
    drop(&out);
    t0 = now_s();
    st = mcplug_manager_connect(m, config, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "connect %d stdio servers", n);
    drop(&out);
    st = mcplug_manager_wait(m, "{\"timeout_ms\":120000}", &out);
    took = now_s() - t0;
    CHECK_STATUS(st, MCPLUG_OK, out, "all %d settled", n);
    CHECK(!contains(out, "\"state\":\"failed\"") && !contains(out, "\"state\":\"pending\""),
          "every one of the %d is connected", n);
    {
        char want[64];
        snprintf(want, sizeof want, "},\"tools\":%d}", n * 14);
        CHECK_OUT(contains(out, want), out, "the pool has %d tools (14 each)", n * 14);
    }
    printf("# %d stdio servers (the fault server, Python) connected 3 at a time in %.2f s\n", n, took);
    drop(&out);
    mcplug_manager_free(m);
    free(config);
}

int main(void) {
    char config[16384], e_everything[2048], e_fault[2048], e_slow[2048], e_modern[2048], e_off[2048];
    char e_files[2048], e_memory[2048], memory_env[1200], files_dir[1024], memory_file[1024], locked_url[512];
    char fault_pid_path[1024], *out = NULL, *ev;
    const char *http_url = peer("MCPLUG_HTTP_URL");
    mcplug_status st;
    double t0;
    long pid1, pid2;

    pid_file(fault_pid_path, sizeof fault_pid_path, "fault");
    server_json(e_everything, sizeof e_everything, NULL, peer("MCPLUG_NODE"), peer("MCPLUG_EVERYTHING"), "stdio", (const char *)NULL);
    server_json(e_fault, sizeof e_fault, NULL, "/bin/sh", "-c", "echo $$ > \"$1\"; exec \"$2\" \"$3\"", "sh",
                fault_pid_path, peer("MCPLUG_PYTHON"), peer("MCPLUG_FAULT_SERVER"), (const char *)NULL);
    server_json(e_slow, sizeof e_slow, NULL, "/bin/sh", "-c", "sleep 2; exec \"$1\" \"$2\"", "sh",
                peer("MCPLUG_PYTHON"), peer("MCPLUG_FAULT_SERVER"), (const char *)NULL);
    server_json(e_modern, sizeof e_modern, NULL, peer("MCPLUG_PYTHON"), peer("MCPLUG_MODERN_SERVER"), (const char *)NULL);
    server_json(e_off, sizeof e_off, "\"disabled\":true", peer("MCPLUG_PYTHON"), peer("MCPLUG_FAULT_SERVER"), (const char *)NULL);
    snprintf(locked_url, sizeof locked_url, "%.*s/locked", (int)(strlen(peer("MCPLUG_FAULT_HTTP_URL")) - 4),
             peer("MCPLUG_FAULT_HTTP_URL"));
    snprintf(files_dir, sizeof files_dir, "%s/manager-files-%ld", peer("MCPLUG_TEST_TMPDIR"), (long)getpid());
    mkdir(files_dir, 0700);
    {
        char note[1200];
        FILE *f;
        snprintf(note, sizeof note, "%s/note.txt", files_dir);
        f = fopen(note, "w");
        if (f) { fputs("hello from the manager test\n", f); fclose(f); }
    }
    snprintf(memory_file, sizeof memory_file, "%s/manager-memory-%ld.jsonl", peer("MCPLUG_TEST_TMPDIR"), (long)getpid());
    unlink(memory_file);
    server_json(e_files, sizeof e_files, NULL, peer("MCPLUG_NODE"), peer("MCPLUG_FILESYSTEM"), files_dir, (const char *)NULL);
    snprintf(memory_env, sizeof memory_env, "\"env\":{\"MEMORY_FILE_PATH\":\"%s\"}", memory_file);
    server_json(e_memory, sizeof e_memory, memory_env, peer("MCPLUG_NODE"), peer("MCPLUG_MEMORY"), (const char *)NULL);
    snprintf(config, sizeof config,
             "{\"mcpServers\":{\"everything\":%s,\"everything-http\":{\"type\":\"http\",\"url\":\"%s\"},"
             "\"fault\":%s,\"modern\":%s,\"broken\":{\"command\":\"/nonexistent/mcp-server\"},\"slow\":%s,"
             "\"off\":%s,\"files\":%s,\"memory\":%s,\"hfault\":{\"type\":\"http\",\"url\":\"%s\"},\"locked\":{\"type\":\"http\",\"url\":\"%s\"},"
             "\"in.process\":{\"type\":\"sdk\",\"tools\":[{\"name\":\"add\",\"description\":\"Adds two numbers\","
             "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"number\"}}}},"
             "{\"name\":\"echo\",\"description\":\"Echoes, in process\"}]},"
             "\"bad.sdk\":{\"type\":\"sdk\",\"tools\":{}}}}",
             e_everything, http_url, e_fault, e_modern, e_slow, e_off, e_files, e_memory, peer("MCPLUG_FAULT_HTTP_URL"), locked_url);

    st = mcplug_manager_new("{\"bogus\":1}", &M, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "bogus"), out,
              "an unknown manager option is named");
    drop(&out);
    st = mcplug_manager_new("{\"reconnect_initial_ms\":100,\"max_output_chars\":1000,"
                            "\"connection\":{\"capabilities\":{\"sampling\":{}}}}",
                            &M, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "mcplug_manager_new -> OK");
    drop(&out);
    st = mcplug_manager_connect(M, "{\"nope\":{}}", &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "mcpServers"), out,
              "a config of neither shape is refused");
    drop(&out);

    t0 = now_s();
    st = mcplug_manager_connect(M, config, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "connect -> OK");
    /* Under valgrind (reduced) one thread runs at a time: the connect tasks' start-up work
     * (processes, TLS set-up) competes with this call, so only the plain run bounds it tightly. */
    CHECK_OUT(now_s() - t0 < (reduced() ? 30.0 : 0.5), out, "connect returns at once (%.3f s)", now_s() - t0);
    CHECK_OUT(server_in_state(out, "fault", "pending") && server_in_state(out, "slow", "pending") &&
                  server_in_state(out, "off", "disabled"),
              out, "the servers start pending, 'off' disabled");
    CHECK_OUT(server_in_state(out, "in.process", "connected") && contains(out, "\"transport\":\"sdk\""), out,
              "the in-process server is connected at once");
    CHECK_OUT(server_in_state(out, "bad.sdk", "failed") && contains(out, "must be an array"), out,
              "an in-process server with a bad tool list is failed, saying why");
    drop(&out);

    ev = wait_mevent(bound_s(10), "\"type\":\"state\"", "\"server\":\"fault\"", "\"state\":\"connected\"");
    CHECK(ev != NULL, "state event: fault connected (after %.2f s)", now_s() - t0);
    CHECK_OUT(contains(ev, "mcp__fault__echo"), ev, "the state event lists its pool names");
    drop(&ev);
    out = state_of("slow");
    CHECK_OUT(server_in_state(out, "slow", "pending"), out, "the slow server is still pending");
    drop(&out);
    out = mcall("mcp__fault__echo", "{\"message\":\"while slow starts\"}", &st);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "Echo: while slow starts"), out,
              "the fault server's tool works while the slow one is pending");
    drop(&out);

    st = mcplug_manager_wait(M, "{\"timeout_ms\":30000}", &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "wait until settled");
    CHECK_OUT(now_s() - t0 >= 2.0, out, "the slow one took its 2 s (%.2f s)", now_s() - t0);
    CHECK_OUT(server_in_state(out, "everything", "connected") && server_in_state(out, "everything-http", "connected") &&
                  server_in_state(out, "modern", "connected") && server_in_state(out, "slow", "connected"),
              out, "everything (stdio, http), modern and slow are connected");
    CHECK_OUT(server_in_state(out, "broken", "failed") && contains(out, "/nonexistent/mcp-server"), out,
              "the server that cannot start is failed, naming its command");
    CHECK_OUT(server_in_state(out, "locked", "needs-auth") && contains(out, "\"kind\":\"needs_auth\""), out,
              "a server that answers 401 is needs-auth");
    drop(&out);

    st = mcplug_manager_list_tools(M, NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "list_tools -> OK");
    CHECK_OUT(contains(out, "\"name\":\"mcp__everything__echo\"") && contains(out, "\"name\":\"mcp__everything-http__echo\"") &&
                  contains(out, "\"name\":\"mcp__modern__add\"") && contains(out, "\"name\":\"mcp__slow__echo\"") &&
                  contains(out, "\"name\":\"mcp__fault__last_meta\""),
              out, "the pool names every server's tools as mcp__{server}__{tool}");
    CHECK_OUT(!contains(out, "mcp__off__") && !contains(out, "mcp__broken__"), out,
              "no tools from disabled or failed servers");
    CHECK_OUT(contains(out, "{\"tools\":[{\"name\":\"mcp__in_process__add\""), out,
              "the in-process (host) tools come first in the pool");
    CHECK_OUT(contains(out, "\"name\":\"mcp__files__list_directory\"") && contains(out, "\"name\":\"mcp__memory__read_graph\""),
              out, "server-filesystem's and server-memory's tools are in the pool");
    CHECK_OUT(contains(out, "\"tool\":\"echo\",\"description\":\"Echoes back the input string\"") ||
                  contains(out, "\"server\":\"everything\",\"tool\":\"echo\""),
              out, "each tool names its server and its own tool name");
    CHECK_OUT(contains(out, "\"read_only\":true"), out, "readOnlyHint is surfaced as read_only");
    drop(&out);

    out = mcall("mcp__everything__echo", "{\"message\":\"hi\"}", &st);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "Echo: hi"), out, "mcp__everything__echo routes to server-everything");
    drop(&out);
    out = mcall("mcp__everything-http__echo", "{\"message\":\"over http\"}", &st);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "Echo: over http"), out, "mcp__everything-http__echo over Streamable HTTP");
    drop(&out);
    out = mcall("mcp__modern__add", "{\"a\":2,\"b\":3}", &st);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "5"), out, "mcp__modern__add -> 5 (2026-07-28 server)");
    drop(&out);
    {
        char args[1200];
        snprintf(args, sizeof args, "{\"path\":\"%s\"}", files_dir);
        out = mcall("mcp__files__list_directory", args, &st);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "note.txt"), out, "mcp__files__list_directory routes to server-filesystem");
        drop(&out);
    }
    out = mcall("mcp__memory__create_entities",
                "{\"entities\":[{\"name\":\"mcplug\",\"entityType\":\"library\",\"observations\":[\"speaks MCP\"]}]}", &st);
    CHECK_OUT(st == MCPLUG_OK, out, "mcp__memory__create_entities routes to server-memory");
    drop(&out);
    out = mcall("mcp__memory__read_graph", "{}", &st);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "speaks MCP"), out, "and read_graph sees the entity");
    drop(&out);
    out = mcall("mcp__fault__echo", "{\"message\":\"a\\u202eb\\u200bc\\u2066d\"}", &st);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"Echo: abcd\""), out, "bidi overrides and zero-width characters are stripped from output");
    drop(&out);
    out = mcall("mcp__fault__big", "{\"bytes\":5000}", &st);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "4000 of 5000 characters cut") && strlen(out) < 1300, out,
              "a 5000-character output is capped at 1000 with a marker");
    drop(&out);
    out = mcall("mcp__nowhere__x", NULL, &st);
    CHECK_OUT(st == MCPLUG_NOT_FOUND && is_error(out, "not_found", "mcp__nowhere__x"), out, "an unknown pool name is not_found");
    drop(&out);
    out = mcall("mcp__broken__x", NULL, &st);
    CHECK_OUT(st == MCPLUG_NOT_FOUND && is_error(out, "not_found", "is failed"), out, "a failed server's name says so");
    drop(&out);

    {   /* a server request, answered through the manager's id */
        pthread_t t;
        struct asker a = {NULL, MCPLUG_OK};
        char *id_at, answer[256], id[64] = {0};
        pthread_create(&t, NULL, ask_thread, &a);
        ev = wait_mevent(bound_s(10), "\"type\":\"request\"", "sampling/createMessage", "\"server\":\"fault\"");
        CHECK(ev != NULL, "the fault server's sampling request arrives with its server");
        id_at = strstr(ev, "\"id\":\"m");
        CHECK_OUT(id_at != NULL, ev, "its id is the manager's own (m...)");
        sscanf(id_at + 6, "%63[^\"]", id);
        snprintf(answer, sizeof answer,
                 "{\"id\":\"%s\",\"result\":{\"role\":\"assistant\",\"content\":{\"type\":\"text\",\"text\":\"routed\"},\"model\":\"m\"}}", id);
        drop(&ev);
        st = mcplug_manager_respond(M, answer, &out);
        CHECK_STATUS(st, MCPLUG_OK, out, "respond by the manager id");
        drop(&out);
        pthread_join(t, NULL);
        CHECK_OUT(a.st == MCPLUG_OK && contains(a.out, "routed"), a.out, "the answer reached the server that asked");
        mcplug_string_free(a.out);
        st = mcplug_manager_respond(M, answer, &out);
        CHECK_OUT(st == MCPLUG_NOT_FOUND, out, "answering twice is not_found");
        drop(&out);
    }

    catalogue();
    started_calls();
    in_process();
    terminal_errors();

    out = mcall("mcp__fault__list_changed", NULL, &st);
    CHECK_STATUS(st, MCPLUG_OK, out, "the fault server says its tools changed");
    drop(&out);
    ev = wait_mevent(bound_s(10), "\"type\":\"tools_changed\"", "\"server\":\"fault\"", "mcp__fault__echo");
    CHECK(ev != NULL, "list_changed -> re-listed, a tools_changed event with the pool");
    drop(&ev);
    out = mcall("mcp__fault__list_changed", "{\"what\":\"resources\"}", &st);
    drop(&out);
    ev = wait_mevent(bound_s(10), "\"type\":\"resources_changed\"", "\"server\":\"fault\"", NULL);
    CHECK(ev != NULL, "resources list_changed -> a resources_changed event");
    drop(&ev);
    out = mcall("mcp__fault__list_changed", "{\"what\":\"prompts\"}", &st);
    drop(&out);
    ev = wait_mevent(bound_s(10), "\"type\":\"prompts_changed\"", "\"server\":\"fault\"", NULL);
    CHECK(ev != NULL, "prompts list_changed -> a prompts_changed event");
    drop(&ev);

    /* kill the fault server: failed, reconnect, tools back */
    pid1 = read_pid_file(fault_pid_path, 5);
    CHECK(pid1 > 0, "the fault server's pid (%ld)", pid1);
    unlink(fault_pid_path);
    kill((pid_t)pid1, SIGKILL);
    ev = wait_mevent(bound_s(10), "\"server\":\"fault\"", "\"state\":\"failed\"", NULL);
    CHECK(ev != NULL, "killed: state failed");
    drop(&ev);
    ev = wait_mevent(bound_s(10), "\"server\":\"fault\"", "\"state\":\"pending\"", "\"attempt\":1");
    CHECK(ev != NULL, "then pending, reconnect attempt 1");
    drop(&ev);
    ev = wait_mevent(bound_s(10), "\"server\":\"fault\"", "\"state\":\"connected\"", "mcp__fault__echo");
    CHECK(ev != NULL, "then connected again, its tools listed");
    drop(&ev);
    pid2 = read_pid_file(fault_pid_path, 5);
    CHECK(pid2 > 0 && pid2 != pid1, "a new process (%ld)", pid2);
    out = mcall("mcp__fault__echo", "{\"message\":\"back\"}", &st);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "Echo: back"), out, "its tools are back in the pool");
    drop(&out);

    st = mcplug_manager_set_enabled(M, "fault", 0, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"state\":\"disabled\""), out, "set_enabled(false) -> disabled");
    drop(&out);
    out = mcall("mcp__fault__echo", "{\"message\":\"x\"}", &st);
    CHECK_OUT(st == MCPLUG_NOT_FOUND && contains(out, "disabled"), out, "a disabled server's tools leave the pool");
    drop(&out);
    st = mcplug_manager_set_enabled(M, "fault", 1, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "set_enabled(true)");
    drop(&out);
    ev = wait_mevent(bound_s(10), "\"server\":\"fault\"", "\"state\":\"connected\"", NULL);
    CHECK(ev != NULL, "enabled again: connected");
    drop(&ev);

    t0 = now_s();
    st = mcplug_manager_reconnect(M, "slow", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"state\":\"connected\"") && now_s() - t0 >= 2.0, out,
              "reconnect(slow) waits for its attempt (%.2f s)", now_s() - t0);
    drop(&out);
    st = mcplug_manager_reconnect(M, "nobody", &out);
    CHECK_OUT(st == MCPLUG_NOT_FOUND, out, "reconnect of an unknown server is not_found");
    drop(&out);

    pid2 = read_pid_file(fault_pid_path, 5);
    mcplug_manager_free(M);
    CHECK(process_gone((pid_t)pid2) || process_dead((pid_t)pid2), "free: the servers are gone");

    fifty();
    printf("# %d checks\n", check_count);
    return 0;
}
