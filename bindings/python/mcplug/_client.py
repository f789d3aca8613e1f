"""The synchronous client."""
from __future__ import annotations

from ._core import Core, QueueSink, SyncRunner, call_options, connect_blocking, connect_options
from ._errors import InvalidArgumentError
from ._managed import Managed

TYPE_CHECKING = False  # not typing's: see _codec
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Mapping, Optional, Union

    from ._core import Handler

    Timeout = Optional[float]


class _Info:
    """The connect result, shared by the sync and asyncio clients."""

    _core: Core

    @property
    def connect_result(self) -> Dict[str, Any]:
        """Everything the library returned at connect (``result`` is the server's raw answer)."""
        return self._core.info

    @property
    def name(self) -> Optional[str]:
        return self._core.info.get("name")

    @property
    def server_info(self) -> Dict[str, Any]:
        return self._core.info.get("server_info") or {}

    @property
    def protocol_version(self) -> str:
        return str(self._core.info.get("protocol_version", ""))

    @property
    def era(self) -> str:
        """"modern" (2026-07-28 and later, no initialize) or "legacy" (initialize handshake)."""
        return str(self._core.info.get("era", ""))

    @property
    def capabilities(self) -> Dict[str, Any]:
        """The server's capabilities."""
        return self._core.info.get("capabilities") or {}

    @property
    def instructions(self) -> Optional[str]:
        return self._core.info.get("instructions")


class Client(_Info, Managed):
    """One MCP server. Every method may be called from any thread; events are pumped on a
    daemon thread and routed to ``handlers`` (which run on that thread)."""

    def __init__(self, _core: Core) -> None:
        if not isinstance(_core, Core):
            raise TypeError("use mcplug.Client.connect(...) to create a Client")
        self._core = _core
        self._attach(_core.close)

    @classmethod
    def connect(
        cls,
        server: Mapping[str, Any],
        *,
        handlers: Optional[Mapping[str, Handler]] = None,
        connect_timeout: Timeout = None,
        request_timeout: Timeout = None,
        tool_timeout: Timeout = None,
        options: Optional[Mapping[str, Any]] = None,
    ) -> "Client":
        """Starts the server (``{"command", "args", "env", "cwd"}``) and negotiates.

        ``handlers`` maps a method ("sampling/createMessage", "notifications/message", ...) to a
        function of its params; "*" gets every other event. Timeouts are seconds (None: the
        library default, ``math.inf``: no limit); ``options`` are passed to the library as-is.
        """
        opts, manual = connect_options(handlers, connect_timeout, request_timeout, tool_timeout, options)
        handle, info = connect_blocking(server, opts)
        core = Core(handle, info, handlers, manual, SyncRunner(), QueueSink())
        core.start()
        return cls(core)

    def list_tools(self, *, timeout: Timeout = None, tag: Optional[str] = None) -> List[Dict[str, Any]]:
        """Every tool, following pagination."""
        return self._core.list_tools(call_options(timeout, tag))

    def call_tool(
        self,
        name: str,
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        timeout: Timeout = None,
        tag: Optional[str] = None,
        progress: Union[Callable[[Dict[str, Any]], Any], bool, None] = None,
    ) -> Dict[str, Any]:
        """The raw CallToolResult (``isError`` results are returned, not raised).

        ``progress`` is called (on the pump thread) with the params of each
        notifications/progress of this call, all before this returns; ``progress=True`` only asks
        for them, and they arrive as events carrying the call's tag. ``tag`` lets
        ``mcplug.cancel(tag)`` cancel the call from another thread.
        """
        if timeout is None and tag is None and progress is None:
            return self._core.call_tool(name, arguments, None, None)  # no options to build
        return self._core.call_tool(name, arguments, call_options(timeout, tag), progress)

    def request(
        self,
        method: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        timeout: Timeout = None,
        tag: Optional[str] = None,
        all_pages: bool = False,
        progress: Union[Callable[[Dict[str, Any]], Any], bool, None] = None,
    ) -> Dict[str, Any]:
        """Any request; the raw result. ``all_pages`` follows nextCursor of list methods."""
        opts = call_options(timeout, tag)
        if all_pages:
            opts["all_pages"] = True
        return self._core.request(method, params, opts, progress)

    def notify(self, method: str, params: Optional[Mapping[str, Any]] = None) -> None:
        self._core.notify(method, params)

    def next_event(self, timeout: Timeout = None) -> Optional[Dict[str, Any]]:
        """The next event no handler took, or None after ``timeout`` seconds (None: wait as long
        as it takes). Raises ClosedError once the connection closed and every event was read."""
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
            raise InvalidArgumentError(f"`timeout` must be a number of seconds or None (got {timeout!r})")
        sink = self._core._sink
        assert isinstance(sink, QueueSink)
        return sink.get(None if timeout is None or timeout == float("inf") else float(timeout))

    def respond(self, event_id: str, result: Any = None, *, error: Any = None) -> None:
        """Answers a server request event by hand: ``result``, or ``error`` (a dict with
        ``code`` and ``message``, or an exception)."""
        self._core.respond(event_id, result, error)

    def close(self) -> None:
        """Closes the connection: blocked calls raise ClosedError, the server and its process
        group are gone when this returns. Safe to call twice, and from a handler."""
        self._close_now()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<mcplug.Client {self.server_info.get('name', '?')!r} {self.protocol_version} {state}>"
