"""The verifier's budget (egtile.verifier.limits): too large a schedule is a clear error, never a hang."""

from __future__ import annotations

from dataclasses import replace

import pytest
from soundness import handbuilt as hb

import egtile
from egtile.errors import VerifyLimitError
from egtile.ir import BinOp, Const, SIf
from egtile.verifier import VerifyLimits, verify


def test_too_many_events_names_the_kernel_the_unit_and_the_knob():
    with pytest.raises(VerifyLimitError) as err:
        verify(hb.ws_schedule(n=40), limits=VerifyLimits(events=200))
    msg = str(err.value)
    assert "'ws'" in msg and "200 events" in msg and "VerifyLimits(events=" in msg and "EGTILE_VERIFY_BUDGET" in msg
    assert verify(hb.ws_schedule(n=40), limits=VerifyLimits(events=20_000)) == []


def _unwindowable(n: int):
    """A pipeline whose consumer body tests ``ko < 1000000`` on the raw index product ``ko * ko``: not
    covariant, so the window refuses it and every iteration is traced."""
    s = hb.ws_schedule(n=n)
    rs = s.body[0]
    cons = rs.roles[0]
    loop = cons.body[0]
    ko = loop.var
    guard = SIf(BinOp("<", BinOp("*", ko, ko), Const(1 << 30, "int32")), loop.body, ())
    loop2 = replace(loop, body=(guard,))
    return replace(s, body=(replace(rs, roles=(replace(cons, body=(loop2,)), rs.roles[1])),))


def test_a_long_loop_outside_the_window_argument_is_limited_not_silently_passed():
    sched = _unwindowable(3000)
    with pytest.raises(VerifyLimitError, match="iterations") as err:
        verify(sched, limits=VerifyLimits(iterations=1000))
    assert "loop over ko" in str(err.value)
    assert verify(_unwindowable(300)) == []


def test_the_environment_knob_scales_every_limit(monkeypatch):
    monkeypatch.setenv("EGTILE_VERIFY_BUDGET", "0.0001")
    with pytest.raises(VerifyLimitError, match="'ws'") as err:
        verify(hb.ws_schedule(n=40))
    assert "now 0.0001" in str(err.value)  # the factor in force, beside the knob
    monkeypatch.setenv("EGTILE_VERIFY_BUDGET", "many")
    with pytest.raises(VerifyLimitError, match="not a number"):
        verify(hb.ws_schedule(n=4))
    monkeypatch.setenv("EGTILE_VERIFY_BUDGET", "2")
    assert verify(hb.ws_schedule(n=4)) == []


def test_the_limit_error_is_an_egtile_error():
    assert issubclass(VerifyLimitError, egtile.errors.EgtileError)


def test_a_handshake_with_more_interleavings_than_the_limit_is_reported_not_passed():
    """The warpgroup-handshake model check (egtile.verifier.handshake) explores every interleaving; past the
    ``states`` limit it used to return "no deadlock found", so an unexplored deadlock passed."""
    from test_pingpong_stages import _kernel, _rules

    from egtile.verifier.handshake import check_handshakes

    sched = egtile.optimize(_kernel(2), rules=_rules()).scheduled
    with pytest.raises(VerifyLimitError, match="states") as err:
        check_handshakes(sched, VerifyLimits(states=20))
    msg = str(err.value)
    assert "handshake" in msg and "VerifyLimits(states=" in msg and "EGTILE_VERIFY_BUDGET" in msg
    with pytest.raises(VerifyLimitError, match="states"):
        verify(sched, limits=VerifyLimits(states=20))
    assert check_handshakes(sched, VerifyLimits()) == [] and verify(sched) == []


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf"])
def test_a_factor_that_is_not_finite_is_refused_by_name(monkeypatch, raw):
    monkeypatch.setenv("EGTILE_VERIFY_BUDGET", raw)
    with pytest.raises(VerifyLimitError, match="positive finite number"):
        verify(hb.ws_schedule(n=4))


def test_a_tiny_factor_leaves_every_limit_at_least_one():
    lim = VerifyLimits().scaled(1e-12)
    assert min(lim.events, lim.elements, lim.iterations, lim.states) == 1
