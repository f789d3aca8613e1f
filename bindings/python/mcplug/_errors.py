"""Exceptions: one McpError subclass per stable error kind of the C ABI."""
from __future__ import annotations

import builtins

from ._codec import loads

TYPE_CHECKING = False  # not typing's: see _codec
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Type


class McpError(Exception):
    """An error from mcplug or the server; ``kind`` is the stable snake_case kind of the C ABI."""

    kind: str = "unknown"

    def __init__(self, message: str, *, kind: Optional[str] = None, code: Optional[int] = None, data: Any = None):
        super().__init__(message)
        if kind is not None:
            self.kind = kind
        self.message = message
        self.code = code
        self.data = data

    def __str__(self) -> str:
        return self.message if self.code is None else f"{self.message} (code {self.code})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, message={self.message!r}, code={self.code!r})"


class InvalidArgumentError(McpError):
    kind = "invalid_argument"


class TimeoutError(McpError, builtins.TimeoutError):
    """A local timer ran out; also a builtins.TimeoutError so generic handlers catch it."""

    kind = "timeout"


class CancelledError(McpError):
    kind = "cancelled"


class ClosedError(McpError):
    kind = "closed"


class TransportError(McpError):
    kind = "transport"


class ProtocolError(McpError):
    kind = "protocol"


class RpcError(McpError):
    """The server answered with a JSON-RPC error: ``code``, ``message`` and ``data`` are its own."""

    kind = "rpc"


class NeedsAuthError(McpError):
    kind = "needs_auth"


class DeniedError(McpError):
    kind = "denied"


class ConfigError(McpError):
    kind = "config"


class PanicError(McpError):
    kind = "panic"


class NotFoundError(McpError):
    kind = "not_found"


class UnsupportedError(McpError):
    """The kind ``not_implemented``: a feature this version of mcplug lacks."""

    kind = "not_implemented"


class InvalidResultError(McpError):
    """The server's result breaks what it declared (structuredContent vs the tool's outputSchema);
    ``data`` has ``tool``, ``errors`` and the untouched ``result``."""

    kind = "invalid_result"


_BY_KIND: Dict[str, Type[McpError]] = {
    cls.kind: cls
    for cls in (
        InvalidArgumentError, TimeoutError, CancelledError, ClosedError, TransportError, ProtocolError,
        RpcError, NeedsAuthError, DeniedError, ConfigError, PanicError, NotFoundError, UnsupportedError,
        InvalidResultError,
    )
}

# The kind of each C status number, for the rare error that comes without an error object:
# filled from the library's table (`mcplug_error_kinds`) when it is loaded.
_BY_STATUS: Dict[int, str] = {}


def kinds_by_status(table: List[Dict[str, Any]]) -> None:
    """Takes the library's table of error kinds (see ``_ffi.error_kinds``)."""
    _BY_STATUS.clear()
    _BY_STATUS.update({int(e["status"]): str(e["kind"]) for e in table})


def make_error(kind: str, message: str, code: Optional[int] = None, data: Any = None) -> McpError:
    cls = _BY_KIND.get(kind, McpError)
    return cls(message, kind=kind, code=code, data=data)


def error_from_json(status: int, text: Optional[str]) -> McpError:
    """The exception for a non-OK status and its `{"error": {...}}` out-string."""
    fallback = _BY_STATUS.get(status, "unknown")
    try:
        obj = loads(text) if text else {}
        err = obj.get("error") or {}
    except (ValueError, AttributeError):
        err = {}
    kind = err.get("kind") or fallback
    message = err.get("message") or f"mcplug call failed with status {status} ({fallback})"
    code = err.get("code")
    return make_error(kind, message, code if isinstance(code, int) else None, err.get("data"))
