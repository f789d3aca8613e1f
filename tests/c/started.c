/* Started calls, through the C ABI: mcplug_client_call_tool_start / _request_start, their
 * completion events, mcplug_client_event_fd (poll) and mcplug_client_next_events (many at once),
 * mcplug_client_take_events (into the host's buffer, one event per line), the host reading the
 * server's stdout itself (mcplug_client_stdout_fd, mcplug_client_feed), mcplug_client_cancel_call — against the fault server (legacy era: the direct way), the Python
 * SDK's 2026-07-28 server (the task way), and server-everything. Every started call must
 * complete exactly once: with its own answer, its timeout, its cancel, or the connection's end
 * (before the final `closed` event). */
#include "check.h"

#include <inttypes.h>
#include <poll.h>
#include <pthread.h>

#define MAX_CALLS 2000

/* What the test knows of each started call. */
static int completed[MAX_CALLS + 1];
static uint64_t numbers[MAX_CALLS + 1];

static int readable(int fd, int ms) {
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* The value of "call": in an event, or 0. */
static uint64_t call_of(const char *ev) {
    const char *p = strstr(ev, "\"call\":");
    return p ? (uint64_t)strtoull(p + 7, NULL, 10) : 0;
}

/* Splits a next_events array into its top-level objects, calling fn on each (as a copy). */
static void each_event(const char *array, void (*fn)(const char *ev, void *ctx), void *ctx) {
    const char *p = array;
    if (*p != '[') CHECK_OUT(0, array, "next_events gives a JSON array");
    p++;
    while (*p && *p != ']') {
        const char *start = p;
        int depth = 0, in_str = 0;
        for (; *p; p++) {
            if (in_str) {
                if (*p == '\\') p++;
                else if (*p == '"') in_str = 0;
            } else if (*p == '"') in_str = 1;
            else if (*p == '{' || *p == '[') depth++;
            else if (*p == '}' || *p == ']') {
                if (--depth == 0) {
                    p++;
                    break;
                }
            }
        }
        {
            size_t n = (size_t)(p - start);
            char *one = malloc(n + 1);
            memcpy(one, start, n);
            one[n] = '\0';
            fn(one, ctx);
            free(one);
        }
        if (*p == ',') p++;
    }
}

struct tally {
    int n;          /* calls started (index 1..n) */
    int done;       /* completions seen */
    int bad;        /* wrong or duplicate completions */
    int others;     /* events that are not completions */
    const char *want_kind; /* NULL: results expected; else this error kind */
    int saw_closed;
    int completion_after_closed;
};

static void on_event(const char *ev, void *ctx) {
    struct tally *t = ctx;
    uint64_t call;
    int i, found = 0;
    if (contains(ev, "\"type\":\"closed\"")) {
        t->saw_closed = 1;
        return;
    }
    if (!contains(ev, "\"type\":\"completion\"")) {
        t->others++;
        return;
    }
    if (t->saw_closed) t->completion_after_closed++;
    call = call_of(ev);
    for (i = 1; i <= t->n; i++) {
        if (numbers[i] == call) {
            found = 1;
            if (completed[i]++) {
                t->bad++;
                printf("    duplicate completion: %s\n", ev);
            } else if (t->want_kind == NULL) {
                char want[64];
                snprintf(want, sizeof want, "\"text\":\"Echo: m%d\"", i);
                if (!contains(ev, want)) {
                    t->bad++;
                    printf("    wrong answer for m%d: %s\n", i, ev);
                }
            } else {
                char want[64];
                snprintf(want, sizeof want, "\"kind\":\"%s\"", t->want_kind);
                if (!contains(ev, want)) {
                    t->bad++;
                    printf("    wanted %s for call %d: %s\n", t->want_kind, i, ev);
                }
            }
            t->done++;
            break;
        }
    }
    if (!found) {
        t->bad++;
        printf("    completion of an unknown call: %s\n", ev);
    }
}

/* Polls the fd and drains events until `t->done == want` or the bound passes. */
static void pump_until(mcplug_client *c, int fd, struct tally *t, int want, double bound) {
    double until = now_s() + bound;
    while (t->done < want && now_s() < until) {
        if (!readable(fd, 100)) continue;
        for (;;) {
            char *out = NULL;
            mcplug_status st = mcplug_client_next_events(c, 16, 0, &out);
            if (st == MCPLUG_TIMEOUT) {
                drop(&out);
                break;
            }
            if (st == MCPLUG_CLOSED) {
                drop(&out);
                return;
            }
            if (st != MCPLUG_OK) CHECK_STATUS(st, MCPLUG_OK, out, "next_events -> OK");
            each_event(out, on_event, t);
            drop(&out);
        }
    }
}

static void reset(void) {
    memset(completed, 0, sizeof completed);
    memset(numbers, 0, sizeof numbers);
}

static void burst_of_echoes(mcplug_client *c, int n, const char *what) {
    struct tally t = {0};
    char *out = NULL;
    int fd = -1, i;
    mcplug_status st = mcplug_client_event_fd(c, &fd, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "%s: event_fd -> OK", what);
    CHECK(out == NULL && fd >= 0, "%s: event_fd gives a descriptor and no string", what);
    reset();
    t.n = n;
    for (i = 1; i <= n; i++) {
        char args[64];
        snprintf(args, sizeof args, "{\"message\":\"m%d\"}", i);
        out = (char *)"untouched";
        st = mcplug_client_call_tool_start(c, "echo", args, NULL, &numbers[i], &out);
        if (st != MCPLUG_OK) {
            CHECK_STATUS(st, MCPLUG_OK, out, "%s: start call %d", what, i);
        }
        if (out != NULL) CHECK(0, "%s: a started call leaves *out NULL", what);
    }
    CHECK(1, "%s: %d calls started without waiting", what, n);
    for (i = 2; i <= n; i++)
        if (numbers[i] == numbers[i - 1]) CHECK(0, "call numbers are distinct");
    pump_until(c, fd, &t, n, bound_s(20.0));
    CHECK(t.done == n && t.bad == 0, "%s: %d of %d completions, each its own answer, %d bad", what,
          t.done, n, t.bad);
    CHECK(!readable(fd, 0), "%s: the descriptor is quiet once every event was pulled", what);
    close(fd);
}

/* The same, with a thread that blocks in next_events (which then reads the server itself). */
static void burst_blocking(mcplug_client *c, int n, const char *what) {
    struct tally t = {0};
    char *out = NULL;
    double until = now_s() + bound_s(20.0);
    int i;
    mcplug_status st;
    reset();
    t.n = n;
    for (i = 1; i <= n; i++) {
        char args[64];
        snprintf(args, sizeof args, "{\"message\":\"m%d\"}", i);
        st = mcplug_client_call_tool_start(c, "echo", args, i % 8 && i < n ? "{\"defer\":true}" : NULL,
                                           &numbers[i], &out);
        if (st != MCPLUG_OK) CHECK_STATUS(st, MCPLUG_OK, out, "%s: start call %d", what, i);
    }
    while (t.done < n && now_s() < until) {
        st = mcplug_client_next_events(c, 32, 1000, &out);
        if (st == MCPLUG_TIMEOUT) {
            drop(&out);
            continue;
        }
        if (st != MCPLUG_OK) CHECK_STATUS(st, MCPLUG_OK, out, "%s: next_events", what);
        each_event(out, on_event, &t);
        drop(&out);
    }
    CHECK(t.done == n && t.bad == 0,
          "%s: %d of %d completions through a blocking next_events (deferred starts), %d bad", what, t.done,
          n, t.bad);
}

/* Drains a descriptor the way an event loop that reads it does (Node's sockets). */
static void read_fd(int fd) {
    char sink[64];
    while (readable(fd, 0) && read(fd, sink, sizeof sink) > 0) {
    }
}

/* The same burst, pulled with take_events into a buffer that starts too small and grows; the host
 * reads the descriptor itself, so the pulls leave it alone. Each completion with a result has the
 * fixed prefix the header promises. */
static void burst_take_events(mcplug_client *c, int n, const char *what) {
    struct tally t = {0};
    char *out = NULL, *buf = NULL;
    size_t cap = 16, len = 0;
    int fd = -1, i, grew = 0, lines = 0, prefixed = 0, results = 0;
    double until;
    mcplug_status st = mcplug_client_event_fd(c, &fd, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "%s: event_fd -> OK", what);
    buf = malloc(cap);
    reset();
    t.n = n;
    for (i = 1; i <= n; i++) {
        char args[64];
        snprintf(args, sizeof args, "{\"message\":\"m%d\"}", i);
        st = mcplug_client_call_tool_start(c, "echo", args, i > 1 ? "{\"defer\":true}" : NULL, &numbers[i], &out);
        if (st != MCPLUG_OK) CHECK_STATUS(st, MCPLUG_OK, out, "%s: start call %d", what, i);
    }
    st = mcplug_client_flush(c, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "%s: flush", what);
    until = now_s() + bound_s(20.0);
    while (t.done < n && now_s() < until) {
        if (!readable(fd, 100)) continue;
        read_fd(fd);
        for (;;) {
            char *p, *end;
            st = mcplug_client_take_events(c, 16, 0, buf, cap, &len, &out);
            if (st == MCPLUG_TIMEOUT) {
                drop(&out);
                break;
            }
            if (st != MCPLUG_OK) CHECK_STATUS(st, MCPLUG_OK, out, "%s: take_events -> OK", what);
            if (out != NULL) CHECK(0, "%s: take_events leaves *out NULL on OK", what);
            if (len > cap) {
                cap = len;
                buf = realloc(buf, cap);
                grew++;
                continue;
            }
            for (p = buf; p < buf + len; p = end + 1) {
                char *line;
                end = memchr(p, '\n', (size_t)(buf + len - p));
                if (end == NULL) CHECK(0, "%s: every event ends with a newline", what);
                line = malloc((size_t)(end - p) + 1);
                memcpy(line, p, (size_t)(end - p));
                line[end - p] = '\0';
                lines++;
                if (contains(line, "\"result\":")) {
                    char prefix[64];
                    results++;
                    snprintf(prefix, sizeof prefix, "{\"type\":\"completion\",\"call\":%" PRIu64 ",\"result\":{",
                             call_of(line));
                    if (strncmp(line, prefix, strlen(prefix)) == 0 && line[end - p - 1] == '}') prefixed++;
                }
                on_event(line, &t);
                free(line);
            }
        }
    }
    CHECK(t.done == n && t.bad == 0, "%s: %d of %d completions through take_events, %d bad", what, t.done, n,
          t.bad);
    CHECK(grew >= 1 && cap > 16, "%s: a buffer too small for an event grows to the size it asked for (%zu)",
          what, cap);
    CHECK(lines == t.done + t.others && results == n && prefixed == n,
          "%s: one line per event, each result completion written with the fixed prefix (%d of %d)", what,
          prefixed, results);
    CHECK(!readable(fd, 0), "%s: the descriptor is quiet: the host read it, the pulls did not", what);

    /* A host that does not read the descriptor: the pull that took the last event left it
     * readable; the next pull finds nothing and empties it. */
    cap = 4096;
    buf = realloc(buf, cap);
    st = mcplug_client_call_tool_start(c, "echo", "{\"message\":\"unread\"}", NULL, &numbers[1], &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "%s: start one more", what);
    CHECK(readable(fd, (int)(bound_s(5.0) * 1000)), "%s: the descriptor wakes for it", what);
    st = mcplug_client_take_events(c, 16, 0, buf, cap, &len, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "%s: take_events", what);
    CHECK(len < cap, "%s: it fits", what);
    buf[len] = '\0';
    CHECK_OUT(call_of(buf) == numbers[1] && contains(buf, "Echo: unread"), buf, "%s: its completion", what);
    CHECK(readable(fd, 0), "%s: the pull that took the last event left the descriptor as it was", what);
    st = mcplug_client_take_events(c, 16, 0, buf, cap, &len, &out);
    CHECK_STATUS(st, MCPLUG_TIMEOUT, out, "%s: then nothing left", what);
    drop(&out);
    CHECK(!readable(fd, 0), "%s: a pull that finds nothing leaves the descriptor quiet", what);

    st = mcplug_client_take_events(c, 16, 0, buf, cap, NULL, &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "%s: take_events with len NULL -> INVALID_ARGUMENT", what);
    CHECK(is_error(out, "invalid_argument", "`len`"), "the error names `len`");
    drop(&out);
    st = mcplug_client_take_events(c, 16, 0, NULL, 8, &len, &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "%s: take_events with buf NULL, cap 8 -> INVALID_ARGUMENT", what);
    drop(&out);
    st = mcplug_client_take_events(c, 16, 0, NULL, 0, &len, &out);
    CHECK_STATUS(st, MCPLUG_TIMEOUT, out, "%s: buf NULL with cap 0 is fine (nothing waits)", what);
    drop(&out);
    free(buf);
    close(fd);
}

/* Feeds what a read of the server's stdout gave, and handles the events it made. */
static void feed_lines(mcplug_client *c, const char *data, size_t n, char *buf, size_t cap, struct tally *t,
                       const char *what) {
    size_t len = 0;
    char *out = NULL, *p, *end;
    mcplug_status st = mcplug_client_feed(c, data, n, 64, buf, cap, &len, &out);
    if (st != MCPLUG_OK) CHECK_STATUS(st, MCPLUG_OK, out, "%s: feed -> OK", what);
    if (len > cap) CHECK(0, "%s: events fit the test's buffer (%zu)", what, len);
    for (p = buf; p < buf + len; p = end + 1) {
        end = memchr(p, '\n', (size_t)(buf + len - p));
        *end = '\0';
        on_event(p, t);
    }
}

struct blocking_call {
    mcplug_client *c;
    volatile int ok;
};

static void *blocking_echo(void *arg) {
    struct blocking_call *b = arg;
    char *out = NULL;
    mcplug_status st = mcplug_client_call_tool(b->c, "echo", "{\"message\":\"fed\"}", NULL, &out);
    b->ok = st == MCPLUG_OK && contains(out, "Echo: fed");
    drop(&out);
    return NULL;
}

/* The host reads the server's stdout itself, in small reads (lines arrive in pieces), and feeds
 * the library: started calls complete, a call blocked on another thread gets its answer from the
 * feeding, and once the host stops (feed with 0 bytes) the library reads by itself again. */
static void host_reads_stdout(mcplug_client *c, int n, const char *what) {
    struct tally t = {0};
    struct blocking_call b = {c, 0};
    pthread_t th;
    char *out = NULL, chunk[37], buf[1 << 16];
    size_t len = 0;
    int fd = -1, efd = -1, i, reads = 0;
    double until;
    mcplug_status st = mcplug_client_stdout_fd(c, NULL, &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "%s: stdout_fd with fd NULL -> INVALID_ARGUMENT", what);
    drop(&out);
    st = mcplug_client_event_fd(c, &efd, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "%s: event_fd", what);
    st = mcplug_client_stdout_fd(c, &fd, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "%s: stdout_fd -> OK", what);
    CHECK(out == NULL && fd >= 0, "%s: stdout_fd gives a descriptor and no string", what);
    reset();
    t.n = n;
    for (i = 1; i <= n; i++) {
        char args[64];
        snprintf(args, sizeof args, "{\"message\":\"m%d\"}", i);
        st = mcplug_client_call_tool_start(c, "echo", args, NULL, &numbers[i], &out);
        if (st != MCPLUG_OK) CHECK_STATUS(st, MCPLUG_OK, out, "%s: start call %d", what, i);
    }
    CHECK(pthread_create(&th, NULL, blocking_echo, &b) == 0, "%s: a thread blocks in call_tool", what);
    until = now_s() + bound_s(20.0);
    while ((t.done < n || !b.ok) && now_s() < until) {
        struct pollfd p[2] = {{fd, POLLIN, 0}, {efd, POLLIN, 0}};
        if (poll(p, 2, 100) <= 0) continue;
        if (p[0].revents) {
            ssize_t r = read(fd, chunk, sizeof chunk);
            if (r <= 0) break;
            reads++;
            feed_lines(c, chunk, (size_t)r, buf, sizeof buf, &t, what);
        }
        if (p[1].revents) {
            read_fd(efd);
            while (mcplug_client_take_events(c, 64, 0, buf, sizeof buf, &len, &out) == MCPLUG_OK) {
                char *q, *end;
                for (q = buf; q < buf + len; q = end + 1) {
                    end = memchr(q, '\n', (size_t)(buf + len - q));
                    *end = '\0';
                    on_event(q, &t);
                }
            }
            drop(&out);
        }
    }
    pthread_join(th, NULL);
    CHECK(t.done == n && t.bad == 0, "%s: %d of %d completions from the host's feeding (%d reads of <= 37 bytes: lines in pieces), %d bad",
          what, t.done, n, reads, t.bad);
    CHECK(b.ok, "%s: the call blocked on another thread got its answer from the feeding", what);

    st = mcplug_client_feed(c, chunk, 1, 8, buf, sizeof buf, NULL, &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "%s: feed with events_len NULL -> INVALID_ARGUMENT", what);
    drop(&out);
    st = mcplug_client_feed(c, NULL, 5, 8, buf, sizeof buf, &len, &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "%s: feed with data NULL, len 5 -> INVALID_ARGUMENT", what);
    drop(&out);

    /* The host stops reading: the library reads by itself again. */
    st = mcplug_client_feed(c, NULL, 0, 8, buf, sizeof buf, &len, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "%s: feed with nothing (the host stops reading) -> OK", what);
    close(fd);
    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"again\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "Echo: again"), out, "%s: then a blocking call is read by the library", what);
    drop(&out);
    read_fd(efd);
    close(efd);
}

static void legacy_fault_server(void) {
    char server[1024], *out = NULL;
    uint64_t call = 0, sleeper = 0;
    mcplug_status st;
    mcplug_client *c;
    int fd = -1, n = reduced() ? 100 : MAX_CALLS;
    struct tally t = {0};

    fault_server_json(server, sizeof server, "normal");
    c = connect_or_die(server, NULL, "the fault server (legacy era)");
    burst_of_echoes(c, n, "fault server");
    burst_blocking(c, n, "fault server");
    burst_take_events(c, n, "fault server");
    host_reads_stdout(c, n, "fault server");

    /* A thread blocked in next_events while a started call is in flight still wakes at once for
     * an event that does not come from the server (here another call's timer). */
    {
        uint64_t slow = 0, timed = 0;
        double t0;
        st = mcplug_client_call_tool_start(c, "sleep", "{\"ms\":1500}", NULL, &slow, &out);
        CHECK_STATUS(st, MCPLUG_OK, out, "start sleep 1500 ms");
        st = mcplug_client_call_tool_start(c, "sleep", "{\"ms\":1500}", "{\"timeout_ms\":100}", &timed, &out);
        CHECK_STATUS(st, MCPLUG_OK, out, "start another with timeout 100 ms");
        t0 = now_s();
        st = mcplug_client_next_events(c, 8, 5000, &out);
        CHECK_OUT(st == MCPLUG_OK && call_of(out) == timed && contains(out, "\"kind\":\"timeout\""), out,
                  "the blocked next_events returns the timer's completion");
        CHECK(now_s() - t0 < bound_s(0.8), "within %.0f ms of the 100 ms timer, not when the server answers",
              (now_s() - t0) * 1000);
        drop(&out);
        st = mcplug_client_next_events(c, 8, 5000, &out);
        CHECK_OUT(st == MCPLUG_OK && call_of(out) == slow && contains(out, "slept"), out,
                  "then the slow call's answer");
        drop(&out);
    }

    /* Bad input: an error now, and no completion event later. */
    st = mcplug_client_call_tool_start(c, "echo", "[1]", NULL, &call, &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "start with non-object arguments -> INVALID_ARGUMENT");
    CHECK(is_error(out, "invalid_argument", "arguments_json"), "the error names arguments_json");
    drop(&out);
    st = mcplug_client_call_tool_start(c, "echo", NULL, NULL, NULL, &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "start with call NULL -> INVALID_ARGUMENT");
    CHECK(is_error(out, "invalid_argument", "`call`"), "the error names `call`");
    drop(&out);
    st = mcplug_client_request_start(c, "tools/list", NULL, "{\"all_pages\":true}", &call, &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "request_start with all_pages -> INVALID_ARGUMENT");
    drop(&out);
    st = mcplug_client_event_fd(c, NULL, &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "event_fd with fd NULL -> INVALID_ARGUMENT");
    drop(&out);
    st = mcplug_client_next_events(c, 8, 0, &out);
    CHECK_STATUS(st, MCPLUG_TIMEOUT, out, "no event left behind by the refused starts");
    drop(&out);

    /* An unknown tool completes with the server's rpc error. */
    st = mcplug_client_call_tool_start(c, "no-such-tool", NULL, NULL, &call, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "start an unknown tool -> OK (the error comes as its completion)");
    st = mcplug_client_next_event(c, 5000, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"type\":\"completion\"") && call_of(out) == call &&
                  contains(out, "\"kind\":\"rpc\"") && contains(out, "\"code\":-32602"),
              out, "its completion carries the rpc error with the server's code");
    drop(&out);

    /* cancel_call: the completion says cancelled, the server hears notifications/cancelled. */
    st = mcplug_client_call_tool_start(c, "sleep", "{\"ms\":300}", NULL, &sleeper, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "start sleep 300 ms");
    st = mcplug_client_cancel_call(c, sleeper, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"cancelled\":true"), out, "cancel_call -> cancelled:true");
    drop(&out);
    st = mcplug_client_next_event(c, 5000, &out);
    CHECK_OUT(st == MCPLUG_OK && call_of(out) == sleeper && contains(out, "\"kind\":\"cancelled\""), out,
              "the cancelled call completes with kind cancelled");
    drop(&out);
    st = mcplug_client_cancel_call(c, sleeper, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"cancelled\":false"), out,
              "cancelling it again -> cancelled:false (no longer in flight)");
    drop(&out);
    st = mcplug_client_cancel_call(c, (uint64_t)987654321, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"cancelled\":false"), out, "an unknown call -> cancelled:false");
    drop(&out);
    {
        char want[64];
        snprintf(want, sizeof want, "%" PRIu64, sleeper);
        st = mcplug_client_call_tool(c, "cancelled_ids", NULL, NULL, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, want), out,
                  "the server was sent notifications/cancelled for request %s", want);
        drop(&out);
    }

    /* The task way: a timer, and a tag cancelled with mcplug_cancel. */
    st = mcplug_client_call_tool_start(c, "sleep", "{\"ms\":400}", "{\"timeout_ms\":100}", &call, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "start sleep 400 ms with timeout_ms 100");
    st = mcplug_client_next_event(c, 5000, &out);
    CHECK_OUT(st == MCPLUG_OK && call_of(out) == call && contains(out, "\"kind\":\"timeout\""), out,
              "it completes with kind timeout");
    drop(&out);
    sleep_ms(400);
    st = mcplug_client_call_tool_start(c, "sleep", "{\"ms\":300}", "{\"tag\":\"started-tag\"}", &call, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "start sleep with a tag");
    sleep_ms(20);
    CHECK(mcplug_cancel("started-tag") == MCPLUG_OK, "mcplug_cancel finds the started call by its tag");
    st = mcplug_client_next_event(c, 5000, &out);
    CHECK_OUT(st == MCPLUG_OK && call_of(out) == call && contains(out, "\"kind\":\"cancelled\""), out,
              "the tagged call completes with kind cancelled");
    drop(&out);
    sleep_ms(300);

    /* A started request, and a blocking call made while started ones are in flight. */
    st = mcplug_client_request_start(c, "tools/list", NULL, NULL, &call, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "request_start tools/list (default request timeout: the task way)");
    st = mcplug_client_next_event(c, 5000, &out);
    CHECK_OUT(st == MCPLUG_OK && call_of(out) == call && contains(out, "\"result\":{\"tools\":["), out,
              "its completion carries the tools");
    drop(&out);
    reset();
    t.n = 3;
    for (int i = 1; i <= 3; i++) {
        char args[64];
        snprintf(args, sizeof args, "{\"message\":\"m%d\"}", i);
        st = mcplug_client_call_tool_start(c, "echo", args, NULL, &numbers[i], &out);
        CHECK_STATUS(st, MCPLUG_OK, out, "start m%d", i);
    }
    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"blocking\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "Echo: blocking"), out, "a blocking call among started ones");
    drop(&out);
    st = mcplug_client_event_fd(c, &fd, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "a second event_fd");
    pump_until(c, fd, &t, 3, bound_s(5.0));
    CHECK(t.done == 3 && t.bad == 0, "the started calls around it completed, each with its answer");

    /* Close with calls in flight: each completes with `closed`, before the final event. */
    reset();
    memset(&t, 0, sizeof t);
    t.n = 4;
    t.want_kind = "closed";
    st = mcplug_client_call_tool_start(c, "sleep", "{\"ms\":2000}", NULL, &numbers[1], &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "start a long sleep");
    for (int i = 2; i <= 4; i++) {
        /* long calls too: the fault server runs calls side by side, so a quick one could finish
         * before the close */
        st = mcplug_client_call_tool_start(c, "sleep", "{\"ms\":2000}", i == 4 ? "{\"timeout_ms\":60000}" : NULL,
                                           &numbers[i], &out);
        CHECK_STATUS(st, MCPLUG_OK, out, "start long call %d beside it", i);
    }
    st = mcplug_client_close(c, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "close with 4 started calls in flight");
    drop(&out);
    CHECK(readable(fd, 0), "the descriptor is readable after close");
    for (;;) {
        st = mcplug_client_next_events(c, 2, 0, &out);
        if (st != MCPLUG_OK) break;
        each_event(out, on_event, &t);
        drop(&out);
    }
    CHECK_STATUS(st, MCPLUG_CLOSED, out, "then next_events -> CLOSED");
    drop(&out);
    CHECK(t.done == 4 && t.bad == 0, "all 4 completed with kind closed (%d, %d bad)", t.done, t.bad);
    CHECK(t.saw_closed && t.completion_after_closed == 0, "every completion came before the closed event");
    CHECK(readable(fd, 0), "the descriptor stays readable once closed");
    close(fd);
    st = mcplug_client_call_tool_start(c, "echo", NULL, NULL, &call, &out);
    CHECK_STATUS(st, MCPLUG_CLOSED, out, "starting on a closed handle -> CLOSED");
    drop(&out);
    mcplug_client_free(c);

    /* The server dies with calls in flight. */
    c = connect_or_die(server, NULL, "the fault server again");
    reset();
    memset(&t, 0, sizeof t);
    t.n = 2;
    t.want_kind = "closed";
    /* The tagged call goes first: a call started after the crash request could find the
     * connection already closed (CLOSED at once, as it should), and the test would then depend on
     * how soon the library saw the server die. */
    st = mcplug_client_call_tool_start(c, "sleep", "{\"ms\":5000}", "{\"tag\":\"t-crash\"}", &numbers[1], &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "start a tagged call");
    st = mcplug_client_call_tool_start(c, "crash", NULL, NULL, &numbers[2], &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "start crash behind it");
    st = mcplug_client_event_fd(c, &fd, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "event_fd");
    pump_until(c, fd, &t, 2, bound_s(5.0));
    CHECK(t.done == 2 && t.bad == 0, "both completed with kind closed when the server died");
    close(fd);
    mcplug_client_free(c);
}

static void modern_server(void) {
    char server[1024], *out = NULL;
    mcplug_client *c;
    mcplug_status st;
    uint64_t call = 0;
    server_json(server, sizeof server, NULL, peer("MCPLUG_PYTHON"), peer("MCPLUG_MODERN_SERVER"), (const char *)NULL);
    c = connect_or_die(server, NULL, "the Python SDK server (2026-07-28)");
    st = mcplug_client_call_tool_start(c, "echo", "{\"message\":\"modern\"}", NULL, &call, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "start echo on the modern server");
    st = mcplug_client_next_event(c, 10000, &out);
    while (st == MCPLUG_OK && !contains(out, "\"type\":\"completion\"")) {
        drop(&out);
        st = mcplug_client_next_event(c, 10000, &out);
    }
    CHECK_OUT(st == MCPLUG_OK && call_of(out) == call && contains(out, "modern"), out,
              "its completion carries the answer");
    drop(&out);
    mcplug_client_free(c);
}

static void everything_server(void) {
    char server[1024];
    mcplug_client *c;
    server_json(server, sizeof server, NULL, peer("MCPLUG_NODE"), peer("MCPLUG_EVERYTHING"), (const char *)NULL);
    c = connect_or_die(server, NULL, "server-everything");
    burst_of_echoes(c, reduced() ? 50 : 500, "server-everything");
    mcplug_client_free(c);
}

int main(void) {
    legacy_fault_server();
    modern_server();
    everything_server();
    printf("# %d checks passed\n", check_count);
    return 0;
}
