/* Issue 32, items 1-4, through the C ABI: a single client's OAuth against
 * tests/servers/oauth_server.py (MCPLUG_OAUTH_SERVER, started here with the flags each case
 * needs), the host answering auth/authorize from the process-wide queue on a thread of its own.
 *   1. a login slower than the 5 s server/discover probe: a 2026-07-28-only server still
 *      connects in its era, and the user is asked once;
 *   2. tokens that live 60 s, 299 s or an absurd time are sent;
 *   3. the loopback listener: eight idle connections and a forged callback delay nothing, the
 *      forged one is answered 400 and the real one completes;
 *   4. a token answer that trickles is a timeout (reason `timeout`), not a refusal;
 *   11. a headersHelper that exits leaving a child holding its stdout connects at once, and ten
 *      connects leave no thread or descriptor behind. */
#include "check.h"

#include <dirent.h>
#include <pthread.h>

#include "http_get.h"

static FILE *server_out;
static pid_t server_pid;
static char url[256];

/* Starts oauth_server.py with `flags`; sets `url`. */
static void start_server(const char *flags) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "exec %s %s %s & echo $!", peer("MCPLUG_PYTHON"), peer("MCPLUG_OAUTH_SERVER"), flags);
    server_out = popen(cmd, "r");
    CHECK(server_out != NULL, "started oauth_server.py %s", flags);
    char line[128];
    CHECK(fgets(line, sizeof line, server_out) != NULL, "its pid");
    server_pid = (pid_t)atoi(line);
    CHECK(fgets(line, sizeof line, server_out) != NULL && strncmp(line, "PORT ", 5) == 0, "it listens: %s", line);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/mcp", atoi(line + 5));
}

static void stop_server(void) {
    if (server_out == NULL) return;
    kill(server_pid, SIGKILL);
    pclose(server_out);
    server_out = NULL;
}

/* What the host thread does with each auth/authorize request. */
enum behaviour { FOLLOW, SLOW_FOLLOW, CROWD };
static enum behaviour how;
static int asked;
static int forged_status;

/* Rewrites "http://localhost:" at the start of `url` (in place) as "http://127.0.0.1:". */
static void numeric_host(char *url) {
    const char *from = "http://localhost:";
    if (url == NULL || strncmp(url, from, strlen(from)) != 0) return;
    char rest[4096];
    snprintf(rest, sizeof rest, "%s", url + strlen(from));
    /* "127.0.0.1" is as long as "localhost". */
    snprintf(url, strlen(url) + 1, "http://127.0.0.1:%s", rest);
}

/* Opens a TCP connection to 127.0.0.1:port that sends nothing. */
static int idle_connection(int port) {
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_family = AF_INET;
    if (getaddrinfo("127.0.0.1", p, &hints, &res) != 0) return -1;
    int fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

static _Atomic int host_stop;

/* Runs until host_stop (joined, so that its resolver state is freed before exit: valgrind). */
static void *host(void *arg) {
    (void)arg;
    while (!host_stop) {
        char *ev = NULL;
        mcplug_status st = mcplug_auth_next_event(200, &ev);
        if (st != MCPLUG_OK || ev == NULL || !contains(ev, "\"type\":\"request\"") ||
            !contains(ev, "auth/authorize")) {
            mcplug_string_free(ev);
            continue;
        }
        asked++;
        char *id = string_after(ev, "id");
        char *auth_url = string_after(ev, "url");
        char *redirect = string_after(ev, "redirect_uri");
        CHECK_OUT(id != NULL && auth_url != NULL && redirect != NULL, ev, "an auth/authorize request with its id, url and redirect_uri");
        mcplug_string_free(ev);
        if (how == SLOW_FOLLOW) sleep_ms(6500);
        char *loc = location_of(auth_url);
        /* The listener is on 127.0.0.1 too: no name to look up on this thread (see http_get.h). */
        numeric_host(loc);
        numeric_host(redirect);
        char answer[4096];
        int idle[8];
        if (how == CROWD) {
            int port = atoi(strrchr(redirect, ':') + 1);
            for (int i = 0; i < 8; i++) idle[i] = idle_connection(port);
            char forged[1024], head[4096];
            snprintf(forged, sizeof forged, "%s?code=evil&state=forged", redirect);
            forged_status = http_get_head(forged, head, sizeof head) > 12 ? atoi(head + 9) : -1;
            http_get(loc); /* the real browser, through the listener */
            snprintf(answer, sizeof answer, "{\"id\":\"%s\",\"result\":{}}", id);
        } else {
            snprintf(answer, sizeof answer, "{\"id\":\"%s\",\"result\":{\"callback_url\":\"%s\"}}", id, loc ? loc : "");
        }
        char *out = NULL;
        mcplug_auth_respond(answer, &out);
        mcplug_string_free(out);
        if (how == CROWD) {
            sleep_ms(500);
            for (int i = 0; i < 8; i++)
                if (idle[i] >= 0) close(idle[i]);
        }
        free(id);
        free(auth_url);
        free(redirect);
        free(loc);
    }
    return NULL;
}

/* How many entries a /proc directory has. */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    int n = 0;
    while (readdir(d) != NULL) n++;
    closedir(d);
    return n;
}

static mcplug_status connect_to(const char *extra, mcplug_client **c, char **out) {
    char server[512], options[1024];
    snprintf(server, sizeof server, "{\"type\":\"http\",\"url\":\"%s\",\"name\":\"srv\"}", url);
    snprintf(options, sizeof options,
             "{\"auth_store\":\"memory\",\"auth_interactive\":true,\"connect_timeout_ms\":20000%s}", extra);
    return mcplug_client_connect(server, options, c, out);
}

static void call_whoami(mcplug_client *c) {
    char *out = NULL;
    mcplug_status st = mcplug_client_call_tool(c, "whoami", "{}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"ok\""), out, "whoami answers with the token sent");
    mcplug_string_free(out);
}

int main(void) {
    atexit(stop_server); /* a failed check exits: the server goes too */
    pthread_t th;
    CHECK(pthread_create(&th, NULL, host, NULL) == 0, "the host's auth thread runs");
    mcplug_client *c = NULL;
    char *out = NULL;

    /* MCPLUG_REGRESS_HELPER_ONLY=1: item 11 alone (to see it fail on an old library, which
     * fails item 1 first). */
    if (getenv("MCPLUG_REGRESS_HELPER_ONLY") != NULL) goto helper;

    /* 1. A slow login, a 2026-07-28-only server. */
    start_server("--era modern");
    how = SLOW_FOLLOW;
    asked = 0;
    double t0 = now_s();
    mcplug_status st = connect_to("", &c, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"protocol_version\":\"2026-07-28\""), out,
              "a 6.5 s login: the modern-only server connects in its era");
    CHECK(asked == 1, "the user was asked once (%d)", asked);
    CHECK(now_s() - t0 < bound_s(15), "within 15 s");
    mcplug_string_free(out);
    call_whoami(c);
    mcplug_client_free(c);
    stop_server();

    /* 2. Short and absurd token lifetimes. */
    const char *lifetimes[] = {"60", "299", "18446744073709551615"};
    for (int i = 0; i < 3; i++) {
        char flags[64];
        snprintf(flags, sizeof flags, "--expires-in %s", lifetimes[i]);
        start_server(flags);
        how = FOLLOW;
        st = connect_to("", &c, &out);
        CHECK_STATUS(st, MCPLUG_OK, out, "a token that lives %s s: connected", lifetimes[i]);
        mcplug_string_free(out);
        call_whoami(c);
        call_whoami(c);
        mcplug_client_free(c);
        stop_server();
    }

    /* 3. The loopback listener, crowded and forged at. */
    start_server("");
    how = CROWD;
    t0 = now_s();
    st = connect_to("", &c, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "connected through the listener past idle connections and a forged callback");
    mcplug_string_free(out);
    CHECK(now_s() - t0 < bound_s(5), "idle connections delayed nothing (%.1f s)", now_s() - t0);
    CHECK(forged_status == 400, "the forged callback was answered 400 (%d)", forged_status);
    call_whoami(c);
    mcplug_client_free(c);
    stop_server();

    /* 4. A token answer that trickles. */
    start_server("--token-trickle 30");
    how = FOLLOW;
    asked = 0;
    t0 = now_s();
    st = connect_to(",\"auth_request_timeout_ms\":2000", &c, &out);
    CHECK_OUT(st == MCPLUG_NEEDS_AUTH && contains(out, "\"reason\":\"timeout\"") && !contains(out, "refused"), out,
              "a trickling token answer is needs_auth with reason timeout");
    CHECK(asked == 1, "the user was asked once (%d)", asked);
    CHECK(now_s() - t0 < bound_s(15), "within 15 s");
    mcplug_string_free(out);
    stop_server();

helper:
    /* 11. A headersHelper that leaves a child holding its stdout. */
    start_server("--static-token helper-token");
    {
        char server[1024];
        snprintf(server, sizeof server,
                 "{\"type\":\"http\",\"url\":\"%s\",\"headersHelper\":"
                 "\"(sleep 30 &); setsid sleep 3 & printf '{\\\"Authorization\\\": \\\"Bearer helper-token\\\"}'\"}",
                 url);
        int fds = -1, tasks = -1;
        for (int i = 0; i < 10; i++) {
            t0 = now_s();
            st = mcplug_client_connect(server, "{\"auth_store\":\"memory\",\"connect_timeout_ms\":20000}", &c, &out);
            CHECK_STATUS(st, MCPLUG_OK, out, "connect %d with the helper", i);
            mcplug_string_free(out);
            CHECK(now_s() - t0 < bound_s(3), "the helper's exit ended its run (%.1f s)", now_s() - t0);
            call_whoami(c);
            mcplug_client_free(c);
            if (i == 1) { /* after a first connect has made what the library makes once */
                fds = count_entries("/proc/self/fd");
                tasks = count_entries("/proc/self/task");
            }
        }
        /* Eight more connects after the baseline: a descriptor left per run would be 8 more. What
         * is not per run may differ by one or two (an idle keep-alive connection to the server
         * pooled or not, a reaper's pidfd not yet closed; valgrind's own), so the count is given
         * a moment to settle and then a slack of 2. */
        {
            double until = now_s() + bound_s(2);
            while (count_entries("/proc/self/fd") > fds && now_s() < until) sleep_ms(50);
        }
        CHECK(count_entries("/proc/self/fd") <= fds + 2, "no descriptor left behind (%d, was %d)", count_entries("/proc/self/fd"), fds);
        CHECK(count_entries("/proc/self/task") <= tasks + 2, "no thread left behind (%d, was %d)", count_entries("/proc/self/task"), tasks);
    }
    stop_server();

    host_stop = 1;
    pthread_join(th, NULL);
    printf("# %d checks passed\n", check_count);
    return 0;
}
