"""mcplug: an MCP (Model Context Protocol) client, backed by libmcplug through ctypes.

    import mcplug
    with mcplug.Client.connect({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]}) as c:
        c.call_tool("echo", {"message": "hi"}, timeout=5.0)

``mcplug.aio`` has the same client for asyncio.

Many servers, their tools in one pool (``mcplug.Manager``; ``mcplug.aio.Manager`` for asyncio)::

    with mcplug.Manager(handlers={"sampling/createMessage": lambda params, server: ...}) as m:
        m.add_host_server("host", [{"name": "now", "inputSchema": {"type": "object"},
                                    "handler": lambda args: time.ctime()}])
        m.connect({"mcpServers": {"fs": {"command": "mcp-server-filesystem", "args": ["/srv"]}}})
        m.wait(30)
        m.call_tool("mcp__fs__list_directory", {"path": "/srv"})
        m.call_tool("mcp__host__now")

Serving what a server asks of the host — the same handlers in both protocol eras (a legacy
server's requests, or the input requests of a 2026-07-28 ``InputRequiredResult``)::

    def sample(params):            # params of sampling/createMessage
        return {"role": "assistant", "content": {"type": "text", "text": run_model(params)},
                "model": "my-model", "stopReason": "endTurn"}

    def elicit(params):            # params of elicitation/create
        if not user_agrees(params["message"]):
            raise mcplug.DeniedError("the user declined")      # the server gets code -1
        return {"action": "accept", "content": {"name": "Ada"}}

    with mcplug.Client.connect(server, handlers={"sampling/createMessage": sample,
                                                  "elicitation/create": elicit,
                                                  "notifications/message": print},
                               roots=[pathlib.Path.cwd()], log_level="info") as c:
        c.call_tool("summarize", {"text": "..."})   # the handlers answer on the way
        c.set_roots([pathlib.Path.cwd(), "file:///srv/data"])

A handler declares its capability (none given: none declared, and a server asking anyway gets
-32601); what it returns is the answer, what it raises becomes a JSON-RPC error to the server.
Events that are not requests or notifications have handler keys of their type:
``"request_cancelled"``, ``"request_expired"``, ``"warning"``, ``"stderr"``, ``"closed"``; ``"*"``
takes every other event. See ``Client.connect`` for the connect options (``capabilities``,
``roots``, ``log_level``, ``tasks``, ``max_input_rounds``, ``elicitation_defaults``,
``validate_arguments``, ``host_request_timeout``) and ``Client.call_tool`` for ``task``,
``task_ttl`` and ``validate_arguments``.

Threads: every method may be called from any thread. Each client pumps its events on one daemon
thread; sync handlers run there (a slow handler delays the client's other events, never its
calls). Requests with no handler are answered "method not found", unless you declared the
capability yourself (``capabilities=``) or gave ``roots``: then they come to ``next_event`` and
you answer with ``respond``. Close clients (``with``/``close()``); a forgotten one is closed when
garbage-collected or at exit, so no server process outlives its client.

Fork: a process forked after mcplug started (``os.fork``, multiprocessing's ``"fork"`` start
method, gunicorn's ``preload_app``) cannot use it — every call there, on an inherited client or a
new one, raises ``ClosedError`` at once (``data["reason"] == "forked"``), and ``close()`` only
lets go, leaving the parent's connection and servers untouched. Make clients in each worker
after the fork, or start workers with ``multiprocessing.get_context("spawn")`` (or
``"forkserver"``).
"""
from __future__ import annotations

TYPE_CHECKING = False  # not typing's: see _codec

from . import _ffi
from ._auth import auth_logout
from ._client import Client
from ._manager import Manager
from ._serve import Server
from ._logs import LogForwarder, capture_logs, forward_logs, next_log_records, release_logs
from ._config import add_config_server, approve_project_server, discover_config, merge_config, remove_config_server, reset_project_choices
from ._errors import (
    CancelledError,
    ClosedError,
    ConfigError,
    DeniedError,
    InvalidArgumentError,
    InvalidResultError,
    McpError,
    NeedsAuthError,
    NotFoundError,
    PanicError,
    ProtocolError,
    RpcError,
    TimeoutError,
    TransportError,
    UnsupportedError,
)

__version__ = "0.1.0"
ABI_VERSION = _ffi.ABI_VERSION

__all__ = [
    "ABI_VERSION",
    "auth_logout",
    "CancelledError",
    "Client",
    "ClosedError",
    "ConfigError",
    "DeniedError",
    "InvalidArgumentError",
    "InvalidResultError",
    "Manager",
    "McpError",
    "Server",
    "NeedsAuthError",
    "NotFoundError",
    "PanicError",
    "ProtocolError",
    "RpcError",
    "TimeoutError",
    "TransportError",
    "UnsupportedError",
    "abi_version",
    "capture_logs",
    "forward_logs",
    "LogForwarder",
    "next_log_records",
    "release_logs",
    "add_config_server",
    "discover_config",
    "merge_config",
    "remove_config_server",
    "approve_project_server",
    "reset_project_choices",
    "aio",
    "cancel",
    "library_path",
    "version",
]


def version() -> str:
    """The version of the loaded library (``mcplug_version()``)."""
    return _ffi.version()


def abi_version() -> int:
    """The ABI version of the loaded library; equal to ``ABI_VERSION`` or the import failed."""
    return _ffi.abi_version()


def library_path() -> str:
    """Where the loaded libmcplug came from."""
    return str(_ffi.LIBRARY_PATH)


def cancel(tag: str) -> bool:
    """Cancels the in-flight call(s) carrying ``tag``, from any thread: they raise
    CancelledError and the server is sent notifications/cancelled. False if none was found."""
    return _ffi.cancel(tag)


if TYPE_CHECKING:
    from . import aio
else:

    def __getattr__(name: str) -> object:
        # ``mcplug.aio`` is imported on first use: asyncio and concurrent.futures cost a cold
        # start ~30 ms that a sync host never needs. ``import mcplug.aio`` and
        # ``from mcplug import aio`` work as before.
        if name == "aio":
            import importlib  # not `from . import aio`: that asks this function again

            return importlib.import_module(".aio", __name__)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__() -> list:
        return sorted(set(globals()) | set(__all__))
