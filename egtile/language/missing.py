"""``T.<name>`` for a name the DSL does not have: an error naming the construct, never a bare AttributeError.

``egtile.language`` (PEP 562 module ``__getattr__``) calls :func:`missing` for every attribute it lacks.
A TileLang construct egtile does not implement yet raises :class:`MissingConstructError` saying what to
use instead; any other name raises it pointing at ``docs/language.md``. ``MissingConstructError`` is also an
``AttributeError``, so ``hasattr(T, name)`` and ``getattr(T, name, default)`` behave as for any module.
"""

from __future__ import annotations

from egtile.errors import MissingConstructError

_SYNC = ("egtile places and waits on barriers itself (T.Pipelined with num_stages, the warp-specialization and "
         "barrier rules); user-level barriers are not supported yet")
_LAYOUT = "layout annotations are not supported; egtile chooses buffer layouts itself"
_MATH = ("supported math: T.exp, T.exp2, T.log, T.log2, T.sqrt, T.rsqrt, T.sin, T.cos, T.tanh, T.sigmoid, T.abs, "
         "T.max, T.min, T.clamp, T.floordiv, T.floormod, T.truncmod, T.ceildiv, T.if_then_else, T.cast")

_WARP = ("egtile has no per-thread warp collectives: reduce over the values with a tile op instead (write them "
         "into a T.alloc_fragment, then T.reduce_sum / reduce_max / reduce_min across the thread dimension)")
_FP8 = ("8-bit floats are not supported by egtile yet (its interpreter, simulator and backend compute in the dtypes of "
        "egtile.ir.dtypes); keep the data in float16/bfloat16, or convert on the host with torch")
_MULTI = ("egtile compiles one T.Kernel per prim_func and has no global scratch buffers yet: split the work into two "
          "kernels called one after the other, passing the scratch tensor as a parameter")

#: TileLang constructs egtile knows about but does not implement, with what to use instead.
NOT_YET: dict[str, str] = {
    "alloc_barrier": _SYNC, "alloc_cluster_barrier": _SYNC,
    "alloc_reducer": "use T.alloc_fragment and T.reduce_*", "finalize_reducer": "use T.alloc_fragment and T.reduce_*",
    "alloc_tmem": "tensor memory is a Blackwell (sm_100) feature; egtile targets Hopper (sm_90a)",
    "alloc_descriptor": "egtile builds TMA descriptors itself for T.copy",
    "alloc_global": _MULTI, "sync_grid": _MULTI,
    "barrier_wait": _SYNC, "barrier_arrive": _SYNC, "mbarrier_wait_parity": _SYNC, "mbarrier_arrive": _SYNC,
    "mbarrier_expect_tx": _SYNC, "create_list_of_mbarrier": _SYNC, "get_mbarrier": _SYNC, "ws": _SYNC,
    "tma_copy": "use T.copy; egtile chooses TMA itself where it is legal and pays",
    "fence_proxy_async": _SYNC, "warpgroup_arrive": _SYNC, "warpgroup_wait": _SYNC, "wait_wgmma": _SYNC,
    "set_max_nreg": "egtile sets register budgets of warp-specialized roles itself (setmaxnreg)",
    "annotate_padding": _LAYOUT,
    "atomic_max": "only T.atomic_add is supported", "atomic_min": "only T.atomic_add is supported",
    "atomic_addx2": "only T.atomic_add is supported", "atomic_addx4": "only T.atomic_add is supported",
    "cumsum": "use a T.serial loop", "reduce": "use T.reduce_sum / reduce_max / reduce_min / reduce_abssum / "
    "reduce_absmax",
    "print": "printing from a kernel is not supported; run it with target='interp' or 'sim' and inspect the "
             "tensors",
    "device_assert": "use target='interp' or 'sim', which range-check every access",
    "Persistent": "persistent loops are not supported; use T.Kernel's grid",
    "PersistentTileScheduler": "persistent loops are not supported; use T.Kernel's grid",
    "vectorize": "use T.Parallel",
    "shfl_xor": _WARP, "shfl_down": _WARP, "shfl_up": _WARP, "shfl_sync": _WARP, "tvm_warp_shuffle": _WARP,
    "warp_reduce_sum": _WARP, "warp_reduce_max": _WARP, "warp_reduce_min": _WARP, "tvm_thread_allreduce": _WARP,
    "comm_reducer": _WARP, "ballot": _WARP, "any_sync": _WARP, "all_sync": _WARP,
    **{f: _FP8 for f in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e4m3fnuz", "float8_e5m2fnuz",
                         "float8_e8m0fnu", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "int4", "uint4")},
    "tfloat32": ("tfloat32 (TF32 tensor-core inputs) is not supported: egtile's T.gemm computes float32 inputs in "
                 "float32; use float32 (exact) or float16/bfloat16 data"),
    "reinterpret": "bit casts are not supported yet; convert values with T.cast",
    "view": "buffer views are not supported yet; index the original buffer",
    "reshape": "buffer views are not supported yet; index the original buffer",
    "transpose": "use T.copy into a buffer indexed the other way (a T.Parallel loop)",
    "attr": "TVM attributes are not supported", "evaluate": "write the call as a statement",
    "ClusterKernel": "thread-block clusters are not supported yet; use T.Kernel",
    "block_rank_in_cluster": "thread-block clusters are not supported yet",
    **{f: _MATH for f in ("tan", "pow", "floor", "ceil", "round", "trunc", "exp10", "log10", "log1p", "erf", "fma",
                          "fmod", "nearbyint", "rint", "isnan", "isinf", "isfinite")},
}


def missing(name: str) -> MissingConstructError:
    """The error for ``T.<name>`` (raise it).

    Names with a leading underscore (``__path__``, ``__wrapped__``, ...) give a plain ``AttributeError``:
    they are Python's and tools' own probes, not DSL constructs.
    """
    from egtile.language.tracer import user_loc

    if name.startswith("_"):
        return AttributeError(f"module 'egtile.language' has no attribute {name!r}")  # type: ignore[return-value]
    hint = NOT_YET.get(name)
    if hint is not None:
        return MissingConstructError(f"T.{name} is not supported by egtile yet: {hint}", user_loc())
    return MissingConstructError(f"egtile.language has no construct T.{name} (not a construct egtile knows; "
                                 "docs/language.md lists the supported ones)", user_loc())
