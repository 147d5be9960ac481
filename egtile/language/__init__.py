"""The egtile DSL, TileLang-compatible: ``from egtile import language as T``.

This module only re-exports; each family of builtins lives in its own module (``kernel``, ``alloc``,
``loop``, ``copy_op``, ``gemm_op``, ``fill_op``, ``reduce_op``, ``extern``, ``control``, ``expr``).
"""

from egtile.language.alloc import alloc_fragment, alloc_local, alloc_shared
from egtile.language.buffer import RegionRef, TileBuffer
from egtile.language.control import Else, If, Then
from egtile.language.copy_op import async_copy, copy
from egtile.language.dtypes import (
    bfloat16, bool, float16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
)
from egtile.language.expr import (
    And, IntImm, Not, Or, Value, abs, cast, ceildiv, exp, exp2, floormod, if_then_else, infinity, log, log2, max,
    min, rsqrt, sqrt, truncmod,
)
from egtile.language.extern import address_of, atomic_add, call_extern, import_source
from egtile.language.fill_op import clear, fill
from egtile.language.gemm_op import GemmWarpPolicy, gemm
from egtile.language.kernel import Kernel, PrimFunc, Tensor, prim_func
from egtile.language.loop import Parallel, Pipelined, Serial, Unroll, serial, unroll
from egtile.language.reduce_op import reduce_abssum, reduce_absmax, reduce_max, reduce_min, reduce_sum

Buffer = Tensor  # TileLang also spells the parameter annotation T.Buffer(shape, dtype)


def __getattr__(name: str):
    """``T.<missing name>``: an error naming the construct (:mod:`egtile.language.missing`)."""
    from egtile.language.missing import missing

    raise missing(name)

__all__ = [
    "And", "Buffer", "Else", "GemmWarpPolicy", "If", "IntImm", "Kernel", "Not", "Or", "Parallel", "Pipelined",
    "PrimFunc", "RegionRef", "Serial", "Tensor", "Then", "TileBuffer", "Unroll", "Value", "abs", "address_of",
    "alloc_fragment", "alloc_local", "alloc_shared", "async_copy", "atomic_add", "bfloat16", "bool", "call_extern",
    "cast", "ceildiv", "clear", "copy", "exp", "exp2", "fill", "float16", "float32", "float64", "floormod", "gemm",
    "if_then_else", "import_source", "infinity", "int8", "int16", "int32", "int64", "log", "log2", "max", "min",
    "prim_func", "reduce_abssum", "reduce_absmax", "reduce_max", "reduce_min", "reduce_sum", "rsqrt", "serial",
    "sqrt", "truncmod", "uint8", "uint16", "uint32", "uint64", "unroll",
]
