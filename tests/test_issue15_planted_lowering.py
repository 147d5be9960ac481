"""Issue 15: two lowering bugs that hid because the generator never drew their constructs, planted back.

* the stage index not added inside ``T.if_then_else`` (``egtile.lower.irmap`` restaging a ``Select``'s
  condition but not its branches): the consumer reads a stage copy the producer did not write this round;
* ``arrive.expect_tx`` counting the whole (staged) destination instead of the copied box: the phase waits
  for bytes no TMA delivers.

Each program below is one the widened generator (``tests/soundness/programs.py``, ``wide=True``) draws:
a ``T.if_then_else`` consumer, a partial copy into the front of a larger shared buffer. The planted bug
must be reported by the verifier and by the simulator, each on its own.
"""

from __future__ import annotations

import pytest
import torch
from soundness.check import check

from egtile import language as T
from egtile.errors import EgtileError
from egtile.ir import Select
from egtile.lower import irmap
from egtile.rules import copy as copy_rules
from egtile.schedule.driver import optimize


def _select_kernel():
    @T.prim_func
    def main(A: T.Tensor((6, 64), "float16"), Out: T.Tensor((6, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(6, num_stages=2):
                T.copy(A[k, 0:64], X_s)
                for i in T.Parallel(64):
                    Out[k, i] = T.if_then_else(i < 32, X_s[i], X_s[63 - i]) + T.float16(1.0)

    return main


def _partial_kernel():
    @T.prim_func
    def main(A: T.Tensor((6, 64), "float16"), Out: T.Tensor((6, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((128,), "float16")        # the box fills the front half
            for k in T.Pipelined(6, num_stages=2):
                T.copy(A[k, 0:64], X_s[0:64])
                for i in T.Parallel(64):
                    Out[k, i] = X_s[63 - i] * T.float16(2.0)

    return main


def _args(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(6, 64, generator=g).half(), torch.full((6, 64), -5.0).half()]


@pytest.fixture
def select_not_restaged(monkeypatch):
    plain = irmap._Mapper.expr

    def expr(self, e):
        if isinstance(e, Select):
            return Select(plain(self, e.cond), e.a, e.b)   # the bug: the branches keep their old indices
        return plain(self, e)

    monkeypatch.setattr(irmap._Mapper, "expr", expr)


@pytest.fixture
def whole_destination_tx():
    from egtile.ir import ArriveExpectTx, Elect, TmaLoad
    from egtile.ir.dtypes import dtype

    def issue(n, lw, ic):
        c = lw.stmt(n.sid, ic.ctx)
        nbytes = c.dst.buffer.numel * dtype(c.dst.buffer.dtype).bytes   # the bug: the whole buffer
        body = (ArriveExpectTx(ic.full, ic.stage, nbytes), TmaLoad(c.src, c.dst, ic.full, ic.stage, sid=n.sid))
        return ([*body] if ic.threads.count == 1 else [Elect(ic.threads, body)]), 1

    # the rules' declaration is a frozen dataclass: plant the bug in it for this test only
    old = copy_rules.TMA_LOAD.issue
    object.__setattr__(copy_rules.TMA_LOAD, "issue", issue)
    try:
        yield
    finally:
        object.__setattr__(copy_rules.TMA_LOAD, "issue", old)


@pytest.mark.parametrize("kernel", [_select_kernel, _partial_kernel])
def test_the_correct_lowering_passes(kernel):
    k = kernel()
    sched = optimize(k).scheduled
    assert check(sched.kernel, sched, _args()) == []


@pytest.mark.parametrize("checker", ["verify", "sim"])
def test_stage_index_missing_inside_if_then_else_is_caught(select_not_restaged, checker):
    sched = optimize(_select_kernel()).scheduled
    try:
        problems = check(sched.kernel, sched, _args(), only=checker)
    except EgtileError as e:  # the simulator refuses the unstaged index (a 1-D index into the staged buffer)
        problems = [f"{type(e).__name__}: {e}"]
    assert problems, f"{checker} missed the unstaged T.if_then_else"


@pytest.mark.parametrize("checker", ["verify", "sim"])
def test_expect_tx_of_the_whole_destination_is_caught(whole_destination_tx, checker):
    sched = optimize(_partial_kernel()).scheduled
    assert check(sched.kernel, sched, _args(), only=checker), f"{checker} missed expect_tx of the whole buffer"
