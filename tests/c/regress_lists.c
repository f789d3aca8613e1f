/* Lists a hostile server makes too big, and storms of list_changed, through the C ABI
 * (tests/servers/list_storm_server.py; issue 32, items 7 and 8).
 *
 * 7: pages of 512 KiB with 16 KiB cursors, 300 of them (150 MiB): a client's list_tools stops at
 *    `max_list_bytes` (set, and the 64 MiB default) with `denied` naming the option, having asked
 *    for no page past the limit, and the host's memory stays bounded; the connection still works.
 *    A manager's listing too: its first tools/list (the server fails naming the option) and
 *    list_resources.
 * 8: 2,000 notifications/tools/list_changed make a few tools/list re-lists (one in flight, at most
 *    one queued), not one each; 2,000 resources/prompts list_changed leave one resources_changed
 *    and one prompts_changed event in the manager's queue, after their notifications.
 * 16: a manager's pool of 100,000 small tools (6.8 MB listed) grows the host by what was sent, not
 *    by 420 MiB as trees and per-tool copies did. */
#include "check.h"

static void storm_server_json(char *buf, size_t cap, const char *extra, const char *a1, const char *a2,
                              const char *a3, const char *a4, const char *a5, const char *a6) {
    server_json(buf, cap, extra, peer("MCPLUG_PYTHON"), peer("MCPLUG_LIST_STORM_SERVER"), a1, a2, a3, a4, a5,
                a6, (const char *)NULL);
}

/* `<method>=N` in the server's counts text. */
static long count_in(const char *out, const char *method) {
    char key[64];
    const char *at;
    snprintf(key, sizeof key, "%s=", method);
    at = out ? strstr(out, key) : NULL;
    return at ? strtol(at + strlen(key), NULL, 10) : -1;
}

static long client_count(mcplug_client *c, const char *method) {
    char *out = NULL;
    mcplug_status st = mcplug_client_call_tool(c, "counts", NULL, NULL, &out);
    long n;
    CHECK_STATUS(st, MCPLUG_OK, out, "counts -> OK");
    n = count_in(out, method);
    drop(&out);
    return n;
}

/* The resident memory now (VmRSS), in MiB. */
static long rss_now_mib(void) {
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, NULL, 10);
    fclose(f);
    return kib < 0 ? -1 : kib / 1024;
}

static void manager_connect(mcplug_manager *m, const char *name, const char *server);

static void many_tools_through_a_manager(void) {
    char server[4096], count[32], last[64];
    char *out = NULL;
    mcplug_status st;
    mcplug_manager *m;
    long before, after, n = reduced() ? 10000 : 100000;
    snprintf(count, sizeof count, "%ld", n);
    storm_server_json(server, sizeof server, NULL, "--many-tools", count, NULL, NULL, NULL, NULL);
    before = rss_now_mib();
    m = manager_or_die(NULL);
    manager_connect(m, "many", server);
    st = mcplug_manager_list_tools(m, NULL, &out);
    snprintf(last, sizeof last, "\"name\":\"mcp__many__t%ld\"", n - 1);
    CHECK_OUT(st == MCPLUG_OK && count_of(out, "\"server\":\"many\"") == n + 3 && contains(out, last) &&
                  contains(out, "\"inputSchema\":{\"type\":\"object\"}"),
              NULL, "a pool of %ld tools (and the server's 3), each as the server wrote it", n);
    printf("# the listing of %ld tools is %zu bytes\n", n, strlen(out));
    drop(&out);
    after = rss_now_mib();
    printf("# resident: %ld MiB before, %ld MiB with the pool of %ld tools (6.8 MB listed for 100,000)\n", before,
           after, n);
    if (!reduced() && !under_asan())
        CHECK(after - before < 200, "the pool grows the host by %ld MiB (before the fix: 420 MiB)", after - before);
    mcplug_manager_free(m);
}

static void big_pages_through_a_client(const char *options, long limit, long most_pages) {
    char server[4096];
    char *out = NULL;
    mcplug_status st;
    mcplug_client *c;
    long asked;
    storm_server_json(server, sizeof server, NULL, "--page-kib", "512", "--pages", "300", "--cursor-kib", "16");
    c = connect_or_die(server, options, "the big-pages server");
    st = mcplug_client_list_tools(c, NULL, &out);
    {
        char want[64];
        snprintf(want, sizeof want, "passed %ld bytes", limit);
        CHECK_OUT(st == MCPLUG_DENIED && is_error(out, "denied", "max_list_bytes") && contains(out, want), out,
                  "150 MiB of pages: list_tools is denied at %ld bytes, naming max_list_bytes (got %s)", limit,
                  status_name(st));
    }
    drop(&out);
    asked = client_count(c, "tools/list");
    CHECK(asked >= 2 && asked <= most_pages, "no page asked for past the limit (%ld pages, at most %ld)", asked,
          most_pages);
    st = mcplug_client_call_tool(c, "echo", "{\"message\":\"still here\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "still here"), out, "the connection still works");
    drop(&out);
    mcplug_client_free(c);
}

static void manager_connect(mcplug_manager *m, const char *name, const char *server) {
    char config[8192];
    char *out = NULL;
    mcplug_status st;
    snprintf(config, sizeof config, "{\"mcpServers\":{\"%s\":%s}}", name, server);
    st = mcplug_manager_connect(m, config, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "manager connect %s -> OK", name);
    drop(&out);
    st = mcplug_manager_wait(m, "{\"timeout_ms\":60000}", &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "manager wait %s -> OK", name);
    drop(&out);
}

static void big_pages_through_a_manager(void) {
    char server[4096];
    char *out = NULL;
    mcplug_status st;
    mcplug_manager *m = manager_or_die("{\"connection\":{\"max_list_bytes\":4194304},\"reconnect_attempts\":0}");
    /* Its tools: the first tools/list of the connection fails, and so does the server. */
    storm_server_json(server, sizeof server, NULL, "--page-kib", "512", "--pages", "300", "--paged", "tools/list");
    manager_connect(m, "bigtools", server);
    st = mcplug_manager_status(m, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"bigtools\":{\"state\":\"failed\"") && contains(out, "max_list_bytes"),
              out, "a manager's server whose tools pass max_list_bytes fails, naming it");
    drop(&out);
    /* Its resources: listed when the host asks, denied for that server. */
    storm_server_json(server, sizeof server, NULL, "--page-kib", "512", "--pages", "300", "--paged",
                      "resources/list");
    manager_connect(m, "bigres", server);
    st = mcplug_manager_list_resources(m, "{\"server\":\"bigres\"}", &out);
    CHECK_OUT(st == MCPLUG_DENIED && is_error(out, "denied", "max_list_bytes"), out,
              "a manager's list_resources past max_list_bytes is denied, naming it (got %s)", status_name(st));
    drop(&out);
    st = mcplug_manager_close(m, &out);
    drop(&out);
    mcplug_manager_free(m);
}

static long manager_count(mcplug_manager *m, const char *method) {
    char *out = NULL;
    mcplug_status st = mcplug_manager_call_tool(m, "mcp__storm__counts", NULL, NULL, &out);
    long n;
    CHECK_STATUS(st, MCPLUG_OK, out, "counts -> OK");
    n = count_in(out, method);
    drop(&out);
    return n;
}

/* The count once it stopped changing (the re-lists are asynchronous). */
static long settled_count(mcplug_manager *m, const char *method) {
    long before = -1, now = manager_count(m, method);
    double until = now_s() + bound_s(20);
    while (now != before && now_s() < until) {
        sleep_ms(500);
        before = now;
        now = manager_count(m, method);
    }
    return now;
}

/* Every event queued now; counts those holding `needle`. */
static int drain_events(mcplug_manager *m, const char *needle) {
    int n = 0;
    for (;;) {
        char *ev = NULL;
        mcplug_status st = mcplug_manager_next_event(m, 0, &ev);
        if (st != MCPLUG_OK) {
            mcplug_string_free(ev);
            return n;
        }
        if (contains(ev, needle)) n++;
        mcplug_string_free(ev);
    }
}

static void list_changed_storm(void) {
    char server[4096];
    char *out = NULL;
    mcplug_status st;
    long lists, relists;
    int events;
    mcplug_manager *m = manager_or_die("{\"reconnect_attempts\":0}");
    storm_server_json(server, sizeof server, NULL, "--slow-list-ms", "5", NULL, NULL, NULL, NULL);
    manager_connect(m, "storm", server);
    lists = manager_count(m, "tools/list");
    CHECK(lists == 1, "one tools/list at connect (%ld)", lists);
    drain_events(m, "tools_changed");

    st = mcplug_manager_call_tool(m, "mcp__storm__storm", "{\"n\":2000}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "sent 2000"), out, "2,000 tools/list_changed sent");
    drop(&out);
    relists = settled_count(m, "tools/list") - lists;
    CHECK(relists >= 1 && relists <= 3,
          "2,000 tools list_changed: %ld re-lists (one in flight, at most one queued; was one each)", relists);
    events = drain_events(m, "\"type\":\"tools_changed\"");
    CHECK(events >= 1 && events <= 3, "%d tools_changed events for them", events);
    st = mcplug_manager_list_tools(m, NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "mcp__storm__echo"), out, "the pool still has the server's tools");
    drop(&out);

    st = mcplug_manager_call_tool(m, "mcp__storm__storm", "{\"n\":2000,\"what\":\"resources\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK, out, "2,000 resources/list_changed sent");
    drop(&out);
    st = mcplug_manager_call_tool(m, "mcp__storm__storm", "{\"n\":2000,\"what\":\"prompts\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK, out, "2,000 prompts/list_changed sent");
    drop(&out);
    sleep_ms(300);
    {
        /* Both kinds counted in one pass over the queue. */
        int resources = 0, prompts = 0, res_cause = 0, prompt_cause = 0;
        for (;;) {
            char *ev = NULL;
            st = mcplug_manager_next_event(m, 0, &ev);
            if (st != MCPLUG_OK) {
                mcplug_string_free(ev);
                break;
            }
            if (contains(ev, "notifications/resources/list_changed")) res_cause = 1;
            if (contains(ev, "notifications/prompts/list_changed")) prompt_cause = 1;
            if (contains(ev, "\"type\":\"resources_changed\"")) {
                resources++;
                CHECK_OUT(res_cause, ev, "resources_changed comes after its notification");
            }
            if (contains(ev, "\"type\":\"prompts_changed\"")) {
                prompts++;
                CHECK_OUT(prompt_cause, ev, "prompts_changed comes after its notification");
            }
            mcplug_string_free(ev);
        }
        CHECK(resources == 1, "2,000 resources list_changed leave one resources_changed event (%d; was 2,000)",
              resources);
        CHECK(prompts == 1, "2,000 prompts list_changed leave one prompts_changed event (%d; was 2,000)", prompts);
    }
    st = mcplug_manager_close(m, &out);
    drop(&out);
    mcplug_manager_free(m);
}

int main(void) {
    long rss;
    many_tools_through_a_manager();
    big_pages_through_a_client("{\"max_list_bytes\":4194304}", 4194304, 9);
    big_pages_through_a_client(NULL, 64L << 20, 130);
    rss = max_rss_mib();
    printf("# peak resident memory after the big lists: %ld MiB\n", rss);
    if (!reduced()) CHECK(rss < 400, "memory stays bounded (%ld MiB at the peak; 150 MiB of pages were offered)", rss);
    big_pages_through_a_manager();
    list_changed_storm();
    printf("# %d checks passed\n", check_count);
    return 0;
}
