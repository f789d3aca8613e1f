"""What a bearer token costs a call on the direct HTTP path: mcplug's C bench client's S2 against
peer-bench's rmcp Streamable HTTP server (2026-07-28: the direct path), once with no credentials
and once with a stored OAuth token that every request carries (`Authorization: Bearer ...`, put
in the client's auth store before the run, as a finished authorization leaves it), side by side.

Client CPU per call, pinned to one CPU (taskset -c 0; the server is started pinned there too), as
the difference between two sizes (N2 and N1 calls: start-up and connect cancel), over rotated
rounds. The client's CPU is its own rusage (the server is not its child). Prints one line per
round and the medians, and the ratio with / without — the target is <= 1.05. Stdlib only.

    python3 benches/bearer_bench.py --server-bin .../mcp_http_server --client .../mcplug_client
        [--rounds 6] [--n1 2000] [--n2 12000] [--out FILE.json]
"""
import argparse
import hashlib
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

TOKEN = "bench-" + "t" * 40  # the length of a typical opaque access token


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seed_store(directory, url):
    """The store as an authorization leaves it: one record for the server, with its token
    (auth/store.rs: `<sha256(key)[:32]>.json`, key `server <url>`; 0700 / 0600)."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    key = f"server {url}"
    record = {"server": url, "tokens": {"access_token": TOKEN, "token_type": "Bearer", "id": 7, "identity": 7,
                                        "issuer": "http://127.0.0.1"}}
    path = os.path.join(directory, hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"key": key, "record": record}, f)


def client_cpu(argv, env):
    """(user+sys seconds of the child, its S2 JSON line)"""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {p.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server-bin", required=True)
    ap.add_argument("--client", required=True)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--n1", type=int, default=2000)
    ap.add_argument("--n2", type=int, default=12000)
    ap.add_argument("--out")
    a = ap.parse_args()
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    port = free_port()
    server = subprocess.Popen(pin + [a.server_bin, str(port)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        if "listening" not in server.stdout.readline():
            raise SystemExit(f"{a.server_bin} did not start")
        url = f"http://127.0.0.1:{port}/mcp"
        work = tempfile.mkdtemp(prefix="mcplug-bearer-")
        with_token = os.path.join(work, "with")
        seed_store(with_token, url)
        variants = {
            "no token": json.dumps({"auth_store": os.path.join(work, "none")}),
            "bearer token": json.dumps({"auth_store": with_token}),
        }
        per_call = {k: [] for k in variants}
        names = list(variants)
        for r in range(a.rounds):
            order = names if r % 2 == 0 else names[::-1]
            for name in order:
                env = dict(os.environ, MCPB_MCPLUG_OPTIONS=variants[name])
                c1, _ = client_cpu(pin + [a.client, url, "s2", str(a.n1)], env)
                c2, line = client_cpu(pin + [a.client, url, "s2", str(a.n2)], env)
                us = (c2 - c1) / (a.n2 - a.n1) * 1e6
                per_call[name].append(us)
                print(f"round {r + 1} {name:12s} {us:7.2f} us CPU per call (pinned)", flush=True)
        med = {k: statistics.median(v) for k, v in per_call.items()}
        ratio = med["bearer token"] / med["no token"]
        print(f"median: no token {med['no token']:.2f} us, bearer token {med['bearer token']:.2f} us: "
              f"{ratio:.3f}x (target <= 1.05: {'met' if ratio <= 1.05 else 'missed'})")
        if a.out:
            with open(a.out, "w") as f:
                json.dump({"per_call_us": per_call, "median_us": med, "ratio": ratio,
                           "n1": a.n1, "n2": a.n2, "rounds": a.rounds, "at": time.strftime("%FT%TZ", time.gmtime())}, f)
        shutil.rmtree(work, ignore_errors=True)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
