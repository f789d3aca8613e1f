"""One connection's shared state, used by both the sync and the asyncio client: the native handle
behind a gate, the blocking calls, the event pump thread, and the routing of events to handlers.

The pump pulls events with ``mcplug_client_next_event`` (the library never calls into Python), so
handlers run on a thread we own. The objects here never reference the public ``Client`` wrapper,
so the wrapper can be garbage-collected and its finalizer can close us.
"""
from __future__ import annotations

import collections
import itertools
import math
import os
import threading
import time
from collections.abc import Mapping
from ctypes import byref, c_char_p, c_void_p

from . import _codec, _ffi
from ._errors import ClosedError, InvalidArgumentError, McpError, error_from_json

TYPE_CHECKING = False  # not typing's: see _codec
if TYPE_CHECKING:
    from typing import Any, Callable, Deque, Dict, List, Optional, Set, Tuple, Union

    #: A handler gets the request's or notification's ``params`` ("*" gets the whole event).
    Handler = Callable[[Any], Any]
    #: A progress callback (called with each notifications/progress params), or True for events only.
    Progress = Union[Handler, bool, None]
    #: Called once a handler finished: (result, exception).
    Done = Callable[[Any, Optional[BaseException]], None]


def _log() -> Any:
    """The "mcplug" logger; logging is imported on the first message, not by ``import mcplug``."""
    import logging

    return logging.getLogger("mcplug")


EVENT_QUEUE_LIMIT = 10_000
PUMP_WAIT_MS = 250
#: While a call waits for progress, the pump polls faster so the call's last progress events are
#: delivered promptly before the call returns.
PUMP_WAIT_PROGRESS_MS = 20
#: How long a finished call with a progress callback waits for its progress events to be routed.
PROGRESS_FLUSH_S = 2.0
PUMP_JOIN_S = 5.0

METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603

#: The capability a server request needs, and what we declare when a handler for it is given.
CAPABILITY_OF = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}
_DECLARED: Dict[str, Any] = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}

_tag_counter = itertools.count(1)

# Bound once: a module global is one lookup, ``_ffi.lib.name`` is three.
_OK = _ffi.OK
_encode_chunks = _codec.encode_chunks
_loads = _codec.loads
_scan = _codec.scan
_string_free = _ffi.string_free
_call_tool_fast = _ffi.call_tool_fast
_string_free_fast = _ffi.string_free_fast
_list_tools = _ffi.lib.mcplug_client_list_tools
_call_tool = _ffi.lib.mcplug_client_call_tool
_request = _ffi.lib.mcplug_client_request
_notify = _ffi.lib.mcplug_client_notify
_respond = _ffi.lib.mcplug_client_respond


def new_tag() -> str:
    """A tag unique in this process (the library's cancel registry is process-wide)."""
    return f"mcplug-py-{os.getpid()}-{next(_tag_counter)}"


def encode(text: str, what: str) -> bytes:
    if not isinstance(text, str):
        raise InvalidArgumentError(f"`{what}` must be a str (got {type(text).__name__})")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(f"`{what}` cannot be encoded as UTF-8: {e}") from None


def dumps(value: Any, what: str) -> bytes:
    """JSON for the library as UTF-8; refuses up front what JSON cannot carry (NaN, sets,
    objects) and strings that are not Unicode (lone surrogates, which most servers choke on:
    the strict UTF-8 encode is the check, in the same pass that makes the bytes)."""
    try:
        try:
            text = "".join(_encode_chunks(value, 0))
        except RecursionError:
            text = _codec.dumps(value)  # a cycle: json's own check says so
        return text.encode()
    except UnicodeEncodeError as e:  # before ValueError, its base class
        raise InvalidArgumentError(f"`{what}` holds a string that is not valid Unicode (a lone surrogate?): {e}") from None
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"`{what}` is not JSON-serialisable: {e}") from None


def _object_json(value: Optional[Mapping[str, Any]], what: str) -> Optional[bytes]:
    """A dict parameter (``arguments``, ``params``) as JSON, or None for None."""
    if value is None:
        return None
    if type(value) is dict:  # the usual case: no copy, no ABC isinstance
        return dumps(value, what)
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"`{what}` must be a dict (got {type(value).__name__})")
    return dumps(dict(value), what)


_ABSENT = object()


def timeout_ms(value: Optional[float], what: str) -> Any:
    """Seconds to the library's form: None -> absent (default), inf -> null (no limit), else ms."""
    if value is None:
        return _ABSENT
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentError(f"`{what}` must be a number of seconds, None or math.inf (got {value!r})")
    if math.isinf(value) and value > 0:
        return None
    if math.isnan(value) or value <= 0:
        raise InvalidArgumentError(f"`{what}` must be a positive number of seconds (got {value!r})")
    return max(1, int(math.ceil(value * 1000)))


def put_timeout(options: Dict[str, Any], key: str, value: Optional[float], what: str) -> None:
    ms = timeout_ms(value, what)
    if ms is not _ABSENT:
        options[key] = ms


def connect_options(
    handlers: Optional[Mapping[str, Handler]],
    connect_timeout: Optional[float],
    request_timeout: Optional[float],
    tool_timeout: Optional[float],
    options: Optional[Mapping[str, Any]],
) -> Tuple[Dict[str, Any], Set[str]]:
    """The connect options, and the server-request methods the host will answer by hand.

    A handler declares its capability; a capability the host declared itself (in ``options``)
    without a handler means it answers those requests with ``next_event`` + ``respond``.
    """
    if handlers is not None and not isinstance(handlers, Mapping):
        raise InvalidArgumentError("`handlers` must be a dict of method name -> callable")
    if options is not None and not isinstance(options, Mapping):
        raise InvalidArgumentError("`options` must be a dict")
    for method, fn in (handlers or {}).items():
        if not callable(fn):
            raise InvalidArgumentError(f"handler for {method!r} is not callable")
    opts: Dict[str, Any] = {}
    put_timeout(opts, "connect_timeout_ms", connect_timeout, "connect_timeout")
    put_timeout(opts, "request_timeout_ms", request_timeout, "request_timeout")
    put_timeout(opts, "tool_timeout_ms", tool_timeout, "tool_timeout")
    user = dict(options or {})
    user_caps = user.pop("capabilities", None)
    if user_caps is not None and not isinstance(user_caps, Mapping):
        raise InvalidArgumentError("option `capabilities` must be a dict")
    caps: Dict[str, Any] = {}
    for method in handlers or {}:
        cap = CAPABILITY_OF.get(method)
        if cap is not None:
            caps[cap] = _DECLARED[cap]
    caps.update(user_caps or {})
    opts.update(user)
    if caps:
        opts["capabilities"] = caps
    manual = {m for m, cap in CAPABILITY_OF.items() if user_caps and cap in user_caps and m not in (handlers or {})}
    return opts, manual


def call_options(timeout: Optional[float], tag: Optional[str], what: str = "timeout") -> Dict[str, Any]:
    opts: Dict[str, Any] = {}
    put_timeout(opts, "timeout_ms", timeout, what)
    if tag is not None:
        if not isinstance(tag, str) or not tag:
            raise InvalidArgumentError(f"`tag` must be a non-empty str (got {tag!r})")
        opts["tag"] = tag
    return opts


def connect_blocking(server: Mapping[str, Any], options: Mapping[str, Any]) -> Tuple[int, Dict[str, Any]]:
    """Starts the server and negotiates; returns the new handle and the connect result."""
    if not isinstance(server, Mapping):
        raise InvalidArgumentError(f"`server` must be a dict like {{'command': ..., 'args': [...]}} (got {type(server).__name__})")
    server_json = dumps(dict(server), "server")
    options_json = dumps(dict(options), "options") if options else None
    handle = c_void_p()
    status, text = _ffi.invoke(_ffi.lib.mcplug_client_connect, server_json, options_json, byref(handle))
    try:
        info = _ffi.checked(status, text)
    except McpError:
        raise
    except Exception:
        if handle.value:
            _ffi.lib.mcplug_client_free(handle)
        raise
    assert handle.value, "mcplug_client_connect returned OK without a handle"
    return int(handle.value), info


def rpc_error_of(exc: BaseException) -> Dict[str, Any]:
    """The JSON-RPC error a server gets when a handler raised."""
    if isinstance(exc, McpError) and exc.code is not None:
        err: Dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            err["data"] = exc.data
        return err
    return {"code": INTERNAL_ERROR, "message": str(exc) or type(exc).__name__}


class SyncRunner:
    """Runs handlers on the pump thread (the sync client)."""

    def run(self, fn: Handler, arg: Any, done: Optional[Done]) -> None:
        try:
            result = fn(arg)
        except Exception as e:  # a handler's failure never kills the pump
            if done is not None:
                done(None, e)
            else:
                _log().exception("mcplug: an event handler raised")
            return
        if done is not None:
            done(result, None)



class EventBuffer:
    """The bounded buffer behind both event sinks (threads and asyncio); callers hold its lock or
    run on its loop. Past ``limit`` the oldest event that needs no answer is dropped (a request never
    is), and the next event taken says how many were."""

    def __init__(self, limit: int = EVENT_QUEUE_LIMIT) -> None:
        self._items: Deque[Dict[str, Any]] = collections.deque()
        self._limit = limit
        self._dropped = 0
        self._closed = False

    def _append(self, event: Dict[str, Any]) -> None:
        items = self._items
        if len(items) >= self._limit:
            drop = next((i for i, e in enumerate(items) if e.get("type") != "request"), None)
            if drop is not None:
                del items[drop]
                self._dropped += 1
        items.append(event)

    def _take(self) -> Optional[Dict[str, Any]]:
        """The next event, None when there is none yet; ClosedError once closed and drained."""
        if self._dropped:
            n, self._dropped = self._dropped, 0
            return {"type": "overflow", "dropped": n}
        if self._items:
            return self._items.popleft()
        if self._closed:
            raise ClosedError("the connection is closed and every event was delivered", kind="closed")
        return None


class QueueSink(EventBuffer):
    """Events no handler took, for ``Client.next_event``."""

    def __init__(self, limit: int = EVENT_QUEUE_LIMIT) -> None:
        super().__init__(limit)
        self._cond = threading.Condition()

    def put(self, event: Dict[str, Any]) -> None:
        with self._cond:
            self._append(event)
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def get(self, timeout: Optional[float]) -> Optional[Dict[str, Any]]:
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        with self._cond:
            while True:
                event = self._take()
                if event is not None:
                    return event
                if deadline is None:
                    self._cond.wait()
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    self._cond.wait(left)


class Core:
    """The handle and everything that must outlive no more and no less than it."""

    def __init__(
        self,
        handle: int,
        info: Dict[str, Any],
        handlers: Optional[Mapping[str, Handler]],
        manual_methods: Set[str],
        runner: Any,
        sink: Any,
    ) -> None:
        self.info = info
        self._handle: Optional[int] = handle
        self._handlers: Dict[str, Handler] = dict(handlers or {})
        self._manual = manual_methods
        self._runner = runner
        self._sink = sink
        self._cond = threading.Condition()
        self._closing = False
        self._closed_done = threading.Event()
        self._routes: Dict[str, List[Handler]] = {}
        self._pull_seq = 0
        self._idle_seq = 0
        self._pump_exited = False
        #: One entry per call past the gate, maybe inside the library. list.append and list.pop
        #: are atomic, so a call counts itself in and out without taking ``_cond``.
        self._calls: List[None] = []
        self._handle_arg = c_void_p(handle)  # built once, not converted from int on every call
        self._free_pending = False
        self._pump = threading.Thread(target=self._pump_loop, name="mcplug-pump", daemon=True)

    def start(self) -> None:
        self._pump.start()

    # -- the gate: no call may start on the handle once close began ----------------------------
    #
    # A call counts itself in (append), then checks ``_closing``; close() sets ``_closing``, then
    # waits for the count to reach zero. Either the call sees ``_closing`` and backs out, or close()
    # sees the call and waits for it. On the way out a call counts itself out (pop), then looks at
    # ``_closing`` again: only while closing does it take the lock, to wake close() or to free the
    # handle if close() gave up waiting. The handle is never freed while a call is counted.

    def _invoke(self, fn: Any, *args: Any) -> Tuple[int, Optional[str]]:
        """``fn(handle, *args, out)`` through the gate; returns (status, out-string)."""
        calls = self._calls
        calls.append(None)
        out = c_char_p()
        try:
            if self._closing:
                raise ClosedError("the client is closed", kind="closed")
            status: int = fn(self._handle_arg, *args, out)
        finally:
            # Out of the gate first: a KeyboardInterrupt between two of these lines may leak a
            # string, but never a count that would make close() wait for a call that is gone.
            calls.pop()
            if self._closing:
                self._left_while_closing()
            raw = out.value  # copies the owned string, which is freed right here, once
            if raw is not None:
                _string_free(out)
        return status, None if raw is None else raw.decode("utf-8")

    def _left_while_closing(self) -> None:
        with self._cond:
            self._cond.notify_all()  # close() may be waiting for the last call
        if self._free_pending:
            self._free_if_unused()  # close() gave up waiting for us: the last one out frees

    # -- blocking calls --------------------------------------------------------------------------

    def _call(self, fn: Any, args: Tuple[Any, ...], options: Optional[Dict[str, Any]], progress: Progress) -> Any:
        if progress is None or progress is False:
            status, text = self._invoke(fn, *args, dumps(options, "options") if options else None)
            if status == _OK:
                return _loads(text) if text else None
            raise error_from_json(status, text)
        if options is None:
            options = {}
        if progress is True:
            # Progress events go to handlers / next_event, carrying the call's tag.
            options["progress"] = True
            options.setdefault("tag", new_tag())
            progress = None
        else:  # None and False took the early return above
            if not callable(progress):
                raise InvalidArgumentError("`progress` must be a callable, True, or None")
            options["progress"] = True
            tag = options.setdefault("tag", new_tag())
            with self._cond:
                self._routes.setdefault(tag, []).append(progress)
        try:
            status, text = self._invoke(fn, *args, dumps(options, "options"))
            if progress is not None:
                self._flush_progress()
        finally:
            if progress is not None:
                with self._cond:
                    routes = self._routes.get(options["tag"], [])
                    if progress in routes:
                        routes.remove(progress)
                    if not routes:
                        self._routes.pop(options["tag"], None)
        return _ffi.checked(status, text)

    def list_tools(self, options: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
        result = self._call(_list_tools, (), options, None)
        return list(result.get("tools", []))

    def call_tool(self, name: str, arguments: Optional[Mapping[str, Any]], options: Optional[Dict[str, Any]], progress: Progress) -> Dict[str, Any]:
        name_b = name.encode() if type(name) is str and name.isascii() else encode(name, "name")
        args_b: Optional[bytes]
        if type(arguments) is dict:
            try:
                args_b = "".join(_encode_chunks(arguments, 0)).encode()
            except Exception:
                args_b = dumps(arguments, "arguments")  # again, for its error (or a cycle's)
        else:
            args_b = _object_json(arguments, "arguments")
        if options or progress is not None:
            result: Dict[str, Any] = self._call(_call_tool, (name_b, args_b), options, progress)
            return result
        # The common call (no options), with dumps, _invoke, _call and loads written out: every
        # Python frame costs ~0.1 us here, and this is the path a host runs thousands of times a
        # second.
        calls = self._calls
        calls.append(None)
        out = c_char_p()
        try:
            if self._closing:
                raise ClosedError("the client is closed", kind="closed")
            status: int = _call_tool_fast(self._handle_arg, name_b, args_b, None, byref(out))
        finally:
            calls.pop()
            if self._closing:
                self._left_while_closing()
            raw = out.value
            if raw is not None:
                _string_free_fast(out)
        text = None if raw is None else raw.decode()
        if status == _OK:
            if not text:
                return None  # type: ignore[return-value]
            try:
                value, end = _scan(text, 0)
            except Exception:
                return _loads(text)  # type: ignore[no-any-return]  # json's own error
            return value if end == len(text) else _loads(text)  # type: ignore[no-any-return]
        raise error_from_json(status, text)

    def request(self, method: str, params: Optional[Mapping[str, Any]], options: Optional[Dict[str, Any]], progress: Progress) -> Dict[str, Any]:
        method_b = encode(method, "method")
        result: Dict[str, Any] = self._call(_request, (method_b, _object_json(params, "params")), options, progress)
        return result

    def notify(self, method: str, params: Optional[Mapping[str, Any]]) -> None:
        method_b = encode(method, "method")
        status, text = self._invoke(_notify, method_b, _object_json(params, "params"))
        _ffi.checked(status, text)

    def respond(self, event_id: str, result: Any = None, error: Any = None) -> None:
        if not isinstance(event_id, str):
            raise InvalidArgumentError(f"`event_id` must be the str id of a request event (got {event_id!r})")
        answer: Dict[str, Any] = {"id": event_id}
        if error is not None:
            if isinstance(error, BaseException):
                error = rpc_error_of(error)
            answer["error"] = error
        else:
            answer["result"] = {} if result is None else result
        payload = dumps(answer, "response")
        status, text = self._invoke(_respond, payload)
        _ffi.checked(status, text)

    def _respond_quietly(self, event_id: str, result: Any, error: Any) -> None:
        """Answers a request from a handler's outcome; failures are logged, never raised."""
        try:
            try:
                self.respond(event_id, result, error)
            except InvalidArgumentError as e:
                if error is None and "JSON" in e.message:
                    self.respond(event_id, None, {"code": INTERNAL_ERROR, "message": f"the handler's result is not JSON: {e.message}"})
                else:
                    raise
        except ClosedError:
            pass
        except McpError as e:
            _log().warning("mcplug: could not answer server request %s: %s", event_id, e)

    # -- the event pump ----------------------------------------------------------------------------

    def _flush_progress(self) -> None:
        """Waits until every event queued before the call returned has been routed, so that
        progress callbacks never run after the call they belong to returned."""
        if threading.current_thread() is self._pump:
            return  # a handler calling back into the client: the pump is us
        deadline = time.monotonic() + PROGRESS_FLUSH_S
        with self._cond:
            mark = self._pull_seq  # a pull started after this that finds the queue empty proves it
            while self._idle_seq <= mark and not self._pump_exited:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)

    def _pump_loop(self) -> None:
        failures = 0
        try:
            while True:
                with self._cond:
                    if self._handle is None:
                        break  # freed by close() from a handler on this thread
                    handle = self._handle
                    self._pull_seq += 1
                    seq = self._pull_seq
                    wait = PUMP_WAIT_PROGRESS_MS if self._routes else PUMP_WAIT_MS
                status, text = _ffi.invoke(_ffi.lib.mcplug_client_next_event, handle, wait)
                if status == _ffi.OK:
                    failures = 0
                    try:
                        event = _codec.loads(text or "null")
                    except ValueError:
                        _log().error("mcplug: an event was not JSON: %r", text)
                        continue
                    if isinstance(event, dict):
                        self._dispatch(event)
                elif status == _ffi.TIMEOUT:
                    with self._cond:
                        self._idle_seq = seq
                        self._cond.notify_all()
                elif status == _ffi.CLOSED:
                    break
                else:
                    failures += 1
                    _log().error("mcplug: next_event failed (status %d): %s", status, text)
                    if failures >= 20:
                        break
                    time.sleep(0.05)
        finally:
            with self._cond:
                self._pump_exited = True
                self._cond.notify_all()
            self._sink.close()
            self._free_if_unused()

    def _dispatch(self, event: Dict[str, Any]) -> None:
        try:
            kind = event.get("type")
            if kind == "request":
                self._on_request(event)
                return
            if kind == "notification":
                method = event.get("method")
                params = event.get("params", {})
                tag = event.get("tag")
                if method == "notifications/progress" and tag is not None:
                    with self._cond:
                        callbacks = list(self._routes.get(tag, ()))
                    if callbacks:
                        for cb in callbacks:
                            self._runner.run(cb, params, None)
                        return
                handler = self._handlers.get(method) if isinstance(method, str) else None
                if handler is not None:
                    self._runner.run(handler, params, None)
                    return
            star = self._handlers.get("*")
            if star is not None:
                self._runner.run(star, event, None)
                return
            self._sink.put(event)
        except Exception:
            _log().exception("mcplug: dispatching an event failed")

    def _on_request(self, event: Dict[str, Any]) -> None:
        method = event.get("method")
        event_id = event.get("id")
        handler = self._handlers.get(method) if isinstance(method, str) else None
        if not isinstance(event_id, str):
            _log().error("mcplug: a request event without an id: %r", event)
            return
        if handler is None:
            if method in self._manual:
                self._sink.put(event)  # the host declared it and answers with respond()
            else:
                self._respond_quietly(event_id, None, {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method} (no handler in this client)"})
            return

        def done(result: Any, exc: Optional[BaseException]) -> None:
            if exc is not None:
                self._respond_quietly(event_id, None, rpc_error_of(exc))
            else:
                self._respond_quietly(event_id, result, None)

        self._runner.run(handler, event.get("params", {}), done)

    # -- closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the connection (the library fails blocked calls with CLOSED and the pump drains
        the last events, then sees CLOSED), joins the pump, and frees the handle once no call is
        inside the library any more. From a handler on the pump thread it does not join itself."""
        on_pump = threading.current_thread() is self._pump
        with self._cond:
            first = not self._closing
            self._closing = True
            handle = self._handle
        if not first:
            if not on_pump:
                self._closed_done.wait(PUMP_JOIN_S * 2)
            return
        try:
            if handle is not None:
                status, text = _ffi.invoke(_ffi.lib.mcplug_client_close, c_void_p(handle))
                if status != _ffi.OK:
                    _log().warning("mcplug: mcplug_client_close failed (status %d): %s", status, text)
            if not on_pump and self._pump.is_alive():
                self._pump.join(PUMP_JOIN_S)
            deadline = time.monotonic() + PUMP_JOIN_S
            with self._cond:
                while self._calls and time.monotonic() < deadline:
                    self._cond.wait(max(0.0, deadline - time.monotonic()))
                self._free_pending = True
            self._free_if_unused(pump_is_caller=on_pump)
        finally:
            self._sink.close()
            self._closed_done.set()

    def _free_if_unused(self, pump_is_caller: bool = False) -> None:
        """Frees the handle once close() asked for it and nothing can touch it any more: no call
        past the gate and no pump pulling. Whoever is last — close(), the last call to return,
        or the pump exiting after a slow handler — frees it, so it is freed exactly once."""
        with self._cond:
            pump_idle = self._pump_exited or pump_is_caller or self._pump.ident is None
            if not self._free_pending or self._calls or not pump_idle or self._handle is None:
                return
            handle = self._handle
            self._handle = None
            self._free_pending = False
            self._cond.notify_all()
        _ffi.lib.mcplug_client_free(c_void_p(handle))
