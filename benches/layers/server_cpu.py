#!/usr/bin/env python3
"""The server's CPU per call in S3, under each client: how much of S3's calls/s the server allows.

    python3 benches/layers/server_cpu.py --server SERVER [--n 20000] [--conc 64] [--rounds 3]
        [--out srv.jsonl] --client 'NAME|ARGV' ...

Each client runs S3 as peer-bench runs it (ARGV, then SERVER, `s3`, N, CONC; tokens `env:KEY=VALUE`
set its environment, and a token `SERVER` is replaced by the server instead of appending it: the raw
client takes it from MCPB_SERVER), but against this script standing in for the server: it runs
SERVER as its child on the same pipes and, when the child exits, appends the child's user + system
CPU to a file. Each client runs with N and with 3N calls, unpinned and pinned to vCPU 0 (`taskset
-c 0`, the server inherits it); (CPU at 3N - CPU at N) / 2N cancels the server's start-up, the
handshake and the warm-up calls. The order of the clients is rotated each round.

Prints, per client: the server's CPU per call, the client's calls/s in the 3N-call run, and the
share of one CPU the server was busy in it (calls/s x CPU per call); near 1 means the server bounds
S3. --out writes one JSON line per round ({"rep", "row", "scen": "srv3" or "srv3p",
"server_us_per_call", "calls_per_s", "busy"}), which benches/report.py reads."""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

import s1_loop  # this folder: its reading of --client

WRAP_EXEC, WRAP_OUT = 'MCPB_WRAP_EXEC', 'MCPB_WRAP_OUT'


def wrap():
    """The stand-in server: the real one as a child on our stdin/stdout, then its CPU to a file."""
    rc = subprocess.run([os.environ[WRAP_EXEC]]).returncode
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.environ[WRAP_OUT], 'a') as f:
        f.write(f'{ru.ru_utime + ru.ru_stime:.6f}\n')
    sys.exit(rc)


def parse(spec, stand_in):
    """a client as s1_loop.py reads it, with the token SERVER (also as an env: value) replaced by
    the stand-in; without one, the stand-in is appended"""
    name, argv, env = s1_loop.parse(spec)
    named = 'SERVER' in argv or 'SERVER' in env.values()
    argv = [stand_in if t == 'SERVER' else t for t in argv]
    env = {k: stand_in if v == 'SERVER' else v for k, v in env.items()}
    return name, argv if named else argv + [stand_in], env


def run_once(argv, env, pin, n, conc, cpu_file):
    open(cpu_file, 'w').close()
    pre = ['taskset', '-c', '0'] if pin else []
    out = subprocess.run(pre + argv + ['s3', str(n), str(conc)], env=env, capture_output=True, text=True,
                         timeout=300)
    lines = [l for l in out.stdout.splitlines() if l.startswith('{')]
    if out.returncode != 0 or not lines:
        raise SystemExit(f'{argv[0]} s3 {n} failed (rc {out.returncode}): {out.stderr.strip()[-300:]}')
    cpu = [float(l) for l in open(cpu_file) if l.strip()]
    if len(cpu) != 1:
        raise SystemExit(f'{argv[0]} s3 {n}: the stand-in server did not report its child\'s CPU')
    return cpu[0], json.loads(lines[-1])['calls_per_s']


def main():
    if os.environ.get(WRAP_EXEC):
        return wrap()
    ap = argparse.ArgumentParser()
    ap.add_argument('--server', required=True)
    ap.add_argument('--n', type=int, default=20000)
    ap.add_argument('--conc', type=int, default=64)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--out', default='')
    ap.add_argument('--client', action='append', required=True)
    a = ap.parse_args()
    stand_in = os.path.abspath(__file__)
    clients = [parse(c, stand_in) for c in a.client]
    results = {}
    out = open(a.out, 'w') if a.out else None
    with tempfile.TemporaryDirectory() as tmp:
        cpu_file = os.path.join(tmp, 'server-cpu')
        for rep in range(a.rounds):
            k = rep % len(clients)
            for name, argv, extra in clients[k:] + clients[:k]:
                env = dict(os.environ, **extra, **{WRAP_EXEC: a.server, WRAP_OUT: cpu_file})
                for pin, scen in ((False, 'srv3'), (True, 'srv3p')):
                    c1, _ = run_once(argv, env, pin, a.n, a.conc, cpu_file)
                    c3, calls_per_s = run_once(argv, env, pin, 3 * a.n, a.conc, cpu_file)
                    us = (c3 - c1) * 1e6 / (2 * a.n)
                    d = {'server_us_per_call': us, 'calls_per_s': calls_per_s, 'busy': calls_per_s * us / 1e6}
                    results.setdefault((name, scen), []).append(d)
                    if out:
                        out.write(json.dumps({'rep': rep, 'row': name, 'scen': scen, **d}) + '\n')
    if out:
        out.close()
    for (name, scen), ds in results.items():
        m = {k: statistics.median(d[k] for d in ds) for k in ds[0]}
        print(f'{name[:40]:40s} {"pinned  " if scen == "srv3p" else "unpinned"} server {m["server_us_per_call"]:5.2f} us'
              f' per call, {m["calls_per_s"]:9.0f} calls/s, server busy {m["busy"]:.2f} of a CPU')


if __name__ == '__main__':
    main()
