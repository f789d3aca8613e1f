"""The host side shared by the host-request tests: what a real host answers when a server asks it
for sampling, elicitation or roots, as plain functions (``mcplug.Client``) and as coroutines
(``mcplug.aio.Client``), recording every request it was asked. The same handlers serve
server-everything (legacy-era server requests) and the Python SDK's 2026-07-28 server
(InputRequiredResult rounds)."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, List, Optional

SAMPLING_ANSWER = {
    "role": "assistant",
    "content": {"type": "text", "text": "pong from the Python host"},
    "model": "py-host-model",
    "stopReason": "endTurn",
}
HOST_ROOTS = {"roots": [{"uri": "file:///tmp/from-the-py-host", "name": "host"}]}


def elicitation_answer(params: Dict[str, Any]) -> Dict[str, Any]:
    """An answer by what is asked (the messages of the test servers' elicitations)."""
    if params.get("mode") == "url":
        return {"action": "accept"}
    message = str(params.get("message", ""))
    properties = (params.get("requestedSchema") or {}).get("properties") or {}
    if message == "What is your name?":
        return {"action": "accept", "content": {"name": "Ada"}}
    if message == "Which colour?":
        return {"action": "accept", "content": {"colour": "teal"}}
    if message == "Confirm?":
        return {"action": "accept", "content": {"ok": True}}
    if "interpretation" in properties:
        return {"action": "accept", "content": {"interpretation": "programming"}}
    if "favoriteColor" in properties:
        return {"action": "accept", "content": {"name": "Ada", "favoriteColor": "Blue"}}
    # server-everything's big form: two fields only (the schema's defaults may fill the rest).
    return {"action": "accept", "content": {"name": "Ada Lovelace", "check": True}}


class Host:
    """A sync host: its handlers run on the client's pump thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: List[tuple] = []  # (method, params)
        self.logs: List[Dict[str, Any]] = []
        self.notifications: List[tuple] = []  # (method, params) of other notifications
        self.events: List[Dict[str, Any]] = []  # request_cancelled / request_expired / warning
        self.threads: List[str] = []

    def _record(self, method: str, params: Dict[str, Any]) -> None:
        with self.lock:
            self.requests.append((method, params))
            self.threads.append(threading.current_thread().name)

    def sampling(self, params: Dict[str, Any]) -> Dict[str, Any]:
        self._record("sampling/createMessage", params)
        return dict(SAMPLING_ANSWER)

    def elicitation(self, params: Dict[str, Any]) -> Dict[str, Any]:
        self._record("elicitation/create", params)
        return elicitation_answer(params)

    def roots(self, params: Dict[str, Any]) -> Dict[str, Any]:
        self._record("roots/list", params)
        return HOST_ROOTS

    def on_log(self, params: Dict[str, Any]) -> None:
        with self.lock:
            self.logs.append(params)

    def on_event(self, event: Dict[str, Any]) -> None:
        with self.lock:
            self.events.append(event)

    def handlers(self, *, sampling: bool = True, elicitation: bool = True, roots: bool = True) -> Dict[str, Any]:
        h: Dict[str, Any] = {
            "notifications/message": self.on_log,
            "request_cancelled": self.on_event,
            "request_expired": self.on_event,
            "warning": self.on_event,
        }
        if sampling:
            h["sampling/createMessage"] = self.sampling
        if elicitation:
            h["elicitation/create"] = self.elicitation
        if roots:
            h["roots/list"] = self.roots
        return h

    # -- looking at what happened ---------------------------------------------------------------

    def methods(self) -> List[str]:
        with self.lock:
            return [m for m, _ in self.requests]

    def asked(self, method: str) -> List[Dict[str, Any]]:
        with self.lock:
            return [p for m, p in self.requests if m == method]

    def log_texts(self) -> List[str]:
        with self.lock:
            return [str(p.get("data")) for p in self.logs]

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()
            self.logs.clear()
            self.events.clear()
            self.threads.clear()


class AsyncHost(Host):
    """The same host with ``async def`` handlers, for mcplug.aio; it records whether each ran on
    the loop it was made for."""

    def __init__(self, loop: Optional[asyncio.AbstractEventLoop] = None) -> None:
        super().__init__()
        self.loop = loop or asyncio.get_running_loop()
        self.on_loop: List[bool] = []

    async def _tick(self) -> None:
        self.on_loop.append(asyncio.get_running_loop() is self.loop)
        await asyncio.sleep(0.001)  # a real await: the answer comes back from a suspended task

    async def sampling(self, params: Dict[str, Any]) -> Dict[str, Any]:  # type: ignore[override]
        await self._tick()
        return Host.sampling(self, params)

    async def elicitation(self, params: Dict[str, Any]) -> Dict[str, Any]:  # type: ignore[override]
        await self._tick()
        return Host.elicitation(self, params)

    async def roots(self, params: Dict[str, Any]) -> Dict[str, Any]:  # type: ignore[override]
        await self._tick()
        return Host.roots(self, params)

    async def on_log(self, params: Dict[str, Any]) -> None:  # type: ignore[override]
        Host.on_log(self, params)
