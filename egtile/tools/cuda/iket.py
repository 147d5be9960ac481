"""IKET's kernel instrumentation API (``tilelang.tools.cuda.iket``), accepted so that instrumented kernels port.

IKET (TileLang's in-kernel event tracing) adds named markers, warp-level ranges and 32-bit payloads to the
generated CUDA; an *external* profiler (the ``iket`` package and its runtime) collects them into Perfetto
traces. Markers do not change what a kernel computes. egtile has no IKET runtime, so it accepts the same calls
with the same checks (names of at most 32 UTF-8 bytes, one payload dtype per name, payload dtypes ``int32`` /
``uint32`` / ``float32``, balanced ranges) and records the event table, but **emits no event records**: the
kernel is compiled as if uninstrumented, and :func:`trace_files` lists only traces already on disk. The first
marker of a process says so with an :class:`IketWarning`. For a picture of egtile's schedule, use
``kernel.explain()`` and its timeline (``docs/language.md``).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from egtile.errors import DSLError
from egtile.language import tracer

PAYLOAD_DTYPES = ("int32", "uint32", "float32")
NAME_BYTES = 32
DEFAULT_OUTPUT_DIR = "/tmp/tilelang_iket"


class IketWarning(UserWarning):
    """egtile accepted IKET instrumentation that it does not record."""


@dataclass(frozen=True)
class Payload:
    """``iket.payload(value, dtype=...)``: one 32-bit scalar captured with a marker or a range start."""

    value: Any
    dtype: str


@dataclass(frozen=True)
class Event:
    """One registered marker or range name, with its payload dtype (``None``: no payload)."""

    name: str
    kind: str  # "marker" or "range"
    payload_dtype: str | None


@dataclass
class Session:
    output_dir: Path
    runtime_payloads: bool
    events: dict[str, Event] = field(default_factory=dict)
    open_ranges: list[str] = field(default_factory=list)


_DEFAULT = Session(Path(os.environ.get("TL_IKET_OUTPUT_DIR", DEFAULT_OUTPUT_DIR)), False)
_SESSION: contextvars.ContextVar[Session] = contextvars.ContextVar("egtile_iket_session", default=_DEFAULT)
_warned = False


@contextlib.contextmanager
def session(output_dir: str | os.PathLike | None = None, runtime_payloads: bool = False) -> Iterator[Session]:
    """A fresh event registry (and output directory) for the kernels built inside it."""
    out = Path(output_dir) if output_dir is not None else _DEFAULT.output_dir
    out.mkdir(parents=True, exist_ok=True)
    token = _SESSION.set(Session(out, bool(runtime_payloads)))
    try:
        yield _SESSION.get()
    finally:
        _SESSION.reset(token)


def payload(value: Any, dtype: str = "int32") -> Payload:
    """A payload descriptor: ``value`` (a kernel expression or Python scalar) captured as ``dtype``."""
    if dtype not in PAYLOAD_DTYPES:
        raise DSLError(f"iket.payload dtype {dtype!r}: IKET payloads are one of {', '.join(PAYLOAD_DTYPES)}",
                       tracer.user_loc())
    return Payload(value, dtype)


def _payload_dtype(p: Any) -> str | None:
    if p is None:
        return None
    if isinstance(p, Payload):
        return p.dtype
    if isinstance(p, bool) or not isinstance(p, (int, float)) and not hasattr(p, "dtype"):
        raise DSLError(f"iket payload {p!r}: pass iket.payload(value, dtype=...) or a Python int/float",
                       tracer.user_loc())
    d = str(getattr(p, "dtype", "float32" if isinstance(p, float) else "int32"))
    return d if d in PAYLOAD_DTYPES else payload(p, d).dtype


def _register(name: str, kind: str, p: Any) -> None:
    global _warned
    loc = tracer.user_loc()
    if not isinstance(name, str) or not name or len(name.encode()) > NAME_BYTES:
        raise DSLError(f"iket {kind} name {name!r}: a non-empty string of at most {NAME_BYTES} UTF-8 bytes", loc)
    if tracer.active() is None:
        raise DSLError(f"iket.{'mark' if kind == 'marker' else 'range'}({name!r}) outside a kernel: IKET events "
                       "are written by the kernel's threads, inside `with T.Kernel(...)`", loc)
    s = _SESSION.get()
    ev = Event(name, kind, _payload_dtype(p))
    old = s.events.get(name)
    if old is not None and old.payload_dtype != ev.payload_dtype:
        raise DSLError(f"iket {kind} {name!r} has payload dtype {ev.payload_dtype} here and {old.payload_dtype} "
                       "before: one name has one payload dtype", loc)
    s.events.setdefault(name, ev)
    if not _warned:
        _warned = True
        warnings.warn("egtile accepts IKET markers and ranges and emits no event records (egtile has no IKET "
                      "runtime): the kernel runs uninstrumented; kernel.explain() shows egtile's schedule",
                      IketWarning, stacklevel=3)


def mark(name: str, payload: Any = None) -> None:
    """An instant event named ``name`` (accepted, not recorded: see the module's docstring)."""
    _register(name, "marker", payload)


def range_push(name: str, payload: Any = None) -> None:
    """Opens the range ``name``; :func:`range_pop` closes it."""
    _register(name, "range", payload)
    _SESSION.get().open_ranges.append(name)


def range_pop(name: str | None = None) -> None:
    """Closes the innermost open range (which must be ``name`` when given)."""
    s = _SESSION.get()
    if not s.open_ranges or name is not None and s.open_ranges[-1] != name:
        top = s.open_ranges[-1] if s.open_ranges else None
        raise DSLError(f"iket.range_pop({name!r}): the innermost open range is {top!r}", tracer.user_loc())
    s.open_ranges.pop()


range_start = range_push
range_end = range_pop


@contextlib.contextmanager
def range(name: str, payload: Any = None) -> Iterator[None]:  # noqa: A001 - IKET's name
    """``with iket.range(name):`` around a lexical region of the kernel."""
    range_push(name, payload)
    try:
        yield
    finally:
        range_pop(name)


def event_table() -> dict[str, dict[str, Any]]:
    """The names registered in the current session: kind and payload dtype of each."""
    return {e.name: {"kind": e.kind, "payload_dtype": e.payload_dtype} for e in _SESSION.get().events.values()}


def output_dir() -> Path:
    """The current session's output directory."""
    return _SESSION.get().output_dir


def output_path(name: str, directory: str | os.PathLike | None = None) -> Path:
    """``name`` inside ``directory`` (default: the session's output directory), which is created."""
    d = Path(directory) if directory is not None else output_dir()
    d.mkdir(parents=True, exist_ok=True)
    return d / name


def trace_files(directory: str | os.PathLike | None = None) -> list[Path]:
    """The IKET trace files (``*.json``) in ``directory``: egtile writes none, so only an external
    profiler's."""
    d = Path(directory) if directory is not None else output_dir()
    return sorted(p for p in d.glob("*trace*.json")) if d.is_dir() else []


def runtime_payloads_enabled() -> bool:
    """Whether the current session asked for runtime payloads (egtile records none either way)."""
    return _SESSION.get().runtime_payloads


__all__ = ["IketWarning", "Payload", "event_table", "mark", "output_dir", "output_path", "payload", "range",
           "range_end", "range_pop", "range_push", "range_start", "runtime_payloads_enabled", "session",
           "trace_files"]
