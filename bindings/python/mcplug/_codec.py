"""JSON to and from the library, with the C accelerator of the standard ``json`` package called
directly.

Why not ``json.dumps``/``json.loads``: per call they cost ~1.5 us each in Python-level argument
handling (a fresh ``JSONEncoder`` for non-default options, ``decode`` + ``raw_decode`` + a regex
match for whitespace), next to ~0.5 us of actual encoding or scanning; and importing ``json``
imports ``re`` (~5 ms of a cold start). ``_json`` is the module ``json`` itself uses. The results
are the same: ``dumps`` is ``json.dumps(value, allow_nan=False, ensure_ascii=False,
separators=(",", ":"))`` and ``loads`` is ``json.loads``; any input the fast path does not take
whole (leading or trailing whitespace, malformed text) goes to ``json.loads`` for its exact result
or error. Without ``_json`` (another interpreter, a changed signature) both are plain ``json``.
"""
from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing costs a cold start ~3 ms (type checkers know the name)
if TYPE_CHECKING:
    from typing import Any, Tuple


def _default(value: Any) -> Any:
    # JSONEncoder.default's message, so errors read as they did with json.dumps.
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


class _ScanContext:
    """The attributes ``_json.make_scanner`` reads from a ``JSONDecoder``, at their defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> float:
        return {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}[name]


def _slow_loads(text: str) -> Any:
    import json

    return json.loads(text)


def _fallback() -> Tuple[Any, ...]:
    import json

    encode = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":")).encode
    loads = json.loads
    return (lambda value, _indent: (encode(value),)), encode, (lambda text, _idx: (loads(text), len(text))), loads


try:
    from _json import encode_basestring as _encode_str
    from _json import make_encoder as _make_encoder
    from _json import make_scanner as _make_scanner

    #: ``"".join(encode_chunks(value, 0))`` is ``dumps(value)``, minus the circular-reference
    #: bookkeeping (a dict insert and delete per container): a cycle recurses until RecursionError
    #: instead, and the caller then asks ``dumps`` for json's own "Circular reference detected" (or
    #: gets the same RecursionError again, for data really that deep).
    encode_chunks = _make_encoder(None, _default, _encode_str, None, ":", ",", False, False, False)
    #: ``scan(text, 0)`` is ``(value, end)`` for the JSON value at the start of ``text``; it
    #: raises StopIteration or ValueError where ``loads`` would raise, and ``loads(text)`` is
    #: ``value`` only when ``end == len(text)``.
    scan = _make_scanner(_ScanContext)  # type: ignore[arg-type]  # it reads the attributes

    def dumps(value: Any) -> str:
        """``json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))``."""
        return "".join(_make_encoder({}, _default, _encode_str, None, ":", ",", False, False, False)(value, 0))

    def loads(text: str) -> Any:
        """``json.loads(text)``."""
        try:
            value, end = scan(text, 0)
        except (StopIteration, ValueError):
            return _slow_loads(text)
        if end != len(text):
            return _slow_loads(text)
        return value

    # The accelerator's signatures are private: check them once, fall back to json if they moved.
    _sample = '{"a":[1,-2.5,null,true,false,"\\u00e9\\n\\"",{}],"b":{"c":[]}}'
    _expected = '{"a":[1,-2.5,null,true,false,"\u00e9\\n\\"",{}],"b":{"c":[]}}'
    if dumps(loads(_sample)) != _expected or "".join(encode_chunks(loads(_sample), 0)) != _expected:
        raise ImportError("_json behaves differently")
except Exception:  # ImportError, TypeError from a changed signature, the check above
    encode_chunks, dumps, scan, loads = _fallback()  # noqa: F811
