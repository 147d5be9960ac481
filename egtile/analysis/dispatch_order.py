"""Heaviest blocks first: the dispatch order of a grid dimension whose blocks do more work the higher their index.

Hardware fact: the block scheduler starts a grid's blocks in increasing linear ``blockIdx`` order (``x``
fastest) as SMs free up. When the trip count of a block's loop grows with its index along a grid dimension
(causal attention: query block ``i`` runs ``i + 1`` key blocks), the heaviest blocks of that dimension start
last, and at the end of the grid the SMs that finished idle while the last heavy blocks run. Binding the
block index as ``n - 1 - blockIdx`` instead starts the heaviest block of each row of the grid first, so the
blocks left at the end are the light ones (FlashAttention-3 schedules causal tiles longest-first for the same
reason). Measured on the H200 (2026-12-02, ``docs/perf.md``): **neutral** on egtile's causal forward at B=4 H=32
S=4096 D=128 (``benchmarks/attention.py``: 460.3 TFLOP/s with it, 461.3 without), so it is off by default and
opt-in with ``EGTILE_WITH_LOWERING=heaviest-first``. (A first prototype seemed to gain 7-9%; re-run with the order
already reversed, its "reversed" variant was again the faster one, so that gain was not the order.)

Legality: the map ``b -> n - 1 - b`` is a bijection of ``0..n-1``, so the same set of blocks runs and each
computes what it computed before; only *when* each block runs changes. That is unobservable exactly when
blocks do not communicate: no atomics and no opaque (impure) externs, and no global buffer that the kernel
both writes and reads (a block could read another block's result, or spin on a flag an earlier-launched
block sets: orders that a program may rely on for progress, e.g. decoupled look-back). Those are the
conditions :func:`plan` checks, and :func:`egtile.verifier.dispatch.check_dispatch` re-checks them on the
scheduled kernel.

When: a serial or pipelined loop of the kernel whose bounds depend on exactly one block index (and
constants) and whose trip count, evaluated at every value of that index, never decreases and ends higher
than it starts. The first such dimension is reversed, when ``EGTILE_WITH_LOWERING=heaviest-first`` asks for it
(:mod:`egtile.lower.switches`).
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.analysis.access import ANY_BUFFER, free_vars, own_reads, own_writes, reads, walk_expr, writes
from egtile.ir.kernel import AtomicAdd, Expr, Extern, Fill, For, Gemm, Kernel, Load, Reduce, walk

RULE = "heaviest-first"
MAX_EVALUATED = 1 << 16  # block indices whose trip count is evaluated (larger grids are not reordered)


@dataclass(frozen=True)
class DispatchPlan:
    """Grid dimensions whose block index is bound reversed, and why (for ``explain()``)."""

    reversed_dims: tuple[int, ...]
    reason: str


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


def plan(kernel: Kernel) -> DispatchPlan | None:
    """The heaviest-first plan of ``kernel``, or None (module docstring)."""
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
        axis = "xyz"[d] if d < 3 else str(d)
        return DispatchPlan((d,), f"the loop at sid {loop.sid} runs {trips[0]} .. {trips[-1]} iterations as {var} "
                                  f"goes 0 .. {n - 1}: {var} is bound as {n - 1} - blockIdx.{axis}, so each row of the "
                                  "grid starts with its heaviest block (no block reads another's writes, no atomics: "
                                  "the order is unobservable; egtile.analysis.dispatch_order)")
    return None


__all__ = ["RULE", "DispatchPlan", "communication", "plan"]
