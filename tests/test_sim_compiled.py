"""egtile.sim.compiled: compiled expressions give egtile.evaluate's values, bit for bit."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from egtile.errors import EgtileError
from egtile.evaluate import evaluate, round_to
from egtile.ir import BinOp, Buffer, Cast, Const, Load, Select, UnOp, Var
from egtile.sim.compiled import compile_expr, rounder

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint32", "bool"]
BUF = Buffer("B", (8,), "float16", "shared")
IBUF = Buffer("I", (8,), "int32", "shared")
VALUES = {"B": [0.5, -1.25, 3.0, float("nan"), 65504.0, -0.0, 1e-4, 7.0], "I": [3, -7, 0, 2**31 - 1, -(2**31), 5, 1, 9]}


def load(buf, idx):
    return VALUES[buf.name][idx[0] % 8]


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b and (not isinstance(a, float) or math.copysign(1, a) == math.copysign(1, b))


scalars = st.one_of(
    st.integers(-(2**40), 2**40), st.floats(allow_nan=True, allow_infinity=True, width=64), st.booleans(),
)


@settings(max_examples=400, derandomize=True, database=None)
@given(st.sampled_from(DTYPES), scalars)
def test_rounder_is_round_to(dtype, value):
    with np.errstate(all="ignore"):  # the simulator runs under errstate(all="ignore") too
        try:
            want = round_to(dtype, value)
        except (OverflowError, ValueError) as err:
            want = type(err)
        try:
            got = rounder(dtype)(value)
        except (OverflowError, ValueError) as err:
            got = type(err)
    assert same(got, want) or got == want, (dtype, value, got, want)


def leaves():
    return st.one_of(
        st.builds(lambda v: Const(v, "int32"), st.integers(-50, 50)),
        st.builds(lambda v: Const(v, "float32"), st.floats(-1e4, 1e4, allow_nan=False, width=32)),
        st.builds(lambda v: Const(v, "float16"), st.floats(-100, 100, allow_nan=False, width=16)),
        st.builds(lambda v: Const(v, "uint32"), st.integers(0, 2**32 - 1)),
        st.builds(lambda v: Const(v, "bool"), st.booleans()),
        st.sampled_from([Var("x"), Var("y"), Var("z", "int64")]),
        st.builds(lambda i: Load(BUF, (Const(i),)), st.integers(0, 7)),
        st.builds(lambda i: Load(IBUF, (Var("x"),)), st.just(0)),
    )


BINOPS = ["+", "-", "*", "/", "//", "%", "min", "max", "==", "!=", "<", "<=", ">", ">=", "and", "or", "&", "|",
          "^", "<<", ">>"]


def exprs():
    return st.recursive(leaves(), lambda inner: st.one_of(
        st.builds(BinOp, st.sampled_from(BINOPS), inner, inner),
        st.builds(UnOp, st.sampled_from(["-", "not", "abs", "exp", "sqrt", "log", "rsqrt"]), inner),
        st.builds(Cast, st.sampled_from(DTYPES), inner),
        st.builds(Select, inner, inner, inner),
        st.builds(lambda a: Load(BUF, (a,)), inner),
    ), max_leaves=12)


def outcome(fn):
    try:
        return ("ok", fn())
    except EgtileError as err:
        return ("error", type(err).__name__)
    except (OverflowError, ValueError, TypeError) as err:
        return ("error", type(err).__name__)


@settings(max_examples=600, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(exprs(), st.integers(-9, 9), st.integers(-3, 40), st.integers(-(2**33), 2**33))
def test_compiled_expression_equals_evaluate(e, x, y, z):
    env = {"x": x, "y": y, "z": z}
    with np.errstate(all="ignore"):
        want = outcome(lambda: evaluate(e, env, load))
        got = outcome(lambda: compile_expr(e)(env, load))
    assert got[0] == want[0], (e, got, want)
    if got[0] == "ok":
        assert same(got[1], want[1]), (e, got, want)
    else:
        assert got[1] == want[1]
