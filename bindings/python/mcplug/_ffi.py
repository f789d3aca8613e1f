"""The ctypes declarations of libmcplug and the place that turns its out-strings into Python
(``Core.call_tool``'s common path does the same inline, with the ``*_fast`` pointers below).

Every returned string is owned by the caller: the out-parameter is a ``c_char_p`` whose ``.value``
copies it into ``bytes``, and the pointer it still holds goes back to ``mcplug_string_free``
exactly once. No restype is ``c_char_p`` for an owned string, because ctypes would copy it into
``bytes`` and drop the pointer, leaking it.

Imports are few and cheap on purpose (no pathlib, typing, logging or json): ``import mcplug`` is
part of every host's cold start.
"""
from __future__ import annotations

import ctypes
import os
import sys
from ctypes import POINTER, c_char_p, c_int, c_int32, c_uint32, c_uint64, c_void_p

from . import _codec
from . import _errors
from ._errors import error_from_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

#: The ABI this binding was written for; a library reporting another number is refused.
ABI_VERSION = 1

OK = 0
INVALID_ARGUMENT = 1
TIMEOUT = 2
CANCELLED = 3
CLOSED = 4
NOT_FOUND = 12

#: The library is built for Linux only (it uses pidfds, PR_SET_PDEATHSIG and /proc/self/fd); on
#: another system only a library named by MCPLUG_LIBRARY (a port of one's own) is tried.
_LIB_NAME = "libmcplug.so"


def _candidates() -> List[str]:
    """Where the library may be, in the order the API contract gives."""
    env = os.environ.get("MCPLUG_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.realpath(__file__))
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(here)))  # bindings/python/mcplug -> the repository root
    return [
        os.path.join(here, _LIB_NAME),
        os.path.join(checkout, "target", "release", _LIB_NAME),
        os.path.join(checkout, "target", "debug", _LIB_NAME),
    ]


def _load() -> Tuple[ctypes.CDLL, str]:
    candidates = _candidates()
    if os.environ.get("MCPLUG_LIBRARY"):
        path = candidates[0]
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            raise ImportError(f"mcplug: cannot load the library named by MCPLUG_LIBRARY ({path}): {e}") from e
    for path in candidates:
        if os.path.isfile(path):
            try:
                return ctypes.CDLL(path), path
            except OSError as e:
                raise ImportError(f"mcplug: cannot load {path}: {e}") from e
    if not sys.platform.startswith("linux"):
        raise ImportError(
            f"mcplug: libmcplug supports Linux only (this is {sys.platform}); set MCPLUG_LIBRARY to a "
            "library built for this system if you have one"
        )
    tried = ", ".join(str(p) for p in candidates)
    raise ImportError(
        f"mcplug: {_LIB_NAME} not found (tried {tried}). Build it with `cargo build --release` "
        "in the mcplug checkout, or set MCPLUG_LIBRARY to its path."
    )


lib, LIBRARY_PATH = _load()

# Out-strings are read through a c_char_p: ``.value`` copies the text without a call into
# ctypes.string_at (a Python function around another foreign call), and ctypes passes the c_char_p
# itself by reference where POINTER(c_char_p) is expected.
_out = POINTER(c_char_p)
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
_declare("mcplug_error_kinds", c_char_p, [])
_declare("mcplug_string_free", None, [c_void_p])
_declare("mcplug_cancel", c_int, [c_char_p])
_declare("mcplug_cancel_token_new", c_int, [POINTER(c_uint64)])
_declare("mcplug_cancel_token_cancel", c_int, [c_uint64])
_declare("mcplug_cancel_token_free", c_int, [c_uint64])
_declare("mcplug_client_connect", c_int, [c_char_p, c_char_p, _handle_out, _out])
_declare("mcplug_client_list_tools", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_client_call_tool", c_int, [c_void_p, c_char_p, c_char_p, c_char_p, _out])
_declare("mcplug_client_request", c_int, [c_void_p, c_char_p, c_char_p, c_char_p, _out])
_declare("mcplug_client_notify", c_int, [c_void_p, c_char_p, c_char_p, _out])
_declare("mcplug_client_next_event", c_int, [c_void_p, c_int32, _out])
_declare("mcplug_client_respond", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_client_set_roots", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_client_set_log_level", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_client_list_skills", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_client_get_skill", c_int, [c_void_p, c_char_p, c_char_p, _out])
_declare("mcplug_client_load_skill", c_int, [c_void_p, c_char_p, c_char_p, _out])
_declare("mcplug_client_read_skill_file", c_int, [c_void_p, c_char_p, c_char_p, c_char_p, _out])
_declare("mcplug_client_close", c_int, [c_void_p, _out])
_declare("mcplug_client_free", None, [c_void_p])
_declare("mcplug_auth_next_event", c_int, [c_int32, _out])
_declare("mcplug_auth_respond", c_int, [c_char_p, _out])
_declare("mcplug_auth_logout", c_int, [c_char_p, c_char_p, _out])
_declare("mcplug_log_capture", c_int, [c_char_p, _out])
_declare("mcplug_log_release", c_int, [_out])
_declare("mcplug_log_next_events", c_int, [c_uint32, c_int32, _out])
_declare("mcplug_config_merge", c_int, [c_char_p, _out])
_declare("mcplug_config_discover", c_int, [c_char_p, _out])
_declare("mcplug_config_add_server", c_int, [c_char_p, _out])
_declare("mcplug_config_remove_server", c_int, [c_char_p, _out])
_declare("mcplug_config_approve", c_int, [c_char_p, _out])
_declare("mcplug_config_reset_project_choices", c_int, [c_char_p, _out])
_declare("mcplug_manager_new", c_int, [c_char_p, _handle_out, _out])
_declare("mcplug_manager_connect", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_manager_wait", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_manager_status", c_int, [c_void_p, _out])
_declare("mcplug_manager_list_tools", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_manager_call_tool", c_int, [c_void_p, c_char_p, c_char_p, c_char_p, _out])
_declare("mcplug_manager_next_event", c_int, [c_void_p, c_int32, _out])
_declare("mcplug_manager_respond", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_manager_reconnect", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_manager_set_enabled", c_int, [c_void_p, c_char_p, c_int32, _out])
_declare("mcplug_manager_authenticate", c_int, [c_void_p, c_char_p, c_char_p, _out])
_declare("mcplug_manager_logout", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_manager_close", c_int, [c_void_p, _out])
_declare("mcplug_manager_free", None, [c_void_p])
_declare("mcplug_manager_search_tools", c_int, [c_void_p, c_char_p, c_char_p, _out])
_declare("mcplug_manager_list_resources", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_manager_read_resource", c_int, [c_void_p, c_char_p, c_char_p, c_char_p, _out])
_declare("mcplug_manager_list_prompts", c_int, [c_void_p, c_char_p, _out])
_declare("mcplug_manager_get_prompt", c_int, [c_void_p, c_char_p, c_char_p, c_char_p, _out])
_declare("mcplug_manager_request", c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_char_p, _out])
_declare("mcplug_manager_set_tools", c_int, [c_void_p, c_char_p, c_char_p, _out])
_declare("mcplug_manager_call_tool_start", c_int, [c_void_p, c_char_p, c_char_p, c_char_p, POINTER(c_uint64), _out])
_declare("mcplug_manager_cancel_call", c_int, [c_void_p, c_uint64, _out])
_declare("mcplug_manager_next_events", c_int, [c_void_p, c_uint32, c_int32, _out])
_declare("mcplug_manager_serve", c_int, [c_void_p, c_char_p, _handle_out, _out])
_declare("mcplug_server_close", c_int, [c_void_p, _out])
_declare("mcplug_server_free", None, [c_void_p])

#: mcplug_string_free only returns memory: called through a PyDLL (the same loaded library) it
#: keeps the GIL, instead of dropping and retaking it once per call.
_pydll = ctypes.PyDLL(LIBRARY_PATH, handle=lib._handle)
string_free = _pydll.mcplug_string_free
string_free.restype = None
string_free.argtypes = [c_void_p]

# The per-call hot path's own pointers to two of the functions above, without argtypes. With
# argtypes ctypes calls each argument's ``from_param`` (a call and an object per argument, ~0.3 us
# for call_tool's five); without them it converts the Python objects directly. Only code that
# passes exactly the C types may use these: a c_void_p handle, bytes or None for each char*,
# ``byref(c_char_p)`` for the out-string, and a c_char_p holding an out-string to free.
call_tool_fast = lib["mcplug_client_call_tool"]
call_tool_fast.restype = c_int
string_free_fast = _pydll["mcplug_string_free"]
string_free_fast.restype = None

_loaded_abi = int(lib.mcplug_abi_version())
if _loaded_abi != ABI_VERSION:
    raise ImportError(
        f"mcplug: the library {LIBRARY_PATH} has ABI version {_loaded_abi}, but this Python binding "
        f"was written for ABI version {ABI_VERSION}; use a matching build of libmcplug"
    )


def error_kinds() -> List[Dict[str, Any]]:
    """The library's one table of error kinds: ``[{"kind", "status", "meaning"}]``, in status order."""
    from ._codec import loads

    return list(loads(lib.mcplug_error_kinds().decode("utf-8")))


# The kind of a status that comes without an error object, from the library's table.
_errors.kinds_by_status(error_kinds())


def take_string(out: c_char_p) -> Optional[str]:
    """Copies an owned out-string into Python and frees it (once)."""
    raw = out.value
    if raw is None:
        return None
    string_free(out)
    out.value = None
    return raw.decode("utf-8")


def invoke(fn: Any, *args: Any) -> Tuple[int, Optional[str]]:
    """Calls a fallible function, appending the out-parameter; returns (status, text)."""
    out = c_char_p()
    try:
        status: int = fn(*args, out)
    finally:
        text = take_string(out)
    return status, text


def checked(status: int, text: Optional[str]) -> Any:
    """The decoded result on OK; otherwise raises the McpError subclass of the error's kind."""
    if status == OK:
        return _codec.loads(text) if text else None
    raise error_from_json(status, text)


def version() -> str:
    raw: bytes = lib.mcplug_version()
    return raw.decode("utf-8")


def abi_version() -> int:
    return int(lib.mcplug_abi_version())


def cancel_token_new() -> int:
    """A cancel token of the library's, for a call still to enter it (see mcplug_cancel_token_new)."""
    token = c_uint64(0)
    status = int(lib.mcplug_cancel_token_new(ctypes.byref(token)))
    if status != OK:
        raise error_from_json(status, None)
    return int(token.value)


def cancel_token_cancel(token: int) -> bool:
    """Cancels the calls naming `token`, running or still to enter; False if it is gone."""
    return int(lib.mcplug_cancel_token_cancel(token)) == OK


def cancel_token_free(token: int) -> None:
    """Forgets `token` (a call running with it keeps it)."""
    lib.mcplug_cancel_token_free(token)


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
