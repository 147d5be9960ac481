"""Tests of egtile.evaluate: C semantics of scalar expressions and store conversions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from egtile.errors import EgtileError, UnsupportedError
from egtile.evaluate import cast_array, dtype_of, evaluate, poison, promote, round_to
from egtile.ir import AddressOf, BinOp, Buffer, Cast, Const, Load, Select, UnOp, Var

I32 = st.integers(-(2 ** 31), 2 ** 31 - 1)
F16 = st.floats(width=16, allow_nan=False, allow_infinity=False)
F32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


def ev(e, **env):
    return evaluate(e, env, lambda b, i: pytest.fail("unexpected load"))


def test_promote():
    assert promote("int32", "float16") == "float16"
    assert promote("float16", "float32") == "float32"
    assert promote("float16", "bfloat16") == "float32"
    assert promote("int8", "int8") == "int8"  # TVM's rule: no promotion to int32
    assert promote("uint8", "uint8") == "uint8"
    assert promote("int8", "int16") == "int16"
    assert promote("uint8", "int8") == "uint8"
    assert promote("uint8", "int32") == "int32"
    assert promote("int32", "uint32") == "uint32"
    assert promote("int64", "int32") == "int64"
    assert promote("bool", "int16") == "int32"
    assert promote("float64", "bfloat16") == "float64"


def test_dtype_of():
    H = Buffer("H", (4,), "float16", "shared")
    h = Load(H, (Const(0),))
    assert dtype_of(BinOp("*", h, Const(2.0, "float16"))) == "float16"
    assert dtype_of(BinOp("<", h, Const(1))) == "bool"
    assert dtype_of(UnOp("exp", Var("i"))) == "float32"
    assert dtype_of(Cast("int8", h)) == "int8"
    assert dtype_of(Select(Const(True, "bool"), h, Const(1.0, "float32"))) == "float32"
    assert dtype_of(AddressOf(h)) == "float16"
    t, f = Const(True, "bool"), Const(False, "bool")
    assert dtype_of(Select(t, t, f)) == "bool" and dtype_of(BinOp("+", t, t)) == "int32"


@settings(max_examples=300, deadline=None)
@given(I32, I32.filter(lambda b: b != 0))
def test_integer_division_and_modulo_follow_c(a, b):
    q = ev(BinOp("/", Var("a"), Var("b")), a=a, b=b)
    r = ev(BinOp("%", Var("a"), Var("b")), a=a, b=b)
    expect_q = int(math.copysign(abs(a) // abs(b), a * b)) if a * b != 0 else 0
    expect_q = round_to("int32", expect_q)  # INT_MIN / -1 wraps
    assert q == expect_q
    assert r == round_to("int32", a - (abs(a) // abs(b)) * (1 if a * b >= 0 else -1) * b)
    assert ev(BinOp("//", Var("a"), Var("b")), a=a, b=b) == round_to("int32", a // b)


def test_integer_wraparound_and_shifts():
    assert ev(BinOp("+", Const(2 ** 31 - 1), Const(1))) == -(2 ** 31)
    assert ev(BinOp("-", Const(0, "uint32"), Const(1, "uint32"))) == 2 ** 32 - 1
    assert ev(BinOp(">>", Const(-8), Const(1))) == -4
    assert ev(BinOp(">>", Const(2 ** 32 - 8, "uint32"), Const(1))) == (2 ** 32 - 8) >> 1
    assert ev(BinOp("<<", Const(1), Const(31))) == -(2 ** 31)
    assert ev(UnOp("~", Const(0))) == -1


def test_division_by_zero():
    with pytest.raises(EgtileError, match="integer division by zero"):
        ev(BinOp("/", Const(1), Const(0)))
    with pytest.raises(EgtileError, match="integer modulo by zero"):
        ev(BinOp("%", Const(1), Const(0)))
    assert ev(BinOp("/", Const(1.0, "float32"), Const(0.0, "float32"))) == math.inf
    assert ev(BinOp("/", Const(-1.0, "float32"), Const(0.0, "float32"))) == -math.inf
    assert math.isnan(ev(BinOp("/", Const(0.0, "float32"), Const(0.0, "float32"))))


def test_float_to_int_conversion_truncates_saturates_and_maps_nan_to_zero():
    assert round_to("int32", 2.9) == 2 and round_to("int32", -2.9) == -2
    assert round_to("int32", 1e20) == 2 ** 31 - 1 and round_to("int32", -math.inf) == -(2 ** 31)
    assert round_to("int32", math.nan) == 0
    assert round_to("uint8", -3.5) == 0 and round_to("uint8", 300) == 44  # int -> int wraps
    arr = cast_array("int32", np.array([2.9, -2.9, 1e20, np.nan, -np.inf]))
    assert arr.tolist() == [2, -2, 2 ** 31 - 1, 0, -(2 ** 31)] and arr.dtype == np.int32


@settings(max_examples=300, deadline=None)
@given(F16, F16, st.sampled_from(["+", "-", "*", "/"]))
def test_float16_ops_are_correctly_rounded(a, b, op):
    got = ev(BinOp(op, Const(a, "float16"), Const(b, "float16")))
    x, y = np.float16(a), np.float16(b)
    with np.errstate(all="ignore"):
        want = {"+": x + y, "-": x - y, "*": x * y, "/": x / y if b != 0 else np.float16(np.nan)}[op]
    if b == 0 and op == "/":
        return
    assert (math.isnan(got) and np.isnan(want)) or got == float(want)


@settings(max_examples=300, deadline=None)
@given(F32, F32)
def test_float32_products_match_numpy(a, b):
    got = ev(BinOp("*", Const(a, "float32"), Const(b, "float32")))
    with np.errstate(all="ignore"):
        assert got == float(np.float32(a) * np.float32(b))


@settings(max_examples=300, deadline=None)
@given(F32)
def test_bfloat16_rounding_matches_torch(x):
    want = torch.tensor([x], dtype=torch.float32).to(torch.bfloat16).float().item()
    assert round_to("bfloat16", x) == want
    assert cast_array("bfloat16", np.array([x], dtype=np.float32))[0] == want


def test_mixed_operands_and_comparisons():
    assert ev(BinOp("+", Const(1), Const(0.5, "float16"))) == 1.5
    assert ev(BinOp("<", Const(-1), Const(0, "uint32"))) is False  # C: -1 converts to UINT_MAX
    assert ev(BinOp("and", Const(True, "bool"), BinOp(">", Var("i"), Const(2))), i=3) is True
    assert ev(UnOp("not", Const(0))) is True
    assert ev(Cast("float16", Const(1 / 3, "float64"))) == float(np.float16(1 / 3))
    assert ev(BinOp("max", Const(math.nan, "float32"), Const(1.0, "float32"))) == 1.0  # fmaxf
    assert ev(UnOp("sqrt", Const(-1.0, "float32"))) != ev(UnOp("sqrt", Const(-1.0, "float32")))  # NaN


def test_select_reads_only_the_chosen_side():
    X = Buffer("X", (4,), "float32", "shared")
    reads = []

    def load(b, idx):
        reads.append(idx)
        return float(idx[0])

    e = Select(BinOp("<", Var("i"), Const(4)), Load(X, (Var("i"),)), Const(-1.0, "float32"))
    assert evaluate(e, {"i": 2}, load) == 2.0 and reads == [(2,)]
    assert evaluate(e, {"i": 9}, load) == -1.0 and reads == [(2,)]


def test_address_of_is_not_a_value():
    X = Buffer("X", (4,), "float32", "shared")
    with pytest.raises(UnsupportedError, match="only valid as an argument of T.call_extern"):
        ev(AddressOf(Load(X, (Const(0),))))


def test_poison():
    assert np.isnan(poison("float16", (2, 3))).all() and poison("float16", (2, 3)).dtype == np.float16
    p = poison("int32", (4,))
    assert p.dtype == np.int32 and (p == np.int32(-1515870811)).all()
    assert poison("bfloat16", (2,)).dtype == np.float32
    assert poison("bool", (2,)).all()


# ---- Python `%` on traced values is floor modulo (TileLang/TVM floormod), partner of `//` -------------

def _mod_kernel(dtype: str):
    from egtile import language as T

    @T.prim_func
    def main(X: T.Tensor((32,), dtype), Y: T.Tensor((32,), dtype), Z: T.Tensor((32,), dtype)):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(32):
                Y[i] = X[i] % 3
                Z[i] = X[i] // 3

    return main


@pytest.mark.parametrize("target", ["interp", "sim", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_python_mod_is_floor_mod_like_torch(target, dtype):
    import torch

    import egtile

    if dtype == "int32":
        x = torch.randint(-50, 50, (32,), dtype=torch.int32)
        x[:4] = torch.tensor([-7, -5, -1, -3], dtype=torch.int32)  # the reported inputs
    else:
        x = torch.randn(32) * 10
    kernel = egtile.compile(_mod_kernel(dtype), target=target)
    x = x.to(kernel.device)
    y = torch.full_like(x, -99)
    z = torch.full_like(x, -99)
    kernel(x, y, z)
    torch.testing.assert_close(y, torch.remainder(x, 3), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(z, torch.div(x, 3, rounding_mode="floor"), rtol=0, atol=0)
    if dtype == "int32":
        assert torch.equal(z * 3 + y, x)


def test_truncmod_keeps_c_remainder():
    from egtile import language as T
    from egtile.ir import BinOp

    @T.prim_func
    def main(X: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(8):
                X[i] = T.truncmod(X[i], 3) + T.floormod(X[i], 3)

    (loop,) = main.kernel.body
    value = loop.body[0].value
    assert isinstance(value, BinOp) and value.a.op == "%" and value.b.op == "floormod"
    assert evaluate(BinOp("%", Const(-7), Const(3)), {}, None) == -1
    assert evaluate(BinOp("floormod", Const(-7), Const(3)), {}, None) == 2
    assert evaluate(BinOp("floormod", Const(7), Const(-3)), {}, None) == -2


def test_scalar_bfloat16_rounding_is_the_array_paths_bit_for_bit():
    """``round_to("bfloat16", v)`` rounds on the float32 bits (:func:`round_bfloat16_scalar`); the array path
    (``cast_array``, the simulator's batches) on a float64 grid: the same bits for every float32 class (random
    bit patterns, the ties at bit 16 both ways, the subnormals, the carry into the smallest normal and past the
    largest finite value, zeros, infinities, NaN)."""
    from egtile.evaluate import _round_bfloat16, round_bfloat16_scalar

    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    hi = rng.integers(0, 2**16, 4000, dtype=np.uint64).astype(np.uint32) << 16
    special = np.array([0, 0x80000000, 0x00000001, 0x0000FFFF, 0x00008000, 0x00018000, 0x007FFFFF, 0x007F8000,
                        0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000,
                        0x3F808000, 0x3F818000, 0xBF808000], dtype=np.uint32)
    bits = np.concatenate([bits, hi | 0x8000, hi | 0x7FFF, hi | 0x8001, special])
    x = bits.view(np.float32).astype(np.float64)
    want = _round_bfloat16(x)
    got = np.array([round_bfloat16_scalar(float(v)) for v in x])
    same = (want.view(np.uint64) == got.view(np.uint64)) | (np.isnan(want) & np.isnan(got))
    assert same.all(), [(hex(int(b)), w, g) for b, w, g in zip(bits[~same][:5], want[~same][:5], got[~same][:5])]
    assert [round_to("bfloat16", v) for v in (1.00390625, 1.01171875, 3.4e38)] == [1.0, 1.015625, math.inf]


def test_scalar_float32_rounding_is_numpys_bit_for_bit():
    """``round_to("float32", v)`` of a Python float converts through ``struct`` (C's cast): numpy's float32
    conversion bit for bit, overflow to infinity included."""
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.integers(0, 2**63, 100_000, dtype=np.int64).view(np.float64),
                        rng.standard_normal(10_000) * 1e38, np.array([3.4028235677973366e38, 3.4028236e38, 1e39,
                                                                     -1e39, 1e-46, 7e-46, -0.0, math.inf])])
    want = x.astype(np.float32).astype(np.float64)
    got = np.array([round_to("float32", float(v)) for v in x])
    same = (want.view(np.uint64) == got.view(np.uint64)) | (np.isnan(want) & np.isnan(got))
    assert same.all(), x[~same][:5]
