"""The asyncio client: the same methods as ``mcplug.Client``, as coroutines.

Blocking library calls run on a dedicated thread pool, so the event loop is never blocked.
Every call carries a tag: cancelling the awaiting task cancels the call in the library, and the
server is sent ``notifications/cancelled``. ``Manager.call_tool`` holds no thread at all: it
starts the call (``mcplug_manager_call_tool_start``, which never blocks) and awaits a future that
the manager's event pump resolves with the call's ``completion`` event; cancelling the task
cancels the call by its number. Handlers may be ``async def`` (run as tasks on the
loop, several at once) or plain functions (run on the pump thread); an async handler whose request
the server no longer needs (``request_cancelled``, ``request_expired``) is cancelled::

    async def elicit(params):
        answer = await ask_the_user(params["message"])    # cancelled if the call goes away
        return {"action": "accept", "content": answer}

    async with await mcplug.aio.Client.connect(server, handlers={"elicitation/create": elicit}) as c:
        await c.call_tool("greet", {})

    async with mcplug.aio.Manager(handlers={"elicitation/create": lambda params, server: ...}) as m:
        await m.connect({"mcpServers": {...}})
        async for event in m:                     # {"type": "state", "server", "state", ...}
            ...
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import os
import threading
import weakref
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from . import _auth, _ffi
from ._core import _is_async_callable
from ._client import _Info, _complete_params, _items, _prompt_params, _string
from ._core import (
    EventBuffer,
    EVENT_QUEUE_LIMIT,
    Core,
    HandleCore,
    call_options,
    completion_outcome,
    connect_blocking,
    connect_options,
    new_tag,
    put_cache_option,
    put_format,
    put_task_options,
)
from ._errors import CancelledError, ClosedError, InvalidArgumentError, McpError
from ._managed import AsyncManaged
from ._manager import ManagerCore, list_options, new_manager, request_options, search_options
from ._serve import Served, serve_options
from ._serve import _free as _free_server

if TYPE_CHECKING:
    from ._core import Completion, Done, Handler

__all__ = ["Client", "Manager", "Server"]

log = logging.getLogger("mcplug")
T = TypeVar("T")
Timeout = Optional[float]
AsyncHandler = Callable[[Any], Union[Any, Awaitable[Any]]]
Root = Union[Mapping[str, Any], str, "os.PathLike[str]"]

#: Blocking calls of every asyncio client run here (one thread per call in flight).
_EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="mcplug-aio")


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


async def _drain_events(next_event: Callable[[Timeout], Awaitable[Optional[Dict[str, Any]]]], timeout: Timeout) -> AsyncIterator[Dict[str, Any]]:
    """Client.events and Manager.events: ``next_event`` until closed, or until none came for
    ``timeout`` seconds."""
    while True:
        try:
            event = await next_event(timeout)
        except ClosedError:
            return
        if event is None:
            return
        yield event


class _LoopRunner:
    """Runs plain handlers on the pump thread and async ones on the loop, without waiting for
    them: a slow async handler never stalls other events."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def run(self, fn: Handler, arg: Any, done: Optional[Done], quick: bool = False) -> "Optional[concurrent.futures.Future[Any]]":
        """Returns the future of an async handler (cancelling it cancels the handler's task).
        ``done`` answers with a blocking library call, so it runs on the pool, unless ``quick``
        (it never waits on a server): then on the loop thread, as the handler finishes."""
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
            if quick:
                done(outcome, exc)
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
    opts: Optional[Dict[str, Any]],
    orphan: Optional[Callable[[T], None]] = None,
) -> T:
    """Runs a blocking call on the pool. With ``opts`` (the call's options, read by ``job`` when it
    runs), the call carries a cancel token of the library's: if the awaiting task is cancelled,
    the token is, and the call ends ``cancelled`` whether it is running or has not entered the
    library yet (then nothing is sent). ``orphan`` gets a result that arrives anyway (a
    connection nobody will own)."""
    loop = asyncio.get_running_loop()
    state = _Cancelled()
    token = None
    if opts is not None:
        token = _ffi.cancel_token_new()
        opts["cancel_token"] = token

    def guarded() -> T:
        if state.flag:
            raise CancelledError("cancelled before it started", kind="cancelled")
        return job()

    cfut = _EXECUTOR.submit(guarded)
    if token is not None:
        cfut.add_done_callback(lambda _f: _ffi.cancel_token_free(token))
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
        if token is not None and not cfut.cancel():
            _ffi.cancel_token_cancel(token)
        raise


def _settle(future: "asyncio.Future[Any]", event: Dict[str, Any]) -> None:
    if future.done():
        return  # the awaiting task was cancelled
    result, exc = completion_outcome(event)
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


async def _await_started(core: HandleCore, start: Callable[["Completion"], int]) -> Any:
    """Starts a call with ``start(done)`` (on the loop thread: starting never blocks on a server)
    and awaits its completion, which the pump hands to ``done``. If the awaiting task is
    cancelled, so is the call (its server is sent ``notifications/cancelled``; a host tool's
    task is cancelled); its completion then goes nowhere."""
    loop = asyncio.get_running_loop()
    future: "asyncio.Future[Any]" = loop.create_future()

    def done(event: Dict[str, Any]) -> None:
        try:
            loop.call_soon_threadsafe(_settle, future, event)
        except RuntimeError:
            pass  # the loop is closed: nobody awaits the call

    call = start(done)
    try:
        return await future
    except asyncio.CancelledError:
        if not future.done() or future.cancelled():
            try:
                core.cancel_started(call)
            except McpError:
                pass  # closed: the call ended with its manager
        raise


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
        opts.setdefault("tag", new_tag())
        sink = _LoopSink(loop)
        runner = _LoopRunner(loop)

        authorize = (handlers or {}).get("auth/authorize")
        channel = None
        if authorize is not None:
            if _is_async_callable(authorize):
                async_authorize = authorize

                def authorize(params: Dict[str, Any]) -> Any:  # on the auth pump's thread
                    pending = async_authorize(params)
                    assert asyncio.iscoroutine(pending)
                    return asyncio.run_coroutine_threadsafe(pending, loop).result()

            channel = _auth.register(authorize, opts)

        def job() -> Core:
            handle, info = connect_blocking(server, opts)
            core = Core(handle, info, handlers, manual, runner, sink)
            core.start()
            return core

        try:
            core = await _run(job, opts, orphan=lambda c: c.close())
        except BaseException:
            _auth.unregister(channel)
            raise
        client = cls(core, sink)
        if channel is not None:
            weakref.finalize(client, _auth.unregister, channel)
        return client

    async def list_tools(
        self, *, timeout: Timeout = None, tag: Optional[str] = None, cache: Optional[bool] = None, format: Optional[str] = None
    ) -> List[Dict[str, Any]]:
        opts = put_format(put_cache_option(call_options(timeout, tag or new_tag()), cache), format)
        return await _run(lambda: self._core.list_tools(opts), opts)

    async def list_skills(self, *, timeout: Timeout = None, tag: Optional[str] = None) -> List[Dict[str, Any]]:
        """See ``mcplug.Client.list_skills``."""
        opts = call_options(timeout, tag or new_tag())
        return await _run(lambda: self._core.list_skills(opts), opts)

    async def get_skill(self, uri: str, *, timeout: Timeout = None, tag: Optional[str] = None) -> Dict[str, Any]:
        """See ``mcplug.Client.get_skill``."""
        opts = call_options(timeout, tag or new_tag())
        return await _run(lambda: self._core.get_skill(uri, opts), opts)

    async def load_skill(self, uri: str, *, timeout: Timeout = None, tag: Optional[str] = None) -> Dict[str, Any]:
        """See ``mcplug.Client.load_skill``."""
        opts = call_options(timeout, tag or new_tag())
        return await _run(lambda: self._core.load_skill(uri, opts), opts)

    async def read_skill_file(self, skill: str, file: str, *, timeout: Timeout = None,
                              tag: Optional[str] = None) -> Dict[str, Any]:
        """See ``mcplug.Client.read_skill_file``."""
        opts = call_options(timeout, tag or new_tag())
        return await _run(lambda: self._core.read_skill_file(skill, file, opts), opts)

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
        format: Optional[str] = None,
    ) -> Dict[str, Any]:
        """The raw CallToolResult; cancelling the task cancels the call on the server too (and
        ``tasks/cancel`` for a call that became a task). See ``mcplug.Client.call_tool``."""
        if arguments is not None and not isinstance(arguments, Mapping):
            raise InvalidArgumentError(f"`arguments` must be a dict (got {type(arguments).__name__})")
        opts = put_format(put_task_options(call_options(timeout, tag or new_tag()), task, task_ttl, validate_arguments), format)
        return await _run(lambda: self._core.call_tool(name, arguments, opts, progress), opts)

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
        return await _run(lambda: self._core.request(method, params, opts, progress), opts)

    async def list_resources(self, *, timeout: Timeout = None, tag: Optional[str] = None, cache: Optional[bool] = None) -> List[Dict[str, Any]]:
        """See ``mcplug.Client.list_resources``."""
        listed = await self.request("resources/list", timeout=timeout, tag=tag, all_pages=True, cache=cache)
        return _items(listed, "resources")

    async def list_resource_templates(
        self, *, timeout: Timeout = None, tag: Optional[str] = None, cache: Optional[bool] = None
    ) -> List[Dict[str, Any]]:
        """See ``mcplug.Client.list_resource_templates``."""
        listed = await self.request("resources/templates/list", timeout=timeout, tag=tag, all_pages=True, cache=cache)
        return _items(listed, "resourceTemplates")

    async def read_resource(self, uri: str, *, timeout: Timeout = None, tag: Optional[str] = None,
                            cache: Optional[bool] = None) -> Dict[str, Any]:
        """See ``mcplug.Client.read_resource``."""
        return await self.request("resources/read", {"uri": _string(uri, "uri")}, timeout=timeout, tag=tag, cache=cache)

    async def list_prompts(self, *, timeout: Timeout = None, tag: Optional[str] = None, cache: Optional[bool] = None) -> List[Dict[str, Any]]:
        """See ``mcplug.Client.list_prompts``."""
        return _items(await self.request("prompts/list", timeout=timeout, tag=tag, all_pages=True, cache=cache), "prompts")

    async def get_prompt(self, name: str, arguments: Optional[Mapping[str, str]] = None, *, timeout: Timeout = None,
                         tag: Optional[str] = None) -> Dict[str, Any]:
        """See ``mcplug.Client.get_prompt``."""
        return await self.request("prompts/get", _prompt_params(name, arguments), timeout=timeout, tag=tag)

    async def complete(self, ref: Mapping[str, Any], argument: Mapping[str, str], *, context: Optional[Mapping[str, str]] = None,
                       timeout: Timeout = None, tag: Optional[str] = None) -> Dict[str, Any]:
        """See ``mcplug.Client.complete``."""
        result = await self.request("completion/complete", _complete_params(ref, argument, context), timeout=timeout, tag=tag)
        completion: Dict[str, Any] = result.get("completion", {})
        return completion

    async def ping(self, *, timeout: Timeout = None, tag: Optional[str] = None) -> None:
        """See ``mcplug.Client.ping``."""
        await self.request("ping", timeout=timeout, tag=tag)

    async def subscribe(self, uri: str, *, timeout: Timeout = None, tag: Optional[str] = None) -> None:
        """See ``mcplug.Client.subscribe``."""
        await self.request("resources/subscribe", {"uri": _string(uri, "uri")}, timeout=timeout, tag=tag)

    async def unsubscribe(self, uri: str, *, timeout: Timeout = None, tag: Optional[str] = None) -> None:
        """See ``mcplug.Client.unsubscribe``."""
        await self.request("resources/unsubscribe", {"uri": _string(uri, "uri")}, timeout=timeout, tag=tag)

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

    async def events(self, timeout: Timeout = None) -> AsyncIterator[Dict[str, Any]]:
        """The events no handler took, as they come, until the connection is closed (or, given
        ``timeout``, until none came for that many seconds): ``async for e in client.events()``."""
        async for event in _drain_events(self.next_event, timeout):
            yield event

    def __aiter__(self) -> AsyncIterator[Dict[str, Any]]:
        return self.events()

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


class Server(Served, AsyncManaged):
    """``mcplug.Server`` for asyncio (from ``await manager.serve(...)``): ``url``; ``await
    close()`` (or leaving ``async with``) ends every client's session and stops listening, off
    the loop."""

    def __init__(self, handle: int, info: Dict[str, Any]) -> None:
        self._served(info)
        self._attach(lambda: _free_server(handle))

    async def close(self) -> None:
        if self.closed:
            return
        await asyncio.get_running_loop().run_in_executor(_EXECUTOR, self._close_now)

    def __repr__(self) -> str:
        state = "closed" if self.closed else (self._url or "descriptors")
        return f"<mcplug.aio.Server {state}>"


class Manager(AsyncManaged):
    """Many MCP servers, their tools in one pool, for asyncio: the methods of ``mcplug.Manager``
    as coroutines. ``async with mcplug.aio.Manager(options, handlers) as m: ...`` (create it in
    a coroutine: it belongs to the running loop). Handlers and host tools may be ``async def``
    (run as tasks on this loop, several at once; cancelled when the server no longer needs the
    answer) or plain functions (run on the pump thread). Cancelling a task awaiting
    ``call_tool``, ``read_resource``, ``get_prompt`` or ``request`` cancels the call on its
    server. ``async for event in m`` gives the events no handler took until the manager closes.
    """

    def __init__(self, options: Optional[Mapping[str, Any]] = None, handlers: Optional[Mapping[str, AsyncHandler]] = None) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "mcplug.aio.Manager belongs to a running event loop: create it in a coroutine "
                "(or use `await mcplug.aio.Manager.create(...)`); mcplug.Manager is the synchronous one"
            ) from None
        handle, info, checked, manual = new_manager(options, handlers, True, "Manager")
        self._sink = _LoopSink(loop)
        self._core = ManagerCore(handle, info, checked, manual, _LoopRunner(loop), self._sink)
        # Configurations apply in the order they were given (connect, add/remove_host_server):
        # the pool's threads could otherwise run a later one first.
        self._configuring = asyncio.Lock()
        self._core.start()
        self._attach(self._core.close)

    @classmethod
    async def create(cls, options: Optional[Mapping[str, Any]] = None, handlers: Optional[Mapping[str, AsyncHandler]] = None) -> "Manager":
        """The same as ``Manager(options, handlers)`` (in this loop)."""
        return cls(options, handlers)

    async def connect(self, config: Union[Mapping[str, Any], str]) -> Dict[str, Any]:
        """See ``mcplug.Manager.connect``: returns at once with the status."""
        async with self._configuring:
            return await _run(lambda: self._core.connect(config), None)

    async def wait(self, timeout: Timeout = None) -> Dict[str, Any]:
        """Until no server is ``pending``; the status. TimeoutError after ``timeout`` seconds."""
        stop = threading.Event()
        try:
            return await _run(lambda: self._core.wait(timeout, stop.is_set), None)
        except asyncio.CancelledError:
            stop.set()  # the wait on the pool thread ends within its slice
            raise

    async def status(self) -> Dict[str, Any]:
        """See ``mcplug.Manager.status``."""
        return await _run(self._core.status, None)

    async def list_tools(self, server: Optional[str] = None, *, format: Optional[str] = None) -> Dict[str, Any]:
        """The pool: ``{"tools", "dropped"}``; see ``mcplug.Manager.list_tools``."""
        return await _run(lambda: self._core.list_tools(server, format), None)

    async def call_tool(
        self,
        pool_name: str,
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        timeout: Timeout = None,
        tag: Optional[str] = None,
        progress: Union[AsyncHandler, bool, None] = None,
        task: Union[bool, str, None] = None,
        task_ttl: Timeout = None,
        validate_arguments: Optional[bool] = None,
        format: Optional[str] = None,
    ) -> Dict[str, Any]:
        """See ``mcplug.Manager.call_tool``; cancelling the awaiting task cancels the call. No
        thread waits for the call: many thousands may be in flight at once."""
        if arguments is not None and not isinstance(arguments, Mapping):
            raise InvalidArgumentError(f"`arguments` must be a dict (got {type(arguments).__name__})")
        opts = put_format(put_task_options(call_options(timeout, tag), task, task_ttl, validate_arguments), format)
        core = self._core
        result: Dict[str, Any] = await _await_started(core, lambda done: core.call_tool_start(pool_name, arguments, opts, progress, done))
        return result

    async def search_tools(
        self, query: str, max_results: Optional[int] = 5, *, server: Optional[str] = None, format: Optional[str] = None
    ) -> Dict[str, Any]:
        """See ``mcplug.Manager.search_tools``."""
        opts = search_options(max_results, server, format)
        return await _run(lambda: self._core.search_tools(query, opts), None)

    async def list_resources(self, server: Optional[str] = None, *, timeout: Timeout = None) -> Dict[str, Any]:
        """See ``mcplug.Manager.list_resources``."""
        opts = list_options(server, timeout)
        return await _run(lambda: self._core.list_resources(opts), None)

    async def read_resource(self, server: str, uri: str, *, timeout: Timeout = None, tag: Optional[str] = None) -> Dict[str, Any]:
        """See ``mcplug.Manager.read_resource``."""
        opts = call_options(timeout, tag or new_tag())
        return await _run(lambda: self._core.read_resource(server, uri, opts), opts)

    async def list_prompts(self, server: Optional[str] = None, *, timeout: Timeout = None) -> Dict[str, Any]:
        """See ``mcplug.Manager.list_prompts``."""
        opts = list_options(server, timeout)
        return await _run(lambda: self._core.list_prompts(opts), None)

    async def get_prompt(
        self, qualified_name: str, arguments: Union[Mapping[str, str], str, None] = None, *, timeout: Timeout = None, tag: Optional[str] = None
    ) -> Dict[str, Any]:
        """See ``mcplug.Manager.get_prompt`` (a str is a command line)."""
        opts = call_options(timeout, tag or new_tag())
        return await _run(lambda: self._core.get_prompt(qualified_name, arguments, opts), opts)

    async def request(
        self,
        server: str,
        method: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        timeout: Timeout = None,
        tag: Optional[str] = None,
        all_pages: bool = False,
    ) -> Dict[str, Any]:
        """See ``mcplug.Manager.request``."""
        opts = request_options(timeout, tag or new_tag(), all_pages)
        return await _run(lambda: self._core.request(server, method, params, opts, None), opts)

    async def reconnect(self, server: str) -> Dict[str, Any]:
        """See ``mcplug.Manager.reconnect``."""
        return await _run(lambda: self._core.reconnect(server), None)

    async def serve(self, http: Optional[str] = None, *, names: str = "prefixed", fds: Optional[Tuple[int, int]] = None) -> "Server":
        """See ``mcplug.Manager.serve``: an ``mcplug.aio.Server`` (``url``, ``await close()``,
        ``async with``)."""
        options = serve_options("127.0.0.1:0" if http is None and fds is None else http, names, fds)
        handle, info = await _run(lambda: self._core.serve(options), None)
        return Server(handle, info)

    async def authenticate(
        self, server: str, *, wait: bool = False, timeout: Optional[float] = None, callback_url: Optional[str] = None
    ) -> Dict[str, Any]:
        """See ``mcplug.Manager.authenticate``."""
        return await _run(lambda: self._core.authenticate(server, wait, timeout, callback_url), None)

    async def logout(self, server: str) -> Dict[str, Any]:
        """See ``mcplug.Manager.logout``."""
        return await _run(lambda: self._core.logout(server), None)

    async def set_enabled(self, server: str, enabled: bool) -> Dict[str, Any]:
        """See ``mcplug.Manager.set_enabled``."""
        return await _run(lambda: self._core.set_enabled(server, enabled), None)

    async def add_host_server(self, name: str, tools: Sequence[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
        """See ``mcplug.Manager.add_host_server``; the tools' handlers may be ``async def``."""
        async with self._configuring:
            return await _run(lambda: self._core.add_host_server(name, tools, True, "Manager"), None)

    async def remove_host_server(self, name: str) -> bool:
        """See ``mcplug.Manager.remove_host_server``."""
        async with self._configuring:
            return await _run(lambda: self._core.remove_host_server(name), None)

    @property
    def host_servers(self) -> List[str]:
        """The names of the host servers."""
        return self._core.host_servers()

    async def next_event(self, timeout: Timeout = None) -> Optional[Dict[str, Any]]:
        """The next event no handler took, or None after ``timeout`` seconds (None: no limit);
        ClosedError once the manager is closed and every event was read."""
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
            raise InvalidArgumentError(f"`timeout` must be a number of seconds or None (got {timeout!r})")
        return await self._sink.get(None if timeout is None or timeout == float("inf") else float(timeout))

    async def events(self, timeout: Timeout = None) -> AsyncIterator[Dict[str, Any]]:
        """The events no handler took, as they come, until the manager is closed (or, given
        ``timeout``, until none came for that many seconds)."""
        async for event in _drain_events(self.next_event, timeout):
            yield event

    def __aiter__(self) -> AsyncIterator[Dict[str, Any]]:
        return self.events()

    async def respond(self, event_id: str, result: Any = None, *, error: Any = None) -> None:
        """See ``mcplug.Manager.respond``."""
        await _run(lambda: self._core.respond(event_id, result, error), None)

    async def close(self) -> None:
        """Closes every connection off the loop; every server process is gone when this returns."""
        if self.closed:
            return
        await asyncio.get_running_loop().run_in_executor(_EXECUTOR, self._close_now)

    def __repr__(self) -> str:
        return f"<mcplug.aio.Manager {'closed' if self.closed else 'open'}>"
