/* Issue 32, item 10, through the C ABI: a host that forks after mcplug started.
 * - A child forked before mcplug started is an ordinary process: it connects and calls on its own.
 * - A child forked after: every call on an inherited handle (client and manager), every new
 *   handle, a cancel token and a close are refused at once with MCPLUG_CLOSED, reason "forked";
 *   freeing the inherited handles returns at once. Before, the child's call read the parent's
 *   server's answer off the shared pipe, and its free hung.
 * - The parent is untouched: its server still runs, its calls answer, its frees return. */
#include "check.h"

#include <sys/wait.h>

static void pid_path(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/fork-%ld-%s.pid", peer("MCPLUG_TEST_TMPDIR"), (long)getpid(), name);
    unlink(buf);
}

/* The fault server, its shell writing its pid to `pidfile` first. */
static void wrapped_server_json(char *buf, size_t cap, const char *pidfile) {
    server_json(buf, cap, NULL, "/bin/sh", "-c", "echo $$ > \"$1\"; exec \"$2\" \"$3\" normal", "sh", pidfile,
                peer("MCPLUG_PYTHON"), peer("MCPLUG_FAULT_SERVER"), (const char *)NULL);
}

/* Waits for `pid` (at most `wait_s`, then kills it); its exit code, or -1 if it did not exit. */
static int wait_child(pid_t pid, double wait_s) {
    double until = now_s() + wait_s;
    int status = 0;
    for (;;) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (now_s() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        sleep_ms(10);
    }
}

static int is_forked_error(const char *out) {
    return is_error(out, "closed", "forked from process") && contains(out, "\"reason\":\"forked\"") &&
           contains(out, "\"parent_pid\":");
}

/* In the child: everything refused at once, frees return. Exits the child. */
static void in_child(mcplug_client *c, mcplug_manager *m, const char *server) {
    char *out = NULL, config[4096];
    double t0 = now_s();
    mcplug_status st;
    alarm(20); /* a hang kills the child, and the parent sees it */

    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"from the child\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_CLOSED && is_forked_error(out), out,
              "child: a call on the inherited client -> CLOSED, reason forked (got %s)", status_name(st));
    CHECK_OUT(json_int(out, "parent_pid") == (long)getppid(), out, "child: ... naming the parent's pid");
    drop(&out);
    st = mcplug_client_list_tools(c, NULL, &out);
    CHECK_OUT(st == MCPLUG_CLOSED && is_forked_error(out), out, "child: list_tools -> CLOSED too");
    drop(&out);
    st = mcplug_manager_call_tool(m, "mcp__f__echo", "{\"message\":\"x\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_CLOSED && is_forked_error(out), out, "child: a call on the inherited manager -> CLOSED");
    drop(&out);
    st = mcplug_manager_status(m, &out);
    CHECK_OUT(st == MCPLUG_CLOSED && is_forked_error(out), out, "child: manager status -> CLOSED");
    drop(&out);
    {
        mcplug_client *fresh = NULL;
        st = mcplug_client_connect(server, NULL, &fresh, &out);
        CHECK_OUT(st == MCPLUG_CLOSED && fresh == NULL && is_forked_error(out), out,
                  "child: a new connection -> CLOSED, nothing started");
        drop(&out);
    }
    {
        mcplug_manager *fresh = NULL;
        st = mcplug_manager_new(NULL, &fresh, &out);
        CHECK_OUT(st == MCPLUG_CLOSED && fresh == NULL && is_forked_error(out), out, "child: a new manager -> CLOSED");
        drop(&out);
    }
    snprintf(config, sizeof config, "{\"mcpServers\":{}}");
    st = mcplug_config_merge(config, &out);
    CHECK_OUT(st == MCPLUG_CLOSED && is_forked_error(out), out, "child: config_merge -> CLOSED (every entry point)");
    drop(&out);
    {
        uint64_t token = 0;
        CHECK(mcplug_cancel_token_new(&token) == MCPLUG_CLOSED && token == 0, "child: cancel_token_new -> CLOSED");
    }
    st = mcplug_client_close(c, &out);
    CHECK_OUT(st == MCPLUG_CLOSED && is_forked_error(out), out, "child: close of the inherited client -> CLOSED");
    drop(&out);
    mcplug_client_free(c);
    mcplug_manager_free(m);
    CHECK(now_s() - t0 < bound_s(2.0), "child: all of it, the frees included, in %.3f s", now_s() - t0);
    fflush(stdout);
    /* The child leaves the inherited handles unfreed by design (they are the parent's); under
     * valgrind an _exit would count them as lost, an exec ends the child without that count. */
    execl("/bin/true", "true", (char *)NULL);
    _exit(0);
}

int main(void) {
    char server[4096], pidfile[1024], config[8192], *out = NULL;
    mcplug_status st;
    mcplug_client *c;
    mcplug_manager *m;
    pid_t child;
    long server_pid;
    test_init();

    /* Before mcplug starts, a fork is nobody's business: the child connects on its own. */
    fault_server_json(server, sizeof server, "normal");
    child = fork();
    CHECK(child >= 0, "fork before mcplug started");
    if (child == 0) {
        mcplug_client *own;
        alarm(30);
        own = connect_or_die(server, NULL, "the fault server, from a child forked before mcplug started");
        st = mcplug_client_call_tool(own, "echo", "{\"message\":\"early child\"}", NULL, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "early child"), out, "early child: its own call answers");
        drop(&out);
        mcplug_client_free(own);
        fflush(stdout);
        _exit(0);
    }
    CHECK(wait_child(child, bound_s(30.0)) == 0, "the early child connected, called and exited 0");

    /* The parent starts mcplug: a client (its server's pid noted) and a manager. */
    pid_path(pidfile, sizeof pidfile, "client");
    wrapped_server_json(server, sizeof server, pidfile);
    c = connect_or_die(server, NULL, "the fault server");
    server_pid = read_pid_file(pidfile, 5.0);
    CHECK(server_pid > 0, "the client's server is process %ld", server_pid);
    snprintf(config, sizeof config, "{\"mcpServers\":{\"f\":%s}}", server);
    m = manager_or_die(NULL);
    manager_connect_or_die(m, config, "the fault server");

    child = fork();
    CHECK(child >= 0, "fork after mcplug started");
    if (child == 0) in_child(c, m, server);
    CHECK(wait_child(child, bound_s(30.0)) == 0, "the late child got every refusal and exited 0 (no hang)");

    CHECK(!process_dead((pid_t)server_pid), "parent: its server still runs");
    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"parent after\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "parent after"), out, "parent: its client still answers");
    drop(&out);
    st = mcplug_manager_call_tool(m, "mcp__f__echo", "{\"message\":\"manager after\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "manager after"), out, "parent: its manager still answers");
    drop(&out);
    {
        double t0 = now_s();
        mcplug_client_free(c);
        mcplug_manager_free(m);
        CHECK(now_s() - t0 < bound_s(5.0), "parent: its frees return (%.2f s)", now_s() - t0);
    }
    unlink(pidfile);
    return finish("regress_fork");
}
