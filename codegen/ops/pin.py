"""Keeping a barrier or a wgmma wait after the register work the schedule put before it, in the machine code.

ptxas schedules ``bar.sync`` and ``wgmma.wait_group`` as early as their operands allow: above register-only
statements that precede them in the program (measured in SASS, 2026-12-07). Two of egtile's schedules depend on
that order: the ping-pong whose turn holds no wait (:mod:`egtile.rules.pingpong_carry`; its ``bar.sync`` rose
above the 66 exponentials of the softmax, so each warpgroup ran its softmax inside its tensor-core turn), and the
rotated loop (:mod:`egtile.rules.overlap`; its ``wait_group 0`` rose above the softmax it was to run under).

A node's ``pinned_after`` names register fragments; before the node, each thread stores the bits of their values
(XORed; :data:`SMALL`) to its own word of a scratch area (``pin``, four bytes per thread of the block). A shared store
does not move past a barrier or a wait, nor they above it, and it needs the values, so ptxas computes them first.
The fragments a rule names are those of the last statement of the work (a softmax's row sums, which every
exponential feeds). Nothing reads the area and no two threads share a word, so the schedule's meaning (and what
the verifier and the simulator check) is unchanged; it costs one store per pinned node per thread.
"""

from __future__ import annotations

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.names import ident
from egtile.codegen.registry import NO_NEEDS, Needs, Scratch
from egtile.codegen.threads import TID

AREA = "pin"
"""The scratch area of the pins: one word per thread of the block."""

SMALL = 4
"""A fragment of at most this many values per thread is pinned by all of them (a softmax's row statistics, one per
row a thread holds); a larger one by its first and last."""


def pin_needs(node, sched) -> Needs:
    """The pin area, for a node with ``pinned_after``."""
    if not getattr(node, "pinned_after", ()):
        return NO_NEEDS
    return Needs(scratch=(Scratch(AREA, 4 * sched.threads, 4),))


def pin_lines(node, ctx: Ctx) -> list[str]:
    """The store that keeps ``node`` after the values of its ``pinned_after`` fragments (none without them).

    Raises:
        CodegenError: a named fragment is not a register fragment of the schedule.
    """
    names = getattr(node, "pinned_after", ())
    if not names:
        return []
    terms = []
    for n in names:
        frag = ctx.sched.fragment(n)
        if frag is None:
            raise codegen_error(ctx, f"{type(node).__name__} is pinned after {n!r}, which is not a register fragment",
                                getattr(node, "sid", None))
        k = frag.values_per_thread
        terms += [f"eg_pin_bits({ident(n)}[{v}])" for v in (range(k) if k <= SMALL else (0, k - 1))]
    bits = " ^ ".join(terms)
    return [f"eg_pin_order({ctx.scratch(AREA)} + {TID} * 4, {bits});  // keeps what follows after "
            f"{', '.join(names)} in the machine code"]


__all__ = ["AREA", "pin_lines", "pin_needs"]
