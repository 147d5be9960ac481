"""The static verifier (egtile.verify): correct schedules pass, each planted bug names its property."""

from __future__ import annotations

from dataclasses import replace

import pytest
from seed_schedules import bug1_schedule, bug2_schedule
from soundness import handbuilt as hb

from egtile.ir import (
    Buffer, Const, Elect, Kernel, Leaf, Load, Role, RoleSplit, Scheduled, Store, SyncThreads, ThreadRange, TmaLoad,
    Var,
)
from egtile.verifier import PROPERTIES, Violation, verify


def props(vs: list[Violation]) -> set[str]:
    return {v.property for v in vs}


def only(vs: list[Violation], prop: str) -> list[Violation]:
    return [v for v in vs if v.property == prop]


# ----------------------------------------------------------------------------------------------------
# Correct schedules


@pytest.mark.parametrize("sched", [
    bug1_schedule(), bug2_schedule(), bug2_schedule(n=1), bug2_schedule(n=7),
    hb.ws_schedule(), hb.ws_schedule(start=1, n=5), hb.ws_schedule(start=3, n=6, stages=3), hb.ws_schedule(n=0),
    hb.ws_schedule(n=1), hb.ws_schedule(n=1, start=5), hb.ws_schedule(n=2, stages=4),
    hb.tma_store_schedule(), hb.tile_ops_schedule(), hb.cp_async_schedule(), hb.cp_async_schedule(n=1),
    hb.ping_pong(), hb.named_barriers(),
], ids=lambda s: f"{s.kernel.name}")
def test_correct_schedules_have_no_violation(sched):
    assert verify(sched) == []


# ----------------------------------------------------------------------------------------------------
# The seeds' bugs


def test_seed_bug1_replicated_extern_is_L5():
    vs = verify(bug1_schedule(replicate_extern=True))
    assert "L5" in props(vs)
    # every consumer thread also touches every counter in every round: unordered across threads (L1)
    assert props(vs) <= {"L1", "L5"}
    v = only(vs, "L5")[0]
    assert v.buffer == "counters" and 4 in v.sids and 5 in v.sids
    assert "address_of" in v.message and "partitioned" in v.message


def test_seed_bug2_wait_after_read_is_L1():
    vs = verify(bug2_schedule(wait_after_first_read=True))
    assert props(vs) == {"L1"}
    v = vs[0]
    assert v.buffer == "B_shared" and set(v.sids) == {3, 5} and v.stage in (0, 1)
    assert "full_0" in v.message


# ----------------------------------------------------------------------------------------------------
# One planted bug per property


@pytest.mark.parametrize("delta", [-1, 1])
def test_arrive_count_off_by_one_is_L3(delta):
    vs = verify(hb.ws_schedule(full_count_delta=delta))
    assert props(vs) == {"L3"}
    assert all(v.barrier == "full_0" for v in vs)
    assert ("completes early" if delta < 0 else "never completes") in vs[0].message
    assert "129 arrivals" in vs[0].message and f"arrive_count is {129 + delta}" in vs[0].message


def test_a_tma_load_over_ordinary_reads_without_a_proxy_fence_is_L6():
    # the consumer reads A_shared with ordinary loads, releases it, and the producer's next TMA load overwrites it
    # through the async proxy: without a fence.proxy.async on that path the load may land first (PTX ISA 9.7.13.3.2)
    from egtile.verifier import reference

    vs = verify(hb.ws_schedule(unfenced_tma=True))
    assert props(vs) == {"L6"} and {v.buffer for v in vs} == {"A_shared"}, vs
    assert "overwritten through the async proxy by the TMA load" in vs[0].message
    assert {(v.property, v.sids, v.buffer) for v in reference.verify(hb.ws_schedule(unfenced_tma=True, n=3))} == \
        {(v.property, v.sids, v.buffer) for v in verify(hb.ws_schedule(unfenced_tma=True, n=3))}


def test_release_count_off_by_one_is_L3():
    vs = verify(hb.ws_schedule(empty_count_delta=-1))
    assert props(vs) == {"L3"} and vs[0].barrier == "empty_0"


def test_expect_tx_bytes_must_equal_delivered_bytes():
    vs = verify(hb.ws_schedule(tx_delta=-2))
    assert props(vs) == {"L3"}
    assert "expects 126 transaction bytes" in vs[0].message and "deliver 128" in vs[0].message


@pytest.mark.parametrize("start", [1, 2, 3])
def test_parity_from_absolute_index_with_nonzero_start_is_L4(start):
    vs = verify(hb.ws_schedule(start=start, n=5, absolute_parity=True))
    assert "L4" in props(vs)
    l4 = only(vs, "L4")[0]
    assert l4.barrier in ("full_0", "empty_0") and "parity" in l4.message
    # with start 0 the absolute index is the normalized one: nothing to report
    assert verify(hb.ws_schedule(start=0, n=5, absolute_parity=True)) == []


def test_release_before_last_read_is_L2():
    vs = verify(hb.ws_schedule(release_before_last_read=True))
    assert props(vs) == {"L2"}
    v = vs[0]
    assert v.buffer == "A_shared" and set(v.sids) == {4, 7}


def test_missing_barrier_between_cooperative_tile_ops_is_L1():
    # the copies into A_s/B_s and the gemm run on the same 128 threads, element by element on
    # different threads: without __syncthreads the gemm's reads are not ordered after the copies
    vs = verify(hb.tile_ops_schedule(drop_sync_before_gemm=True))
    l1 = only(vs, "L1")
    assert {v.buffer for v in l1} == {"A_s", "B_s"}
    assert all(set(v.sids) in ({1, 4}, {2, 4}) for v in l1)


def test_missing_proxy_fence_is_L6():
    vs = verify(hb.tma_store_schedule(fence=False))
    assert props(vs) == {"L6"}
    assert vs[0].buffer == "S" and set(vs[0].sids) == {2, 3}


def test_syncthreads_inside_a_role_is_L7():
    vs = verify(hb.ws_schedule(syncthreads_in_role=True))
    l7 = only(vs, "L7")
    assert l7 and any("inside role 'consumer'" in v.message for v in l7)


def test_too_much_shared_memory_is_L8():
    vs = verify(hb.big_shared_schedule(kib=240))
    assert props(vs) == {"L8"} and vs[0].buffer == "S" and "232448" in vs[0].message
    assert verify(hb.big_shared_schedule(kib=200)) == []


# ----------------------------------------------------------------------------------------------------
# More L5, L7, L8


def test_tma_issued_by_every_thread_is_L5():
    s = hb.ws_schedule()
    # unwrap the producer's Elect: every producer thread issues the TMA load
    rs = s.body[0]
    prod = rs.roles[1]
    loop = prod.body[0]
    elect = loop.body[3]
    assert isinstance(elect, Elect)
    loop2 = replace(loop, body=loop.body[:3] + elect.body)
    rs2 = replace(rs, roles=(rs.roles[0], replace(prod, body=(loop2,))))
    vs = verify(replace(s, body=(rs2,)))
    assert "L5" in props(vs)
    assert any(isinstance(x, TmaLoad) for x in elect.body)
    assert "L3" in props(vs)  # 128 expect_tx arrivals and 128 loads per phase


def test_nonlocal_leaf_on_every_thread_is_L5():
    X = Buffer("X", (4,), "float32", "global")
    st = Store(1, X, (Const(0),), Const(1.0, "float32"))
    k = Kernel("k", (X,), (1,), (Var("bx"),), 64, (), (st,))
    vs = verify(Scheduled(k, 64, (), (), (Leaf(st),)))
    assert props(vs) == {"L5"} and vs[0].sids == (1,) and vs[0].buffer == "X"
    assert verify(Scheduled(k, 64, (), (), (Elect(ThreadRange(0, 64), (Leaf(st),)),))) == []


def test_waiter_lapped_without_back_pressure_is_L4():
    vs = verify(hb.ping_pong(ack=False))
    assert props(vs) == {"L4"} and all(v.barrier == "bar" for v in vs)
    assert any("phase 2" in v.message for v in vs)  # the lapped wait
    # and the producer's next arrival by all its threads, which no barrier orders after the previous phase's
    # arrivals of its other warps: a fast warp's arrival may be counted in the phase a slow warp has not arrived on
    assert any("belongs to phase 1, but nothing orders it after phase 0" in v.message for v in vs)


def test_named_barrier_count_beyond_the_role_is_L7():
    vs = verify(hb.named_barriers(count_b=96))
    assert props(vs) == {"L7"} and "consumer1" in vs[0].message


def test_named_barrier_rules_are_L7():
    X = Buffer("X", (4,), "float32", "global")
    k = Kernel("k", (X,), (1,), (Var("bx"),), 128, (), ())
    odd = Scheduled(k, 128, (), (), (RoleSplit((Role("consumer", ThreadRange(0, 128), None,
                                                    (SyncThreads(ThreadRange(0, 100), 1),)),)),))
    assert any("multiple of 32" in v.message for v in only(verify(odd), "L7"))
    in_elect = Scheduled(k, 128, (), (), (Elect(ThreadRange(0, 128), (SyncThreads(ThreadRange(0, 128)),)),))
    assert any("Elect" in v.message for v in only(verify(in_elect), "L7"))
    bad_id = Scheduled(k, 128, (), (), (SyncThreads(ThreadRange(0, 128), 16),))
    assert any("outside 0..15" in v.message for v in only(verify(bad_id), "L7"))
    ok = Scheduled(k, 128, (), (), (SyncThreads(ThreadRange(0, 128)),))
    assert verify(ok) == []


@pytest.mark.parametrize("inc, dec, needle", [
    (236, 40, "multiple of 8"), (264, 40, "multiple of 8"), (240, 16, "multiple of 8"),
])
def test_setmaxnreg_values_are_L8(inc, dec, needle):
    vs = verify(hb.ws_schedule(setmaxnreg=(inc, dec)))
    assert props(vs) == {"L8"} and needle in vs[0].message


def test_register_budget_is_L8():
    vs = verify(hb.ws_schedule(setmaxnreg=(256, 256)))  # 256 threads x 256 registers = 65536: fits
    assert vs == []
    s = hb.ws_schedule(setmaxnreg=(256, 256))
    rs = s.body[0]
    wide = replace(rs, roles=(rs.roles[0], replace(rs.roles[1], setmaxnreg=("inc", 256))) + (
        Role("consumer2", ThreadRange(256, 128), ("inc", 240), ()),))
    vs = verify(replace(s, threads=384, body=(wide,)))
    assert any("registers" in v.message for v in only(vs, "L8"))


def test_threads_per_block_is_L8():
    X = Buffer("X", (4,), "float32", "global")
    k = Kernel("k", (X,), (1,), (Var("bx"),), 128, (), ())
    assert any("1024" in v.message for v in only(verify(Scheduled(k, 2048, (), (), ())), "L8"))


# ----------------------------------------------------------------------------------------------------
# Reports


def test_violation_reports_are_readable_and_deduplicated():
    vs = verify(bug2_schedule(wait_after_first_read=True, n=8))
    assert len(vs) == len({v.key() for v in vs})
    text = str(vs[0])
    assert text.startswith("L1 read after write") and "B_shared" in text and "sid 3, 5" in text
    assert set(PROPERTIES) == {f"L{i}" for i in range(1, 12)}


def test_verify_rejects_non_schedules():
    with pytest.raises(TypeError, match="ir.Scheduled"):
        verify(bug2_schedule().kernel)


def test_unevaluable_loop_bound_is_reported():
    s = hb.ws_schedule()
    rs = s.body[0]
    cons = rs.roles[0]
    loop = cons.body[0]
    A_s = s.buffers[0]
    bad = replace(loop, stop=Load(A_s, (Const(0), Const(0))))
    vs = verify(replace(s, body=(replace(rs, roles=(replace(cons, body=(bad,)), rs.roles[1])),)))
    # a bound read from memory is a runtime trip count (egtile.verifier.tripcount); here only the consumer's copy
    # of the loop reads it, so producer and consumer disagree on the count
    assert any(v.property == "L7" and "not agree on the trip count" in v.message for v in vs)


def test_same_thread_still_sees_a_neighbours_element_among_merged_reads():
    """The guard of the same_thread refinement (only the elements both footprints touch count): reads of S[2i],
    S[2i + 1], S[2i + 3] after a loop writing S[2i + 1], with the CTA barrier between the loops removed, read thread
    i + 1's element: an L1 report, and a race on the simulator."""
    import dataclasses

    import torch

    import egtile
    from egtile import language as T
    from egtile.ir import SyncThreads

    @T.prim_func
    def main(X: T.Tensor((130,), "float32"), Y: T.Tensor((63,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            S = T.alloc_shared((130,), "float32")
            T.copy(X, S)
            for i in T.Parallel(64):
                S[2 * i + 1] = X[i] * 2.0
            for i in T.Parallel(63):
                Y[i] = S[2 * i] + S[2 * i + 1] + S[2 * i + 3]

    sched = egtile.optimize(main).scheduled
    assert not verify(sched)
    last = max(k for k, s in enumerate(sched.body) if isinstance(s, SyncThreads))
    bad = dataclasses.replace(sched, body=sched.body[:last] + sched.body[last + 1:])
    assert any(v.property == "L1" and v.buffer == "S" for v in verify(bad))
    assert not egtile.simulate(bad, torch.randn(130), torch.zeros(63)).ok


def test_a_staged_store_moved_above_its_staging_copy_is_refused():
    # both implement one T.copy (one timestamp), so either barrier order passed; the staging tile is the schedule's
    # own buffer, written before it is read (a soundness tester's mutant, 2026-12-07)
    import egtile
    from egtile import language as T
    from egtile.ir import Elect

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((64, 64), "float16")
            Bs = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, acc, clear_accum=True)
            T.copy(acc, C)

    sched = egtile.optimize(main).scheduled
    assert verify(sched) == []
    body = list(sched.body)
    store = max(n for n, x in enumerate(body) if isinstance(x, Elect))
    staged = {b.name for b in sched.buffers} - {b.name for b in (*main.kernel.params, *main.kernel.allocs)}
    assert staged, "the T.copy to C is expected to leave through a staged TMA store"
    body.insert(0, body.pop(store))
    found = verify(replace(sched, body=tuple(body)))
    assert any(v.property == "L1" and v.buffer in staged and "introduced" in v.message for v in found), found
