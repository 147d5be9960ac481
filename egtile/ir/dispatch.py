"""The order in which a grid's blocks start: which user block indices a block's launch position stands for.

Hardware fact: the block scheduler starts a grid's blocks in increasing linear launch position
(``blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)``, ``x`` fastest) as SMs free up. A kernel's
block indices are normally the launch coordinates themselves. A :class:`DispatchOrder` binds them instead to a
permutation of the launch positions, so that the same blocks run in another order (each computes what it computed
before). Its one form, *heaviest first in groups*: launch positions walk groups of ``group`` rows (a row: one value
of every grid dimension other than ``heavy``); inside a group the heavy dimension's index goes from ``n - 1`` down
to ``0`` (its heaviest blocks first), the group's rows fastest. The group keeps the blocks in flight on a few rows
(attention: a few heads, whose K and V stay in L2) while the longest blocks of those rows start first, so the
blocks left at the end of the grid are short ones (longest-processing-time-first list scheduling).

The order is data: :meth:`DispatchOrder.indices` gives each user block index as an expression of the one variable
:data:`LAUNCH` (the linear launch position), which the CUDA backend prints and the simulator evaluates, so both run
the same map; the verifier (L10) checks independently that it is a bijection of the grid and that no block can
observe another's order. Chosen by :mod:`egtile.analysis.dispatch_order`.
"""

from __future__ import annotations

from dataclasses import dataclass
from egtile.ir.kernel import BinOp, Const, Expr, Var

LAUNCH = "eg_launch"
"""The name of the linear launch position in :meth:`DispatchOrder.indices`."""


def _c(v: int) -> Const:
    return Const(v, "int32")


@dataclass(frozen=True)
class DispatchOrder:
    """Heaviest first in groups (module docstring).

    Attributes:
        grid: the kernel's grid, ``x`` first (as ``Kernel.grid``).
        heavy: the grid dimension whose blocks start heaviest (highest index) first.
        group: rows per group; divides the product of the other dimensions.
        reason: why (for ``explain()``).
    """

    grid: tuple[int, ...]
    heavy: int
    group: int
    reason: str = ""

    def indices(self) -> tuple[Expr, ...]:
        """Each user block index, in grid order, as an expression of ``Var(LAUNCH)`` (integer ``/`` and ``%``:
        the launch position is never negative, so they floor)."""
        n = self.grid[self.heavy]
        lin = Var(LAUNCH)
        span = _c(n * self.group)
        within = BinOp("%", lin, span)
        g = _c(self.group)
        heavy = BinOp("-", _c(n - 1), BinOp("/", within, g))
        row = BinOp("+", BinOp("*", BinOp("/", lin, span), g), BinOp("%", within, g))
        out: list[Expr] = []
        stride = 1
        for d, size in enumerate(self.grid):
            if d == self.heavy:
                out.append(heavy)
                continue
            out.append(BinOp("%", BinOp("/", row, _c(stride)), _c(size)) if stride > 1 else BinOp("%", row, _c(size)))
            stride *= size
        return tuple(out)


__all__ = ["LAUNCH", "DispatchOrder"]
