"""``Codec.encode``'s exact-type fast path gives the encoding the module docstring defines: compared with a
plain recursive encoder on whole kernels (the examples' and the statement-count families') and on values
whose types are subclasses of the primitives (which take the general path)."""

from __future__ import annotations

import dataclasses
import enum

import pytest

from egtile.codec import Codec, ir_classes


def _reference(codec: Codec, value):
    if value is None or isinstance(value, (bool, int, str, float)):
        return value
    if isinstance(value, tuple):
        return [_reference(codec, v) for v in value]
    assert dataclasses.is_dataclass(value)
    out = {"$": type(value).__name__}
    for f in dataclasses.fields(value):
        out[f.name] = _reference(codec, getattr(value, f.name))
    return out


def _kernels():
    # tests/verify is on the path (conftest); prepending benchmarks/ here would shadow examples/gemm.py with
    # benchmarks/gemm.py for every later test of the same worker
    from verify import kernels as K

    return [K.flash_attention(256, 64, 128, 64, 2, 256).kernel, K.pipe_par(7).kernel, K.if_nest(5).kernel,
            K.gemm(512, 512, 512, 128, 128, 64, 3, 256).kernel]


@pytest.mark.parametrize("index", range(4))
def test_fast_encode_equals_the_plain_encoder(index):
    codec = Codec(ir_classes())
    kernel = _kernels()[index]
    assert codec.encode(kernel) == _reference(codec, kernel)
    assert codec.encode(kernel) == codec.encode(kernel)  # the second encoding takes the memoized names


def test_subclasses_of_primitives_take_the_general_path():
    class Kind(enum.IntEnum):
        A = 3

    class Name(str):
        pass

    codec = Codec(ir_classes())
    assert codec.encode(Kind.A) == 3 and type(codec.encode(Kind.A)) is Kind
    assert codec.encode((Name("x"), True, 2.5, None)) == ["x", True, 2.5, None]
