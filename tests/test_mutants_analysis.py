"""Tests that kill the surviving cosmic-ray mutants of ``egtile/analysis`` (docs/mutation.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from egtile.analysis import body_facts, tma_eligibility
from egtile.ir import Buffer, Const, Copy, Region

sys.path.insert(0, str(Path(__file__).parent))
from seed_schedules import bug2_kernel  # noqa: E402


def test_body_facts_consumers_are_exactly_the_non_producers():
    # body.py: ``consumers`` with ``not`` dropped returns the producers
    f = body_facts(bug2_kernel().body[0])
    assert [s.sid for s in f.producers] == [2, 4]
    assert [s.sid for s in f.consumers] == [5, 6]
    assert all(not s.is_producer for s in f.consumers)


def test_bad_innermost_stride_of_a_3d_source_names_the_innermost_stride():
    # producer.py: the message indexed ``given[1]`` (the middle stride of a 3-D source) for ``given[-1]``
    g = Buffer("X", (4, 8, 64), "float16", "global")
    s = Buffer("X_shared", (8, 64), "float16", "shared")
    cp = Copy(4, Region(g, (Const(0),) * 3, (1, 8, 64)), Region.full(s))
    bad = tma_eligibility(cp, (2048, 256, 6))
    assert not bad.ok
    assert "innermost dimension of X has stride 6 B" in bad.reasons[0], bad.reasons
