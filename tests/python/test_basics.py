"""The package surface: versions, the ABI check, library discovery, the exception classes and
the timeout convention."""
from __future__ import annotations

import builtins
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mcplug
from mcplug import _core, _errors
from conftest import REPO

PYTHONPATH = str(REPO / "bindings" / "python")


def run_python(code: str, **env: str) -> "subprocess.CompletedProcess[str]":
    full_env = {k: v for k, v in os.environ.items() if k != "MCPLUG_LIBRARY"}
    full_env.update(env, PYTHONPATH=PYTHONPATH)
    return subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True, timeout=30)


def test_versions() -> None:
    assert mcplug.abi_version() == mcplug.ABI_VERSION == 1
    assert mcplug.version() == mcplug.__version__
    assert Path(mcplug.library_path()).is_file()


def test_library_from_mcplug_library() -> None:
    path = mcplug.library_path()
    done = run_python("import mcplug; print(mcplug.library_path())", MCPLUG_LIBRARY=path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == path


def test_missing_library_is_a_clear_import_error() -> None:
    done = run_python("import mcplug", MCPLUG_LIBRARY="/nonexistent/libmcplug.so")
    assert done.returncode != 0
    assert "ImportError" in done.stderr and "/nonexistent/libmcplug.so" in done.stderr
    assert "MCPLUG_LIBRARY" in done.stderr


def test_abi_mismatch_is_refused() -> None:
    # Pretend the library reports ABI 99: the import must fail, naming both numbers and the path.
    code = """
import ctypes
real = ctypes.CDLL
class Lib(real):
    def __getattr__(self, name):
        if name == "mcplug_abi_version":
            fake = lambda: 99
            self.__dict__[name] = fake
            return fake
        return real.__getattr__(self, name)
ctypes.CDLL = Lib
import mcplug
"""
    done = run_python(code, MCPLUG_LIBRARY=mcplug.library_path())  # also where no library was built
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError") and "99" in last and "ABI version 1" in last and "libmcplug" in last, last


KINDS = {
    "invalid_argument": mcplug.InvalidArgumentError, "timeout": mcplug.TimeoutError,
    "cancelled": mcplug.CancelledError, "closed": mcplug.ClosedError, "transport": mcplug.TransportError,
    "protocol": mcplug.ProtocolError, "rpc": mcplug.RpcError, "needs_auth": mcplug.NeedsAuthError,
    "denied": mcplug.DeniedError, "config": mcplug.ConfigError, "panic": mcplug.PanicError,
    "not_found": mcplug.NotFoundError, "not_implemented": mcplug.UnsupportedError,
    "invalid_result": mcplug.InvalidResultError,
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_error_objects_map_to_classes(kind: str) -> None:
    text = json.dumps({"error": {"kind": kind, "message": "m", "code": -32000, "data": {"x": 1}}})
    error = _errors.error_from_json(7, text)
    assert type(error) is KINDS[kind]
    assert isinstance(error, mcplug.McpError)
    assert (error.kind, error.message, error.code, error.data) == (kind, "m", -32000, {"x": 1})


def test_error_details() -> None:
    assert issubclass(mcplug.TimeoutError, builtins.TimeoutError)
    unknown = _errors.error_from_json(99, json.dumps({"error": {"kind": "future_kind", "message": "new"}}))
    assert type(unknown) is mcplug.McpError and unknown.kind == "future_kind"
    bare = _errors.error_from_json(2, None)  # no error object: the status decides
    assert type(bare) is mcplug.TimeoutError
    assert str(_errors.make_error("rpc", "Method not found", -32601)) == "Method not found (code -32601)"


def test_timeout_convention() -> None:
    assert _core.call_options(None, None) == {}
    assert _core.call_options(math.inf, None) == {"timeout_ms": None}
    assert _core.call_options(1.5, "t") == {"timeout_ms": 1500, "tag": "t"}
    assert _core.call_options(0.0001, None) == {"timeout_ms": 1}
    for bad in (0, -1, math.nan, -math.inf, "1", True):
        with pytest.raises(mcplug.InvalidArgumentError):
            _core.call_options(bad, None)  # type: ignore[arg-type]
    with pytest.raises(mcplug.InvalidArgumentError):
        _core.call_options(None, "")


def test_handlers_declare_capabilities() -> None:
    opts, manual = _core.connect_options(
        {"sampling/createMessage": lambda p: p, "roots/list": lambda p: p, "notifications/message": print},
        connect_timeout=2, request_timeout=math.inf, tool_timeout=None, options={"max_events": 5},
    )
    # The library derives the capabilities from the methods handled (src/client/options.rs).
    assert opts == {
        "connect_timeout_ms": 2000, "request_timeout_ms": None, "max_events": 5,
        "handlers": ["notifications/message", "roots/list", "sampling/createMessage"],
    }
    assert manual == set()
    # Declared by hand without a handler: the host answers those requests itself.
    opts, manual = _core.connect_options(None, None, None, None, {"capabilities": {"elicitation": {"form": {}}}})
    assert opts == {"capabilities": {"elicitation": {"form": {}}}}
    assert manual == {"elicitation/create"}
    with pytest.raises(mcplug.InvalidArgumentError, match="not callable"):
        _core.connect_options({"roots/list": 3}, None, None, None, None)  # type: ignore[dict-item]


def test_host_options_become_library_options() -> None:
    opts, manual = _core.connect_options(
        {"elicitation/create": lambda p: p}, None, None, None, None,
        host_request_timeout=0.25, capabilities={"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}},
        roots=[{"uri": "file:///a", "name": "a"}, "file:///b", Path("/tmp/c")], log_level="notice", tasks=False,
        max_input_rounds=4, elicitation_defaults=True, validate_arguments=True,
    )
    assert opts == {
        "host_request_timeout_ms": 250,
        "roots": [{"uri": "file:///a", "name": "a"}, {"uri": "file:///b"}, {"uri": "file:///tmp/c", "name": "c"}],
        "log_level": "notice", "tasks": False, "max_input_rounds": 4, "elicitation_defaults": True,
        "validate_arguments": True, "handlers": ["elicitation/create"],
        "capabilities": {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}},
    }
    # sampling declared without a handler, and roots given without one (for set_roots(None)).
    assert manual == {"sampling/createMessage", "roots/list"}
    with pytest.raises(mcplug.InvalidArgumentError, match="given twice"):
        _core.connect_options(None, None, None, None, {"tasks": True}, tasks=False)
    with pytest.raises(mcplug.InvalidArgumentError, match="given twice"):
        _core.connect_options(None, None, None, None, {"capabilities": {}}, capabilities={"sampling": {}})
    assert _core.put_task_options({}, "handle", 90, False) == {"task": "handle", "task_ttl_ms": 90000, "validate_arguments": False}
    assert _core.put_task_options({}, True, None, None) == {"task": True}
    for bad in ({"task": "later"}, {"task": 1}, {"task_ttl": math.inf}, {"validate_arguments": "yes"}):
        args = dict({"task": None, "task_ttl": None, "validate_arguments": None}, **bad)
        with pytest.raises(mcplug.InvalidArgumentError):
            _core.put_task_options({}, args["task"], args["task_ttl"], args["validate_arguments"])


def test_a_raised_exception_as_the_server_sees_it() -> None:
    assert _core.rpc_error_of(RuntimeError("boom")) == {"code": -32603, "message": "boom"}
    assert _core.rpc_error_of(RuntimeError()) == {"code": -32603, "message": "RuntimeError"}
    assert _core.rpc_error_of(mcplug.DeniedError("no")) == {"code": -1, "message": "no"}
    assert _core.rpc_error_of(mcplug.DeniedError("no", code=-2, data=[1])) == {"code": -2, "message": "no", "data": [1]}
    assert _core.rpc_error_of(mcplug.McpError("x", code=-32000)) == {"code": -32000, "message": "x"}
    assert _core.rpc_error_of(mcplug.TimeoutError("slow")) == {"code": -32603, "message": "slow"}


def test_client_cannot_be_built_directly() -> None:
    with pytest.raises(TypeError, match="connect"):
        mcplug.Client(object())  # type: ignore[arg-type]


def test_cancel_with_no_such_tag() -> None:
    assert mcplug.cancel("py-never-used-tag") is False


def test_the_exception_classes_are_the_librarys_table_of_error_kinds() -> None:
    """One McpError subclass per kind of the library's table (mcplug_error_kinds), and the kind
    of a status without an error object taken from that table."""
    from mcplug import _errors, _ffi

    table = _ffi.error_kinds()
    assert [e["status"] for e in table] == list(range(1, len(table) + 1))
    assert sorted(_errors._BY_KIND) == sorted(e["kind"] for e in table)
    for e in table:
        cls = _errors._BY_KIND[e["kind"]]
        assert issubclass(cls, mcplug.McpError) and cls.kind == e["kind"]
        assert getattr(mcplug, cls.__name__) is cls, f"{cls.__name__} is exported"
        assert e["meaning"], e
        err = _errors.error_from_json(e["status"], None)
        assert type(err) is cls and err.kind == e["kind"]
