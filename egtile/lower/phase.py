"""Stage and phase of a pipelined loop's iterations: the convention every pipelined schedule lowers to.

With ``S`` buffer versions ("stages") iteration ``k`` of ``T.Pipelined(start, stop)`` uses the stage and
mbarrier phase of its *normalized* index ``r = k - start``: stage ``r % S`` and parity ``(r / S) & 1``
(``r & 1`` when ``S == 1``). See :mod:`egtile.rules.pipeline` for why normalizing matters (PTX ISA
§9.7.13.15 "mbarrier": ``try_wait.parity P`` returns once the phase of parity ``P`` has completed).
"""

from __future__ import annotations

from egtile.ir import BinOp, Const, Expr, Var


def phase_exprs(k: Var, start: Expr, stages: int, mode: str = "normalized") -> tuple[Expr, Expr]:
    """``(stage, parity)`` expressions of iteration ``k`` (see the module docstring).

    Args:
        k: the loop variable.
        start: the loop's start expression.
        stages: ``S >= 1``.
        mode: ``"normalized"`` (``k - start``; correct) or ``"absolute"`` (``k``; the mutant's bug).

    Raises:
        ValueError: ``stages < 1`` or an unknown mode.
    """
    if stages < 1:
        raise ValueError(f"phase_exprs: a pipeline needs at least 1 stage, got {stages}")
    if mode == "normalized":
        rel: Expr = BinOp("-", k, start)
    elif mode == "absolute":
        rel = k
    else:
        raise ValueError(f"phase_exprs: unknown phase mode {mode!r} (expected 'normalized' or 'absolute')")
    one = Const(1)
    if stages == 1:
        return Const(0), BinOp("&", rel, one)
    s = Const(stages)
    return BinOp("%", rel, s), BinOp("&", BinOp("/", rel, s), one)
