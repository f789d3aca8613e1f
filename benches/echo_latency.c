/* Median latency of one `echo` tool call through the C ABI, against any stdio MCP server.
 *   echo_latency N -- command args...      prints {"client":"c","n":N,"p50_us":...,"p99_us":...}
 * Used by benches/echo_latency.sh; see there for pinning. */
#define _POSIX_C_SOURCE 200809L
#include "mcplug.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 4 || strcmp(argv[2], "--") != 0) {
    fprintf(stderr, "usage: %s N -- command args...\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[1]);
  char server[8192];
  int len = snprintf(server, sizeof server, "{\"command\":\"%s\",\"args\":[", argv[3]);
  for (int i = 4; i < argc; i++)
    len += snprintf(server + len, sizeof server - len, "%s\"%s\"", i > 4 ? "," : "", argv[i]);
  snprintf(server + len, sizeof server - len, "]}");

  mcplug_client *c = NULL;
  char *out = NULL;
  if (mcplug_client_connect(server, NULL, &c, &out) != MCPLUG_OK) {
    fprintf(stderr, "connect failed: %s\n", out);
    return 1;
  }
  mcplug_string_free(out);
  double *lat = malloc(sizeof(double) * (size_t)n);
  for (int i = -n / 10; i < n; i++) { /* a tenth of N as warm-up */
    double t0 = now_us();
    mcplug_status s = mcplug_client_call_tool(c, "echo", "{\"message\":\"hello\"}", NULL, &out);
    double t1 = now_us();
    if (s != MCPLUG_OK) {
      fprintf(stderr, "call failed: %s\n", out);
      return 1;
    }
    mcplug_string_free(out);
    if (i >= 0) lat[i] = t1 - t0;
  }
  qsort(lat, (size_t)n, sizeof(double), cmp);
  printf("{\"client\":\"c\",\"n\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f}\n", n, lat[n / 2], lat[n * 99 / 100]);
  free(lat);
  mcplug_client_free(c);
  return 0;
}
