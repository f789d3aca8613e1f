"""The library's log records, taken by the host instead of going to stderr (``MCPLUG_LOG``).

``forward_logs()`` is what a Python host usually wants: the records become ``logging`` records of
the loggers ``mcplug.client``, ``mcplug.wire``, ... (the library's targets, ``::`` read as ``.``;
its dependencies' under it, e.g. ``mcplug.hyper_util.client.legacy.pool``),
so the host's own handlers, levels and formatters apply. ``capture_logs()`` /
``next_log_records()`` / ``release_logs()`` are the process-wide queue underneath, for a host
that routes the records itself. One capture runs per process."""
from __future__ import annotations

import logging
import math
import threading
from typing import Any, Dict, List, Optional

from . import _codec, _ffi
from ._errors import ClosedError, InvalidArgumentError, TimeoutError

#: The library's levels as ``logging`` levels (``trace`` sits below DEBUG).
TRACE = 5
LEVELS = {"trace": TRACE, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}


def capture_logs(filter: str = "debug", *, max_records: Optional[int] = None) -> Dict[str, Any]:
    """Starts taking the library's log records (or changes the running capture's filter): the
    records matching ``filter`` (tracing's EnvFilter syntax: ``"debug"``, ``"warn,mcplug::wire=trace"``)
    wait in one process-wide queue of at most ``max_records`` (10000; past it the oldest go and an
    ``{"type": "overflow", "dropped"}`` record says how many) and no longer go to stderr.
    Returns ``{"filter", "max_records"}``."""
    if not isinstance(filter, str):
        raise InvalidArgumentError(f"`filter` must be a str (got {type(filter).__name__})")
    options: Dict[str, Any] = {"filter": filter}
    if max_records is not None:
        options["max_records"] = max_records
    status, text = _ffi.invoke(_ffi.lib.mcplug_log_capture, _codec.dumps(options).encode())
    result: Dict[str, Any] = _ffi.checked(status, text)
    return result


def release_logs() -> bool:
    """Ends the capture: the records go back to ``MCPLUG_LOG`` (stderr, or nowhere). False when
    none was running."""
    status, text = _ffi.invoke(_ffi.lib.mcplug_log_release)
    return bool(_ffi.checked(status, text)["released"])


def next_log_records(timeout: Optional[float] = None, max_records: int = 256) -> List[Dict[str, Any]]:
    """Waits up to ``timeout`` seconds (None: until one comes) for a record, then takes up to
    ``max_records`` without waiting more; ``[]`` when none came in time. Each record is
    ``{"type": "log", "level", "target", "message", "fields", "time_ms", "thread"}``. Raises
    ClosedError when no capture is running (or it ended and every record was taken)."""
    if timeout is None:
        wait = -1
    elif isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or math.isnan(timeout) or timeout < 0:
        raise InvalidArgumentError(f"`timeout` must be a number of seconds >= 0 or None (got {timeout!r})")
    else:
        wait = -1 if math.isinf(timeout) else min(int(math.ceil(timeout * 1000)), 2**31 - 1)
    if isinstance(max_records, bool) or not isinstance(max_records, int) or not 1 <= max_records <= 2**32 - 1:
        raise InvalidArgumentError(f"`max_records` must be a positive int (got {max_records!r})")
    status, text = _ffi.invoke(_ffi.lib.mcplug_log_next_events, max_records, wait)
    try:
        records: List[Dict[str, Any]] = _ffi.checked(status, text)
    except TimeoutError:
        return []
    return records


class LogForwarder:
    """The thread that hands the captured records to ``logging`` (see ``forward_logs``)."""

    def __init__(self, filter: str, logger: str, max_records: Optional[int]) -> None:
        self.logger = logger
        capture_logs(filter, max_records=max_records)
        self._thread = threading.Thread(target=self._run, name="mcplug-logs", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                records = next_log_records(None)
            except ClosedError:
                return
            for record in records:
                self._emit(record)

    def _emit(self, record: Dict[str, Any]) -> None:
        if record.get("type") == "overflow":
            logging.getLogger(self.logger).warning("mcplug: %d log records were dropped", record.get("dropped", 0))
            return
        target = str(record.get("target", ""))
        # mcplug::client -> mcplug.client; a dependency's own target (hyper_util::client::...)
        # goes under the logger too: mcplug.hyper_util.client...
        rest = target[len("mcplug::"):] if target.startswith("mcplug::") else "" if target == "mcplug" else target
        name = f"{self.logger}.{rest.replace('::', '.')}" if rest else self.logger
        fields = record.get("fields") or {}
        extra = " ".join(f"{k}={v}" for k, v in fields.items())
        message = f"{record.get('message', '')} {extra}".strip()
        logger = logging.getLogger(name)
        level = LEVELS.get(str(record.get("level")), logging.INFO)
        if logger.isEnabledFor(level):
            made = logger.makeRecord(name, level, target, 0, "%s", (message,), None, extra={"mcplug": record})
            made.created = record.get("time_ms", made.created * 1000) / 1000
            made.threadName = record.get("thread") or made.threadName
            logger.handle(made)

    def stop(self, timeout: Optional[float] = 5.0) -> None:
        """Ends the capture; the records already taken are handed over before the thread ends."""
        release_logs()
        self._thread.join(timeout)

    def __enter__(self) -> "LogForwarder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def forward_logs(filter: str = "debug", *, logger: str = "mcplug", max_records: Optional[int] = None) -> LogForwarder:
    """Sends the library's log records matching ``filter`` to Python's ``logging``, as records of
    ``logging.getLogger(logger + "." + target)`` (``mcplug.client``, ``mcplug.wire``, ...; level
    ``trace`` is 5, below DEBUG), each with the library's record as ``record.mcplug``. A daemon
    thread forwards them until ``stop()`` (or the ``with`` block's end)."""
    return LogForwarder(filter, logger, max_records)
