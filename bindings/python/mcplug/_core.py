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
from ._errors import ClosedError, DeniedError, InvalidArgumentError, McpError, error_from_json

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
_set_roots = _ffi.lib.mcplug_client_set_roots
_set_log_level = _ffi.lib.mcplug_client_set_log_level


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


#: Handler keys for events that are neither requests nor notifications: the handler gets the
#: whole event (``{"type": "request_cancelled", "id", "method", "reason"}`` and so on).
EVENT_TYPES = ("request_cancelled", "request_expired", "warning", "stderr", "closed", "overflow")

#: Log levels of ``notifications/message``, least severe first (RFC 5424, as MCP uses them).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def _is_async_callable(fn: Any) -> bool:
    import inspect

    target = getattr(fn, "func", fn)  # functools.partial
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(getattr(target, "__call__", None))


def check_handlers(handlers: Optional[Mapping[str, Handler]], allow_async: bool) -> Dict[str, Handler]:
    """The handlers as a dict, refusing what cannot work: keys that are not str, values that
    are not callable, and (sync client) ``async def`` handlers, which only ``mcplug.aio`` runs."""
    if handlers is None:
        return {}
    if not isinstance(handlers, Mapping):
        raise InvalidArgumentError("`handlers` must be a dict of method name -> callable")
    out: Dict[str, Handler] = {}
    for method, fn in handlers.items():
        if not isinstance(method, str) or not method:
            raise InvalidArgumentError(f"handler keys must be method names or event types (got {method!r})")
        if not callable(fn):
            raise InvalidArgumentError(f"handler for {method!r} is not callable")
        if not allow_async and _is_async_callable(fn):
            raise InvalidArgumentError(
                f"handler for {method!r} is an async function: the sync mcplug.Client runs plain functions "
                "on its own thread; use mcplug.aio.Client for coroutine handlers"
            )
        out[method] = fn
    return out


def roots_json(roots: Any, what: str) -> List[Dict[str, Any]]:
    """Roots as the library takes them: ``[{"uri": "file:///...", "name": ...}]``. A str is a URI;
    a path (``os.PathLike``) becomes its absolute ``file://`` URI, named after its last part."""
    if isinstance(roots, Mapping) and "roots" in roots:
        roots = roots["roots"]
    if isinstance(roots, (str, bytes)) or not isinstance(roots, (list, tuple)):
        raise InvalidArgumentError(f"`{what}` must be a list of roots ({{'uri': 'file:///...', 'name': ...}}, URI strings or paths), got {type(roots).__name__}")
    out: List[Dict[str, Any]] = []
    for root in roots:
        if isinstance(root, str):
            out.append({"uri": root})
        elif isinstance(root, os.PathLike):
            from pathlib import Path

            path = Path(os.fspath(root)).absolute()
            out.append({"uri": path.as_uri(), "name": path.name or str(path)})
        elif isinstance(root, Mapping):
            out.append(dict(root))
        else:
            raise InvalidArgumentError(f"`{what}` holds {root!r}: a root is a dict with `uri` (and `name`), a URI string or a path")
    return out


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"`{what}` must be True or False (got {value!r})")
    return value


def connect_options(
    handlers: Optional[Mapping[str, Handler]],
    connect_timeout: Optional[float],
    request_timeout: Optional[float],
    tool_timeout: Optional[float],
    options: Optional[Mapping[str, Any]],
    *,
    host_request_timeout: Optional[float] = None,
    capabilities: Optional[Mapping[str, Any]] = None,
    roots: Any = None,
    log_level: Optional[str] = None,
    tasks: Optional[bool] = None,
    max_input_rounds: Optional[int] = None,
    elicitation_defaults: Optional[bool] = None,
    validate_arguments: Optional[bool] = None,
    allow_async: bool = True,
) -> Tuple[Dict[str, Any], Set[str]]:
    """The connect options, and the server-request methods the host will answer by hand.

    A handler declares its capability (``sampling``, ``elicitation`` form mode, ``roots`` with
    ``listChanged``); ``capabilities`` replaces or adds whole entries (``{"elicitation": {"form":
    {}, "url": {}}}``, ``{"sampling": {"tools": {}}}``). A capability declared without a handler
    means the host answers those requests itself with ``next_event`` + ``respond``; so does
    ``roots`` given without a ``roots/list`` handler, once ``set_roots(None)`` hands the requests
    back. The keyword arguments are the library's options of the same name (seconds for
    timeouts); ``options`` passes anything else as-is, and may not repeat them.
    """
    handlers = check_handlers(handlers, allow_async)
    if options is not None and not isinstance(options, Mapping):
        raise InvalidArgumentError("`options` must be a dict")
    user = dict(options or {})
    opts: Dict[str, Any] = {}
    put_timeout(opts, "connect_timeout_ms", connect_timeout, "connect_timeout")
    put_timeout(opts, "request_timeout_ms", request_timeout, "request_timeout")
    put_timeout(opts, "tool_timeout_ms", tool_timeout, "tool_timeout")
    ms = timeout_ms(host_request_timeout, "host_request_timeout")
    if ms is None:
        raise InvalidArgumentError("`host_request_timeout` cannot be unbounded: a server's request must always get an answer")
    if ms is not _ABSENT:
        opts["host_request_timeout_ms"] = ms
    if roots is not None:
        opts["roots"] = roots_json(roots, "roots")
    if log_level is not None:
        if log_level not in LOG_LEVELS:
            raise InvalidArgumentError(f"`log_level` must be one of {', '.join(LOG_LEVELS)} (got {log_level!r})")
        opts["log_level"] = log_level
    if tasks is not None:
        opts["tasks"] = _flag(tasks, "tasks")
    if max_input_rounds is not None:
        if isinstance(max_input_rounds, bool) or not isinstance(max_input_rounds, int) or max_input_rounds < 1:
            raise InvalidArgumentError(f"`max_input_rounds` must be a positive int (got {max_input_rounds!r})")
        opts["max_input_rounds"] = max_input_rounds
    if elicitation_defaults is not None:
        opts["elicitation_defaults"] = _flag(elicitation_defaults, "elicitation_defaults")
    if validate_arguments is not None:
        opts["validate_arguments"] = _flag(validate_arguments, "validate_arguments")
    if capabilities is not None:
        if "capabilities" in user:
            raise InvalidArgumentError("`capabilities` is given twice: as an argument and in `options`")
        user["capabilities"] = capabilities
    for key in opts:
        if key in user:
            raise InvalidArgumentError(f"the option {key!r} is given twice: as an argument and in `options`")
    user_caps = user.pop("capabilities", None)
    if user_caps is not None and not isinstance(user_caps, Mapping):
        raise InvalidArgumentError("`capabilities` must be a dict")
    caps: Dict[str, Any] = {}
    for method in handlers:
        cap = CAPABILITY_OF.get(method)
        if cap is not None:
            caps[cap] = dict(_DECLARED[cap])
    caps.update(user_caps or {})
    opts.update(user)
    if caps:
        opts["capabilities"] = caps
    manual = {m for m, cap in CAPABILITY_OF.items() if user_caps and cap in user_caps and m not in handlers}
    if opts.get("roots") is not None and "roots/list" not in handlers:
        manual.add("roots/list")
    return opts, manual


def call_options(timeout: Optional[float], tag: Optional[str], what: str = "timeout") -> Dict[str, Any]:
    opts: Dict[str, Any] = {}
    put_timeout(opts, "timeout_ms", timeout, what)
    if tag is not None:
        if not isinstance(tag, str) or not tag:
            raise InvalidArgumentError(f"`tag` must be a non-empty str (got {tag!r})")
        opts["tag"] = tag
    return opts


def put_cache_option(opts: Dict[str, Any], cache: Optional[bool]) -> Dict[str, Any]:
    """``cache=False``: a cacheable request (lists, ``resources/read``) goes to the server even
    when the connection's cache holds a fresh result (the new result replaces it)."""
    if cache is not None:
        opts["cache"] = _flag(cache, "cache")
    return opts


def put_task_options(
    opts: Dict[str, Any],
    task: Union[bool, str, None],
    task_ttl: Optional[float],
    validate_arguments: Optional[bool],
) -> Dict[str, Any]:
    """Adds the per-call options of tool calls: ``task`` (None: the library decides; True: ask a
    legacy server for a task and await it; False: never ask; "handle": return the task itself),
    ``task_ttl`` (seconds, as ``task_ttl_ms``) and ``validate_arguments``."""
    if task is not None:
        if not (isinstance(task, bool) or task in ("handle", "await")):
            raise InvalidArgumentError(f"`task` must be True, False, \"await\" or \"handle\" (got {task!r})")
        opts["task"] = task
    if task_ttl is not None:
        ms = timeout_ms(task_ttl, "task_ttl")
        if ms is None:
            raise InvalidArgumentError("`task_ttl` must be a finite number of seconds")
        opts["task_ttl_ms"] = ms
    if validate_arguments is not None:
        opts["validate_arguments"] = _flag(validate_arguments, "validate_arguments")
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
    """The JSON-RPC error a server gets when a handler raised: an McpError's own ``code`` and
    ``data`` (a DeniedError without a code is -1, the spec's "user rejected"); anything else is
    -32603 with the exception's text."""
    if isinstance(exc, McpError) and (exc.code is not None or isinstance(exc, DeniedError)):
        err: Dict[str, Any] = {"code": -1 if exc.code is None else exc.code, "message": exc.message}
        if exc.data is not None:
            err["data"] = exc.data
        return err
    return {"code": INTERNAL_ERROR, "message": str(exc) or type(exc).__name__}


class SyncRunner:
    """Runs handlers on the pump thread (the sync client)."""

    def run(self, fn: Handler, arg: Any, done: Optional[Done]) -> None:
        try:
            result = fn(arg)
            if hasattr(result, "__await__"):
                if hasattr(result, "close"):
                    result.close()  # never awaited: no "coroutine was never awaited" warning
                raise InvalidArgumentError(
                    "the handler returned an awaitable: the sync mcplug.Client runs plain functions; "
                    "use mcplug.aio.Client for coroutine handlers"
                )
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
        #: Request handlers still running: event id -> what stops it (an async handler's future)
        #: or None; and the ids the library withdrew (request_cancelled / request_expired) while
        #: their handler ran, whose outcome nobody waits for.
        self._running: Dict[str, Any] = {}
        self._withdrawn: Set[str] = set()
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

    def set_roots(self, roots: Any) -> bool:
        payload = b"null" if roots is None else dumps(roots_json(roots, "roots"), "roots")
        status, text = self._invoke(_set_roots, payload)
        return bool(_ffi.checked(status, text).get("notified"))

    def set_log_level(self, level: str) -> str:
        if level not in LOG_LEVELS:  # the library checks too; this names the Python argument
            raise InvalidArgumentError(f"`level` must be one of {', '.join(LOG_LEVELS)} (got {level!r})")
        status, text = self._invoke(_set_log_level, level.encode())
        return str(_ffi.checked(status, text).get("sent"))

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
        """Answers a request from a handler's outcome; failures are logged, never raised. A
        request that is no longer waiting (the call was cancelled, the host timer expired) is
        the normal end of a slow handler, not a failure."""
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
        except InvalidArgumentError as e:
            if "is waiting for an answer" in e.message:
                _log().debug("mcplug: server request %s ended before its handler answered", event_id)
            else:
                _log().warning("mcplug: could not answer server request %s: %s", event_id, e)
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
            elif kind in ("request_cancelled", "request_expired"):
                # The server (or the call) no longer waits: stop an async handler still at work.
                event_id = event.get("id")
                stop = None
                with self._cond:
                    if isinstance(event_id, str) and event_id in self._running:
                        stop = self._running.pop(event_id)
                        self._withdrawn.add(event_id)
                if stop is not None:
                    stop.cancel()
            if isinstance(kind, str) and kind != "notification":
                handler = self._handlers.get(kind)
                if handler is not None:
                    self._runner.run(handler, event, None)
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
            with self._cond:
                self._running.pop(event_id, None)
                withdrawn = event_id in self._withdrawn
                self._withdrawn.discard(event_id)
            if withdrawn:
                return  # request_cancelled / request_expired came first: nobody waits for it
            if exc is not None:
                self._respond_quietly(event_id, None, rpc_error_of(exc))
            else:
                self._respond_quietly(event_id, result, None)

        with self._cond:
            self._running[event_id] = None  # running, nothing to stop (yet)
        future = self._runner.run(handler, event.get("params", {}), done)
        if future is not None:
            with self._cond:
                if event_id in self._running:
                    self._running[event_id] = future

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
            self._stop_handlers()
            deadline = time.monotonic() + PUMP_JOIN_S
            with self._cond:
                while self._calls and time.monotonic() < deadline:
                    self._cond.wait(max(0.0, deadline - time.monotonic()))
                self._free_pending = True
            self._free_if_unused(pump_is_caller=on_pump)
        finally:
            self._sink.close()
            self._closed_done.set()

    def _stop_handlers(self) -> None:
        """Cancels the async handlers still answering requests: nobody can take their answer."""
        with self._cond:
            stops = [(event_id, f) for event_id, f in self._running.items() if f is not None]
            for event_id, _ in stops:
                del self._running[event_id]
                self._withdrawn.add(event_id)
        for _, f in stops:
            f.cancel()

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
