/* The same C host as mcplug_client's `rss` scenario, minus the library: libc only, the same
 * N-double latency array filled. Its VmHWM is the "without mcplug" side of the peak-RSS figure.
 *   rss_baseline [N]     prints {"hwm_kib": ...} */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10000;
  volatile double *lat = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  for (long i = 0; i < n; i++) lat[i] = (double)i;
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = 0;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmHWM:", 6) == 0) kib = strtol(line + 6, NULL, 10);
  if (f) fclose(f);
  printf("{\"client\":\"c-no-library\",\"n\":%ld,\"hwm_kib\":%ld}\n", n, kib);
  free((void *)lat);
  return 0;
}
