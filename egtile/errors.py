"""Exception types raised by egtile.

Every user-facing error derives from :class:`EgtileError`. Errors about a kernel's source carry the
user's file and line (:class:`SourceLoc`) and show it in the message, so a failure points at the line
the user wrote, never at egtile's internals.

The public entry points (``egtile.compile``, ``@egtile.jit``, a compiled kernel's call, ``explain``) raise
their :class:`EgtileError` with egtile's own frames cut from the traceback (:func:`trimmed`, :func:`public`), so
it ends at the user's line: the call, or the kernel's line that uses a construct wrongly. ``EGTILE_DEBUG=1``
keeps the whole traceback; without it the error's ``internal_traceback`` still holds it.
"""

from __future__ import annotations

import functools
import os
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar


@dataclass(frozen=True)
class SourceLoc:
    """A position in the user's kernel source.

    Attributes:
        file: path of the Python file.
        line: 1-based line number.
        text: the stripped source line, for messages ('' when unavailable).
        col: 1-based column of the construct on that line (``None`` when unknown).
    """

    file: str
    line: int
    text: str = ""
    col: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" + (f":{self.col}" if self.col is not None else "")
        return f"{where}: {self.text}" if self.text else where


class EgtileError(Exception):
    """Base class of every error egtile raises on purpose.

    Args:
        message: what is wrong, naming the construct, with expected and actual values.
        loc: the user's source line the error is about, when known.
    """

    def __init__(self, message: str, loc: SourceLoc | None = None) -> None:
        self.message = message
        self.loc = loc
        super().__init__(f"{message}\n  at {loc}" if loc is not None else message)


class DSLError(EgtileError):
    """A kernel uses the DSL in a way egtile cannot trace (e.g. Python ``if`` on a symbolic value)."""


class UnsupportedError(DSLError):
    """A DSL construct egtile does not support yet; the message names it."""


class DTypeError(EgtileError, TypeError):
    """An unknown dtype string, or a tensor whose dtype differs from the kernel parameter's."""


class ShapeError(EgtileError, ValueError):
    """A region out of range, mismatched copy extents, or a tensor whose shape differs from the parameter's."""


class ArgumentError(EgtileError, TypeError):
    """Wrong number or kind of arguments passed to a compiled kernel."""


class DeviceError(EgtileError, ValueError):
    """A tensor on the wrong device, non-contiguous, or misaligned for the instruction that reads it."""


class ExternModelError(EgtileError):
    """An extern function is executed on the CPU (interpreter or simulator) without a registered model."""


class ScheduleError(EgtileError):
    """No legal schedule exists; the message names the statement and the unmet side conditions."""


class KernelRaceError(ScheduleError):
    """The kernel itself races: iterations of one ``T.Parallel`` (or the threads of per-thread code) touch one shared
    or global element with a store and nothing orders them, so no schedule could be legal. Found before scheduling
    (:mod:`egtile.analysis.parallel_races`), at the store's line; a ``ScheduleError`` too, for code that catches
    that."""


class RuleError(EgtileError):
    """A rule or ruleset failed inside the e-graph engine; the message names the rule."""


class ResourceError(EgtileError):
    """A kernel exceeds a hardware limit (shared memory per block, threads per block, registers)."""


class CompileError(EgtileError):
    """NVRTC rejected generated code; the message holds the NVRTC log and the offending generated lines."""


class CodegenError(CompileError):
    """The CUDA backend cannot lower a scheduled statement (e.g. a TMA box the hardware cannot move);
    raised before NVRTC runs, naming the statement and the constraint."""


class LaunchError(EgtileError, RuntimeError):
    """A CUDA driver call or kernel launch failed, or no suitable GPU is present at launch."""


class SimulationError(EgtileError, RuntimeError):
    """The simulator found a race, a deadlock or a repeated nonlocal iteration (target="sim" raises this)."""


class LimitError(EgtileError):
    """A kernel reached one of egtile's own limits (expression depth, statement nesting, blocks or steps of a
    CPU run); the message names the kernel, the limit and the knob (environment variable) that raises it
    (:mod:`egtile.limits`, ``docs/language.md`` "Limits")."""


class MissingConstructError(UnsupportedError, AttributeError):
    """``T.<name>`` for a name ``egtile.language`` does not have: a TileLang construct egtile does not
    implement yet (the message says what to use instead) or an unknown name. Also an ``AttributeError``,
    so ``hasattr(T, name)`` and ``getattr(T, name, default)`` keep working."""


class VerifyLimitError(LimitError):
    """The static verifier's budget (events, listed elements, enumerated loop iterations per block) ran out
    before the schedule was checked; the message names the kernel, what was too large and the knob
    (``egtile.verifier.VerifyLimits``, environment variable ``EGTILE_VERIFY_BUDGET``)."""


# ---- tracebacks that end at the user's line -------------------------------------------------------------------

DEBUG_ENV = "EGTILE_DEBUG"
"""Set (to anything but ``""`` or ``"0"``) to keep egtile's internal frames in the tracebacks of its errors."""

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_NOTE = f"(egtile's internal frames are hidden from this traceback; set {DEBUG_ENV}=1 to see them)"

F = TypeVar("F", bound=Callable[..., Any])


def debug() -> bool:
    """Whether ``EGTILE_DEBUG`` asks for egtile's internal frames."""
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def _user_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    kept = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def trimmed(err: BaseException) -> BaseException:
    """``err`` with egtile's own frames removed from its traceback (and from its cause's), the exceptions it
    was raised while handling hidden from the display (still at ``__context__``), the whole traceback kept
    as ``err.internal_traceback``; ``err`` unchanged under ``EGTILE_DEBUG``."""
    if debug():
        return err
    if not hasattr(err, "internal_traceback"):
        err.internal_traceback = err.__traceback__  # type: ignore[attr-defined]
        err.add_note(_NOTE)
    err.__suppress_context__ = True
    cause = err.__cause__
    if cause is not None and cause.__traceback__ is not None:
        cause.with_traceback(_user_frames(cause.__traceback__))
    return err.with_traceback(_user_frames(err.__traceback__))


def public(fn: F) -> F:
    """Decorate a public entry point: its :class:`EgtileError` leaves with a traceback that ends at the user's
    line (:func:`trimmed`). Other exceptions (egtile's bugs) keep every frame."""

    @functools.wraps(fn)
    def entry(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EgtileError as err:
            raise trimmed(err)  # noqa: B904 - egtile's frames are cut here; EGTILE_DEBUG=1 keeps them

    return entry  # type: ignore[return-value]
