"""S1 (spawn, handshake, first tools/list) of the C client against the raw and rmcp clients, many
times, interleaved: a steadier cold-start ratio than run_all.sh's 5 repetitions.

    python3 benches/layers/s1_loop.py [RUNS=20]     (after benches/run.sh built everything)"""
import json
import os
import statistics
import subprocess
import sys
import time

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
R = os.path.join(os.environ.get('PEER_BENCH_WORK', '/tmp/peer-bench'), 'rust', 'target', 'release')
S = os.path.join(R, 'mcp_server')
clients = {
    'mcplug (C)': ([os.path.join(root, 'target', 'bench', 'mcplug_client'), S, 's1'], {}),
    'raw client': ([os.path.join(R, 'floor'), 's1'], {'MCPB_SERVER': S}),
    'rmcp current_thread': ([os.path.join(R, 'rmcp_client'), S, 's1'], {'MCPB_RT': 'current'}),
}
ttl = {k: [] for k in clients}
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 20):
    for name, (argv, env) in clients.items():
        env = dict(os.environ, **env, MCPB_T0=str(time.time_ns()))
        out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
        ttl[name].append(json.loads(out.strip().splitlines()[-1])['ttl_ms'])
raw = statistics.median(ttl['raw client'])
for name, v in ttl.items():
    m = statistics.median(v)
    print(f'{name:20s} median {m:5.2f} ms  min {min(v):5.2f} ms  {m / raw:.2f}x the raw client')
