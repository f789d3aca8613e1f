"""Ownership of one native handle: ``close()`` frees it, ``with`` closes it, and a
``weakref.finalize`` frees it anyway if the owner is garbage-collected (or at interpreter exit)
without being closed — so a forgotten client never leaves a server process behind."""
from __future__ import annotations

import weakref

TYPE_CHECKING = False  # not typing's: see _codec
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Callable, Optional, Type, TypeVar

    _T = TypeVar("_T", bound="Managed")
    _A = TypeVar("_A", bound="AsyncManaged")


class _Owner:
    _finalizer: Optional[weakref.finalize[[], _Owner]] = None  # not evaluated at runtime (3.9)

    def _attach(self, closer: Callable[[], None]) -> None:
        """Registers the function that frees the handle; it must not reference ``self``."""
        self._finalizer = weakref.finalize(self, closer)

    def _close_now(self) -> None:
        # A finalize object runs its function at most once, whoever calls it first.
        if self._finalizer is not None:
            self._finalizer()

    @property
    def closed(self) -> bool:
        return self._finalizer is None or not self._finalizer.alive


class Managed(_Owner):
    """Base of every synchronous handle owner."""

    def close(self) -> None:
        """Frees the handle now; later calls are no-ops."""
        self._close_now()

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()


class AsyncManaged(_Owner):
    """Base of every asyncio handle owner: ``close`` is a coroutine that never blocks the loop."""

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self: _A) -> _A:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()
