/* Issue 32, items 5 and 6, through the C ABI, against tests/servers/names_server.py.
 * 6: servers "x" (tool and prompt y__z) and "x__y" (z) both make mcp__x__y__z: the name goes to
 *    neither — the pool reports a collision for both, a call and a prompt by it are refused naming
 *    both servers, and their other names still route.
 * 5: a skill whose entry lists skill://srv/demo/../other/secret.md does not load, and a read of
 *    skill://srv/demo/../../etc/passwd (or %2e%2e) is refused unsent.
 * 16: a SKILL.md whose frontmatter is 12 MiB, or 20,000 YAML nodes in 40 KB, is refused before it
 *    is parsed: at once, and without the gigabyte a 15 MiB block used to cost. */
#include "check.h"

int main(void) {
    test_init();
    char *out = NULL, ex[2048], exy[2048], esk[2048], config[8192];
    mcplug_status st;
    mcplug_manager *m;

    server_json(ex, sizeof ex, NULL, peer("MCPLUG_PYTHON"), peer("MCPLUG_NAMES_SERVER"), "x", (const char *)NULL);
    server_json(exy, sizeof exy, NULL, peer("MCPLUG_PYTHON"), peer("MCPLUG_NAMES_SERVER"), "x__y", (const char *)NULL);
    snprintf(config, sizeof config, "{\"mcpServers\":{\"x\":%s,\"x__y\":%s}}", ex, exy);
    m = manager_or_die(NULL);
    manager_connect_or_die(m, config, "x and x__y");

    st = mcplug_manager_list_tools(m, NULL, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "list_tools -> OK");
    CHECK_OUT(contains(out, "\"name\":\"mcp__x__own\"") && contains(out, "\"name\":\"mcp__x__y__own\""), out,
              "the names only one server makes are in the pool");
    CHECK_OUT(contains(out, "\"server\":\"x\",\"tool\":\"y__z\",\"reason\":\"collision\"") ||
                  contains(out, "\"reason\":\"collision\""),
              out, "the collision is reported");
    CHECK_OUT(contains(out, "\"tool\":\"y__z\"") && contains(out, "\"tool\":\"z\""), out,
              "for both servers' tools");
    drop(&out);
    char *got = NULL;
    st = mcplug_manager_call_tool(m, "mcp__x__y__z", "{}", NULL, &got);
    CHECK_OUT(st == MCPLUG_NOT_FOUND && is_error(got, "not_found", "\\\"x__y\\\"") && contains(got, "\\\"x\\\""),
              got, "a call by the collided name is refused naming both servers");
    CHECK_OUT(!contains(got, "x:y__z") && !contains(got, "x__y:z"), got, "and reaches neither");
    drop(&got);
    st = mcplug_manager_call_tool(m, "mcp__x__y__own", "{}", NULL, &got);
    CHECK_OUT(st == MCPLUG_OK && contains(got, "x__y:own"), got, "mcp__x__y__own goes to x__y");
    drop(&got);

    st = mcplug_manager_list_prompts(m, NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"reason\":\"collision\"") && contains(out, "\"prompt\":\"y__z\"") &&
                  contains(out, "\"prompt\":\"z\",\"reason\":\"collision\"") &&
                  !contains(out, "\"prompt\":\"y__z\"}") && !contains(out, "\"prompt\":\"z\"}"),
              out, "prompts: the same collision, reported for both");
    drop(&out);
    st = mcplug_manager_get_prompt(m, "mcp__x__y__z", NULL, NULL, &got);
    CHECK_OUT(st == MCPLUG_NOT_FOUND && is_error(got, "not_found", "\\\"x__y\\\"") && !contains(got, ":z"), got,
              "get_prompt by the collided name is refused naming both servers");
    drop(&got);
    st = mcplug_manager_get_prompt(m, "mcp__x__own", NULL, NULL, &got);
    CHECK_OUT(st == MCPLUG_OK && contains(got, "x:own"), got, "mcp__x__own goes to x");
    drop(&got);
    mcplug_manager_free(m);

    /* Item 5: skills. */
    server_json(esk, sizeof esk, NULL, peer("MCPLUG_PYTHON"), peer("MCPLUG_NAMES_SERVER"), "skills", (const char *)NULL);
    mcplug_client *c = connect_or_die(esk, NULL, "the skills server");
    st = mcplug_client_load_skill(c, "skill://srv/demo/SKILL.md", NULL, &out);
    CHECK_OUT(st == MCPLUG_PROTOCOL && is_error(out, "protocol", "dot segment") &&
                  contains(out, "skill://srv/demo/../other/secret.md"),
              out, "an entry listing a file outside its folder does not load, naming the URI");
    CHECK_OUT(!contains(out, "\"verified\":true"), out, "nothing verified");
    drop(&out);
    st = mcplug_client_call_tool(c, "escapes", "{}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"text\":\"0\""), out, "nothing escaping was read");
    drop(&out);

    /* Item 16: frontmatter that costs too much to parse. */
    {
        double t0 = now_s();
        long rss;
        st = mcplug_client_load_skill(c, "skill://srv/huge/SKILL.md", NULL, &out);
        CHECK_OUT(st == MCPLUG_INVALID_RESULT && is_error(out, "invalid_result", "larger than 65536 bytes") &&
                      contains(out, "\"check\":\"frontmatter\""),
                  out, "a 12 MiB frontmatter block is refused as too large (got %s)", status_name(st));
        CHECK(now_s() - t0 < bound_s(5.0), "... in %.2f s (the 12 MiB read included)", now_s() - t0);
        drop(&out);
        rss = max_rss_mib();
        printf("# peak resident memory after the 12 MiB skill: %ld MiB\n", rss);
        if (!reduced() && !under_asan())
            CHECK(rss < 300, "... without parsing it (peak %ld MiB; a 15 MiB block once cost 1.1 GB)", rss);
        st = mcplug_client_load_skill(c, "skill://srv/wide/SKILL.md", NULL, &out);
        CHECK_OUT(st == MCPLUG_INVALID_RESULT && is_error(out, "invalid_result", "more than 10000 YAML nodes"), out,
                  "20,000 YAML nodes in 40 KB are refused (got %s)", status_name(st));
        drop(&out);
        st = mcplug_client_load_skill(c, "skill://srv/demo/SKILL.md", NULL, &out);
        CHECK_OUT(st == MCPLUG_PROTOCOL, out, "the connection still serves its other skills' checks");
        drop(&out);
    }
    mcplug_client_free(c);
    return finish("regress_names");
}
