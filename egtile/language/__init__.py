"""The egtile DSL, TileLang-compatible: ``from egtile import language as T``.

This module only re-exports; each family of builtins lives in its own module (``kernel``, ``alloc``,
``loop``, ``copy_op``, ``gemm_op``, ``fill_op``, ``reduce_op``, ``extern``, ``control``, ``expr``, ``eager``,
``mathops``, ``threads``, ``macro``, ``hints``, ``barrier``, ``cp_async``, ``random``); ``source``, ``pyops`` and ``letbind`` are the source front end.
"""

from egtile.language.alloc import alloc_buffer, alloc_fragment, alloc_global, alloc_local, alloc_shared, alloc_var
from egtile.language.barrier import (
    WarpSpecialize, alloc_barrier, barrier_arrive, barrier_wait, mbarrier_arrive, mbarrier_arrive_expect_tx,
    mbarrier_expect_tx, mbarrier_wait_parity, tma_copy, ws, fence_proxy_async,
)
from egtile.language.buffer import RegionRef, TileBuffer
from egtile.language.control import Else, If, Then
from egtile.language.copy_op import async_copy, copy, im2col
from egtile.language.cp_async import access_ptr, cp_async_barrier_noinc, ptx_cp_async
from egtile.language.dtypes import (
    bf16, bfloat16, bool, double, dtype, f16, f32, f64, float, float8_e4m3, float8_e4m3fn, float8_e5m2, float16,
    float32, float64, half, i8, i16, i32, i64, int, int8, int16, int32, int64, long, u8, u16, u32, u64, uint8, uint16, uint32, uint64,
)
from egtile.language.dtypes import int4, short, tfloat32, uint, uint4, ulong
from egtile.language.eager import const, dynamic, empty, symbolic
from egtile.language.expr import (
    And, IntImm, Not, Or, Value, abs, bitwise_and, bitwise_or, bitwise_xor, cast, cast_to, ceil, ceildiv, clamp, cos,
    erf, exp, exp2, fabs, floor, floordiv, floormod, if_then_else, infinity, isinf, isnan, likely, log, log1p, log2,
    max, max_value, min, min_value, pow, reinterpret, round, rsqrt, shift_left, shift_right, select, sigmoid, sin,
    sqrt, tanh, truncdiv, truncmod,
)
from egtile.language.extern import address_of, atomic_add, atomic_addx2, atomic_addx4, call_extern, import_source
from egtile.language.fill_op import clear, fill
from egtile.language.gemm_op import GemmWarpPolicy, gemm, wait_wgmma, wgmma_gemm
from egtile.language.hints import (
    Fragment, Layout, annotate_compile_flags, annotate_l2_hit_ratio, annotate_layout, annotate_restrict_buffers,
    annotate_safe_value, assume, disable_warp_group_reg_alloc, make_swizzled_layout, no_set_max_nreg, use_swizzle,
    set_max_nreg, inc_max_nreg, dec_max_nreg, annotate_producer_reg_dealloc, annotate_consumer_reg_alloc,
)
from egtile.language.kernel import Kernel, PrimFunc, Tensor, prim_func
from egtile.language.loop import Parallel, Persistent, Pipelined, Serial, Unroll, serial, unroll
from egtile.language.mathops import (
    acos, asin, atan, atan2, copysign, cosh, exp10, fmod, hypot, isfinite, log10, nearbyint, rint, sinh, tan, trunc,
)
from egtile.language.macro import FragmentBuffer, LocalBuffer, Ref, SharedBuffer, macro
from egtile.language.scan_op import cumsum
from egtile.language.random import rng_init, rng_rand
from egtile.language.reduce_op import reduce_abssum, reduce_absmax, reduce_max, reduce_min, reduce_sum
from egtile.language.bufview import reshape, view
from egtile.language.grid_sync import sync_grid
from egtile.language.threads import (
    get_block_binding, get_block_bindings, get_block_extent, get_block_extents, get_thread_binding, get_thread_bindings,
    get_thread_extent, get_thread_extents, sync_threads, thread_binding, vectorized,
)

Buffer = Tensor  # TileLang also spells the parameter annotation T.Buffer(shape, dtype)
parallel = Parallel  # TVM's lower-case spelling
cdiv = ceildiv  # TileLang's T.cdiv
Select = select
Cast = cast_to
Vectorized = vectorized
c2d_im2col = im2col  # TileLang's deprecated name


def __getattr__(name: str):
    """``T.<missing name>``: an error naming the construct (:mod:`egtile.language.missing`)."""
    from egtile.language.missing import missing

    raise missing(name)


__all__ = [
    "alloc_buffer",
    "cumsum",
    "And", "Buffer", "Cast", "Else", "Fragment", "FragmentBuffer", "GemmWarpPolicy", "If", "IntImm", "Kernel", "Layout",
    "LocalBuffer", "Not", "Or", "SharedBuffer",
    "Parallel", "Pipelined", "PrimFunc", "Ref", "RegionRef", "Select", "Serial", "Tensor", "Then", "TileBuffer",
    "Persistent", "Unroll", "Value", "Vectorized", "WarpSpecialize", "abs", "address_of", "alloc_fragment", "alloc_global", "alloc_local", "alloc_shared",
    "alloc_barrier", "alloc_var", "annotate_compile_flags", "annotate_l2_hit_ratio", "annotate_layout", "annotate_restrict_buffers",
    "atomic_addx2", "atomic_addx4",
    "annotate_safe_value", "assume", "async_copy", "atomic_add", "barrier_arrive", "barrier_wait", "bf16", "bfloat16", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bool", "call_extern", "cast", "cdiv", "ceil", "ceildiv", "clamp", "clear", "const", "copy", "cos",
    "disable_warp_group_reg_alloc", "double", "dtype", "dynamic", "empty", "erf", "exp", "exp2", "f16", "f32", "f64",
    "fabs", "fill", "float", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float16", "float32", "float64", "floor", "floordiv", "floormod", "gemm", "get_block_binding",
    "get_block_bindings", "get_block_extent", "get_block_extents", "get_thread_binding", "get_thread_bindings",
    "get_thread_extent", "get_thread_extents", "half", "i16", "i32", "i64", "i8", "if_then_else", "import_source",
    "infinity", "int", "int16", "int32", "int64", "int8", "isinf", "isnan", "likely", "log", "log1p", "log2", "long", "macro",
    "make_swizzled_layout", "max", "mbarrier_arrive", "mbarrier_arrive_expect_tx",
    "mbarrier_expect_tx", "mbarrier_wait_parity", "max_value", "min", "min_value", "no_set_max_nreg", "parallel", "pow", "prim_func",
    "reduce_absmax", "reduce_abssum", "reduce_max", "reduce_min", "reduce_sum", "rng_init", "rng_rand", "round", "rsqrt", "serial", "shift_left",
    "shift_right", "sigmoid", "sin", "sqrt", "symbolic", "sync_grid", "sync_threads", "tanh", "thread_binding", "tma_copy", "truncdiv",
    "truncmod", "u16", "u32", "u64", "u8", "uint16", "uint32", "uint64", "uint8", "unroll", "use_swizzle",
    "vectorized", "ws", "fence_proxy_async", "wgmma_gemm", "wait_wgmma", "set_max_nreg", "inc_max_nreg",
    "dec_max_nreg", "annotate_producer_reg_dealloc", "annotate_consumer_reg_alloc",
    "reshape", "view", "reinterpret", "im2col", "c2d_im2col", "short", "tfloat32", "uint", "ulong",
    "int4", "uint4", "access_ptr", "ptx_cp_async", "cp_async_barrier_noinc",
    "acos", "asin", "atan", "atan2", "copysign", "cosh", "exp10", "fmod", "hypot", "isfinite", "log10", "nearbyint",
    "rint", "sinh", "tan", "trunc",
]
