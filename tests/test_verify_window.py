"""The loop window (egtile.verifier.window): its covariance domain, when it is used, when it is refused.

Every verdict here is compared with the enumerating reference verifier, which traces every iteration:
the window must never change a verdict (by property, statements, buffer, barrier), including for bugs
planted in a single middle iteration, which H1 must refuse to window.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from seed_schedules import bug2_schedule
from soundness import handbuilt as hb

from egtile.ir import BinOp, Buffer, Const, Elect, Leaf, Load, SIf, Store, Var
from egtile.verifier import reference, verify
from egtile.verifier.window import OPAQUE, Cov, NotCovariant, Scope, Windows


def c(v: int) -> Const:
    return Const(v, "int32")


K = Var("k")


def value(e, lo=8, hi=90, env=None):
    return Scope("k", lo, hi, env or {"bx": 3}).value(e)


# ----------------------------------------------------------------------------------------------------
# H1: the covariance domain


def test_stage_and_parity_are_periodic():
    assert value(BinOp("%", BinOp("-", K, c(2)), c(3))) == Cov(3, 0, 0, 2)
    parity = BinOp("&", BinOp("/", BinOp("-", K, c(2)), c(3)), c(1))
    assert value(parity) == Cov(6, 0, 0, 1)
    assert value(BinOp("^", parity, c(1))).periodic


def test_indices_move_and_bounds_are_decided_on_the_middle():
    assert value(BinOp("*", K, c(64))) == Cov(1, 64, 512, 5760)
    # min(100, k + 3) is k + 3 while k <= 90: the software pipeline's issue bound
    assert value(BinOp("min", c(100), BinOp("+", K, c(3)))) == Cov(1, 1, 11, 93)
    assert value(BinOp("<", BinOp("+", K, c(2)), c(100))) == Cov(1, 0, 1, 1)
    assert value(BinOp("+", Var("bx"), K)) == Cov(1, 1, 11, 93)


def test_loads_and_unknown_variables_are_opaque():
    X = Buffer("X", (4,), "int32", "global")
    assert value(Load(X, (K,))) is OPAQUE
    assert value(BinOp("+", Var("unbound"), K)) is OPAQUE


@pytest.mark.parametrize("expr", [
    BinOp("*", K, K),  # not covariant
    BinOp("<", K, c(50)),  # changes value in the middle
    BinOp("min", c(50), K),  # the operands cross
    BinOp("%", BinOp("-", K, c(50)), c(3)),  # C remainder of a value that changes sign
])
def test_non_covariant_expressions_are_refused(expr):
    with pytest.raises(NotCovariant):
        value(expr)


# ----------------------------------------------------------------------------------------------------
# The window is used on long pipelines, and changes no verdict


class Spy:
    """Records, for each verification, whether a window was used and confirmed."""

    def __init__(self, monkeypatch) -> None:
        self.used: list[bool] = []
        self.confirmed: list[bool] = []
        plain = Windows.confirm

        def confirm(w, traces, analysis, space):
            ok = plain(w, traces, analysis, space)
            self.used.append(bool(w.used))
            self.confirmed.append(ok and bool(w.used))
            return ok

        monkeypatch.setattr(Windows, "confirm", confirm)


def same_as_reference(sched) -> set:
    got = {v.key() for v in verify(sched, value_flow=False)}
    want = {v.key() for v in reference.verify(sched)}
    assert got == want, f"symbolic-only {got - want}, reference-only {want - got}"
    return got


@pytest.mark.parametrize("kw, bug", [
    ({}, False), ({"stages": 3, "start": 3}, False), ({"start": 5, "n": 121}, False), ({"stages": 4}, False),
    ({"absolute_parity": True, "start": 3}, True), ({"release_before_last_read": True}, True),
    ({"wait_after_first_read": True}, True), ({"full_count_delta": -1}, True), ({"empty_count_delta": -1}, True),
    ({"tx_delta": -2}, True),
], ids=lambda x: ",".join(f"{k}={v}" for k, v in x.items()) if isinstance(x, dict) else str(x))
def test_long_warp_specialized_pipelines_are_windowed(kw, bug, monkeypatch):
    spy = Spy(monkeypatch)
    found = same_as_reference(hb.ws_schedule(**{"n": 120, **kw}))
    assert any(spy.confirmed), "the window was not used"
    assert bool(found) == bug


@pytest.mark.parametrize("n", [0, 1, 2, 5, 51, 97])
@pytest.mark.parametrize("start", [0, 5])
def test_every_trip_count_keeps_its_verdict(n, start):
    """Trip counts 0, 1, below S, not a multiple of S, around the window's threshold, large; non-zero
    start; correct and with the absolute-parity bug (which only shows when start % S != 0)."""
    same_as_reference(hb.ws_schedule(n=n, start=start, stages=3))
    same_as_reference(hb.ws_schedule(n=n, start=start, stages=2, absolute_parity=True))


@pytest.mark.parametrize("n", [64])
def test_software_and_cp_async_pipelines(n, monkeypatch):
    spy = Spy(monkeypatch)
    same_as_reference(hb.cp_async_schedule(n=n))
    same_as_reference(hb.cp_async_schedule(n=n, skip_arrive=True))
    same_as_reference(bug2_schedule(n=n))
    same_as_reference(bug2_schedule(n=n, wait_after_first_read=True))
    assert any(spy.confirmed)


# ----------------------------------------------------------------------------------------------------
# Refused windows: the loop is traced in full, never silently passed


def _consumer_loop(sched):
    rs = sched.body[0]
    return rs, rs.roles[0], rs.roles[0].body[0]


def _with_consumer_body(sched, body):
    rs, cons, loop = _consumer_loop(sched)
    return replace(sched, body=(replace(rs, roles=(replace(cons, body=(replace(loop, body=body),)),) + rs.roles[1:]),))


def test_a_bug_in_one_middle_iteration_is_found(monkeypatch):
    """The consumer skips its wait in iteration 60 only: not periodic, so H1 refuses the window and the
    missing wait is reported as the full enumeration reports it."""
    spy = Spy(monkeypatch)
    sched = hb.ws_schedule(n=120)
    _, _, loop = _consumer_loop(sched)
    ko = loop.var
    wait, *rest = loop.body
    body = (SIf(BinOp("!=", ko, c(60)), (wait,), ()),) + tuple(rest)
    bad = _with_consumer_body(sched, body)
    found = same_as_reference(bad)
    assert found and not any(spy.used)


def test_a_moving_access_meeting_a_fixed_one_refuses_the_window(monkeypatch):
    """The consumer also reads B_out[60, 0], which iteration 60 (skipped by a window) writes: H2 sees
    that the skipped writes of B_out[ko, 0] meet it and the loop is traced in full."""
    spy = Spy(monkeypatch)
    sched = hb.ws_schedule(n=120)
    _, _, loop = _consumer_loop(sched)
    B_out = sched.kernel.params[2]
    peek = Elect(sched.body[0].roles[0].threads, (Leaf(Store(5, B_out, (c(119), c(0)), Load(B_out, (c(60), c(0))))),))
    same_as_reference(_with_consumer_body(sched, loop.body + (peek,)))
    assert spy.used and not any(spy.confirmed)


def test_windows_only_where_long_enough():
    w = Windows(hb.ws_schedule(n=10), [object(), object()], set())
    assert w._half(4) < 60  # a 2-stage pipeline of ~60 iterations is windowed
