"""The e-graph's derived dataflow relations (egtile.schedule.dataflow and the rules' conditions) equal the
Python analyses of egtile.analysis, the test oracle, on the soundness suite's random programs: per
statement the buffers read and written and the effect; per member of the pipelined loop its role; per loop
the guarded buffers and the warp-specialization conditions."""

from __future__ import annotations

from egglog import String, get_callable_args
from hypothesis import HealthCheck, given, settings
from soundness.programs import programs

from egtile import analysis
from egtile.ir import For, walk
from egtile.schedule import dataflow as D
from egtile.schedule.driver import saturate

WS_CONDITIONS = {
    "has_producer": "ws-has-producer",
    "producers_shared_from_global": "ws-producers-shared-from-global",
    "no_producer_reads_consumer_write": "ws-no-producer-reads-consumer-write",
    "no_consumer_writes_producer_buffer": "ws-no-consumer-writes-producer-buffer",
}


def _value(s, term):
    try:
        return s.egraph.extract(term).value
    except Exception:  # noqa: BLE001 - no row
        return None


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(programs())
def test_derived_relations_equal_the_python_analyses(program):
    k = program.kernel
    s = saturate(k)
    terms = s.encoding.terms
    names = sorted({b.name for b in k.params + k.allocs} | {analysis.ANY_BUFFER})
    ctx = s.encoding.ctx
    for sid, st in ctx.stmts.items():
        if sid not in terms:
            continue
        t = terms[sid]
        want_r = analysis.names(analysis.reads(st))
        want_w = analysis.names(analysis.writes(st))
        got_r = {b for b in names if s.holds(D.reads(t, String(b)))}
        got_w = {b for b in names if s.holds(D.writes(t, String(b)))}
        assert got_r == want_r and got_w == want_w, (program, sid)
        if ctx.context[sid] == "block":
            nonlocal_ = _value(s, D.fails_st(String("effect-local"), t))
            assert nonlocal_ is (analysis.effect(st) == "nonlocal"), (program, sid)
    (loop,) = [x for x in walk(k.body) if isinstance(x, For) and x.kind == "pipelined"]
    body = get_callable_args(terms[loop.sid])[1]
    facts = analysis.body_facts(loop)
    for f in facts.stmts:
        t = terms[f.sid]
        assert s.holds(D.producer(t, body)) is f.is_producer, (program, f.sid)
        assert s.holds(D.consumer(t, body)) is (not f.is_producer), (program, f.sid)
    guarded = {b for b in names if s.holds(D.guarded(body, String(b)))}
    assert guarded == set(facts.producer_buffers), program
    for field, cond in WS_CONDITIONS.items():
        ok = getattr(facts, field).ok
        if cond == "ws-has-producer":
            from egtile.rules.warp_specialize import has_producer

            assert _value(s, has_producer(body)) is ok, (program, cond)
        else:
            assert _value(s, D.fails(String(cond), body)) is (not ok), (program, cond)
    for i, f in enumerate(facts.stmts):
        assert s.holds(D.member_at(terms[f.sid], body, i)), (program, f.sid)
