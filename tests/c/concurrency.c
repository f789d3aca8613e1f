/* Many threads on one handle, through the C ABI: 1,000 calls from 16 pthreads, each checked for
 * its own answer (against the fault server and against server-everything), with an event pump
 * and other requests running at the same time; a next_event blocked forever in one thread while
 * another frees the handle; a call in flight while another thread frees the handle.
 * MCPLUG_TEST_REDUCED=1 (valgrind) makes it 100 calls. */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>

#define THREADS 16

static int total_calls;

struct worker {
    mcplug_client *c;
    int index;
    int ok;
    char *first_bad; /* the first wrong answer, owned */
    int first_bad_call;
};

static void *worker_run(void *arg) {
    struct worker *w = arg;
    int call;
    for (call = w->index; call < total_calls; call += THREADS) {
        char args[128], want[128], *out = NULL;
        mcplug_status st;
        snprintf(args, sizeof args, "{\"message\":\"t%02d-c%04d\"}", w->index, call);
        snprintf(want, sizeof want, "\"text\":\"Echo: t%02d-c%04d\"", w->index, call);
        st = mcplug_client_call_tool(w->c, "echo", args, NULL, &out);
        if (st == MCPLUG_OK && contains(out, want)) {
            w->ok++;
            mcplug_string_free(out);
        } else if (w->first_bad == NULL) {
            w->first_bad = out;
            w->first_bad_call = call;
        } else {
            mcplug_string_free(out);
        }
    }
    return NULL;
}

struct pump {
    mcplug_client *c;
    atomic_int stop;
    int events;
    int bad_status;
};

static void *pump_run(void *arg) {
    struct pump *p = arg;
    while (!atomic_load(&p->stop)) {
        char *ev = NULL;
        mcplug_status st = mcplug_client_next_event(p->c, 50, &ev);
        if (st == MCPLUG_OK) p->events++;
        else if (st != MCPLUG_TIMEOUT) p->bad_status = (int)st;
        mcplug_string_free(ev);
    }
    return NULL;
}

struct side {
    mcplug_client *c;
    atomic_int stop;
    int ok, bad;
};

/* Other requests on the same handle while the calls run. */
static void *side_run(void *arg) {
    struct side *s = arg;
    while (!atomic_load(&s->stop)) {
        char *out = NULL;
        mcplug_status st = mcplug_client_list_tools(s->c, NULL, &out);
        if (st == MCPLUG_OK && contains(out, "\"name\":\"echo\"")) s->ok++;
        else s->bad++;
        mcplug_string_free(out);
        st = mcplug_client_request(s->c, "ping", NULL, NULL, &out);
        if (st == MCPLUG_OK && strcmp(out, "{}") == 0) s->ok++;
        else s->bad++;
        mcplug_string_free(out);
    }
    return NULL;
}

static void many_calls(const char *server, const char *what) {
    struct worker w[THREADS];
    pthread_t th[THREADS], pump_th, side_th;
    struct pump pump;
    struct side side;
    mcplug_client *c = connect_or_die(server, NULL, what);
    int i, ok = 0;
    double t0 = now_s();

    memset(&pump, 0, sizeof pump);
    pump.c = c;
    memset(&side, 0, sizeof side);
    side.c = c;
    CHECK(pthread_create(&pump_th, NULL, pump_run, &pump) == 0, "an event pump thread runs on the handle");
    CHECK(pthread_create(&side_th, NULL, side_run, &side) == 0, "a thread sends list_tools and ping meanwhile");
    for (i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].c = c;
        w[i].index = i;
        CHECK(pthread_create(&th[i], NULL, worker_run, &w[i]) == 0, "worker thread %d started", i);
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        ok += w[i].ok;
        CHECK_OUT(w[i].first_bad == NULL, w[i].first_bad, "thread %d: every answer was its own (first bad: call %d)", i,
                  w[i].first_bad_call);
    }
    CHECK(ok == total_calls, "%s: %d of %d calls from %d threads got their own answer (%.2f s)", what, ok, total_calls,
          THREADS, now_s() - t0);
    atomic_store(&side.stop, 1);
    atomic_store(&pump.stop, 1);
    pthread_join(side_th, NULL);
    pthread_join(pump_th, NULL);
    CHECK(side.bad == 0 && side.ok > 0, "the concurrent list_tools/ping all succeeded (%d ok, %d bad)", side.ok, side.bad);
    CHECK(pump.bad_status == 0, "the event pump saw only events and timeouts (%d events)", pump.events);
    mcplug_client_free(c);
}

/* Runs `fn` on a thread; the main thread waits for it at most `bound` seconds. */
struct bounded {
    pthread_t th;
    atomic_int done;
    void *(*fn)(void *);
    void *arg;
};

static void *bounded_run(void *arg) {
    struct bounded *b = arg;
    b->fn(b->arg);
    atomic_store(&b->done, 1);
    return NULL;
}

static int join_within(struct bounded *b, double bound) {
    double until = now_s() + bound;
    while (!atomic_load(&b->done)) {
        if (now_s() > until) return 0;
        sleep_ms(5);
    }
    pthread_join(b->th, NULL);
    return 1;
}

struct blocked_pull {
    mcplug_client *c;
    mcplug_status st;
    char *out;
    int pulled; /* events pulled before the end */
};

static void *blocked_pull_run(void *arg) {
    struct blocked_pull *p = arg;
    /* Drain what is queued, then block forever; the free on the main thread must end it. */
    for (;;) {
        p->st = mcplug_client_next_event(p->c, -1, &p->out);
        if (p->st != MCPLUG_OK || contains(p->out, "\"type\":\"closed\"")) return NULL;
        p->pulled++;
        mcplug_string_free(p->out);
        p->out = NULL;
    }
}

static void free_while_next_event_blocks(const char *server) {
    struct blocked_pull p;
    struct bounded b;
    double t0;
    mcplug_client *c = connect_or_die(server, NULL, "the fault server (free vs next_event)");
    memset(&p, 0, sizeof p);
    p.c = c;
    memset(&b, 0, sizeof b);
    b.fn = blocked_pull_run;
    b.arg = &p;
    CHECK(pthread_create(&b.th, NULL, bounded_run, &b) == 0, "a thread blocks in next_event(-1)");
    sleep_ms(300);
    CHECK(!atomic_load(&b.done), "... and is still blocked after 0.3 s");
    t0 = now_s();
    mcplug_client_free(c);
    CHECK(now_s() - t0 < bound_s(3.0), "mcplug_client_free on the main thread returned in %.2f s", now_s() - t0);
    CHECK(join_within(&b, bound_s(2.0)), "the blocked next_event returned");
    CHECK_OUT(p.st == MCPLUG_CLOSED && is_error(p.out, "closed", NULL), p.out,
              "... with CLOSED, so a pump loop stops before the handle is gone (got %s)", status_name(p.st));
    mcplug_string_free(p.out);
}

struct pending_call {
    mcplug_client *c;
    mcplug_status st;
    char *out;
    double at;
};

static void *pending_call_run(void *arg) {
    struct pending_call *p = arg;
    p->st = mcplug_client_call_tool(p->c, "sleep", "{\"ms\":20000}", NULL, &p->out);
    p->at = now_s();
    return NULL;
}

static void free_while_call_pending(const char *server) {
    struct pending_call p;
    struct bounded b;
    double t0;
    mcplug_client *c = connect_or_die(server, NULL, "the fault server (free vs a call)");
    memset(&p, 0, sizeof p);
    p.c = c;
    memset(&b, 0, sizeof b);
    b.fn = pending_call_run;
    b.arg = &p;
    CHECK(pthread_create(&b.th, NULL, bounded_run, &b) == 0, "a thread calls sleep 20 s (no timeout)");
    sleep_ms(300);
    t0 = now_s();
    mcplug_client_free(c);
    CHECK(now_s() - t0 < bound_s(3.0), "mcplug_client_free returned in %.2f s", now_s() - t0);
    CHECK(join_within(&b, bound_s(2.0)), "the pending call returned");
    CHECK_STATUS(p.st, MCPLUG_CLOSED, p.out, "... with CLOSED (got %s)", status_name(p.st));
    CHECK_OUT(is_error(p.out, "closed", NULL), p.out, "... and a closed error object");
    CHECK(p.at - t0 < bound_s(1.0), "... %.3f s after free began", p.at - t0);
    mcplug_string_free(p.out);
}

/* The clean way to stop an event pump: close, join the pump (it sees CLOSED after draining, the
 * final {"type":"closed"} event included), then free. */
static void *draining_pull_run(void *arg) {
    struct blocked_pull *p = arg;
    for (;;) {
        p->st = mcplug_client_next_event(p->c, -1, &p->out);
        if (p->st != MCPLUG_OK) return NULL;
        if (contains(p->out, "\"type\":\"closed\"")) p->pulled += 1000; /* marks the final event */
        else p->pulled++;
        mcplug_string_free(p->out);
        p->out = NULL;
    }
}

static void close_then_join_then_free(const char *server) {
    struct blocked_pull p;
    struct bounded b;
    char *out = NULL;
    mcplug_status st;
    mcplug_client *c = connect_or_die(server, NULL, "the fault server (close, join, free)");
    memset(&p, 0, sizeof p);
    p.c = c;
    memset(&b, 0, sizeof b);
    b.fn = draining_pull_run;
    b.arg = &p;
    CHECK(pthread_create(&b.th, NULL, bounded_run, &b) == 0, "a pump thread loops on next_event(-1) until CLOSED");
    st = mcplug_client_call_tool(c, "stderr", "{\"line\":\"before close\"}", NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "a call that makes the server write to stderr");
    mcplug_string_free(out);
    sleep_ms(200);
    st = mcplug_client_close(c, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "mcplug_client_close -> OK");
    mcplug_string_free(out);
    CHECK(join_within(&b, bound_s(2.0)), "the pump ended");
    CHECK_OUT(p.st == MCPLUG_CLOSED && is_error(p.out, "closed", NULL), p.out, "... on CLOSED (got %s)", status_name(p.st));
    mcplug_string_free(p.out);
    CHECK(p.pulled >= 1001, "... after the stderr event and the final closed event (%d)", p.pulled);
    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"late\"}", NULL, &out);
    CHECK_STATUS(st, MCPLUG_CLOSED, out, "a call after close -> CLOSED");
    mcplug_string_free(out);
    st = mcplug_client_close(c, NULL);
    CHECK(st == MCPLUG_OK, "closing twice is fine");
    mcplug_client_free(c);
    CHECK(mcplug_client_close(NULL, &out) == MCPLUG_INVALID_ARGUMENT, "mcplug_client_close(NULL) -> INVALID_ARGUMENT");
    mcplug_string_free(out);
}

int main(void) {
    char fault[4096], everything[4096];
    test_init();
    total_calls = reduced() ? 100 : 1000;
    fault_server_json(fault, sizeof fault, "normal");
    server_json(everything, sizeof everything, NULL, peer("MCPLUG_NODE"), peer("MCPLUG_EVERYTHING"), (const char *)NULL);
    many_calls(fault, "the fault server");
    many_calls(everything, "server-everything");
    free_while_next_event_blocks(fault);
    free_while_call_pending(fault);
    close_then_join_then_free(fault);
    return finish("concurrency");
}
