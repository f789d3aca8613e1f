/* What the host hands the model, through the C ABI: a manager over server-everything and the fault
 * server with max_output_chars 40, max_media_bytes 64 and an output_dir. Shown: a tool's image over
 * the media limit is kept whole in a 0600 .png the result names; tool text, a resource read and a
 * prompt are cut alike, each naming the file that keeps it whole; a blob over the media limit is
 * replaced; the status carries each server's instructions; bad output options are named. Then
 * `format`: a second manager and a single client hand tools and results over as the Anthropic
 * Messages API and OpenAI Chat Completions take them; a function that neither calls nor lists
 * tools refuses `format`. */
#include "check.h"

#include <sys/stat.h>

/* The path a cut result names ("kept whole in PATH" / "the whole output is in PATH"), or "". */
static void kept_path(const char *out, char *buf, size_t cap) {
    const char *keys[] = {"kept whole in ", "the whole output is in "};
    size_t i, n = 0;
    buf[0] = '\0';
    for (i = 0; i < 2; i++) {
        const char *p = strstr(out, keys[i]);
        if (!p) continue;
        p += strlen(keys[i]);
        while (p[n] && p[n] != ' ' && p[n] != ']' && p[n] != '"' && n + 1 < cap) n++;
        memcpy(buf, p, n);
        buf[n] = '\0';
        return;
    }
}

static int private_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 0777) == 0600;
}

int main(void) {
    char e_everything[2048], e_fault[2048], config[8192], options[2048], dir[1024], path[2048], head[8];
    char *out = NULL;
    mcplug_manager *m, *bad = NULL;
    mcplug_status st;
    FILE *f;

    test_init();
    snprintf(dir, sizeof dir, "%s/model-view-%ld", peer("MCPLUG_TEST_TMPDIR"), (long)getpid());
    server_json(e_everything, sizeof e_everything, NULL, peer("MCPLUG_NODE"), peer("MCPLUG_EVERYTHING"), "stdio", (const char *)NULL);
    fault_server_json(e_fault, sizeof e_fault, "normal");
    snprintf(config, sizeof config, "{\"mcpServers\":{\"everything\":%s,\"fault\":%s}}", e_everything, e_fault);
    snprintf(options, sizeof options, "{\"max_output_chars\":40,\"max_media_bytes\":64,\"output_dir\":\"%s\"}", dir);
    m = manager_or_die(options);
    manager_connect_or_die(m, config, "everything and fault");

    st = mcplug_manager_call_tool(m, "mcp__everything__get-tiny-image", "{}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "image (image/png") && !contains(out, "\"type\":\"image\""), out,
              "an image over max_media_bytes is replaced by a note");
    kept_path(out, path, sizeof path);
    CHECK_OUT(strncmp(path, dir, strlen(dir)) == 0 && strstr(path, ".png") != NULL, out, "kept in a .png under output_dir");
    CHECK(private_file(path), "the kept file %s is 0600", path);
    f = fopen(path, "rb");
    CHECK(f != NULL && fread(head, 1, 4, f) == 4 && memcmp(head, "\x89PNG", 4) == 0, "and holds the PNG itself");
    if (f) fclose(f);
    drop(&out);

    st = mcplug_manager_call_tool(m, "mcp__fault__echo",
                                  "{\"message\":\"0123456789012345678901234567890123456789012345678901234567890123456789\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "characters cut; the limit is 40") && contains(out, "the whole output is in"), out,
              "tool text over 40 characters is cut, naming the kept file");
    kept_path(out, path, sizeof path);
    CHECK(private_file(path), "the kept text %s is 0600", path);
    drop(&out);

    st = mcplug_manager_read_resource(m, "everything", "demo://resource/dynamic/text/1", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "characters cut; the limit is 40"), out, "a resource read is cut alike");
    drop(&out);
    st = mcplug_manager_read_resource(m, "everything", "demo://resource/dynamic/blob/1", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && !contains(out, "\"blob\"") && contains(out, "blob (text/plain"), out,
              "a blob over max_media_bytes is replaced");
    drop(&out);
    st = mcplug_manager_get_prompt(m, "mcp__everything__resource-prompt", "{\"resourceType\":\"Text\",\"resourceId\":\"3\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "characters cut; the limit is 40"), out, "a prompt is cut alike");
    drop(&out);

    st = mcplug_manager_status(m, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"instructions\":\"mode normal\""), out, "the status carries instructions");
    drop(&out);
    mcplug_manager_free(m);

    /* A policy applies to a raw mcpServers object. */
    {
        mcplug_manager *q = manager_or_die("{\"policy\":{\"deniedMcpServers\":[{\"serverName\":\"bad\"}]}}");
        char two[6000];
        snprintf(two, sizeof two, "{\"mcpServers\":{\"good\":%s,\"bad\":%s}}", e_fault, e_fault);
        st = mcplug_manager_connect(q, two, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"excluded\":[{\"name\":\"bad\",\"reason\":\"denied\"") && !contains(out, "\"bad\":{"), out,
                  "policy: a denied server of a raw mcpServers is left out, saying why");
        drop(&out);
        mcplug_manager_free(q);
    }

    st = mcplug_manager_new("{\"output_dir_max_bytes\":10}", &bad, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "output_dir"), out,
              "output_dir_max_bytes without output_dir is named");
    drop(&out);
    st = mcplug_manager_new("{\"max_media_bytes\":-1}", &bad, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "max_media_bytes"), out,
              "a bad max_media_bytes is named");
    drop(&out);
    {
        mcplug_manager *p = manager_or_die(NULL);
        mcplug_client *c;
        char e_only[4096];
        snprintf(e_only, sizeof e_only, "{\"mcpServers\":{\"everything\":%s}}", e_everything);
        manager_connect_or_die(p, e_only, "everything");
        st = mcplug_manager_list_tools(p, "{\"format\":\"anthropic\"}", &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"input_schema\"") && !contains(out, "\"inputSchema\""), out,
                  "list_tools format anthropic: Messages API tool definitions");
        drop(&out);
        st = mcplug_manager_search_tools(p, "echo", "{\"format\":\"openai\",\"max_results\":2}", &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"type\":\"function\"") && contains(out, "\"parameters\""), out,
                  "search_tools format openai: function tools");
        drop(&out);
        st = mcplug_manager_call_tool(p, "mcp__everything__get-tiny-image", "{}", "{\"format\":\"anthropic\"}", &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"media_type\":\"image/png\"") && contains(out, "\"is_error\":false"), out,
                  "call_tool format anthropic: an image block");
        drop(&out);
        st = mcplug_manager_call_tool(p, "mcp__everything__echo", "{\"message\":\"hi\"}", "{\"format\":\"openai\"}", &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"content\":\"Echo: hi\"") && contains(out, "\"role\":\"tool\"") && contains(out, "\"is_error\":false"), out,
                  "call_tool format openai: the tool message");
        drop(&out);
        st = mcplug_manager_get_prompt(p, "mcp__everything__args-prompt", "\"\\\"New York\\\" NY\"", NULL, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "New York, NY"), out, "a prompt takes a command line (a JSON string)");
        drop(&out);
        st = mcplug_manager_get_prompt(p, "mcp__everything__args-prompt", "\"a b c\"", NULL, &out);
        CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "3 words"), out,
                  "a command line with more words than arguments is named");
        drop(&out);
        st = mcplug_manager_read_resource(p, "everything", "demo://resource/dynamic/text/1", "{\"format\":\"anthropic\"}", &out);
        CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "call_tool, list_tools and search_tools"), out,
                  "read_resource refuses format, naming where it applies");
        drop(&out);
        st = mcplug_manager_call_tool(p, "mcp__everything__echo", "{\"message\":\"hi\"}", "{\"format\":\"gemini\"}", &out);
        CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "format"), out, "an unknown format is named");
        drop(&out);
        mcplug_manager_free(p);

        p = manager_or_die("{\"resource_tools\":true}");
        manager_connect_or_die(p, e_only, "everything, with resource_tools");
        st = mcplug_manager_list_tools(p, NULL, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"name\":\"ListMcpResourcesTool\"") && contains(out, "\"name\":\"ReadMcpResourceTool\""), out,
                  "resource_tools: Claude Code's two resource tools are in the pool");
        drop(&out);
        st = mcplug_manager_call_tool(p, "ListMcpResourcesTool", "{}", NULL, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\\\"server\\\":\\\"everything\\\"") && !contains(out, "isError"), out,
                  "ListMcpResourcesTool lists the resources, each naming its server");
        drop(&out);
        st = mcplug_manager_call_tool(p, "ReadMcpResourceTool", "{\"server\":\"everything\",\"uri\":\"demo://resource/dynamic/text/1\"}", NULL, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"type\":\"resource\"") && contains(out, "Resource 1: This is a plaintext resource"), out,
                  "ReadMcpResourceTool reads one as an embedded resource");
        drop(&out);
        mcplug_manager_free(p);

        c = connect_or_die(e_everything, NULL, "everything");
        st = mcplug_client_list_tools(c, "{\"format\":\"openai\"}", &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"name\":\"echo\"") && contains(out, "\"type\":\"function\""), out,
                  "a single client lists tools as function tools");
        drop(&out);
        st = mcplug_client_call_tool(c, "echo", "{\"message\":\"x\"}", "{\"format\":\"anthropic\"}", &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"content\":[{\"type\":\"text\",\"text\":\"Echo: x\"}]") && contains(out, "\"is_error\":false"), out,
                  "and calls a tool for the Messages API");
        drop(&out);
        st = mcplug_client_request(c, "ping", NULL, "{\"format\":\"openai\"}", &out);
        CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "format"), out, "request refuses format");
        drop(&out);
        mcplug_client_free(c);
    }
    return finish("model_view");
}
