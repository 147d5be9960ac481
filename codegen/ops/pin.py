"""Keeping a barrier or a wgmma wait after the register work the schedule put before it, in the machine code.

ptxas schedules ``bar.sync`` and ``wgmma.wait_group`` as early as their operands allow: above register-only
statements that precede them in the program (measured in SASS, 2026-12-07). Two of egtile's schedules depend on
that order: the ping-pong whose turn holds no wait (:mod:`egtile.rules.pingpong_carry`; its ``bar.sync`` rose
above the 66 exponentials of the softmax, so each warpgroup ran its softmax inside its tensor-core turn), and the
rotated loop (:mod:`egtile.rules.overlap`; its ``wait_group 0`` rose above the softmax it was to run under).

A node's ``pinned_after`` names register fragments; before the node, each thread that runs it stores the XOR of
their values (of all of them for a fragment of at most :data:`SMALL` values per thread, else its first and last) to
its own word of a scratch area (``pin``: four bytes per thread up to the last that runs a pinned node). In today's
ptxas the shared-memory store itself is what holds the order: neither a barrier nor a wait moves above it, and the
work the program puts before the store stays before it (a store of a constant does the same; an empty ``asm
volatile`` with a memory clobber does not). Storing the named values adds a data dependence that holds whatever a
later ptxas schedules: at least those values (a softmax's row sums, which every exponential feeds) are computed
first. Nothing reads the area and no two threads share a word, so no value the schedule computes changes; the
verifier counts the store as a read of the named fragments (``check_wgmma_waits``: a pin may not read registers a
pending wgmma owns), the simulator ignores it. Cost: one store per pinned node per thread, and the area's bytes of
shared memory.
"""

from __future__ import annotations

from egtile.ir.handshake import WARPGROUP
from egtile.ir.wgmma import PIN_DTYPES

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.names import ident
from egtile.codegen.registry import NO_NEEDS, Needs, Scratch
from egtile.codegen.threads import TID

AREA = "pin"
"""The scratch area of the pins: one word per thread, up to the last thread a pinned node runs on."""

SMALL = 4
"""A fragment of at most this many values per thread is pinned by all of them (a softmax's row statistics, one per
row a thread holds); a larger one by its first and last."""

def _end(node) -> int:
    """One past the last thread that runs ``node`` (a ``WgmmaWait``'s range, a ``NamedSync``'s warpgroups)."""
    threads = getattr(node, "threads", None)
    if threads is not None:
        return threads.end
    return node.base + WARPGROUP * len(node.ids)


def pin_needs(node, sched) -> Needs:
    """The pin area, for a node with ``pinned_after``: a word for each thread up to the node's last."""
    if not getattr(node, "pinned_after", ()):
        return NO_NEEDS
    return Needs(scratch=(Scratch(AREA, 4 * _end(node), 4),))


def pin_lines(node, ctx: Ctx) -> list[str]:
    """The store that keeps ``node`` after the values of its ``pinned_after`` fragments (none without them), for the
    threads that run the node (the emitter guards it with them).

    Raises:
        CodegenError: a named fragment is not a register fragment of the schedule, or of a type a pin cannot store.
    """
    names = tuple(dict.fromkeys(getattr(node, "pinned_after", ())))  # a repeated name would XOR itself away
    if not names:
        return []
    terms = []
    what = f"{type(node).__name__} (sid {getattr(node, 'sid', None)})"
    for n in names:
        frag = ctx.sched.fragment(n)
        if frag is None:
            raise codegen_error(ctx, f"{what} is pinned after {n!r}, which is not a register fragment",
                                getattr(node, "sid", None))
        dt = ctx.buffer(n).dtype
        if dt not in PIN_DTYPES:
            raise codegen_error(ctx, f"{what} is pinned after {n!r} of type {dt}; a pin stores one of "
                                     f"{', '.join(PIN_DTYPES)}", getattr(node, "sid", None))
        k = frag.values_per_thread
        terms += [f"eg_pin_bits({ident(n)}[{v}])" for v in (range(k) if k <= SMALL else (0, k - 1))]
    bits = " ^ ".join(terms)
    return [f"eg_pin_order({ctx.scratch(AREA)} + {TID} * 4, {bits});  // keeps what follows after "
            f"{', '.join(names)} in the machine code"]


__all__ = ["AREA", "SMALL", "pin_lines", "pin_needs"]
