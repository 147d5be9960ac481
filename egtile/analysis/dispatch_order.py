"""Heaviest blocks first, in groups of rows: the dispatch order of a grid whose blocks do more work the higher
their index along one dimension.

Hardware fact: the block scheduler starts a grid's blocks in increasing linear launch position (``x`` fastest) as
SMs free up. When the trip count of a block's loop grows with its index along a grid dimension (causal attention:
query block ``i`` runs ``i + 1`` key blocks), launch order leaves heavy blocks among the last to start, and at the
end of the grid the SMs that finished idle while they run. :class:`egtile.ir.dispatch.DispatchOrder` binds the
block indices to another permutation of the launch positions: groups of ``group`` rows (a row: one value of the
other grid dimensions: a head of one batch), and inside a group the heavy index from highest to lowest, the rows
fastest. That is longest-processing-time-first list scheduling inside each group (FlashAttention-3 schedules its
causal tiles longest-first for the same reason), and the group keeps the blocks in flight on a few rows, whose
shared inputs (a head's K and V) stay in L2. The group is the fewest rows whose blocks fill the target's SMs
(:data:`egtile.device.TARGET_NUM_SMS`) once: fewer would leave a group too small to balance, more would spread the
blocks in flight over more rows than one wave needs.

List scheduling of B=4 H=32 S=4096 causal attention at 128x128 blocks (4096 blocks of 1 to 32 iterations) on
132 SMs: launch order ends 4.1% after the balanced finish, each row reversed (the form measured neutral on the
H200 on 2026-12-02, when this switch reversed one dimension only) 3.5%, heaviest first in groups of 8 heads 0%.
Measured on an H100 (2026-12-06, ``docs/perf.md``, a per-block timeline read from the GPU): the tail drops from 3.5%
to under 1% of SM time, but under the 700 W cap the busy SMs clock higher while others idle, so the time gained is
0.5-2%, within the benchmark's spread. Off by default, opt-in with ``EGTILE_WITH_LOWERING=heaviest-first``
(:mod:`egtile.lower.switches`).

Legality: the map is a bijection of the launch positions, so the same set of blocks runs and each computes what it
computed before; only *when* each block runs changes. That is unobservable exactly when blocks do not
communicate: no atomics and no opaque (impure) externs, and no global buffer that the kernel both writes and reads
(a block could read another block's result, or spin on a flag an earlier-launched block sets: orders that a
program may rely on for progress, e.g. decoupled look-back). Those are the conditions :func:`plan` checks, and
:func:`egtile.verifier.dispatch.check_dispatch` re-checks them and the bijection on the scheduled kernel.

When: a serial or pipelined loop of the kernel whose bounds depend on exactly one block index (and constants) and
whose trip count, evaluated at every value of that index, never decreases and ends higher than it starts. The first
such dimension is the heavy one.
"""

from __future__ import annotations

from math import prod

from egtile.analysis.access import ANY_BUFFER, free_vars, own_reads, own_writes, reads, walk_expr, writes
from egtile.device import TARGET_NUM_SMS
from egtile.ir.dispatch import DispatchOrder
from egtile.ir.kernel import AtomicAdd, Expr, Extern, Fill, For, Gemm, Kernel, Load, Reduce, walk

RULE = "heaviest-first"
MAX_EVALUATED = 1 << 16  # block indices whose trip count is evaluated (larger grids are not reordered)


def communication(kernel: Kernel) -> str | None:
    """Why blocks of ``kernel`` may observe each other's order (None: they cannot; module docstring)."""
    written: set[str] = set()
    read: set[str] = set()
    for s in walk(kernel.body):
        match s:
            case AtomicAdd():
                return f"an atomic at sid {s.sid} (blocks may observe each other's order)"
            case Extern(pure=False):
                return f"the extern {s.name} at sid {s.sid} (what it touches is unknown)"
            case Fill() | Gemm() | Reduce():
                names = {a.buffer for a in reads(s) | writes(s)}
                written.update(names)  # conservative: every buffer named counts as written and read
                read.update(names)
            case _:  # a loop or branch by its head (bounds, condition): walk visits its body
                written.update(a.buffer for a in own_writes(s))
                read.update(a.buffer for a in own_reads(s))
    glob = {b.name for b in kernel.params} | {b.name for b in kernel.allocs if b.scope == "global"} | {ANY_BUFFER}
    both = sorted(written & read & glob)
    if both:
        return f"global buffer {both[0]} is both written and read (a block may read another block's result)"
    return None


def _vars(e: Expr) -> set[str] | None:
    """Variable names of ``e``; None when it reads memory."""
    if any(isinstance(x, Load) for x in walk_expr(e)):
        return None
    return set(free_vars(e))


def _trips(loop: For, var: str, n: int) -> list[int] | None:
    from egtile.evaluate import evaluate

    def no_load(*_):
        raise LookupError

    try:
        return [max(0, int(evaluate(loop.stop, {var: b}, no_load)) - int(evaluate(loop.start, {var: b}, no_load)))
                for b in range(n)]
    except (LookupError, KeyError, ArithmeticError, ValueError, TypeError):
        return None


def group_for(heavy: int, rows: int, sms: int = TARGET_NUM_SMS) -> int:
    """Rows per group: the fewest, dividing ``rows``, whose ``heavy`` blocks each fill ``sms`` SMs once."""
    return next((g for g in range(1, rows + 1) if rows % g == 0 and g * heavy >= sms), rows)


def plan(kernel: Kernel) -> DispatchOrder | None:
    """The heaviest-first order of ``kernel``'s grid, or None (module docstring)."""
    dims = {v.name: (d, n) for d, (v, n) in enumerate(zip(kernel.block_vars, kernel.grid))}
    for loop in (s for s in walk(kernel.body) if isinstance(s, For) and s.kind != "parallel"):
        names = [_vars(loop.start), _vars(loop.stop)]
        if any(x is None for x in names):
            continue
        used = set().union(*names) & dims.keys()
        if len(used) != 1 or set().union(*names) - used:
            continue
        (var,) = used
        d, n = dims[var]
        if n < 2 or n > MAX_EVALUATED:
            continue
        trips = _trips(loop, var, n)
        if trips is None or trips[-1] <= trips[0] or any(b < a for a, b in zip(trips, trips[1:])):
            continue
        why = communication(kernel)
        if why is not None:
            return None
        grid = tuple(int(x) for x in kernel.grid)
        rows = prod(m for e, m in enumerate(grid) if e != d)
        group = group_for(n, rows)
        axis = "xyz"[d] if d < 3 else str(d)
        return DispatchOrder(grid, d, group, (
            f"the loop at sid {loop.sid} runs {trips[0]} .. {trips[-1]} iterations as {var} goes 0 .. {n - 1}: blocks "
            f"start in groups of {group} of the {rows} row(s) of the other grid dimension(s), each group with its "
            f"highest {var} (blockIdx.{axis}'s heaviest) first, so the blocks left at the end of the grid are short "
            "ones (no block reads another's writes, no atomics: the order is unobservable; "
            "egtile.analysis.dispatch_order)"))
    return None


__all__ = ["RULE", "communication", "group_for", "plan"]
