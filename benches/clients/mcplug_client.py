"""peer-bench client for mcplug over its Python binding (bindings/python/mcplug, sync API).

    python mcplug_client.py SERVER SCEN [N] [CONC] [SIZE]

SERVER is the stdio server's command, or an http:// or https:// URL (a Streamable HTTP server).
Prints one JSON line, as peer-bench's py/client.py does (see /work/shared/peer-bench/README.md).
S3 (CONC calls in flight on one connection) uses CONC threads sharing one sync Client: ctypes
releases the GIL during the blocking library call, so the threads really overlap. MCPB_PY_S3=aio
runs it with ``mcplug.aio`` and CONC tasks instead (slower: see BENCHMARKS.md).
MCPB_MCPLUG_OPTIONS: connect options (JSON), e.g. {"protocol_versions":["2025-11-25"]}.
"""
import time

_T0 = time.perf_counter()
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

# the binding of this checkout (benches/clients/ -> bindings/python), not an installed one
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python"))
import mcplug  # noqa: E402

OPTIONS = json.loads(os.environ["MCPB_MCPLUG_OPTIONS"]) if os.environ.get("MCPB_MCPLUG_OPTIONS") else None


def hwm_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def pct(s, p):
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def payload(size):
    a = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
    return "".join(a[(i * 7 + i // 63) % len(a)] for i in range(size))


def entry(server):
    """the server entry: Streamable HTTP for a URL, as peer-bench's clients read SERVER"""
    if server.startswith(("http://", "https://")):
        return {"type": "http", "url": server}
    return {"command": server, "args": []}


def main():
    server, scen = entry(sys.argv[1]), sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
    conc = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    size = int(sys.argv[5]) if len(sys.argv) > 5 else 1 << 20

    def emit(**kv):
        print(json.dumps({"client": "mcplug-py", "scenario": scen, **kv}), flush=True)

    if scen == "s3" and os.environ.get("MCPB_PY_S3") == "aio":
        import asyncio

        return asyncio.run(s3_aio(server, n, conc, emit))

    with mcplug.Client.connect(server, options=OPTIONS) as c:
        tools = c.list_tools()
        t0env = os.environ.get("MCPB_T0")
        ttl = (time.time_ns() - int(t0env)) / 1e6 if t0env else (time.perf_counter() - _T0) * 1e3
        assert len(tools) >= 2, tools

        def echo(t):
            return c.call_tool("echo", {"text": t})

        if scen != "s1":
            for _ in range(200):
                assert echo("warmup")["content"][0]["text"] == "warmup"
        if scen == "s1":
            emit(ttl_ms=ttl)
        elif scen == "s2":
            lat = []
            pc = time.perf_counter
            cpu0 = time.process_time()  # the whole process: the library's threads included
            t = pc()
            for i in range(n):
                s = f"hello {i}"
                c0 = pc()
                r = echo(s)
                lat.append(pc() - c0)
                assert r["content"][0]["text"] == s, r
            el = pc() - t
            cpu = time.process_time() - cpu0
            lat.sort()
            emit(n=n, p50_us=pct(lat, 50) * 1e6, p99_us=pct(lat, 99) * 1e6, calls_per_s=n / el,
                 hwm_kib=hwm_kib(), cpu_us_per_call=cpu * 1e6 / n)
        elif scen == "s3":
            counter = iter(range(n))  # next() on a range iterator is atomic under the GIL
            failures = []

            def worker():
                try:
                    for i in counter:
                        s = f"hello {i}"
                        r = echo(s)
                        assert r["content"][0]["text"] == s, r
                except BaseException as e:  # reported after the join, and fails the run
                    failures.append(e)

            threads = [threading.Thread(target=worker) for _ in range(conc)]
            cpu0 = time.process_time()
            t = time.perf_counter()
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            el = time.perf_counter() - t
            cpu = time.process_time() - cpu0
            if failures:
                raise failures[0]
            emit(n=n, conc=conc, calls_per_s=n / el, cpu_us_per_call=cpu * 1e6 / n, mode="threads")
        elif scen == "s4":
            big = payload(size)
            t = time.perf_counter()
            for _ in range(n):
                r = echo(big)
                assert r["content"][0]["text"] == big
            el = time.perf_counter() - t
            emit(n=n, size=size, mib_per_s=n * size / 1048576 / el, ms_per_call=el * 1e3 / n)
        else:
            raise SystemExit(f"unknown scenario {scen!r}")


async def s3_aio(server, n, conc, emit):
    import asyncio

    c = await mcplug.aio.Client.connect(server, options=OPTIONS)
    try:
        assert len(await c.list_tools()) >= 2
        for _ in range(200):
            await c.call_tool("echo", {"text": "warmup"})
        nxt = 0

        async def worker():
            nonlocal nxt
            while nxt < n:
                i = nxt
                nxt += 1
                s = f"hello {i}"
                r = await c.call_tool("echo", {"text": s})
                assert r["content"][0]["text"] == s, r

        cpu0 = time.process_time()
        t = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(conc)))
        el = time.perf_counter() - t
        emit(n=n, conc=conc, calls_per_s=n / el, cpu_us_per_call=(time.process_time() - cpu0) * 1e6 / n, mode="aio")
    finally:
        await c.close()


main()
