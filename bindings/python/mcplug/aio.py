"""The asyncio client: the same methods as ``mcplug.Client``, as coroutines.

Blocking library calls run on a dedicated thread pool, so the event loop is never blocked.
Every call carries a tag: cancelling the awaiting task cancels the call in the library, and the
server is sent ``notifications/cancelled``. Handlers may be ``async def`` (run as tasks on the
loop, several at once) or plain functions (run on the pump thread); an async handler whose request
the server no longer needs (``request_cancelled``, ``request_expired``) is cancelled::

    async def elicit(params):
        answer = await ask_the_user(params["message"])    # cancelled if the call goes away
        return {"action": "accept", "content": answer}

    async with await mcplug.aio.Client.connect(server, handlers={"elicitation/create": elicit}) as c:
        await c.call_tool("greet", {})
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import os
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, TypeVar, Union

from . import _ffi
from ._client import _Info
from ._core import (
    EventBuffer,
    EVENT_QUEUE_LIMIT,
    Core,
    call_options,
    connect_blocking,
    connect_options,
    new_tag,
    put_cache_option,
    put_task_options,
)
from ._errors import CancelledError, InvalidArgumentError
from ._managed import AsyncManaged

if TYPE_CHECKING:
    from ._core import Done, Handler

__all__ = ["Client"]

log = logging.getLogger("mcplug")
T = TypeVar("T")
Timeout = Optional[float]
AsyncHandler = Callable[[Any], Union[Any, Awaitable[Any]]]
Root = Union[Mapping[str, Any], str, "os.PathLike[str]"]

#: Blocking calls of every asyncio client run here (one thread per call in flight).
_EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="mcplug-aio")


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


class _LoopRunner:
    """Runs plain handlers on the pump thread and async ones on the loop, without waiting for
    them: a slow async handler never stalls other events."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def run(self, fn: Handler, arg: Any, done: Optional[Done]) -> "Optional[concurrent.futures.Future[Any]]":
        """Returns the future of an async handler (cancelling it cancels the handler's task)."""
        try:
            result = fn(arg)
        except Exception as e:
            _report(done, None, e)
            return None
        if not inspect.isawaitable(result):
            _report(done, result, None)
            return None
        try:
            future = asyncio.run_coroutine_threadsafe(_await(result), self._loop)
        except RuntimeError as e:  # the loop is closed
            if inspect.iscoroutine(result):
                result.close()
            _report(done, None, e)
            return None

        def finished(f: "concurrent.futures.Future[Any]") -> None:
            if f.cancelled():
                outcome: Any = None
                exc: Optional[BaseException] = asyncio.CancelledError()
            else:
                exc = f.exception()
                outcome = None if exc is not None else f.result()
            if done is None:
                if exc is not None and not isinstance(exc, asyncio.CancelledError):
                    log.error("mcplug: an async event handler raised", exc_info=exc)
                return
            try:  # answering is a blocking library call: never on the loop thread
                _EXECUTOR.submit(done, outcome, exc)
            except RuntimeError:
                pass

        future.add_done_callback(finished)
        return future


def _report(done: Optional[Done], result: Any, exc: Optional[BaseException]) -> None:
    if done is not None:
        done(result, exc)
    elif exc is not None:
        log.error("mcplug: an event handler raised", exc_info=exc)


class _LoopSink(EventBuffer):
    """Events no handler took, delivered onto the loop for ``await Client.next_event()``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int = EVENT_QUEUE_LIMIT) -> None:
        super().__init__(limit)
        self._loop = loop
        self._ready = asyncio.Event()

    def put(self, event: Dict[str, Any]) -> None:
        try:
            self._loop.call_soon_threadsafe(self._put, event)
        except RuntimeError:
            pass  # the loop is gone; nobody can read it

    def close(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._close)
        except RuntimeError:
            pass

    def _put(self, event: Dict[str, Any]) -> None:
        self._append(event)
        self._ready.set()

    def _close(self) -> None:
        self._closed = True
        self._ready.set()

    async def get(self, timeout: Optional[float]) -> Optional[Dict[str, Any]]:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + max(0.0, timeout)
        while True:
            event = self._take()
            if event is not None:
                return event
            self._ready.clear()
            if deadline is None:
                await self._ready.wait()
                continue
            left = deadline - loop.time()
            if left <= 0:
                return None
            try:
                await asyncio.wait_for(self._ready.wait(), left)
            except asyncio.TimeoutError:
                pass


class _Cancelled:
    flag = False


async def _run(
    job: Callable[[], T],
    tag: Optional[str],
    orphan: Optional[Callable[[T], None]] = None,
) -> T:
    """Runs a blocking call on the pool. If the awaiting task is cancelled, the call is cancelled
    in the library by its tag (retrying until the call has registered it), and ``orphan`` gets a
    result that arrives anyway (a connection nobody will own)."""
    loop = asyncio.get_running_loop()
    state = _Cancelled()

    def guarded() -> T:
        if state.flag:
            raise CancelledError("cancelled before it started", kind="cancelled")
        return job()

    cfut = _EXECUTOR.submit(guarded)
    afut = asyncio.wrap_future(cfut, loop=loop)
    try:
        return await asyncio.shield(afut)
    except asyncio.CancelledError:
        state.flag = True
        afut.add_done_callback(lambda f: f.cancelled() or f.exception())  # nobody reads it
        if orphan is not None:
            def adopt(f: "concurrent.futures.Future[T]") -> None:
                if not f.cancelled() and f.exception() is None:
                    orphan(f.result())
            cfut.add_done_callback(adopt)
        if tag is not None and not cfut.cancel():
            _cancel_until_done(loop, cfut, tag, 0)
        raise


def _cancel_until_done(loop: asyncio.AbstractEventLoop, cfut: "concurrent.futures.Future[Any]", tag: str, attempt: int) -> None:
    # The call may not have reached the library yet: keep trying until it is found or finishes.
    if cfut.done() or attempt > 300:
        return
    try:
        if _ffi.cancel(tag):
            return
    except Exception:
        return
    loop.call_later(min(0.005 * (attempt + 1), 0.1), _cancel_until_done, loop, cfut, tag, attempt + 1)


class Client(_Info, AsyncManaged):
    """One MCP server, for asyncio. ``async with await Client.connect(cfg) as c: ...``"""

    def __init__(self, _core: Core, _sink: _LoopSink) -> None:
        if not isinstance(_core, Core):
            raise TypeError("use `await mcplug.aio.Client.connect(...)` to create a Client")
        self._core = _core
        self._sink = _sink
        self._attach(_core.close)

    @classmethod
    async def connect(
        cls,
        server: Mapping[str, Any],
        *,
        handlers: Optional[Mapping[str, AsyncHandler]] = None,
        connect_timeout: Timeout = None,
        request_timeout: Timeout = None,
        tool_timeout: Timeout = None,
        host_request_timeout: Timeout = None,
        capabilities: Optional[Mapping[str, Any]] = None,
        roots: Optional[Sequence[Root]] = None,
        log_level: Optional[str] = None,
        tasks: Optional[bool] = None,
        max_input_rounds: Optional[int] = None,
        elicitation_defaults: Optional[bool] = None,
        validate_arguments: Optional[bool] = None,
        options: Optional[Mapping[str, Any]] = None,
    ) -> "Client":
        """Starts the server and negotiates, off the loop. The arguments are those of
        ``mcplug.Client.connect``; handlers may be ``async def`` (run as tasks on this loop,
        several at once) or plain functions (run on the pump thread). When the server no
        longer needs a request (``request_cancelled``, ``request_expired``), the task of the
        async handler still answering it is cancelled."""
        loop = asyncio.get_running_loop()
        opts, manual = connect_options(
            handlers, connect_timeout, request_timeout, tool_timeout, options,
            host_request_timeout=host_request_timeout, capabilities=capabilities, roots=roots,
            log_level=log_level, tasks=tasks, max_input_rounds=max_input_rounds,
            elicitation_defaults=elicitation_defaults, validate_arguments=validate_arguments,
            allow_async=True,
        )
        tag = opts.setdefault("tag", new_tag())
        sink = _LoopSink(loop)
        runner = _LoopRunner(loop)

        def job() -> Core:
            handle, info = connect_blocking(server, opts)
            core = Core(handle, info, handlers, manual, runner, sink)
            core.start()
            return core

        core = await _run(job, tag, orphan=lambda c: c.close())
        return cls(core, sink)

    async def list_tools(
        self, *, timeout: Timeout = None, tag: Optional[str] = None, cache: Optional[bool] = None
    ) -> List[Dict[str, Any]]:
        opts = put_cache_option(call_options(timeout, tag or new_tag()), cache)
        return await _run(lambda: self._core.list_tools(opts), opts["tag"])

    async def call_tool(
        self,
        name: str,
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        timeout: Timeout = None,
        tag: Optional[str] = None,
        progress: Union[AsyncHandler, bool, None] = None,
        task: Union[bool, str, None] = None,
        task_ttl: Timeout = None,
        validate_arguments: Optional[bool] = None,
    ) -> Dict[str, Any]:
        """The raw CallToolResult; cancelling the task cancels the call on the server too (and
        ``tasks/cancel`` for a call that became a task). See ``mcplug.Client.call_tool``."""
        if arguments is not None and not isinstance(arguments, Mapping):
            raise InvalidArgumentError(f"`arguments` must be a dict (got {type(arguments).__name__})")
        opts = put_task_options(call_options(timeout, tag or new_tag()), task, task_ttl, validate_arguments)
        return await _run(lambda: self._core.call_tool(name, arguments, opts, progress), opts["tag"])

    async def request(
        self,
        method: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        timeout: Timeout = None,
        tag: Optional[str] = None,
        all_pages: bool = False,
        progress: Union[AsyncHandler, bool, None] = None,
        task: Union[bool, str, None] = None,
        task_ttl: Timeout = None,
        validate_arguments: Optional[bool] = None,
        cache: Optional[bool] = None,
    ) -> Dict[str, Any]:
        """Any request; see ``mcplug.Client.request``."""
        opts = put_task_options(call_options(timeout, tag or new_tag()), task, task_ttl, validate_arguments)
        put_cache_option(opts, cache)
        if all_pages:
            opts["all_pages"] = True
        return await _run(lambda: self._core.request(method, params, opts, progress), opts["tag"])

    async def set_roots(self, roots: Optional[Sequence[Root]]) -> bool:
        """See ``mcplug.Client.set_roots``."""
        return await _run(lambda: self._core.set_roots(roots), None)

    async def set_log_level(self, level: str) -> str:
        """See ``mcplug.Client.set_log_level``."""
        return await _run(lambda: self._core.set_log_level(level), None)

    async def notify(self, method: str, params: Optional[Mapping[str, Any]] = None) -> None:
        await _run(lambda: self._core.notify(method, params), None)

    async def next_event(self, timeout: Timeout = None) -> Optional[Dict[str, Any]]:
        """The next event no handler took, or None after ``timeout`` seconds (None: no limit)."""
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
            raise InvalidArgumentError(f"`timeout` must be a number of seconds or None (got {timeout!r})")
        return await self._sink.get(None if timeout is None or timeout == float("inf") else float(timeout))

    async def respond(self, event_id: str, result: Any = None, *, error: Any = None) -> None:
        await _run(lambda: self._core.respond(event_id, result, error), None)

    async def close(self) -> None:
        """Closes the connection off the loop; the server is gone when this returns."""
        if self.closed:
            return
        await asyncio.get_running_loop().run_in_executor(_EXECUTOR, self._close_now)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<mcplug.aio.Client {self.server_info.get('name', '?')!r} {self.protocol_version} {state}>"
