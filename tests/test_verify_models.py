"""The verifier's own registry of scheduled-node models (egtile.verifier.register_model).

A rule author who adds a scheduled node teaches the verifier what it does without editing egtile. The
toy node here, defined in the test, is a cooperative fill: element ``e`` of ``dst`` is written by rank
``e % count`` of ``threads``. Its model says exactly that; the verifier then finds the missing barrier
before threads read elements other threads wrote, and accepts the schedule with the barrier.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import egtile
from egtile.ir import (
    BinOp, Buffer, Const, Fill, For, Kernel, Leaf, Load, Region, Scheduled, SeqLoop, Store, SyncThreads, ThreadLoop,
    ThreadRange, Var,
)
from egtile.verifier import register_model, unregister_model, verify
from egtile.verifier.window import Windows


@dataclass(frozen=True)
class CoopFill:
    """Toy scheduled node: ``threads`` fill ``dst`` with ``value``, element ``e`` on rank ``e % count``."""

    dst: Region
    value: float
    threads: ThreadRange
    sid: int


def c(v: int) -> Const:
    return Const(v, "int32")


def kernel() -> Kernel:
    Y = Buffer("Y", (64,), "float32", "global")
    S = Buffer("S", (64,), "float32", "shared")
    i = Var("i")
    body = (
        Fill(1, Region.full(S), Const(1.0, "float32")),
        For(2, i, c(0), c(64), "parallel", (Store(3, Y, (i,), Load(S, (BinOp("%", BinOp("+", i, c(1)), c(64)),))),)),
    )
    return Kernel("coop", (Y,), (1,), (Var("bx"),), 128, (S,), body)


def schedule(*, barrier: bool) -> Scheduled:
    k = kernel()
    (Y,), S = k.params, k.allocs[0]
    i = Var("i")
    everyone = ThreadRange(0, 128)
    read = ThreadLoop((i,), (64,), "partitioned", everyone,
                      (Leaf(Store(3, Y, (i,), Load(S, (BinOp("%", BinOp("+", i, c(1)), c(64)),)))),), sid=2)
    body = (CoopFill(Region.full(S), 1.0, everyone, 1),) + ((SyncThreads(everyone),) if barrier else ()) + (read,)
    return Scheduled(k, 128, (S,), (), body)


@pytest.fixture
def model():
    @register_model(CoopFill)
    def _trace(node, ctx):
        ctx.access(node.dst, "w", node.sid, split=node.threads)

    yield _trace
    unregister_model(CoopFill)


def test_a_registered_model_is_checked_like_a_builtin(model):
    vs = verify(schedule(barrier=False))
    assert {v.property for v in vs} == {"L1"}
    assert vs[0].buffer == "S" and set(vs[0].sids) == {1, 3}
    assert verify(schedule(barrier=True)) == []
    assert egtile.verify(schedule(barrier=True)) == []


def test_an_unknown_node_is_a_clear_error():
    # the class and the call that registers a model, not the node's whole repr (a rule author's report)
    with pytest.raises(TypeError, match=r"no model of scheduled node [\w.]+\.\w+.*register_model\(\w+, \.\.\.\)") as e:
        verify(schedule(barrier=True))
    assert "=" not in str(e.value)  # no dataclass repr of the node


def test_registration_rules(model):
    with pytest.raises(ValueError, match="already"):
        register_model(CoopFill, lambda n, c: None)
    register_model(CoopFill, lambda n, c: None, replace=True)  # replacing is explicit
    with pytest.raises(ValueError, match="builtin"):
        register_model(SyncThreads, lambda n, c: None)
    with pytest.raises(TypeError):
        register_model("CoopFill", lambda n, c: None)


def test_a_loop_around_a_node_without_a_window_model_is_traced_in_full(model, monkeypatch):
    """A node model without a ``scan`` hook: loops around it are never windowed (the window analysis
    cannot know what the node evaluates), and the barrier bug is still found in every iteration."""
    refuted = []
    plain = Windows._period

    def spy(self, *a):
        got = plain(self, *a)
        refuted.extend(self.refuted)
        return got

    monkeypatch.setattr(Windows, "_period", spy)
    s = schedule(barrier=False)
    k = Var("k")
    loop = SeqLoop(k, c(0), c(200), s.body, sid=None)
    vs = verify(Scheduled(s.kernel, 128, s.buffers, (), (loop,)))
    assert {v.property for v in vs} == {"L1"}
    assert any("CoopFill has no window model" in r for r in refuted)


def test_register_model_is_reachable_from_egtile_verifier():
    import subprocess
    import sys

    code = "import egtile; assert callable(egtile.verifier.register_model); assert egtile.verifier.VerifyLimits"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
    assert egtile.verifier.register_model is register_model


@dataclass(frozen=True)
class ToyBulk:
    """Toy asynchronous copy with its own field names, declared like a TMA load."""

    source: Region
    target: Region
    bar: str
    stg: object
    sid: int | None = None


def _swap_tma(x):
    """``x`` (a schedule or statement) with every TmaLoad replaced by a ToyBulk."""
    import dataclasses

    from egtile.ir import TmaLoad

    if isinstance(x, TmaLoad):
        return ToyBulk(x.src, x.dst, x.barrier, x.stage, x.sid)
    if isinstance(x, tuple):
        return tuple(_swap_tma(y) for y in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type) and not isinstance(x, (Region, Kernel)):
        return dataclasses.replace(x, **{f.name: _swap_tma(getattr(x, f.name)) for f in dataclasses.fields(x)
                                         if f.name in ("body", "roles", "then_body", "else_body")})
    return x


@pytest.mark.parametrize("kw", [{}, {"n": 120}, {"tx_delta": -2}, {"wait_after_first_read": True},
                                {"release_before_last_read": True}, {"n": 120, "absolute_parity": True, "start": 3}])
def test_a_declared_async_copy_is_checked_like_a_tma_load(kw):
    from soundness import handbuilt as hb

    register_model(ToyBulk, kind="async-copy", src="source", dst="target", barrier="bar", stage="stg")
    try:
        s = hb.ws_schedule(**kw)
        toy = _swap_tma(s)
        assert "ToyBulk" in repr(toy.body)
        assert {v.key() for v in verify(toy)} == {v.key() for v in verify(s)}
    finally:
        unregister_model(ToyBulk)
    with pytest.raises(TypeError, match="kind"):
        register_model(ToyBulk, src="source")
    with pytest.raises(TypeError, match="unknown kind"):
        register_model(ToyBulk, kind="teleport")
