"""The loads an expression evaluates: what the tracer records as reads and what uniformity inspects.

Its own module because both :mod:`egtile.verifier.trace` and :mod:`egtile.verifier.uniform` need it and
the tracer imports the uniformity check.
"""

from __future__ import annotations

from egtile.ir.kernel import AddressOf, BinOp, Cast, Expr, Load, Select, UnOp


def loads_in(e: Expr) -> list[Load]:
    """Every ``Load`` evaluated by ``e`` (the target of an ``AddressOf`` is not a load, its indices are)."""
    match e:
        case Load(indices=idx):
            out = [e]
            for i in idx:
                out += loads_in(i)
            return out
        case AddressOf(load=Load(indices=idx)):
            return [x for i in idx for x in loads_in(i)]
        case BinOp(a=a, b=b):
            return loads_in(a) + loads_in(b)
        case UnOp(a=a) | Cast(value=a):
            return loads_in(a)
        case Select(cond=c, a=a, b=b):
            return loads_in(c) + loads_in(a) + loads_in(b)
        case _:
            return []
