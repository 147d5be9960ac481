"""Exception types raised by egtile.

Every user-facing error derives from :class:`EgtileError`. Errors about a kernel's source carry the
user's file and line (:class:`SourceLoc`) and show it in the message, so a failure points at the line
the user wrote, never at egtile's internals.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLoc:
    """A position in the user's kernel source.

    Attributes:
        file: path of the Python file.
        line: 1-based line number.
        text: the stripped source line, for messages ('' when unavailable).
    """

    file: str
    line: int
    text: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
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
