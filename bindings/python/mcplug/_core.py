"""One connection's shared state, used by both the sync and the asyncio client: the native handle
behind a gate, the blocking calls, the event pump thread, and the routing of events to handlers.

The pump pulls events with ``mcplug_client_next_event`` (the manager's in batches, with
``mcplug_manager_next_events``; the library never calls into Python), so handlers run on a thread
we own. Started calls (``mcplug_manager_call_tool_start``) hold no thread: the pump hands each
``completion`` event to the function the call was started with. The objects here never reference the public ``Client`` wrapper,
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
from ctypes import byref, c_char_p, c_uint64, c_void_p

from . import _codec, _ffi
from ._errors import ClosedError, DeniedError, InvalidArgumentError, McpError, NotFoundError, ProtocolError, error_from_json, make_error

TYPE_CHECKING = False  # not typing's: see _codec
if TYPE_CHECKING:
    from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Set, Tuple, Union

    #: A handler gets the request's or notification's ``params`` ("*" gets the whole event).
    Handler = Callable[[Any], Any]
    #: A progress callback (called with each notifications/progress params), or True for events only.
    Progress = Union[Handler, bool, None]
    #: Called once a handler finished: (result, exception).
    Done = Callable[[Any, Optional[BaseException]], None]
    #: Turns a handler's outcome (result, exception) into the one to answer with.
    Outcome = Callable[[Any, Optional[BaseException]], Tuple[Any, Optional[BaseException]]]
    #: Gets a started call's ``{"type": "completion", "call", "result" | "error"}`` event, once.
    Completion = Callable[[Dict[str, Any]], None]


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
#: How many events the pump takes per pull where the handle has ``*_next_events``.
PUMP_BATCH = 64

METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603

#: The capability a server request needs (a handler for it declares it: the library derives what
#: to declare from the ``handlers`` option).
CAPABILITY_OF = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}

_tag_counter = itertools.count(1)

# Bound once: a module global is one lookup, ``_ffi.lib.name`` is three.
_OK = _ffi.OK
_encode_chunks = _codec.encode_chunks
_codec_loads = _codec.loads


def _loads(text: str) -> Any:
    """What the library handed back, as Python; a value nested deeper than Python's json
    reads (the library passes a server's JSON through untouched) is a ProtocolError."""
    try:
        return _codec_loads(text)
    except RecursionError:
        raise ProtocolError(
            f"the server's answer ({len(text)} bytes) nests deeper than Python's json can read", kind="protocol"
        ) from None


_scan = _codec.scan
_string_free = _ffi.string_free
_call_tool_fast = _ffi.call_tool_fast
_string_free_fast = _ffi.string_free_fast
_list_tools = _ffi.lib.mcplug_client_list_tools
_call_tool = _ffi.lib.mcplug_client_call_tool
_request = _ffi.lib.mcplug_client_request
_notify = _ffi.lib.mcplug_client_notify
_set_roots = _ffi.lib.mcplug_client_set_roots
_set_log_level = _ffi.lib.mcplug_client_set_log_level
_list_skills = _ffi.lib.mcplug_client_list_skills
_get_skill = _ffi.lib.mcplug_client_get_skill
_load_skill = _ffi.lib.mcplug_client_load_skill
_read_skill_file = _ffi.lib.mcplug_client_read_skill_file


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


def check_handlers(handlers: Optional[Mapping[str, Handler]], allow_async: bool, owner: str = "Client") -> Dict[str, Handler]:
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
                f"handler for {method!r} is an async function: the sync mcplug.{owner} runs plain functions "
                f"on its own thread; use mcplug.aio.{owner} for coroutine handlers"
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
    owner: str = "Client",
) -> Tuple[Dict[str, Any], Set[str]]:
    """The connect options, and the server-request methods the host will answer by hand.

    A handler declares its capability (the library derives it from the methods named in the
    ``handlers`` option: ``sampling``, ``elicitation`` form mode, ``roots`` with ``listChanged``);
    ``capabilities`` adds to them, one level deep for those three (``{"elicitation": {"url":
    {}}}`` adds URL mode, ``{"sampling": {"tools": {}}}`` tool use), and ``False`` takes one
    away. A capability declared without a handler
    means the host answers those requests itself with ``next_event`` + ``respond``; so does
    ``roots`` given without a ``roots/list`` handler, once ``set_roots(None)`` hands the requests
    back. The keyword arguments are the library's options of the same name (seconds for
    timeouts); ``options`` passes anything else as-is, and may not repeat them.
    """
    handlers = check_handlers(handlers, allow_async, owner)
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
    opts.update(user)
    if handlers:
        # The library declares the capabilities these imply, with ``capabilities`` over them.
        opts["handlers"] = sorted(handlers)
    if user_caps is not None:
        opts["capabilities"] = dict(user_caps)
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


FORMATS = ("mcp", "anthropic", "openai")


def put_format(opts: Dict[str, Any], format: Optional[str]) -> Dict[str, Any]:
    """Adds ``format``: ``"mcp"`` (the default, untouched), ``"anthropic"`` (Messages API tool
    definitions; a result as a ``tool_result`` block's ``{"content", "is_error"}``) or
    ``"openai"`` (Chat Completions function tools; a result as the tool message)."""
    if format is not None:
        if format not in FORMATS:
            raise InvalidArgumentError(f"`format` must be \"mcp\", \"anthropic\" or \"openai\" (got {format!r})")
        opts["format"] = format
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


def completion_outcome(event: Dict[str, Any]) -> Tuple[Any, Optional[McpError]]:
    """A ``completion`` event as (result, None) or (None, the McpError of its ``error``)."""
    err = event.get("error")
    if err is None:
        return event.get("result"), None
    if not isinstance(err, Mapping):
        err = {}
    code, kind, message = err.get("code"), err.get("kind"), err.get("message")
    if not isinstance(kind, str):
        kind = "unknown"
    if not isinstance(message, str):
        message = f"the call failed ({kind})"
    return None, make_error(kind, message, code if isinstance(code, int) else None, err.get("data"))


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

    def run(self, fn: Handler, arg: Any, done: Optional[Done], quick: bool = False) -> None:
        try:
            result = fn(arg)
            if hasattr(result, "__await__"):
                if hasattr(result, "close"):
                    result.close()  # never awaited: no "coroutine was never awaited" warning
                raise InvalidArgumentError(
                    "the handler returned an awaitable: the sync mcplug.Client and mcplug.Manager run plain "
                    "functions; use mcplug.aio for coroutine handlers"
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


class HandleCore:
    """A handle and everything that must outlive no more and no less than it: the gate, the
    event pump, the routing of events to handlers, closing. ``Core`` (a client) and
    ``ManagerCore`` (``_manager.py``) give it their handle's functions and their calls."""

    #: What the handle is, in messages ("the client is closed").
    WHAT = "handle"
    _NEXT_EVENT: Any
    _RESPOND: Any
    _CLOSE: Any
    _FREE: Any
    #: ``(handle, max, timeout_ms, out)`` pulling a batch of events (a JSON array), if the handle has it.
    _NEXT_EVENTS: Any = None
    #: ``(handle, call, out)`` cancelling a started call, if the handle starts calls.
    _CANCEL_CALL: Any = None

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
        #: The process that made the handle: a child forked from it only lets go (see close()).
        self._pid = os.getpid()
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
        #: Started calls by number: the function their completion event goes to; and the
        #: completions that came before their call was registered (a fast answer can reach the
        #: pump before ``_start`` has the call's number back).
        self._started: Dict[int, Completion] = {}
        self._early: Dict[int, Dict[str, Any]] = {}
        #: Completions of calls with a progress callable, each waiting for a pull started after
        #: it (later than this pull number) to find the queue empty: (pull number, finish, event).
        self._after_idle: List[Tuple[int, Completion, Dict[str, Any]]] = []
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
                raise ClosedError(f"the {self.WHAT} is closed", kind="closed")
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

    def _route_progress(self, options: Optional[Dict[str, Any]], progress: Progress) -> Tuple[Optional[Dict[str, Any]], Optional[Handler]]:
        """Asks for progress when ``progress`` is True or a callable: the options with ``progress``
        and a ``tag`` (the events carry it), and the callable, now routed by that tag (undo with
        ``_drop_route``), or None."""
        if progress is None or progress is False:
            return options, None
        if options is None:
            options = {}
        options["progress"] = True
        tag = options.setdefault("tag", new_tag())
        if progress is True:
            return options, None  # progress events go to handlers / next_event, with the tag
        if not callable(progress):
            raise InvalidArgumentError("`progress` must be a callable, True, or None")
        with self._cond:
            self._routes.setdefault(tag, []).append(progress)
        return options, progress

    def _drop_route(self, tag: str, progress: Handler) -> None:
        with self._cond:
            routes = self._routes.get(tag, [])
            if progress in routes:
                routes.remove(progress)
            if not routes:
                self._routes.pop(tag, None)

    def _call(self, fn: Any, args: Tuple[Any, ...], options: Optional[Dict[str, Any]], progress: Progress) -> Any:
        if progress is None or progress is False:
            status, text = self._invoke(fn, *args, dumps(options, "options") if options else None)
            if status == _OK:
                return _loads(text) if text else None
            raise error_from_json(status, text)
        options, callback = self._route_progress(options, progress)
        assert options is not None
        try:
            status, text = self._invoke(fn, *args, dumps(options, "options"))
            if callback is not None:
                self._flush_progress()
        finally:
            if callback is not None:
                self._drop_route(options["tag"], callback)
        return _ffi.checked(status, text)

    # -- started calls -----------------------------------------------------------------------------

    def _start(self, fn: Any, args: Tuple[Any, ...], options: Optional[Dict[str, Any]], progress: Progress, done: Completion) -> int:
        """Starts a call without waiting (``fn(handle, *args, options_json, &call, out)``, which
        never blocks on a server) and returns its number. ``done`` gets its completion event
        exactly once: on the pump thread, or on this one when the completion was pulled before
        this returned, or a ``closed`` one if the pump has stopped. Errors of the start itself
        (bad arguments, unknown name, closed) are raised here and ``done`` is never called.

        A progress callable is routed until the call ends, and the call ends for it as a blocking
        call does (``_flush_progress``): once a pull started after its completion found the queue
        empty. The library forwards each connection's events to the manager's queue on a task of
        its own, so a call's last progress event may queue just after its completion."""
        options, callback = self._route_progress(options, progress)
        number = c_uint64()
        try:
            status, text = self._invoke(fn, *args, dumps(options, "options") if options else None, byref(number))
            if status != _OK:
                raise error_from_json(status, text)
        except BaseException:
            if callback is not None:
                assert options is not None
                self._drop_route(options["tag"], callback)
            raise
        call = number.value
        if callback is not None:
            assert options is not None
            tag, target = options["tag"], done

            def finish(event: Dict[str, Any]) -> None:
                self._drop_route(tag, callback)
                target(event)

            def done(event: Dict[str, Any]) -> None:
                with self._cond:
                    if not self._pump_exited:
                        self._after_idle.append((self._pull_seq, finish, event))
                        return
                finish(event)

        with self._cond:
            early = self._early.pop(call, None)
            if early is None and not self._pump_exited:
                self._started[call] = done
                return call
        self._complete(done, early if early is not None else self._closed_completion(call))
        return call

    def cancel_started(self, call: int) -> bool:
        """Cancels a started call: its completion carries a ``cancelled`` error unless its outcome
        came first. False when it was no longer in flight."""
        status, text = self._invoke(self._CANCEL_CALL, call)
        return bool((_ffi.checked(status, text) or {}).get("cancelled"))

    def _closed_completion(self, call: int) -> Dict[str, Any]:
        return {"type": "completion", "call": call, "error": {"kind": "closed", "message": f"the {self.WHAT} is closed"}}

    def _on_completion(self, event: Dict[str, Any]) -> None:
        call = event.get("call")
        if not isinstance(call, int):
            _log().error("mcplug: a completion event without a call number: %r", event)
            return
        with self._cond:
            done = self._started.pop(call, None)
            if done is None:
                self._early[call] = event  # its call is still on its way back from starting
                return
        self._complete(done, event)

    @staticmethod
    def _complete(done: Completion, event: Dict[str, Any]) -> None:
        try:
            done(event)
        except Exception:
            _log().exception("mcplug: delivering a call's completion failed")

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
        status, text = self._invoke(self._RESPOND, payload)
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
        except NotFoundError:  # the manager's word for an id no longer waiting
            _log().debug("mcplug: server request %s ended before its handler answered", event_id)
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
        batch = self._NEXT_EVENTS
        try:
            while True:
                with self._cond:
                    if self._handle is None:
                        break  # freed by close() from a handler on this thread
                    handle = self._handle
                    self._pull_seq += 1
                    seq = self._pull_seq
                    wait = PUMP_WAIT_PROGRESS_MS if self._routes else PUMP_WAIT_MS
                if batch is not None:
                    status, text = _ffi.invoke(batch, handle, PUMP_BATCH, wait)
                else:
                    status, text = _ffi.invoke(self._NEXT_EVENT, handle, wait)
                if status == _ffi.OK:
                    failures = 0
                    try:
                        pulled = _codec.loads(text or "null")
                    except ValueError:
                        _log().error("mcplug: an event was not JSON: %r", text)
                        continue
                    events = pulled if batch is not None and isinstance(pulled, list) else [pulled]
                    for event in events:
                        if isinstance(event, dict):
                            self._dispatch(event)
                    if batch is not None and len(events) < PUMP_BATCH:
                        # A short batch: the queue was empty after it, and all of it is routed.
                        self._idle(seq)
                elif status == _ffi.TIMEOUT:
                    self._idle(seq)
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
                # The library completes every started call before its last event; these are
                # only left if the pump gave up: nobody else would end them.
                left = list(self._started.items())
                self._started.clear()
                self._early.clear()
                ending, self._after_idle = self._after_idle, []
            for _, finish, event in ending:
                self._complete(finish, event)
            for call, done in left:
                self._complete(done, self._closed_completion(call))
            self._sink.close()
            self._free_if_unused()

    def _idle(self, seq: int) -> None:
        """The pull ``seq`` found the queue empty: blocking calls waiting for their progress events
        may return, and started calls with a progress callable completed before it end now."""
        with self._cond:
            self._idle_seq = seq
            self._cond.notify_all()
            ready = [(finish, event) for mark, finish, event in self._after_idle if mark < seq]
            if ready:
                self._after_idle = [entry for entry in self._after_idle if entry[0] >= seq]
        for finish, event in ready:
            self._complete(finish, event)

    def _dispatch(self, event: Dict[str, Any]) -> None:
        try:
            kind = event.get("type")
            if kind == "completion":
                self._on_completion(event)
                return
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
                    self._runner.run(self._bind(handler, event), params, None)
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

    def _bind(self, handler: Handler, event: Dict[str, Any]) -> Handler:
        """The one-argument function that runs ``handler`` for a request's or notification's
        params (the manager adds the server's name)."""
        return handler

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
                self._respond_quietly(event_id, None, {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method} (no handler in this {self.WHAT})"})
            return
        self._answer_with(event_id, self._bind(handler, event), event.get("params", {}))

    def _answer_with(self, event_id: str, handler: Handler, params: Any, outcome: Optional[Outcome] = None, quick: bool = False) -> None:
        """Runs ``handler(params)`` for the request ``event_id`` and answers with its outcome;
        ``outcome(result, exc)`` may turn it into the ``(result, error)`` to send instead.
        ``quick``: answering never waits on a server (a host tool's call), so an async handler's
        answer may be given on the loop thread."""

        def done(result: Any, exc: Optional[BaseException]) -> None:
            with self._cond:
                self._running.pop(event_id, None)
                withdrawn = event_id in self._withdrawn
                self._withdrawn.discard(event_id)
            if withdrawn:
                return  # request_cancelled / request_expired came first: nobody waits for it
            if outcome is not None:
                result, exc = outcome(result, exc)
            if exc is not None:
                self._respond_quietly(event_id, None, rpc_error_of(exc))
            else:
                self._respond_quietly(event_id, result, None)

        with self._cond:
            self._running[event_id] = None  # running, nothing to stop (yet)
        future = self._runner.run(handler, params, done, quick)
        if future is not None:
            with self._cond:
                if event_id in self._running:
                    self._running[event_id] = future

    # -- closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the connection (the library fails blocked calls with CLOSED and the pump drains
        the last events, then sees CLOSED), joins the pump, and frees the handle once no call is
        inside the library any more. From a handler on the pump thread it does not join itself.

        In a child forked from the process that made the handle, it only lets go: the library
        refuses every call there (ClosedError, reason "forked") and leaves the parent's
        connection, threads and servers alone, and this binding's pump and calls are the
        parent's too."""
        if os.getpid() != self._pid:
            self._closing = True
            self._handle = None
            self._closed_done.set()
            return
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
                status, text = _ffi.invoke(self._CLOSE, c_void_p(handle))
                if status != _ffi.OK:
                    _log().warning("mcplug: closing the %s failed (status %d): %s", self.WHAT, status, text)
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
        self._FREE(c_void_p(handle))


class Core(HandleCore):
    """One client connection: the handle's calls."""

    WHAT = "client"
    _NEXT_EVENT = _ffi.lib.mcplug_client_next_event
    _RESPOND = _ffi.lib.mcplug_client_respond
    _CLOSE = _ffi.lib.mcplug_client_close
    _FREE = _ffi.lib.mcplug_client_free

    def list_tools(self, options: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
        result = self._call(_list_tools, (), options, None)
        return list(result.get("tools", []))

    def list_skills(self, options: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
        result = self._call(_list_skills, (), options, None)
        return list(result.get("skills", []))

    def get_skill(self, uri: str, options: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        result: Dict[str, Any] = self._call(_get_skill, (encode(uri, "uri"),), options, None)
        return result

    def load_skill(self, uri: str, options: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        result: Dict[str, Any] = self._call(_load_skill, (encode(uri, "uri"),), options, None)
        return result

    def read_skill_file(self, skill: str, file: str, options: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        result: Dict[str, Any] = self._call(_read_skill_file, (encode(skill, "skill"), encode(file, "file")), options, None)
        return result

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
                raise ClosedError(f"the {self.WHAT} is closed", kind="closed")
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


def drain_events(next_event: "Callable[[Optional[float]], Optional[Dict[str, Any]]]", timeout: "Optional[float]") -> "Iterator[Dict[str, Any]]":
    """Client.events and Manager.events: ``next_event`` until closed, or until none came for
    ``timeout`` seconds."""
    from ._errors import ClosedError

    while True:
        try:
            event = next_event(timeout)
        except ClosedError:
            return
        if event is None:
            return
        yield event
