"""What TLS costs a call: S2 against peer-bench's rmcp Streamable HTTP server with Debian's nginx in
front (started here, keeping its connections to the server alive; a private CA made now by openssl,
see tests/servers/tls_front.py), over HTTPS and over plain HTTP through the same nginx, from
mcplug's C, Python and Node clients and from the TypeScript SDK's client (peer-bench's
node/client.mjs) over the same HTTPS.

Client CPU per call, everything pinned to one CPU (this process sets its affinity before starting
anything, so nginx, the server and the clients share CPU 0), as the difference between two sizes
(start-up, connect and handshakes cancel), over rotated rounds; the client's CPU is its own rusage.
The clients trust the CA through NODE_EXTRA_CA_CERTS (mcplug reads it, as Node does). nginx's log
says how many TLS connections each HTTPS run opened and how many resumed a session.

Targets (issue 35): mcplug's CPU per HTTPS call at most 1.3x its plain-HTTP call, and at most 1/10
of the TypeScript SDK's HTTPS call. Prints one line per run and the medians; --out writes them as
JSON for benches/report.py. Stdlib only.

    python3 benches/https_bench.py --server-bin .../mcp_http_server --client NAME|ARGV ... [--ts NAME]
        [--rounds 4] [--sizes NAME=N1,N2 ...] [--out FILE.json]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time

from http_bench import start_front, start_server, tls_counts  # the same server, front and log reading

PLAIN, HTTPS = 'plain HTTP', 'HTTPS'


def client_cpu(argv, env, timeout):
    """(user+sys seconds of the child, its S2 JSON line)"""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {p.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, json.loads([line for line in p.stdout.splitlines() if line.startswith('{')][-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--server-bin', required=True, help="peer-bench's mcp_http_server")
    ap.add_argument('--client', action='append', default=[], metavar='NAME|ARGV', help='a client (repeatable)')
    ap.add_argument('--ts', default='', help='the name of the TypeScript SDK client among --client (HTTPS only)')
    ap.add_argument('--rounds', type=int, default=4)
    ap.add_argument('--sizes', action='append', default=[], metavar='NAME=N1,N2',
                    help='the two S2 sizes of a client (default 2000,12000)')
    ap.add_argument('--timeout', type=int, default=600)
    ap.add_argument('--out')
    a = ap.parse_args()
    clients = dict(spec.split('|', 1) for spec in a.client)
    sizes = {name: (2000, 12000) for name in clients}
    for spec in a.sizes:
        name, ns = spec.rsplit('=', 1)
        sizes[name] = tuple(int(n) for n in ns.split(','))
    if hasattr(os, 'sched_setaffinity'):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    with open(os.devnull, 'w') as quiet:
        server, url = start_server(a.server_bin, {}, quiet)
    front = None
    try:
        front, ca = start_front(url, tempfile.mkdtemp(prefix='mcplug-https-bench-'))
        urls = {PLAIN: f'http://127.0.0.1:{front.http_port}/mcp', HTTPS: f'https://127.0.0.1:{front.https_port}/mcp'}
        env = dict(os.environ, NODE_EXTRA_CA_CERTS=ca)
        runs = [(name, kind) for name in clients for kind in (PLAIN, HTTPS) if not (name == a.ts and kind == PLAIN)]
        per_call = {f'{name}|{kind}': [] for name, kind in runs}
        tls = {name: [] for name in clients}
        for r in range(a.rounds):
            k = r % len(runs)
            for name, kind in runs[k:] + runs[:k]:
                n1, n2 = sizes[name]
                argv = clients[name].split()
                logged = len(front.requests())
                c1, _ = client_cpu(argv + [urls[kind], 's2', str(n1)], env, a.timeout)
                c2, _ = client_cpu(argv + [urls[kind], 's2', str(n2)], env, a.timeout)
                us = (c2 - c1) / (n2 - n1) * 1e6
                per_call[f'{name}|{kind}'].append(us)
                line = f'round {r + 1} {name:44s} {kind:10s} {us:8.2f} us CPU per call (pinned)'
                if kind == HTTPS:
                    time.sleep(0.05)  # nginx logs a request when its response has ended
                    seen = tls_counts(front.requests()[logged:], front.https_port)
                    tls[name].append({'calls': n1 + n2, 'connections': seen['tls_connections'],
                                      'resumed': seen['tls_resumed']})
                    line += f'; {seen["tls_connections"]} TLS connections for 2 runs, {seen["tls_resumed"]} resumed'
                print(line, flush=True)
        med = {key: statistics.median(v) for key, v in per_call.items()}
        ratios, vs_ts = {}, {}
        for name in clients:
            if name == a.ts:
                continue
            # (a run too small for the clock can give a difference <= 0: no ratio then)
            ratio = lambda x, y: x / y if x > 0 and y > 0 else None
            ratios[name] = ratio(med[f'{name}|{HTTPS}'], med[f'{name}|{PLAIN}'])
            if a.ts:
                vs_ts[name] = ratio(med[f'{name}|{HTTPS}'], med[f'{a.ts}|{HTTPS}'])
            judge = lambda r, lim, nd: 'no ratio' if r is None else f'{r:.{nd}f}x (target <= {lim}: ' \
                f'{"met" if r <= lim else "missed"})'
            print(f'median {name}: plain {med[f"{name}|{PLAIN}"]:.2f} us, HTTPS {med[f"{name}|{HTTPS}"]:.2f} us: '
                  + judge(ratios[name], 1.3, 3) + (f'; / TS SDK over HTTPS {judge(vs_ts[name], 0.1, 4)}' if a.ts else ''))
        if a.out:
            with open(a.out, 'w') as f:
                json.dump({'per_call_us': per_call, 'median_us': med, 'https_over_plain': ratios, 'over_ts': vs_ts,
                           'ts': a.ts, 'sizes': sizes, 'rounds': a.rounds, 'tls': tls,
                           'at': time.strftime('%FT%TZ', time.gmtime())}, f)
    finally:
        if front:
            front.stop()
        server.kill()
        server.wait()


if __name__ == '__main__':
    main()
