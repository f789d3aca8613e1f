"""Where the Python binding's CPU per call goes: the same echo loop through ever more of the binding.

    PYTHONPATH=bindings/python taskset -c 0 python3 benches/layers/python_layers.py SERVER [N]

SERVER is peer-bench's mcp_server ($PEER_BENCH_WORK/rust/target/release/mcp_server). Each layer runs
twice, interleaved; CPU is the whole process (the library's threads included). Reaches into
Client._core for the raw handle: a diagnostic, not an example of the API."""
import ctypes
import json
import sys
import time
from ctypes import byref, c_void_p

import mcplug
from mcplug import _core, _ffi

server = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
c = mcplug.Client.connect({"command": server, "args": []})
h = c._core._handle
lib = _ffi.lib


def raw_ctypes():
    out = c_void_p()
    for _ in range(N):
        lib.mcplug_client_call_tool(h, b"echo", b'{"text":"hello"}', None, byref(out))
        lib.mcplug_string_free(out)


def plus_json():
    out = c_void_p()
    for i in range(N):
        s = f"hello {i}"
        lib.mcplug_client_call_tool(h, b"echo", json.dumps({"text": s}).encode(), None, byref(out))
        r = json.loads(ctypes.string_at(out.value).decode())
        lib.mcplug_string_free(out)
        assert r["content"][0]["text"] == s


def plus_invoke_checked():
    for i in range(N):
        s = f"hello {i}"
        st, text = _ffi.invoke(lib.mcplug_client_call_tool, h, b"echo", _core.dumps({"text": s}, "arguments"), None)
        assert _ffi.checked(st, text)["content"][0]["text"] == s


def client_call_tool():
    for i in range(N):
        s = f"hello {i}"
        assert c.call_tool("echo", {"text": s})["content"][0]["text"] == s


for layer in (raw_ctypes, plus_json, plus_invoke_checked, client_call_tool) * 2:
    c0, t0 = time.process_time(), time.perf_counter()
    layer()
    print(f"{layer.__name__:20s} CPU {(time.process_time() - c0) / N * 1e6:5.1f} us/call   "
          f"wall {(time.perf_counter() - t0) / N * 1e6:5.1f} us/call")
c.close()
