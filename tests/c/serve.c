/* A host serving its own manager through the C ABI (mcplug_manager_serve): the manager over
 * server-everything (stdio) is served over Streamable HTTP and over a pair of pipes. Shown: the
 * URL in `out`; mcplug's own client connects to that URL (the 2026-07-28 era) and lists and calls
 * the pool's tools through it, the host's own (sdk) tool included — its call comes to the host
 * as an event and the host's answer goes back to the client; a client over the pipes opens with initialize and gets its
 * answer; bad options name what was wrong; close ends the sessions and the listener (a new
 * connection is refused), the manager stays usable; free leaves nothing behind. */
#include "check.h"

#include <pthread.h>
#include <unistd.h>

static mcplug_manager *M;

/* A call through the served URL, made on a thread of its own (the host answers its own tool's
 * call meanwhile). */
struct through {
    mcplug_client *client;
    const char *tool;
    const char *args;
    mcplug_status status;
    char *out;
};

static void *call_through(void *arg) {
    struct through *t = arg;
    t->status = mcplug_client_call_tool(t->client, t->tool, t->args, NULL, &t->out);
    return NULL;
}

/* Reads from `fd` until a line holding `needle` (or 10 s); returns it (malloc'd) or NULL. */
static char *read_line_with(int fd, const char *needle) {
    static char buf[1 << 16];
    static size_t have = 0;
    double until = now_s() + bound_s(10);
    while (now_s() < until) {
        char *nl;
        while ((nl = memchr(buf, '\n', have)) != NULL) {
            size_t len = (size_t)(nl - buf);
            char *line = malloc(len + 1);
            memcpy(line, buf, len);
            line[len] = '\0';
            memmove(buf, nl + 1, have - len - 1);
            have -= len + 1;
            if (contains(line, needle)) return line;
            free(line);
        }
        ssize_t n = read(fd, buf + have, sizeof buf - have - 1);
        if (n <= 0) return NULL;
        have += (size_t)n;
    }
    return NULL;
}

int main(void) {
    char e_everything[4096], config[8192], client_json[512], options[256];
    char *out = NULL, *url = NULL;
    mcplug_server *served = NULL;
    mcplug_status st;
    test_init();

    server_json(e_everything, sizeof e_everything, NULL, peer("MCPLUG_NODE"), peer("MCPLUG_EVERYTHING"), "stdio",
                (const char *)NULL);
    snprintf(config, sizeof config,
             "{\"mcpServers\":{\"everything\":%s,\"host\":{\"type\":\"sdk\",\"tools\":[{\"name\":\"shout\","
             "\"description\":\"The host's own tool\",\"inputSchema\":{\"type\":\"object\"}}]}}}",
             e_everything);
    M = manager_or_die(NULL);
    manager_connect_or_die(M, config, "server-everything");

    /* Bad options: each names what was wrong, and nothing is served. */
    st = mcplug_manager_serve(M, "{\"transport\":\"carrier-pigeon\"}", &served, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "transport") && served == NULL, out,
              "an unknown transport -> invalid_argument naming `transport`");
    drop(&out);
    st = mcplug_manager_serve(M, "{\"transport\":\"http\",\"port\":1}", &served, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "port"), out, "an unknown key -> invalid_argument naming it");
    drop(&out);
    st = mcplug_manager_serve(M, "{\"transport\":\"fds\",\"read_fd\":987654,\"write_fd\":1}", &served, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "read_fd"), out, "a descriptor that is not open -> invalid_argument");
    drop(&out);
    st = mcplug_manager_serve(M, "{\"transport\":\"http\",\"names\":\"shouty\"}", &served, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "names"), out, "a bad `names` -> invalid_argument");
    drop(&out);

    /* Streamable HTTP: the URL comes back; mcplug's own client reaches the pool through it. */
    st = mcplug_manager_serve(M, "{\"transport\":\"http\",\"listen\":\"127.0.0.1:0\"}", &served, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "serve over http -> OK");
    url = string_after(out, "url");
    CHECK_OUT(url != NULL && strncmp(url, "http://127.0.0.1:", 17) == 0 && contains(url, "/mcp"), out, "out has the URL");
    drop(&out);
    {
        mcplug_client *c;
        snprintf(client_json, sizeof client_json, "{\"type\":\"http\",\"url\":\"%s\"}", url);
        c = connect_or_die(client_json, NULL, "mcplug serve over http");
        st = mcplug_client_list_tools(c, NULL, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"mcp__everything__echo\""), out, "the pool's tools, by pool name");
        drop(&out);
        st = mcplug_client_call_tool(c, "mcp__everything__echo", "{\"message\":\"from C\"}", NULL, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "Echo: from C"), out, "a call through the gateway");
        drop(&out);
        /* The host's own tool, served: its call comes to the host as the manager's event (the
         * server takes only what concerns its clients), and the host's answer goes back. */
        {
            struct through t = {c, "mcp__host__shout", "{\"text\":\"hi\"}", MCPLUG_OK, NULL};
            pthread_t th;
            char *ev = NULL, *id = NULL, answer[512];
            double until = now_s() + bound_s(10);
            CHECK(pthread_create(&th, NULL, call_through, &t) == 0, "a thread for the call");
            while (id == NULL && now_s() < until) {
                st = mcplug_manager_next_event(M, 200, &ev);
                if (st == MCPLUG_OK && contains(ev, "\"type\":\"request\"") && contains(ev, "\"server\":\"host\"")) {
                    CHECK_OUT(contains(ev, "\"text\":\"hi\""), ev, "the host gets the client's arguments");
                    id = string_after(ev, "id");
                }
                drop(&ev);
            }
            CHECK(id != NULL, "the host tool's call reached the host");
            snprintf(answer, sizeof answer, "{\"id\":\"%s\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"HI\"}]}}",
                     id ? id : "");
            st = mcplug_manager_respond(M, answer, &out);
            CHECK_STATUS(st, MCPLUG_OK, out, "the host answers its tool's call");
            drop(&out);
            pthread_join(th, NULL);
            CHECK_OUT(t.status == MCPLUG_OK && contains(t.out, "\"HI\""), t.out, "the client gets the host tool's result");
            mcplug_string_free(t.out);
            free(id);
        }
        mcplug_client_free(c);
    }
    st = mcplug_server_close(served, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "mcplug_server_close -> OK");
    drop(&out);
    {
        mcplug_client *c = NULL;
        st = mcplug_client_connect(client_json, "{\"connect_timeout_ms\":3000}", &c, &out);
        CHECK_OUT(st != MCPLUG_OK && c == NULL, out, "after close, nothing listens at the URL");
        drop(&out);
    }
    mcplug_server_free(served);
    served = NULL;
    free(url);

    /* The manager is still the host's. */
    st = mcplug_manager_call_tool(M, "mcp__everything__echo", "{\"message\":\"still mine\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "Echo: still mine"), out, "the manager works after its server closed");
    drop(&out);

    /* A pair of pipes: one client, newline-delimited. */
    {
        int to_server[2], from_server[2];
        char *line;
        const char *init =
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\","
            "\"capabilities\":{},\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}}\n"
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":\"piped\"}}}\n";
        CHECK(pipe(to_server) == 0 && pipe(from_server) == 0, "pipes");
        snprintf(options, sizeof options, "{\"transport\":\"fds\",\"read_fd\":%d,\"write_fd\":%d,\"names\":\"unprefixed\"}",
                 to_server[0], from_server[1]);
        st = mcplug_manager_serve(M, options, &served, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"url\":null"), out, "serve over two descriptors -> OK, no URL");
        drop(&out);
        /* They were duplicated: the host's copies are its own to close. */
        close(to_server[0]);
        close(from_server[1]);
        CHECK(write(to_server[1], init, strlen(init)) == (ssize_t)strlen(init), "the client writes");
        line = read_line_with(from_server[0], "\"id\":1");
        CHECK_OUT(line != NULL && contains(line, "\"protocolVersion\":\"2025-06-18\"") && contains(line, "\"name\":\"mcplug\""),
                  line, "initialize answered, the client's version kept");
        free(line);
        line = read_line_with(from_server[0], "\"id\":2");
        CHECK_OUT(line != NULL && contains(line, "Echo: piped"), line, "an unprefixed tool called over the pipes");
        free(line);
        st = mcplug_server_close(served, &out);
        CHECK_STATUS(st, MCPLUG_OK, out, "close -> OK");
        drop(&out);
        {
            char b[64];
            double until = now_s() + bound_s(5);
            ssize_t n = 1;
            while (n > 0 && now_s() < until) n = read(from_server[0], b, sizeof b);
            CHECK(n == 0, "after close, the client reads the end of the stream");
        }
        mcplug_server_free(served);
        close(to_server[1]);
        close(from_server[0]);
    }

    mcplug_manager_free(M);
    return finish("serve");
}
