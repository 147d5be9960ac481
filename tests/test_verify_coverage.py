"""L11 (egtile.verifier.coverage): every statement of the kernel is in its schedule (the one sanctioned absence, a zero
writer folded into a wgmma's scale-d, is tests/test_versioning.py's fold test); and the bug that motivated it: a
prologue TMA load around a loop whose extracted schedule is serial (no role split) dropped the statements after
the loop (egtile.lower.driver.role_tails moved them into a consumer role that was never built)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import torch

import egtile
from egtile import language as T
from egtile.verifier import verify

from _check import poisoned


def rowmax(s: int = 256, d: int = 64):
    """Twice the row maxima of ``Q K'^T``, where ``K'`` takes key block ``k`` below the query block and the mirrored
    one from it on (a copy under a data-dependent branch: the loop stays serial, its Q tile goes by the prologue's
    TMA), the rows stored after the loop."""
    n = s // 64

    @T.prim_func
    def main(Q: T.Tensor((s, d), "float16"), K: T.Tensor((s, d), "float16"), Out: T.Tensor((s,), "float32")):
        with T.Kernel(n, threads=128) as bx:
            Q_s = T.alloc_shared((64, d), "float16")
            K_s = T.alloc_shared((64, d), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            m = T.alloc_fragment((64,), "float32")
            T.copy(Q[bx * 64:(bx + 1) * 64, :], Q_s)
            T.fill(m, -T.infinity("float32"))
            for k in T.Pipelined(n, num_stages=1):
                if k < bx:
                    T.copy(K[k * 64:(k + 1) * 64, :], K_s)
                else:
                    T.copy(K[(n - 1 - k) * 64:(n - k) * 64, :], K_s)
                T.clear(acc)
                T.gemm(Q_s, K_s, acc, transpose_B=True)
                T.reduce_max(acc, m, dim=1, clear=False)
            for i in T.Parallel(64):
                m[i] = m[i] * 2
            T.copy(m, Out[bx * 64:(bx + 1) * 64])

    return main


def _reference(q, k, s: int = 256):
    n = s // 64
    out = torch.empty(s, dtype=torch.float64)
    for bx in range(n):
        blocks = [kk if kk < bx else n - 1 - kk for kk in range(n)]
        keys = torch.cat([k[b * 64:(b + 1) * 64] for b in blocks]).double()
        out[bx * 64:(bx + 1) * 64] = 2 * (q[bx * 64:(bx + 1) * 64].double() @ keys.T).max(1).values
    return out


def test_a_serial_loop_under_the_prologue_tma_keeps_the_statements_after_it():
    r = egtile.optimize(rowmax())
    text = r.explain()
    assert "pipeline-prologue-tma" in text and "pipeline-serial" in text
    assert r.scheduled.threads == 128  # no producer warpgroup: the loop has no role split
    assert not [v for v in verify(r.scheduled) if v.property == "L11"]
    torch.manual_seed(3)
    q, k = torch.randn(256, 64, dtype=torch.float16), torch.randn(256, 64, dtype=torch.float16)
    res = egtile.simulate(r.scheduled, q, k, poisoned((256,), torch.float32, "cpu"))
    assert res.ok
    torch.testing.assert_close(res.outputs[2].double(), _reference(q, k), rtol=1e-5, atol=1e-5)


def test_a_schedule_that_drops_a_statement_is_refused_naming_it():
    sched = egtile.optimize(rowmax()).scheduled
    dropped = replace(sched, body=sched.body[:-1])
    found = [v for v in verify(dropped) if v.property == "L11"]
    assert found and "not in the schedule" in found[0].message
    last = max(s.sid for s in egtile.ir.walk(sched.kernel.body))
    assert any(last in v.sids for v in found)


@pytest.mark.gpu
def test_a_serial_loop_under_the_prologue_tma_is_right_on_the_gpu():
    k_ = egtile.compile(rowmax(), target="cuda")
    q, k = torch.randn(256, 64, dtype=torch.float16), torch.randn(256, 64, dtype=torch.float16)
    out = poisoned((256,), torch.float32, "cuda")
    k_(q.cuda(), k.cuda(), out)
    torch.testing.assert_close(out.double().cpu(), _reference(q, k), rtol=1e-5, atol=1e-5)


def scale(n: int = 130):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(n):
                Y[i] = X[i] * 2.0

    return main


def _retile(body, **changes):
    """``body`` with its first ThreadLoop replaced by one with ``changes`` (the rest as scheduled)."""
    from egtile.ir.scheduled import ThreadLoop

    out, done = [], False
    for s in body:
        if not done and isinstance(s, ThreadLoop):
            s, done = replace(s, **changes), True
        out.append(s)
    assert done
    return tuple(out)


@pytest.mark.parametrize("cut", ["extent", "vector"])
def test_a_thread_loop_that_skips_iterations_is_refused_naming_the_loop(cut):
    """A T.Parallel of 130 iterations run over 129 (a user decision cutting the extent), or vectorized by 4 (whole
    groups only: the last 2 never run): the output element is never written and nothing else touches it, so only
    the count of iterations tells. Found by a rule author's mutant (2026-12-07); the simulator refuses the second
    as a malformed node."""
    sched = egtile.optimize(scale()).scheduled
    assert not verify(sched)
    changes = {"extents": (129,)} if cut == "extent" else {"vector": 4}
    bad = replace(sched, body=_retile(sched.body, **changes))
    found = [v for v in verify(bad) if v.property == "L11"]
    want = r"take i over 129 values where the loop has 130" if cut == "extent" else \
        r"vectorized by 4 over 130 iterations.*the last 2 would never run"
    assert found and re.search(want, found[0].message), found
    if cut == "vector":
        with pytest.raises(egtile.errors.SimulationError, match=r"last 2 iterations would never run"):
            egtile.simulate(bad, torch.randn(130), torch.zeros(130))


def test_a_statement_run_twice_is_refused():
    """L5: a rule author's mutant emitting a `T.Parallel` twice passed the verifier (the simulator's repeated-iteration
    check caught it): `Y[i] = X[i] * 2` is idempotent, `Y[i] += X[i]` would not be."""
    sched = egtile.optimize(scale()).scheduled
    loops = [s for s in sched.body if type(s).__name__ == "ThreadLoop"]
    assert len(loops) == 1
    twice = replace(sched, body=sched.body + (loops[0],))
    found = [v for v in verify(twice) if v.property == "L5"]
    assert found and "run twice (two copies of it in one statement list)" in found[0].message
