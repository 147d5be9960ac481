"""``egtile.tvmcompat``: the TVM names TileLang's examples use (``DataType``, ``tirx.const``, ``tirx.reinterpret``),
with TVM's meaning, and a refusal naming every other one. A port imports it in place of ``tvm``."""

from __future__ import annotations

import pytest
import torch

import egtile
import egtile.tvmcompat as tvm
from egtile import language as T
from egtile.errors import UnsupportedError
from egtile.tvmcompat import DataType, tirx


def test_datatype_bits():
    assert DataType("float16").bits == 16 and DataType(T.bfloat16).bits == 16 and DataType("int8").bits == 8
    assert DataType(torch.float32).bits == 32 and DataType("float8_e4m3fn").bits == 8 and DataType("half").lanes == 1
    assert DataType("float") == DataType("float32")


def _unpack_int4():
    """TileLang's w4a8 dequantization helper, in TVM's spelling: nibble ``pos`` of a uint8, sign-extended through
    ``tirx.reinterpret(dtype, value)`` (TVM's order) and an arithmetic shift. Integer arithmetic keeps the operands'
    width as TVM does (``uint8 << uint8`` is a uint8), so the bit cast takes the shifted nibble as written."""

    def nibble(val, pos):
        mask = tirx.const(15, T.uint8)
        i4 = (val >> (pos.astype(T.uint8) * tirx.const(4, T.uint8))) & mask
        return tirx.reinterpret(T.int8, i4 << tirx.const(4, T.uint8)) >> tirx.const(4, T.int8)

    @T.prim_func
    def main(P: T.Tensor((64,), "uint8"), Out: T.Tensor((128,), "int8")):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(128):
                Out[i] = nibble(P[i // 2], i % 2)

    return main


def test_tirx_const_and_reinterpret_unpack_signed_nibbles():
    kern = egtile.compile(_unpack_int4(), target="sim")
    p = torch.randint(0, 256, (64,), dtype=torch.uint8)
    out = torch.full((128,), 99, dtype=torch.int8)
    kern(p, out)
    lo, hi = (p & 15).to(torch.int16), (p >> 4).to(torch.int16)
    want = torch.stack([lo, hi], dim=1).reshape(128)
    assert torch.equal(out.to(torch.int16), torch.where(want >= 8, want - 16, want))


def test_other_tvm_names_are_refused_naming_them():
    with pytest.raises(UnsupportedError, match="tvm.target"):
        tvm.target.Target("cuda")  # noqa: B018
    with pytest.raises(UnsupportedError, match="tvm.tirx.call_intrin"):
        tirx.call_intrin  # noqa: B018
    with pytest.raises(ImportError):
        from egtile.tvmcompat import tl  # noqa: F401


def test_a_probe_for_tvm_finds_nothing_while_its_import_is_refused():
    """``importlib.util.find_spec("tvm")`` (torch._dynamo probes for it) answers None under the port's import hook;
    an ``import tvm.<submodule>`` is still refused with the reason."""
    import importlib
    import importlib.util
    import sys

    from egtile.porting import LeftOutFinder

    finder = LeftOutFinder()
    sys.meta_path.insert(0, finder)
    try:
        assert importlib.util.find_spec("tvm") is None
        with pytest.raises(UnsupportedError, match="TVM"):
            importlib.import_module("tvm.tl")
    finally:
        sys.meta_path.remove(finder)
