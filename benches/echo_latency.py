"""Median latency of one `echo` tool call through the Python binding (sync API).
    PYTHONPATH=bindings/python python3 benches/echo_latency.py N command args...
Prints {"client":"python","n":N,"p50_us":...,"p99_us":...}. Used by benches/echo_latency.sh."""
import json
import sys
import time

import mcplug

n = int(sys.argv[1])
server = {"command": sys.argv[2], "args": sys.argv[3:]}
with mcplug.Client.connect(server) as c:
    lat = []
    for i in range(-(n // 10), n):
        t0 = time.perf_counter()
        r = c.call_tool("echo", {"message": "hello"})
        t1 = time.perf_counter()
        assert r["content"][0]["text"] == "Echo: hello", r
        if i >= 0:
            lat.append((t1 - t0) * 1e6)
    lat.sort()
    print(json.dumps({"client": "python", "n": n, "p50_us": round(lat[n // 2], 1), "p99_us": round(lat[n * 99 // 100], 1)}))
