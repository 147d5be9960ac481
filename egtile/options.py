"""``egtile.PassConfigKey``: TileLang's compile-option names, accepted in ``@egtile.jit(pass_configs={...})``.

egtile's scheduling decisions are rewrite rules chosen by the e-graph's cost model (``egtile.compile(...,
rules=)`` is the knob that changes them), so the pass options that steer TileLang's passes have no meaning
here: they are accepted and have no effect on the kernel or its result, so that TileLang code that spells
them runs unchanged. One key changes what the GPU computes, and egtile honours it: ``TL_ENABLE_FAST_MATH``
(:func:`fast_math`) compiles the CUDA kernel with NVRTC's ``--use_fast_math`` instead of egtile's default
arithmetic contract (``docs/language.md``, "Arithmetic" and "Fast math"); so does the older
``TL_DISABLE_FAST_MATH``, which turns it off. The names are those of TileLang at a35008a (2026-08) plus the
ones earlier releases had and its examples still spell (``TL_DISABLE_FAST_MATH``,
``TL_ENABLE_PTXAS_VERBOSE_OUTPUT``, ...: TileLang's git history of ``tilelang/transform/pass_config.py``). A
name neither has is an ``AttributeError``, as it is there.
"""

from __future__ import annotations

import enum
from typing import Any


class PassConfigKey(str, enum.Enum):
    """TileLang's pass-configuration keys (their string values): accepted; only ``TL_ENABLE_FAST_MATH`` has an
    effect (:func:`fast_math`)."""

    TL_SIMPLIFY = "tl.Simplify"
    TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES = "transitively_prove_inequalities"
    TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS = "convert_boolean_to_and_of_ors"
    TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES = "apply_constraints_to_boolean_branches"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL = "propagate_knowns_to_prove_conditional"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS = "propagate_knowns_to_simplify_expressions"
    TL_SIMPLIFY_ENABLE_LET_INLINE = "enable_simplify_let_inline"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_LAYOUT_COST_MODEL = "tl.layout_cost_model"
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS = "tl.if_stmt_binding_inline_replayable_binds"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tir.enable_equiv_terms_in_cse_tir"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_SIMPLIFY = "tirx.Simplify"
    TIR_DISABLE_STORAGE_REWRITE = "tirx.disable_storage_rewrite"
    TIR_DISABLE_VECTORIZE = "tirx.disable_vectorize"
    TIR_USE_ASYNC_COPY = "tirx.use_async_copy"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    TIR_ADD_LOWER_PASS = "tirx.add_lower_pass"
    TIR_NOALIAS = "tirx.noalias"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TL_PASS_PROFILE = "tl.pass_profile"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"
    # Keys of earlier TileLang releases that its examples still spell (removed from TileLang's own enum since):
    # TL_DISABLE_FAST_MATH is honoured as TileLang 0.1.7 read it (True turns fast math off, whatever
    # TL_ENABLE_FAST_MATH says; :func:`fast_math`); the others steer passes or print, and change no result.
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TL_DEBUG_THREAD_STORAGE_SYNC_SUMMARY = "tl.debug_thread_storage_sync_summary"
    TL_DISABLE_DYNAMIC_TAIL_SPLIT = "tl.disable_dynamic_tail_split"
    TL_DISABLE_LOWER_LDGSTG_PREDICATED = "tl.disable_lower_ldgstg_predicated"
    TL_DYNAMIC_ALIGNMENT = "tl.dynamic_alignment"

__all__ = ["PassConfigKey"]


def disable_cache() -> None:
    """``tilelang.disable_cache()``: turn the schedule cache and the autotuning cache off for this process, as
    ``EGTILE_DISABLE_CACHE=1`` does (docs/caching.md)."""
    import os

    os.environ["EGTILE_DISABLE_CACHE"] = "1"


def set_log_level(level: object) -> None:
    """``tilelang.set_log_level(level)``: accepted; egtile reports through exceptions and warnings, not a log."""


__all__ += ["disable_cache", "set_log_level"]


def fast_math(pass_configs: Any) -> bool:
    """Whether ``pass_configs`` (TileLang's ``@jit(pass_configs={...})`` dict, or ``None``) turns on fast math:
    ``TL_ENABLE_FAST_MATH`` (or its string ``"tl.enable_fast_math"``) set to ``True``, unless the older
    ``TL_DISABLE_FAST_MATH`` is ``True`` (TileLang 0.1.7's ``tilelang/engine/lower.py``: a true
    ``TL_DISABLE_FAST_MATH`` wins; false, it is as if absent).

    Raises:
        ArgumentError: ``pass_configs`` is not a dict, or the fast-math value is not a bool (TileLang reads
            it as a bool; ``"false"`` or ``0`` would otherwise mean something the user did not write).
    """
    from egtile.errors import ArgumentError

    if pass_configs is None:
        return False
    if not isinstance(pass_configs, dict):
        raise ArgumentError(f"pass_configs must be a dict of PassConfigKey -> value, got {type(pass_configs).__name__}")
    def flag(key: PassConfigKey) -> bool:
        values = [v for k, v in pass_configs.items() if k == key or k == key.value]
        if not values:
            return False
        v = values[-1]
        if not isinstance(v, bool):
            raise ArgumentError(f"pass_configs[{key.name}] must be True or False, got {v!r}")
        return v

    disabled = flag(PassConfigKey.TL_DISABLE_FAST_MATH)
    return flag(PassConfigKey.TL_ENABLE_FAST_MATH) and not disabled
