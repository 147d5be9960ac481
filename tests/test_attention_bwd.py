"""Flash-attention backward (tests/attention_bwd.py, egtile's own kernel written with TileLang's constructs) on the
simulator against torch autograd of softmax attention in float64: ``dQ``, ``dK`` and ``dV`` on fresh random inputs,
``dK`` / ``dV`` poisoned with NaN (``dQ`` is accumulated atomically, so it starts at zero), causal and not.

Its ``dS^T = P^T * (dP^T - delta)`` is a ``T.Parallel`` over one wgmma accumulator that reads the other and writes
the next gemm's register A: the schedule keeps all three in registers, run by one loop with peers.
"""

from __future__ import annotations

import pytest

import egtile
from egtile.ir import swalk
from egtile.ir.fragment import LayoutLoop
from egtile.layout import Fragment

import attention_bwd as AB


def test_the_backward_keeps_both_accumulators_and_the_register_operands_in_registers():
    r = egtile.optimize(AB.flash_bwd(1, 1, 128, 32, False))
    for name in ("pT", "dpT", "pT_h", "dsT", "dv", "dk"):
        assert isinstance(r.scheduled.fragment(name), Fragment), name
    peers = [x for x in swalk(r.scheduled.body) if isinstance(x, LayoutLoop) and x.peers]
    assert [{x.fragment, *x.peers} for x in peers] == [{"pT", "dpT", "dsT"}]
    assert egtile.verify(r.scheduled) == []


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_backward_matches_torch_autograd_on_the_simulator(causal):
    worst = AB.run_case(1, 1, 128, 32, causal, target="sim")
    assert all(v <= 1.0 for v in worst.values()), worst
