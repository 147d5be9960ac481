"""Barrier placement: sink-wait and hoist-release, the positions the e-graph holds, and what extraction picks."""

from __future__ import annotations

import egtile.rules as R
import schedule_kernels as K
from seed_schedules import bug1_kernel, bug2_kernel, bug2_schedule

from egtile import language as T
from egtile.schedule.schema import Block, Stmt
from egtile.ir import (
    Arrive,
    Elect,
    Leaf,
    RoleSplit,
    SyncThreads,
    ThreadLoop,
    Wait,
    swalk,
)
from egtile.schedule.driver import optimize, saturate


def _consumer_body(result):
    (split,) = [x for x in swalk(result.scheduled.body) if isinstance(x, RoleSplit)]
    (loop,) = split.roles[0].body
    return loop.body


def _caught(scheduled, prop: str, sim_text: str) -> None:
    """The verifier reports ``prop`` and the simulator a report containing ``sim_text``."""
    from egtile.sim import simulate
    from egtile.verifier import verify

    assert any(v.property == prop for v in verify(scheduled)), [str(v) for v in verify(scheduled)]
    res = simulate(scheduled, *K.random_inputs(scheduled.kernel, ("B_out", "A_out")), policy="adversarial")
    assert any(sim_text in e for e in res.errors()), res.errors()[:3]


def _positions(body):
    """(index of the full wait, index of the empty release) among the consumer's statements."""
    kinds = []
    for x in body:
        match x:
            case Wait():
                kinds.append("W")
            case Arrive():
                kinds.append("R")
            case _:
                kinds.append("s")
    return kinds.index("W"), kinds.index("R") - 1


def test_bug2_wait_precedes_the_read_of_the_simt_produced_buffer():
    r = optimize(bug2_kernel())
    body = _consumer_body(r)
    assert isinstance(body[0], Wait) and body[0].barrier == "full_0"
    assert isinstance(body[1], Elect) and isinstance(body[1].body[0], Leaf) and body[1].body[0].stmt.sid == 5
    assert isinstance(body[-1], Arrive) and body[-1].barrier == "empty_0"
    # Structurally the seed's hand-written correct schedule.
    assert body == bug2_schedule().body[0].roles[0].body[0].body
    d = next(d for d in r.decisions if d.rule == "sink-wait")
    assert "B_shared" in d.reason and "no-read-of-guarded" in d.reason


def test_the_wait_from_tma_only_mutant_reads_before_the_wait_and_the_simulator_sees_the_race():
    r = optimize(bug2_kernel(), rules=R.mutant("wait-from-tma-only"))
    body = _consumer_body(r)
    assert isinstance(body[0], Elect) and isinstance(body[1], Wait)
    _caught(r.scheduled, "L1", "read-after-write race on B_shared")


def test_cp_async_variant_orders_wait_then_cp_async_read_then_tma_read():
    r = optimize(K.cp_async_variant())
    body = _consumer_body(r)
    assert isinstance(body[0], Wait)
    assert isinstance(body[1], Elect) and "B_shared" in str(body[1].body[0].stmt)
    assert isinstance(body[2], ThreadLoop) and "A_shared" in str(body[2].body[0].stmt)
    K.check_schedule(r.scheduled, ("B_out", "A_out"))


def _consumer_class(s, loop: int):
    body = s.encoding.terms[loop]
    from egglog import get_callable_args

    lst = get_callable_args(body)[1]
    return Block.cons(Stmt.wait_full(loop), Block.consumers(loop, lst, lst))


def _arrangement(terms, loop: int, w: int, q: int):
    items = list(terms)
    items.insert(q, Stmt.release_empty(loop))
    items.insert(w, Stmt.wait_full(loop))
    out = Block.nil()
    for t in reversed(items):
        out = Block.cons(t, out)
    return out


def test_the_egraph_holds_exactly_the_legal_wait_and_release_positions():
    free = 3
    f = K.late_read(free)
    s = saturate(f)
    loop = 1
    from egtile.analysis import body_facts

    stmts = [f.sid for f in body_facts(s.encoding.ctx.stmts[loop]).consumers]
    terms = [s.encoding.terms[sid] for sid in sorted(stmts)]
    reader = free  # the T.Parallel reading X_s sits after the `free` statements
    root = _consumer_class(s, loop)
    for w in range(len(terms) + 1):
        for q in range(w, len(terms) + 1):
            legal = w <= reader and q >= reader + 1
            assert s.holds(_arrangement(terms, loop, w, q), root) == legal, (w, q)
    r = optimize(f)
    assert _positions(_consumer_body(r)) == (reader, reader + 1)
    K.check_schedule(r.scheduled, ("Out", "Side"))


def test_removing_the_motion_rules_leaves_the_safe_extremes():
    f = K.late_read(3)
    body = _consumer_body(optimize(f, rules=R.builtin().without("sink-wait")))
    assert isinstance(body[0], Wait)
    body = _consumer_body(optimize(f, rules=R.builtin().without("hoist-release")))
    assert isinstance(body[-1], Arrive)


def test_release_before_last_read_mutant_releases_too_early_and_races():
    r = optimize(bug2_kernel(), rules=R.mutant("release-before-last-read"))
    body = _consumer_body(r)
    assert isinstance(body[0], Wait) and isinstance(body[1], Arrive)
    _caught(r.scheduled, "L2", "race")


def test_the_wait_passes_an_extern_on_an_unguarded_buffer_and_a_pointer_into_a_produced_tile_blocks_ws():
    # bug 1: atomic_inc(&counters[i]) touches counters, not the TMA-loaded A_shared: the wait may pass it.
    r = optimize(bug1_kernel())
    body = [x for x in _consumer_body(r) if not isinstance(x, SyncThreads)]
    assert isinstance(body[0], ThreadLoop) and isinstance(body[1], Wait)

    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            T.import_source('extern "C" __device__ void touch(void* p) {}\n')
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[k, 0:64], X_s)
                T.call_extern("void", "touch", T.address_of(X_s[0]))
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]

    # A pointer into the produced tile may be written through: no warp specialization at all, so no
    # wait can be misplaced around it.
    r = optimize(main)
    assert not any(isinstance(x, RoleSplit) for x in swalk(r.scheduled.body))
    rej = next(x for x in r.rejected if x.rule == "pipeline-warp-specialize")
    assert "ws-no-consumer-writes-producer-buffer" in rej.failed and "X_s" in rej.reason
