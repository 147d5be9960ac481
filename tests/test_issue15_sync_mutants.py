"""CTA-barrier placement (``egtile.lower.sync``): tests that kill the mutants cosmic-ray found surviving
(``docs/mutation.md``). Each kernel has exactly one place where a barrier is needed (or exactly one where
it must not be), so a weakened or strengthened placement shows as a wrong barrier count, and every
schedule is also verified and simulated against the interpreter (``schedule_kernels.check_schedule``).
"""

from __future__ import annotations

import schedule_kernels as K

from egtile import language as T
from egtile.ir import (
    AddressOf, BinOp, Buffer, Const, Elect, Extern, FenceProxyAsync, Leaf, Load, Region, RoleSplit, SeqLoop, SIf,
    Store, SyncThreads, ThreadLoop, ThreadRange, TmaStore, Var, swalk,
)
from egtile.lower.sync import place_syncs
from egtile.schedule.driver import optimize


def _kinds(stmts):
    return [type(x).__name__ for x in stmts]


def test_a_conditional_store_in_a_parallel_loop_is_an_access():
    """The access summary of a ``T.If`` is its condition's reads *and* its branches' accesses (mutants:
    ``|`` -> ``&``/``-``, ``then + else`` -> ``then - else``): the stores under the condition need the
    barrier before the mirrored read."""

    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), Out: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            S = T.alloc_shared((64,), "float32")
            for i in T.Parallel(64):
                with T.If(i < 40):
                    S[i] = A[i] + 1.0
                with T.Else():
                    S[i] = A[i] * 3.0
            for i in T.Parallel(64):
                Out[i] = S[63 - i]

    r = optimize(main)
    assert _kinds(r.scheduled.body) == ["ThreadLoop", "SyncThreads", "ThreadLoop"]
    K.check_schedule(r.scheduled, ("Out",))


def test_accesses_in_a_serial_loop_are_pending_after_it():
    """After a serial loop, what its body left pending still needs a barrier before a conflicting access
    (mutant: ``pending = start | end`` -> ``start & end``)."""

    @T.prim_func
    def main(A: T.Tensor((2, 64), "float32"), Out: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            S = T.alloc_shared((64,), "float32")
            for k in T.serial(2):
                for i in T.Parallel(64):
                    S[i] = A[k, i] * 2.0
            for i in T.Parallel(64):
                Out[i] = S[63 - i]

    r = optimize(main)
    body = r.scheduled.body
    loop = next(i for i, x in enumerate(body) if isinstance(x, SeqLoop))
    assert any(isinstance(x, SyncThreads) for x in body[loop + 1:]), _kinds(body)
    K.check_schedule(r.scheduled, ("Out",))


def test_accesses_of_either_branch_of_a_uniform_if_are_pending_after_it():
    """After a block-uniform ``T.If``, the accesses of both branches are pending (mutant: ``pt | pe`` ->
    ``pt & pe``): the branches write ``S`` through different thread mappings, the read after them
    needs a barrier in every block."""

    @T.prim_func
    def main(A: T.Tensor((2, 64), "float32"), Out: T.Tensor((2, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((64,), "float32")
            with T.If(bx == 0):
                for i in T.Parallel(64):
                    S[i] = A[bx, i] + 1.0
            with T.Else():
                for i in T.Parallel(64):
                    S[63 - i] = A[bx, 63 - i] * 2.0
            for i in T.Parallel(64):
                Out[bx, i] = S[63 - i]

    r = optimize(main)
    body = r.scheduled.body
    at = next(i for i, x in enumerate(body) if isinstance(x, SIf))
    assert any(isinstance(x, SyncThreads) for x in body[at + 1:]), _kinds(body)
    K.check_schedule(r.scheduled, ("Out",))


def test_an_access_both_branches_of_a_uniform_if_make_is_pending_after_it():
    """Both branches write ``S[i]`` through the same thread mapping: that write is pending after the
    ``T.If`` (mutant: ``pt | pe`` -> ``pt - pe``, which drops what both branches do)."""

    @T.prim_func
    def main(A: T.Tensor((2, 64), "float32"), Out: T.Tensor((2, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((64,), "float32")
            with T.If(bx == 0):
                for i in T.Parallel(64):
                    S[i] = A[bx, i] + 1.0
            with T.Else():
                for i in T.Parallel(64):
                    S[i] = A[bx, i] * 2.0
            for i in T.Parallel(64):
                Out[bx, i] = S[63 - i]

    r = optimize(main)
    body = r.scheduled.body
    at = next(i for i, x in enumerate(body) if isinstance(x, SIf))
    assert any(isinstance(x, SyncThreads) for x in body[at + 1:]), _kinds(body)
    K.check_schedule(r.scheduled, ("Out",))


def test_a_gathered_index_has_no_owner():
    """An access whose region the analysis cannot bound (an index read from memory) belongs to no thread
    (mutant: ``r is None or ...`` -> ``and``, which then reads the missing region's extents)."""

    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), Idx: T.Tensor((64,), "int32"), Out: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            S = T.alloc_shared((64,), "float32")
            for i in T.Parallel(64):
                S[i] = A[i] + 1.0
            for i in T.Parallel(64):
                Out[i] = S[Idx[i]]

    r = optimize(main)
    assert _kinds(r.scheduled.body) == ["ThreadLoop", "SyncThreads", "ThreadLoop"]


def test_an_index_independent_of_the_loop_keeps_the_owner():
    """``S[0, i]`` then ``S[0, i]`` in partitioned loops of the same shape: element ``(0, i)`` is thread
    ``i``'s both times, no barrier (mutant: ``names & free_vars`` -> ``names - free_vars`` drops the owner
    of every access with a constant index, adding a barrier)."""

    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), Out: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            S = T.alloc_shared((2, 64), "float32")
            for i in T.Parallel(64):
                S[0, i] = A[i] + 1.0
            for i in T.Parallel(64):
                Out[i] = S[0, i] * 2.0

    r = optimize(main)
    assert _kinds(r.scheduled.body) == ["ThreadLoop", "ThreadLoop"]
    K.check_schedule(r.scheduled, ("Out",))


def _tl(i, body, sid):
    return ThreadLoop((i,), (64,), "partitioned", ThreadRange(0, 128), body, sid=sid)


def test_a_tma_store_only_reads_its_shared_source():
    """A TMA store reads its shared source (mutant: recorded as a write): the generic writes before it need
    the barrier, another thread's read of the source after it does not."""
    S = Buffer("S", (64,), "float32", "shared")
    X, Y, Out = (Buffer(n, (64,), "float32", "global") for n in ("X", "Y", "Out"))
    i, i2 = Var("i"), Var("i2")
    everyone = ThreadRange(0, 128)
    body = (
        _tl(i, (Leaf(Store(2, S, (i,), Load(X, (i,)))),), 1),
        # no fence here: the placement puts fence.proxy.async with the barrier that orders the generic
        # writes before the async-proxy read (egtile.lower.sync._barrier)
        Elect(everyone, (TmaStore(Region.full(S), Region.full(Y), sid=3),)),
        _tl(i2, (Leaf(Store(5, Out, (i2,), Load(S, (BinOp("-", Const(63), i2),)))),), 4),
    )
    placed = place_syncs(body, everyone)
    assert _kinds(placed) == ["ThreadLoop", "FenceProxyAsync", "SyncThreads", "Elect", "ThreadLoop"]


def test_an_access_through_a_pointer_belongs_to_no_thread():
    """An extern handed ``T.address_of(C[i])`` touches all of ``C`` as far as the analysis knows
    (``region=None``): no owner, so a barrier after the partitioned stores of ``C`` (mutant: ``r is None
    or ...`` -> ``and``, which reads the missing region)."""
    C = Buffer("C", (64,), "int32", "shared")
    i, i2 = Var("i"), Var("i2")
    body = (
        _tl(i, (Leaf(Store(2, C, (i,), Const(0))),), 1),
        _tl(i2, (Leaf(Extern(4, "atomic_inc", "void", (AddressOf(Load(C, (i2,))),))),), 3),
    )
    assert _kinds(place_syncs(body, ThreadRange(0, 128))) == ["ThreadLoop", "SyncThreads", "ThreadLoop"]


def test_a_role_synchronizes_its_own_threads_with_a_named_barrier():
    """Inside a warp-specialized role a CTA barrier is ``bar.sync`` over the role's threads with the role's
    id (1 for the first role, 2 for the second), never id 0, which is the whole block's (mutant: id
    ``i + 1`` -> ``i + 0``)."""

    @T.prim_func
    def main(A: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            W_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[k, 0:64], X_s)
                for i in T.Parallel(64):
                    W_s[i] = X_s[i] * T.float16(2.0)
                for i in T.Parallel(64):
                    Out[k, i] = W_s[63 - i]

    r = optimize(main)
    (split,) = [x for x in swalk(r.scheduled.body) if isinstance(x, RoleSplit)]
    named = [(role.name, x) for role in split.roles for x in swalk(role.body) if isinstance(x, SyncThreads)]
    assert named, "the consumer's mirrored read needs a barrier inside its role"
    for i, role in enumerate(sorted(split.roles, key=lambda r: r.threads.begin)):
        for x in swalk(role.body):
            if isinstance(x, SyncThreads):
                assert x.threads == role.threads and x.barrier_id == i + 1, (role.name, x)
    K.check_schedule(r.scheduled, ("Out",))


def test_cooperative_tile_ops_of_one_shape_keep_their_owner():
    """A cooperative tile op gives element ``e`` of its destination to rank ``e % count``, and an equally
    shaped source has the same owner: copy ``A -> S`` then ``S -> B`` need no barrier, a transposed read
    does (mutants: the ``isinstance(dst, Region)`` test negated, ``a.region == r`` -> ``!=``)."""
    from egtile.ir import Copy, TileOp

    A, B = Buffer("A", (64,), "float32", "global"), Buffer("B", (64,), "float32", "global")
    S = Buffer("S", (64,), "float32", "shared")
    everyone = ThreadRange(0, 128)

    def op(sid, src, dst):
        return TileOp(Copy(sid, src, dst), "simt", everyone)

    same = (op(1, Region.full(A), Region.full(S)), op(2, Region.full(S), Region.full(B)))
    assert _kinds(place_syncs(same, everyone)) == ["TileOp", "TileOp"]
    half = (op(1, Region.full(A), Region.full(S)),
            op(2, Region(S, (Const(32),), (32,)), Region(B, (Const(0),), (32,))))
    assert _kinds(place_syncs(half, everyone)) == ["TileOp", "SyncThreads", "TileOp"]


def test_a_tma_store_writes_its_global_destination():
    """The global write of a TMA store is an access (mutants: recorded as a read, or dropped): a later read
    of the destination by other threads is ordered after it by a barrier."""
    S = Buffer("S", (64,), "float32", "shared")
    Y, Out = Buffer("Y", (64,), "float32", "global"), Buffer("Out", (64,), "float32", "global")
    i = Var("i")
    everyone = ThreadRange(0, 128)
    body = (
        Elect(everyone, (TmaStore(Region.full(S), Region.full(Y), sid=1),)),
        _tl(i, (Leaf(Store(3, Out, (i,), Load(Y, (i,)))),), 2),
    )
    assert _kinds(place_syncs(body, everyone)) == ["Elect", "SyncThreads", "ThreadLoop"]
