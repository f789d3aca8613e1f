/* Servers that misbehave, through the C ABI (tests/servers/fault_server.py): a server that exits
 * at once, prints garbage, never answers initialize, crashes mid-call, ignores SIGTERM, leaves a
 * grandchild; a call timeout and a cancel from another thread (and that notifications/cancelled
 * reached the server); an oversized message; stderr as events. Every failure is the documented
 * status, in bounded time, and no process is left behind. */
#include "check.h"

#include <pthread.h>
#include <sys/wait.h>

static char pidfile_dir[1024];

/* server_json that runs the fault server through `sh -c 'echo $$ > pidfile; exec ...'`, so the
 * test knows the server's pid (exec keeps it). `extra` is raw JSON members (or NULL). */
static void wrapped_server_json(char *buf, size_t cap, const char *mode, const char *pidfile, const char *extra) {
    server_json(buf, cap, extra, "/bin/sh", "-c", "echo $$ > \"$1\"; exec \"$2\" \"$3\" \"$4\"", "sh", pidfile,
                peer("MCPLUG_PYTHON"), peer("MCPLUG_FAULT_SERVER"), mode, (const char *)NULL);
}

static void pid_path(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/faults-%ld-%s.pid", pidfile_dir, (long)getpid(), name);
    unlink(buf);
}

/* Waits up to `wait_s` for a process to be gone (reaped); true if it is. */
static int wait_gone(pid_t pid, double wait_s, int zombie_ok) {
    double until = now_s() + wait_s;
    for (;;) {
        if (zombie_ok ? process_dead(pid) : process_gone(pid)) return 1;
        if (now_s() > until) return 0;
        sleep_ms(20);
    }
}

static char *call(mcplug_client *c, const char *name, const char *args, const char *options, mcplug_status *st) {
    char *out = NULL;
    *st = mcplug_client_call_tool(c, name, args, options, &out);
    return out;
}

static void echo_works(mcplug_client *c, const char *msg) {
    char args[256], want[256];
    mcplug_status st;
    char *out;
    snprintf(args, sizeof args, "{\"message\":\"%s\"}", msg);
    snprintf(want, sizeof want, "\"text\":\"Echo: %s\"", msg);
    out = call(c, "echo", args, NULL, &st);
    CHECK_OUT(st == MCPLUG_OK && contains(out, want), out, "the connection still works (echo %s)", msg);
    drop(&out);
}

/* The fault server's cancelled_ids: the request ids named by notifications/cancelled so far. */
static char *cancelled_ids(mcplug_client *c) {
    mcplug_status st;
    char *out = call(c, "cancelled_ids", NULL, NULL, &st);
    CHECK_STATUS(st, MCPLUG_OK, out, "cancelled_ids -> OK");
    return out;
}

/* Polls cancelled_ids until it lists `n` ids (notifications are one-way; give it a moment). */
static char *wait_cancelled_ids(mcplug_client *c, int n, double wait_s) {
    double until = now_s() + wait_s;
    for (;;) {
        char *out = cancelled_ids(c);
        /* the text is a JSON list inside a JSON string: "[3]" or "[3, 4]" */
        const char *list = strstr(out, "\"text\":\"[");
        int count = 0;
        if (list != NULL) {
            const char *p = list + 9;
            if (*p != ']') count = 1;
            for (; *p && *p != ']'; p++)
                if (*p == ',') count++;
        }
        if (count >= n || now_s() > until) return out;
        drop(&out);
        sleep_ms(50);
    }
}

/* A server that exits before reading its stdin: mcplug's first write meets a closed pipe. That
 * must be an error, not a SIGPIPE that kills the host (SIGPIPE's default action; Python and Node
 * ignore it, a C host usually does not). Run in a forked child with the default disposition, so
 * a death is observed instead of ending this test. Must run before this process touches mcplug
 * (fork after the runtime's threads exist is unsafe). */
static void sigpipe(void) {
    pid_t child;
    int status = 0, i;
    double until;
    fflush(stdout);
    child = fork();
    if (child == 0) {
        signal(SIGPIPE, SIG_DFL);
        for (i = 0; i < 20; i++) {
            mcplug_client *c = NULL;
            char *out = NULL;
            mcplug_status st = mcplug_client_connect("{\"command\":\"/bin/true\"}", NULL, &c, &out);
            if (st != MCPLUG_CLOSED && st != MCPLUG_TRANSPORT) {
                printf("    connect to /bin/true: %s %s\n", status_name(st), out ? out : "");
                _exit(3);
            }
            mcplug_string_free(out);
        }
        _exit(0);
    }
    CHECK(child > 0, "forked a child for the SIGPIPE check");
    until = now_s() + bound_s(20.0);
    while (waitpid(child, &status, WNOHANG) == 0) {
        if (now_s() > until) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            break;
        }
        sleep_ms(10);
    }
    CHECK(!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL), "the SIGPIPE check finished in time");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "connecting 20 times to a server that exits at once (/bin/true) fails with CLOSED or TRANSPORT, "
               "and SIGPIPE does not kill the host (child %s %d)",
               WIFSIGNALED(status) ? "killed by signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

static void bad_starts(void) {
    char server[4096], *out = NULL, pidfile[1200];
    mcplug_client *c = NULL;
    mcplug_status st;
    double t0;
    long pid;

    t0 = now_s();
    st = mcplug_client_connect("{\"command\":\"mcplug-no-such-command-xyz\",\"args\":[\"a\"]}", NULL, &c, &out);
    if (reduced() && st == MCPLUG_CLOSED) {
        /* valgrind emulates the spawn: the exec failure shows as a child that exited at once */
        CHECK_OUT(is_error(out, "closed", NULL), out, "a command that does not exist -> CLOSED (under valgrind)");
    } else {
        CHECK_STATUS(st, MCPLUG_TRANSPORT, out, "a command that does not exist -> TRANSPORT (got %s)", status_name(st));
        CHECK_OUT(is_error(out, "transport", "mcplug-no-such-command-xyz") && now_s() - t0 < bound_s(2.0), out,
                  "... naming the command, in %.2f s", now_s() - t0);
    }
    drop(&out);

    fault_server_json(server, sizeof server, "exit-now");
    t0 = now_s();
    st = mcplug_client_connect(server, NULL, &c, &out);
    CHECK_STATUS(st, MCPLUG_CLOSED, out, "a server that exits at once -> CLOSED (got %s)", status_name(st));
    CHECK_OUT(is_error(out, "closed", "exit code 3") && contains(out, "fatal: exiting at once"), out,
              "... the message gives the exit code and the server's last stderr line");
    CHECK(now_s() - t0 < bound_s(5.0), "... in %.2f s (not the 30 s connect timeout)", now_s() - t0);
    drop(&out);

    fault_server_json(server, sizeof server, "garbage-exit");
    t0 = now_s();
    st = mcplug_client_connect(server, NULL, &c, &out);
    CHECK_STATUS(st, MCPLUG_CLOSED, out, "a server that prints garbage and exits -> CLOSED (got %s)", status_name(st));
    CHECK_OUT(is_error(out, "closed", "exit code 1") && contains(out, "Server starting on stdout, sorry"), out,
              "... the message gives the exit code and the garbage it printed");
    CHECK(now_s() - t0 < bound_s(5.0), "... in %.2f s", now_s() - t0);
    drop(&out);

    pid_path(pidfile, sizeof pidfile, "hang");
    wrapped_server_json(server, sizeof server, "hang-init", pidfile, NULL);
    t0 = now_s();
    st = mcplug_client_connect(server, "{\"connect_timeout_ms\":1000}", &c, &out);
    CHECK_STATUS(st, MCPLUG_TIMEOUT, out, "a server that never answers initialize, connect_timeout_ms 1000 -> TIMEOUT (got %s)",
                 status_name(st));
    CHECK_OUT(is_error(out, "timeout", "connect") && now_s() - t0 >= 0.9 && now_s() - t0 < bound_s(3.0), out,
              "... kind timeout, after %.2f s", now_s() - t0);
    drop(&out);
    pid = read_pid_file(pidfile, 1.0);
    CHECK(pid > 0, "the hanging server's pid is %ld", pid);
    CHECK(wait_gone((pid_t)pid, bound_s(2.0), 0), "... and after the failed connect that process is gone (reaped)");
    unlink(pidfile);
}

static void garbage(void) {
    char server[4096], *ev;
    mcplug_client *c;
    fault_server_json(server, sizeof server, "garbage");
    c = connect_or_die(server, NULL, "a server that prints garbage, then works");
    ev = wait_event(c, bound_s(3.0), "\"type\":\"invalid_message\"", "\"line\":\"this is not json\"");
    CHECK_OUT(ev != NULL, ev, "an invalid_message event carries the line \"this is not json\"");
    CHECK_OUT(contains(ev, "\"error\":\"not valid JSON"), ev, "... and says why");
    mcplug_string_free(ev);
    ev = wait_event(c, bound_s(3.0), "\"type\":\"invalid_message\"", "\"line\":\"{broken\"");
    CHECK_OUT(ev != NULL, ev, "an invalid_message event carries \"{broken\"");
    mcplug_string_free(ev);
    echo_works(c, "after-garbage");
    mcplug_client_free(c);
}

static void crash_mid_call(void) {
    char server[4096], pidfile[1200], *out, *ev;
    mcplug_client *c;
    mcplug_status st;
    double t0;
    long pid;

    pid_path(pidfile, sizeof pidfile, "crash");
    wrapped_server_json(server, sizeof server, "normal", pidfile, NULL);
    c = connect_or_die(server, NULL, "the fault server (to crash)");
    pid = read_pid_file(pidfile, 2.0);
    CHECK(pid > 0, "its pid is %ld", pid);
    t0 = now_s();
    out = call(c, "crash", NULL, NULL, &st);
    CHECK_STATUS(st, MCPLUG_CLOSED, out, "a server killed during a call -> the call fails with CLOSED (got %s)", status_name(st));
    CHECK_OUT(is_error(out, "closed", "exit code 3"), out, "... the message gives the exit code");
    CHECK(now_s() - t0 < bound_s(1.0), "... within 1 s (%.3f s)", now_s() - t0);
    drop(&out);
    ev = wait_event(c, bound_s(2.0), "\"type\":\"closed\"", NULL);
    CHECK_OUT(ev != NULL && contains(ev, "\"reason\":\"the server process exited"), ev, "the last event is {\"type\":\"closed\", reason}");
    mcplug_string_free(ev);
    out = NULL;
    st = mcplug_client_next_event(c, 1000, &out);
    CHECK_STATUS(st, MCPLUG_CLOSED, out, "after the closed event, next_event -> CLOSED at once (got %s)", status_name(st));
    CHECK_OUT(is_error(out, "closed", NULL), out, "... with a closed error object");
    drop(&out);
    out = call(c, "echo", "{\"message\":\"late\"}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_CLOSED, out, "a call on the dead connection -> CLOSED (got %s)", status_name(st));
    drop(&out);
    CHECK(wait_gone((pid_t)pid, bound_s(2.0), 0), "the crashed server's process was reaped");
    mcplug_client_free(c);
    unlink(pidfile);
}

static void call_timeout(void) {
    char server[4096], *out;
    mcplug_client *c;
    mcplug_status st;
    double t0;

    fault_server_json(server, sizeof server, "normal");
    c = connect_or_die(server, NULL, "the fault server (timeouts)");
    t0 = now_s();
    out = call(c, "sleep", "{\"ms\":5000}", "{\"timeout_ms\":300}", &st);
    CHECK_STATUS(st, MCPLUG_TIMEOUT, out, "sleep 5 s with timeout_ms 300 -> TIMEOUT (got %s)", status_name(st));
    CHECK_OUT(is_error(out, "timeout", "300 ms"), out, "... kind timeout, the message gives the limit");
    CHECK(now_s() - t0 >= 0.29 && now_s() - t0 < bound_s(1.5), "... after %.2f s", now_s() - t0);
    drop(&out);
    echo_works(c, "after-timeout");
    out = wait_cancelled_ids(c, 1, bound_s(2.0));
    CHECK_OUT(contains(out, "\"text\":\"[") && !contains(out, "\"text\":\"[]\""), out,
              "the timed-out call was cancelled at the server (notifications/cancelled)");
    drop(&out);

    /* A connection-wide tool_timeout_ms applies when a call gives none. */
    mcplug_client_free(c);
    {
        mcplug_client *c2 = NULL;
        out = NULL;
        st = mcplug_client_connect(server, "{\"tool_timeout_ms\":300}", &c2, &out);
        CHECK_STATUS(st, MCPLUG_OK, out, "connect with tool_timeout_ms 300");
        drop(&out);
        t0 = now_s();
        out = call(c2, "sleep", "{\"ms\":5000}", NULL, &st);
        CHECK_OUT(st == MCPLUG_TIMEOUT && now_s() - t0 < bound_s(1.5), out, "a call under tool_timeout_ms 300 -> TIMEOUT (got %s, %.2f s)",
                  status_name(st), now_s() - t0);
        drop(&out);
        out = call(c2, "sleep", "{\"ms\":600}", "{\"timeout_ms\":null}", &st);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"text\":\"slept\""), out, "timeout_ms null lifts the limit for one call");
        drop(&out);
        mcplug_client_free(c2);
    }
}

struct bg_call {
    mcplug_client *c;
    const char *name, *args, *options;
    mcplug_status st;
    char *out;
    double elapsed;
};

static void *bg_call_run(void *arg) {
    struct bg_call *b = arg;
    double t0 = now_s();
    b->st = mcplug_client_call_tool(b->c, b->name, b->args, b->options, &b->out);
    b->elapsed = now_s() - t0;
    return NULL;
}

/* mcplug_cancel(tag) until it finds the call (the call may not have registered yet). */
static mcplug_status cancel_when_running(const char *tag, double wait_s) {
    double until = now_s() + wait_s;
    mcplug_status st;
    while ((st = mcplug_cancel(tag)) == MCPLUG_NOT_FOUND && now_s() < until) sleep_ms(10);
    return st;
}

/* Cancel tokens: cancelled before the call enters (it ends at once), or while it runs (one
 * mcplug_cancel_token_cancel, no retry); a freed token is refused by name; a connect too. */
static void cancel_tokens(void) {
    char server[4096], options[128], *out = NULL;
    mcplug_client *c, *none = NULL;
    pthread_t th;
    struct bg_call a;
    uint64_t early = 0, running = 0;
    mcplug_status st;
    double t0;

    fault_server_json(server, sizeof server, "normal");
    c = connect_or_die(server, NULL, "the fault server (cancel tokens)");
    CHECK(mcplug_cancel_token_new(&early) == MCPLUG_OK && early != 0, "mcplug_cancel_token_new -> OK, a token (%llu)",
          (unsigned long long)early);
    CHECK(mcplug_cancel_token_new(&running) == MCPLUG_OK && running != 0 && running != early, "a second token is another one");

    CHECK(mcplug_cancel_token_cancel(early) == MCPLUG_OK, "a token is cancelled before any call names it -> OK");
    snprintf(options, sizeof options, "{\"cancel_token\":%llu}", (unsigned long long)early);
    t0 = now_s();
    st = mcplug_client_call_tool(c, "sleep", "{\"ms\":10000}", options, &out);
    CHECK_STATUS(st, MCPLUG_CANCELLED, out, "a call naming the cancelled token -> CANCELLED (got %s)", status_name(st));
    CHECK(now_s() - t0 < bound_s(1.0), "... at once (%.3f s), without waiting for the server", now_s() - t0);
    drop(&out);
    out = cancelled_ids(c);
    CHECK_OUT(contains(out, "\"text\":\"[]\""), out, "... and nothing was sent: the server was never asked to cancel");
    drop(&out);

    memset(&a, 0, sizeof a);
    snprintf(options, sizeof options, "{\"cancel_token\":%llu}", (unsigned long long)running);
    a.c = c, a.name = "sleep", a.args = "{\"ms\":10000}", a.options = options;
    CHECK(pthread_create(&th, NULL, bg_call_run, &a) == 0, "a thread calls sleep 10 s with the other token");
    sleep_ms(100);
    t0 = now_s();
    CHECK(mcplug_cancel_token_cancel(running) == MCPLUG_OK, "mcplug_cancel_token_cancel from the main thread -> OK, first time");
    pthread_join(th, NULL);
    CHECK_STATUS(a.st, MCPLUG_CANCELLED, a.out, "the running call -> CANCELLED (got %s)", status_name(a.st));
    CHECK(now_s() - t0 < bound_s(1.0), "... within %.3f s of the cancel", now_s() - t0);
    mcplug_string_free(a.out);

    CHECK(mcplug_cancel_token_free(early) == MCPLUG_OK && mcplug_cancel_token_free(running) == MCPLUG_OK, "both tokens freed -> OK");
    CHECK(mcplug_cancel_token_free(early) == MCPLUG_NOT_FOUND, "freed again -> NOT_FOUND");
    CHECK(mcplug_cancel_token_cancel(early) == MCPLUG_NOT_FOUND, "a freed token cancelled -> NOT_FOUND");
    snprintf(options, sizeof options, "{\"cancel_token\":%llu}", (unsigned long long)early);
    st = mcplug_client_call_tool(c, "sleep", "{\"ms\":1}", options, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "cancel_token"), out, "a call naming a freed token -> INVALID_ARGUMENT naming cancel_token");
    drop(&out);
    mcplug_client_free(c);

    CHECK(mcplug_cancel_token_new(&early) == MCPLUG_OK && mcplug_cancel_token_cancel(early) == MCPLUG_OK, "a token for a connect, cancelled");
    snprintf(options, sizeof options, "{\"cancel_token\":%llu}", (unsigned long long)early);
    t0 = now_s();
    st = mcplug_client_connect(server, options, &none, &out);
    CHECK_OUT(st == MCPLUG_CANCELLED && none == NULL, out, "a connect naming it -> CANCELLED, no client (got %s)", status_name(st));
    CHECK(now_s() - t0 < bound_s(1.0), "... at once (%.3f s)", now_s() - t0);
    drop(&out);
    CHECK(mcplug_cancel_token_free(early) == MCPLUG_OK, "freed");
}

static void cancel_from_another_thread(void) {
    char server[4096], *out;
    mcplug_client *c;
    pthread_t th_a, th_b;
    struct bg_call a, b;
    mcplug_status st;
    double t0;

    fault_server_json(server, sizeof server, "normal");
    c = connect_or_die(server, NULL, "the fault server (cancel)");
    out = cancelled_ids(c);
    CHECK_OUT(contains(out, "\"text\":\"[]\""), out, "cancelled_ids starts empty");
    drop(&out);

    memset(&a, 0, sizeof a);
    a.c = c, a.name = "sleep", a.args = "{\"ms\":10000}", a.options = "{\"tag\":\"cancel-me\"}";
    memset(&b, 0, sizeof b);
    b.c = c, b.name = "sleep", b.args = "{\"ms\":700}", b.options = "{\"tag\":\"leave-me\"}";
    CHECK(pthread_create(&th_a, NULL, bg_call_run, &a) == 0, "a thread calls sleep 10 s with tag cancel-me");
    CHECK(pthread_create(&th_b, NULL, bg_call_run, &b) == 0, "another thread calls sleep 0.7 s with tag leave-me");
    sleep_ms(100);
    t0 = now_s();
    st = cancel_when_running("cancel-me", bound_s(5.0));
    CHECK(st == MCPLUG_OK, "mcplug_cancel(\"cancel-me\") from the main thread -> OK (got %s)", status_name(st));
    pthread_join(th_a, NULL);
    CHECK_STATUS(a.st, MCPLUG_CANCELLED, a.out, "the cancelled call -> CANCELLED (got %s)", status_name(a.st));
    CHECK_OUT(is_error(a.out, "cancelled", NULL), a.out, "... kind cancelled");
    CHECK(now_s() - t0 < bound_s(1.0), "... within %.3f s of the cancel", now_s() - t0);
    mcplug_string_free(a.out);
    pthread_join(th_b, NULL);
    CHECK_OUT(b.st == MCPLUG_OK && contains(b.out, "\"text\":\"slept\""), b.out, "the other call (tag leave-me) was not touched: slept");
    mcplug_string_free(b.out);
    CHECK(mcplug_cancel("cancel-me") == MCPLUG_NOT_FOUND, "mcplug_cancel(\"cancel-me\") again -> NOT_FOUND");

    out = wait_cancelled_ids(c, 1, bound_s(2.0));
    {
        const char *list = strstr(out, "\"text\":\"[");
        char *end = NULL;
        long id = list ? strtol(list + 9, &end, 10) : 0;
        CHECK_OUT(id > 0 && end != NULL && *end == ']', out,
                  "notifications/cancelled reached the server: cancelled_ids names exactly one request id (%ld)", id);
    }
    drop(&out);
    echo_works(c, "after-cancel");
    mcplug_client_free(c);
}

static void no_process_left(const char *mode) {
    char server[4096], pidfile[1200], gpidfile[1200], extra[1400];
    mcplug_client *c;
    long pid, gpid = 0;
    double t0, took;
    int grandchild = strcmp(mode, "grandchild") == 0;

    pid_path(pidfile, sizeof pidfile, mode);
    pid_path(gpidfile, sizeof gpidfile, "grandchild-child");
    snprintf(extra, sizeof extra, "\"env\":{\"FAULT_PIDFILE\":");
    json_str(extra, sizeof extra, gpidfile);
    strncat(extra, "}", sizeof extra - strlen(extra) - 1);
    wrapped_server_json(server, sizeof server, mode, pidfile, grandchild ? extra : NULL);
    c = connect_or_die(server, NULL, mode);
    pid = read_pid_file(pidfile, 2.0);
    CHECK(pid > 0 && kill((pid_t)pid, 0) == 0, "the %s server runs as pid %ld", mode, pid);
    if (grandchild) {
        gpid = read_pid_file(gpidfile, 2.0);
        CHECK(gpid > 0 && kill((pid_t)gpid, 0) == 0, "its grandchild (sleep 300) runs as pid %ld", gpid);
    }
    echo_works(c, mode);
    t0 = now_s();
    mcplug_client_free(c);
    took = now_s() - t0;
    CHECK(took < bound_s(4.0), "mcplug_client_free returned in %.2f s", took);
    CHECK(process_gone((pid_t)pid), "after free, the server (pid %ld) is gone and reaped", pid);
    if (grandchild) {
        /* Not our child: once killed it is some other process's to reap; dead is enough. */
        CHECK(wait_gone((pid_t)gpid, bound_s(1.0), 1), "after free, the grandchild (pid %ld) is dead too", gpid);
    }
    unlink(pidfile);
    unlink(gpidfile);
}

static void big_and_stderr(void) {
    char server[4096], *out, *ev;
    mcplug_client *c;
    mcplug_status st;

    fault_server_json(server, sizeof server, "normal");
    c = connect_or_die(server, NULL, "the fault server (big, stderr)");
    out = call(c, "big", "{\"bytes\":1000000}", NULL, &st);
    CHECK_OUT(st == MCPLUG_OK && count_of(out, "xxxxxxxxxx") >= 99999, NULL, "a 1 MB answer arrives whole");
    drop(&out);
    out = call(c, "stderr", "{\"line\":\"a line on stderr\"}", NULL, &st);
    CHECK_OUT(st == MCPLUG_OK, out, "stderr tool -> OK");
    drop(&out);
    ev = wait_event(c, bound_s(3.0), "\"type\":\"stderr\"", "\"line\":\"a line on stderr\"");
    CHECK_OUT(ev != NULL, ev, "the server's stderr line arrives as {\"type\":\"stderr\",\"line\":...}");
    mcplug_string_free(ev);
    mcplug_client_free(c);

    c = NULL;
    out = NULL;
    st = mcplug_client_connect(server, "{\"max_message_bytes\":10000}", &c, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "connect with max_message_bytes 10000");
    drop(&out);
    out = call(c, "big", "{\"bytes\":100000}", NULL, &st);
    CHECK_STATUS(st, MCPLUG_TRANSPORT, out, "an answer over max_message_bytes -> TRANSPORT (got %s)", status_name(st));
    CHECK_OUT(is_error(out, "transport", "max_message_bytes"), out, "... naming max_message_bytes");
    drop(&out);
    ev = wait_event(c, bound_s(2.0), "\"type\":\"closed\"", NULL);
    CHECK_OUT(ev != NULL && contains(ev, "\"kind\":\"transport\""), ev, "... and the connection closed with kind transport");
    mcplug_string_free(ev);
    mcplug_client_free(c);
}

/* A host thread with a 128 KiB stack (what koffi's calls and many C hosts' threads have): a
 * tools/list whose outputSchema nests 60 properties deep is read, its tool called, and the
 * client closed, without overflowing it. */
static void *small_stack_host(void *arg) {
    int *ok = arg;
    char server[2048];
    fault_server_json(server, sizeof server, "deep-schema");
    mcplug_client *c = connect_or_die(server, NULL, "deep-schema");
    char *out = NULL;
    mcplug_status st = mcplug_client_list_tools(c, NULL, &out);
    int listed = st == MCPLUG_OK && contains(out, "\"deep\"");
    drop(&out);
    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"small\"}", NULL, &out);
    int called = st == MCPLUG_OK && contains(out, "Echo: small");
    drop(&out);
    mcplug_client_free(c);
    *ok = listed && called;
    return NULL;
}

/* Runs `host` on a new thread with a 128 KiB stack; what it sets in its int argument. */
static int on_small_stack(void *(*host)(void *), const char *what) {
    int ok = 0;
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024);
    CHECK(pthread_create(&t, &attr, host, &ok) == 0, "%s: a host thread with a 128 KiB stack", what);
    pthread_join(t, NULL);
    pthread_attr_destroy(&attr);
    return ok;
}

static void small_stack_deep_schema(void) {
    CHECK(on_small_stack(small_stack_host, "deep schema"),
          "a 60-deep outputSchema is listed and a call made on that thread");
}

/* Nested `depth` objects deep: {"a":{"a":...1...}} (malloc'd). */
static char *nested(int depth) {
    size_t n = (size_t)depth * 6 + 2;
    char *text = malloc(n);
    size_t at = 0;
    for (int i = 0; i < depth; i++) {
        memcpy(text + at, "{\"a\":", 5);
        at += 5;
    }
    text[at++] = '1';
    for (int i = 0; i < depth; i++)
        text[at++] = '}';
    text[at] = '\0';
    return text;
}

/* Every kind of entry point on a 128 KiB host thread, with a server whose tools/list nests deep
 * and inputs nested 300 deep: config merge, a manager (connect, wait, status, the pool, a routed
 * call, search, resources, prompts, a request, events, close) and a client (requests, a call,
 * notify, roots, log level, skills, events, close). Each may answer OK or with an error; none
 * may overflow the thread's stack (that would end the whole test program). */
static void *small_stack_sweep_host(void *arg) {
    int *ok = arg;
    char *deep = nested(300);
    char *buf = malloc(16384);
    char server[2048];
    char *out = NULL;
    int answered = 0, calls = 0;
#define SWEEP(expr)                                                                       \
    do {                                                                                  \
        mcplug_status st_ = (expr);                                                       \
        calls++;                                                                          \
        answered += st_ == MCPLUG_OK || st_ == MCPLUG_TIMEOUT || (out && contains(out, "\"kind\"")); \
        drop(&out);                                                                       \
    } while (0)
    fault_server_json(server, sizeof server, "deep-schema");
    answered += mcplug_version() != NULL;
    calls++;
    snprintf(buf, 16384, "{\"user\":{\"mcpServers\":{\"f\":%s}},\"local\":{\"mcpServers\":{\"x\":%s}}}", server, deep);
    SWEEP(mcplug_config_merge(buf, &out));

    mcplug_manager *m = NULL;
    SWEEP(mcplug_manager_new(NULL, &m, &out));
    if (m != NULL) {
        snprintf(buf, 16384, "{\"mcpServers\":{\"f\":%s}}", server);
        SWEEP(mcplug_manager_connect(m, buf, &out));
        SWEEP(mcplug_manager_wait(m, "{\"timeout_ms\":20000}", &out));
        SWEEP(mcplug_manager_status(m, &out));
        SWEEP(mcplug_manager_list_tools(m, NULL, &out));
        snprintf(buf, 16384, "{\"message\":\"small\",\"deep\":%s}", deep);
        SWEEP(mcplug_manager_call_tool(m, "mcp__f__echo", buf, NULL, &out));
        SWEEP(mcplug_manager_search_tools(m, "echo", NULL, &out));
        SWEEP(mcplug_manager_list_resources(m, NULL, &out));
        SWEEP(mcplug_manager_list_prompts(m, NULL, &out));
        SWEEP(mcplug_manager_request(m, "f", "tools/list", NULL, NULL, &out));
        SWEEP(mcplug_manager_next_events(m, 64, 0, &out));
        SWEEP(mcplug_manager_close(m, &out));
        mcplug_manager_free(m);
    }

    mcplug_client *c = NULL;
    SWEEP(mcplug_client_connect(server, NULL, &c, &out));
    if (c != NULL) {
        SWEEP(mcplug_client_request(c, "tools/list", NULL, NULL, &out));
        snprintf(buf, 16384, "{\"name\":\"echo\",\"arguments\":{\"message\":\"small\",\"deep\":%s}}", deep);
        SWEEP(mcplug_client_request(c, "tools/call", buf, NULL, &out));
        snprintf(buf, 16384, "{\"message\":\"small\",\"deep\":%s}", deep);
        SWEEP(mcplug_client_call_tool(c, "echo", buf, NULL, &out));
        SWEEP(mcplug_client_notify(c, "notifications/roots/list_changed", NULL, &out));
        SWEEP(mcplug_client_set_roots(c, "[{\"uri\":\"file:///tmp\",\"name\":\"tmp\"}]", &out));
        SWEEP(mcplug_client_set_log_level(c, "info", &out));
        SWEEP(mcplug_client_list_skills(c, NULL, &out));
        SWEEP(mcplug_client_next_events(c, 64, 0, &out));
        SWEEP(mcplug_client_close(c, &out));
        mcplug_client_free(c);
    }
#undef SWEEP
    free(buf);
    free(deep);
    *ok = calls == 24 && answered == calls;
    if (!*ok)
        fprintf(stderr, "small-stack sweep: %d of %d calls answered\n", answered, calls);
    return NULL;
}

static void small_stack_sweep(void) {
    CHECK(on_small_stack(small_stack_sweep_host, "sweep"),
          "24 entry points (config, manager, client) answered on it, inputs nested 300 deep");
}

int main(void) {
    test_init();
    sigpipe();
    small_stack_deep_schema();
    small_stack_sweep();
    snprintf(pidfile_dir, sizeof pidfile_dir, "%s", peer("MCPLUG_TEST_TMPDIR"));
    bad_starts();
    garbage();
    crash_mid_call();
    call_timeout();
    cancel_from_another_thread();
    cancel_tokens();
    no_process_left("ignore-term");
    no_process_left("grandchild");
    big_and_stderr();
    return finish("faults");
}
