"""The synchronous client."""
from __future__ import annotations

import collections.abc as _abc
import weakref

from ._core import (
    drain_events,
    Core,
    QueueSink,
    SyncRunner,
    call_options,
    connect_blocking,
    connect_options,
    put_cache_option,
    put_format,
    put_task_options,
)
from . import _auth
from ._errors import InvalidArgumentError
from ._managed import Managed

TYPE_CHECKING = False  # not typing's: see _codec
if TYPE_CHECKING:
    import os
    from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

    from ._core import Handler

    Timeout = Optional[float]
    #: A root: ``{"uri": "file:///...", "name": ...}``, a URI string, or a path.
    Root = Union[Mapping[str, Any], str, "os.PathLike[str]"]


def _string(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"`{what}` must be a str (got {type(value).__name__})")
    return value


def _items(listed: Dict[str, Any], field: str) -> List[Dict[str, Any]]:
    items: List[Dict[str, Any]] = listed.get(field, [])
    return items


def _prompt_params(name: str, arguments: Optional[Mapping[str, str]]) -> Dict[str, Any]:
    params: Dict[str, Any] = {"name": _string(name, "name")}
    if arguments is not None:
        if not isinstance(arguments, _abc.Mapping):
            raise InvalidArgumentError(f"`arguments` must be a dict of str (got {type(arguments).__name__})")
        params["arguments"] = dict(arguments)
    return params


def _complete_params(ref: Mapping[str, Any], argument: Mapping[str, str], context: Optional[Mapping[str, str]]) -> Dict[str, Any]:
    if not isinstance(ref, _abc.Mapping) or ref.get("type") not in ("ref/prompt", "ref/resource"):
        raise InvalidArgumentError(f"`ref` must be {{'type': 'ref/prompt', 'name': ...}} or {{'type': 'ref/resource', 'uri': ...}} (got {ref!r})")
    if not isinstance(argument, _abc.Mapping) or not isinstance(argument.get("name"), str) or not isinstance(argument.get("value"), str):
        raise InvalidArgumentError(f"`argument` must be {{'name': str, 'value': str}} (got {argument!r})")
    params: Dict[str, Any] = {"ref": dict(ref), "argument": dict(argument)}
    if context is not None:
        if not isinstance(context, _abc.Mapping):
            raise InvalidArgumentError(f"`context` must be a dict of the arguments already given (got {type(context).__name__})")
        params["context"] = {"arguments": dict(context)}
    return params


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
        """Starts the server (``{"command", "args", "env", "cwd"}``) and negotiates.

        ``handlers`` maps a method or event type to a function; what it returns answers the
        server, and what it raises becomes a JSON-RPC error to the server (an McpError's
        ``code``/``data``; ``DeniedError`` without a code is -1, "the user rejected"; anything
        else -32603 with the exception's text). Handlers run on the client's pump thread, one at
        a time, and must be plain functions (``mcplug.aio`` runs coroutines). Keys:

        - ``"sampling/createMessage"``, ``"elicitation/create"``, ``"roots/list"``: requests,
          called with their ``params``, in both eras — a legacy server's request or an input
          request of a 2026-07-28 ``InputRequiredResult`` look the same. A handler declares its
          capability (sampling; elicitation in form mode; roots with ``listChanged``); a host
          with no handler for one does not declare it, so a server asking anyway gets -32601;
        - notification methods (``"notifications/message"`` for log messages,
          ``"notifications/progress"``, ``"notifications/claude/channel"`` from servers that
          declare channels, list changes ...), called with their ``params``;
        - event types, called with the whole event: ``"request_cancelled"`` (``{"id", "method",
          "reason"}``: the call that needed that request was cancelled, or the server cancelled
          its task), ``"request_expired"`` (the host took longer than ``host_request_timeout``;
          the server got an error), ``"warning"`` (``{"reason": "invalid_schema", "tool",
          "schema", "message"}``: a listed tool's schema does not compile, so it is not
          checked), ``"stderr"`` (``{"line"}``), ``"closed"``;
        - ``"auth/authorize"``: OAuth (turns on ``auth_interactive``). Called with ``{"url",
          "redirect_uri", "issuer", "scope"?}`` when a remote server needs the user to
          authorize: send them to ``url`` and return None (the library's listener at
          ``redirect_uri`` takes the callback), or return ``{"callback_url": ...}`` with the
          redirect the host captured; raising declines (``NeedsAuthError``, reason
          ``declined``). Runs on the process's auth thread. Tokens are kept in
          ``options={"auth_store": dir}`` (default ``~/.local/state/mcplug/auth``);
          ``mcplug.auth_logout(server)`` forgets them;
        - ``"*"``: every other event. Events no handler takes wait for ``next_event``.

        Timeouts are seconds (None: the library default, ``math.inf``: no limit).
        ``host_request_timeout`` (60 s): how long a server's request waits for its handler.
        ``capabilities`` declares more than the handlers do, entry by entry:
        ``{"elicitation": {"form": {}, "url": {}}}`` for URL elicitation, ``{"sampling":
        {"tools": {}}}`` for tool-using sampling; a capability declared without a handler is
        answered by hand (``next_event`` + ``respond``).
        ``roots``: ``[{"uri": "file:///...", "name": ...}]`` (or URI strings, or paths), answered
        by the library itself (``roots/list`` never reaches a handler), changed with
        ``set_roots``. ``log_level``: as ``set_log_level`` from the start. ``tasks`` (True):
        tool calls that become tasks are awaited, and a legacy server may have the client run
        its sampling/elicitation as tasks. ``max_input_rounds`` (16): how often one call may be
        asked for more input before it fails with ProtocolError. ``elicitation_defaults``
        (False): an accepted form gets the schema's ``default``s where the handler left a field
        out. ``validate_arguments`` (False): the default of ``call_tool``'s option.
        ``options`` passes any other library option as-is, such as ``cache`` (True: keep the
        results a 2026-07-28 server marks cacheable, ``ttlMs``/``cacheScope``, and answer from
        them while fresh) and ``listen`` (``"auto"``: a 2026-07-28 connection opens its
        ``subscriptions/listen`` stream of list changes once events are pulled; True: at
        connect; False: never); ``request("resources/subscribe", {"uri": ...})`` adds to that
        stream. Its notifications arrive like any other (the notification handlers, or
        ``next_event``); the event type ``"listening"`` (``{"subscription", "notifications",
        "reopened"}``) says the server acknowledged a stream (``reopened``: it follows one that
        ended, so changes may have been missed).
        """
        opts, manual = connect_options(
            handlers, connect_timeout, request_timeout, tool_timeout, options,
            host_request_timeout=host_request_timeout, capabilities=capabilities, roots=roots,
            log_level=log_level, tasks=tasks, max_input_rounds=max_input_rounds,
            elicitation_defaults=elicitation_defaults, validate_arguments=validate_arguments,
            allow_async=False,
        )
        authorize = (handlers or {}).get("auth/authorize")
        channel = _auth.register(authorize, opts) if authorize is not None else None
        try:
            handle, info = connect_blocking(server, opts)
        except BaseException:
            _auth.unregister(channel)
            raise
        core = Core(handle, info, handlers, manual, SyncRunner(), QueueSink())
        core.start()
        client = cls(core)
        if channel is not None:
            weakref.finalize(client, _auth.unregister, channel)
        return client

    def list_tools(
        self,
        *,
        timeout: Timeout = None,
        tag: Optional[str] = None,
        cache: Optional[bool] = None,
        format: Optional[str] = None,
    ) -> List[Dict[str, Any]]:
        """Every tool, following pagination. The client keeps their schemas for ``call_tool``'s
        checks (a schema that does not compile comes as a ``"warning"`` event). ``cache=False``
        asks the server even when the connection's cache holds the pages. ``format``
        (``"anthropic"``, ``"openai"``): each tool as that model API's tool definition."""
        return self._core.list_tools(put_format(put_cache_option(call_options(timeout, tag), cache), format))

    def call_tool(
        self,
        name: str,
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
        """The raw CallToolResult (``isError`` results are returned, not raised); with ``format``
        (``"anthropic"``, ``"openai"``), the result as that model API takes it (see the README).

        Whatever the server needs on the way (sampling, elicitation, roots — as requests, or as
        the input requests of a 2026-07-28 ``InputRequiredResult``) goes to the handlers, and the
        call goes on with their answers. ``progress`` is called (on the pump thread) with the
        params of each notifications/progress of this call, all before this returns;
        ``progress=True`` only asks for them, and they arrive as events carrying the call's tag.
        ``tag`` lets ``mcplug.cancel(tag)`` cancel the call from another thread.

        ``task``: None (the default) awaits a call that becomes a task, and calls a legacy tool
        listed with ``taskSupport: "required"`` as one; True asks a legacy server for a task;
        False never does; ``"handle"`` asks for one and returns the task itself
        (``{"task": {"taskId", "status", ...}}``, or ``resultType: "task"`` in the 2026-07-28
        era), to follow with ``request("tasks/get", {"taskId": ...})``. ``timeout`` bounds the
        whole wait for a task (a cancel or timeout sends ``tasks/cancel``). ``task_ttl``: the
        task lifetime asked for, in seconds. ``validate_arguments``: check the arguments
        against the tool's inputSchema first (InvalidArgumentError, nothing sent).

        Raises RpcError (the server's error, a failed task), DeniedError (a handler refused an
        input request of a 2026-07-28 call: its code and data are kept), InvalidResultError
        (structuredContent breaks the listed outputSchema; ``data["result"]`` is the result),
        ProtocolError (too many input rounds, an input request of a capability not declared),
        TimeoutError, CancelledError, ClosedError, InvalidArgumentError.
        """
        if timeout is None and tag is None and progress is None and task is None and task_ttl is None and validate_arguments is None and format is None:
            return self._core.call_tool(name, arguments, None, None)  # no options to build
        opts = put_format(put_task_options(call_options(timeout, tag), task, task_ttl, validate_arguments), format)
        return self._core.call_tool(name, arguments, opts, progress)

    def request(
        self,
        method: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        timeout: Timeout = None,
        tag: Optional[str] = None,
        all_pages: bool = False,
        progress: Union[Callable[[Dict[str, Any]], Any], bool, None] = None,
        task: Union[bool, str, None] = None,
        task_ttl: Timeout = None,
        validate_arguments: Optional[bool] = None,
        cache: Optional[bool] = None,
    ) -> Dict[str, Any]:
        """Any request; the raw result. ``all_pages`` follows nextCursor of list methods.
        ``tools/call``, ``prompts/get`` and ``resources/read`` get their input requests served by
        the handlers as ``call_tool`` does; ``task``, ``task_ttl`` and ``validate_arguments``
        apply to ``tools/call``. Cacheable results (2026-07-28 lists, ``resources/read``) may
        come from the connection's cache, untouched; ``cache=False`` asks the server."""
        opts = put_task_options(call_options(timeout, tag), task, task_ttl, validate_arguments)
        put_cache_option(opts, cache)
        if all_pages:
            opts["all_pages"] = True
        return self._core.request(method, params, opts, progress)

    def list_resources(self, *, timeout: Timeout = None, tag: Optional[str] = None, cache: Optional[bool] = None) -> List[Dict[str, Any]]:
        """Every resource (``resources/list``, all pages followed)."""
        listed = self.request("resources/list", timeout=timeout, tag=tag, all_pages=True, cache=cache)
        return _items(listed, "resources")

    def list_resource_templates(
        self, *, timeout: Timeout = None, tag: Optional[str] = None, cache: Optional[bool] = None
    ) -> List[Dict[str, Any]]:
        """Every resource template (``resources/templates/list``, all pages followed)."""
        listed = self.request("resources/templates/list", timeout=timeout, tag=tag, all_pages=True, cache=cache)
        return _items(listed, "resourceTemplates")

    def read_resource(self, uri: str, *, timeout: Timeout = None, tag: Optional[str] = None, cache: Optional[bool] = None) -> Dict[str, Any]:
        """``resources/read``: the raw result (``{"contents": [{"uri", "text" | "blob", ...}]}``)."""
        return self.request("resources/read", {"uri": _string(uri, "uri")}, timeout=timeout, tag=tag, cache=cache)

    def list_prompts(self, *, timeout: Timeout = None, tag: Optional[str] = None, cache: Optional[bool] = None) -> List[Dict[str, Any]]:
        """Every prompt (``prompts/list``, all pages followed)."""
        return _items(self.request("prompts/list", timeout=timeout, tag=tag, all_pages=True, cache=cache), "prompts")

    def get_prompt(
        self, name: str, arguments: Optional[Mapping[str, str]] = None, *, timeout: Timeout = None, tag: Optional[str] = None
    ) -> Dict[str, Any]:
        """``prompts/get``: the raw result (``{"description"?, "messages": [...]}``)."""
        return self.request("prompts/get", _prompt_params(name, arguments), timeout=timeout, tag=tag)

    def complete(
        self,
        ref: Mapping[str, Any],
        argument: Mapping[str, str],
        *,
        context: Optional[Mapping[str, str]] = None,
        timeout: Timeout = None,
        tag: Optional[str] = None,
    ) -> Dict[str, Any]:
        """``completion/complete``: suggestions for one argument of a prompt or resource template.
        ``ref``: ``{"type": "ref/prompt", "name": ...}`` or ``{"type": "ref/resource", "uri": ...}``;
        ``argument``: ``{"name", "value"}``; ``context``: the arguments already given. Returns the
        result's ``completion`` (``{"values", "total"?, "hasMore"?}``)."""
        result = self.request("completion/complete", _complete_params(ref, argument, context), timeout=timeout, tag=tag)
        completion: Dict[str, Any] = result.get("completion", {})
        return completion

    def ping(self, *, timeout: Timeout = None, tag: Optional[str] = None) -> None:
        """``ping``: returns once the server answered (raises TimeoutError, ClosedError...)."""
        self.request("ping", timeout=timeout, tag=tag)

    def subscribe(self, uri: str, *, timeout: Timeout = None, tag: Optional[str] = None) -> None:
        """Asks for ``notifications/resources/updated`` of ``uri`` (``resources/subscribe``; a
        2026-07-28 connection adds it to its ``subscriptions/listen`` stream). The
        notifications arrive as events (handler key ``"notifications/resources/updated"``)."""
        self.request("resources/subscribe", {"uri": _string(uri, "uri")}, timeout=timeout, tag=tag)

    def unsubscribe(self, uri: str, *, timeout: Timeout = None, tag: Optional[str] = None) -> None:
        """Undoes ``subscribe``."""
        self.request("resources/unsubscribe", {"uri": _string(uri, "uri")}, timeout=timeout, tag=tag)

    def list_skills(self, *, timeout: Timeout = None, tag: Optional[str] = None) -> List[Dict[str, Any]]:
        """The skills extension (SEP-2640): every entry of ``skills/list`` (``{"uri":
        ".../SKILL.md", "frontmatter", "resources"}``), as the server sent it. The client holds
        each entry for ``load_skill``; no skill file is read. Raises NotFoundError when the
        server does not declare ``io.modelcontextprotocol/skills``."""
        return self._core.list_skills(call_options(timeout, tag))

    def get_skill(self, uri: str, *, timeout: Timeout = None, tag: Optional[str] = None) -> Dict[str, Any]:
        """``skills/get``: the entry of the skill whose SKILL.md is at ``uri`` (listed or not),
        held from now on — how a host refreshes an entry after a verification failure."""
        return self._core.get_skill(uri, call_options(timeout, tag))

    def load_skill(self, uri: str, *, timeout: Timeout = None, tag: Optional[str] = None) -> Dict[str, Any]:
        """Loads a skill: reads its SKILL.md now and verifies it against the held entry
        (``skills/get`` first when none is): size, SHA-256 digest, and the YAML frontmatter
        field by field. Returns ``{"uri", "name", "frontmatter", "text", "verified", "files"}``
        (``verified`` is False and ``files`` ``"dynamic"`` for a skill the server generates).
        Raises InvalidResultError when the file does not match (``data["check"]``: ``"size"``,
        ``"digest"`` or ``"frontmatter"``; nothing unverified is returned), ProtocolError for
        an invalid entry (also one whose URIs have a dot segment, ``..`` or ``%2e%2e``, named in
        the message), DeniedError for a skill over the limits (512 files, 16 MiB)."""
        return self._core.load_skill(uri, call_options(timeout, tag))

    def read_skill_file(self, skill: str, file: str, *, timeout: Timeout = None, tag: Optional[str] = None) -> Dict[str, Any]:
        """Reads one file of a loaded skill (``file``: its URI, or a path relative to the
        skill's directory such as ``"references/FORMS.md"``), verified against the entry the
        skill was loaded from: ``{"uri", "mimeType", "text" | "blob", "verified"}``. A file that
        entry does not list is refused unread (InvalidResultError, ``check`` ``"unlisted"``);
        NotFoundError when the skill is not loaded."""
        return self._core.read_skill_file(skill, file, call_options(timeout, tag))

    def set_roots(self, roots: Optional[Sequence[Root]]) -> bool:
        """Sets the roots the library answers ``roots/list`` with from now on (``[{"uri":
        "file:///...", "name": ...}]``, URI strings or paths); None hands ``roots/list`` back
        to the ``"roots/list"`` handler (or ``next_event``). Needs the roots capability (given
        ``roots`` or a ``roots/list`` handler at connect). Returns True if a legacy server was
        sent ``notifications/roots/list_changed``; a 2026-07-28 server asks for roots per
        request, so it simply gets the new ones (False). Raises InvalidArgumentError for a root
        that is not a ``file://`` URI."""
        return self._core.set_roots(roots)

    def set_log_level(self, level: str) -> str:
        """Asks the server for log messages at ``level`` ("debug", "info", "notice", "warning",
        "error", "critical", "alert", "emergency") and above; they arrive as
        ``notifications/message`` (handler key ``"notifications/message"``). Returns how:
        ``"logging/setLevel"`` (legacy: sent and answered) or ``"per request"`` (2026-07-28:
        the level rides each later request, and the server logs while it answers one)."""
        return self._core.set_log_level(level)

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

    def events(self, timeout: Timeout = None) -> Iterator[Dict[str, Any]]:
        """The events no handler took, as they come, until the connection is closed (or, given
        ``timeout``, until none came for that many seconds): ``for e in client.events()``."""
        return drain_events(self.next_event, timeout)

    def respond(self, event_id: str, result: Any = None, *, error: Any = None) -> None:
        """Answers a server request event by hand: ``result``, or ``error`` (a dict with
        ``code`` and ``message``, or an exception). Raises InvalidArgumentError for an id that
        is not waiting (answered, expired, withdrawn, unknown)."""
        self._core.respond(event_id, result, error)

    def close(self) -> None:
        """Closes the connection: blocked calls raise ClosedError, the server and its process
        group are gone when this returns. Safe to call twice, and from a handler."""
        self._close_now()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<mcplug.Client {self.server_info.get('name', '?')!r} {self.protocol_version} {state}>"
