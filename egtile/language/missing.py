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
_MATH = ("supported math: T.exp, T.exp2, T.log, T.log2, T.sqrt, T.rsqrt, T.abs, T.max, T.min, T.floormod, "
         "T.truncmod, T.ceildiv, T.if_then_else, T.cast")

#: TileLang constructs egtile knows about but does not implement, with what to use instead.
NOT_YET: dict[str, str] = {
    "alloc_var": "use a one-element T.alloc_local((1,), dtype) and index it with [0]",
    "alloc_barrier": _SYNC,
    "alloc_reducer": "use T.alloc_fragment and T.reduce_*",
    "alloc_tmem": "tensor memory is a Blackwell (sm_100) feature; egtile targets Hopper (sm_90a)",
    "alloc_descriptor": "egtile builds TMA descriptors itself for T.copy",
    "barrier_wait": _SYNC, "barrier_arrive": _SYNC, "mbarrier_wait_parity": _SYNC, "mbarrier_arrive": _SYNC,
    "mbarrier_expect_tx": _SYNC, "create_list_of_mbarrier": _SYNC, "get_mbarrier": _SYNC, "sync_threads": _SYNC,
    "fence_proxy_async": _SYNC, "warpgroup_arrive": _SYNC, "warpgroup_wait": _SYNC,
    "annotate_layout": _LAYOUT, "use_swizzle": _LAYOUT, "annotate_padding": _LAYOUT, "Layout": _LAYOUT,
    "Fragment": _LAYOUT, "annotate_l2_hit_ratio": "cache hints are not supported",
    "atomic_max": "only T.atomic_add is supported", "atomic_min": "only T.atomic_add is supported",
    "atomic_addx2": "only T.atomic_add is supported", "atomic_addx4": "only T.atomic_add is supported",
    "cumsum": "use a T.serial loop", "reduce": "use T.reduce_sum / reduce_max / reduce_min / reduce_abssum / "
    "reduce_absmax",
    "print": "printing from a kernel is not supported; run it with target='interp' or 'sim' and inspect the "
             "tensors",
    "device_assert": "use target='interp' or 'sim', which range-check every access",
    "Persistent": "persistent loops are not supported; use T.Kernel's grid",
    "vectorized": "use T.Parallel; the scheduler chooses vector widths", "vectorize": "use T.Parallel",
    "thread_binding": "use T.Parallel; the scheduler maps loops onto threads",
    "get_thread_binding": "use T.Parallel", "get_block_binding": "use the block indices T.Kernel yields",
    "clamp": f"write T.max(T.min(x, hi), lo) ({_MATH})",
    **{f: _MATH for f in ("sin", "cos", "tan", "tanh", "sigmoid", "pow", "floor", "ceil", "round", "trunc", "exp10",
                          "log10", "log1p", "erf", "fma", "fmod", "nearbyint", "rint", "isnan", "isinf", "isfinite")},
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
