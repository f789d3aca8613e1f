"""S1 (spawn, handshake, first tools/list; ms from launch, as peer-bench measures it) of several
clients, many rounds, the order rotated each round: each client starts after each other one as
often. In peer-bench's run_all.sh mcplug's rows always start right after the Python SDK's client,
whose exit leaves the caches cold; this loop gives a steadier cold-start ratio, in the same run.

    python3 benches/layers/s1_loop.py [--rounds 20] [--out s1.jsonl] [--scen s1x] [--client 'NAME|ARGV' ...]

A client's ARGV is split on whitespace and run with `s1` appended; tokens `env:KEY=VALUE` set its
environment. Without --client: the C client (target/bench/mcplug_client, as benches/run.sh builds
it), the raw client and rmcp's (peer-bench's builds in $PEER_BENCH_WORK). Prints each client's
median and its ratio to the raw client's (when it ran); --out writes one JSON line per run
({"rep", "row", "scen", "ttl_ms"}; scen is --scen, default "s1x"), which benches/report.py reads."""
import argparse
import json
import os
import statistics
import subprocess
import time

RAW = 'raw Rust client (blocking pipes) -> server'


def default_clients():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
    r = os.path.join(os.environ.get('PEER_BENCH_WORK', '/tmp/peer-bench'), 'rust', 'target', 'release')
    s = os.path.join(r, 'mcp_server')
    return [f"mcplug (C)|{os.path.join(root, 'target', 'bench', 'mcplug_client')} {s}",
            f"{RAW}|env:MCPB_SERVER={s} {os.path.join(r, 'floor')}",
            f"rmcp 3.11 client, tokio current_thread|env:MCPB_RT=current {os.path.join(r, 'rmcp_client')} {s}"]


def parse(spec):
    """'NAME|ARGV' -> (name, argv, env): ARGV split on whitespace, tokens env:KEY=VALUE into env"""
    name, cmd = spec.split('|', 1)
    env, argv = {}, []
    for token in cmd.split():
        if token.startswith('env:'):
            k, v = token[4:].split('=', 1)
            env[k] = v
        else:
            argv.append(token)
    return name, argv, env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=20)
    ap.add_argument('--out', default='')
    ap.add_argument('--client', action='append', default=[])
    ap.add_argument('--scen', default='s1x', help='the scenario key of the JSON lines')
    ap.add_argument('runs', nargs='?', type=int, help='the number of rounds (older form)')
    a = ap.parse_args()
    rounds = a.runs or a.rounds
    clients = [parse(c) for c in (a.client or default_clients())]
    ttl = {name: [] for name, _, _ in clients}
    out = open(a.out, 'w') if a.out else None
    for rep in range(rounds):
        k = rep % len(clients)
        for name, argv, extra in clients[k:] + clients[:k]:
            env = dict(os.environ, **extra, MCPB_T0=str(time.time_ns()))
            text = subprocess.run(argv + ['s1'], env=env, capture_output=True, text=True, check=True).stdout
            v = json.loads(text.strip().splitlines()[-1])['ttl_ms']
            ttl[name].append(v)
            if out:
                out.write(json.dumps({'rep': rep, 'row': name, 'scen': a.scen, 'ttl_ms': v}) + '\n')
    if out:
        out.close()
    raw = statistics.median(ttl[RAW]) if ttl.get(RAW) else None
    for name, v in ttl.items():
        m = statistics.median(v)
        ratio = f'  {m / raw:.2f}x the raw client' if raw else ''
        print(f'{name[:40]:40s} median {m:5.2f} ms  min {min(v):5.2f} ms{ratio}')


if __name__ == '__main__':
    main()
