"""Where the Python binding's CPU per call goes: the same echo loop through ever more of the binding.

    PYTHONPATH=bindings/python taskset -c 0 python3 benches/layers/python_layers.py SERVER [N]

SERVER is peer-bench's mcp_server ($PEER_BENCH_WORK/rust/target/release/mcp_server). Each layer runs
twice, interleaved; CPU is the whole process (the library's threads included). Reaches into
Client._core for the raw handle: a diagnostic, not an example of the API."""
import sys
import time
from ctypes import byref, c_char_p, c_void_p

import mcplug
from mcplug import _codec, _ffi

server = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
c = mcplug.Client.connect({"command": server, "args": []})
h = c_void_p(c._core._handle)
lib = _ffi.lib


def raw_ctypes():
    """The declared prototype (argtypes convert every argument), a fixed request, no JSON."""
    for _ in range(N):
        out = c_char_p()
        lib.mcplug_client_call_tool(h, b"echo", b'{"text":"hello"}', None, out)
        lib.mcplug_string_free(out)


def raw_fast():
    """The pointers the binding's hot path uses: no argtypes, string_free keeping the GIL."""
    for _ in range(N):
        out = c_char_p()
        _ffi.call_tool_fast(h, b"echo", b'{"text":"hello"}', None, byref(out))
        _ffi.string_free_fast(out)


def plus_json():
    """raw_fast plus the JSON both ways and the answer check: the binding minus its glue."""
    for i in range(N):
        s = f"hello {i}"
        out = c_char_p()
        _ffi.call_tool_fast(h, b"echo", "".join(_codec.encode_chunks({"text": s}, 0)).encode(), None, byref(out))
        raw = out.value
        _ffi.string_free_fast(out)
        assert _codec.loads(raw.decode())["content"][0]["text"] == s


def client_call_tool():
    for i in range(N):
        s = f"hello {i}"
        assert c.call_tool("echo", {"text": s})["content"][0]["text"] == s


for layer in (raw_ctypes, raw_fast, plus_json, client_call_tool) * 2:
    c0, t0 = time.process_time(), time.perf_counter()
    layer()
    print(f"{layer.__name__:20s} CPU {(time.process_time() - c0) / N * 1e6:5.1f} us/call   "
          f"wall {(time.perf_counter() - t0) / N * 1e6:5.1f} us/call")
c.close()
