"""egtile.analysis.decide: conditions fixed by their variables' ranges, checked against brute force."""

from __future__ import annotations

import itertools
import random

import pytest

from egtile.analysis.decide import decide
from egtile.evaluate import evaluate
from egtile.ir.kernel import BinOp, Const, Load, Buffer, UnOp, Var

k, j, i = Var("k"), Var("j"), Var("i")
C = lambda v: Const(v)  # noqa: E731


def test_the_non_causal_mask_of_dividing_blocks_is_always_false():
    # k * 128 + j >= 4096 with k < 32 and j < 128: at most 4095
    cond = BinOp(">=", BinOp("+", BinOp("*", k, C(128)), j), C(4096))
    assert decide(cond, {"k": (0, 32), "j": (0, 128)}) is False
    assert decide(cond, {"k": (0, 32), "j": (0, 129)}) is None       # j = 128 reaches 4096 at k = 31
    assert decide(cond, {"k": (0, 32)}) is None                       # j has no range
    assert decide(cond, {"k": (32, 40), "j": (0, 128)}) is True


def test_shared_variables_cancel():
    cond = BinOp("<=", BinOp("+", BinOp("*", k, C(64)), j), BinOp("+", BinOp("*", k, C(64)), C(63)))
    assert decide(cond, {"k": (0, 1 << 20), "j": (0, 64)}) is True


def test_logic_and_negation():
    lt = BinOp("<", j, C(64))
    ge = BinOp(">=", i, C(0))
    r = {"j": (0, 64), "i": (-3, 5)}
    assert decide(BinOp("and", lt, ge), r) is None
    assert decide(BinOp("or", lt, ge), r) is True
    assert decide(UnOp("not", lt), r) is False
    assert decide(BinOp("and", UnOp("not", lt), ge), r) is False


def test_what_it_leaves_undecided():
    A = Buffer("A", (4,), "float32", "global")
    assert decide(BinOp("<", Load(A, (C(0),)), Const(1.0, "float32")), {}) is None    # a load
    assert decide(BinOp("<", BinOp("//", k, C(2)), C(100)), {"k": (0, 10)}) is None   # not linear
    assert decide(BinOp("<", Var("x", "float32"), Const(1.0, "float32")), {"x": (0, 1)}) is None
    # an operand outside int32: the machine value wraps, so nothing is claimed
    big = BinOp("*", k, C(1 << 30))
    assert decide(BinOp(">=", big, C(0)), {"k": (0, 4)}) is None


@pytest.mark.parametrize("seed", range(3))
def test_agrees_with_enumeration(seed):
    rnd = random.Random(seed)
    ops = ["<", "<=", ">", ">=", "==", "!="]
    for _ in range(300):
        ca, cb, c0 = rnd.randint(-5, 5), rnd.randint(-5, 5), rnd.randint(-40, 40)
        lhs = BinOp("+", BinOp("*", k, C(ca)), BinOp("*", j, C(cb)))
        cond = BinOp(rnd.choice(ops), lhs, C(c0))
        if rnd.random() < 0.3:
            cond = BinOp(rnd.choice(["and", "or"]), cond, BinOp(rnd.choice(ops), j, C(rnd.randint(-3, 8))))
        lo_k, lo_j = rnd.randint(-4, 4), rnd.randint(-4, 4)
        r = {"k": (lo_k, lo_k + rnd.randint(1, 6)), "j": (lo_j, lo_j + rnd.randint(1, 6))}
        seen = {bool(evaluate(cond, {"k": a, "j": b}, None))
                for a, b in itertools.product(range(*r["k"]), range(*r["j"]))}
        d = decide(cond, r)
        if d is not None:
            assert seen == {d}, (cond, r, seen, d)
