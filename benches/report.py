"""Writes BENCHMARKS.md from one benches/run.sh run (peer-bench table and raw runs, the Streamable
HTTP runs of benches/http_bench.py, callgrind outputs, peak-RSS runs); with --quick, checks that
every mcplug client ran every scenario and exits 1 otherwise. Called by benches/run.sh; stdlib only."""
import argparse
import json
import os
import platform
import re
import statistics as st
import subprocess
import sys
from collections import defaultdict

FLOOR = 'floor: Rust parent/child, pipes + serde_json'
RAW = 'raw Rust client (blocking pipes) -> server'
RM_C = 'rmcp 3.11 client, tokio current_thread'
RM_M = 'rmcp 3.11 client, tokio multi_thread'
TS = 'TS SDK 1.32.2 (Node 20) StdioClientTransport'
PY = 'Python SDK mcp 2.3.0 stdio_client'
MC, MPY, MNODE = 'mcplug (C)', 'mcplug (Python)', 'mcplug (Node)'
MCPLUG = [MC, MPY, MNODE]
# The same clients held to the 2025-11-25 revision (connect option protocol_versions), which the raw
# client and the peers speak: with the default negotiation the peer-bench server and mcplug agree on
# 2026-07-28, whose requests each carry a `_meta` block (protocol version, capabilities, client info):
# 3.2x the bytes of a 2025-11-25 tools/call for the server to read. run.sh adds these rows.
LEGACY = '2025-11-25'
MC_L, MNODE_L = f'mcplug (C), {LEGACY}', f'mcplug (Node), {LEGACY}'
MCPLUG_STDIO = MCPLUG + [MC_L, MNODE_L]
ERA = {MC: '2026-07-28, negotiated', MNODE: '2026-07-28, negotiated', MPY: '2026-07-28, negotiated',
       MC_L: f'{LEGACY}, as the raw client', MNODE_L: f'{LEGACY}, as the TS SDK'}
TS_HTTP = 'TS SDK 1.32.2 StreamableHTTPClientTransport'   # benches/http_bench.py's row of the TS SDK
# benches/http_bench.py's scenarios: S2 against peer-bench's rmcp HTTP server, with and without TCP_NODELAY
HTTP_SCENARIOS = [('h2', 'server TCP_NODELAY'), ('h2n', 'server Nagle on'), ('h2t', 'HTTPS through nginx'),
                  ('h2p', 'plain HTTP through nginx')]
HTTP_REQUIRED = ['p50_us', 'p99_us', 'calls_per_s', 'cpu_us_per_call']
SHORT = {FLOOR: 'floor', RAW: 'raw client', RM_C: 'rmcp (current_thread)', RM_M: 'rmcp (multi_thread)',
         TS: 'TS SDK', PY: 'Python SDK', MC: 'mcplug (C)', MC_L: f'mcplug (C), {LEGACY}'}
SCENARIOS = ['s1', 's2', 's2p', 's3', 's3p', 's4']
REQUIRED = {'s1': ['ttl_ms'], 's2': ['p50_us', 'p99_us', 'calls_per_s', 'hwm_kib', 'cpu_us_per_call'],
            's2p': ['p50_us', 'cpu_us_per_call'], 's3': ['calls_per_s', 'cpu_us_per_call'],
            's3p': ['calls_per_s', 'cpu_us_per_call'], 's4': ['mib_per_s']}
# (key, label, lower_is_better)
METRICS = [
    ('s1.ttl_ms', 'S1 cold start: launch to first tools/list answer (ms)', True),
    ('s1.wall_ms', 'S1 whole process, exit included (ms)', True),
    ('s1x.ttl_ms', 'S1 cold start, rotated order (C, raw, rmcp only; ms)', True),
    ('s2.p50_us', 'S2 p50 latency (us)', True),
    ('s2.cpu_us_per_call', 'S2 client CPU per call (us)', True),
    ('s2p.p50_us', 'S2 1-CPU p50 latency (us)', True),
    ('s2p.cpu_us_per_call', 'S2 1-CPU client CPU per call (us)', True),
    ('s3.calls_per_s', 'S3 calls/s, 64 in flight', False),
    ('s3.cpu_us_per_call', 'S3 client CPU per call (us)', True),
    ('s3p.calls_per_s', 'S3 1-CPU calls/s', False),
    ('s4.mib_per_s', 'S4 1 MiB echo, MiB/s', False),
    ('s2.hwm_kib', 'S2 peak RSS (VmHWM)', True),
]
BEGIN, END = '<!-- analysis:begin -->', '<!-- analysis:end -->'
# benches/layers/start_floor.*: the language's own start-up, nothing else (rows of the s1y loop)
START = {'Node': 'Node start-up', 'Python': 'Python start-up'}


def load_raw(path):
    """(rep, row, 'scen.key') -> value, and row -> 'scen.key' -> [values]"""
    per_rep, values = {}, defaultdict(lambda: defaultdict(list))
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if 'scen' not in d:
                continue  # a note of a failed run (http_bench.py)
            for k, v in d.items():
                if isinstance(v, (int, float)) and k not in ('rep', 'n', 'conc', 'size'):
                    key = f"{d['scen']}.{k}"
                    per_rep[(d['rep'], d['row'], key)] = v
                    values[d['row']][key].append(v)
    return per_rep, values


def merge(per_rep, values, path):
    """adds a jsonl of runs (as load_raw reads it) to the run's tables; returns its own per_rep"""
    p, v = load_raw(path)
    per_rep.update(p)
    for row, keys in v.items():
        for k, vs in keys.items():
            values[row][k] += vs
    return p


def load_http_extras(path):
    """from a jsonl of http_bench.py: the notes of failed runs, and the calls per run by row and scenario"""
    notes, ns = [], defaultdict(set)
    with open(path) as f:
        for d in map(json.loads, f):
            if 'note' in d:
                notes.append(d['note'])
            elif 'n' in d:
                ns[(d['row'], d['scen'])].add(d['n'])
    return notes, ns


def fratio3(r):
    """a ratio near 1/10 with a third digit, so that 0.104x does not read as 0.10x"""
    return '-' if r is None else f'{r:.3f}x'


def med(values, row, key):
    v = values.get(row, {}).get(key)
    return st.median(v) if v else None


def paired(per_rep, row, ref, key):
    """median over repetitions of row/ref measured in the same repetition"""
    rs = [v / per_rep[(rep, ref, k)] for (rep, r, k), v in per_rep.items()
          if r == row and k == key and per_rep.get((rep, ref, k))]
    return st.median(rs) if rs else None


def fnum(v, nd=1):
    if v is None:
        return '-'
    if abs(v) >= 1000:
        return f'{v:,.0f}'
    return f'{v:,.{nd}f}'


def fratio(r):
    if r is None:
        return '-'
    # near 1 (a target of "at least the raw client"), two decimals would print 1.00x for a miss
    return f'{r:.3f}x' if 0.995 <= r < 1.005 else f'{r:.2f}x'


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return ''


def machine():
    cpu = ''
    try:
        for line in open('/proc/cpuinfo'):
            if line.startswith('model name'):
                cpu = line.split(':', 1)[1].strip()
                break
    except OSError:
        pass
    return {'nproc': os.cpu_count(), 'cpu': cpu, 'kernel': platform.release(),
            'rustc': sh('rustc --version'), 'node': sh('node --version'),
            'python': sh(f'{sys.executable} --version') or platform.python_version(),
            'valgrind': sh('valgrind --version'), 'load': sh('cat /proc/loadavg')}


# ---- callgrind ----

LINE = re.compile(r'^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*?)(?:\s+\[([^\]]*)\])?\s*$')


def cg_total(path):
    with open(path) as f:
        for line in f:
            if line.startswith('totals:') or line.startswith('summary:'):
                return int(line.split()[1])
    return None


def cg_rows(path, inclusive):
    """(Ir, function, object) for each row of callgrind_annotate's function table"""
    flag = 'yes' if inclusive else 'no'
    text = sh(f'callgrind_annotate --inclusive={flag} --threshold=100 --auto=no {path}')
    started = seen = False
    for line in text.splitlines():
        if 'file:function' in line:
            started = True
            continue
        if not started or line.startswith('---'):
            continue
        if not line.strip():
            if seen:
                return  # the end of the function table
            continue
        m = LINE.match(line)
        if not m:
            continue
        # "file:function": the first colon that is not half of a Rust "::"
        sep = re.search(r'(?<!:):(?!:)', m.group(2))
        fn = re.sub(r"'\d+$", '', m.group(2)[sep.end():] if sep else m.group(2))
        seen = True
        yield int(m.group(1).replace(',', '')), fn, m.group(3)


def cg_functions(path):
    """function -> (self Ir, object) from callgrind_annotate"""
    fns = {}
    for ir, fn, obj in cg_rows(path, inclusive=False):
        old = fns.get(fn, (0, None))
        fns[fn] = (old[0] + ir, obj or old[1])
    return fns


def cg_inclusive(path):
    """function -> inclusive Ir (the largest of its file:function entries: inlined code splits a
    function over several files, and the entry under its own file covers the whole of it)"""
    fns = {}
    for ir, fn, _ in cg_rows(path, inclusive=True):
        fns[fn] = max(fns.get(fn, 0), ir)
    return fns


def engine_steps(f1, f2, n1, n2, per_call):
    """the library's own functions by inclusive cost per call: where a call's instructions go"""
    a, b = cg_inclusive(f1), cg_inclusive(f2)
    rows = []
    for fn, v in b.items():
        if not (fn.startswith('mcplug') or fn.startswith('<mcplug') or 'multi_thread::worker::run' in fn
                or fn.startswith('tokio::runtime::park::CachedParkThread::block_on')):
            continue
        d = (v - a.get(fn, 0)) / (n2 - n1)
        if d >= per_call * 0.02:
            rows.append((d, fn))
    rows.sort(reverse=True)
    out = ['', '| library function (inclusive: itself and what it calls) | Ir per call | share |', '|---|---:|---:|']
    for d, fn in rows[:16]:
        short = fn if len(fn) <= 110 else fn[:107] + '...'
        out.append(f'| `{short}` | {d:,.0f} | {d / per_call * 100:.1f}% |')
    return out


LIBC_BENCH = ('vfprintf', '_IO_', 'vsnprintf', 'snprintf', 'sprintf', 'msort', 'qsort', '__strchrnul',
              'printf_positional', '__printf_fp', 'hack_digit', '__mpn_', 'outstring', 'pad_func')


def group_of(fn, obj, bench_bins):
    name = fn
    if fn.startswith(('ring_core_', '_aesni_', 'aes_hw_', 'gcm_', 'ecp_nistz256', 'fe_', 'ge_', 'x25519')):
        return 'ring'  # ring's assembly and C (AES-GCM, GHASH, curves): TLS's cryptography
    if name.startswith('<') and ' as ' in name:
        # <Type as Trait>::method: the Type's crate, unless the Type is a primitive (str, [T], A)
        left, right = name[1:].split(' as ', 1)
        left = left.lstrip('&*[').replace('mut ', '').replace('dyn ', '')
        name = left if '::' in left.split('<')[0] else right
    name = name.lstrip('<&*[').replace('mut ', '').replace('dyn ', '')
    if '::' in name:
        crate = name.split('::', 1)[0].split('<')[0]
        if crate in ('core', 'alloc', 'std'):
            return 'Rust std (core/alloc/std)'
        if crate in ('mcpbench', 'rmcp_client', 'floor'):
            return 'the bench program itself'
        return crate
    base = os.path.basename(obj or '')
    if base in bench_bins:
        return 'the bench program itself'
    if any(name.startswith(p) or p in name for p in LIBC_BENCH):
        return 'the bench program itself'   # libc printf/qsort: only the C bench program calls those
    if 'malloc' in name or 'free' in name or name in ('_int_malloc', '_int_free', 'realloc', 'calloc', '_int_realloc'):
        return 'libc malloc/free'
    if base == 'libmcplug.so' or name.startswith('mcplug_'):
        return 'mcplug'  # the C entry points, and compiler builtins linked into the library
    if base.startswith('libm.so'):
        return 'libm'
    if base.startswith('libc.so'):
        return 'libc (memcpy, strlen, syscall stubs)'
    if base.startswith('ld-linux'):
        return 'ld.so (__tls_get_addr: TLS of a shared library)'
    return 'other'


def cg_section(cgdir, n1, n2):
    rows, breakdowns = [], []
    names = [('mcplug-c', 'mcplug (C) over the C ABI', ['mcplug_client']),
             ('raw', 'raw Rust client (hand-written, blocking pipes)', ['floor']),
             ('rmcp', 'rmcp 3.11 client, tokio current_thread', ['rmcp_client']),
             ('mcplug-c-http', 'mcplug (C) over Streamable HTTP (rmcp HTTP server, TCP_NODELAY)', ['mcplug_client']),
             ('mcplug-c-https', 'mcplug (C) over HTTPS (nginx with TLS in front of the rmcp HTTP server)',
              ['mcplug_client']),
             ('mcplug-c-http-nginx', 'mcplug (C) over plain HTTP through the same nginx', ['mcplug_client'])]
    per_call = {}
    for tag, label, bins in names:
        f1, f2 = f'{cgdir}/{tag}.{n1}.out', f'{cgdir}/{tag}.{n2}.out'
        if not (os.path.exists(f1) and os.path.exists(f2)):
            rows.append(f'| {label} | - | - | - |')
            continue
        t1, t2 = cg_total(f1), cg_total(f2)
        pc = (t2 - t1) / (n2 - n1)
        per_call[tag] = pc
        rows.append(f'| {label} | {t1:,} | {t2:,} | **{pc:,.0f}** |')
        a, b = cg_functions(f1), cg_functions(f2)
        diff = {}
        for fn in set(a) | set(b):
            d = (b.get(fn, (0, None))[0] - a.get(fn, (0, None))[0]) / (n2 - n1)
            diff[fn] = (d, b.get(fn, a.get(fn))[1])
        groups = defaultdict(float)
        for fn, (d, obj) in diff.items():
            groups[group_of(fn, obj, bins)] += d
        top = sorted(diff.items(), key=lambda kv: -kv[1][0])[:15]
        out = [f'#### {label}: {pc:,.0f} instructions per call', '',
               '| where (by crate / library) | Ir per call | share |', '|---|---:|---:|']
        for g, d in sorted(groups.items(), key=lambda kv: -kv[1]):
            if abs(d) >= pc * 0.005:
                out.append(f'| {g} | {d:,.0f} | {d / pc * 100:.1f}% |')
        out += ['', '| function (self cost) | Ir per call | share |', '|---|---:|---:|']
        for fn, (d, obj) in top:
            short = fn if len(fn) <= 110 else fn[:107] + '...'
            out.append(f'| `{short}` | {d:,.0f} | {d / pc * 100:.1f}% |')
        if tag.startswith('mcplug-c'):
            out += engine_steps(f1, f2, n1, n2, pc)
        breakdowns.append('\n'.join(out))
    return rows, breakdowns, per_call


def bearer_section(path):
    """benches/bearer_bench.py: a bearer token's cost on the direct HTTP path"""
    b = json.load(open(path))
    med = b['median_us']
    rows = ' / '.join(f'{v:.2f}' for v in b['per_call_us']['bearer token'])
    rows0 = ' / '.join(f'{v:.2f}' for v in b['per_call_us']['no token'])
    ratio = b['ratio']
    return ['## A bearer token on the direct HTTP path', '',
            '`benches/bearer_bench.py`: the C client\'s S2 against peer-bench\'s rmcp Streamable HTTP server '
            '(2026-07-28, the direct path), with no credentials and with a stored OAuth token on every request, '
            f'pinned to one CPU, client CPU per call as the difference of {b["n2"]} and {b["n1"]} calls, '
            f'{b["rounds"]} rotated rounds.', '',
            '| | CPU per call, median (us) | rounds (us) |', '|---|---|---|',
            f'| no token | {med["no token"]:.2f} | {rows0} |',
            f'| bearer token | {med["bearer token"]:.2f} | {rows} |', '',
            f'Target: a call with a token costs at most 1.05x one without: **{ratio:.3f}x, '
            f'{"met" if ratio <= 1.05 else "missed"}**.', '']


def https_section(path, cg_per_call):
    """benches/https_bench.py: what TLS costs a call, pinned; returns the lines and the figures for the targets"""
    b = json.load(open(path))
    med, per = b['median_us'], b['per_call_us']
    ts = b.get('ts') or ''
    rounds = lambda key: ' / '.join(f'{v:.1f}' for v in per.get(key, []))
    L = ['## HTTPS (S2 through nginx, pinned)', '',
         '`benches/https_bench.py`: S2 against peer-bench\'s rmcp Streamable HTTP server with Debian\'s nginx in front '
         '(keep-alive to the client and to the server; TLS 1.3 from a private CA made for the run, trusted through '
         'NODE_EXTRA_CA_CERTS), over HTTPS and over plain HTTP through the same nginx. Everything pinned to one CPU; '
         'client CPU per call as the difference of two sizes (start-up, connect and handshakes cancel), '
         f'{b["rounds"]} rotated rounds, medians. Sizes: '
         + ', '.join(f'{k} {v[0]}/{v[1]}' for k, v in b['sizes'].items()) + '.', '',
         '| client | plain HTTP us/call | HTTPS us/call | HTTPS / plain | HTTPS / TS SDK HTTPS | TLS connections per 2 runs (resumed) | rounds HTTPS (us) |',
         '|---|---:|---:|---:|---:|---|---|']
    for name in b['sizes']:
        plain, https = med.get(f'{name}|plain HTTP'), med.get(f'{name}|HTTPS')
        t = b['tls'].get(name) or []
        conns = f'{st.median(x["connections"] for x in t):.0f} ({st.median(x["resumed"] for x in t):.0f}) for ' \
                f'{t[0]["calls"]} calls' if t else '-'
        L.append(f'| {name} | {fnum(plain, 2)} | {fnum(https, 2)} | {fratio(b["https_over_plain"].get(name))} | '
                 f'{fratio3(b["over_ts"].get(name)) if name != ts else ""} | {conns} | {rounds(f"{name}|HTTPS")} |')
    its, ih = cg_per_call.get('mcplug-c-https'), cg_per_call.get('mcplug-c-http-nginx')
    L.append('')
    if its and ih:
        L.append(f'Instructions per call from C (callgrind, through the same nginx; breakdowns below): HTTPS {its:,.0f}, '
                 f'plain HTTP {ih:,.0f}: {its / ih:.2f}x. A TLS connection carries every call of a run: the handshake '
                 '(resumed when the session store has the server) is paid per connection, not per call.')
        L.append('')
    return L, b


def http_section(values, per_rep, notes, ns, cg_per_call, stderr_log):
    """the Streamable HTTP runs of benches/http_bench.py: a table, and mcplug / the TS SDK"""
    M = lambda row, key: med(values, row, key)
    P = lambda row, ref, key: paired(per_rep, row, ref, key)
    reps = max([rep for (rep, _, k) in per_rep if k[:3] in ('h2.', 'h2n')] or [-1]) + 1
    n_ts_nagle = sorted(ns.get((TS_HTTP, 'h2n'), ()))
    n_rest = sorted({n for (row, scen), v in ns.items() if (row, scen) != (TS_HTTP, 'h2n') for n in v})
    fmt_n = lambda v: ', '.join(str(n) for n in v) or '-'
    L = ['## Streamable HTTP (S2)', '',
         '`benches/http_bench.py`: S2 (sequential `echo` calls, 200 warm-up calls first) against peer-bench\'s rmcp '
         'Streamable HTTP server (`mcp_http_server`, default config) on 127.0.0.1, two instances: one sets '
         'TCP_NODELAY on its sockets, the other leaves axum\'s default (Nagle on; `MCPB_NODELAY=0`). Every client runs '
         f'once per repetition on each ({reps} repetition{"" if reps == 1 else "s"}, order rotated), medians; the ratios are medians of '
         'mcplug / TS SDK within each repetition. The TS SDK is peer-bench\'s own client (`node/client.mjs`). '
         f'Calls per run: {fmt_n(n_rest)}; the TS SDK against the Nagle-on server {fmt_n(n_ts_nagle)} (each of its '
         'calls waits ~41 ms there for the end of the response stream). mcplug negotiates the 2026-07-28 era with '
         'this server (no session: one POST per call, answered with an SSE stream); the TS SDK speaks 2025-11-25 '
         '(a session). run_all.sh\'s own HTTP rows (TS and Python SDKs, separate runs) are in the table above. '
         '"through nginx": Debian\'s nginx in front of the TCP_NODELAY instance, keeping its connections to it alive, '
         'with TLS 1.3 from a private CA made for the run (trusted through NODE_EXTRA_CA_CERTS), or plain HTTP on '
         'another port of the same nginx.', '',
         '| client | server | S2 p50 us | S2 p99 us | calls/s | client CPU us/call | VmHWM MiB | calls/s / TS SDK | CPU per call / TS SDK |',
         '|---|---|---:|---:|---:|---:|---:|---:|---:|']
    for scen, label in HTTP_SCENARIOS:
        for row in [TS_HTTP] + MCPLUG:
            if not values.get(row, {}).get(f'{scen}.calls_per_s'):
                continue
            hw = M(row, f'{scen}.hwm_kib')
            ref = row != TS_HTTP
            L.append(f'| {row} | {label} | {fnum(M(row, f"{scen}.p50_us"), 1)} | {fnum(M(row, f"{scen}.p99_us"), 0)} | '
                     f'{fnum(M(row, f"{scen}.calls_per_s"), 0)} | {fnum(M(row, f"{scen}.cpu_us_per_call"), 1)} | '
                     f'{fnum(hw / 1024 if hw else None, 1)} | '
                     f'{fratio(P(row, TS_HTTP, f"{scen}.calls_per_s")) if ref else ""} | '
                     f'{fratio3(P(row, TS_HTTP, f"{scen}.cpu_us_per_call")) if ref else ""} |')
    L.append('')
    for row in MCPLUG:
        parts = [f'{label}: calls/s {fratio(P(row, TS_HTTP, f"{scen}.calls_per_s"))}, client CPU per call '
                 f'{fratio3(P(row, TS_HTTP, f"{scen}.cpu_us_per_call"))}' for scen, label in HTTP_SCENARIOS]
        L.append(f'- {row} / TS SDK over Streamable HTTP — ' + '; '.join(parts) + '.')
    ih, i = cg_per_call.get('mcplug-c-http'), cg_per_call.get('mcplug-c')
    if ih:
        L.append(f'- Instructions per call, mcplug (C) over Streamable HTTP (callgrind, as below): {ih:,.0f}'
                 + (f' ({ih / i:.1f}x its stdio call)' if i else '') + '.')
    its, ihn = cg_per_call.get('mcplug-c-https'), cg_per_call.get('mcplug-c-http-nginx')
    if its and ihn:
        L.append(f'- Instructions per call, mcplug (C) through nginx: HTTPS {its:,.0f}, plain HTTP {ihn:,.0f} '
                 f'({its / ihn:.2f}x).')
    tls = [(M(row, 'h2t.tls_connections'), M(row, 'h2t.tls_requests')) for row in [TS_HTTP] + MCPLUG]
    tls_rows = [f'{row} {fnum(c, 0)} for {fnum(r, 0)} requests' for row, (c, r) in zip([TS_HTTP] + MCPLUG, tls) if c]
    if tls_rows:
        L.append('- TLS connections per HTTPS run (nginx\'s log; medians): ' + '; '.join(tls_rows) + '.')
    for n in notes:
        L.append(f'- Failed: {n}')
    if stderr_log:
        L.append(f'- The clients\' and servers\' stderr: `{stderr_log}`.')
    L.append('')
    return L


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--table', required=True)
    ap.add_argument('--raw', required=True)
    ap.add_argument('--stderr-log', default='')
    ap.add_argument('--callgrind', required=True)
    ap.add_argument('--cg-n', nargs=2, type=int, required=True)
    ap.add_argument('--rss', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--started', default='')
    ap.add_argument('--run-all-seconds', type=int, default=0)
    ap.add_argument('--peer-bench', default='')
    ap.add_argument('--load', default='', help='/proc/loadavg before and after run_all.sh')
    ap.add_argument('--commit', default='')
    ap.add_argument('--dirty', default='', help='tracked files of the measured code that differed from the commit')
    ap.add_argument('--http', default='', help="benches/http_bench.py's runs (jsonl)")
    ap.add_argument('--http-stderr-log', default='')
    ap.add_argument('--s1-loop', default='', help="benches/layers/s1_loop.py's runs (jsonl): S1 in rotated order")
    ap.add_argument('--s1-lang', default='',
                    help="benches/layers/s1_loop.py's runs (jsonl, scen s1y): the Node and Python clients' S1 beside "
                         "their SDKs' and their language's bare start-up, rotated")
    ap.add_argument('--server-cpu', default='', help="benches/layers/server_cpu.py's runs (jsonl): the server's CPU in S3")
    ap.add_argument('--bearer', default='', help="benches/bearer_bench.py's result (json)")
    ap.add_argument('--https', default='', help="benches/https_bench.py's result (json)")
    ap.add_argument('--quick', action='store_true')
    a = ap.parse_args()

    table_text = open(a.table).read()
    notes = [l[len('# note: '):] for l in table_text.splitlines() if l.startswith('# note: ')]
    per_rep, values = load_raw(a.raw)
    http_notes, http_ns = [], {}
    if a.http:
        # other scenario keys (h2, h2n) than run_all.sh's: one table of runs for both
        merge(per_rep, values, a.http)
        http_notes, http_ns = load_http_extras(a.http)
    s1_rounds = 0
    if a.s1_loop and os.path.exists(a.s1_loop):
        s1_rounds = len({rep for (rep, _, _) in merge(per_rep, values, a.s1_loop)})
    s1y_rounds = 0
    if a.s1_lang and os.path.exists(a.s1_lang):
        s1y_rounds = len({rep for (rep, _, _) in merge(per_rep, values, a.s1_lang)})
    if a.server_cpu and os.path.exists(a.server_cpu):
        merge(per_rep, values, a.server_cpu)

    # ---- did every mcplug client run every scenario? ----
    failures = []
    for c in MCPLUG_STDIO:
        for scen in SCENARIOS:
            for k in REQUIRED[scen]:
                v = med(values, c, f'{scen}.{k}')
                if v is None or not v > 0:
                    failures.append(f'{c}: no {scen}.{k}')
    failures += [n for n in notes if n.split(' ', 1)[-1].startswith('mcplug')]
    if a.s1_loop:
        failures += [f'{c}: no S1 in the rotated-order loop' for c in (MC, MC_L) if not med(values, c, 's1x.ttl_ms')]
    if a.s1_lang:
        failures += [f'{c}: no S1 beside its SDK and bare start-up' for c in (MPY, MNODE, MNODE_L)
                     if not med(values, c, 's1y.ttl_ms')]
    if a.server_cpu:
        failures += [f'{c}: no server CPU in S3 ({scen})' for c in (MC, MC_L) for scen in ('srv3', 'srv3p')
                     if not med(values, c, f'{scen}.server_us_per_call')]
    if a.http:
        for c in MCPLUG:
            for scen, _ in HTTP_SCENARIOS:
                for k in HTTP_REQUIRED:
                    v = med(values, c, f'{scen}.{k}')
                    if v is None or not v > 0:
                        failures.append(f'{c}: no {scen}.{k} (Streamable HTTP)')
        failures += [n for n in http_notes if n.startswith('mcplug')]
    cg_n1, cg_n2 = a.cg_n
    cg_rows, cg_breakdowns, cg_per_call = cg_section(a.callgrind, cg_n1, cg_n2)
    https_lines, https = ([], None)
    if a.https:
        if os.path.exists(a.https):
            https_lines, https = https_section(a.https, cg_per_call)
            failures += [f'{c}: no HTTPS CPU per call' for c in MCPLUG if https['median_us'].get(f'{c}|HTTPS') is None]
        else:
            failures.append(f'no HTTPS runs ({a.https} is missing)')

    rss = [json.loads(l) for l in open(a.rss) if l.strip()]
    with_lib = [d for d in rss if d.get('client') == 'mcplug-c']
    without = [d for d in rss if d.get('client') == 'c-no-library']
    if not with_lib or not without:
        failures.append('peak RSS runs missing')
    hwm_with = st.median(d['hwm_kib'] for d in with_lib) if with_lib else None
    hwm_start = st.median(d['hwm_start_kib'] for d in with_lib) if with_lib else None
    hwm_without = st.median(d['hwm_kib'] for d in without) if without else None
    rss_added = (hwm_with - hwm_without) / 1024 if hwm_with and hwm_without else None

    M = lambda row, key: med(values, row, key)
    P = lambda row, ref, key: paired(per_rep, row, ref, key)

    # ---- targets (issue #3) ----
    # Each target may carry its reach: what no client could beat in this run (the floor's CPU per call,
    # a language's bare start-up, the server's own CPU per call where S3 is bound by it), and whether
    # the target lies within it. A target beyond its reach is missed by every client on this machine.
    targets = []

    def target(who, what, measured, ok, reach=None):
        """reach: (text, within) or None; within False marks a missed target out of reach"""
        status = None if ok is None else 'met' if ok else '**missed**'
        if ok is False and reach and reach[1] is False:
            status = '**missed**: out of reach'
        targets.append((who, what, measured, status, reach[0] if reach else ''))

    def le(x, lim):
        return None if x is None else x <= lim

    def ge(x, lim):
        return None if x is None else x >= lim

    def floor_reach(key, ref, lim):
        """the floor's CPU per call (two processes, pipes, serde_json: no protocol) against a limit that
        is a ratio to `ref`, or (ref None) a number of us"""
        f = M(FLOOR, key)
        if f is None:
            return None
        if ref is None:
            return f'the floor takes {fnum(f, 1)} us', f <= lim
        r = P(FLOOR, ref, key)
        return f'the floor takes {fnum(f, 2)} us: {fratio(r)}', le(r, lim)

    def s3_reach(row, scen):
        """S3 is bound by the server: the most calls/s this client's requests allow, against the raw
        client's calls/s in the same loop (benches/layers/server_cpu.py). Unpinned the server has a CPU
        of its own; pinned it shares one with the client, which costs at least what the floor's does."""
        srv, srv_raw = M(row, f'{scen}.server_us_per_call'), M(RAW, f'{scen}.server_us_per_call')
        raw_cps, busy = M(RAW, f'{scen}.calls_per_s'), M(row, f'{scen}.busy')
        if not srv or not raw_cps:
            return None
        if scen == 'srv3':
            best, beside = 1e6 / srv, f'busy {fnum(busy, 2)} of a CPU'
        else:
            cheapest = M(FLOOR, 's3p.cpu_us_per_call') or 0
            best, beside = 1e6 / (srv + cheapest), f'+ the floor client {fnum(cheapest, 2)} us'
        text = (f'the server {fnum(srv, 2)} us per call (under the raw client {fnum(srv_raw, 2)}), {beside}: at most '
                f'{fnum(best)} calls/s, {fratio(best / raw_cps)} the raw client\'s in the same loop')
        return text, best >= raw_cps

    ipc = cg_per_call.get('mcplug-c')
    target('C', '<= 20,000 instructions per call (callgrind, S2)', fnum(ipc, 0) if ipc else '-', le(ipc, 20000))
    for row in (MC, MC_L):
        era = f' [{ERA[row]}]'
        for key, label in (('s2p', '1 CPU'), ('s2', 'unpinned')):
            r = P(row, RAW, f'{key}.cpu_us_per_call')
            target('C', f'S2 client CPU per call <= 1.5x the raw client ({label}){era}',
                   f'{fnum(M(row, f"{key}.cpu_us_per_call"), 2)} vs {fnum(M(RAW, f"{key}.cpu_us_per_call"), 2)} us: {fratio(r)}',
                   le(r, 1.5), floor_reach(f'{key}.cpu_us_per_call', RAW, 1.5))
        for key, label in (('s2p', '1 CPU'), ('s2', 'unpinned')):
            r = P(row, RM_C, f'{key}.cpu_us_per_call')
            target('C', f'S2 client CPU per call <= 0.5x rmcp current_thread ({label}){era}',
                   f'{fnum(M(row, f"{key}.cpu_us_per_call"), 2)} vs {fnum(M(RM_C, f"{key}.cpu_us_per_call"), 2)} us: {fratio(r)}',
                   le(r, 0.5), floor_reach(f'{key}.cpu_us_per_call', RM_C, 0.5))
        for key, label, srv in (('s3', 'unpinned', 'srv3'), ('s3p', '1 CPU', 'srv3p')):
            r = P(row, RAW, f'{key}.calls_per_s')
            target('C', f'S3 calls/s >= the raw client ({label}){era}',
                   f'{fnum(M(row, f"{key}.calls_per_s"))} vs {fnum(M(RAW, f"{key}.calls_per_s"))}: {fratio(r)}', ge(r, 1.0),
                   s3_reach(row, srv))
        r = P(row, FLOOR, 's4.mib_per_s')
        target('C', f'S4 MiB/s >= 0.9x the floor{era}', f'{fnum(M(row, "s4.mib_per_s"))} vs {fnum(M(FLOOR, "s4.mib_per_s"))}: {fratio(r)}', ge(r, 0.9))
        if s1_rounds:
            # judged in rotated order (benches/layers/s1_loop.py); run_all.sh's order starts
            # mcplug's rows right after the Python SDK's, whose exit leaves the caches cold
            r = P(row, RAW, 's1x.ttl_ms')
            target('C', f'S1 cold start <= 1.3x the raw client (rotated order, {s1_rounds} rounds){era}',
                   f'{fnum(M(row, "s1x.ttl_ms"), 2)} vs {fnum(M(RAW, "s1x.ttl_ms"), 2)} ms: {fratio(r)}', le(r, 1.3))
        r = P(row, RAW, 's1.ttl_ms')
        target('C', f'S1 cold start <= 1.3x the raw client (run_all.sh order, after the Python SDK){era}',
               f'{fnum(M(row, "s1.ttl_ms"), 2)} vs {fnum(M(RAW, "s1.ttl_ms"), 2)} ms: {fratio(r)}',
               None if s1_rounds else le(r, 1.3))
    target('C', 'the library adds <= 8 MiB to a C host\'s peak RSS',
           f'{fnum(rss_added, 1)} MiB ({fnum(hwm_with, 0)} KiB with, {fnum(hwm_without, 0)} KiB without)', le(rss_added, 8.0))
    for who, row, lim, sdk in (('Python', MPY, 15, PY), ('Node', MNODE, 25, TS), ('Node', MNODE_L, 25, TS)):
        era = f' [{ERA[row]}]'
        for key, label in (('s2p', '1 CPU'), ('s2', 'unpinned')):
            v = M(row, f'{key}.cpu_us_per_call')
            target(who, f'S2 client CPU <= {lim} us per call ({label}){era}', f'{fnum(v, 1)} us', le(v, lim),
                   floor_reach(f'{key}.cpu_us_per_call', None, lim))
        bare = START[who]
        if s1y_rounds:
            # judged in rotated order, beside the language's bare start-up (benches/layers/start_floor.*)
            r = P(row, sdk, 's1y.ttl_ms')
            b = P(bare, sdk, 's1y.ttl_ms')
            reach = None if b is None else (f'{who} alone starts in {fnum(M(bare, "s1y.ttl_ms"), 1)} ms: {fratio(b)}', b <= 0.1)
            target(who, f'S1 cold start <= 1/10 of the {SHORT[sdk]} (rotated order, {s1y_rounds} rounds){era}',
                   f'{fnum(M(row, "s1y.ttl_ms"), 1)} vs {fnum(M(sdk, "s1y.ttl_ms"), 1)} ms: {fratio(r)}', le(r, 0.1), reach)
        r = P(row, sdk, 's1.ttl_ms')
        target(who, f'S1 cold start <= 1/10 of the {SHORT[sdk]} (run_all.sh order){era}',
               f'{fnum(M(row, "s1.ttl_ms"), 1)} vs {fnum(M(sdk, "s1.ttl_ms"), 1)} ms: {fratio(r)}',
               None if s1y_rounds else le(r, 0.1))

    if a.http:
        # issue #5: the engine's Streamable HTTP client against the TS SDK's, from C
        for scen, label in HTTP_SCENARIOS:
            r = P(MC, TS_HTTP, f'{scen}.calls_per_s')
            target('C', f'Streamable HTTP S2 calls/s >= 3x the TS SDK ({label})',
                   f'{fnum(M(MC, f"{scen}.calls_per_s"))} vs {fnum(M(TS_HTTP, f"{scen}.calls_per_s"))}: {fratio(r)}',
                   ge(r, 3.0))
            r = P(MC, TS_HTTP, f'{scen}.cpu_us_per_call')
            target('C', f'Streamable HTTP S2 client CPU per call <= 1/10 of the TS SDK\'s ({label})',
                   f'{fnum(M(MC, f"{scen}.cpu_us_per_call"), 1)} vs {fnum(M(TS_HTTP, f"{scen}.cpu_us_per_call"), 1)} us: '
                   f'{fratio3(r)}', le(r, 0.1))

    if https:
        # issue #35: a call over HTTPS costs close to a plain one, and a tenth of the TS SDK's over HTTPS
        lang = {MC: 'C', MPY: 'Python', MNODE: 'Node'}
        ts_https = f"{https['ts']}|HTTPS"
        for c in MCPLUG:
            m = https['median_us']
            r = https['https_over_plain'].get(c)
            target(lang[c], 'HTTPS S2 client CPU per call <= 1.3x its plain-HTTP call (through the same nginx, pinned)',
                   f'{fnum(m.get(f"{c}|HTTPS"), 2)} vs {fnum(m.get(f"{c}|plain HTTP"), 2)} us: {fratio(r)}', le(r, 1.3))
            r = https['over_ts'].get(c)
            target(lang[c], 'HTTPS S2 client CPU per call <= 1/10 of the TS SDK\'s over the same HTTPS (pinned)',
                   f'{fnum(m.get(f"{c}|HTTPS"), 2)} vs {fnum(m.get(ts_https), 1)} us: {fratio3(r)}',
                   le(r, 0.1))

    # ---- the document ----
    mach = machine()
    # what was measured: the commit, plus any uncommitted change to the code that ran (taken by run.sh
    # before it built anything)
    dirty = a.dirty.split()
    commit = (a.commit or '?') + (f' plus uncommitted changes to {", ".join(dirty)}' if dirty else '')
    env_keys = ['REPS', 'S1_REPS', 'N2', 'N3', 'C3', 'N4', 'SZ4', 'NH']
    env_set = ' '.join(f'{k}={os.environ[k]}' for k in env_keys if k in os.environ)
    L = []
    L.append('# mcplug benchmarks' + (' (quick smoke run: tiny N, figures mean nothing)' if a.quick else ''))
    L.append('')
    L.append(f'Generated by `benches/run.sh{" --quick" if a.quick else ""}` (started {a.started}, run_all.sh took '
             f'{a.run_all_seconds // 60} min {a.run_all_seconds % 60} s), commit {commit}. mcplug is measured '
             'beside the other MCP clients by [peer-bench](../shared/peer-bench/README.md) in one run, against one '
             'server (a minimal rmcp stdio server with an `echo` tool), clients interleaved within each repetition; '
             'compare clients by ratios within this run, by pinned (1-CPU) latency, by CPU per call and by instruction '
             'counts, not by absolute times from another day (see LESSONS: the hypervisor\'s wake-up cost changes by the hour).')
    L.append('')
    L.append('## Machine and command')
    L.append('')
    L.append(f'- Machine: {mach["nproc"]} CPUs (nproc), {mach["cpu"]}, Linux {mach["kernel"]}; /proc/loadavg '
             f'{a.load or "(not recorded)"} (other work on the machine shows here)')
    L.append(f'- Tools: {mach["rustc"]}, Node {mach["node"]}, {mach["python"]}, {mach["valgrind"]}')
    L.append(f'- Command: `benches/run.sh{" --quick" if a.quick else ""}`' + (f' with `{env_set}`' if env_set else '') +
             ', which builds `target/release/libmcplug.so` and the C clients, then runs')
    L.append(f'  `MCPB_EXTRA_CLIENT=\'mcplug (C)|target/bench/mcplug_client;;mcplug (Python)|python3 benches/clients/mcplug_client.py;;'
             f'mcplug (Node)|node benches/clients/mcplug_client.js;;mcplug (C), {LEGACY}|target/bench/mcplug_client_2025;;'
             f'mcplug (Node), {LEGACY}|node benches/clients/mcplug_client_2025.js\' '
             f'{a.peer_bench or "../shared/peer-bench"}/run_all.sh`')
    L.append(f'  (absolute paths in the real command; `mcplug_client_2025` is the C client built with '
             f'`-DMCPB_DEFAULT_OPTIONS` holding it to {LEGACY}), then S1 again in rotated order '
             f'(`benches/layers/s1_loop.py`, {s1_rounds or "no"} rounds: the C clients, the raw client, rmcp), '
             f'callgrind (S2 x {cg_n1} and x {cg_n2}), '
             '`benches/http_bench.py` (S2 over Streamable HTTP, see below) and the peak-RSS runs.')
    L.append('- Clients: `benches/clients/mcplug_client.c` (C ABI; S3 = 64 started calls in flight from one thread, '
             'completions taken in batches with `mcplug_client_next_events`), '
             '`mcplug_client.py` (Python binding, sync API; S3 = 64 threads on one `Client` — faster than '
             '`mcplug.aio` with 64 tasks, which `MCPB_PY_S3=aio` selects), `mcplug_client.js` (Node binding; S3 = '
             '64 concurrent promises). Each checks every answer (`content[0].text` equals the text sent). '
             '`MCPB_MCPLUG_OPTIONS` gives each its connect options (the 2025-11-25 rows).')
    L.append('')
    L.append('## Targets (issue #3; Streamable HTTP: issue #5)')
    L.append('')
    L.append('Ratios are medians over repetitions of mcplug / reference measured in the same repetition. '
             f'The C and Node clients run twice: as they connect by default, negotiating 2026-07-28 with this server '
             f'(every request then carries a `_meta` block — protocol version, capabilities, client info — 3.2x the '
             f'bytes of a {LEGACY} `tools/call`, which the server reads and parses), and held to {LEGACY} '
             f'(connect option `protocol_versions`), the revision the raw client and the TS SDK speak here (rmcp '
             'sends 2026-07-28 in a stateful `initialize`, without the per-request block): the same bytes on the wire as '
             'the raw client, so the ratio is the two clients\' own cost. Each target '
             'says which run it is judged on in brackets. The last column is the target\'s reach, measured in this '
             'run: what no client could beat here. For CPU per call, the floor (two processes exchanging JSON lines '
             'over pipes, no protocol); for a Node or Python cold start, the language\'s own start-up (a script that '
             'only prints the time: `benches/layers/start_floor.*`); for S3, the server, which is busy nearly all '
             'the time (`benches/layers/server_cpu.py`: its CPU per call under each client, 1x and 3x N3 calls). '
             'A target beyond its reach is marked "out of reach": no client can meet it on this machine.')
    L.append('')
    L.append('| from | target | measured | | what no client could beat here |')
    L.append('|---|---|---|---|---|')
    for who, what, measured, ok, reach in targets:
        L.append(f'| {who} | {what} | {measured} | {ok or "-"} | {reach} |')
    L.append('')
    L.append('## The peer-bench table (pinned and unpinned)')
    L.append('')
    L.append('Verbatim output of `run_all.sh`; "(Nx)" is the paired slowdown against the floor. "1-CPU" columns: '
             'client and server pinned to vCPU 0 (`taskset -c 0`).')
    L.append('')
    tl = table_text.splitlines()
    L += [l for l in tl if l.startswith('| ') or l.startswith('|-')]
    L.append('')
    L.append('```')
    L += [l for l in tl if l.startswith('# ')]
    L.append('```')
    L.append('')
    if a.http:
        L += http_section(values, per_rep, http_notes, http_ns, cg_per_call, a.http_stderr_log)
    if https_lines:
        L += https_lines
    if a.bearer and os.path.exists(a.bearer):
        L += bearer_section(a.bearer)
    L.append('## mcplug against the floor and each peer')
    L.append('')
    L.append('mcplug\'s value divided by the reference\'s (median of per-repetition ratios). Where lower is better '
             '(times, CPU, memory) below 1 means mcplug is better; where higher is better (calls/s, MiB/s) above 1 does.')
    for c in MCPLUG_STDIO:
        refs = [FLOOR, RAW, RM_C, RM_M, TS, PY] + ([MC] if c != MC else []) + ([MC_L] if c == MNODE_L else [])
        L.append('')
        L.append(f'### {c}')
        L.append('')
        L.append('| metric | better | ' + c + ' | ' + ' | '.join(f'/ {SHORT[r]}' for r in refs) + ' |')
        L.append('|---|---|---:|' + '---:|' * len(refs))
        for key, label, lower in METRICS:
            v = M(c, key)
            if key.endswith('hwm_kib') and v is not None:
                vs = f'{v / 1024:.1f} MiB'
            else:
                vs = fnum(v, 1)
            L.append(f'| {label} | {"lower" if lower else "higher"} | {vs} | ' +
                     ' | '.join(fratio(P(c, r, key)) for r in refs) + ' |')
    L.append('')
    L.append('## Instructions per call (callgrind)')
    L.append('')
    L.append(f'`valgrind --tool=callgrind` of the client process only (the server is not traced), S2 with {cg_n1} '
             f'and with {cg_n2} calls; (Ir of the {cg_n2}-call run - Ir of the {cg_n1}-call run) / {cg_n2 - cg_n1} '
             'cancels start-up and teardown. Unlike time, it repeats from run to run. Every thread of the client '
             'counts (the library\'s runtime threads too). The C client\'s own work (snprintf of the request, '
             'the JSON check of the answer, the latency sort) is in its figure, as the raw client\'s serde_json is '
             'in its own.')
    L.append('')
    L.append(f'| client | Ir, {cg_n1} calls | Ir, {cg_n2} calls | Ir per call |')
    L.append('|---|---:|---:|---:|')
    L += cg_rows
    if cg_per_call.get('mcplug-c') and cg_per_call.get('raw') and cg_per_call.get('rmcp'):
        L.append('')
        L.append(f'mcplug (C) / raw client: {cg_per_call["mcplug-c"] / cg_per_call["raw"]:.2f}x; '
                 f'mcplug (C) / rmcp: {cg_per_call["mcplug-c"] / cg_per_call["rmcp"]:.2f}x.')
    L.append('')
    L.append('### Where the instructions go, per call')
    L.append('')
    L.append(f'Self cost per function, the {cg_n2}-call profile minus the {cg_n1}-call one, divided by {cg_n2 - cg_n1} '
             '(`callgrind_annotate --inclusive=no`); inlined code counts in the function it was inlined into.')
    for b in cg_breakdowns:
        L.append('')
        L.append(b)
    L.append('')
    L.append('## Peak RSS of a C host')
    L.append('')
    L.append(f'`target/bench/mcplug_client SERVER rss {with_lib[0]["n"] if with_lib else "?"}` (connect, tools/list, '
             '200 warm-up calls and the S2 loop; VmHWM at the end) against `rss_baseline` (the same C host without '
             'the library: libc and the same latency array), medians of 3:')
    L.append('')
    L.append(f'- with mcplug: {fnum(hwm_with, 0)} KiB (VmHWM at `main()` before the first library call: {fnum(hwm_start, 0)} KiB, '
             'the library loaded but unused)')
    L.append(f'- without: {fnum(hwm_without, 0)} KiB')
    L.append(f'- **added by the library: {fnum(rss_added, 2)} MiB** (target: at most 8 MiB). For comparison, S2 VmHWM in '
             f'the table: raw Rust client {fnum((M(RAW, "s2.hwm_kib") or 0) / 1024, 1)} MiB, rmcp '
             f'{fnum((M(RM_C, "s2.hwm_kib") or 0) / 1024, 1)} MiB, mcplug (C) {fnum((M(MC, "s2.hwm_kib") or 0) / 1024, 1)} MiB.')
    L.append('')
    # the hand-written analysis survives regeneration
    analysis = None
    if os.path.exists(a.out):
        old = open(a.out).read()
        if BEGIN in old and END in old:
            analysis = old[old.index(BEGIN):old.index(END) + len(END)]
    L.append('## Where the time goes (the targets missed)')
    L.append('')
    L.append(analysis or f'{BEGIN}\n(not written yet)\n{END}')
    L.append('')
    if failures:
        L.append('## Failures')
        L.append('')
        L += [f'- {f}' for f in failures]
        L.append('')
    open(a.out, 'w').write('\n'.join(L))
    print(f'wrote {a.out}', file=sys.stderr)

    print('\n'.join(f'{who:6s} {ok or "-":12s} {what}: {measured}' + (f' ({reach})' if reach else '')
                    for who, what, measured, ok, reach in targets), file=sys.stderr)
    if failures:
        print('\nFAILED: an mcplug client did not complete every scenario:', file=sys.stderr)
        for f in failures:
            print(f'  {f}', file=sys.stderr)
        if a.stderr_log:
            print(f'  client stderr: {a.stderr_log}', file=sys.stderr)
        sys.exit(1)


if __name__ == '__main__':
    main()
