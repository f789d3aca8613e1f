/* peer-bench client for mcplug over the C ABI (see /work/shared/peer-bench/README.md).
 *
 *   mcplug_client SERVER SCEN [N] [CONC] [SIZE]
 *
 * SERVER is the stdio server's command, or an http:// or https:// URL: a Streamable HTTP server.
 * SCEN s1: spawn + initialize + tools/list, prints {"ttl_ms"} (time since MCPB_T0, the launch);
 *      s2: N sequential echo calls, prints p50/p99 latency, calls/s, VmHWM and client CPU per call;
 *      s3: N calls with CONC in flight on ONE connection, from one thread: started calls
 *          (mcplug_client_call_tool_start, all but the last of a batch deferred), completions taken
 *          many at a time (mcplug_client_next_events, blocking). MCPB_C_S3=poll: poll the event
 *          descriptor first; MCPB_C_S3=threads: CONC threads share one handle with the blocking
 *          mcplug_client_call_tool instead;
 *      s4: N echoes of SIZE bytes, prints MiB/s.
 *      rss: like s2, but prints VmHWM before the first library call and after the loop, so the
 *          memory the library adds to a C host can be read off one process.
 * MCPB_MCPLUG_OPTIONS: connect options (JSON) for mcplug_client_connect, e.g.
 * {"protocol_versions":["2025-11-25"]} to hold the connection to the revision the raw client speaks.
 * Every answer is checked: content[0].text must equal the text sent. CPU is getrusage(RUSAGE_SELF)
 * around the loop, so the library's runtime threads are counted, as they should be. */
#define _GNU_SOURCE
#include "mcplug.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static const char *scenario = "";

static void die(const char *what, const char *detail) {
  fprintf(stderr, "mcplug_client %s: %s: %s\n", scenario, what, detail ? detail : "(no detail)");
  exit(1);
}

static double mono_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* user + system CPU seconds of the whole process, every thread included */
static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static long vm_hwm_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = 0;
  if (!f) return 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmHWM:", 6) == 0) kib = strtol(line + 6, NULL, 10);
  fclose(f);
  return kib;
}

/* ms since MCPB_T0 (ns since the epoch, set by run_all.sh just before it starts us) */
static double since_t0_ms(double start_us) {
  const char *t0 = getenv("MCPB_T0");
  if (t0 && *t0) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long ns = (long long)now.tv_sec * 1000000000LL + now.tv_nsec - strtoll(t0, NULL, 10);
    return (double)ns / 1e6;
  }
  return (mono_us() - start_us) / 1e3;
}

/* ---- just enough JSON to find content[0].text in a result and compare it ---- */

static const char *ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  return p;
}

/* p at '"'; returns the position after the closing quote, or NULL */
static const char *skip_string(const char *p) {
  for (p++; *p; p++) {
    if (*p == '\\') {
      if (!*++p) return NULL;
    } else if (*p == '"') {
      return p + 1;
    }
  }
  return NULL;
}

static const char *skip_value(const char *p) {
  p = ws(p);
  if (*p == '"') return skip_string(p);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        if (*p != '"' || !(p = skip_string(p))) return NULL;
        p = ws(p);
        if (*p++ != ':') return NULL;
      }
      if (!(p = skip_value(p))) return NULL;
      p = ws(p);
      if (*p == ',') {
        p = ws(p + 1);
        continue;
      }
      return *p == close ? p + 1 : NULL;
    }
  }
  if (!*p) return NULL;
  while (*p && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n') p++; /* number, literal */
  return p;
}

/* p at '{'; returns the value of `key` (an unescaped key), or NULL */
static const char *find_key(const char *p, const char *key) {
  size_t klen = strlen(key);
  p = ws(p);
  if (*p != '{') return NULL;
  p = ws(p + 1);
  while (*p == '"') {
    const char *end = skip_string(p);
    if (!end) return NULL;
    int match = (size_t)(end - p - 2) == klen && memcmp(p + 1, key, klen) == 0;
    p = ws(end);
    if (*p++ != ':') return NULL;
    p = ws(p);
    if (match) return p;
    if (!(p = skip_value(p))) return NULL;
    p = ws(p);
    if (*p != ',') return NULL;
    p = ws(p + 1);
  }
  return NULL;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* p at a JSON string; 1 if it decodes to exactly want[0..len) (escapes and \uXXXX included) */
static int string_equals(const char *p, const char *want, size_t len) {
  size_t i = 0;
  if (*p != '"') return 0;
  for (p++;; p++) {
    /* the plain run up to the next quote or escape, compared at once (S4's 1 MiB texts must not
     * make the checking the bottleneck) */
    size_t run = strcspn(p, "\"\\");
    if (run > len - i || memcmp(p, want + i, run) != 0) return 0;
    i += run;
    p += run;
    unsigned char c = (unsigned char)*p;
    if (c == '"') return i == len;
    if (!c) return 0;
    char e = *++p, d;
    switch (e) {
      case 'n': d = '\n'; break;
      case 't': d = '\t'; break;
      case 'r': d = '\r'; break;
      case 'b': d = '\b'; break;
      case 'f': d = '\f'; break;
      case '"': case '\\': case '/': d = e; break;
      case 'u': {
        unsigned cp = 0;
        for (int k = 1; k <= 4; k++) {
          int h = hexval(p[k]);
          if (h < 0) return 0;
          cp = cp * 16 + (unsigned)h;
        }
        p += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && p[1] == '\\' && p[2] == 'u') {
          unsigned lo = 0;
          for (int k = 3; k <= 6; k++) {
            int h = hexval(p[k]);
            if (h < 0) return 0;
            lo = lo * 16 + (unsigned)h;
          }
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          p += 6;
        }
        char u[4];
        size_t n;
        if (cp < 0x80) { u[0] = (char)cp; n = 1; }
        else if (cp < 0x800) { u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
        else if (cp < 0x10000) { u[0] = (char)(0xE0 | cp >> 12); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (char)(0x80 | (cp & 0x3F)); n = 3; }
        else { u[0] = (char)(0xF0 | cp >> 18); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)); u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); n = 4; }
        if (i + n > len || memcmp(want + i, u, n) != 0) return 0;
        i += n;
        continue;
      }
      default: return 0;
    }
    if (i >= len || want[i++] != d) return 0;
  }
}

/* 1 if result is a CallToolResult whose content[0].text is want */
static int echo_ok(const char *result, const char *want, size_t len) {
  const char *p = find_key(result, "content");
  if (!p || *p != '[') return 0;
  p = ws(p + 1);
  if (!(p = find_key(p, "text"))) return 0;
  return string_equals(p, want, len);
}

/* ---- the calls ---- */

static mcplug_client *client;

/* One echo through mcplug_client_call_tool; `args` is {"text":"<text>"} already. Dies on any
 * failure, so a broken answer can never be counted as a fast one. */
static void echo(const char *args, const char *text, size_t len) {
  char *out = NULL;
  mcplug_status s = mcplug_client_call_tool(client, "echo", args, NULL, &out);
  if (s != MCPLUG_OK) die("call_tool failed", out);
  if (!echo_ok(out, text, len)) die("wrong echo answer", out);
  mcplug_string_free(out);
}

/* args buffer for "hello <i>" (ASCII: no JSON escaping needed) */
static size_t hello_args(char *args, size_t cap, char *text, size_t tcap, long i) {
  size_t len = (size_t)snprintf(text, tcap, "hello %ld", i);
  snprintf(args, cap, "{\"text\":\"%s\"}", text);
  return len;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pct(const double *sorted, long n, double p) {
  long i = (long)(p / 100.0 * (double)(n - 1) + 0.5);
  return sorted[i < n ? i : n - 1];
}

static long n_calls;
static atomic_long s3_counter;

static void *s3_worker(void *arg) {
  (void)arg;
  char args[64], text[32];
  for (;;) {
    long i = atomic_fetch_add(&s3_counter, 1);
    if (i >= n_calls) return NULL;
    size_t len = hello_args(args, sizeof args, text, sizeof text, i);
    echo(args, text, len);
  }
}

/* S3 from one thread: CONC started calls in flight, refilled as completions arrive. */
struct slot {
  uint64_t call;
  long i; /* the call's index: its text is "hello <i>"; -1 when free */
};

static void s3_started(long conc) {
  long cap = 1;
  while (cap < conc * 4) cap <<= 1;
  struct slot *slots = calloc((size_t)cap, sizeof *slots);
  if (!slots) die("s3", "out of memory");
  for (long k = 0; k < cap; k++) slots[k].i = -1;
  char args[64], text[32], *out = NULL;
  int fd = -1;
  if (getenv("MCPB_C_S3") && strcmp(getenv("MCPB_C_S3"), "poll") == 0 &&
      mcplug_client_event_fd(client, &fd, &out) != MCPLUG_OK)
    die("event_fd failed", out);
  long next = 0, done = 0;
  /* starts call `next` and remembers it; all but the last of a batch are deferred, so that a
   * batch goes out in one write */
#define START_ONE(last)                                                                        \
  do {                                                                                         \
    uint64_t call;                                                                             \
    hello_args(args, sizeof args, text, sizeof text, next);                                    \
    if (mcplug_client_call_tool_start(client, "echo", args, (last) ? NULL : defer, &call,      \
                                      &out) != MCPLUG_OK)                                      \
      die("call_tool_start failed", out);                                                      \
    long h = (long)(call & (uint64_t)(cap - 1));                                               \
    while (slots[h].i >= 0) h = (h + 1) & (cap - 1);                                           \
    slots[h].call = call;                                                                      \
    slots[h].i = next++;                                                                       \
  } while (0)
  const char *defer = "{\"defer\":true}";
  while (next < n_calls && next < conc) START_ONE(next + 1 == n_calls || next + 1 == conc);
  while (done < n_calls) {
    /* By default this thread blocks in next_events, which then reads the server itself (one
     * hand-off per answer); MCPB_C_S3=poll polls the event descriptor instead, as a host with
     * its own event loop would. */
    int wait_ms = 10000;
    if (fd >= 0) {
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, 10000) != 1) die("s3", "no completion within 10 s");
      wait_ms = 0;
    }
    for (;;) {
      mcplug_status st = mcplug_client_next_events(client, (uint32_t)conc, wait_ms, &out);
      wait_ms = 0;
      if (st == MCPLUG_TIMEOUT) {
        mcplug_string_free(out);
        break;
      }
      if (st != MCPLUG_OK) die("next_events failed", out);
      long got = 0;
      const char *e = ws(out + 1);
      while (*e == '{') {
        /* {"type":"completion","call":N,"result":{...}}: the result is scanned once for its end
         * and once (partly) for content[0].text */
        static const char prefix[] = "{\"type\":\"completion\",\"call\":";
        if (strncmp(e, prefix, sizeof prefix - 1) != 0) die("not a completion", e);
        char *after;
        uint64_t call = strtoull(e + sizeof prefix - 1, &after, 10);
        if (strncmp(after, ",\"result\":", 10) != 0) die("a completion without a result", e);
        const char *r = after + 10;
        const char *end = skip_value(r);
        if (!end || *end != '}') die("a malformed completion", e);
        end++;
        long h = (long)(call & (uint64_t)(cap - 1));
        while (slots[h].i < 0 || slots[h].call != call) {
          if (slots[h].i < 0 && slots[h].call == 0) die("a completion of an unknown call", e);
          h = (h + 1) & (cap - 1);
        }
        size_t len = (size_t)snprintf(text, sizeof text, "hello %ld", slots[h].i);
        if (!echo_ok(r, text, len)) die("wrong echo answer", e);
        slots[h].i = -1; /* a tombstone: call stays, so probes continue past it */
        done++;
        got++;
        e = ws(end);
        if (*e == ',') e = ws(e + 1);
      }
      mcplug_string_free(out);
      for (long k = 0; k < got && next < n_calls; k++) START_ONE(k + 1 == got || next + 1 == n_calls);
      if (got < conc) break; /* a short batch: the queue was empty, the descriptor re-armed */
    }
  }
#undef START_ONE
  if (fd >= 0) close(fd);
  free(slots);
}

/* the same payload as peer-bench's payload(): ASCII letters, digits and spaces */
static char *payload(size_t size) {
  static const char A[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ";
  size_t alen = sizeof A - 1;
  char *b = malloc(size + 1);
  if (!b) die("payload", "out of memory");
  for (size_t i = 0; i < size; i++) b[i] = A[(i * 7 + i / 63) % alen];
  b[size] = 0;
  return b;
}

/* the server entry as JSON, SERVER escaped: {"type": "http", "url": SERVER} for an http(s) URL
 * (Streamable HTTP, as peer-bench's clients read it), else {"command": SERVER, "args": []} */
static char *server_json(const char *cmd) {
  size_t n = strlen(cmd);
  int http = strncmp(cmd, "http://", 7) == 0 || strncmp(cmd, "https://", 8) == 0;
  char *j = malloc(n * 6 + 64), *w = j;
  if (!j) die("server_json", "out of memory");
  w += sprintf(w, http ? "{\"type\":\"http\",\"url\":\"" : "{\"command\":\"");
  for (const unsigned char *c = (const unsigned char *)cmd; *c; c++) {
    if (*c == '"' || *c == '\\') { *w++ = '\\'; *w++ = (char)*c; }
    else if (*c < 0x20) w += sprintf(w, "\\u%04x", *c);
    else *w++ = (char)*c;
  }
  strcpy(w, http ? "\"}" : "\",\"args\":[]}");
  return j;
}

/* Connect options when MCPB_MCPLUG_OPTIONS is not set: run.sh builds a second client with
 * -DMCPB_DEFAULT_OPTIONS='"{...}"' for the 2025-11-25 rows, so that no `env` wrapper's exec is
 * counted in their cold start. */
#ifndef MCPB_DEFAULT_OPTIONS
#define MCPB_DEFAULT_OPTIONS NULL
#endif

int main(int argc, char **argv) {
  double start_us = mono_us();
  /* read only when asked for: /proc costs S1 tens of microseconds */
  long hwm_start = argc > 2 && strcmp(argv[2], "rss") == 0 ? vm_hwm_kib() : 0;
  if (argc < 3) {
    fprintf(stderr, "usage: %s SERVER s1|s2|s3|s4|rss [N] [CONC] [SIZE]\n", argv[0]);
    return 2;
  }
  scenario = argv[2];
  long n = argc > 3 ? atol(argv[3]) : 10000;
  long conc = argc > 4 ? atol(argv[4]) : 64;
  long size = argc > 5 ? atol(argv[5]) : 1L << 20;
  if (n < 1 || conc < 1 || size < 0) die("arguments", "N and CONC must be positive, SIZE not negative");
  n_calls = n;

  char *server = server_json(argv[1]);
  char *out = NULL;
  const char *options = getenv("MCPB_MCPLUG_OPTIONS");
  if (!options) options = MCPB_DEFAULT_OPTIONS;
  if (mcplug_client_connect(server, options, &client, &out) != MCPLUG_OK) die("connect failed", out);
  mcplug_string_free(out);
  free(server);
  if (mcplug_client_list_tools(client, NULL, &out) != MCPLUG_OK) die("tools/list failed", out);
  double ttl_ms = since_t0_ms(start_us);
  const char *tools = find_key(out, "tools");
  int ntools = 0;
  if (tools && *tools == '[') {
    const char *p = ws(tools + 1);
    while (*p && *p != ']') {
      if (!(p = skip_value(p))) break;
      ntools++;
      p = ws(p);
      if (*p == ',') p = ws(p + 1);
    }
  }
  if (ntools < 2) die("tools/list: fewer than 2 tools", out);
  mcplug_string_free(out);

  if (strcmp(scenario, "s1") != 0)
    for (int i = 0; i < 200; i++) echo("{\"text\":\"warmup\"}", "warmup", 6);

  if (strcmp(scenario, "s1") == 0) {
    printf("{\"client\":\"mcplug-c\",\"scenario\":\"s1\",\"ttl_ms\":%.3f}\n", ttl_ms);
  } else if (strcmp(scenario, "s2") == 0 || strcmp(scenario, "rss") == 0) {
    double *lat = malloc(sizeof(double) * (size_t)n);
    if (!lat) die("s2", "out of memory");
    char args[64], text[32];
    double cpu0 = cpu_s(), t = mono_us();
    for (long i = 0; i < n; i++) {
      size_t len = hello_args(args, sizeof args, text, sizeof text, i);
      double c0 = mono_us();
      echo(args, text, len);
      lat[i] = mono_us() - c0;
    }
    double el = (mono_us() - t) / 1e6, cpu = cpu_s() - cpu0;
    qsort(lat, (size_t)n, sizeof(double), cmp_double);
    if (strcmp(scenario, "rss") == 0)
      printf("{\"client\":\"mcplug-c\",\"scenario\":\"rss\",\"n\":%ld,\"hwm_start_kib\":%ld,\"hwm_kib\":%ld}\n", n,
             hwm_start, vm_hwm_kib());
    else
      printf("{\"client\":\"mcplug-c\",\"scenario\":\"s2\",\"n\":%ld,\"p50_us\":%.3f,\"p99_us\":%.3f,"
             "\"calls_per_s\":%.1f,\"hwm_kib\":%ld,\"cpu_us_per_call\":%.3f}\n",
             n, pct(lat, n, 50), pct(lat, n, 99), (double)n / el, vm_hwm_kib(), cpu * 1e6 / (double)n);
    free(lat);
  } else if (strcmp(scenario, "s3") == 0 && !(getenv("MCPB_C_S3") && strcmp(getenv("MCPB_C_S3"), "threads") == 0)) {
    double cpu0 = cpu_s(), t = mono_us();
    s3_started(conc);
    double el = (mono_us() - t) / 1e6, cpu = cpu_s() - cpu0;
    printf("{\"client\":\"mcplug-c\",\"scenario\":\"s3\",\"n\":%ld,\"conc\":%ld,\"calls_per_s\":%.1f,"
           "\"cpu_us_per_call\":%.3f}\n",
           n, conc, (double)n / el, cpu * 1e6 / (double)n);
  } else if (strcmp(scenario, "s3") == 0) {
    pthread_t *th = malloc(sizeof(pthread_t) * (size_t)conc);
    if (!th) die("s3", "out of memory");
    atomic_store(&s3_counter, 0);
    double cpu0 = cpu_s(), t = mono_us();
    for (long k = 0; k < conc; k++)
      if (pthread_create(&th[k], NULL, s3_worker, NULL) != 0) die("s3", "pthread_create failed");
    for (long k = 0; k < conc; k++) pthread_join(th[k], NULL);
    double el = (mono_us() - t) / 1e6, cpu = cpu_s() - cpu0;
    printf("{\"client\":\"mcplug-c\",\"scenario\":\"s3\",\"n\":%ld,\"conc\":%ld,\"calls_per_s\":%.1f,"
           "\"cpu_us_per_call\":%.3f}\n",
           n, conc, (double)n / el, cpu * 1e6 / (double)n);
    free(th);
  } else if (strcmp(scenario, "s4") == 0) {
    char *big = payload((size_t)size);
    char *args = malloc((size_t)size + 16);
    if (!args) die("s4", "out of memory");
    sprintf(args, "{\"text\":\"%s\"}", big);
    double t = mono_us();
    for (long i = 0; i < n; i++) echo(args, big, (size_t)size);
    double el = (mono_us() - t) / 1e6;
    printf("{\"client\":\"mcplug-c\",\"scenario\":\"s4\",\"n\":%ld,\"size\":%ld,\"mib_per_s\":%.3f,"
           "\"ms_per_call\":%.3f}\n",
           n, size, (double)n * (double)size / 1048576.0 / el, el * 1e3 / (double)n);
    free(args);
    free(big);
  } else {
    die("unknown scenario", scenario);
  }
  fflush(stdout);
  mcplug_client_free(client);
  return 0;
}
