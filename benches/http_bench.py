"""S2 over Streamable HTTP: mcplug's clients beside the TS SDK's, against peer-bench's rmcp HTTP server.

peer-bench's run_all.sh runs its HTTP rows with its own clients only (MCPB_EXTRA_CLIENT reaches
S1-S4 over stdio), so benches/run.sh runs this after it: the same server binary
(mcp_http_server, built by run_all.sh), two instances on free ports of 127.0.0.1 — one that sets
TCP_NODELAY on its sockets (peer-bench's default) and one left at axum's default, Nagle on
(MCPB_NODELAY=0, the switch of peer-bench's server) — and every client once per repetition on each,
in an order rotated per repetition, as run_all.sh does. Each client is run as
`argv URL s2 N` and prints peer-bench's S2 JSON line.

Writes one JSON line per run to --out: {"rep", "row", "scen": "h2" (server TCP_NODELAY) or "h2n"
(Nagle on), ...the client's line}; a run that failed is a line {"note": "..."}. With --callgrind-dir,
also counts the C client's instructions per call over HTTP (callgrind, S2 at two sizes against the
TCP_NODELAY server: mcplug-c-http.N.out). Stdlib only.
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time

NODELAY, NAGLE = 'h2', 'h2n'
SERVER_LABEL = {NODELAY: 'server TCP_NODELAY', NAGLE: 'server Nagle on (axum default)'}


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def start_server(binary, env_extra, log):
    """an HTTP server on a free port, and its URL; a few tries (another process may take the port
    between our probe and the server's bind)"""
    last = ''
    for _ in range(5):
        port = free_port()
        p = subprocess.Popen([binary, str(port)], env=dict(os.environ, **env_extra), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=log, text=True)
        line = p.stdout.readline()
        if 'listening' in line:
            return p, f'http://127.0.0.1:{port}/mcp'
        p.kill()
        p.wait()
        last = line.strip() or f'exit status {p.returncode}'
    raise SystemExit(f'{binary} did not start: {last}')


def run(argv, timeout, log):
    """(the client's JSON line, None) or (None, why it failed); its stderr goes to `log`"""
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f'timed out after {timeout} s'
    if p.stderr.strip():
        log.write(f'== {" ".join(argv)}\n{p.stderr}\n')
        log.flush()
    lines = [line for line in p.stdout.splitlines() if line.startswith('{')]
    if p.returncode != 0 or not lines:
        return None, f'rc={p.returncode} {p.stderr.strip()[-400:]}'
    return json.loads(lines[-1]), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--server-bin', required=True, help="peer-bench's mcp_http_server")
    ap.add_argument('--client', action='append', default=[], metavar='NAME|ARGV',
                    help='a client row (repeatable): its name, then its command line (split on whitespace)')
    ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--n', type=int, default=2000, help='S2 calls per run')
    ap.add_argument('--n-slow', type=int, default=100,
                    help='S2 calls of the rows named by --slow on the Nagle-on server (the TS SDK stalls ~41 ms a call)')
    ap.add_argument('--slow', action='append', default=[], help='a row that stalls on the Nagle-on server')
    ap.add_argument('--skip', action='append', default=[], metavar='NAME|SCEN',
                    help='leave a row out on one server (h2 or h2n): --quick leaves out the TS SDK stalling')
    ap.add_argument('--timeout', type=int, default=300)
    ap.add_argument('--out', required=True)
    ap.add_argument('--log', required=True, help="the servers' and clients' stderr")
    ap.add_argument('--callgrind-dir', default='')
    ap.add_argument('--callgrind-client', default='', help='the C client binary')
    ap.add_argument('--cg-n', nargs=2, type=int, default=[300, 900])
    a = ap.parse_args()

    clients = {}
    for spec in a.client:
        name, argv = spec.split('|', 1)
        clients[name] = argv.split()
    skip = set(a.skip)
    log = open(a.log, 'w')
    out = open(a.out, 'w')
    servers = {}
    try:
        servers[NODELAY] = start_server(a.server_bin, {}, log)
        servers[NAGLE] = start_server(a.server_bin, {'MCPB_NODELAY': '0'}, log)
        runs = [(name, scen) for scen in (NODELAY, NAGLE) for name in clients if f'{name}|{scen}' not in skip]
        for rep in range(a.reps):
            k = rep % len(runs)
            for name, scen in runs[k:] + runs[:k]:
                n = a.n_slow if scen == NAGLE and name in a.slow else a.n
                argv = clients[name] + [servers[scen][1], 's2', str(n)]
                t = time.perf_counter()
                d, err = run(argv, a.timeout, log)
                wall = time.perf_counter() - t
                if d is None:
                    note = f'{name} over Streamable HTTP, {SERVER_LABEL[scen]}, rep {rep}: {err}'
                    out.write(json.dumps({'note': note}) + '\n')
                    print(f'  FAILED {note}', file=sys.stderr)
                    continue
                out.write(json.dumps({'rep': rep, 'row': name, 'scen': scen, **d}) + '\n')
                out.flush()
                print(f'  rep {rep} {scen:3s} {name:40s} {d.get("calls_per_s", 0):9.0f} calls/s '
                      f'{d.get("cpu_us_per_call", 0):8.1f} us CPU/call  ({wall:.1f} s)', file=sys.stderr)
        if a.callgrind_dir and a.callgrind_client and shutil.which('valgrind'):
            for n in a.cg_n:
                f = f'{a.callgrind_dir}/mcplug-c-http.{n}'
                with open(f'{f}.json', 'w') as jf, open(f'{f}.log', 'w') as lf:
                    r = subprocess.run(['valgrind', '--tool=callgrind', f'--callgrind-out-file={f}.out',
                                        a.callgrind_client, servers[NODELAY][1], 's2', str(n)],
                                       stdin=subprocess.DEVNULL, stdout=jf, stderr=lf, timeout=900)
                if r.returncode != 0:
                    out.write(json.dumps({'note': f'mcplug (C) over Streamable HTTP failed under callgrind: see {f}.log'}) + '\n')
    finally:
        for p, _ in servers.values():
            p.kill()
            p.wait()
        out.close()


if __name__ == '__main__':
    main()
