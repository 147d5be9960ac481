"""The two sides of one execution of a data-dependent ``SIf`` never both run (egtile.verifier.trace.exclusive).

The verifier cannot evaluate a condition read from memory, so it traces the accesses of both sides of such an
``SIf``; it used to check a pair made of one access of each side of the *same* execution like any other pair, and
asked for a barrier between them: TileLang's ``block_causal_attention_varlen.py`` (the score tile filled by a
``T.Parallel`` mask on one side of ``if needs_mask != 0`` and by ``T.clear`` on the other, two thread mappings) was
refused as "egtile scheduled kernel 'fwd' illegally: L2 on acc_s between the T.Parallel store and T.clear". That was
the verifier's false positive, not a missing side condition: one execution runs one side, the simulator runs the
schedule race-free and correct both ways, and the barrier placement is right. Pairs of the two sides in different
executions (loop iterations) are still checked: the mutant below, whose barriers between iterations are removed,
is refused by the verifier and races in the simulator. The kernels are our own, of the example's shape."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import SimulationError
from egtile.ir import swalk
from egtile.ir.scheduled import Leaf, SeqLoop, SIf, SyncThreads
from egtile.sim import simulate

from _check import check, poisoned

M, J = 64, 2


def _once():
    @T.prim_func
    def masked_or_cleared(X: T.Tensor((M, M), "float32"), F: T.Tensor((1,), "int32"), O: T.Tensor((M, M), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            s = T.alloc_fragment((M, M), "float32")
            if F[0] != 0:
                for a, b in T.Parallel(M, M):
                    s[a, b] = T.if_then_else(b <= a, 0.0, -1000.0)
            else:
                T.clear(s)
            for a, b in T.Parallel(M, M):
                O[a, b] = s[a, b] + X[a, b]

    return masked_or_cleared.kernel


def _per_step():
    @T.prim_func
    def steps(X: T.Tensor((J, M, M), "float32"), F: T.Tensor((J,), "int32"), O: T.Tensor((J, M, M), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            s = T.alloc_fragment((M, M), "float32")
            for j in T.serial(J):
                if F[j] != 0:
                    for a, b in T.Parallel(M, M):
                        s[a, b] = T.if_then_else(b <= a, 0.0, -1000.0)
                else:
                    T.clear(s)
                for a, b in T.Parallel(M, M):
                    O[j, a, b] = s[a, b] + X[j, a, b]

    return steps.kernel


def _mask() -> torch.Tensor:
    i = torch.arange(M)
    return torch.where(i[None, :] <= i[:, None], 0.0, -1000.0).double()


def _sid(x):
    sid = getattr(x, "sid", None)
    return sid if sid is not None else getattr(getattr(x, "op", None), "sid", None)


def _writers_of_s(sched) -> tuple[int, int]:
    sif = next(x for x in swalk(sched.body) if isinstance(x, SIf) and x.else_body)
    then_sid = next(x.stmt.sid for x in swalk(sif.then_body) if isinstance(x, Leaf))  # the mask's store
    else_sid = next(_sid(x) for x in swalk(sif.else_body) if _sid(x) is not None)
    return then_sid, else_sid


def test_one_execution_verifies_and_matches_float64_both_ways():
    r = egtile.optimize(_once())
    then_sid, else_sid = _writers_of_s(r.scheduled)
    assert then_sid != else_sid
    assert egtile.verify(r.scheduled) == []
    g = torch.Generator().manual_seed(5)
    for flag in (1, 0):
        x = torch.randn(M, M, generator=g)
        o = poisoned((M, M), torch.float32, "cpu")
        res = simulate(r.scheduled, x, torch.tensor([flag], dtype=torch.int32), o, seed=flag)
        assert not res.errors(), res.errors()[:3]
        ref = x.double() + (_mask() if flag else 0.0)
        assert check(f"flag={flag}", res.outputs[2], ref, rtol=1e-6, atol=1e-4)


@pytest.mark.parametrize("flags", [(1, 0), (0, 1), (1, 1)])
def test_a_side_per_iteration_verifies_and_matches_float64(flags):
    r = egtile.optimize(_per_step())
    assert egtile.verify(r.scheduled) == []
    g = torch.Generator().manual_seed(sum(flags) + 7)
    x = torch.randn(J, M, M, generator=g)
    o = poisoned((J, M, M), torch.float32, "cpu")
    res = simulate(r.scheduled, x, torch.tensor(flags, dtype=torch.int32), o, seed=3)
    assert not res.errors(), res.errors()[:3]
    ref = torch.stack([x[j].double() + (_mask() if flags[j] else 0.0) for j in range(J)])
    assert check(f"flags={flags}", res.outputs[2], ref, rtol=1e-6, atol=1e-4)


def _without_barriers_in_the_loop(sched):
    def strip(stmts):
        out = []
        for s in stmts:
            if isinstance(s, SyncThreads):
                continue
            if isinstance(s, SIf):
                s = dataclasses.replace(s, then_body=strip(s.then_body), else_body=strip(s.else_body))
            out.append(s)
        return tuple(out)

    return dataclasses.replace(sched, body=tuple(
        dataclasses.replace(s, body=strip(s.body)) if isinstance(s, SeqLoop) else s for s in sched.body))


def test_the_two_sides_in_different_iterations_are_still_ordered():
    r = egtile.optimize(_per_step())
    then_sid, else_sid = _writers_of_s(r.scheduled)
    mutant = _without_barriers_in_the_loop(r.scheduled)
    assert not any(isinstance(x, SyncThreads) for x in swalk(mutant.body))
    found = egtile.verify(mutant)
    # the clear of iteration 0 and the mask store of iteration 1: one on each side, of two executions
    assert any(v.property == "L2" and set(v.sids) == {then_sid, else_sid} and "j=0" in v.message and "j=1" in
               v.message for v in found), [v.message for v in found]
    x = torch.randn(J, M, M, generator=torch.Generator().manual_seed(9))
    try:
        errors = [str(e) for e in simulate(mutant, x, torch.tensor([1, 0], dtype=torch.int32),
                                           poisoned((J, M, M), torch.float32, "cpu"), seed=1).errors()]
    except SimulationError as e:
        errors = [str(e)]
    assert any("race on s[" in e for e in errors), errors[:3]
