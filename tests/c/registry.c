/* The registry's marks (M9) through the C ABI: a manager with option `registry` naming a registry
 * of the tests' own (tests/servers/registry_server.py, the official `/v0.1/servers` format, two
 * entries a page) that knows server-everything over Streamable HTTP by its URL and a stdio server
 * by its npm package (deprecated, with a message). Shown: the fetch runs in the background and its
 * state is in the status; each known server's status and pool entries carry
 * `registry: {name, status, match}`; a server it does not know carries none; a bad `registry`
 * option is named. */
#include "check.h"

#include <stdlib.h>

int main(void) {
    char config[4096], options[1024], cache[1024];
    char *out = NULL;
    mcplug_manager *m, *bad = NULL;
    mcplug_status st;
    double until;
    int ready = 0;

    test_init();
    /* The registry's disk cache in a folder of this run's own, never the user's. */
    snprintf(cache, sizeof cache, "%s/registry-cache-%ld", peer("MCPLUG_TEST_TMPDIR"), (long)getpid());
    setenv("XDG_CACHE_HOME", cache, 1);
    unsetenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC");
    snprintf(options, sizeof options, "{\"registry\":\"%s\",\"disabled\":[\"old\",\"unknown\"]}", peer("MCPLUG_REGISTRY_URL"));
    m = manager_or_die(options);
    st = mcplug_manager_status(m, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"state\":\"idle\""), out, "nothing is fetched before a connect");
    drop(&out);
    snprintf(config, sizeof config,
             "{\"mcpServers\":{\"ev\":{\"type\":\"http\",\"url\":\"%s\"},"
             "\"old\":{\"command\":\"npx\",\"args\":[\"-y\",\"@acme/old-cli@1.0.0\"]},"
             "\"unknown\":{\"command\":\"npx\",\"args\":[\"-y\",\"@acme/nobody\"]}}}",
             peer("MCPLUG_HTTP_URL"));
    st = mcplug_manager_connect(m, config, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "connect -> OK");
    drop(&out);
    st = mcplug_manager_wait(m, "{\"timeout_ms\":60000}", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"ev\":{\"state\":\"connected\""), out, "ev connects");
    drop(&out);
    until = now_s() + bound_s(30);
    while (!ready && now_s() < until) {
        st = mcplug_manager_status(m, &out);
        ready = st == MCPLUG_OK && !contains(out, "\"state\":\"loading\",\"servers\"");
        if (!ready) {
            drop(&out);
            sleep_ms(50);
        }
    }
    CHECK_OUT(ready && contains(out, "\"state\":\"ready\",\"servers\":3"), out, "the registry's three entries are in (three pages)");
    CHECK_OUT(contains(out, "\"registry\":{\"name\":\"io.test/everything\",\"status\":\"active\",\"match\":\"url\""), out,
              "ev is known by its URL");
    CHECK_OUT(contains(out, "\"registry\":{\"name\":\"io.test/old-cli\",\"status\":\"deprecated\",\"match\":\"package\"") &&
                  contains(out, "\"statusMessage\":\"use io.test/new-cli\""),
              out, "old is known by its npm package, deprecated, with the registry's message");
    CHECK_OUT(count_of(out, "\"registry\":{\"name\"") == 2, out, "unknown carries no mark");
    drop(&out);
    st = mcplug_manager_list_tools(m, NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"name\":\"mcp__ev__echo\"") &&
                  count_of(out, "\"registry\":{\"name\":\"io.test/everything\"") == count_of(out, "\"server\":\"ev\""),
              out, "every pool entry of ev carries its mark");
    drop(&out);
    mcplug_manager_free(m);

    st = mcplug_manager_new("{\"registry\":\"ftp://registry.example\"}", &bad, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && bad == NULL && contains(out, "registry") && contains(out, "http(s) URL"), out,
              "a registry that is not an http(s) URL is refused, named");
    drop(&out);
    return finish("registry");
}
