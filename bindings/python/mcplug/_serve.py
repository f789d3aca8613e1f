"""A manager's pool served as one MCP server (``Manager.serve``): what the handle owner looks
like in Python, and the options it takes."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from . import _ffi
from ._errors import InvalidArgumentError
from ._managed import Managed

_lib = _ffi.lib


def serve_options(http: Optional[str], names: str, fds: Optional[Tuple[int, int]]) -> Dict[str, Any]:
    """The options of ``mcplug_manager_serve`` for ``Manager.serve``'s arguments."""
    if names not in ("prefixed", "unprefixed"):
        raise InvalidArgumentError(f'`names` must be "prefixed" or "unprefixed" (got {names!r})')
    if fds is not None:
        if http is not None:
            raise InvalidArgumentError("give `http` or `fds`, not both")
        if not (isinstance(fds, tuple) and len(fds) == 2 and all(isinstance(f, int) and not isinstance(f, bool) for f in fds)):
            raise InvalidArgumentError(f"`fds` must be a (read_fd, write_fd) pair of descriptors (got {fds!r})")
        return {"transport": "fds", "read_fd": fds[0], "write_fd": fds[1], "names": names}
    if not isinstance(http, str):
        raise InvalidArgumentError(f'`http` must be an address like "127.0.0.1:0" (got {http!r})')
    return {"transport": "http", "listen": http, "names": names}


def _free(handle: int) -> None:
    # Closes every client's session and the listener, then frees the handle.
    _lib.mcplug_server_free(handle)


class Served:
    """What a served pool's owner knows of it, sync or asyncio: where clients reach it."""

    _url: Optional[str]

    def _served(self, info: Dict[str, Any]) -> None:
        url = info.get("url") if isinstance(info, dict) else None
        self._url = url if isinstance(url, str) else None

    @property
    def url(self) -> Optional[str]:
        """``http://HOST:PORT/mcp``; None over descriptors."""
        return self._url


class Server(Served, Managed):
    """A manager's pool served as one MCP server, from ``Manager.serve``: ``url`` is where MCP
    clients reach it (Streamable HTTP; None over descriptors); ``close()`` (or leaving the
    ``with`` block) ends every client's session — their calls in flight are cancelled at the
    servers — and stops listening. The manager stays open."""

    def __init__(self, handle: int, info: Dict[str, Any]) -> None:
        self._served(info)
        self._attach(lambda: _free(handle))

    def __repr__(self) -> str:
        state = "closed" if self.closed else (self._url or "descriptors")
        return f"<mcplug.Server {state}>"
