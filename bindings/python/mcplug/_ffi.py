"""The ctypes declarations of libmcplug and the one place that turns its out-strings into Python.

Every returned string is owned by the caller: we read it with ``string_at`` and hand it back to
``mcplug_string_free`` exactly once. No restype is ``c_char_p`` for an owned string, because ctypes
would copy it into ``bytes`` and drop the pointer, leaking it.
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
from ctypes import POINTER, byref, c_char_p, c_int, c_int32, c_uint32, c_void_p
from pathlib import Path
from typing import Any, List, Optional, Tuple

from ._errors import error_from_json

#: The ABI this binding was written for; a library reporting another number is refused.
ABI_VERSION = 1

OK = 0
INVALID_ARGUMENT = 1
TIMEOUT = 2
CANCELLED = 3
CLOSED = 4
NOT_FOUND = 12

if sys.platform == "darwin":
    _LIB_NAME = "libmcplug.dylib"
elif sys.platform == "win32":
    _LIB_NAME = "mcplug.dll"
else:
    _LIB_NAME = "libmcplug.so"


def _candidates() -> List[Path]:
    """Where the library may be, in the order the API contract gives."""
    env = os.environ.get("MCPLUG_LIBRARY")
    if env:
        return [Path(env)]
    here = Path(__file__).resolve().parent
    checkout = here.parent.parent.parent  # bindings/python/mcplug -> the repository root
    return [
        here / _LIB_NAME,
        checkout / "target" / "release" / _LIB_NAME,
        checkout / "target" / "debug" / _LIB_NAME,
    ]


def _load() -> Tuple[ctypes.CDLL, Path]:
    candidates = _candidates()
    if os.environ.get("MCPLUG_LIBRARY"):
        path = candidates[0]
        try:
            return ctypes.CDLL(str(path)), path
        except OSError as e:
            raise ImportError(f"mcplug: cannot load the library named by MCPLUG_LIBRARY ({path}): {e}") from e
    for path in candidates:
        if path.is_file():
            try:
                return ctypes.CDLL(str(path)), path
            except OSError as e:
                raise ImportError(f"mcplug: cannot load {path}: {e}") from e
    tried = ", ".join(str(p) for p in candidates)
    raise ImportError(
        f"mcplug: {_LIB_NAME} not found (tried {tried}). Build it with `cargo build --release` "
        "in the mcplug checkout, or set MCPLUG_LIBRARY to its path."
    )


lib, LIBRARY_PATH = _load()

_out = POINTER(c_void_p)
_handle_out = POINTER(c_void_p)


def _declare(name: str, restype: Any, argtypes: List[Any]) -> None:
    try:
        fn = getattr(lib, name)
    except AttributeError:
        raise ImportError(
            f"mcplug: the library {LIBRARY_PATH} has no function {name}: it is older than this "
            "Python binding; rebuild it (`cargo build --release`)"
        ) from None
    fn.restype = restype
    fn.argtypes = argtypes


_declare("mcplug_version", c_char_p, [])  # static string: copying it into bytes is right
_declare("mcplug_abi_version", c_uint32, [])
_declare("mcplug_string_free", None, [c_void_p])
_declare("mcplug_cancel", c_int, [c_char_p])
_declare("mcplug_client_connect", c_int, [c_char_p, c_char_p, _handle_out, _out])
_declare("mcplug_client_list_tools", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_client_call_tool", c_int, [c_void_p, c_char_p, c_char_p, c_char_p, _out])
_declare("mcplug_client_request", c_int, [c_void_p, c_char_p, c_char_p, c_char_p, _out])
_declare("mcplug_client_notify", c_int, [c_void_p, c_char_p, c_char_p, _out])
_declare("mcplug_client_next_event", c_int, [c_void_p, c_int32, _out])
_declare("mcplug_client_respond", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_client_close", c_int, [c_void_p, _out])
_declare("mcplug_client_free", None, [c_void_p])

_loaded_abi = int(lib.mcplug_abi_version())
if _loaded_abi != ABI_VERSION:
    raise ImportError(
        f"mcplug: the library {LIBRARY_PATH} has ABI version {_loaded_abi}, but this Python binding "
        f"was written for ABI version {ABI_VERSION}; use a matching build of libmcplug"
    )


def take_string(ptr: c_void_p) -> Optional[str]:
    """Copies an owned out-string into Python and frees it (once)."""
    if not ptr.value:
        return None
    try:
        return ctypes.string_at(ptr.value).decode("utf-8")
    finally:
        lib.mcplug_string_free(ptr)
        ptr.value = None


def invoke(fn: Any, *args: Any) -> Tuple[int, Optional[str]]:
    """Calls a fallible function, appending the out-parameter; returns (status, text)."""
    out = c_void_p()
    try:
        status = int(fn(*args, byref(out)))
    finally:
        text = take_string(out)
    return status, text


def checked(status: int, text: Optional[str]) -> Any:
    """The decoded result on OK; otherwise raises the McpError subclass of the error's kind."""
    if status == OK:
        return json.loads(text) if text else None
    raise error_from_json(status, text)


def version() -> str:
    raw: bytes = lib.mcplug_version()
    return raw.decode("utf-8")


def abi_version() -> int:
    return int(lib.mcplug_abi_version())


def cancel(tag: str) -> bool:
    """True if a call carrying `tag` was in flight (it now returns CANCELLED), False if none was."""
    from ._errors import InvalidArgumentError

    try:
        raw = tag.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(f"`tag` is not valid UTF-8: {e}") from None
    status = int(lib.mcplug_cancel(raw))
    if status == OK:
        return True
    if status == NOT_FOUND:
        return False
    raise error_from_json(status, None)
