"""Small hand-built kernels and schedules, correct and with one planted bug each.

Fixtures for the verifier and simulator tests (``tests/test_verify.py``, ``tests/test_sim*.py``): each
builder returns a correct schedule by default, and a keyword plants exactly one bug of one property, so
a test can show that the checker catches it and that the correct twin passes.
"""

from __future__ import annotations

from egtile.ir import (
    Arrive, ArriveExpectTx, BinOp, Buffer, Const, Copy, CpAsyncArrive, Elect, FenceProxyAsync, Fill, For, Gemm, Kernel,
    Leaf, Load, MBarrier, Reduce, Region, Role, RoleSplit, Scheduled, SeqLoop, SIf, Store, SyncThreads, ThreadLoop,
    ThreadRange, TileOp, TmaLoad, TmaStore, Var, Wait,
)


def c(v: int) -> Const:
    return Const(v, "int32")


def add(a, b):
    return BinOp("+", a, b)


def sub(a, b):
    return BinOp("-", a, b)


def stage_parity(k, start, stages: int, *, absolute: bool = False):
    """(stage, parity) of iteration ``k``: from ``k - start`` (correct) or from ``k`` itself (the mutant)."""
    rel = k if absolute else sub(k, start)
    return BinOp("%", rel, c(stages)), BinOp("&", BinOp("/", rel, c(stages)), c(1))


# ----------------------------------------------------------------------------------------------------
# A warp-specialized pipeline: SIMT producer of B, TMA producer of A, consumer reads both (seed 2 shape)


def ws_kernel(n: int, start: int, block_n: int = 64) -> Kernel:
    rows = start + n
    A_in = Buffer("A_in", (rows, block_n), "float16", "global")
    B_in = Buffer("B_in", (rows, block_n), "float16", "global")
    B_out = Buffer("B_out", (rows, block_n), "float16", "global")
    A_out = Buffer("A_out", (rows, block_n), "float16", "global")
    A_s = Buffer("A_shared", (block_n,), "float16", "shared")
    B_s = Buffer("B_shared", (block_n,), "float16", "shared")
    ko, i, i2 = Var("ko"), Var("i"), Var("i_1")
    body = (
        For(1, ko, c(start), c(start + n), "pipelined", (
            For(2, i, c(0), c(block_n), "parallel", (Store(3, B_s, (i,), Load(B_in, (ko, i))),)),
            Copy(4, Region(A_in, (ko, c(0)), (1, block_n)), Region.full(A_s)),
            Store(5, B_out, (ko, c(0)), Load(B_s, (c(0),))),
            For(6, i2, c(0), c(block_n), "parallel", (Store(7, A_out, (ko, i2), Load(A_s, (i2,))),)),
        ), num_stages=2),
    )
    return Kernel("ws", (A_in, B_in, B_out, A_out), (1,), (Var("bx"),), 128, (A_s, B_s), body)


def ws_schedule(*, n: int = 4, start: int = 0, stages: int = 2, block_n: int = 64, absolute_parity: bool = False,
                full_count_delta: int = 0, empty_count_delta: int = 0, tx_delta: int = 0,
                release_before_last_read: bool = False, wait_after_first_read: bool = False,
                syncthreads_in_role: bool = False, setmaxnreg: tuple[int, int] = (240, 40),
                unfenced_tma: bool = False, fence_branch: str | None = None) -> Scheduled:
    """The seed-2 pipeline, parametrized. Each keyword plants one bug:

    * ``absolute_parity``: stage/parity from ``ko`` instead of ``ko - start`` (L4 when ``start % stages``
      or the parity differs);
    * ``full_count_delta`` / ``empty_count_delta``: ``arrive_count`` off by that much (L3);
    * ``tx_delta``: ``expect_tx`` bytes off by that much (L3);
    * ``release_before_last_read``: the consumer arrives on ``empty`` before reading ``A_shared`` (L2);
    * ``wait_after_first_read``: TileLang's bug 2 (L1);
    * ``syncthreads_in_role``: a whole-block ``__syncthreads`` inside the consumer role (L7);
    * ``unfenced_tma``: no ``fence.proxy.async`` before the TMA load that overwrites what the consumer read with
      ordinary loads (L6);
    * ``fence_branch="one_side"``: that fence under a branch on tensor data, on its then side only (L6: the runs
      that take the else side load unfenced); ``"both_sides"``: a fence on each side (correct).
    """
    k = ws_kernel(n, start, block_n)
    A_in, B_in, B_out, A_out = k.params
    A_st = Buffer("A_shared", (stages, block_n), "float16", "shared")
    B_st = Buffer("B_shared", (stages, block_n), "float16", "shared")
    ko, i, i2 = Var("ko"), Var("i"), Var("i_1")
    stage, parity = stage_parity(ko, c(start), stages, absolute=absolute_parity)
    consumer, producer, everyone = ThreadRange(0, 128), ThreadRange(128, 128), ThreadRange(0, 256)
    full = MBarrier("full_0", stages, 129 + full_count_delta, "full", ("A_shared", "B_shared"))
    empty = MBarrier("empty_0", stages, 128 + empty_count_delta, "empty", ("A_shared", "B_shared"))
    read_b = Elect(consumer, (Leaf(Store(5, B_out, (ko, c(0)), Load(B_st, (stage, c(0))))),))
    read_a = ThreadLoop((i2,), (block_n,), "partitioned", consumer,
                        (Leaf(Store(7, A_out, (ko, i2), Load(A_st, (stage, i2)))),), sid=6)
    wait = Wait("full_0", stage, parity, sid=1)
    release = Arrive("empty_0", stage)
    head = (read_b, wait) if wait_after_first_read else (wait, read_b)
    tail = (release, read_a) if release_before_last_read else (read_a, release)
    consumer_body = head + tail + ((SyncThreads(everyone),) if syncthreads_in_role else ())
    inc, dec = setmaxnreg
    body = (
        RoleSplit((
            Role("consumer", consumer, ("inc", inc), (SeqLoop(ko, c(start), c(start + n), consumer_body, sid=1),)),
            Role("producer", producer, ("dec", dec), (
                SeqLoop(ko, c(start), c(start + n), (
                    Wait("empty_0", stage, BinOp("^", parity, c(1)), sid=1),
                    ThreadLoop((i,), (block_n,), "partitioned", producer,
                               (Leaf(Store(3, B_st, (stage, i), Load(B_in, (ko, i)))),), sid=2),
                    Arrive("full_0", stage),
                    Elect(producer, (
                        ArriveExpectTx("full_0", stage, block_n * 2 + tx_delta),
                        *(() if unfenced_tma else (FenceProxyAsync(),) if fence_branch is None else (SIf(
                            BinOp(">", Load(A_in, (ko, c(0))), Const(0.0, "float16")), (FenceProxyAsync(),),
                            (FenceProxyAsync(),) if fence_branch == "both_sides" else (), sid=4),)),
                        TmaLoad(Region(A_in, (ko, c(0)), (1, block_n)), Region(A_st, (stage, c(0)), (1, block_n)),
                                "full_0", stage, sid=4),
                    )),
                ), sid=1),
            )),
        ), sid=1),
    )
    return Scheduled(k, 256, (A_st, B_st), (full, empty), body, staged=(("A_shared", stages), ("B_shared", stages)))


# ----------------------------------------------------------------------------------------------------
# SIMT writes then a TMA store (L6)


def tma_store_kernel(n: int = 64) -> Kernel:
    X = Buffer("X", (n,), "float32", "global")
    Y = Buffer("Y", (n,), "float32", "global")
    S = Buffer("S", (n,), "float32", "shared")
    i = Var("i")
    body = (
        For(1, i, c(0), c(n), "parallel", (Store(2, S, (i,), BinOp("*", Load(X, (i,)), Const(2.0, "float32"))),)),
        Copy(3, Region.full(S), Region.full(Y)),
    )
    return Kernel("tma_store", (X, Y), (1,), (Var("bx"),), 128, (S,), body)


def tma_store_schedule(*, fence: bool = True, n: int = 64) -> Scheduled:
    """SIMT stores into shared memory, ``fence.proxy.async``, ``__syncthreads``, one thread's TMA store.
    ``fence=False`` drops the fence (L6)."""
    k = tma_store_kernel(n)
    X, Y = k.params
    S = k.allocs[0]
    i = Var("i")
    everyone = ThreadRange(0, 128)
    body = (
        ThreadLoop((i,), (n,), "partitioned", everyone,
                   (Leaf(Store(2, S, (i,), BinOp("*", Load(X, (i,)), Const(2.0, "float32")))),), sid=1),
    ) + ((FenceProxyAsync(),) if fence else ()) + (
        SyncThreads(everyone),
        Elect(everyone, (TmaStore(Region.full(S), Region.full(Y), sid=3),)),
    )
    return Scheduled(k, 128, (S,), (), body)


# ----------------------------------------------------------------------------------------------------
# Tile ops on all threads: copy, fill, gemm, reduce (no roles)


def tile_ops_kernel(m: int = 16, n: int = 16, kk: int = 16) -> Kernel:
    A = Buffer("A", (m, kk), "float16", "global")
    B = Buffer("B", (kk, n), "float16", "global")
    C = Buffer("C", (m, n), "float32", "global")
    R = Buffer("R", (m,), "float32", "global")
    A_s = Buffer("A_s", (m, kk), "float16", "shared")
    B_s = Buffer("B_s", (kk, n), "float16", "shared")
    C_f = Buffer("C_f", (m, n), "float32", "fragment")
    R_f = Buffer("R_f", (m,), "float32", "fragment")
    body = (
        Copy(1, Region.full(A), Region.full(A_s)),
        Copy(2, Region.full(B), Region.full(B_s)),
        Fill(3, Region.full(C_f), Const(0.0, "float32")),
        Gemm(4, Region.full(A_s), Region.full(B_s), Region.full(C_f)),
        Reduce(5, "sum", C_f, R_f, 1),
        Copy(6, Region.full(C_f), Region.full(C)),
        Copy(7, Region.full(R_f), Region.full(R)),
    )
    return Kernel("tile_ops", (A, B, C, R), (1,), (Var("bx"),), 128, (A_s, B_s, C_f, R_f), body)


def tile_ops_schedule(*, drop_sync_before_gemm: bool = False, threads: int = 128) -> Scheduled:
    """Every tile op cooperatively on all threads, ``__syncthreads`` between dependent ones.
    ``drop_sync_before_gemm`` removes the barrier between the copies and the gemm (a race)."""
    k = tile_ops_kernel()
    s = k.body
    everyone = ThreadRange(0, threads)
    sync = SyncThreads(everyone)

    def op(x):
        return TileOp(x, "simt", everyone)

    body = (op(s[0]), op(s[1]), op(s[2])) + (() if drop_sync_before_gemm else (sync,)) + (
        op(s[3]), sync, op(s[4]), sync, op(s[5]), op(s[6]))
    return Scheduled(k, threads, k.allocs, (), body)


# ----------------------------------------------------------------------------------------------------
# cp.async double buffering on one agent, completion through cp.async.mbarrier.arrive.noinc


def cp_async_kernel(n: int = 3, block_n: int = 32) -> Kernel:
    X = Buffer("X", (n, block_n), "float32", "global")
    Y = Buffer("Y", (n, block_n), "float32", "global")
    S = Buffer("S", (block_n,), "float32", "shared")
    ko, i = Var("ko"), Var("i")
    body = (
        For(1, ko, c(0), c(n), "pipelined", (
            Copy(2, Region(X, (ko, c(0)), (1, block_n)), Region.full(S), prefer="cp_async"),
            For(3, i, c(0), c(block_n), "parallel", (
                Store(4, Y, (ko, i), add(Load(S, (BinOp("%", add(i, c(1)), c(block_n)),)), Const(1.0, "float32"))),
            )),
        ), num_stages=2),
    )
    return Kernel("cp_async", (X, Y), (1,), (Var("bx"),), 64, (S,), body)


def cp_async_schedule(*, n: int = 3, block_n: int = 32, skip_arrive: bool = False) -> Scheduled:
    """Each iteration: every thread cp.asyncs its elements into stage ``ko % 2`` and arrives (noinc) on
    ``full[stage]`` (64 arrivals), waits, reads a *neighbour's* element, then ``__syncthreads`` before the
    stage is refilled. ``skip_arrive`` replaces the noinc arrival by a plain arrive: the data is then not
    ordered before the wait (a race)."""
    k = cp_async_kernel(n, block_n)
    X, Y = k.params
    S = Buffer("S", (2, block_n), "float32", "shared")
    ko, i = Var("ko"), Var("i")
    stage, parity = stage_parity(ko, c(0), 2)
    everyone = ThreadRange(0, 64)
    full = MBarrier("full_0", 2, 64, "full", ("S",))
    arrive = Arrive("full_0", stage) if skip_arrive else CpAsyncArrive("full_0", stage)
    body = (
        SeqLoop(ko, c(0), c(n), (
            TileOp(Copy(2, Region(X, (ko, c(0)), (1, block_n)), Region(S, (stage, c(0)), (1, block_n))),
                   "cp_async", everyone),
            arrive,
            Wait("full_0", stage, parity, sid=1),
            ThreadLoop((i,), (block_n,), "partitioned", everyone, (
                Leaf(Store(4, Y, (ko, i), add(Load(S, (stage, BinOp("%", add(i, c(1)), c(block_n)))),
                                               Const(1.0, "float32")))),
            ), sid=3),
            SyncThreads(everyone),
        ), sid=1),
    )
    return Scheduled(k, 64, (S,), (full,), body, staged=(("S", 2),))


# ----------------------------------------------------------------------------------------------------
# Too much shared memory (L8)


def big_shared_schedule(kib: int = 240) -> Scheduled:
    """A schedule whose one shared buffer has ``kib`` KiB (227 KiB fit on sm_90)."""
    n = kib * 1024 // 4
    X = Buffer("X", (n,), "float32", "global")
    S = Buffer("S", (n,), "float32", "shared")
    everyone = ThreadRange(0, 128)
    k = Kernel("big", (X,), (1,), (Var("bx"),), 128, (S,), (Copy(1, Region.full(X), Region.full(S)),))
    return Scheduled(k, 128, (S,), (), (TileOp(k.body[0], "simt", everyone),))


# ----------------------------------------------------------------------------------------------------
# A two-role handshake on "other" mbarriers, and named barriers per role


def ping_pong(count: int = 64, parity_offset: int = 0, rounds: int = 3, ack: bool = True) -> Scheduled:
    """Role A (threads 0-63) writes X[k] each round and arrives on ``bar``; role B (64-127) waits for
    phase k with parity ``(k + parity_offset) & 1``, copies X[k] to Y[k] and arrives on ``ack``, which A
    waits on (pre-armed parity) before its next round. ``ack=False`` drops the back-pressure: A may then
    complete phases faster than a slow B thread polls, and that thread sees its parity again (ABA)."""
    X = Buffer("X_s", (rounds,), "float32", "shared")
    Inp = Buffer("Inp", (rounds,), "float32", "global")
    Y = Buffer("Y", (rounds,), "float32", "global")
    k = Var("k")
    a, b = ThreadRange(0, 64), ThreadRange(64, 64)
    w = Store(1, X, (k,), Load(Inp, (k,)))
    r = Store(2, Y, (k,), Load(X, (k,)))
    kern = Kernel("pp", (Inp, Y), (1,), (Var("bx"),), 128, (X,), ())
    parity = BinOp("&", BinOp("+", k, Const(parity_offset)), Const(1))
    wait_ack = (Wait("ack", Const(0), BinOp("^", BinOp("&", k, Const(1)), Const(1)), sid=6),) if ack else ()
    send_ack = (Arrive("ack", Const(0)),) if ack else ()
    body = (RoleSplit((
        Role("producer", a, None, (SeqLoop(k, Const(0), Const(rounds), wait_ack + (
            Elect(a, (Leaf(w),)), Arrive("bar", Const(0))), sid=3),)),
        Role("consumer", b, None, (SeqLoop(k, Const(0), Const(rounds), (
            Wait("bar", Const(0), parity, sid=4), Elect(b, (Leaf(r),))) + send_ack, sid=3),)),
    ), sid=5),)
    bars = (MBarrier("bar", 1, count, "full", ("X_s",)),) + ((MBarrier("ack", 1, 64, "empty", ("X_s",)),) if ack else ())
    return Scheduled(kern, 128, (X,), bars, body)


def named_barriers(count_b: int = 64) -> Scheduled:
    """Two roles, each with its own named barrier (ids 1 and 2) between a write and a read by other threads."""
    X = Buffer("X_s", (128,), "float32", "shared")
    Inp = Buffer("Inp", (128,), "float32", "global")
    Y = Buffer("Y", (128,), "float32", "global")
    i = Var("i")
    kern = Kernel("nb", (Inp, Y), (1,), (Var("bx"),), 128, (X,), ())
    roles = []
    for n, (lo, bid, cnt) in enumerate(((0, 1, 64), (64, 2, count_b))):
        tr = ThreadRange(lo, 64)
        w = Store(10 + n, X, (BinOp("+", i, Const(lo)),), Load(Inp, (BinOp("+", i, Const(lo)),)))
        # read the element of the neighbouring thread in the role
        j = BinOp("+", BinOp("%", BinOp("+", i, Const(1)), Const(64)), Const(lo))
        r = Store(20 + n, Y, (BinOp("+", i, Const(lo)),), Load(X, (j,)))
        roles.append(Role(f"consumer{n}", tr, None, (
            ThreadLoop((i,), (64,), "partitioned", tr, (Leaf(w),), sid=30 + n),
            SyncThreads(ThreadRange(lo, cnt), bid),
            ThreadLoop((i,), (64,), "partitioned", tr, (Leaf(r),), sid=40 + n),
        )))
    return Scheduled(kern, 128, (X,), (), (RoleSplit(tuple(roles), sid=1),))


def without(sched: Scheduled, *classes: type) -> Scheduled:
    """``sched`` with every statement of the given classes removed, at any depth (a mutant: ``without(s,
    FenceProxyAsync)`` drops the proxy fences the lowering placed)."""
    import dataclasses

    def strip(body):
        out = []
        for s in body:
            if isinstance(s, classes):
                continue
            kids = {f.name: strip(getattr(s, f.name)) for f in dataclasses.fields(s)
                    if f.name in ("body", "then_body", "else_body")}
            if isinstance(s, RoleSplit):
                kids["roles"] = tuple(dataclasses.replace(r, body=strip(r.body)) for r in s.roles)
            out.append(dataclasses.replace(s, **kids) if kids else s)
        return tuple(out)

    return dataclasses.replace(sched, body=strip(sched.body))
