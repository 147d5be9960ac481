"""egtile's own limits: how large a traced program and how long a CPU run may be, and their knobs.

Each limit raises an egtile error that names the kernel, the limit and the knob that raises it, instead
of a ``RecursionError`` or a run that takes hours (``docs/language.md``, "Limits"). Knobs are
environment variables read when the limit is checked, so a test or a session can raise one with
``monkeypatch.setenv`` / ``os.environ``.

* ``EGTILE_MAX_EXPR_DEPTH`` (default 2000): how deeply one scalar expression may nest (``acc = acc + X[i]``
  in a Python loop of n steps nests n levels).
* ``EGTILE_MAX_NESTING`` (default 128): how deeply loops and ``T.If`` blocks may nest.
* ``EGTILE_MAX_CPU_BLOCKS`` (default 65536): how many thread blocks the interpreter and the simulator run
  for one call (they run blocks one after another, at milliseconds or more per block).
* ``EGTILE_MAX_CPU_STEPS`` (default 20,000,000): steps of one interpreter or simulator call (the
  interpreter counts statements run; the simulator counts scheduling steps: every thread's statements and
  every asynchronous completion).

Every stage of egtile walks expressions and statement nests recursively. Tracing a kernel therefore makes
sure Python's recursion limit fits the deepest expression and nest the kernel holds
(:func:`ensure_recursion`); the limit is only ever raised, never lowered (it is process-wide, and another
thread may be compiling a deep kernel at the same time).
"""

from __future__ import annotations

import os
import sys
import threading

DEFAULTS = {"EGTILE_MAX_EXPR_DEPTH": 2000, "EGTILE_MAX_NESTING": 128, "EGTILE_MAX_CPU_BLOCKS": 65536,
            "EGTILE_MAX_CPU_STEPS": 20_000_000}

# Python frames one level of expression or statement nesting costs in the deepest stage (the codec
# decoding a cached schedule, the printer, codegen), measured with margin; the base covers the pipeline's
# own call depth.
FRAMES_PER_LEVEL = 12
BASE_FRAMES = 2000

_LOCK = threading.Lock()


def limit(name: str) -> int:
    """The value of limit ``name`` (an environment variable of :data:`DEFAULTS`), at least 1.

    Raises:
        ArgumentError: the variable is set to something other than a positive integer.
    """
    from egtile.errors import ArgumentError

    raw = os.environ.get(name, "").strip()
    if not raw:
        return DEFAULTS[name]
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise ArgumentError(f"environment variable {name}={raw!r}: expected a positive integer (default "
                            f"{DEFAULTS[name]})")
    return value


def ensure_recursion(levels: int) -> None:
    """Make Python's recursion limit fit a program nested ``levels`` deep (expressions or statements);
    only ever raises it."""
    need = BASE_FRAMES + FRAMES_PER_LEVEL * max(0, levels)
    with _LOCK:
        if sys.getrecursionlimit() < need:
            sys.setrecursionlimit(need)


def check_blocks(kernel_name: str, grid: tuple[int, ...], executor: str) -> None:
    """Refuse a CPU run of more than ``EGTILE_MAX_CPU_BLOCKS`` blocks before it starts.

    Raises:
        LimitError: names the kernel, the grid, the limit and the knob.
    """
    from egtile.errors import LimitError

    n = 1
    for g in grid:
        n *= g
    cap = limit("EGTILE_MAX_CPU_BLOCKS")
    if n > cap:
        raise LimitError(f"kernel {kernel_name!r}: the {executor} would run {n} blocks (grid {tuple(grid)}) one "
                         f"after another on the CPU; egtile's limit is {cap} (EGTILE_MAX_CPU_BLOCKS). Test with a "
                         "smaller problem, or raise the limit")


def step_error(kernel_name: str, steps: int, executor: str) -> Exception:
    """The :class:`~egtile.errors.LimitError` of a CPU run past ``EGTILE_MAX_CPU_STEPS`` steps."""
    from egtile.errors import LimitError

    return LimitError(f"kernel {kernel_name!r}: the {executor} stopped after {steps} steps; egtile's limit is "
                      f"{limit('EGTILE_MAX_CPU_STEPS')} (EGTILE_MAX_CPU_STEPS). A loop may not terminate, or the "
                      "problem is too large for a CPU run: test with a smaller one, or raise the limit")


__all__ = ["DEFAULTS", "check_blocks", "ensure_recursion", "limit", "step_error"]
