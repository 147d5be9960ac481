"""Lowering of extracted terms to ir.Scheduled (egtile.lower.driver, irmap)."""

from __future__ import annotations

import egtile.rules as R
import pytest
import schedule_kernels as K
from seed_schedules import bug1_kernel, bug2_kernel

from egtile.schedule.decode import Node
from egtile.schedule.decision import decision_table
from egtile.schedule.facts import FactContext
from egtile.lower.irmap import restage, substitute
from egtile.lower.driver import lower
from egtile.errors import ScheduleError
from egtile.ir import (
    BinOp,
    Buffer,
    Const,
    Copy,
    For,
    Kernel,
    Load,
    Region,
    RoleSplit,
    Store,
    ThreadLoop,
    TileOp,
    Var,
    swalk,
)
from egtile.schedule.driver import optimize


def test_nested_parallel_loops_fold_into_one_thread_loop_and_offsets_are_substituted():
    A = Buffer("A", (8, 32), "float32", "global")
    Out = Buffer("Out", (8, 32), "float32", "global")
    i, j, m = Var("i"), Var("j"), Var("m")
    body = (
        For(1, i, Const(0), Const(4), "parallel", (
            For(2, j, Const(0), Const(32), "parallel", (
                Store(3, Out, (BinOp("+", i, Const(4)), j), BinOp("*", Load(A, (BinOp("+", i, Const(4)), j)),
                                                                  Const(2.0, "float32"))),)),)),
        For(4, m, Const(2), Const(6), "parallel", (Store(5, Out, (m, Const(0)), Load(A, (m, Const(0)))),)),
    )
    k = Kernel("nest", (A, Out), (1,), (Var("bx"),), 128, (), body)
    r = optimize(k)
    loops = [x for x in swalk(r.scheduled.body) if isinstance(x, ThreadLoop)]
    assert [(tuple(v.name for v in x.vars), x.extents) for x in loops] == [(("i", "j"), (4, 32)), (("m",), (4,))]
    # The loop over [2, 6) runs m in [0, 4) and its body sees m + 2.
    shifted = BinOp("+", m, Const(2))
    assert loops[1].body[0].stmt.indices == (shifted, Const(0))
    K.check_schedule(r.scheduled, ("Out",), full=False)


def test_full_arrive_count_is_the_sum_of_the_producer_arrivals():
    cases = [(bug1_kernel(), 1), (bug2_kernel(), 129), (K.cp_async_variant().kernel, 129), (K.no_tma().kernel, 128),
             (K.pipelined_gemm().kernel, 2)]
    for k, want in cases:
        s = optimize(k).scheduled
        assert s.barrier("full_0").arrive_count == want, k.name
        assert s.barrier("empty_0").arrive_count == 128


def test_produced_buffers_are_multi_versioned_and_their_accesses_carry_the_stage():
    s = optimize(bug2_kernel()).scheduled
    assert dict(s.staged) == {"A_shared": 2, "B_shared": 2}
    assert all(b.shape == (2, 64) for b in s.buffers)
    (split,) = [x for x in swalk(s.body) if isinstance(x, RoleSplit)]
    for x in swalk(split.roles[1].body):
        if isinstance(x, ThreadLoop):
            st = x.body[0].stmt
            assert st.buffer.shape == (2, 64) and len(st.indices) == 2


def test_restage_and_substitute():
    X = Buffer("X", (4,), "float16", "shared")
    XS = Buffer("X", (2, 4), "float16", "shared")
    G = Buffer("G", (4,), "float16", "global")
    k = Var("k")
    st = Store(1, X, (Var("i"),), Load(G, (Var("i"),)))
    out = restage(st, {"X": (XS, k)})
    assert out.buffer is XS and out.indices == (k, Var("i")) and out.value == Load(G, (Var("i"),))
    c = restage(Copy(2, Region(G, (Const(0),), (4,)), Region.full(X)), {"X": (XS, k)})
    assert c.dst == Region(XS, (k, Const(0)), (1, 4))
    shifted = substitute(st, {"i": BinOp("+", Var("i"), Const(3))})
    assert shifted.indices == (BinOp("+", Var("i"), Const(3)),)


def test_an_undecided_node_cannot_be_lowered():
    k = bug2_kernel()
    with pytest.raises(ScheduleError, match="still undecided"):
        lower((Node("pipelined", 1, (), (), ((),)),), FactContext.of(k), decision_table(R.builtin().decisions))


def test_block_level_tile_ops_run_on_all_threads_of_a_warp_specialized_kernel():
    s = optimize(bug1_kernel()).scheduled
    fill = s.body[0]
    assert isinstance(fill, TileOp) and fill.threads.count == 256


def _if_reads_produced(n: int = 256, bn: int = 64):
    """A block-level T.If whose condition reads a multi-buffered (produced) shared buffer: the lowering
    must index the condition's load with the stage like every other access (reported by a user: the
    condition kept its unstaged index and the simulator and codegen rejected the schedule)."""
    from egtile import language as T

    @T.prim_func
    def main(X: T.Tensor((1, n), "float32"), Y: T.Tensor((n // bn,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            S = T.alloc_shared((1, bn), "float32")
            for ko in T.Pipelined(n // bn, num_stages=2):
                T.copy(X[0, ko * bn], S)
                with T.If(S[0, 0] > 0):
                    Y[ko] = S[0, 1]
                with T.Else():
                    for j in T.serial(2):
                        with T.If(S[0, j + 2] > 0):
                            Y[ko] = -S[0, 3]

    return main


def test_block_level_if_condition_reads_the_staged_buffer():
    import torch

    import egtile
    from egtile.codegen import build
    from egtile.interp import interpret
    from egtile.ir import SIf, swalk

    pf = _if_reads_produced()
    sched = egtile.optimize(pf).scheduled
    assert egtile.verify(sched) == []
    conds = [s.cond for s in swalk(sched.body) if isinstance(s, SIf)]
    assert conds and all(len(c.a.indices) == 3 for c in conds), conds  # (stage, 0, j) on the (2, 1, 64) buffer
    X = torch.randn(1, 256)
    want = torch.full((4,), float("nan"))
    interpret(pf.kernel, X, want)
    for policy in ("round_robin", "random", "adversarial"):
        res = egtile.simulate(sched, X, torch.full((4,), float("nan")), policy=policy, seed=3)
        assert res.ok, res.errors()
        torch.testing.assert_close(res.outputs[1], want, rtol=0, atol=0, equal_nan=True)
    assert build(sched).cubin
