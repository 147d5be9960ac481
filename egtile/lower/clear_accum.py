"""A zero fill of a wgmma accumulator folded into the wgmma's ``scale-d = 0``.

``wgmma.mma_async`` computes ``D = A B + (scale-d ? D : 0)`` (PTX ISA 9.7.15.5.2, the ``scale-d`` operand): with
``scale-d`` false on its first k16 step it ignores the accumulator's old value. A ``T.Parallel`` that writes 0 into
every element of register fragment ``C`` (``T.clear(acc_s)``, or the flash-attention mask once its selects are
decided by the loop bounds: ``k * 128 + j >= 4096`` is never true for ``k < 32``, ``j < 128``), followed, with no
other access to ``C`` in between, by a wgmma ``T.gemm`` accumulating into ``C``, is the same as the gemm with
``clear_accum`` (egtile already emits ``scale-d = 0`` on the first k16 step of a clearing gemm): the fill is dropped
(64 register moves per thread and iteration at 128x128 on two warpgroups).

Condition (``clear-into-scale-d``): the accumulator's only writer since its last reader is the fill, the fill
writes every element of ``C`` (a layout loop over ``C``'s shape storing ``C[vars]``) and each stored value is 0 for
every iteration (its selects decided over the ranges by egtile.analysis.decide). The verifier proves the same from
the kernel's own statements (egtile.verifier.versions, property L9) and the simulator runs the folded gemm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from egtile.analysis.versioning import loop_range, specialize_expr
from egtile.ir.fragment import LayoutLoop
from egtile.ir.kernel import Cast, Const, Expr, Kernel, Store
from egtile.ir.scheduled import Decision, Elect, Leaf, RoleSplit, SeqLoop, SIf, SStmt
from egtile.ir.wgmma import WgmmaMma

RULE = "clear-into-scale-d"


def _is_zero(e: Expr) -> bool:
    match e:
        case Const(value=v) if not isinstance(v, bool):
            return v == 0
        case Cast(value=v):
            return _is_zero(v)
    return False


def _zero_fill(s: SStmt, ranges: Mapping[str, tuple[int, int]], kernel: Kernel) -> str | None:
    """The fragment ``s`` sets to 0 in every element, or ``None``."""
    if not isinstance(s, LayoutLoop) or not s.body:
        return None
    inner = {**ranges, **{v.name: (0, n) for v, n in zip(s.vars, s.extents)}}
    for b in s.body:
        if not (isinstance(b, Leaf) and isinstance(b.stmt, Store) and b.stmt.buffer.name == s.fragment
                and tuple(b.stmt.indices) == tuple(s.vars) and _is_zero(specialize_expr(b.stmt.value, inner, ()))):
            return None
    try:
        shape = tuple(kernel.buffer(s.fragment).shape)
    except KeyError:
        return None
    return s.fragment if tuple(s.extents) == shape else None


def _mentions(s: SStmt, name: str) -> bool:
    return f"name={name!r}" in repr(s) or f"fragment={name!r}" in repr(s)  # conservative: any reference at all


def _fold_list(stmts: tuple[SStmt, ...], ranges: dict[str, tuple[int, int]], kernel: Kernel,
               made: list[Decision]) -> tuple[SStmt, ...]:
    out = list(stmts)
    drop: set[int] = set()
    for p, s in enumerate(out):
        f = _zero_fill(s, ranges, kernel)
        if f is None:
            continue
        for q in range(p + 1, len(out)):
            t = out[q]
            if isinstance(t, WgmmaMma) and t.gemm.c.buffer.name == f and not t.gemm.clear_accum \
                    and f not in (t.gemm.a.buffer.name, t.gemm.b.buffer.name):
                out[q] = replace(t, gemm=replace(t.gemm, clear_accum=True))
                drop.add(p)
                made.append(Decision(RULE, t.sid, "scale-d 0", f"the T.Parallel (sid {s.sid}) before it writes 0 to "
                                     f"every element of {f} and nothing touches {f} in between: its first wgmma k16 "
                                     "step runs with scale-d = 0 instead (PTX ISA wgmma.mma_async), the fill is "
                                     "dropped"))
                break
            if _mentions(t, f):
                break
    kept = tuple(x for i, x in enumerate(out) if i not in drop)
    return tuple(_descend(x, ranges, kernel, made) for x in kept)


def _descend(s: SStmt, ranges: dict[str, tuple[int, int]], kernel: Kernel, made: list[Decision]) -> SStmt:
    match s:
        case SeqLoop(var=var, start=start, stop=stop) if (r := loop_range(start, stop, ranges)) is not None:
            return replace(s, body=_fold_list(s.body, {**ranges, var.name: r}, kernel, made))
        case RoleSplit(roles=roles):
            return replace(s, roles=tuple(replace(r, body=_fold_list(r.body, ranges, kernel, made)) for r in roles))
        case SIf(versioned=False):
            return replace(s, then_body=_fold_list(s.then_body, ranges, kernel, made),
                           else_body=_fold_list(s.else_body, ranges, kernel, made))
        case Elect():
            return replace(s, body=_fold_list(s.body, ranges, kernel, made))
    return s


def fold_clears(stmts: tuple[SStmt, ...], kernel: Kernel) -> tuple[tuple[SStmt, ...], tuple[Decision, ...]]:
    """``stmts`` with each zero fill of a wgmma accumulator folded into the wgmma (module docstring), and one
    :class:`Decision` per fold for ``explain()``."""
    made: list[Decision] = []
    grid = {v.name: (0, n) for v, n in zip(kernel.block_vars, kernel.grid)}
    return _fold_list(stmts, grid, kernel, made), tuple(made)


__all__ = ["RULE", "fold_clears"]
