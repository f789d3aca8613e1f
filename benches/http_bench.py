"""S2 over Streamable HTTP: mcplug's clients beside the TS SDK's, against peer-bench's rmcp HTTP server.

peer-bench's run_all.sh runs its HTTP rows with its own clients only (MCPB_EXTRA_CLIENT reaches
S1-S4 over stdio), so benches/run.sh runs this after it: the same server binary
(mcp_http_server, built by run_all.sh), two instances on free ports of 127.0.0.1 — one that sets
TCP_NODELAY on its sockets (peer-bench's default) and one left at axum's default, Nagle on
(MCPB_NODELAY=0, the switch of peer-bench's server) — and every client once per repetition on each,
in an order rotated per repetition, as run_all.sh does. Each client is run as
`argv URL s2 N` and prints peer-bench's S2 JSON line.

With --https, Debian's nginx (started here, with a private CA made now by openssl: see
tests/servers/tls_front.py) stands in front of the TCP_NODELAY server, keeping its connections to it
alive, and every client also runs against nginx over HTTPS ("h2t") and over plain HTTP ("h2p", the
same hop without TLS). The clients trust the CA through NODE_EXTRA_CA_CERTS (mcplug reads it, as Node
does). nginx's log says, per HTTPS run, how many requests went over how many TLS connections and how
many of those resumed a session (tls_requests, tls_connections, tls_resumed).

Writes one JSON line per run to --out: {"rep", "row", "scen": "h2" (server TCP_NODELAY), "h2n"
(Nagle on), "h2t" or "h2p", ...the client's line}; a run that failed is a line {"note": "..."}. With
--callgrind-dir, also counts the C client's instructions per call over HTTP (callgrind, S2 at two
sizes against the TCP_NODELAY server: mcplug-c-http.N.out; with --https also through nginx over
HTTPS and over plain HTTP: mcplug-c-https.N.out, mcplug-c-http-nginx.N.out). Stdlib only.
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NODELAY, NAGLE, HTTPS, FRONT = 'h2', 'h2n', 'h2t', 'h2p'
SERVER_LABEL = {NODELAY: 'server TCP_NODELAY', NAGLE: 'server Nagle on (axum default)',
                HTTPS: 'HTTPS through nginx', FRONT: 'plain HTTP through nginx'}


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


def start_front(url, where):
    """nginx with TLS (a private CA made now) in front of the server at `url`: (nginx, the CA's file)"""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tests' / 'servers'))
    import tls_front
    pki = tls_front.make_pki(Path(where) / 'pki')
    upstream = url.split('/')[2]
    return tls_front.Nginx(Path(where) / 'nginx', pki, upstream, keepalive_upstream=True), str(pki['ca'])


def tls_counts(lines, port):
    """nginx's log lines of one run on the HTTPS port: requests, TLS connections, resumed ones"""
    mine = [r for r in lines if r[6] == port]
    conns = {}
    for conn, _, reused, *_ in mine:
        conns[conn] = conns.get(conn, False) or reused
    return {'tls_requests': len(mine), 'tls_connections': len(conns), 'tls_resumed': sum(conns.values())}


def run(argv, timeout, log, env=None):
    """(the client's JSON line, None) or (None, why it failed); its stderr goes to `log`"""
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, env=env)
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
    ap.add_argument('--https', action='store_true',
                    help='also through nginx, over HTTPS and plain HTTP (nginx and openssl must be installed)')
    a = ap.parse_args()

    clients = {}
    for spec in a.client:
        name, argv = spec.split('|', 1)
        clients[name] = argv.split()
    skip = set(a.skip)
    log = open(a.log, 'w')
    out = open(a.out, 'w')
    servers = {}
    front = None
    env = dict(os.environ)
    try:
        servers[NODELAY] = start_server(a.server_bin, {}, log)
        servers[NAGLE] = start_server(a.server_bin, {'MCPB_NODELAY': '0'}, log)
        urls = {scen: url for scen, (_, url) in servers.items()}
        scens = [NODELAY, NAGLE]
        if a.https:
            try:
                front, ca = start_front(urls[NODELAY], tempfile.mkdtemp(prefix='mcplug-https-bench-'))
            except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
                out.write(json.dumps({'note': f'no HTTPS rows: nginx in front did not start ({e})'}) + '\n')
                print(f'  FAILED no HTTPS rows: {e}', file=sys.stderr)
            else:
                urls[HTTPS] = f'https://127.0.0.1:{front.https_port}/mcp'
                urls[FRONT] = f'http://127.0.0.1:{front.http_port}/mcp'
                env['NODE_EXTRA_CA_CERTS'] = ca
                scens += [HTTPS, FRONT]
        runs = [(name, scen) for scen in scens for name in clients if f'{name}|{scen}' not in skip]
        for rep in range(a.reps):
            k = rep % len(runs)
            for name, scen in runs[k:] + runs[:k]:
                n = a.n_slow if scen == NAGLE and name in a.slow else a.n
                argv = clients[name] + [urls[scen], 's2', str(n)]
                logged = len(front.requests()) if front else 0
                t = time.perf_counter()
                d, err = run(argv, a.timeout, log, env)
                wall = time.perf_counter() - t
                if d is not None and scen == HTTPS:
                    time.sleep(0.05)  # nginx logs a request when its response has ended
                    d.update(tls_counts(front.requests()[logged:], front.https_port))
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
            kinds = [('mcplug-c-http', NODELAY, 'Streamable HTTP')]
            if HTTPS in urls:
                kinds.append(('mcplug-c-https', HTTPS, 'HTTPS through nginx'))
                kinds.append(('mcplug-c-http-nginx', FRONT, 'plain HTTP through nginx'))
            for tag, scen, what in kinds:
                for n in a.cg_n:
                    f = f'{a.callgrind_dir}/{tag}.{n}'
                    with open(f'{f}.json', 'w') as jf, open(f'{f}.log', 'w') as lf:
                        r = subprocess.run(['valgrind', '--tool=callgrind', f'--callgrind-out-file={f}.out',
                                            a.callgrind_client, urls[scen], 's2', str(n)],
                                           stdin=subprocess.DEVNULL, stdout=jf, stderr=lf, timeout=900, env=env)
                    if r.returncode != 0:
                        out.write(json.dumps({'note': f'mcplug (C) over {what} failed under callgrind: see {f}.log'}) + '\n')
    finally:
        for p, _ in servers.values():
            p.kill()
            p.wait()
        if front:
            front.stop()
        out.close()


if __name__ == '__main__':
    main()
