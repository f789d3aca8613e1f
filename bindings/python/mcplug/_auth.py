"""Interactive OAuth for single clients: the library's ``auth/authorize`` requests are pulled
on one daemon thread for the whole process (``mcplug_auth_next_event``: a client's first
authorization happens inside its connect, before it has a handle) and handed to the handler
of the connection they name (its ``auth_channel``, chosen here)."""

import itertools
import threading
from typing import Any, Callable, Dict, Optional

from . import _codec, _ffi

#: channel -> the ``auth/authorize`` handler of that connection
_handlers: Dict[str, Callable[[Dict[str, Any]], Any]] = {}
_lock = threading.Lock()
_pump: Optional[threading.Thread] = None
_ids = itertools.count(1)


def register(handler: Callable[[Dict[str, Any]], Any], opts: Dict[str, Any]) -> str:
    """Registers ``handler`` for a new connection: sets its options ``auth_interactive`` and
    ``auth_channel``, starts the pump if need be, and returns the channel (``unregister`` it
    when the connection is closed or its connect failed)."""
    global _pump
    channel = f"py-{threading.get_native_id()}-{next(_ids)}"
    opts["auth_interactive"] = True
    opts["auth_channel"] = channel
    with _lock:
        _handlers[channel] = handler
        if _pump is None:
            _pump = threading.Thread(target=_run, name="mcplug-auth", daemon=True)
            _pump.start()
    return channel


def unregister(channel: Optional[str]) -> None:
    if channel is not None:
        with _lock:
            _handlers.pop(channel, None)


def _answer(event_id: str, handler: Optional[Callable[[Dict[str, Any]], Any]], params: Dict[str, Any]) -> None:
    if handler is None:
        reply: Dict[str, Any] = {"id": event_id, "error": {"code": -1, "message": "no auth/authorize handler for this connection"}}
    else:
        try:
            result = handler(params)
            if result is None:
                result = {}
            if not isinstance(result, dict):
                raise TypeError(f"an auth/authorize handler returns None or {{'callback_url': ...}} (got {type(result).__name__})")
            reply = {"id": event_id, "result": result}
        except Exception as e:  # the handler declined: the connect fails with NeedsAuthError
            reply = {"id": event_id, "error": {"code": -1, "message": str(e) or type(e).__name__}}
    status, text = _ffi.invoke(_ffi.lib.mcplug_auth_respond, _codec.dumps(reply).encode())
    del status, text  # an answer that came too late (expired) is no error of the handler's


def _run() -> None:
    while True:
        status, text = _ffi.invoke(_ffi.lib.mcplug_auth_next_event, 1000)
        if status != _ffi.OK or not text:
            continue
        event = _codec.loads(text)
        if event.get("type") != "request" or event.get("method") != "auth/authorize":
            continue
        params = event.get("params") or {}
        with _lock:
            handler = _handlers.get(params.get("channel", ""))
        # Each on its own thread: a handler that waits for a user never holds up another's.
        threading.Thread(target=_answer, args=(event["id"], handler, params), daemon=True).start()


def auth_logout(server: Dict[str, Any], auth_store: Optional[str] = None) -> bool:
    """Logs out of a remote server: forgets every credential the auth store holds for it
    (tokens, registrations, the needs-auth mark). ``server`` is its entry (``{"type", "url"}``);
    ``auth_store`` the store (default: the library's default directory). Whether anything was
    stored. A record the store cannot use (corrupt, not a regular file, a symlink — the link
    itself goes), which fails every connect to the server with ``ConfigError``, is removed too."""
    options = None if auth_store is None else _codec.dumps({"auth_store": str(auth_store)}).encode()
    status, text = _ffi.invoke(_ffi.lib.mcplug_auth_logout, _codec.dumps(dict(server)).encode(), options)
    return bool(_ffi.checked(status, text)["forgotten"])
