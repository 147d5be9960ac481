"""Tests that kill the surviving cosmic-ray mutants of the checkers and the lowering (``egtile/verifier``,
``egtile/sim``, ``egtile/lower/phase.py``, ``codegen/ops``; docs/mutation.md)."""

from __future__ import annotations

import egtile
from egtile.ir import (
    BinOp, Buffer, Const, Elect, For, Kernel, Leaf, Load, Scheduled, SeqLoop, Store, SyncThreads, ThreadRange, Var,
)


def _c(v: int) -> Const:
    return Const(v, "int32")


def _reversed_loop(reverse: bool) -> Scheduled:
    """``for k: S[0] = In[k]; L[0] = S[0]; Out[k] = L[0]`` with the CTA barriers between, scheduled with the
    serial loop run forward or backward (``k = 3 - kk``: the same statements in the opposite order). One elected
    thread writes ``S[0]`` and every thread reads it, so the write's accesses (one footprint, its timestamps
    falling as the program advances) form a class of their own that the order analysis checks pair by pair."""
    In, Out = Buffer("In", (4,), "float32", "global"), Buffer("Out", (4,), "float32", "global")
    S, L = Buffer("S", (1,), "float32", "shared"), Buffer("L", (1,), "float32", "local")
    k, kk = Var("k"), Var("kk")
    w, r, o = (Store(2, S, (_c(0),), Load(In, (k,))), Store(3, L, (_c(0),), Load(S, (_c(0),))),
               Store(4, Out, (k,), Load(L, (_c(0),))))
    kernel = Kernel("rev", (In, Out), (1,), (Var("bx"),), 128, (S, L), (For(1, k, _c(0), _c(4), "serial", (w, r, o)),))
    everyone = ThreadRange(0, 128)
    lo, hi = (BinOp("-", _c(3), kk), BinOp("-", _c(4), kk)) if reverse else (kk, BinOp("+", kk, _c(1)))
    inner = SeqLoop(k, lo, hi, (Elect(everyone, (Leaf(w),)), SyncThreads(everyone), Leaf(r), SyncThreads(everyone),
                                Elect(everyone, (Leaf(o),))), sid=1)
    return Scheduled(kernel, 128, (S, L), (), (SeqLoop(kk, _c(0), _c(4), (inner,)),))


def test_a_loop_run_backward_reorders_its_writes_and_the_verifier_says_so():
    # order.py _class_pair: a class whose timestamps do not grow with the program is checked pair by pair;
    # ``x is not y`` -> ``x <= y`` (and any other break of that enumeration) was reached by no test
    assert egtile.verify(_reversed_loop(False)) == []
    found = {(v.property, tuple(v.sids)) for v in egtile.verify(_reversed_loop(True))}
    assert ("L2", (2, 2)) in found, found   # S[0]'s writes of k = 3, 2, 1, 0: the last one must be k = 3's
    assert any(p == "L1" and s == (2, 3) for p, s in found), found
