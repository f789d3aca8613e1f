/* A minimal C host: connect to an MCP server over stdio, list its tools, call one.
 *
 *   cargo build --release --examples
 *   cc -std=c11 -Wall -Iinclude examples/c/hello.c -Ltarget/release -lmcplug -o hello
 *   LD_LIBRARY_PATH=target/release ./hello                      # the bundled demo server
 *   LD_LIBRARY_PATH=target/release ./hello node server.js       # any stdio server
 */
#include "mcplug.h"
#include <stdio.h>
#include <string.h>

/* Prints an outcome and frees the string mcplug handed over. */
static int report(const char *what, mcplug_status status, char *out) {
  printf("%s: %s %s\n", what, status == MCPLUG_OK ? "ok" : "FAILED", out ? out : "");
  mcplug_string_free(out);
  return status == MCPLUG_OK;
}

int main(int argc, char **argv) {
  char server[4096];
  if (argc > 1) { /* {"command": argv[1], "args": [argv[2], ...]} — arguments assumed JSON-safe here */
    int n = snprintf(server, sizeof server, "{\"command\":\"%s\",\"args\":[", argv[1]);
    for (int i = 2; i < argc; i++)
      n += snprintf(server + n, sizeof server - n, "%s\"%s\"", i > 2 ? "," : "", argv[i]);
    snprintf(server + n, sizeof server - n, "]}");
  } else {
    snprintf(server, sizeof server, "{\"command\":\"target/release/examples/demo\",\"args\":[\"--serve\"]}");
  }

  mcplug_client *client = NULL;
  char *out = NULL;
  mcplug_status status = mcplug_client_connect(server, "{\"connect_timeout_ms\": 10000}", &client, &out);
  if (!report("connect", status, out))
    return 1;
  status = mcplug_client_list_tools(client, NULL, &out);
  report("tools/list", status, out);
  status = mcplug_client_call_tool(client, "echo", "{\"message\": \"hello from C\"}", "{\"timeout_ms\": 5000}", &out);
  report("echo", status, out);
  mcplug_client_free(client); /* closes stdin, then SIGTERM/SIGKILL to the server's process group if needed */
  return 0;
}
