"""egtile.codegen emission: the generated CUDA C++ of hand-built schedules, and that all of it compiles.

No GPU needed: every kernel here is compiled to an sm_90a cubin with NVRTC.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from egtile.codegen import build, emit, generate
from egtile.codegen.context import Ctx
from egtile.codegen.exprs import emit as emit_expr, known_multiple, literal, type_of
from egtile.codegen.layout import collect_tma, plan_smem
from egtile.errors import CodegenError, CompileError, ResourceError, SourceLoc
from egtile.ir import (
    BinOp, Buffer, Cast, Const, Elect, Kernel, Leaf, Load, Region, Scheduled, Select, Store,
    ThreadLoop, ThreadRange, TmaLoad, UnOp, Var,
)

from codegen_kernels import CASES, acceptance_kernels
from gemm_kernels import gemm_kernel
from seed_schedules import bug1_schedule, bug2_schedule
from verify.kernels import flash_attention


def _scheduled(prim):
    from egtile.schedule.driver import optimize

    return optimize(prim.kernel).scheduled

ALL_SCHEDULES = {
    "bug1": bug1_schedule,
    "bug1_replicated": lambda: bug1_schedule(replicate_extern=True),
    "bug2": bug2_schedule,
    "bug2_wait_after_read": lambda: bug2_schedule(wait_after_first_read=True),
    "bug2_block16": lambda: bug2_schedule(block_n=16),
    **{c.name: c.schedule for c in CASES},
    # register fragments and wgmma come from the rules (tests/gemm_kernels.py; run on the GPU by
    # tests/test_gemm_gpu.py): the clear, the wgmma and its wait, the fragment copy-out or a by-layout loop
    "wgmma_gemm": lambda: _scheduled(gemm_kernel(128, 128, 64)),
    "wgmma_gemm_epilogue_loop": lambda: _scheduled(gemm_kernel(128, 128, 64, epilogue_loop=True)),
    # attention in registers: row fragments, the shuffle row reductions, register-A wgmma (run on the GPU by
    # tests/test_attention_gpu.py)
    "attention_in_registers": lambda: _scheduled(flash_attention(seq=128)),
    # 64 rows over two consumer warpgroups: the N split, row reductions combined across the warpgroups through shared
    # memory (RowCombine; run on the GPU by tests/test_rules_nsplit_gpu.py)
    "attention_rows_across_warpgroups": lambda: _scheduled(flash_attention(seq=128, block_M=64, threads=256)),
    # the consumer warpgroups' ping-pong (egtile.rules.pingpong.preferred(): the handshake's bar.sync / bar.arrive;
    # run on the GPU by tests/test_pingpong_gpu.py)
    "attention_pingpong": lambda: _pingpong(),
    # a hand-written protocol (T.ws, T.alloc_barrier, T.tma_copy(barrier=)): its ExpectTx before each TMA load,
    # the user's waits and arrivals (run on the GPU by examples/warp_specialized_gemm.py)
    "user_protocol": lambda: _user_protocol(),
    # per-thread cp.async in a hand-written producer role, completing on an mbarrier (T.ptx_cp_async,
    # T.cp_async_barrier_noinc; run on the GPU by tests/test_protocol_cp_async.py)
    "user_protocol_cp_async": lambda: _user_protocol_cp_async(),
}


def _user_protocol_cp_async():
    from test_protocol_cp_async import gather

    from egtile.lower.protocol import schedule_protocol

    return schedule_protocol(gather().kernel).scheduled


def _user_protocol():
    from protocol_kernels import scale

    from egtile.lower.protocol import schedule_protocol

    return schedule_protocol(scale().kernel).scheduled


def _pingpong():
    import flash_attention as FA

    from egtile.rules import pingpong
    from egtile.schedule.driver import optimize

    prim = FA.flashattn.__wrapped__(1, 1, 128, 32, False, block_M=128, block_N=64, threads=256, num_stages=2)
    return optimize(prim.kernel, rules=pingpong.preferred()).scheduled


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EGTILE_DISABLE_CACHE", raising=False)


@pytest.mark.parametrize("name", sorted(ALL_SCHEDULES))
def test_every_schedule_compiles_to_a_cubin(name):
    built = build(ALL_SCHEDULES[name]())
    assert built.cubin[:4] == b"\x7fELF"
    assert built.arch == "sm_90a"
    assert f"{built.symbol}" in built.source
    assert "warning" not in built.log.lower(), built.log


def test_the_fixtures_cover_every_scheduled_construct_and_tile_instruction():
    # a new SStmt or TileOp combination must come with a fixture that compiles (and runs on the GPU)
    from typing import get_args

    from egtile.ir import Copy, Fill, Gemm, Reduce, SStmt, TileOp, swalk

    seen, tile = set(), set()
    for make in ALL_SCHEDULES.values():
        for st in swalk(make().body):
            seen.add(type(st))
            if isinstance(st, TileOp):
                tile.add((type(st.op), st.inst))
    assert set(get_args(SStmt)) <= seen, set(get_args(SStmt)) - seen
    assert {(Copy, "simt"), (Copy, "cp_async"), (Fill, "simt"), (Gemm, "simt"), (Reduce, "simt")} <= tile


@pytest.mark.parametrize("name", sorted(acceptance_kernels()))
def test_scheduler_output_compiles(name):
    # the e-graph's schedules of the scheduling-rules acceptance kernels, end to end to a cubin
    from egtile.schedule.driver import optimize

    built = build(optimize(acceptance_kernels()[name]()).scheduled)
    assert built.cubin[:4] == b"\x7fELF" and "warning" not in built.log.lower(), built.log


def test_tma_stages_under_128_bytes_are_padded_to_128():
    # 16 halves = 32 bytes a stage; TMA needs each stage's shared address 128-byte aligned
    s = bug2_schedule(block_n=16)
    lay = plan_smem(s)
    assert dict(lay.padded) == {"A_shared": (64, 1)}  # A_shared is the TMA destination; B_shared is SIMT
    assert dict(lay.buffers) == {"A_shared": 0, "B_shared": 256}
    src = emit(s)
    assert "eg_tma_load_2d(&A_shared[(((ko - 0) % 2)) * 64]" in src
    assert "A_out[(ko) * 16 + i_1] = A_shared[(((ko - 0) % 2)) * 64 + i_1];" in src
    assert "B_shared[(((ko - 0) % 2)) * 16 + i] = B_in[(ko) * 16 + i];" in src


# ----------------------------------------------------------------------------------------------------
# kernel shape


def test_signature_has_typed_pointers_and_grid_constant_tensor_maps():
    src = emit(bug2_schedule())
    sig = re.search(r'extern "C" __global__ void __launch_bounds__\((\d+), 1\)\n(\w+)\((.*)\) \{', src)
    assert sig is not None
    assert sig.group(1) == "256" and sig.group(2) == "main_kernel"
    params = [p.strip() for p in sig.group(3).split(",")]
    assert params == ["half* A_in", "half* B_in", "half* B_out", "half* A_out",
                      "const __grid_constant__ CUtensorMap eg_tmap_A_in_0"]


def test_one_tensor_map_per_buffer_and_box():
    tma = collect_tma(bug1_schedule())
    assert [(t.buffer, t.box) for t in tma] == [("A", (16, 16))]
    mix = collect_tma(CASES[1].schedule())
    assert [(t.buffer, t.box) for t in mix] == [("X", (32, 32)), ("Y", (32, 32))]


def test_shared_memory_carving_is_aligned():
    s = bug2_schedule()
    lay = plan_smem(s)
    assert dict(lay.buffers) == {"A_shared": 0, "B_shared": 256}
    assert dict(lay.barriers) == {"full_0": 512, "empty_0": 528}
    assert lay.total == 544
    src = emit(s)
    assert "extern __shared__ __align__(1024) unsigned char smem[];" in src
    assert "half* B_shared = reinterpret_cast<half*>(smem + 256);" in src
    assert "eg_u64* eg_bar_empty_0 = reinterpret_cast<eg_u64*>(smem + 528);" in src
    assert generate(s).smem_bytes == 544


def test_barriers_initialized_by_thread_zero_then_fenced_and_synced():
    """Thread 0 also prefetches each tensor map's descriptor first (a hint, ahead of the first tile copy)."""
    src = emit(bug2_schedule())
    block = re.search(r"if \(eg_tid == 0\) \{\n((?:.*\n)*?)  \}\n  __syncthreads\(\);", src)
    assert block is not None
    lines = [ln.strip() for ln in block.group(1).splitlines()]
    assert lines == ["eg_tma_prefetch_descriptor(&eg_tmap_A_in_0);",
                     "eg_mbarrier_init(&eg_bar_full_0[0], 129);", "eg_mbarrier_init(&eg_bar_full_0[1], 129);",
                     "eg_mbarrier_init(&eg_bar_empty_0[0], 128);", "eg_mbarrier_init(&eg_bar_empty_0[1], 128);",
                     "eg_fence_mbarrier_init();"]


def test_role_split_is_one_if_else_on_warpgroup_with_setmaxnreg_at_entry():
    src = emit(bug1_schedule())
    assert "const int eg_wg0 = eg_tid / 128;" in src
    consumer = src.index("if (eg_wg0 == 0) {")
    producer = src.index("} else {", consumer)
    assert src.index("eg_setmaxnreg_inc<240>();", consumer) < producer
    assert src.index("eg_setmaxnreg_dec<40>();", producer) > producer
    assert src.count("eg_setmaxnreg_") == 2


def test_partitioned_and_replicated_thread_loops():
    good, bad = emit(bug1_schedule()), emit(bug1_schedule(replicate_extern=True))
    assert "for (int eg_i2 = eg_tid; eg_i2 < 16; eg_i2 += 128) {" in good
    assert "for (int eg_i2 = 0; eg_i2 < 16; ++eg_i2) {" in bad
    # the producer's partitioned loop (bug 2) ranks threads from its first thread
    assert "for (int eg_i2 = (eg_tid - 128); eg_i2 < 64; eg_i2 += 128) {" in emit(bug2_schedule())


def test_tma_coordinates_are_innermost_first_and_issue_is_elected():
    src = emit(bug1_schedule())
    load = re.search(r"eg_tma_load_2d\((.*)\);", src).group(1)
    assert load.endswith("(ko * 16), (by * 16)")  # src offsets (by*16, ko*16), reversed
    assert "&A_shared[(((ko - 0) % 2)) * 256]" in load
    before = src[:src.index("eg_tma_load_2d")].rstrip().splitlines()
    # the elected producer thread alone waits on empty[s], arms full[s] and issues the load
    assert [line.strip().split("(")[0].strip() for line in before[-3:]] == [
        "if", "eg_mbarrier_wait_parity", "eg_mbarrier_arrive_expect_tx"]
    assert before[-3].strip() == "if (eg_tid == 128) {"


def test_extern_and_import_source_emitted_verbatim_before_the_kernel():
    s = bug1_schedule()
    src = emit(s)
    assert s.kernel.sources[0].strip() in src
    assert src.index(s.kernel.sources[0].strip()) < src.index('extern "C" __global__')
    assert "atomic_inc((&counters[i]));  // sid 5" in src


def test_named_barrier_fence_and_tma_store():
    src = emit(CASES[1].schedule())
    assert "eg_named_barrier_sync(1, 128);" in src
    assert src.index("eg_fence_proxy_async_shared();") < src.index("eg_named_barrier_sync(1, 128);") \
        < src.index("eg_tma_store_2d(&eg_tmap_Y_0, &Y_s[0], 0, (bx * 32));")
    assert "eg_tma_store_wait();" in src
    assert "float w[4];" in src  # local buffer: per-thread array


def test_cp_async_chunks_are_the_schedules_width_and_an_unprovable_one_is_an_error():
    from dataclasses import replace

    from egtile.ir import TileOp

    sched = CASES[2].schedule()
    src = emit(sched)
    assert "eg_cp_async_4(&P_s[" in src
    assert "eg_cp_async_8(&Q_s[" in src
    assert "fallback" not in src and "__threadfence_block();" not in src
    # Codegen never picks or substitutes a width: 8-byte chunks of 12-byte rows cannot be aligned, and a
    # cp.async of 6-byte rows has no legal width at all.
    for op, width in ((sched.body[0], 8), (sched.body[2], 4)):
        bad = replace(sched, body=tuple(replace(x, inst="cp_async", width=width) if x is op else x
                                        for x in sched.body))
        with pytest.raises(CodegenError, match=f"{width}-byte cp.async chunks"):
            emit(bad)
    assert "eg_cp_async_mbarrier_arrive_noinc(&eg_bar_done[0]);" in src
    assert "eg_cp_async_16(&A_s[" in emit(CASES[0].schedule())
    params = {p.name: p.align for p in generate(CASES[2].schedule()).params}
    assert params == {"P": 4, "Q": 8, "O": 2, "P_out": 2, "Q_out": 4, "O_out": 2}


def test_launch_metadata():
    low = generate(CASES[0].schedule())
    assert low.grid == (2, 2) and low.threads == 128
    assert [(p.name, p.dtype, p.shape, p.align) for p in low.params] == [
        ("A", "float16", (128, 128), 16), ("B", "float16", (128, 128), 16), ("C", "float32", (128, 128), 4)]


# ----------------------------------------------------------------------------------------------------
# expressions


def _ctx() -> Ctx:
    s = bug2_schedule()
    return Ctx(s, plan_smem(s), collect_tma(s), ThreadRange(0, s.threads))


def test_literals():
    assert literal(3, "int32") == "3"
    assert literal(-3, "int32") == "(-3)"
    assert literal(-2**31, "int32") == "(-2147483647 - 1)"
    assert literal(5, "int64") == "5LL"
    assert literal(7, "uint32") == "7u"
    assert literal(1, "float32") == "1.0f"
    assert literal(0.1, "float32") == "0.10000000149011612f"  # float32 value, exactly
    assert literal(float("inf"), "float32") == "__int_as_float(0x7f800000)"
    assert literal(float("-inf"), "float64") == "__longlong_as_double(0xfff0000000000000LL)"
    assert literal(1.5, "float16") == "eg_cast<half>(1.5f)"
    assert literal(True, "bool") == "true"


def test_integer_division_truncates_and_floordiv_floors():
    ctx = _ctx()
    i = Var("i")
    assert emit_expr(BinOp("/", i, Const(2)), ctx) == "(i / 2)"
    assert emit_expr(BinOp("//", i, Const(2)), ctx) == "eg_floordiv<int>(i, 2)"
    assert emit_expr(BinOp("%", i, Const(2)), ctx) == "(i % 2)"
    assert emit_expr(BinOp("^", i, Const(1)), ctx) == "(i ^ 1)"
    assert emit_expr(BinOp("&", i, Const(1)), ctx) == "(i & 1)"
    f = Var("f", "float32")
    assert emit_expr(BinOp("%", f, Const(2.0, "float32")), ctx) == "eg_rem(f, 2.0f)"
    assert emit_expr(BinOp("//", f, Const(2.0, "float32")), ctx) == "eg_floordiv(f, 2.0f)"


def test_half_arithmetic_is_done_in_float_and_rounded_once():
    ctx = _ctx()
    a = Load(ctx.buffer("A_shared"), (Const(0), Const(1)))
    e = BinOp("+", a, a)
    assert type_of(e, ctx) == "float16"
    assert emit_expr(e, ctx) == ("eg_cast<half>((eg_cast<float>(A_shared[1]) + eg_cast<float>(A_shared[1])))")
    # C's usual arithmetic conversions, as egtile.evaluate (the oracle's semantics) types them
    assert type_of(BinOp("*", a, Const(2.0, "float32")), ctx) == "float32"
    assert type_of(BinOp("*", a, Const(2, "int32")), ctx) == "float16"
    # integers keep the operands' width (TVM's rule), C's int arithmetic wrapped back to it
    assert type_of(BinOp("+", Var("c", "int8"), Var("d", "int8")), ctx) == "int8"
    assert emit_expr(BinOp("+", Var("c", "int8"), Var("d", "int8")), ctx) == "((signed char)((c + d)))"
    assert type_of(BinOp("+", Var("h", "float16"), Var("b", "bfloat16")), ctx) == "float32"
    assert type_of(BinOp("<", a, a), ctx) == "bool"
    assert type_of(UnOp("exp", Var("n")), ctx) == "float32"
    assert emit_expr(UnOp("exp", a), ctx) == "eg_cast<half>(eg_exp(eg_cast<float>(A_shared[1])))"


def test_select_and_cast():
    ctx = _ctx()
    e = Select(BinOp("<", Var("i"), Const(3)), Var("x", "float32"), Const(0))
    assert emit_expr(e, ctx) == "((i < 3) ? x : 0.0f)"
    assert emit_expr(Cast("int64", Var("i")), ctx) == "eg_cast<long long>(i)"
    assert emit_expr(Cast("int32", Var("i")), ctx) == "i"


def test_known_multiple_proves_alignment_conservatively():
    k = Var("k")
    assert known_multiple(BinOp("*", k, Const(16))) == 16
    assert known_multiple(BinOp("+", BinOp("*", k, Const(16)), Const(8))) == 8
    assert known_multiple(BinOp("*", BinOp("%", k, Const(2)), Const(64))) == 64
    assert known_multiple(BinOp("/", k, Const(2))) == 1
    assert known_multiple(Const(0)) == 0


# ----------------------------------------------------------------------------------------------------
# schedules the backend refuses, with the reason


def test_role_that_is_not_a_whole_warpgroup_is_rejected():
    s = bug1_schedule()
    split = s.body[2]
    bad = replace(split, roles=(replace(split.roles[0], threads=ThreadRange(0, 96)), split.roles[1]))
    with pytest.raises(CodegenError, match="whole warpgroups"):
        emit(replace(s, body=s.body[:2] + (bad,) + s.body[3:]))


def test_partitioned_loop_that_not_all_its_threads_reach_is_rejected():
    s = bug2_schedule()
    loop = ThreadLoop((Var("i"),), (64,), "partitioned", ThreadRange(0, 128), (), sid=9)
    with pytest.raises(CodegenError, match="never run"):
        emit(replace(s, body=(Elect(ThreadRange(0, 128), (loop,)),)))


def test_tma_box_with_innermost_row_under_16_bytes_is_rejected():
    s = bug2_schedule()
    A = s.kernel.params[0]
    A_st = s.buffers[0]
    load = TmaLoad(Region(A, (Const(0), Const(0)), (1, 4)), Region(A_st, (Const(0), Const(0)), (1, 4)),
                   "full_0", Const(0), sid=4)
    with pytest.raises(CodegenError, match="multiple of 16 bytes"):
        emit(replace(s, body=(Elect(ThreadRange(0, 256), (load,)),)))


def test_unknown_buffer_names_the_buffer_and_the_users_line():
    s = bug2_schedule()
    ghost = Buffer("ghost", (4,), "float32", "shared")
    loc = SourceLoc("user_kernel.py", 42, "ghost[0] = 1.0")
    st = Store(5, ghost, (Const(0),), Const(1.0, "float32"), loc=loc)
    k = replace(s.kernel, body=(st,))
    with pytest.raises(CodegenError, match="ghost") as e:
        emit(replace(s, kernel=k, body=(Leaf(st),)))
    assert e.value.loc == loc  # the user's line of the statement that names it
    assert "user_kernel.py:42" in str(e.value)
    assert isinstance(e.value, CompileError)


def test_too_much_shared_memory_is_a_resource_error():
    s = bug2_schedule()
    huge = Buffer("huge", (240 * 1024,), "uint8", "shared")
    with pytest.raises(ResourceError, match="bytes of shared memory"):
        emit(replace(s, buffers=s.buffers + (huge,)))


def test_user_names_that_clash_with_cxx_are_renamed():
    x = Buffer("float", (4,), "float32", "global")
    v = Var("int")
    k = Kernel("my-kernel", (x,), (1,), (Var("bx"),), 32, (), ())
    s = Scheduled(k, 32, (), (), (ThreadLoop((v,), (4,), "partitioned", ThreadRange(0, 32), (
        Leaf(Store(1, x, (v,), Cast("float32", v))),)),))
    src = emit(s)
    assert "eg_kernel_myZ2d_kernel(float* u_float)" in src  # "-" encoded: symbols are injective too
    assert "u_float[u_int] = eg_cast<float>(u_int);" in src
    assert build(s).cubin[:4] == b"\x7fELF"


def _whole_tile_tma(rows: int = 16):
    import egtile.language as T

    @T.prim_func
    def main(X: T.Tensor((rows, 16), "float32"), Y: T.Tensor((rows, 16), "float32")):
        with T.Kernel(1, threads=256) as _by:
            Xs = T.alloc_shared((rows, 16), "float32")
            full = T.alloc_barrier(128)
            with T.ws(1):
                T.tma_copy(X[0, 0], Xs, barrier=full)
                T.mbarrier_arrive(full)
            with T.ws(0):
                T.mbarrier_wait_parity(full, 0)
                for i, j in T.Parallel(rows, 16):
                    Y[i, j] = Xs[i, j] * 2.0

    return main


def test_a_tma_box_over_a_whole_unstaged_tile_keeps_its_rows_dense():
    # The 128-byte alignment a TMA operand asks of its buffer padded the outermost stride (meant for the stages of a
    # staged tile), so a (16, 16) float32 tile's 64-byte rows became 128 bytes apart and the box, which spans all 16
    # rows, was refused as "not contiguous" on the cuda target (a fresh soundness tester's report).
    import egtile
    from egtile.codegen import nvrtc

    k = egtile.compile(_whole_tile_tma(), target="cuda")
    assert "1032 bytes of dynamic shared memory" in k.get_kernel_source()  # 16 x 64 bytes + the mbarrier
    assert nvrtc.compile_cuda(k.get_kernel_source(), "whole_tile_tma.cu").cubin


@pytest.mark.gpu
def test_a_tma_box_over_a_whole_unstaged_tile_on_the_gpu():
    import torch

    import egtile

    x = torch.randn(16, 16, device="cuda")
    y = torch.full_like(x, float("nan"))
    egtile.compile(_whole_tile_tma(), target="cuda")(x, y)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.double(), 2.0 * x.double(), rtol=0, atol=0)
