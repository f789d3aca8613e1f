"""The floor of a Python client's S1: the interpreter's own start-up, nothing else. Prints {"ttl_ms"}
(ms since MCPB_T0, the launcher's clock, as peer-bench's clients do) as the script's first act: no
module imported but the interpreter's own, no server spawned. benches/run.sh runs it beside the
Python SDK's client and mcplug's Python client in rotated order, with the same interpreter as
mcplug's client.

    MCPB_T0=$(date +%s%N) python benches/layers/start_floor.py [ignored arguments]
"""
import os
import time

print('{"client":"python-start-up","scenario":"s1","ttl_ms":%.3f}' % ((time.time_ns() - int(os.environ.get("MCPB_T0", "0"))) / 1e6))
