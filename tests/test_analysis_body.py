"""Tests of egtile.analysis.body: body_facts and the warp-specialization conditions (the e-graph's test oracle)."""

from __future__ import annotations

import sys
from pathlib import Path

import egtile.analysis.body as pipeline
from egtile.analysis import body_facts, earliest_read, last_access
from egtile.ir import Buffer, Const, Copy, Fill, For, Load, Region, Store, Var

sys.path.insert(0, str(Path(__file__).parent))
from seed_schedules import bug1_kernel, bug2_kernel  # noqa: E402

ko, i = Var("ko"), Var("i")
X = Buffer("X", (4, 64), "float16", "global")
Y = Buffer("Y", (4, 64), "float16", "global")
XS = Buffer("X_shared", (64,), "float16", "shared")


def c(v: int) -> Const:
    return Const(v)


def loop(*body) -> For:
    return For(1, ko, c(0), c(4), "pipelined", tuple(body), num_stages=2)


LOAD_X = Copy(2, Region(X, (ko, c(0)), (1, 64)), Region.full(XS))
USE_X = For(3, i, c(0), c(64), "parallel", (Store(4, Y, (ko, i), Load(XS, (i,))),))


def test_seed_bug2_facts():
    f = body_facts(bug2_kernel().body[0])
    assert [s.producer_kind for s in f.stmts] == ["simt", "tma", "none", "none"]
    assert [s.sid for s in f.stmts] == [2, 4, 5, 6]
    assert f.stmts[0].reads == {"B_in"} and f.stmts[0].writes == {"B_shared"}
    assert f.stmts[2].reads == {"B_shared"} and f.stmts[2].writes == {"B_out"}
    assert all(s.effect == "nonlocal" for s in f.stmts)
    assert f.producer_buffers == {"A_shared", "B_shared"}
    body = bug2_kernel().body[0].body
    assert earliest_read(f.producer_buffers, body) == 2  # the full wait goes before B_out = B_shared[0]
    assert last_access(f.producer_buffers, body) == 3
    assert f.warp_specializable
    assert all(cond.ok and cond.reason == "" for cond in f.conditions)
    assert f.conditions == (f.has_producer, f.producers_shared_from_global, f.no_producer_reads_consumer_write,
                            f.no_consumer_writes_producer_buffer)


def test_seed_bug1_facts():
    f = body_facts(bug1_kernel().body[1])
    assert [s.producer_kind for s in f.stmts] == ["tma", "none"]
    assert f.stmts[1].effect == "nonlocal"
    assert f.stmts[1].reads == f.stmts[1].writes == {"counters"}
    assert f.warp_specializable
    assert earliest_read(f.producer_buffers, bug1_kernel().body[1].body) is None  # nobody reads A_shared


def test_no_producer():
    f = body_facts(loop(USE_X))
    assert not f.has_producer and "no statement of loop sid 1" in f.has_producer.reason
    assert not f.warp_specializable
    assert f.producer_buffers == frozenset()


def test_producer_reading_a_consumer_written_buffer_is_rejected():
    writes_x = Store(5, X, (ko, c(0)), c(0))  # a consumer writes the producer's source
    f = body_facts(loop(LOAD_X, USE_X, writes_x))
    cond = f.no_producer_reads_consumer_write
    assert not cond and not f.warp_specializable
    assert "reads X, which consumer statement 2 (sid 5, none) writes" in cond.reason
    assert f.no_consumer_writes_producer_buffer.ok


def test_consumer_overwriting_a_producer_buffer_is_rejected():
    clobber = Fill(5, Region.full(XS), c(0))
    f = body_facts(loop(LOAD_X, USE_X, clobber))
    cond = f.no_consumer_writes_producer_buffer
    assert not cond.ok
    assert cond.reason == "consumer statement 2 (sid 5, none) writes X_shared, which statement 0 (sid 2, tma) writes"
    assert f.no_producer_reads_consumer_write.ok


def test_a_consumer_before_its_producer_reads_the_previous_iteration():
    body = (USE_X, LOAD_X)  # producer after the consumer (the value from the previous stage)
    f = body_facts(loop(*body))
    consumers = [body[c.index] for c in f.consumers]
    assert earliest_read(f.producer_buffers, body) == 0
    assert last_access(f.producer_buffers, consumers) == 0


def test_producer_shape_condition_reports_a_misclassified_statement(monkeypatch):
    # Mutant: a classifier that calls a consumer a producer must be caught by condition 2.
    real = pipeline.producer_kind
    monkeypatch.setattr(pipeline, "producer_kind", lambda s, v=None: "simt" if s.sid == 3 else real(s, v))
    f = body_facts(loop(LOAD_X, USE_X))
    cond = f.producers_shared_from_global
    assert not cond.ok
    assert "statement 1 (sid 3, simt) writes non-shared Y" in cond.reason
    assert "reads non-global X_shared" in cond.reason
