/* Regressions of issue 32 in the configuration and the credential store, through the C ABI:
 *  - a token record the store cannot use (not JSON, not an object, a FIFO, a symlink, a
 *    directory) fails a connect at once with an error that names logout, and logout removes it
 *    (the link itself, never what it leads to) — for a single client and for the manager;
 *  - an empty or relative HOME is no home: discovery does not take the working directory's
 *    .claude.json for the user's, and an edit of the user scope does not change it;
 *  - every listing function refuses an unknown key in its options ({"sever": "x"});
 *  - ${VAR} expansion is bounded per merge in total, naming the field where it stopped;
 *  - (issue 34) a project server's approval, rejection and reset are written where Claude Code's
 *    dialog writes them, and discovery reads them back.
 *
 * Peers: MCPLUG_OAUTH_URL (tests/servers/oauth_server.py), the fault server (a stdio peer).
 */
#include "check.h"

#include <dirent.h>
#include <sys/stat.h>

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *copy = malloc(n + 1);
    if (copy != NULL) memcpy(copy, buf, n + 1);
    return copy;
}

static int write_file(const char *path, const char *text, mode_t mode) {
    FILE *f = fopen(path, "wb");
    if (f == NULL) return -1;
    fputs(text, f);
    fclose(f);
    return chmod(path, mode);
}

/* The record file of the store (32 hex digits and ".json"), into `path`; 0 when there is one. */
static int find_record(const char *store, char *path, size_t cap) {
    DIR *d = opendir(store);
    struct dirent *e;
    int found = -1;
    if (d == NULL) return -1;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n == 37 && strcmp(e->d_name + 32, ".json") == 0) {
            snprintf(path, cap, "%s/%s", store, e->d_name);
            found = 0;
        }
    }
    closedir(d);
    return found;
}

static void remove_tree(const char *path) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) printf("# could not remove %s\n", path);
}

/* Puts something the store cannot use where the record is. */
static void plant(const char *kind, const char *record, const char *outside) {
    remove_tree(record);
    if (strcmp(kind, "not JSON") == 0) {
        write_file(record, "{\"key\":\"server ", 0600);
    } else if (strcmp(kind, "not an object") == 0) {
        write_file(record, "[1,2]", 0600);
    } else if (strcmp(kind, "a FIFO") == 0) {
        mkfifo(record, 0600);
    } else if (strcmp(kind, "a symlink") == 0) {
        write_file(outside, "{\"key\":\"elsewhere\",\"record\":{}}", 0600);
        if (symlink(outside, record) != 0) printf("# symlink failed\n");
    } else if (strcmp(kind, "a directory") == 0) {
        char inside[1100];
        mkdir(record, 0700);
        snprintf(inside, sizeof inside, "%s/inside", record);
        write_file(inside, "x", 0600);
    }
}

static void unusable_records(const char *url, const char *tmp) {
    char store[512], options[1024], server[1024], record[1100], outside[600];
    char *out = NULL;
    mcplug_client *c = NULL;
    mcplug_status st;
    snprintf(store, sizeof store, "%s/regress-store-%d", tmp, (int)getpid());
    snprintf(outside, sizeof outside, "%s/regress-outside-%d.json", tmp, (int)getpid());
    remove_tree(store);
    snprintf(options, sizeof options, "{\"auth_store\":\"%s\",\"connect_timeout_ms\":20000}", store);
    snprintf(server, sizeof server, "{\"type\":\"http\",\"url\":\"%s\"}", url);

    /* A first connect finds the server needs authorization and keeps that mark: a record. */
    st = mcplug_client_connect(server, options, &c, &out);
    CHECK_STATUS(st, MCPLUG_NEEDS_AUTH, out, "a connect without a token -> NEEDS_AUTH");
    drop(&out);
    CHECK(find_record(store, record, sizeof record) == 0, "the store holds the server's record");

    const char *kinds[] = {"not JSON", "not an object", "a FIFO", "a symlink", "a directory"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        plant(kinds[i], record, outside);
        c = NULL;
        st = mcplug_client_connect(server, options, &c, &out);
        CHECK_OUT(st == MCPLUG_CONFIG && c == NULL && contains(out, "mcplug logout") &&
                      contains(out, "mcplug_auth_logout") && contains(out, "authLogout"),
                  out, "a record that is %s: the connect is CONFIG, naming logout (CLI, C, bindings)",
                  kinds[i]);
        drop(&out);
        st = mcplug_auth_logout(server, options, &out);
        CHECK_STATUS(st, MCPLUG_OK, out, "logout of a record that is %s -> OK", kinds[i]);
        CHECK_OUT(contains(out, "\"forgotten\":true"), out, "it says it removed the record");
        drop(&out);
        struct stat sb;
        CHECK(lstat(record, &sb) != 0, "the record (%s) is gone", kinds[i]);
        if (strcmp(kinds[i], "a symlink") == 0) {
            CHECK(stat(outside, &sb) == 0, "what the symlink led to is still there");
        }
        st = mcplug_auth_logout(server, options, &out);
        CHECK_OUT(st == MCPLUG_OK && contains(out, "\"forgotten\":false"), out, "a second logout forgets nothing");
        drop(&out);
        st = mcplug_client_connect(server, options, &c, &out);
        CHECK_STATUS(st, MCPLUG_NEEDS_AUTH, out, "after logout the server is NEEDS_AUTH again, not CONFIG");
        drop(&out);
        CHECK(find_record(store, record, sizeof record) == 0, "and the store has a usable record again");
    }

    /* The manager: the server fails with the same advice, and its logout removes the record. */
    char moptions[1200], config[1200];
    mcplug_manager *m = NULL;
    snprintf(moptions, sizeof moptions, "{\"connection\":%s}", options);
    snprintf(config, sizeof config, "{\"mcpServers\":{\"srv\":%s}}", server);
    plant("not JSON", record, outside);
    st = mcplug_manager_new(moptions, &m, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "manager_new -> OK");
    drop(&out);
    st = mcplug_manager_connect(m, config, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "manager connect -> OK");
    drop(&out);
    st = mcplug_manager_wait(m, "{\"timeout_ms\":20000}", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"state\":\"failed\"") && contains(out, "mcplug logout srv") &&
                  contains(out, "mcplug_manager_logout"),
              out, "the manager's server failed, its error naming `mcplug logout srv` and the manager's logout");
    drop(&out);
    st = mcplug_manager_logout(m, "srv", &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"forgotten\":true") && contains(out, "\"state\":\"needs-auth\""),
              out, "manager logout removes the record; the server is needs-auth");
    drop(&out);
    mcplug_manager_free(m);
    remove_tree(store);
    remove(outside);
}

static void relative_home(const char *tmp) {
    char dir[600], file[700], cwd[1024], *old_home = NULL, *before, *after;
    char planted[64], text[1400], opts[256];
    char *out = NULL;
    mcplug_status st;
    snprintf(dir, sizeof dir, "%s/regress-home-%d", tmp, (int)getpid());
    remove_tree(dir);
    mkdir(dir, 0700);
    snprintf(planted, sizeof planted, "planted-%d", (int)getpid());
    snprintf(file, sizeof file, "%s/.claude.json", dir);
    snprintf(text, sizeof text, "{\"mcpServers\":{\"%s\":{\"command\":\"true\"}}}", planted);
    write_file(file, text, 0600);
    before = slurp(file);
    CHECK(getcwd(cwd, sizeof cwd) != NULL && chdir(dir) == 0, "in a directory holding a .claude.json");
    if (getenv("HOME") != NULL) old_home = strdup(getenv("HOME"));
    const char *homes[] = {"", ".", "./"};
    for (size_t i = 0; i < sizeof homes / sizeof homes[0]; i++) {
        setenv("HOME", homes[i], 1);
        st = mcplug_config_discover("{}", &out);
        CHECK_OUT(st == MCPLUG_OK && !contains(out, planted), out,
                  "HOME=\"%s\": discovery does not take the working directory's file for the user's", homes[i]);
        drop(&out);
        snprintf(opts, sizeof opts, "{\"scope\":\"user\",\"name\":\"%s\"}", planted);
        st = mcplug_config_remove_server(opts, &out);
        CHECK_OUT(st != MCPLUG_OK, out, "HOME=\"%s\": removing from the user scope does not edit it", homes[i]);
        drop(&out);
    }
    if (old_home != NULL) {
        setenv("HOME", old_home, 1);
        free(old_home);
    } else {
        unsetenv("HOME");
    }
    CHECK(chdir(cwd) == 0, "back in the test's directory");
    after = slurp(file);
    CHECK(before != NULL && after != NULL && strcmp(before, after) == 0, "the working directory's file is untouched");
    free(before);
    free(after);
    remove_tree(dir);
}

static void unknown_listing_keys(void) {
    const char *bad = "{\"sever\":\"x\"}";
    char *out = NULL;
    mcplug_manager *m = NULL;
    mcplug_status st = mcplug_manager_new(NULL, &m, &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "manager_new -> OK");
    drop(&out);
    st = mcplug_manager_list_tools(m, bad, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "`sever`") && contains(out, "server"), out,
              "manager_list_tools {\"sever\"} -> INVALID_ARGUMENT naming the key and the keys there are");
    drop(&out);
    st = mcplug_manager_search_tools(m, "echo", bad, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "`sever`") && contains(out, "max_results"), out,
              "manager_search_tools {\"sever\"} -> INVALID_ARGUMENT");
    drop(&out);
    st = mcplug_manager_list_resources(m, bad, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "`sever`") && contains(out, "timeout_ms"), out,
              "manager_list_resources {\"sever\"} -> INVALID_ARGUMENT");
    drop(&out);
    st = mcplug_manager_list_prompts(m, bad, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "`sever`"), out,
              "manager_list_prompts {\"sever\"} -> INVALID_ARGUMENT");
    drop(&out);
    st = mcplug_manager_list_tools(m, "{\"server\":\"none\"}", &out);
    CHECK_STATUS(st, MCPLUG_OK, out, "manager_list_tools {\"server\"} -> OK");
    drop(&out);
    mcplug_manager_free(m);

    char server[2048];
    fault_server_json(server, sizeof server, "normal");
    mcplug_client *c = connect_or_die(server, NULL, "the fault server");
    st = mcplug_client_list_tools(c, bad, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "`sever`"), out,
              "client_list_tools {\"sever\"} -> INVALID_ARGUMENT");
    drop(&out);
    st = mcplug_client_list_skills(c, bad, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "`sever`"), out,
              "client_list_skills {\"sever\"} -> INVALID_ARGUMENT");
    drop(&out);
    st = mcplug_client_request(c, "resources/list", NULL, bad, &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "`sever`"), out,
              "client_request resources/list {\"sever\"} -> INVALID_ARGUMENT");
    drop(&out);
    st = mcplug_client_request(c, "prompts/list", NULL, "{\"all_pages\":true,\"sever\":\"x\"}", &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && contains(out, "`sever`"), out,
              "client_request prompts/list with all_pages and {\"sever\"} -> INVALID_ARGUMENT");
    drop(&out);
    mcplug_client_free(c);
}

static void expansion_per_merge(void) {
    enum { SERVERS = 800, VALUE = 128 * 1024 };
    size_t cap = (size_t)VALUE + (size_t)SERVERS * 48 + 256;
    char *sources = malloc(cap);
    char *out = NULL;
    size_t n = 0;
    CHECK(sources != NULL, "memory for the sources");
    n += (size_t)snprintf(sources + n, cap - n, "{\"env\":{\"BIG\":\"");
    memset(sources + n, 'v', VALUE);
    n += VALUE;
    n += (size_t)snprintf(sources + n, cap - n, "\"},\"user\":{\"mcpServers\":{");
    for (int i = 0; i < SERVERS; i++) {
        n += (size_t)snprintf(sources + n, cap - n, "%s\"s%03d\":{\"command\":\"${BIG}\"}", i ? "," : "", i);
    }
    snprintf(sources + n, cap - n, "}}}");
    double start = now_s();
    mcplug_status st = mcplug_config_merge(sources, &out);
    double took = now_s() - start;
    /* 8 MiB of values in all: 64 servers of 128 KiB; the 65th (s064) is where it stopped. */
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"errors\":[{") && contains(out, "mcpServers.s064.command") &&
                  contains(out, "8388608") && contains(out, "\"name\":\"s799\""),
              st == MCPLUG_OK ? "(a merge result of many megabytes)" : out,
              "800 fields of 128 KiB: the merge stops at 8 MiB, an error naming mcpServers.s064.command");
    CHECK(out == NULL || strlen(out) < 24u * 1024 * 1024, "the merge's result stays under 24 MiB (%zu bytes; its config and signature)",
          out ? strlen(out) : 0);
    printf("# merge took %.2f s\n", took);
    drop(&out);
    free(sources);
}

static void project_choices(const char *tmp) {
    char dir[512], home[600], mcp[600], opts[1400], disc[3400], *out = NULL, *settings;
    mcplug_status st;
    snprintf(dir, sizeof dir, "%s/choices-%ld", tmp, (long)getpid());
    snprintf(home, sizeof home, "%s/home", dir);
    mkdir(dir, 0700);
    mkdir(home, 0700);
    snprintf(mcp, sizeof mcp, "%s/.mcp.json", dir);
    write_file(mcp, "{\"mcpServers\":{\"p\":{\"command\":\"node\",\"args\":[\"p.js\"]}}}", 0600);
    snprintf(disc, sizeof disc, "{\"home\":\"%s\",\"cwd\":\"%s\",\"managed_dir\":\"%s/managed\"}", home, dir, dir);
    st = mcplug_config_discover(disc, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"pending_approval\""), out, "a project server waits for approval");
    drop(&out);
    snprintf(opts, sizeof opts, "{\"name\":\"p\",\"cwd\":\"%s\"}", dir);
    st = mcplug_config_approve(opts, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"enabledMcpjsonServers\":[\"p\"]"), out, "mcplug_config_approve -> enabledMcpjsonServers");
    drop(&out);
    snprintf(mcp, sizeof mcp, "%s/.claude/settings.local.json", dir);
    settings = slurp(mcp);
    CHECK(settings != NULL && contains(settings, "\"enabledMcpjsonServers\": [\n    \"p\"\n  ]"), "written to .claude/settings.local.json as Claude Code writes it: %s",
          settings ? settings : "(none)");
    free(settings);
    st = mcplug_config_discover(disc, &out);
    CHECK_OUT(st == MCPLUG_OK && !contains(out, "\"pending_approval\"") && contains(out, "\"p.js\""), out, "then discovery takes it");
    drop(&out);
    snprintf(opts, sizeof opts, "{\"name\":\"p\",\"choice\":\"no\",\"cwd\":\"%s\"}", dir);
    st = mcplug_config_approve(opts, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"disabledMcpjsonServers\":[\"p\"]"), out, "choice no -> disabledMcpjsonServers");
    drop(&out);
    snprintf(opts, sizeof opts, "{\"cwd\":\"%s\"}", dir);
    st = mcplug_config_reset_project_choices(opts, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "\"reset\":[\"enabledMcpjsonServers\",\"disabledMcpjsonServers\"]"), out,
              "mcplug_config_reset_project_choices forgets both");
    drop(&out);
    st = mcplug_config_approve("{\"name\":\"p\",\"choice\":\"maybe\"}", &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "choice"), out, "a bad choice is named");
    drop(&out);
    st = mcplug_config_approve("{\"name\":\"p\",\"sever\":1}", &out);
    CHECK_OUT(st == MCPLUG_INVALID_ARGUMENT && is_error(out, "invalid_argument", "sever"), out, "an unknown option is named");
    drop(&out);
}

int main(void) {
    const char *url = peer("MCPLUG_OAUTH_URL");
    const char *tmp = peer("MCPLUG_TEST_TMPDIR");
    relative_home(tmp);
    project_choices(tmp);
    expansion_per_merge();
    unknown_listing_keys();
    unusable_records(url, tmp);
    printf("# %d checks passed\n", check_count);
    return 0;
}
