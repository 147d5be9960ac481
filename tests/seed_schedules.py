"""Hand-built IR of the two seed kernels, and hand-built schedules of them (correct and buggy).

These are fixtures for executors (simulator, verifier, codegen) that must not depend on the front end
or the scheduler: the tile IR below is what tracing ``examples/seed_bug1.py`` / ``seed_bug2.py`` with
their default parameters must produce (up to statement ids), and the schedules are what a correct
warp-specialized lowering looks like. The buggy variants reproduce the two TileLang bugs of
../shared/seeds/: bug 1 replicates a nonlocal ``T.Parallel`` body; bug 2 places the consumer's wait
after the first read of the SIMT-produced buffer.
"""

from __future__ import annotations

from egtile.ir import (
    AddressOf, Arrive, ArriveExpectTx, BinOp, Buffer, Const, Copy, Elect, Extern, FenceProxyAsync, Fill, For, Kernel,
    Leaf, Load,
    MBarrier, Region, Role, RoleSplit, Scheduled, SeqLoop, Store, SyncThreads, ThreadLoop, ThreadRange, TileOp,
    TmaLoad, Var, Wait,
)


def _c(v: int) -> Const:
    return Const(v, "int32")


def _add(a, b):
    return BinOp("+", a, b)


def _mul(a, b):
    return BinOp("*", a, b)


def stage_parity(k: Var, start, stages: int):
    """(stage, parity) expressions of the normalized index ``k - start``."""
    rel = BinOp("-", k, start)
    stage = BinOp("%", rel, _c(stages))
    parity = BinOp("&", BinOp("/", rel, _c(stages)), _c(1))
    return stage, parity


# ----------------------------------------------------------------------------------------------------
# Bug 1: M=16, K=32, block_M=16, block_K=16


def bug1_kernel() -> Kernel:
    M, K, bm, bk = 16, 32, 16, 16
    A = Buffer("A", (M, K), "float16", "global")
    Counts = Buffer("Counts", (M, bk), "int32", "global")
    A_shared = Buffer("A_shared", (bm, bk), "float16", "shared")
    counters = Buffer("counters", (bk,), "int32", "shared")
    by = Var("by")
    ko = Var("ko")
    i = Var("i")
    i2 = Var("i_1")
    src = 'extern "C" __device__ void atomic_inc(int* ptr) { atomicAdd(ptr, 1); }\n'
    body = (
        Fill(1, Region.full(counters), Const(0, "int32")),
        For(2, ko, _c(0), _c(K // bk), "pipelined", (
            Copy(3, Region(A, (_mul(by, _c(bm)), _mul(ko, _c(bk))), (bm, bk)), Region.full(A_shared)),
            For(4, i, _c(0), _c(bk), "parallel", (
                Extern(5, "atomic_inc", "void", (AddressOf(Load(counters, (i,))),)),
            )),
        ), num_stages=2),
        For(6, i2, _c(0), _c(bk), "parallel", (
            Store(7, Counts, (_mul(by, _c(bm)), i2), Load(counters, (i2,))),
        )),
    )
    return Kernel("main", (A, Counts), (M // bm,), (by,), 128, (A_shared, counters), body, (src,))


def bug1_schedule(*, replicate_extern: bool = False) -> Scheduled:
    """Warp-specialized schedule of bug 1. ``replicate_extern=True`` is TileLang's bug: every consumer
    thread runs the whole ``atomic_inc`` loop."""
    k = bug1_kernel()
    A, Counts = k.params
    S = 2
    A_st = Buffer("A_shared", (S, 16, 16), "float16", "shared")
    counters = k.allocs[1]
    by = k.block_vars[0]
    ko = Var("ko")
    i = Var("i")
    i2 = Var("i_1")
    stage, parity = stage_parity(ko, _c(0), S)
    full = MBarrier("full_0", S, 1, "full", ("A_shared",))
    empty = MBarrier("empty_0", S, 128, "empty", ("A_shared",))
    consumer = ThreadRange(0, 128)
    producer = ThreadRange(128, 128)
    everyone = ThreadRange(0, 256)
    mapping = "replicated" if replicate_extern else "partitioned"
    body = (
        TileOp(Fill(1, Region.full(counters), Const(0, "int32")), "simt", everyone),
        SyncThreads(everyone),
        RoleSplit((
            Role("consumer", consumer, ("inc", 240), (
                SeqLoop(ko, _c(0), _c(2), (
                    Wait("full_0", stage, parity),
                    ThreadLoop((i,), (16,), mapping, consumer, (
                        Leaf(Extern(5, "atomic_inc", "void", (AddressOf(Load(counters, (i,))),))),
                    ), sid=4),
                    Arrive("empty_0", stage),
                ), sid=2),
            )),
            # Only the elected producer thread has work (one TMA), so only it waits on empty[s].
            Role("producer", producer, ("dec", 40), (
                SeqLoop(ko, _c(0), _c(2), (
                    Elect(producer, (
                        Wait("empty_0", stage, BinOp("^", parity, _c(1))),
                        ArriveExpectTx("full_0", stage, 16 * 16 * 2),
                        TmaLoad(Region(A, (_mul(by, _c(16)), _mul(ko, _c(16))), (16, 16)),
                                Region(A_st, (stage, _c(0), _c(0)), (1, 16, 16)), "full_0", stage, sid=3),
                    )),
                ), sid=2),
            )),
        ), sid=2),
        SyncThreads(everyone),
        ThreadLoop((i2,), (16,), "partitioned", everyone, (
            Leaf(Store(7, Counts, (_mul(by, _c(16)), i2), Load(counters, (i2,)))),
        ), sid=6),
    )
    return Scheduled(k, 256, (A_st, counters), (full, empty), body, staged=(("A_shared", S),))


# ----------------------------------------------------------------------------------------------------
# Bug 2: num_stages (trip count) = 4, block_N = 64, pipeline depth 2


def bug2_kernel(n: int = 4, block_n: int = 64) -> Kernel:
    A_in = Buffer("A_in", (n, block_n), "float16", "global")
    B_in = Buffer("B_in", (n, block_n), "float16", "global")
    B_out = Buffer("B_out", (n, block_n), "float16", "global")
    A_out = Buffer("A_out", (n, block_n), "float16", "global")
    A_shared = Buffer("A_shared", (block_n,), "float16", "shared")
    B_shared = Buffer("B_shared", (block_n,), "float16", "shared")
    bx = Var("_bx")
    ko = Var("ko")
    i = Var("i")
    i2 = Var("i_1")
    body = (
        For(1, ko, _c(0), _c(n), "pipelined", (
            For(2, i, _c(0), _c(block_n), "parallel", (
                Store(3, B_shared, (i,), Load(B_in, (ko, i))),
            )),
            Copy(4, Region(A_in, (ko, _c(0)), (1, block_n)), Region.full(A_shared)),
            Store(5, B_out, (ko, _c(0)), Load(B_shared, (_c(0),))),
            For(6, i2, _c(0), _c(block_n), "parallel", (
                Store(7, A_out, (ko, i2), Load(A_shared, (i2,))),
            )),
        ), num_stages=2),
    )
    return Kernel("main", (A_in, B_in, B_out, A_out), (1,), (bx,), 128, (A_shared, B_shared), body)


def bug2_schedule(*, wait_after_first_read: bool = False, n: int = 4, block_n: int = 64) -> Scheduled:
    """Warp-specialized schedule of bug 2. ``wait_after_first_read=True`` is TileLang's bug: the
    consumer's wait on full[s] is placed from TMA buffers only, after the read of ``B_shared``."""
    k = bug2_kernel(n, block_n)
    A_in, B_in, B_out, A_out = k.params
    S = 2
    A_st = Buffer("A_shared", (S, block_n), "float16", "shared")
    B_st = Buffer("B_shared", (S, block_n), "float16", "shared")
    ko = Var("ko")
    i = Var("i")
    i2 = Var("i_1")
    stage, parity = stage_parity(ko, _c(0), S)
    consumer = ThreadRange(0, 128)
    producer = ThreadRange(128, 128)
    # full: 128 SIMT producer arrivals + 1 arrive.expect_tx by the elected thread.
    full = MBarrier("full_0", S, 129, "full", ("A_shared", "B_shared"))
    empty = MBarrier("empty_0", S, 128, "empty", ("A_shared", "B_shared"))
    wait = Wait("full_0", stage, parity)
    read_b = Leaf(Store(5, B_out, (ko, _c(0)), Load(B_st, (stage, _c(0)))))
    consumer_body = (
        (Elect(consumer, (read_b,)), wait) if wait_after_first_read else (wait, Elect(consumer, (read_b,)))
    ) + (
        ThreadLoop((i2,), (block_n,), "partitioned", consumer, (
            Leaf(Store(7, A_out, (ko, i2), Load(A_st, (stage, i2)))),
        ), sid=6),
        Arrive("empty_0", stage),
    )
    body = (
        RoleSplit((
            Role("consumer", consumer, ("inc", 240), (SeqLoop(ko, _c(0), _c(n), consumer_body, sid=1),)),
            Role("producer", producer, ("dec", 40), (
                SeqLoop(ko, _c(0), _c(n), (
                    Wait("empty_0", stage, BinOp("^", parity, _c(1))),
                    ThreadLoop((i,), (block_n,), "partitioned", producer, (
                        Leaf(Store(3, B_st, (stage, i), Load(B_in, (ko, i)))),
                    ), sid=2),
                    Arrive("full_0", stage),
                    Elect(producer, (
                        ArriveExpectTx("full_0", stage, block_n * 2),
                        # the consumer reads A_shared with ordinary loads: the TMA load that overwrites the stage
                        # is ordered after them by a proxy fence (PTX ISA 9.7.13.3.2)
                        FenceProxyAsync(),
                        TmaLoad(Region(A_in, (ko, _c(0)), (1, block_n)),
                                Region(A_st, (stage, _c(0)), (1, block_n)), "full_0", stage, sid=4),
                    )),
                ), sid=1),
            )),
        ), sid=1),
    )
    return Scheduled(k, 256, (A_st, B_st), (full, empty), body, staged=(("A_shared", S), ("B_shared", S)))
