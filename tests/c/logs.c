/* The library's log records taken by the host (mcplug_log_capture): a connect and a call to the
 * fault server, whose entry carries secrets in its arguments and environment, come back as
 * records (client events at debug, every message at mcplug::wire trace) on the process-wide
 * queue — pulled with mcplug_log_next_events, announced on mcplug_log_event_fd — with none of
 * the secrets; the filter and options are checked by name; release closes the queue. */
#include "check.h"

#include <poll.h>

static char *pull(int max, int timeout_ms, mcplug_status want, const char *what) {
    char *out = NULL;
    mcplug_status st = mcplug_log_next_events((uint32_t)max, timeout_ms, &out);
    CHECK_STATUS(st, want, out, "%s -> %s (got %s)", what, status_name(want), status_name(st));
    return out;
}

int main(void) {
    test_init();
    char *out = NULL;
    mcplug_status st;

    /* Before any capture there is nothing to pull. */
    st = mcplug_log_next_events(10, 0, &out);
    CHECK_STATUS(st, MCPLUG_CLOSED, out, "next_events without a capture -> CLOSED (got %s)", status_name(st));
    CHECK_OUT(contains(out, "mcplug_log_capture"), out, "... and the message says how to start one");
    drop(&out);
    int fd = -1;
    st = mcplug_log_event_fd(&fd, &out);
    CHECK_STATUS(st, MCPLUG_CLOSED, out, "event_fd without a capture -> CLOSED (got %s)", status_name(st));
    drop(&out);

    /* Bad options are named. */
    st = mcplug_log_capture("{\"filter\":\"mcplug=[[\"}", &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "an unreadable filter -> INVALID_ARGUMENT (got %s)", status_name(st));
    CHECK_OUT(is_error(out, "invalid_argument", "`filter`"), out, "... naming `filter`");
    drop(&out);
    st = mcplug_log_capture("{\"level\":\"debug\"}", &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "an unknown option -> INVALID_ARGUMENT (got %s)", status_name(st));
    CHECK_OUT(is_error(out, "invalid_argument", "unknown option `level`"), out, "... naming it");
    drop(&out);
    st = mcplug_log_capture("{\"max_records\":0}", &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "max_records 0 -> INVALID_ARGUMENT (got %s)", status_name(st));
    drop(&out);
    st = mcplug_log_capture("[1]", &out);
    CHECK_STATUS(st, MCPLUG_INVALID_ARGUMENT, out, "options that are not an object -> INVALID_ARGUMENT (got %s)", status_name(st));
    drop(&out);

    st = mcplug_log_capture("{\"filter\":\"debug,mcplug::wire=trace\",\"max_records\":5000}", &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "capture debug + wire trace -> OK (got %s)", status_name(st));
    CHECK_OUT(contains(out, "\"max_records\":5000"), out, "... echoing the options");
    drop(&out);
    st = mcplug_log_event_fd(&fd, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "event_fd -> OK (got %s)", status_name(st));
    CHECK(fd >= 0, "... a descriptor (%d)", fd);
    drop(&out);
    out = pull(10, 0, MCPLUG_TIMEOUT, "nothing logged yet: next_events(0 ms)");
    drop(&out);

    char server[4096];
    server_json(server, sizeof server, "\"env\":{\"API_TOKEN\":\"env-secret-2718\"}", peer("MCPLUG_PYTHON"),
                peer("MCPLUG_FAULT_SERVER"), "normal", "--token=arg-secret-3141", (const char *)NULL);
    mcplug_client *c = connect_or_die(server, NULL, "the fault server");
    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"logged\"}", NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "call echo -> OK (got %s)", status_name(st));
    drop(&out);
    mcplug_client_free(c);

    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN), "the descriptor is readable while records wait");

    /* Take every record: one pull may not hold them all. */
    size_t cap = 1 << 20, len = 0;
    char *all = calloc(cap, 1);
    CHECK(all != NULL, "allocated");
    for (;;) {
        st = mcplug_log_next_events(64, 0, &out);
        if (st == MCPLUG_TIMEOUT) {
            drop(&out);
            break;
        }
        CHECK_STATUS(st, MCPLUG_OK, out, "next_events -> OK (got %s)", status_name(st));
        CHECK_OUT(out[0] == '[', out, "... a JSON array");
        size_t n = strlen(out);
        if (len + n + 1 < cap) {
            memcpy(all + len, out, n);
            len += n;
        }
        drop(&out);
    }
    CHECK(contains(all, "{\"type\":\"log\""), "records are {\"type\":\"log\", ...}");
    CHECK(contains(all, "\"target\":\"mcplug::client\"") && contains(all, "\"level\":\"debug\""),
          "mcplug::client records at debug");
    CHECK(contains(all, "\"method\":\"tools/call\""), "the tools/call request is a record with its method");
    CHECK(contains(all, "\"target\":\"mcplug::wire\"") && contains(all, "\"level\":\"trace\""),
          "mcplug::wire records at trace");
    CHECK(contains(all, "logged"), "the wire trace shows the message sent");
    CHECK(contains(all, "\"time_ms\":") && contains(all, "\"thread\":"), "records carry time_ms and thread");
    CHECK(!contains(all, "arg-secret-3141") && !contains(all, "env-secret-2718"),
          "no record shows the entry's argument or environment secrets");
    free(all);
    /* The descriptor follows the queue: readable exactly while a record waits. A runtime thread
     * may still log the connection's last records (slower under sanitizers), so each time it is
     * readable a record must be there to take; once the queue is empty it must be quiet. */
    int quiet = 0;
    for (int round = 0; round < 50 && !quiet; round++) {
        p.revents = 0;
        if (poll(&p, 1, 0) == 0) {
            /* Quiet, and nothing to take (a record that came just now makes another round). */
            st = mcplug_log_next_events(64, 0, &out);
            CHECK_OUT(st == MCPLUG_TIMEOUT || st == MCPLUG_OK, out, "quiet descriptor -> no record, or one just logged (got %s)", status_name(st));
            drop(&out);
            quiet = st == MCPLUG_TIMEOUT;
        } else {
            st = mcplug_log_next_events(64, 0, &out);
            CHECK_STATUS(st, MCPLUG_OK, out, "readable descriptor -> a record to take (got %s)", status_name(st));
            drop(&out);
            sleep_ms(20);
        }
    }
    CHECK(quiet, "the descriptor is quiet once the queue is empty");

    /* A narrower filter: the wire records stop. */
    st = mcplug_log_capture("{\"filter\":\"mcplug::client=debug\"}", &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "changing the filter -> OK (got %s)", status_name(st));
    drop(&out);
    c = connect_or_die(server, NULL, "the fault server again");
    mcplug_client_free(c);
    out = pull(1000, 5000, MCPLUG_OK, "records of the second connect");
    CHECK_OUT(contains(out, "mcplug::client") && !contains(out, "mcplug::wire"), out,
              "... mcplug::client records only");
    drop(&out);

    /* Release: records queued are still taken, then CLOSED; a second release says false. */
    c = connect_or_die(server, NULL, "the fault server a third time");
    mcplug_client_free(c);
    st = mcplug_log_release(&out);
    CHECK_STATUS(st, MCPLUG_OK, out, "release -> OK (got %s)", status_name(st));
    CHECK_OUT(contains(out, "\"released\":true"), out, "... released");
    drop(&out);
    out = pull(1000, 1000, MCPLUG_OK, "the records queued before the release");
    drop(&out);
    out = pull(10, 1000, MCPLUG_CLOSED, "then next_events");
    drop(&out);
    p.revents = 0;
    CHECK(poll(&p, 1, 1000) == 1, "the descriptor is readable once the capture ended");
    close(fd);
    st = mcplug_log_release(&out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"released\":false"), out, "a second release -> released false");
    drop(&out);

    /* A new capture after a release works again. */
    st = mcplug_log_capture(NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "capture with defaults -> OK (got %s)", status_name(st));
    CHECK_OUT(contains(out, "\"filter\":\"debug\"") && contains(out, "\"max_records\":10000"), out, "... debug, 10000");
    drop(&out);
    c = connect_or_die(server, NULL, "the fault server a fourth time");
    mcplug_client_free(c);
    out = pull(1000, 5000, MCPLUG_OK, "records of the new capture");
    drop(&out);
    st = mcplug_log_release(&out);
    drop(&out);
    return finish("logs");
}
