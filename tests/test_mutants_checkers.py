"""Tests that kill the surviving cosmic-ray mutants of the checkers and the lowering (``egtile/verifier``,
``egtile/sim``, ``egtile/lower/phase.py``, ``codegen/ops``; docs/mutation.md)."""

from __future__ import annotations

import egtile
from egtile.ir import (
    BinOp, Buffer, Const, Elect, For, Kernel, Leaf, Load, Scheduled, SeqLoop, Store, SyncThreads, ThreadRange, Var,
)


def _c(v: int) -> Const:
    return Const(v, "int32")


def _reversed_loop(reverse: bool) -> Scheduled:
    """``for k: S[0] = In[k]; L[0] = S[0]; Out[k] = L[0]`` with the CTA barriers between, scheduled with the
    serial loop run forward or backward (``k = 3 - kk``: the same statements in the opposite order). One elected
    thread writes ``S[0]`` and every thread reads it, so the write's accesses (one footprint, its timestamps
    falling as the program advances) form a class of their own that the order analysis checks pair by pair."""
    In, Out = Buffer("In", (4,), "float32", "global"), Buffer("Out", (4,), "float32", "global")
    S, L = Buffer("S", (1,), "float32", "shared"), Buffer("L", (1,), "float32", "local")
    k, kk = Var("k"), Var("kk")
    w, r, o = (Store(2, S, (_c(0),), Load(In, (k,))), Store(3, L, (_c(0),), Load(S, (_c(0),))),
               Store(4, Out, (k,), Load(L, (_c(0),))))
    kernel = Kernel("rev", (In, Out), (1,), (Var("bx"),), 128, (S, L), (For(1, k, _c(0), _c(4), "serial", (w, r, o)),))
    everyone = ThreadRange(0, 128)
    lo, hi = (BinOp("-", _c(3), kk), BinOp("-", _c(4), kk)) if reverse else (kk, BinOp("+", kk, _c(1)))
    inner = SeqLoop(k, lo, hi, (Elect(everyone, (Leaf(w),)), SyncThreads(everyone), Leaf(r), SyncThreads(everyone),
                                Elect(everyone, (Leaf(o),))), sid=1)
    return Scheduled(kernel, 128, (S, L), (), (SeqLoop(kk, _c(0), _c(4), (inner,)),))


def test_a_loop_run_backward_reorders_its_writes_and_the_verifier_says_so():
    # order.py _class_pair: a class whose timestamps do not grow with the program is checked pair by pair;
    # ``x is not y`` -> ``x <= y`` (and any other break of that enumeration) was reached by no test
    assert egtile.verify(_reversed_loop(False)) == []
    found = {(v.property, tuple(v.sids)) for v in egtile.verify(_reversed_loop(True))}
    assert ("L2", (2, 2)) in found, found   # S[0]'s writes of k = 3, 2, 1, 0: the last one must be k = 3's
    assert any(p == "L1" and s == (2, 3) for p, s in found), found


def _one_stage_pipeline():
    from egtile import language as T

    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=1):
                T.copy(In[k, 0:64], X_s)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[63 - i] + T.float16(1.0)

    return main


def test_phase_expressions_of_each_mode():
    # phase.py: ``mode == "absolute"`` -> ``!=`` (the absolute mode refused, an unknown one accepted) and the
    # single-stage stage ``Const(0)`` -> ``Const(-1)``
    import pytest

    from egtile.lower.phase import phase_exprs

    k, start = Var("k"), Const(2)
    assert phase_exprs(k, start, 1) == (Const(0), BinOp("&", BinOp("-", k, start), Const(1)))
    assert phase_exprs(k, start, 3) == (BinOp("%", BinOp("-", k, start), Const(3)),
                                        BinOp("&", BinOp("/", BinOp("-", k, start), Const(3)), Const(1)))
    assert phase_exprs(k, start, 3, "absolute") == (BinOp("%", k, Const(3)),
                                                    BinOp("&", BinOp("/", k, Const(3)), Const(1)))
    with pytest.raises(ValueError, match="unknown phase mode"):
        phase_exprs(k, start, 3, "relative")
    with pytest.raises(ValueError, match="at least 1 stage"):
        phase_exprs(k, start, 0)


def test_a_one_stage_pipeline_runs_on_the_simulator_as_the_serial_loop():
    import torch

    pf = _one_stage_pipeline()
    from egtile.schedule.driver import optimize

    sched = optimize(pf).scheduled
    assert any(type(x).__name__ == "Wait" for x in egtile.ir.swalk(sched.body))  # it is pipelined
    assert egtile.verify(sched) == []
    g = torch.Generator().manual_seed(3)
    In = torch.randn(4, 64, generator=g).to(torch.float16)
    Out = torch.full((4, 64), float("nan"), dtype=torch.float16)
    egtile.compile(pf, target="sim")(In, Out)
    ref = (In.double().flip(1) + 1.0).to(torch.float16)
    torch.testing.assert_close(Out, ref, rtol=0, atol=0)


def test_a_barrier_index_outside_its_array_is_a_violation(monkeypatch):
    # the same mutant (stage -1 of a one-stage pipeline) ran on the verifier clean: mbarrier stage indices were
    # not range-checked (the simulator refuses it); the planted schedule must now be refused by verify too
    import egtile.rules as R
    import egtile.rules.warp_specialize as ws
    from egtile.schedule.driver import optimize

    real = ws.phase_exprs

    def planted(k, start, stages, mode="normalized"):
        stage, parity = real(k, start, stages, mode)
        return (Const(-1) if stages == 1 else stage), parity

    monkeypatch.setattr(ws, "phase_exprs", planted)
    sched = optimize(_one_stage_pipeline(), rules=R.default()).scheduled
    waits = [x for x in egtile.ir.swalk(sched.body) if type(x).__name__ == "Wait"]
    assert waits and all(w.stage == Const(-1) for w in waits)  # the bug is planted
    found = egtile.verify(sched)
    assert any("out of range for mbarrier array" in v.message for v in found), found
    # sim/mbarrier.py ``0 <= s`` -> ``-1 <= s``: the simulator took stage -1 as the array's last barrier (Python
    # indexing) and ran the planted schedule clean
    import pytest
    import torch

    g = torch.Generator().manual_seed(5)
    In = torch.randn(4, 64, generator=g).to(torch.float16)
    Out = torch.full((4, 64), float("nan"), dtype=torch.float16)
    with pytest.raises(Exception, match="stage -1 is out of range for mbarrier array"):
        egtile.simulate(sched, In, Out)


def test_a_simulated_race_names_the_writer_s_thread_and_statement():
    # sim/memory.py Shadow.read: the earlier access of a read-after-write race ``(w[2], w[3], ...)`` (the
    # writer's thread and statement) -> ``(w[3], w[3], ...)`` named the writer's statement id as its thread
    import torch

    In, Out = Buffer("In", (4,), "float32", "global"), Buffer("Out", (4,), "float32", "global")
    S, L = Buffer("S", (1,), "float32", "shared"), Buffer("L", (1,), "float32", "local")
    w, r, o = (Store(2, S, (_c(0),), Load(In, (_c(1),))), Store(3, L, (_c(0),), Load(S, (_c(0),))),
               Store(4, Out, (_c(0),), Load(L, (_c(0),))))
    kernel = Kernel("race", (In, Out), (1,), (Var("bx"),), 128, (S, L), (w, r, o))
    everyone, writer = ThreadRange(0, 128), ThreadRange(32, 64)
    # thread 32 writes S[0]; every thread reads it with no barrier between (the planted race)
    sched = Scheduled(kernel, 128, (S, L), (), (Elect(writer, (Leaf(w),)), Leaf(r), SyncThreads(everyone),
                                                Elect(everyone, (Leaf(o),))))
    assert any(v.property == "L1" for v in egtile.verify(sched))
    g = torch.Generator().manual_seed(11)
    res = egtile.simulate(sched, torch.randn(4, generator=g), torch.full((4,), float("nan")))
    raw = [x for x in res.races if x.kind == "read-after-write" and x.buffer == "S"]
    assert raw, res.races
    assert all(x.earlier.thread == 32 and x.earlier.sid == 2 and x.later.sid == 3 for x in raw), raw


def test_a_tma_load_from_rows_of_24_bytes_is_refused_by_codegen():
    # codegen/ops/tma.py: the row-stride check over ``row_major(shape)[:-1]`` -> ``[:not 1]`` (no dimension)
    # let a tensor map with a 24-byte global stride through (cuTensorMapEncodeTiled: multiples of 16 bytes)
    from dataclasses import replace

    import pytest
    from seed_schedules import bug2_schedule

    from egtile.codegen import emit
    from egtile.errors import CodegenError
    from egtile.ir import Region, TmaLoad

    s = bug2_schedule()
    G = Buffer("A_in", (4, 12), "float16", "global")   # 12 x 2 bytes per row; the box's 8 x 2 bytes are fine
    kernel = replace(s.kernel, params=(G,) + s.kernel.params[1:])
    load = TmaLoad(Region(G, (_c(0), _c(0)), (1, 8)), Region(s.buffers[0], (_c(0), _c(0)), (1, 8)), "full_0", _c(0),
                   sid=4)
    with pytest.raises(CodegenError, match="row stride that is not a multiple of 16 bytes"):
        emit(replace(s, kernel=kernel, body=(Elect(ThreadRange(0, 256), (load,)),)))


def test_the_code_of_a_vectorized_loop_says_its_width():
    # codegen/ops/control.py: ``if s.vector > 1`` -> ``if not ...`` in the loop's description (the comment and
    # the messages that name the loop): a vectorized loop described as scalar and a scalar one as "1-wide"
    from egtile import language as T
    from egtile.codegen import emit
    from egtile.schedule.driver import optimize

    @T.prim_func
    def main(X: T.Tensor((512,), "float32"), Y: T.Tensor((512,), "float32"), Z: T.Tensor((96,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(512):
                Y[i] = X[i] * 2.0
            for j in T.Parallel(96):
                Z[j] = X[95 - j] + 1.0

    sched = optimize(main).scheduled
    loops = {x.sid: x.vector for x in egtile.ir.swalk(sched.body) if type(x).__name__ == "ThreadLoop"}
    assert sorted(loops.values())[-1] > 1 and 1 in loops.values(), loops  # one vectorized, one not
    src = emit(sched)
    src = src if isinstance(src, str) else getattr(src, "source", str(src))
    for sid, w in loops.items():
        line = next(ln for ln in src.splitlines() if f"T.Parallel (sid {sid}," in ln)
        assert (f"{w}-wide" in line) == (w > 1) and ("-wide" in line) == (w > 1), line


def _two_agents_read_one_write(bump: int, sync_all: bool) -> Scheduled:
    """256 threads in two roles: the producer's thread 0 writes ``S[0]`` and syncs its own 128 threads (named
    barrier 1); the consumer makes ``bump`` elected writes of ``Q`` of its own; after the split every thread
    reads ``S[0]``, with a CTA barrier first only when ``sync_all``. Both agents' reads are one statement with one
    (interned) footprint and no single thread, so they differ only in their agent."""
    from egtile.ir.scheduled import Role, RoleSplit

    In = Buffer("In", (4,), "float32", "global")
    S, Q, L = (Buffer("S", (1,), "float32", "shared"), Buffer("Q", (8,), "float32", "shared"),
               Buffer("L", (1,), "float32", "local"))
    w = Store(2, S, (_c(0),), Load(In, (_c(0),)))
    qs = [Store(10 + j, Q, (_c(j),), Load(In, (_c(1),))) for j in range(bump)]
    r = Store(3, L, (_c(0),), Load(S, (_c(0),)))
    prod_t, cons_t, everyone = ThreadRange(0, 128), ThreadRange(128, 128), ThreadRange(0, 256)
    kernel = Kernel("split", (In,), (1,), (Var("bx"),), 256, (S, Q, L), (w, *qs, r))
    prod = Role("producer", prod_t, None, (Elect(prod_t, (Leaf(w),)), SyncThreads(prod_t, 1)))
    cons = Role("consumer", cons_t, None, tuple(Elect(cons_t, (Leaf(q),)) for q in qs))
    body = (RoleSplit((prod, cons)),) + ((SyncThreads(everyone),) if sync_all else ()) + (Leaf(r),)
    return Scheduled(kernel, 256, (S, Q, L), (), body)


def test_a_read_both_roles_make_is_checked_for_each_role():
    # order.py check_data, the class key ``e.comp if e.comp < n else ("async", e.issuer)`` -> ``not e.comp < n``:
    # both agents' reads of S[0] then fell into one class, whose earliest member (by position, the producer's when
    # the consumer has more events before it) was the only one checked against the write: the consumer's read,
    # which no barrier orders after the producer's write, went unreported
    for bump in (0, 4):
        found = {(v.property, tuple(v.sids)) for v in egtile.verify(_two_agents_read_one_write(bump, False))}
        assert found == {("L1", (2, 3))}, (bump, found)
        assert egtile.verify(_two_agents_read_one_write(bump, True)) == []


def test_covers_decides_affine_inclusion_and_leaves_listed_writes_to_the_painting():
    # valueflow.py _covers / _prog_in: ``isinstance(p, Piece) and ...`` -> ``not isinstance(...)`` (a listed-elements
    # writer raised AttributeError, an affine one never covered) and ``(qb - pb) % ps`` -> ``(qb - pb) - ps`` (a
    # read starting two strides into the write was not covered); both only sent reads to the element-by-element
    # painting, so the contract of the symbolic decision is tested directly
    import numpy as np

    from egtile.verifier.regions import Space, piece
    from egtile.verifier.valueflow import _covers

    space = Space()

    def fp(*dims):
        return space.footprint((16,), [piece((d,), (1,), (), 0, None, None) for d in dims])

    evens = fp((0, 2, 8))                       # 0, 2, ..., 14
    assert _covers(evens, fp((4, 2, 2)))        # 4, 6: two strides in
    assert _covers(evens, fp((0, 4, 4)))        # 0, 4, 8, 12
    assert _covers(evens, fp((6, 1, 1), (14, 1, 1)))
    assert not _covers(evens, fp((3, 2, 2)))    # odd elements
    assert not _covers(evens, fp((4, 1, 2)))    # 4, 5
    assert not _covers(evens, fp((12, 2, 3)))   # 12, 14, 16: past the write
    assert _covers(fp((0, 1, 16)), fp((5, 3, 4)))
    listed = space.footprint((16,), [space.points((16,), np.array([4, 6]), np.array([-1, -1]))])
    assert not _covers(listed, fp((4, 2, 2)))   # listed elements: not decided symbolically
    assert not _covers(fp((0, 1, 16)), listed)


def test_a_write_after_another_thread_s_unordered_atomic_is_a_simulated_race():
    # sim/memory.py _check_overwrite: an earlier atomic by another thread ``s != a.slot and vc[s] < c`` ->
    # ``s == a.slot`` (only the writer's own atomics, which are always ordered) missed the race
    import torch

    from egtile.ir import AtomicAdd

    In, Out = Buffer("In", (4,), "float32", "global"), Buffer("Out", (4,), "float32", "global")
    S = Buffer("S", (1,), "float32", "shared")
    init, at, w, o = (Store(1, S, (_c(0),), Load(In, (_c(0),))), AtomicAdd(2, S, (_c(0),), Load(In, (_c(1),))),
                      Store(3, S, (_c(0),), Load(In, (_c(2),))), Store(4, Out, (_c(0),), Load(S, (_c(0),))))
    kernel = Kernel("atomic_race", (In, Out), (1,), (Var("bx"),), 128, (S,), (init, at, w, o))
    everyone = ThreadRange(0, 128)

    def sched(barrier: bool) -> Scheduled:
        # thread 0 adds to S[0]; thread 32 then overwrites it, with a CTA barrier between only when ``barrier``
        mid = (SyncThreads(everyone),) if barrier else ()
        return Scheduled(kernel, 128, (S,), (), (Elect(everyone, (Leaf(init),)), SyncThreads(everyone),
                                                 Elect(everyone, (Leaf(at),)), *mid,
                                                 Elect(ThreadRange(32, 96), (Leaf(w),)), SyncThreads(everyone),
                                                 Elect(everyone, (Leaf(o),))))

    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, generator=g)
    clean = egtile.simulate(sched(True), x, torch.full((4,), float("nan")))
    assert not clean.races and torch.equal(clean.outputs[1][0:1], x[2:3])
    res = egtile.simulate(sched(False), x, torch.full((4,), float("nan")))
    waw = [r for r in res.races if r.kind == "write-after-write" and r.buffer == "S"]
    assert waw and all(r.earlier.thread == 0 and r.earlier.sid == 2 and r.later.thread == 32 and r.later.sid == 3
                       for r in waw), res.races
