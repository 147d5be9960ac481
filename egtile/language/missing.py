"""``T.<name>`` for a name the DSL does not have: an error naming the construct and the user's line, never a bare
AttributeError.

``egtile.language`` (PEP 562 module ``__getattr__``) calls :func:`missing` for every attribute it lacks. The
message depends on what the name is:

1. a TileLang construct egtile deliberately leaves out or has not built (:data:`NOT_YET`, then the name
   families of :data:`FAMILIES`): "T.<name> is not supported by egtile yet: <why, and what to write instead>";
2. another name of TileLang's ``tilelang.language`` (:data:`TILELANG_NAMES`: TVM IR node classes, low-level
   intrinsics): "T.<name> is a TileLang/TVM construct egtile does not implement";
3. anything else: "egtile.language has no construct T.<name>", with the closest names egtile does have.

:data:`TILELANG_NAMES` is the public surface of TileLang's ``tilelang.language`` (its ``__all__`` lists and the
``T.*`` names its examples use; tile-ai/tilelang at a35008a, 2026-08). ``MissingConstructError`` is also an
``AttributeError``, so ``hasattr(T, name)`` and ``getattr(T, name, default)`` behave as for any module.
"""

from __future__ import annotations

import difflib
import re

from egtile.errors import MissingConstructError
from egtile.mathfns import MATH

_SYNC = ("egtile's hand-written barrier protocol has T.alloc_barrier, T.ws, T.mbarrier_wait_parity / T.barrier_wait, "
         "T.mbarrier_arrive / T.barrier_arrive, T.mbarrier_expect_tx, T.mbarrier_arrive_expect_tx and "
         "T.tma_copy(..., barrier=) (docs/language.md, \"Hand-written warp specialization\"); this lower-level "
         "synchronization is not supported: egtile places CTA barriers, proxy fences and wgmma waits itself, or "
         "write the loop as T.Pipelined(..., num_stages=n) and let egtile build the protocol")
_WS = ("this TileLang warp-specialization annotation is not supported: write the roles with `with T.ws(g):` blocks and "
       "T.alloc_barrier / T.mbarrier_* (docs/language.md), or write the loop as T.Pipelined(..., num_stages=n) and let "
       "egtile decide the roles")
_LAYOUT = "layout annotations are not supported; egtile chooses buffer layouts itself"
_MATH = ("supported math: " + ", ".join(fn.call("x") if fn.spelling else f"T.{fn.name}" for fn in MATH.values()) + " (egtile/mathfns.py), "
         "T.sigmoid, T.abs, "
         "T.max, T.min, T.clamp, T.floordiv, T.floormod, T.truncdiv, T.truncmod, T.ceildiv, T.if_then_else, T.cast, "
         "or a CUDA device function through T.call_extern")
_WARP = ("egtile has no per-thread warp collectives: reduce over the values with a tile op instead (write them "
         "into a T.alloc_fragment, then T.reduce_sum / reduce_max / reduce_min across the thread dimension)")
_FP8 = ("egtile's floating-point formats below 16 bits are T.float8_e4m3fn (TileLang's float8_e4m3) and "
        "T.float8_e5m2 (storage, T.cast / T.copy conversion, T.gemm operands); the AMD fnuz variants, e8m0, float6, "
        "float4 and 4-bit integers are not supported: keep the data in one of those, float16/bfloat16 or int8, or "
        "convert on the host with torch")
_MULTI = ("a grid-wide barrier in the middle of a kernel's code is only T.sync_grid() at the T.Kernel body's top level "
          "(egtile launches the code after it as a second kernel); or split the work into several `with T.Kernel` "
          "blocks of the prim_func (launched one after another), sharing a T.alloc_global scratch tensor")
_ATOMIC = "only T.atomic_add and T.atomic_addx2 / T.atomic_addx4 (no return value) are supported"
_VIEW = ("tensors made from raw device pointers are not supported: egtile's buffers are the kernel's parameters and "
         "allocations, which it checks for races and ranges; pass each tensor as a parameter (several kernels, or one "
         "stacked tensor indexed by the group), or view one with T.reshape / T.view")
_PTR = ("tensors over raw device pointers (a T.Tensor([n], T.ptr) table of data_ptr() values, T.make_tensor(ptr, "
        "shape, dtype)) are not supported: egtile cannot know what an address points to, so it could check neither "
        "that each entry is a live tensor of that dtype holding the shape (the host and the simulator would read or "
        "write whatever lies there) nor whether two entries overlap (the verifier's and the simulator's race and "
        "range checks are per buffer). Pass the data as tensors instead: for a grouped GEMM, concatenate the groups' "
        "rows into one tensor (torch.cat) and pass each group's first row or tile as an int32 tensor (TileLang's "
        "grouped_gemm/example_grouped_gemm_fwd.py does this, and runs on egtile), or stack groups padded to the largest into one (groups, max_M, K) "
        "tensor indexed by the group; a few distinct tensors can be separate parameters chosen with an `if` on the "
        "group index")
_CLUSTER = "thread-block clusters (sm_90 distributed shared memory) are not supported yet; use T.Kernel"
_BLACKWELL = ("a Blackwell (sm_100) feature (tensor memory, tcgen05 MMA); egtile targets Hopper (sm_90a): use "
              "T.gemm, which egtile lowers to the best sm_90 instruction")
_MMA = ("use T.gemm: egtile chooses the instruction and its operand layouts itself (wgmma where its conditions hold, "
        "else a SIMT loop: egtile has no mma.sync path yet; explain() says which and why)")
_PTX = ("a low-level TVM/PTX intrinsic: egtile emits PTX itself from tile operations; write the tile op (T.copy, "
        "T.gemm, T.fill, T.reduce_*) or call your own device function with T.call_extern / T.import_source")
_VECTOR = ("vector dtypes and explicit vector loads are not supported: use T.Parallel or T.copy; egtile picks vector "
           "widths")
_TVMSCRIPT = ("a TVMScript/TIR construct outside TileLang's tile language: write the kernel with T.Kernel, "
              "T.Parallel, T.serial, T.alloc_* and the tile ops")
_TIR_NODE = "a TVM IR node class; egtile kernels build expressions with Python operators and the T.* functions"
_RANDOM = ("curand's float transforms (curand_uniform, curand_normal) are not implemented: T.rng_init / T.rng_rand "
           "give curand's Philox4_32_10 integer stream (egtile.language.random); convert its words yourself, or "
           "generate the numbers on the host (torch) and pass a tensor")

#: TileLang constructs egtile knows about but does not implement, with what to use instead.
NOT_YET: dict[str, str] = {
    "alloc_cluster_barrier": _CLUSTER,
    "alloc_reducer": "use T.alloc_fragment and T.reduce_*", "finalize_reducer": "use T.alloc_fragment and T.reduce_*",
    "alloc_tmem": _BLACKWELL, "deallocate_tmem": _BLACKWELL,
    "alloc_descriptor": "egtile builds TMA descriptors itself for T.copy",
    "sync_global": _MULTI,
    "allocate": "use T.alloc_shared / "
    "T.alloc_fragment / T.alloc_local", "decl_buffer": _VIEW, "buffer_decl": _VIEW, "match_buffer": _VIEW,
    "create_list_of_mbarrier": _SYNC,
    "get_mbarrier": _SYNC, "create_barriers": _SYNC, "named_barrier_arrive": _SYNC,
    "annotate_ws_schedule": _WS, "ws_op": _WS,
    "tma_load": "use T.copy; egtile chooses TMA itself where it is legal and pays",
    "tma_store_arrive": _SYNC, "tma_store_wait": _SYNC, "create_tma_descriptor": "egtile builds TMA descriptors itself",
    "warpgroup_arrive": _SYNC, "warpgroup_wait": _SYNC,
    "warpgroup_commit_batch": _SYNC, "warpgroup_fence_operand": _SYNC,
    "get_warp_group_idx": "write per-thread code with T.get_thread_binding() (warpgroup = thread // 128)",
    "get_warp_idx": "write per-thread code with T.get_thread_binding() (warp = thread // 32)",
    "get_warp_idx_sync": "write per-thread code with T.get_thread_binding() (warp = thread // 32)",
    "get_lane_idx": "write per-thread code with T.get_thread_binding() (lane = thread % 32)",
    "annotate_padding": _LAYOUT,
    "atomic_max": _ATOMIC, "atomic_min": _ATOMIC,
    "atomic_load": _ATOMIC, "atomic_store": _ATOMIC, "atomic_or": _ATOMIC,
    "cummax": "use a T.serial loop",
    "reduce": "use T.reduce_sum / reduce_max / reduce_min / reduce_abssum / reduce_absmax",
    "reduce_bitand": "use T.reduce_sum / reduce_max / reduce_min, or a T.serial loop",
    "reduce_bitor": "use T.reduce_sum / reduce_max / reduce_min, or a T.serial loop",
    "reduce_bitxor": "use T.reduce_sum / reduce_max / reduce_min, or a T.serial loop",
    "reducer_init": "use T.alloc_fragment and T.reduce_*", "reducer_update": "use T.alloc_fragment and T.reduce_*",
    "print": "printing from a kernel is not supported; run it with target='interp' or 'sim' and inspect the tensors",
    "device_assert": "use target='interp' or 'sim', which range-check every access",
    "Assert": "use target='interp' or 'sim', which range-check every access",
    "PersistentTileScheduler": "persistent loops are not supported; use T.Kernel's grid",
    "BaseTileScheduler": "persistent loops are not supported; use T.Kernel's grid",
    "vectorize": "use T.Parallel (or T.vectorized)",
    "shfl_xor": _WARP, "shfl_down": _WARP, "shfl_up": _WARP, "shfl_sync": _WARP, "tvm_warp_shuffle": _WARP,
    "tvm_warp_shuffle_down": _WARP, "tvm_warp_shuffle_up": _WARP, "tvm_warp_activemask": _WARP,
    "tvm_thread_allreduce": _WARP, "comm_reducer": _WARP, "CommReducer": _WARP, "ballot": _WARP,
    "ballot_sync": _WARP, "any_sync": _WARP, "all_sync": _WARP, "activemask": _WARP, "shuffle_elect": _WARP,
    "match_any_sync": _WARP, "match_all_sync": _WARP, "sync_warp": _WARP, "syncthreads_and": _WARP,
    "syncthreads_or": _WARP, "syncthreads_count": _WARP,
    "make_tensor": _PTR, "make_tensor_from_addr": _PTR, "ptr": _PTR,
    "tvm_access_ptr": "pass a buffer element to T.call_extern through T.address_of(buf[i, ...])",
    "StridedTensor": "strided parameters are not supported: pass a contiguous tensor (torch's .contiguous())",
    "transpose": "use T.copy into a buffer indexed the other way (a T.Parallel loop)",
    "attr": "TVM attributes are not supported", "evaluate": "write the call as a statement",
    "ClusterKernel": _CLUSTER, "block_rank_in_cluster": _CLUSTER, "copy_cluster": _CLUSTER,
    "gemm_sp": "sparse T.gemm is not supported", "wgmma_gemm_sp": "sparse T.gemm is not supported",
    "tcgen05_gemm_sp": "sparse T.gemm is not supported",
    "dp4a": "write the int8 dot product with T.Parallel and T.cast, or call __dp4a through T.call_extern",
    "index_to_coordinates": "compute the coordinates with // and % (T.floordiv, T.floormod)",
    "any_of": "combine the conditions with `or` / T.Or", "all_of": "combine the conditions with `and` / T.And",
    "loop_break": "`break` out of a runtime loop is not supported; guard the rest of the body with an `if`",
    "While": "a runtime while loop is not supported; write `for k in T.serial(max_iterations):` with an `if` inside",
    "CUDASourceCodeKernel": "write the kernel in the DSL; call CUDA device functions with T.import_source / "
                            "T.call_extern",
    "annotate_min_blocks_per_sm": "occupancy hints are not supported; egtile sizes resources itself",
    "annotate_pass_configs": "pass options have no effect in egtile (egtile.PassConfigKey, docs/language.md)",
    "pdl_sync": "programmatic dependent launch is not supported", "pdl_trigger": "programmatic dependent launch "
    "is not supported",
    "prefetch": "prefetch hints are not supported; egtile pipelines loads with T.Pipelined",
    **{f: _MATH for f in ("fma", "acosh", "asinh", "atanh", "ldexp", "nextafter",
                          "popcount", "clz", "fast_rcp", "abs2", "bitwise_not", "q_multiply_shift",
                          "q_multiply_shift_per_axis")},
}

#: Families of TileLang names by pattern (tried in order after :data:`NOT_YET`).
FAMILIES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(float8|float6|float4)_|^is_float4|^is_f8"), _FP8),
    (re.compile(r"tcgen05|tmem|_2sm$|blockscaled|^clc_|^TCGEN05|umma"), _BLACKWELL),
    (re.compile(r"^(u?int|float|bfloat)\d+x\d+$|^float8_e\d+m\d+x\d+$"), _VECTOR),
    (re.compile(r"^(ldg|lds|stg|sts)\d+$|^vector(combine|high|low)$|^(add|sub|mul|max|min|fma)2$|^extract_lane$"),
     _VECTOR),
    (re.compile(r"^(WS|ws_)|^annotate_ws"), _WS),
    (re.compile(r"^cluster_|_cluster(_|$)|cluster"), _CLUSTER),
    (re.compile(r"barrier|mbarrier|^tma_"), _SYNC),
    (re.compile(r"^warp_reduce_|^shfl|shuffle|_sync$"), _WARP),
    (re.compile(r"wgmma|^mma_|^ptx_mma|^tvm_(mma|bmma|mfma|rdna|load_matrix|store_matrix|fill_fragment)|"
                r"TensorCoreIntrin|Emitter|^get_mma|ldmatrix|gmma|^make_.*layout$|^get_swizzle_layout$"), _MMA),
    (re.compile(r"^(ptx_|tvm_|call_|anylist_|TVMBackend|llvm_|ieee_|start_profile|end_profile)"), _PTX),
    (re.compile(r"^rng_"), _RANDOM),
    (re.compile(r"^(Add|Sub|Mul|Div|Mod|FloorDiv|FloorMod|Min|Max|EQ|NE|LT|LE|GT|GE|Broadcast|Ramp|Let|LetStmt|"
                r"BufferLoad|ProducerLoad|Call|CallEffectKind|FloatImm|StringImm|SizeVar|Var|IterVar|PrimExpr|"
                r"Range|Reduce|Shuffle|Any|AnyDType|KernelLaunchFrame|JITFunc|Ptr|Fragment.*|.*Frame)$"), _TIR_NODE),
)

#: The names of TileLang's ``tilelang.language`` (module docstring); those egtile implements never reach here.
TILELANG_NAMES: frozenset[str] = frozenset("""
    Add And Any AnyDType Assert BaseTileScheduler Broadcast Buffer BufferLoad CUDASourceCodeKernel Call
    CallEffectKind Cast ClusterKernel CommReducer Div Else FloatImm FloorDiv FloorMod Fragment FragmentBuffer
    GemmWarpPolicy If IntImm IterVar JITFunc Kernel KernelLaunchFrame Layout Let LetStmt LocalBuffer Max Min Mod Mul
    Not Or Parallel Persistent PersistentTileScheduler Pipelined PrimExpr PrimFunc ProducerLoad Ptr Ramp Range
    Reduce Ref Select Serial SharedBuffer Shuffle SizeVar SparseTensorCoreIntrinEmitter StridedTensor StringImm Sub
    TCGEN05DescriptorParams TCGEN05TensorCoreIntrinEmitter TVMBackendAllocWorkspace TVMBackendFreeWorkspace Tensor
    TensorCoreIntrinEmitter TensorCoreIntrinEmitterSM120 TensorCoreIntrinEmitterWithLadderTransform Then Unroll Var
    Vectorized WGMMADescriptorParams WGMMATensorCoreIntrinEmitter WGSparseTensorCoreIntrinEmitter WSInstr WSOpRef
    WSPipeline WSRole WSSchedule WSScope WSSync WSSyncKind WarpSpecialize WarpSpecializeFrame While abs abs2
    access_ptr acos acosh activemask add2 address_of align_up all_of all_sync alloc_barrier alloc_buffer
    alloc_cluster_barrier alloc_descriptor alloc_fragment alloc_global alloc_local alloc_reducer alloc_shared
    alloc_tcgen05_instr_desc alloc_tcgen05_instruction_desc alloc_tcgen05_smem_desc alloc_tmem alloc_var
    alloc_wgmma_desc allocate allocate_const annotate_compile_flags annotate_consumer_reg_alloc
    annotate_l2_hit_ratio annotate_layout annotate_min_blocks_per_sm annotate_pass_configs
    annotate_producer_reg_dealloc annotate_restrict_buffers annotate_safe_value annotate_ws_schedule any_of any_sync
    anylist_getitem anylist_resetitem anylist_setitem_call_cpacked anylist_setitem_call_packed arg asin asinh assume
    async_copy atan atan2 atanh atomic_add atomic_addx2 atomic_addx4 atomic_load atomic_max atomic_min atomic_or
    atomic_store attr axis ballot ballot_sync barrier_arrive barrier_wait bfloat16 bitwise_and bitwise_not
    bitwise_or bitwise_xor block block_attr block_rank_in_cluster bool boolean broadcast buffer buffer_decl
    buffer_store buffer_var c2d_im2col call_cpacked call_cpacked_lowered call_extern call_intrin call_llvm_intrin
    call_llvm_pure_intrin call_packed call_packed_lowered call_pure_extern cast cdiv ceil ceildiv clamp
    clc_get_first_ctaid_x clc_get_first_ctaid_y clc_get_first_ctaid_z clc_is_canceled clc_try_cancel
    clc_try_cancel_multicast clear cluster_arrive cluster_arrive_relaxed cluster_sync cluster_wait clz comm_reducer
    compute_gmma_descriptor compute_umma_descriptor const copy copy_cluster copysign cos cosh cp_async_barrier_noinc
    create_barriers create_tma_descriptor cummax cumsum deallocate_tmem dec_max_nreg decl_buffer device_assert
    disable_warp_group_reg_alloc dp4a dtype dynamic empty end_profile_intrinsic env_thread erf evaluate exp exp10
    exp2 extract_lane fabs fast_rcp fence_proxy_async fill finalize_reducer float float16 float16x16 float16x32
    float16x4 float16x64 float16x8 float32 float32x16 float32x32 float32x4 float32x64 float32x8 float4_e2m1fn
    float64 float64x16 float64x32 float64x4 float64x64 float64x8 float8_e4m3 float8_e4m3fn float8_e4m3x16
    float8_e4m3x32 float8_e4m3x4 float8_e4m3x64 float8_e4m3x8 float8_e5m2 float8_e5m2x16 float8_e5m2x32
    float8_e5m2x4 float8_e5m2x64 float8_e5m2x8 floor floordiv floormod fma2 fmod func_attr func_name func_ret gemm
    gemm_sp get_block_binding get_block_bindings get_block_extent get_block_extents get_lane_idx get_ldmatrix_offset
    get_let_value get_mma_micro_size get_swizzle_layout get_thread_binding get_thread_bindings get_thread_extent
    get_thread_extents get_tvm_dtype get_warp_group_idx get_warp_idx get_warp_idx_sync grid handle has_let_value
    hypot ieee_add ieee_fdiv ieee_fmaf ieee_frcp ieee_frsqrt ieee_fsqrt ieee_mul ieee_sub if_then_else im2col
    import_source inc_max_nreg increase_descriptor_offset index_map index_to_coordinates infinity init
    initialize_tcgen05_descriptor initialize_wgmma_descriptor inline int16 int16x16 int16x32 int16x4 int16x64
    int16x8 int32 int32x16 int32x32 int32x4 int32x64 int32x8 int4 int64 int64x16 int64x32 int64x4 int64x64 int64x8
    int8 int8x16 int8x32 int8x4 int8x64 int8x8 is_f8f6f4_family is_float4 is_float4_e2m1_unpacked is_float4_e2m1fn
    isfinite isinf isnan isnullptr iter_var launch_thread ldexp ldg128 ldg256 ldg32 ldg64 lds128 lds32 lds64 let
    likely llvm_lookup_intrinsic_id log log10 log1p log2 lookup_param loop_break macro make_blockscaled_gemm_layout
    make_mma_swizzle_layout make_tensor make_tensor_from_addr match_all_sync match_any_sync match_buffer max max2
    max_value mbarrier_arrive mbarrier_arrive_expect_tx mbarrier_expect_tx mbarrier_wait_parity meta_class meta_var
    min min2 min_value mma_fill mma_gemm_blockscaled mma_store mma_store_index_map mul2 named_barrier_arrive
    nearbyint nextafter no_set_max_nreg parallel pdl_sync pdl_trigger popcount pow prefetch prim_func print ptr
    ptx_arrive_barrier ptx_arrive_barrier_expect_tx ptx_arrive_cluster_barrier ptx_commit_group ptx_cp_async
    ptx_cp_async_barrier ptx_cp_async_bulk ptx_init_barrier_thread_count ptx_ldmatrix ptx_mma ptx_mma_block_scale
    ptx_mma_sm70 ptx_mma_sp ptx_tcgen05_mma_blockscaled_ss ptx_tcgen05_mma_ss ptx_tcgen05_mma_ts ptx_wait_barrier
    ptx_wait_group ptx_wgmma_rs ptx_wgmma_sp_rs ptx_wgmma_sp_ss ptx_wgmma_ss q_multiply_shift
    q_multiply_shift_per_axis ramp reads realize reduce reduce_absmax reduce_abssum reduce_bitand reduce_bitor
    reduce_bitxor reduce_max reduce_min reduce_sum reducer_init reducer_update reinterpret reshape ret rng_init
    rng_rand rng_rand_float round rsqrt serial set_max_nreg shfl_down shfl_sync shfl_up shfl_xor shift_left
    shift_right shuffle_elect sigmoid sin sinh sqrt start_profile_intrinsic stg128 stg256 stg32 stg64 sts128 sts32
    sts64 sub2 symbolic sync_global sync_grid sync_threads sync_warp syncthreads_and syncthreads_count
    syncthreads_or tan tanh target tcgen05_after_thread_sync tcgen05_before_thread_sync tcgen05_cp_warpx4
    tcgen05_gemm tcgen05_gemm_blockscaled tcgen05_gemm_sp tcgen05_mma tcgen05_mma_arrive tcgen05_mma_blockscaled
    tcgen05_sf_warp_transpose thread_binding tma_copy tma_gather4 tma_gather4_bytes tma_load tma_load_2sm
    tma_scatter4 tma_store_arrive tma_store_wait transpose trunc truncdiv truncmod tvm_access_ptr tvm_bmma_sync
    tvm_call_cpacked tvm_call_cpacked_lowered tvm_call_packed tvm_call_packed_lowered tvm_fill_fragment
    tvm_load_matrix_sync tvm_mfma tvm_mfma_store tvm_mma_sync tvm_rdna_wmma tvm_rdna_wmma_store tvm_stack_alloca
    tvm_stack_make_array tvm_stack_make_shape tvm_storage_sync tvm_store_matrix_sync tvm_struct_get tvm_struct_set
    tvm_thread_allreduce tvm_thread_invariant tvm_throw_last_error tvm_tuple tvm_warp_activemask tvm_warp_shuffle
    tvm_warp_shuffle_down tvm_warp_shuffle_up type_annotation uint16 uint16x16 uint16x32 uint16x4 uint16x64 uint16x8
    uint32 uint32x16 uint32x32 uint32x4 uint32x64 uint32x8 uint64 uint64x16 uint64x32 uint64x4 uint64x64 uint64x8
    uint8 uint8x16 uint8x32 uint8x4 uint8x64 uint8x8 undef unroll use_swizzle validate_gemm_ab_dtypes var
    vectorcombine vectorhigh vectorized vectorlow view void vscale wait_wgmma warp_reduce_bitand warp_reduce_bitor
    warp_reduce_max warp_reduce_min warp_reduce_sum warpgroup_arrive warpgroup_commit_batch warpgroup_fence_operand
    warpgroup_wait wgmma_gemm wgmma_gemm_sp wgmma_mma where writes ws ws_op
""".split())


def reason(name: str) -> str | None:
    """Why egtile does not have TileLang's ``T.<name>`` and what to write instead; ``None`` when ``name`` is not
    TileLang's."""
    hint = NOT_YET.get(name)
    if hint is not None:
        return hint
    for pattern, why in FAMILIES:
        if pattern.search(name):
            return why
    if name in TILELANG_NAMES:
        return _TVMSCRIPT
    return None


def missing(name: str) -> MissingConstructError:
    """The error for ``T.<name>`` (raise it), at the user's line.

    Names with a leading underscore (``__path__``, ``__wrapped__``, ...) give a plain ``AttributeError``:
    they are Python's and tools' own probes, not DSL constructs.
    """
    from egtile.language.tracer import user_loc

    if name.startswith("_"):
        return AttributeError(f"module 'egtile.language' has no attribute {name!r}")  # type: ignore[return-value]
    why = reason(name)
    if why is not None:
        return MissingConstructError(f"T.{name} is not supported by egtile yet: {why}", user_loc())
    from egtile import language

    close = difflib.get_close_matches(name, language.__all__, n=3, cutoff=0.75)
    similar = f"; did you mean {' or '.join('T.' + c for c in close)}" if close else ""
    return MissingConstructError(f"egtile.language has no construct T.{name} (neither egtile nor TileLang has it"
                                 f"{similar}); docs/language.md lists the supported constructs", user_loc())
