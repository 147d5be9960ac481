"""A new instruction added from outside egtile, through the executors' public registries only.

``BulkCopy`` is the Hopper 1-D bulk copy global -> shared that completes transaction bytes on an mbarrier
stage (PTX ISA "cp.async.bulk": ``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes``):
like a TMA load, but of one contiguous run of bytes and without a tensor map. The node class, its CUDA emitter
(inline PTX as device code), its simulator semantics, its listing and its access summary are all defined
in this file; a hand-built warp-specialized schedule (the shape ``tests/seed_schedules.py`` builds) uses it
in the producer. Registrations are undone after each test.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import pytest
import torch

import egtile
from egtile.codegen import Needs, register_emitter, sass, unregister_emitter
from egtile.codegen.ops.common import barrier_ref, region_addr, sid_comment
from egtile.errors import CodegenError, RuleError, SimulationError
from egtile.ir import (
    Arrive, ArriveExpectTx, BinOp, Buffer, Const, Copy, Elect, Expr, FenceProxyAsync, For, Kernel, Leaf, Load, MBarrier,
    Region,
    Role, RoleSplit, Scheduled, SeqLoop, Store, SyncThreads, ThreadLoop, ThreadRange, TmaLoad, Var, Wait,
)
from egtile.ir.printer import format_expr, format_region, register_listing, unregister_listing
from egtile.lower.sync import place_syncs, register_accesses, unregister_accesses
from egtile.sim import POLICIES, register_semantics, simulate, unregister_semantics


@dataclass(frozen=True)
class BulkCopy:
    """``cp.async.bulk`` global -> shared of ``src`` (one contiguous row) into ``dst``, completing its bytes
    on ``barrier[stage]``. Issued by one thread, after ``arrive.expect_tx`` of the same bytes."""

    src: Region
    dst: Region
    barrier: str
    stage: Expr
    sid: int | None = None


def _nbytes(s: BulkCopy) -> int:
    return s.dst.numel * egtile.ir.dtype(s.dst.buffer.dtype).bytes


# ---- codegen: inline PTX as device code, the global pointer 16-byte aligned

BULK_PTX = """\
__device__ __forceinline__ void user_bulk_g2s(void* dst, const void* src, eg_u32 bytes, eg_u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(eg_smem_addr(dst)), "l"(src), "r"(bytes), "r"(eg_smem_addr(bar)) : "memory");
}"""


def bulk_emit(s: BulkCopy, ctx) -> list[str]:
    n = _nbytes(s)
    if n % 16:
        raise CodegenError(f"BulkCopy (sid {s.sid}): {n} bytes; cp.async.bulk moves a multiple of 16 bytes")
    return [f"user_bulk_g2s({region_addr(s.dst, ctx)}, {region_addr(s.src, ctx)}, {n}, "
            f"{barrier_ref(s.barrier, s.stage, ctx)});{sid_comment(s.sid)}"]


# ---- simulator: the primitives a TMA load uses (read the source now, land the writes at completion)

def bulk_run(m, s: BulkCopy, th):
    th.sid = s.sid
    what = f"BulkCopy (sid {s.sid}) in block {m.coords}"
    if m.mem(s.src.buffer.name, th).scope != "global" or m.mem(s.dst.buffer.name, th).scope != "shared":
        raise SimulationError(f"{what}: cp.async.bulk copies global memory into shared memory")
    bar = m.barrier(s.barrier)
    stage = m.stage_of(bar, s.stage, th, "BulkCopy")
    writes = m.gather(s.src, s.dst, th, s.sid, what, op="bulk-copy")
    m.issue_async(th, s.sid, writes, op="bulk-copy", barrier=bar, stage=stage, tx_bytes=_nbytes(s))
    return m.PREEMPT


# ---- listing and access summary

def bulk_listing(s: BulkCopy) -> list[str]:
    return [f"bulk_copy {format_region(s.src)} -> {format_region(s.dst)} completes "
            f"{s.barrier}[{format_expr(s.stage)}]  # [{s.sid}]"]


def bulk_accesses(s: BulkCopy, acc, owner_of):
    # cp.async.bulk writes shared memory through the async proxy (egtile fences an ordinary access before it)
    return acc.region(s.dst, write=True, proxy=True) | acc.region(s.src, write=False)


@contextlib.contextmanager
def bulk_copy_registered(*, semantics=bulk_run):
    register_emitter(BulkCopy, bulk_emit, device_code=(BULK_PTX,),
                     needs=lambda s, sched: Needs(shared_align=((s.dst.buffer.name, 16),)),
                     param_align=lambda s, ctx: [(s.src.buffer.name, 16)])
    register_semantics(BulkCopy, semantics)
    register_listing(BulkCopy, bulk_listing)
    register_accesses(BulkCopy, bulk_accesses)
    try:
        yield
    finally:
        unregister_accesses(BulkCopy)
        unregister_listing(BulkCopy)
        unregister_semantics(BulkCopy)
        unregister_emitter(BulkCopy)


# ---- the kernel: out[r, :] = in[r, :] * 2 + 1, rows pipelined through two shared stages

BLOCKS, N, W, STAGES = 2, 5, 64, 2


def _c(v: int) -> Const:
    return Const(v, "int32")


def bulk_kernel() -> Kernel:
    In = Buffer("In", (BLOCKS * N, W), "float32", "global")
    Out = Buffer("Out", (BLOCKS * N, W), "float32", "global")
    X_s = Buffer("X_s", (W,), "float32", "shared")
    bx, k, i = Var("bx"), Var("k"), Var("i")
    row = BinOp("+", BinOp("*", bx, _c(N)), k)
    value = BinOp("+", BinOp("*", Load(X_s, (i,)), Const(2.0, "float32")), Const(1.0, "float32"))
    body = (For(1, k, _c(0), _c(N), "pipelined", (
        Copy(2, Region(In, (row, _c(0)), (1, W)), Region.full(X_s)),
        For(3, i, _c(0), _c(W), "parallel", (Store(4, Out, (row, i), value),)),
    ), num_stages=STAGES),)
    return Kernel("bulk", (In, Out), (BLOCKS,), (bx,), 128, (X_s,), body)


def bulk_schedule(*, consumer_waits: bool = True, fenced: bool = True) -> Scheduled:
    k = bulk_kernel()
    In, Out = k.params
    X_st = Buffer("X_s", (STAGES, W), "float32", "shared")
    bx, kv, i = k.block_vars[0], Var("k"), Var("i")
    row = BinOp("+", BinOp("*", bx, _c(N)), kv)
    stage = BinOp("%", kv, _c(STAGES))
    parity = BinOp("&", BinOp("/", kv, _c(STAGES)), _c(1))
    full = MBarrier("full", STAGES, 1, "full", ("X_s",))
    empty = MBarrier("empty", STAGES, 128, "empty", ("X_s",))
    consumer, producer = ThreadRange(0, 128), ThreadRange(128, 128)
    value = BinOp("+", BinOp("*", Load(X_st, (stage, i)), Const(2.0, "float32")), Const(1.0, "float32"))
    consume = (
        *((Wait("full", stage, parity),) if consumer_waits else ()),
        ThreadLoop((i,), (W,), "partitioned", consumer, (Leaf(Store(4, Out, (row, i), value)),), sid=3),
        Arrive("empty", stage),
    )
    produce = (Elect(producer, (
        Wait("empty", stage, BinOp("^", parity, _c(1))),
        ArriveExpectTx("full", stage, W * 4),
        # the consumer read the stage with ordinary loads: the copy that overwrites it (async proxy) is fenced
        *((FenceProxyAsync(),) if fenced else ()),
        BulkCopy(Region(In, (row, _c(0)), (1, W)), Region(X_st, (stage, _c(0)), (1, W)), "full", stage, sid=2),
    )),)
    body = (RoleSplit((
        Role("consumer", consumer, ("inc", 240), (SeqLoop(kv, _c(0), _c(N), consume, sid=1),)),
        Role("producer", producer, ("dec", 40), (SeqLoop(kv, _c(0), _c(N), produce, sid=1),)),
    ), sid=1),)
    return Scheduled(k, 256, (X_st,), (full, empty), body, staged=(("X_s", STAGES),))


def _inputs(seed: int, device: str = "cpu") -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(BLOCKS * N, W, generator=g).to(device)
    return [x, torch.full_like(x, float("nan"))]


# ---- tests


def test_the_user_instruction_simulates_to_the_interpreters_values_under_every_policy():
    with bulk_copy_registered():
        s = bulk_schedule()
        for seed, policy in enumerate(POLICIES):
            args = _inputs(100 + seed)
            ref = [a.clone() for a in args]
            egtile.interpret(s.kernel, *ref)
            result = simulate(s, *args, policy=policy, seed=seed)
            assert result.ok, result.errors()
            assert torch.equal(result.outputs[1], ref[1]), policy
            assert torch.equal(result.outputs[1], args[0] * 2 + 1)


def test_the_simulator_sees_the_unfenced_reuse_of_a_stage_the_consumer_read():
    # PTX ISA 9.7.13.3.2: the consumer's ordinary loads of X_s and the next bulk copy into it are ordered only by a
    # fence.proxy.async on the path between them (here the producer's, after its wait on empty)
    with bulk_copy_registered():
        result = simulate(bulk_schedule(fenced=False), *_inputs(8))
        assert any("proxy race on X_s" in e for e in result.errors()), result.errors()


def test_the_user_semantics_see_the_race_of_a_consumer_that_does_not_wait():
    with bulk_copy_registered():
        result = simulate(bulk_schedule(consumer_waits=False), *_inputs(7), policy="adversarial")
    assert any(r.buffer == "X_s" and r.later.op == "read" for r in result.races), result.errors()


def test_wrong_transaction_bytes_leave_the_phase_incomplete():
    def short(m, s, th):  # completes 16 bytes fewer than the producer expects
        th.sid = s.sid
        bar = m.barrier(s.barrier)
        stage = m.stage_of(bar, s.stage, th, "BulkCopy")
        writes = m.gather(s.src, s.dst, th, s.sid, "BulkCopy", op="bulk-copy")
        m.issue_async(th, s.sid, writes, op="bulk-copy", barrier=bar, stage=stage, tx_bytes=_nbytes(s) - 16)
        return m.PREEMPT

    with bulk_copy_registered(semantics=short):
        result = simulate(bulk_schedule(), *_inputs(8))
    assert result.deadlock is not None


def test_the_user_instruction_compiles_to_a_bulk_copy_for_sm_90a():
    with bulk_copy_registered():
        s = bulk_schedule()
        built = egtile.codegen.build(s)
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in built.source
    assert "user_bulk_g2s(&X_s[" in built.source and "// sid 2" in built.source
    assert built.cubin[:4] == b"\x7fELF" and built.tma == ()
    assert {p.name: p.align for p in built.params} == {"In": 16, "Out": 4}
    if sass.available():
        ops = sass.opcodes(sass.disassemble(built.cubin))
        assert any(o.startswith("UBLKCP") for o in ops), sorted(ops)
        assert not any(o.startswith("UTMALDG") for o in ops)


def test_the_user_instruction_has_its_listing_line():
    with bulk_copy_registered():
        text = str(bulk_schedule())
    assert "bulk_copy In[bx * 5 + k, 0:64] -> X_s[k % 2, 0:64] completes full[k % 2]  # [2]" in text


def test_the_access_summary_puts_a_barrier_between_a_global_write_and_the_bulk_read_of_it():
    s = bulk_schedule()
    In = s.kernel.params[0]
    r, j = Var("r"), Var("j")
    fill = ThreadLoop((r, j), (BLOCKS * N, W), "partitioned", ThreadRange(0, 256),
                      (Leaf(Store(9, In, (r, j), Const(0.5, "float32"))),), sid=9)
    with pytest.raises(RuleError, match=r"BulkCopy.*egtile.lower.sync access summaries"):
        place_syncs((fill,) + s.body, ThreadRange(0, 256), barriers=s.barriers)
    with bulk_copy_registered():
        placed = place_syncs((fill,) + s.body, ThreadRange(0, 256), barriers=s.barriers)
    assert [type(x).__name__ for x in placed] == ["ThreadLoop", "SyncThreads", "RoleSplit"]
    assert placed[1] == SyncThreads(ThreadRange(0, 256))


def test_without_registrations_every_executor_names_the_node_and_its_registry():
    s = bulk_schedule()
    with pytest.raises(CodegenError, match=r"test_user_instruction\.BulkCopy in the egtile\.codegen emitters "
                                           r"registry; register one with egtile\.codegen\.register_emitter"):
        egtile.codegen.emit(s)
    with pytest.raises(SimulationError, match=r"BulkCopy in the egtile\.sim semantics registry; register one "
                                              r"with egtile\.sim\.register_semantics"):
        simulate(s, *_inputs(1))
    with pytest.raises(TypeError, match=r"BulkCopy in the egtile\.ir\.printer listings registry"):
        str(s)


def _tables():
    from egtile.codegen import EMITTERS
    from egtile.ir.printer import LISTINGS
    from egtile.lower.sync import ACCESSES
    from egtile.sim import SEMANTICS

    return [dict(r.table) for r in (EMITTERS, SEMANTICS, LISTINGS, ACCESSES)]


def test_unregistering_restores_every_registry():
    before = _tables()
    with bulk_copy_registered():
        assert all(BulkCopy in t for t in _tables())
    assert _tables() == before
    # shadowing a builtin handler and unregistering puts the builtin back
    from seed_schedules import bug2_schedule

    original = str(bug2_schedule())
    assert "tma_load A_in[ko, 0:64]" in original
    register_listing(TmaLoad, lambda s: ["tma (shadowed)"], replace=True)
    try:
        assert "tma (shadowed)" in str(bug2_schedule())
        with pytest.raises(TypeError, match="already has a listing"):
            register_listing(TmaLoad, lambda s: ["again"])
    finally:
        unregister_listing(TmaLoad)
    assert _tables() == before and str(bug2_schedule()) == original


@pytest.mark.gpu
def test_the_user_instruction_runs_on_the_gpu_like_torch():
    from egtile.runtime import CudaKernel

    with bulk_copy_registered():
        s = bulk_schedule()
        kernel = CudaKernel(egtile.codegen.build(s), s, watchdog_s=30.0)
    for seed in range(20):
        x, out = _inputs(200 + seed, device="cuda")
        kernel(x, out)
        torch.cuda.synchronize()
        assert torch.equal(out, x * 2 + 1), seed
