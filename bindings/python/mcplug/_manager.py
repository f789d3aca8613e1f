"""The manager: many MCP servers and their tools in one pool (``mcplug_manager_*``).

``ManagerCore`` is the client's ``HandleCore`` (the gate, the event pump, closing) over a
manager handle, plus what only a manager has: handlers called with the server's name, and host servers —
tools of the host itself, served in-process (``type: "sdk"`` entries) whose ``tools/call``
requests the binding answers by calling their Python functions. ``Manager`` is the synchronous
front; ``mcplug.aio.Manager`` is the asyncio one over the same core.
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from ctypes import byref, c_void_p

from . import _codec, _ffi
from ._core import (
    drain_events,
    HandleCore,
    QueueSink,
    SyncRunner,
    _is_async_callable,
    _object_json,
    call_options,
    connect_options,
    dumps,
    encode,
    put_format,
    put_task_options,
    put_timeout,
)
from ._errors import InvalidArgumentError, McpError, TimeoutError
from ._managed import Managed
from ._serve import Server, serve_options

TYPE_CHECKING = False  # not typing's: see _codec
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

    from ._core import Completion, Handler, Progress

    Timeout = Optional[float]
    #: A handler of a server's request or notification: ``(params, server)``; event-type keys
    #: ("state", "tools_changed", ...) and "*" get the whole event.
    ManagerHandler = Callable[..., Any]
    #: A host tool's function: ``(arguments) -> CallToolResult dict or str``.
    ToolFunction = Callable[[Dict[str, Any]], Any]

_lib = _ffi.lib

#: ``wait`` asks the library in slices this long, so that a close (or, in asyncio, a cancelled
#: wait) ends it within one slice instead of when every server settled.
WAIT_SLICE_MS = 500


def _config_json(config: Any) -> Dict[str, Any]:
    """The configuration as a dict: a dict as given, or a config file's text."""
    if isinstance(config, str):
        try:
            config = _codec.loads(config)
        except ValueError as e:
            raise InvalidArgumentError(f"`config` is a str but not JSON: {e}") from None
    if not isinstance(config, Mapping):
        raise InvalidArgumentError(
            "`config` must be a dict like {'mcpServers': {'<name>': {...}}} (or the output of "
            f"mcplug.merge_config / discover_config, or a config file's text); got {type(config).__name__}"
        )
    return dict(config)


def with_host_servers(config: Dict[str, Any], host: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """``config`` with the host servers' ``sdk`` entries added to its servers, whichever of the
    library's shapes it has (``mcpServers``, or ``servers`` of merge output or VS Code)."""
    if not host:
        return config
    if "mcpServers" in config:
        key = "mcpServers"
    elif "servers" in config:
        key = "servers"
    elif not config:
        key = "mcpServers"
    else:
        return config  # neither shape: the library names what is wrong
    servers = config.get(key, {})
    if not isinstance(servers, Mapping):
        return config
    servers = dict(servers)
    for name, entry in host.items():
        if name in servers:
            raise InvalidArgumentError(
                f"the configuration has a server named {name!r}, which is a host server's name (add_host_server)"
            )
        servers[name] = entry
    out = dict(config)
    out[key] = servers
    return out


def host_tools(tools: Any, allow_async: bool, owner: str) -> Tuple[List[Dict[str, Any]], Dict[str, ToolFunction]]:
    """A host server's tools as the library takes them (without ``handler``) and their functions
    by name; refuses what cannot work (no name, twice the same name, no function, a coroutine
    function in the sync manager)."""
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, (list, tuple)):
        raise InvalidArgumentError(
            "`tools` must be a list of {'name', 'description', 'inputSchema', 'handler'} dicts "
            f"(got {type(tools).__name__})"
        )
    entries: List[Dict[str, Any]] = []
    functions: Dict[str, ToolFunction] = {}
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise InvalidArgumentError(f"`tools[{i}]` must be a dict (got {type(tool).__name__})")
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"`tools[{i}]` has no `name` (a non-empty str)")
        if name in functions:
            raise InvalidArgumentError(f"`tools` has two tools named {name!r}")
        fn = tool.get("handler")
        if not callable(fn):
            raise InvalidArgumentError(f"the tool {name!r} has no `handler` (a function of its arguments)")
        if not allow_async and _is_async_callable(fn):
            raise InvalidArgumentError(
                f"the handler of the tool {name!r} is an async function: the sync mcplug.{owner} runs plain "
                f"functions; use mcplug.aio.{owner} for coroutine handlers"
            )
        functions[name] = fn
        entries.append({k: v for k, v in tool.items() if k != "handler"})
    dumps(entries, "tools")  # JSON now, so a bad schema is named here and not at connect
    return entries, functions


def _text_result(text: str, is_error: bool = False) -> Dict[str, Any]:
    result: Dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return result


def tool_outcome(result: Any, exc: Optional[BaseException]) -> Tuple[Any, Optional[BaseException]]:
    """What a host tool's function did, as the CallToolResult to answer with: a dict as it is (it
    must have a ``content`` list), a str as one text item, a raise as an ``isError`` result with
    its message; anything else is an ``isError`` result saying what came back."""
    if exc is not None:
        return _text_result(str(exc) or type(exc).__name__, True), None
    if isinstance(result, str):
        return _text_result(result), None
    if isinstance(result, Mapping):
        if not isinstance(result.get("content"), list):
            return _text_result("the host tool returned a dict without a `content` list: a CallToolResult has one", True), None
        return dict(result), None
    return _text_result(
        f"the host tool returned {type(result).__name__}: a host tool returns a CallToolResult dict or a str", True
    ), None


def _server_arg(server: Optional[str], what: str = "server") -> Optional[str]:
    if server is not None and (not isinstance(server, str) or not server):
        raise InvalidArgumentError(f"`{what}` must be a server's name (a non-empty str), got {server!r}")
    return server


def list_options(server: Optional[str], timeout: Timeout) -> Dict[str, Any]:
    """The options of list_resources / list_prompts: ``server`` and ``timeout_ms``."""
    opts: Dict[str, Any] = {}
    if _server_arg(server) is not None:
        opts["server"] = server
    put_timeout(opts, "timeout_ms", timeout, "timeout")
    return opts


def search_options(max_results: Optional[int], server: Optional[str], format: Optional[str] = None) -> Dict[str, Any]:
    opts: Dict[str, Any] = put_format({}, format)
    if max_results is not None:
        if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
            raise InvalidArgumentError(f"`max_results` must be a positive int (got {max_results!r})")
        opts["max_results"] = max_results
    if _server_arg(server) is not None:
        opts["server"] = server
    return opts


def request_options(timeout: Timeout, tag: Optional[str], all_pages: bool) -> Dict[str, Any]:
    opts = call_options(timeout, tag)
    if all_pages:
        opts["all_pages"] = True
    return opts


def new_manager(
    options: Optional[Mapping[str, Any]],
    handlers: Optional[Mapping[str, ManagerHandler]],
    allow_async: bool,
    owner: str,
) -> Tuple[int, Dict[str, Any], Dict[str, Any], Any]:
    """Creates the native manager; returns its handle, its status, the checked handlers and the
    request methods the host answers by hand. The handlers' capabilities (sampling, elicitation,
    roots) are declared in ``options["connection"]``, for every server."""
    if options is not None and not isinstance(options, Mapping):
        raise InvalidArgumentError(f"`options` must be a dict of manager options (got {type(options).__name__})")
    opts = dict(options or {})
    connection = opts.get("connection")
    if connection is not None and not isinstance(connection, Mapping):
        raise InvalidArgumentError(f"`options['connection']` must be a dict of connection options (got {type(connection).__name__})")
    conn, manual = connect_options(handlers, None, None, None, connection, allow_async=allow_async, owner=owner)
    if conn or connection is not None:
        opts["connection"] = conn
    checked = dict(handlers or {})
    handle = c_void_p()
    status, text = _ffi.invoke(_lib.mcplug_manager_new, dumps(opts, "options") if opts else None, byref(handle))
    info = _ffi.checked(status, text)
    assert handle.value, "mcplug_manager_new returned OK without a handle"
    return int(handle.value), info, checked, manual


class ManagerCore(HandleCore):
    """A manager handle behind the client's gate and pump, with the manager's calls."""

    WHAT = "manager"
    _NEXT_EVENT = _lib.mcplug_manager_next_event
    _RESPOND = _lib.mcplug_manager_respond
    _CLOSE = _lib.mcplug_manager_close
    _FREE = _lib.mcplug_manager_free
    _NEXT_EVENTS = _lib.mcplug_manager_next_events
    _CANCEL_CALL = _lib.mcplug_manager_cancel_call

    def __init__(self, handle: int, info: Dict[str, Any], handlers: Dict[str, Handler], manual: Any, runner: Any, sink: Any) -> None:
        super().__init__(handle, info, handlers, manual, runner, sink)
        #: Host servers: name -> (their tools as the library takes them, their functions).
        self._host: Dict[str, Tuple[List[Dict[str, Any]], Dict[str, ToolFunction]]] = {}
        #: The configuration last given to ``connect`` (host servers are added to it each time).
        self._config: Optional[Dict[str, Any]] = None
        #: One configuration change at a time (connect, add/remove_host_server).
        self._config_lock = threading.Lock()
        #: Ids of host tools' calls not answered yet.
        self._tool_calls: Set[str] = set()

    # -- events ----------------------------------------------------------------------------------

    def _bind(self, handler: Handler, event: Dict[str, Any]) -> Handler:
        server = event.get("server")
        two: Callable[..., Any] = handler  # a manager's handlers take (params, server)
        return lambda params: two(params, server)

    def _on_request(self, event: Dict[str, Any]) -> None:
        if event.get("method") == "tools/call":
            server = event.get("server")
            event_id = event.get("id")
            with self._cond:
                host = self._host.get(server) if isinstance(server, str) else None
            if host is not None and isinstance(event_id, str):
                params = event.get("params") or {}
                name = params.get("name")
                fn = host[1].get(name) if isinstance(name, str) else None
                if fn is None:
                    self._respond_quietly(event_id, _text_result(f"host server {server!r} has no tool {name!r}", True), None)
                    return
                arguments = params.get("arguments")
                with self._cond:
                    self._tool_calls.add(event_id)
                # Answering a host tool's call hands the result to the waiting call (no write to
                # a server): quick enough for the loop thread.
                self._answer_with(event_id, fn, {} if arguments is None else arguments, tool_outcome, quick=True)
                return
        super()._on_request(event)

    def _dispatch(self, event: Dict[str, Any]) -> None:
        if event.get("type") in ("request_cancelled", "request_expired"):
            with self._cond:
                self._tool_calls.discard(str(event.get("id")))
        super()._dispatch(event)

    def _respond_quietly(self, event_id: str, result: Any, error: Any) -> None:
        with self._cond:
            tool_call = event_id in self._tool_calls
            self._tool_calls.discard(event_id)
        if tool_call and error is None:
            try:
                self.respond(event_id, result, None)
                return
            except InvalidArgumentError as e:  # not JSON, not a CallToolResult: the caller learns why
                result = _text_result(f"the host tool's result was refused: {e.message}", True)
            except McpError:
                pass  # no longer waiting, or closed: as for any request, below
        super()._respond_quietly(event_id, result, error)

    # -- calls -----------------------------------------------------------------------------------

    def _checked(self, fn: Any, *args: Any) -> Any:
        status, text = self._invoke(fn, *args)
        return _ffi.checked(status, text)

    def _opts(self, options: Optional[Dict[str, Any]]) -> Optional[bytes]:
        return dumps(options, "options") if options else None

    def _host_entries(self) -> Dict[str, Dict[str, Any]]:
        with self._cond:
            return {name: {"type": "sdk", "tools": tools} for name, (tools, _) in self._host.items()}

    def _apply(self, config: Dict[str, Any]) -> Dict[str, Any]:
        """Gives ``config`` plus the host servers to the library (the config lock is held)."""
        result: Dict[str, Any] = self._checked(_lib.mcplug_manager_connect, dumps(with_host_servers(config, self._host_entries()), "config"))
        self._config = config
        return result

    def connect(self, config: Any) -> Dict[str, Any]:
        config = _config_json(config)
        with self._config_lock:
            return self._apply(config)

    def add_host_server(self, name: str, tools: Any, allow_async: bool, owner: str) -> Optional[Dict[str, Any]]:
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"`name` must be a non-empty str (got {name!r})")
        entries, functions = host_tools(tools, allow_async, owner)
        with self._config_lock:
            with self._cond:
                previous = self._host.get(name)
            if previous is None and self._config is not None:
                known = self.status().get("servers", {})
                if name in known:
                    raise InvalidArgumentError(f"{name!r} is a server of the configuration, not a host server")
            with self._cond:
                self._host[name] = (entries, functions)
            try:
                if previous is not None and self._config is not None:
                    entry: Dict[str, Any] = self._checked(_lib.mcplug_manager_set_tools, encode(name, "name"), dumps(entries, "tools"))
                    return entry
                if self._config is not None:
                    return dict(self._apply(self._config).get("servers", {}).get(name) or {}) or None
                return None  # added to the first connect's configuration
            except BaseException:
                with self._cond:
                    if previous is None:
                        self._host.pop(name, None)
                    else:
                        self._host[name] = previous
                raise

    def remove_host_server(self, name: str) -> bool:
        with self._config_lock:
            with self._cond:
                previous = self._host.pop(name, None)
            if previous is None:
                return False
            if self._config is not None:
                try:
                    self._apply(self._config)
                except BaseException:
                    with self._cond:
                        self._host[name] = previous
                    raise
            return True

    def host_servers(self) -> List[str]:
        with self._cond:
            return list(self._host)

    def wait(self, timeout: Timeout, stopped: Optional[Callable[[], bool]] = None) -> Dict[str, Any]:
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or math.isnan(timeout) or timeout < 0):
            raise InvalidArgumentError(f"`timeout` must be a number of seconds >= 0, or None (got {timeout!r})")
        deadline = None if timeout is None or math.isinf(timeout) else time.monotonic() + timeout
        while True:
            slice_ms = WAIT_SLICE_MS
            if deadline is not None:
                slice_ms = max(0, min(slice_ms, int(math.ceil((deadline - time.monotonic()) * 1000))))
            status, text = self._invoke(_lib.mcplug_manager_wait, dumps({"timeout_ms": slice_ms}, "options"))
            if status != _ffi.TIMEOUT:
                result: Dict[str, Any] = _ffi.checked(status, text)
                return result
            if stopped is not None and stopped():
                raise TimeoutError("the wait was given up", kind="timeout")
            if deadline is not None and time.monotonic() >= deadline:
                servers = self.status().get("servers", {})
                pending = [n for n, s in servers.items() if s.get("state") == "pending"]
                raise TimeoutError(f"servers still pending after {timeout} s: {', '.join(pending) or '(none now)'}", kind="timeout")

    def status(self) -> Dict[str, Any]:
        result: Dict[str, Any] = self._checked(_lib.mcplug_manager_status)
        return result

    def list_tools(self, server: Optional[str], format: Optional[str] = None) -> Dict[str, Any]:
        opts: Dict[str, Any] = {"server": server} if _server_arg(server) is not None else {}
        put_format(opts, format)
        result: Dict[str, Any] = self._checked(_lib.mcplug_manager_list_tools, self._opts(opts or None))
        return result

    def call_tool(self, pool_name: str, arguments: Optional[Mapping[str, Any]], options: Optional[Dict[str, Any]], progress: Progress) -> Dict[str, Any]:
        name_b = encode(pool_name, "pool_name")
        result: Dict[str, Any] = self._call(_lib.mcplug_manager_call_tool, (name_b, _object_json(arguments, "arguments")), options, progress)
        return result

    def call_tool_start(
        self, pool_name: str, arguments: Optional[Mapping[str, Any]], options: Optional[Dict[str, Any]], progress: Progress, done: Completion
    ) -> int:
        """Starts a pool tool's call without waiting; ``done`` gets its completion event (see
        ``HandleCore._start``). Returns the call's number, for ``cancel_started``."""
        name_b = encode(pool_name, "pool_name")
        return self._start(_lib.mcplug_manager_call_tool_start, (name_b, _object_json(arguments, "arguments")), options, progress, done)

    def search_tools(self, query: str, options: Dict[str, Any]) -> Dict[str, Any]:
        result: Dict[str, Any] = self._checked(_lib.mcplug_manager_search_tools, encode(query, "query"), self._opts(options))
        return result

    def list_resources(self, options: Dict[str, Any]) -> Dict[str, Any]:
        result: Dict[str, Any] = self._checked(_lib.mcplug_manager_list_resources, self._opts(options))
        return result

    def read_resource(self, server: str, uri: str, options: Dict[str, Any]) -> Dict[str, Any]:
        result: Dict[str, Any] = self._checked(
            _lib.mcplug_manager_read_resource, encode(server, "server"), encode(uri, "uri"), self._opts(options)
        )
        return result

    def list_prompts(self, options: Dict[str, Any]) -> Dict[str, Any]:
        result: Dict[str, Any] = self._checked(_lib.mcplug_manager_list_prompts, self._opts(options))
        return result

    def get_prompt(self, name: str, arguments: Union[Mapping[str, Any], str, None], options: Dict[str, Any]) -> Dict[str, Any]:
        # A str is a command line (`a "b c"`), mapped by the library onto the declared arguments.
        args = dumps(arguments, "arguments") if isinstance(arguments, str) else _object_json(arguments, "arguments")
        result: Dict[str, Any] = self._checked(_lib.mcplug_manager_get_prompt, encode(name, "name"), args, self._opts(options))
        return result

    def request(self, server: str, method: str, params: Optional[Mapping[str, Any]], options: Dict[str, Any], progress: Progress) -> Dict[str, Any]:
        args = (encode(server, "server"), encode(method, "method"), _object_json(params, "params"))
        result: Dict[str, Any] = self._call(_lib.mcplug_manager_request, args, options, progress)
        return result

    def reconnect(self, server: str) -> Dict[str, Any]:
        result: Dict[str, Any] = self._checked(_lib.mcplug_manager_reconnect, encode(server, "server"))
        return result

    def serve(self, options: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
        """A new server handle serving the pool, and ``{"url"}``."""
        handle = c_void_p()
        result: Dict[str, Any] = self._checked(_lib.mcplug_manager_serve, dumps(options, "options"), byref(handle))
        assert handle.value, "mcplug_manager_serve returned OK without a handle"
        return int(handle.value), result

    def authenticate(self, server: str, wait: bool, timeout: Timeout, callback_url: Optional[str]) -> Dict[str, Any]:
        if not isinstance(wait, bool):
            raise InvalidArgumentError(f"`wait` must be True or False (got {wait!r})")
        opts: Dict[str, Any] = {"wait": wait}
        put_timeout(opts, "timeout_ms", timeout, "timeout")
        if callback_url is not None:
            opts["callback_url"] = callback_url
        result: Dict[str, Any] = self._checked(_lib.mcplug_manager_authenticate, encode(server, "server"), dumps(opts, "options"))
        return result

    def logout(self, server: str) -> Dict[str, Any]:
        result: Dict[str, Any] = self._checked(_lib.mcplug_manager_logout, encode(server, "server"))
        return result

    def set_enabled(self, server: str, enabled: bool) -> Dict[str, Any]:
        if not isinstance(enabled, bool):
            raise InvalidArgumentError(f"`enabled` must be True or False (got {enabled!r})")
        result: Dict[str, Any] = self._checked(_lib.mcplug_manager_set_enabled, encode(server, "server"), 1 if enabled else 0)
        return result


class Manager(Managed):
    """Many MCP servers, their tools in one pool under the names ``mcp__<server>__<tool>``.

    ::

        with mcplug.Manager({"local_concurrency": 3}, handlers={"sampling/createMessage": sample}) as m:
            m.connect({"mcpServers": {"fs": {"command": "mcp-server-filesystem", "args": ["/srv"]},
                                      "web": {"type": "http", "url": "https://example.com/mcp"}}})
            m.wait(30)                                   # or watch the "state" events
            m.call_tool("mcp__fs__list_directory", {"path": "/srv"})

    ``connect`` returns at once; each server connects in its own slot (a slow or failing one
    delays nobody), is reconnected when its connection is lost, and reports each change of state
    as an event ``{"type": "state", "server", "state", ...}``.

    ``options`` (the library's manager options, times in milliseconds): ``local_concurrency``
    (3), ``remote_concurrency`` (20), ``connection`` (connection options for every server, as
    ``Client.connect``'s ``options``), ``max_description_chars`` (2048), ``max_output_tokens``
    (25000) or ``max_output_chars``, ``terminal_errors`` (3), ``reconnect_initial_ms`` (1000),
    ``reconnect_max_ms`` (30000), ``reconnect_attempts`` (5), ``disabled`` (server names),
    ``max_events`` (10000), ``max_media_bytes`` (5242880, base64 bytes of one result's media;
    None: no limit), ``output_dir`` (outputs over their limit kept whole in files there, named in
    the result), ``output_dir_max_bytes`` (1 GiB), ``resource_tools`` (True: Claude Code's
    ``ListMcpResourcesTool`` and ``ReadMcpResourceTool`` in the pool while a server offers
    resources), ``policy`` (``{"allowedMcpServers": [...], "deniedMcpServers": [...]}``,
    applied to every configuration ``connect`` is given; what it refuses is left out and listed
    in the result's ``excluded``), ``registry`` (True: the official MCP registry, or a base URL:
    fetched in the background at the first ``connect``; a server it knows carries ``registry``
    ``{name, status, match}`` in ``status()`` and on its pool entries).

    ``handlers`` maps a method or event type to a function, as for ``Client.connect``, except
    that request and notification handlers are called with ``(params, server)`` — the name of
    the server that asked. A request handler declares its capability to every server
    (``sampling``, ``elicitation``, ``roots``); what it returns answers the server and what it
    raises becomes a JSON-RPC error. Event types get the whole event (which names its server):
    ``"state"``, ``"tools_changed"``, ``"removed"``, ``"resources_changed"``,
    ``"prompts_changed"``, ``"request_cancelled"``, ``"request_expired"``, ``"warning"``,
    ``"stderr"``, ``"closed"``; ``"*"`` every other event. Events no handler takes wait for
    ``next_event`` / ``events()``. Handlers run on the manager's pump thread, one at a time: a
    handler must not wait for another event of the same manager (a host tool's function calling
    another host tool of this manager would wait for itself).

    Every method may be called from any thread. Close the manager (``with``/``close()``): every
    server process is gone when ``close`` returns; a forgotten manager is closed when
    garbage-collected or at exit.
    """

    def __init__(self, options: Optional[Mapping[str, Any]] = None, handlers: Optional[Mapping[str, ManagerHandler]] = None) -> None:
        handle, info, checked, manual = new_manager(options, handlers, False, "Manager")
        self._core = ManagerCore(handle, info, checked, manual, SyncRunner(), QueueSink())
        self._core.start()
        self._attach(self._core.close)

    def connect(self, config: Union[Mapping[str, Any], str]) -> Dict[str, Any]:
        """Applies a configuration and starts connecting its servers; returns at once with the
        status (each new server ``pending``, ``disabled``, or ``failed`` for an entry that cannot
        be used). ``config``: a config file's content (``{"mcpServers": {"<name>": {...}}}``, as
        a dict or its text), the output of ``mcplug.merge_config``/``discover_config``, or VS
        Code's ``{"servers": {...}}``. Calling it again applies a new configuration: unchanged
        servers stay, changed ones reconnect, the others are closed (event ``removed``). The
        host servers (``add_host_server``) are added to every configuration. Raises
        InvalidArgumentError for a configuration of neither shape."""
        return self._core.connect(config)

    def wait(self, timeout: Timeout = None) -> Dict[str, Any]:
        """Waits until no server is ``pending`` and returns the status; TimeoutError (naming the
        servers still pending) after ``timeout`` seconds (None: as long as it takes)."""
        return self._core.wait(timeout)

    def status(self) -> Dict[str, Any]:
        """``{"servers": {"<name>": {"state", "transport", "tools": [pool names], "error"?,
        "attempt"?, "server_info"?, "protocol_version"?, "era"?}}, "tools": <pool size>}``,
        servers in configuration order. States: ``pending``, ``connected``, ``failed``,
        ``needs-auth``, ``disabled``."""
        return self._core.status()

    def list_tools(self, server: Optional[str] = None, *, format: Optional[str] = None) -> Dict[str, Any]:
        """The pool (of one server's tools, given ``server``): ``{"tools": [...], "dropped":
        [...]}``. Each tool: ``name`` (the pool name ``mcp__<server>__<tool>``), ``server``,
        ``tool`` (the server's own name), ``description`` (cleaned and capped), ``inputSchema``,
        ``outputSchema``/``annotations``/``title``/``_meta`` when sent, and ``read_only``,
        ``destructive``, ``always_load``, ``search_hint``. A tool whose pool name another of its
        server took is in ``dropped`` (``reason`` ``"duplicate"``); a name tools of two servers
        make (``mcp__x__y__z``: x's ``y__z``, x__y's ``z``) goes to neither, both in ``dropped``
        (``reason`` ``"collision"``), and call_tool by it raises NotFoundError naming both. Only connected servers' tools are in the pool."""
        return self._core.list_tools(server, format)

    def call_tool(
        self,
        pool_name: str,
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        timeout: Timeout = None,
        tag: Optional[str] = None,
        progress: Union[Callable[[Dict[str, Any]], Any], bool, None] = None,
        task: Union[bool, str, None] = None,
        task_ttl: Timeout = None,
        validate_arguments: Optional[bool] = None,
        format: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Calls a pool tool by its pool name on its server; the CallToolResult, its text cleaned
        (bidirectional controls and zero-width characters removed) and capped, then in
        ``format`` when given. The options are ``Client.call_tool``'s. Raises NotFoundError (no such pool name; the message says when
        its server is not connected), ClosedError (the server is not connected now), and the
        errors of ``Client.call_tool``."""
        opts = put_format(put_task_options(call_options(timeout, tag), task, task_ttl, validate_arguments), format)
        return self._core.call_tool(pool_name, arguments, opts, progress)

    def search_tools(self, query: str, max_results: Optional[int] = 5, *, server: Optional[str] = None, format: Optional[str] = None) -> Dict[str, Any]:
        """Ranks the pool by ``query``: words matched against each tool's name, search hint and
        description (case-insensitive); ``"+word"``: must match; ``"select:a,b"``: exactly those
        pool names (or server tool names). ``{"tools": [pool entries with "score"], "total":
        <matches before the cut>}``."""
        return self._core.search_tools(query, search_options(max_results, server, format))

    def list_resources(self, server: Optional[str] = None, *, timeout: Timeout = None) -> Dict[str, Any]:
        """The resources of every connected server that has them (all pages, servers at once):
        ``{"resources": [resource + "server"], "templates": [template + "server"], "errors":
        {"<server>": {"kind", "message"}}}``."""
        return self._core.list_resources(list_options(server, timeout))

    def read_resource(self, server: str, uri: str, *, timeout: Timeout = None, tag: Optional[str] = None) -> Dict[str, Any]:
        """``resources/read`` of ``uri`` on ``server``: the ReadResourceResult, text cleaned."""
        return self._core.read_resource(server, uri, call_options(timeout, tag))

    def list_prompts(self, server: Optional[str] = None, *, timeout: Timeout = None) -> Dict[str, Any]:
        """The prompts of every connected server that has them: ``{"prompts": [prompt +
        "server" + "prompt" (the server's own name); "name" is the qualified
        "mcp__<server>__<prompt>"], "errors": {...}, "dropped": [...]}``: a name prompts of two
        servers make goes to neither, both in ``dropped`` (``reason`` ``"collision"``), as tools."""
        return self._core.list_prompts(list_options(server, timeout))

    def get_prompt(
        self, qualified_name: str, arguments: Union[Mapping[str, str], str, None] = None, *, timeout: Timeout = None, tag: Optional[str] = None
    ) -> Dict[str, Any]:
        """``prompts/get`` by the qualified name (``mcp__<server>__<prompt>``): the GetPromptResult,
        its text cleaned and capped. ``arguments``: a dict, or a command line as a user types it
        after ``/mcp__server__prompt`` (``'a "b c"'``), split as a shell splits words and mapped
        onto the prompt's declared arguments in order (as Claude Code maps its slash commands)."""
        return self._core.get_prompt(qualified_name, arguments, call_options(timeout, tag))

    def request(
        self,
        server: str,
        method: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        timeout: Timeout = None,
        tag: Optional[str] = None,
        all_pages: bool = False,
    ) -> Dict[str, Any]:
        """Any request to one named server (``resources/subscribe``, ``completion/complete``,
        ...); its raw result. ``all_pages`` follows nextCursor of list methods."""
        return self._core.request(server, method, params, request_options(timeout, tag, all_pages), None)

    def reconnect(self, server: str) -> Dict[str, Any]:
        """Closes the server's connection and connects it again (one attempt, waited for);
        returns its status entry. NotFoundError for an unknown server."""
        return self._core.reconnect(server)

    def serve(self, http: Optional[str] = None, *, names: str = "prefixed", fds: Optional[Tuple[int, int]] = None) -> Server:
        """Serves the pool as one MCP server, for other agents (any MCP host): over Streamable
        HTTP at ``http`` (``"127.0.0.1:0"`` when neither is given: a port of its own; both
        protocol eras; requests whose Host or Origin is not this machine's are refused), or to
        one client over ``fds=(read_fd, write_fd)`` (newline-delimited, as stdio). ``names``:
        ``"prefixed"`` (``mcp__<server>__<tool>``) or ``"unprefixed"`` (the servers' own names;
        the first server in configuration order wins a collision). Host servers are served
        too: their calls come to this manager's handlers as ever. Results pass as the servers
        sent them; what a server asks during a client's call (sampling, elicitation, roots) is
        asked of that client. Returns a ``Server`` (``url``, ``close()``, a context manager)."""
        options = serve_options("127.0.0.1:0" if http is None and fds is None else http, names, fds)
        handle, info = self._core.serve(options)
        return Server(handle, info)

    def authenticate(self, server: str, *, wait: bool = False, timeout: Timeout = None, callback_url: Optional[str] = None) -> Dict[str, Any]:
        """Authorizes a remote server (OAuth). The manager never starts an authorization on its
        own: a server without a usable token is ``needs-auth`` (its status has ``auth``:
        ``{"reason", "issuer"?, "scope"?, "resource_metadata"?}``) and its only pool tool is
        ``mcp__<server>__authenticate``. This connects it again, allowed to authorize, and
        returns as soon as the authorization's URL is known: its status entry with
        ``"state": "pending"`` and ``"authorization": {"url", "redirect_uri", "issuer",
        "scope"?}`` — send the user to ``url``; the library's loopback listener takes the
        browser's callback and the server connects, its tools replacing the pseudo-tool (a
        ``state`` event). When no user is needed it returns the connected server's status.
        ``wait=True``: returns only when the authorization has ended (the connected server's
        status; NeedsAuthError when it failed), ``timeout`` seconds at most.
        ``callback_url``: the redirect the host captured itself (with ``code``, ``state``,
        ``iss``), completing the authorization under way. A server already connected is left as
        it is. InvalidArgumentError for a local or disabled server."""
        return self._core.authenticate(server, wait, timeout, callback_url)

    def logout(self, server: str) -> Dict[str, Any]:
        """Forgets the server's stored credentials (tokens, registrations), closes its connection
        and connects it once more without authorizing (a server that needs authorization ends
        ``needs-auth``). Returns its status entry with ``"forgotten": True|False``."""
        return self._core.logout(server)

    def set_enabled(self, server: str, enabled: bool) -> Dict[str, Any]:
        """Disables a server (its connection closes, its tools leave the pool) or enables it
        again (it starts connecting; this does not wait). Returns its status entry."""
        return self._core.set_enabled(server, enabled)

    def add_host_server(self, name: str, tools: Sequence[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
        """Serves tools of the host itself as the in-process server ``name``: ``tools`` is a list
        of ``{"name", "description", "inputSchema", "handler"}`` (``annotations``, ``title``,
        ``outputSchema``, ``_meta`` too), where ``handler(arguments)`` returns a CallToolResult
        dict or a str (one text item); what it raises becomes an ``isError`` result with its
        message. The tools join the pool as ``mcp__<name>__<tool>`` like any server's. Called
        again with the same name, it replaces the tools. Before the first ``connect`` the server
        waits for it; after, it is added at once. Returns the server's status entry (None before
        the first ``connect``)."""
        return self._core.add_host_server(name, tools, False, "Manager")

    def remove_host_server(self, name: str) -> bool:
        """Stops serving the host server ``name`` (event ``removed``); False if there was none."""
        return self._core.remove_host_server(name)

    @property
    def host_servers(self) -> List[str]:
        """The names of the host servers."""
        return self._core.host_servers()

    def next_event(self, timeout: Timeout = None) -> Optional[Dict[str, Any]]:
        """The next event no handler took (each names its ``server``), or None after ``timeout``
        seconds (None: wait as long as it takes). Raises ClosedError once the manager is closed
        and every event was read."""
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
            raise InvalidArgumentError(f"`timeout` must be a number of seconds or None (got {timeout!r})")
        sink = self._core._sink
        assert isinstance(sink, QueueSink)
        return sink.get(None if timeout is None or timeout == float("inf") else float(timeout))

    def events(self, timeout: Timeout = None) -> Iterator[Dict[str, Any]]:
        """The events no handler took, as they come, until the manager is closed (or, given
        ``timeout``, until none came for that many seconds)."""
        return drain_events(self.next_event, timeout)

    def respond(self, event_id: str, result: Any = None, *, error: Any = None) -> None:
        """Answers a server's request event by hand, by its (manager) id: ``result``, or ``error``
        (``{"code", "message"}`` or an exception). NotFoundError if no request with that id waits."""
        self._core.respond(event_id, result, error)

    def close(self) -> None:
        """Closes every connection; every server process is gone when this returns. Blocked
        calls raise ClosedError. Safe to call twice, and from a handler."""
        self._close_now()

    def __repr__(self) -> str:
        if self.closed:
            return "<mcplug.Manager closed>"
        try:
            servers = self._core.status().get("servers", {})
        except McpError:
            return "<mcplug.Manager>"
        return f"<mcplug.Manager {len(servers)} servers open>"
