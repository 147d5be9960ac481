"""The e-graph core: encoding, round trip, facts, staged saturation with limits, error wrapping."""

from __future__ import annotations

import itertools

import egtile.rules as R
import pytest
import schedule_kernels as K
from egglog import Bool, EGraph, String, i64
from egtile.rules import Rule, RuleSet
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from seed_schedules import bug1_kernel, bug2_kernel

from egtile.schedule import schema
from egtile.schedule.decode import decode_kernel, to_list, to_node
from egtile.schedule.encode import build_terms, encode
from egtile.schedule.saturate import Limits, run_stage
from egtile.errors import RuleError, ScheduleError
from egtile.ir import (
    AddressOf,
    BinOp,
    Buffer,
    Const,
    Copy,
    Extern,
    Fill,
    For,
    If,
    Kernel,
    Load,
    Region,
    Store,
    Var,
)
from egtile.schedule.driver import optimize, saturate

NO_RULES = RuleSet("none", ())


def _round_trip(k: Kernel) -> Kernel:
    g = EGraph()
    enc = encode(k, NO_RULES, g)
    return decode_kernel(to_list(g.extract(enc.root)), k)


@pytest.mark.parametrize("make", [bug1_kernel, bug2_kernel])
def test_round_trip_of_the_seeds_is_the_identity(make):
    k = make()
    assert _round_trip(k) == k


# ----------------------------------------------------------------------------------------------------
# Property: encode, extract with no rules, decode is the identity on generated unscheduled programs.

G = Buffer("G", (8, 8), "float32", "global")
S = Buffer("S", (8,), "float32", "shared")
L = Buffer("L", (4,), "float32", "local")


@st.composite
def _programs(draw) -> Kernel:
    sids = itertools.count(1)
    names = itertools.count()

    def expr(vs: list[Var]) -> object:
        pick = draw(st.integers(0, 3))
        if pick == 0 or not vs:
            return Const(draw(st.integers(-3, 3)))
        v = draw(st.sampled_from(vs))
        if pick == 1:
            return v
        return BinOp(draw(st.sampled_from(["+", "*", "%"])), v, Const(draw(st.integers(1, 4))))

    def stmts(depth: int, thread: bool, vs: list[Var]) -> tuple:
        out = []
        for _ in range(draw(st.integers(0 if depth else 1, 3))):
            kinds = ["store", "extern"] + ([] if thread else ["copy", "fill"])
            if depth < 3:
                kinds += ["par", "serial", "if"] + ([] if thread else ["pipelined"])
            kind = draw(st.sampled_from(kinds))
            sid = next(sids)
            match kind:
                case "store":
                    buf = draw(st.sampled_from([G, S, L]))
                    idx = tuple(Const(0) for _ in buf.shape)
                    out.append(Store(sid, buf, idx, Load(S, (Const(1),))))
                case "extern":
                    out.append(Extern(sid, "f", "void", (AddressOf(Load(S, (expr(vs),))),)))
                case "copy":
                    out.append(Copy(sid, Region(G, (expr(vs), Const(0)), (1, 8)), Region.full(S),
                                    draw(st.sampled_from(["auto", "simt", "tma", "cp_async"]))))
                case "fill":
                    out.append(Fill(sid, Region.full(S), Const(0.0, "float32")))
                case "if":
                    out.append(If(sid, BinOp("<", expr(vs), Const(2)), stmts(depth + 1, thread, vs),
                                  stmts(depth + 1, thread, vs)))
                case _:
                    v = Var(f"v{next(names)}")
                    loop_kind = {"par": "parallel", "serial": draw(st.sampled_from(["serial", "unroll"])),
                                 "pipelined": "pipelined"}[kind]
                    inner = thread or loop_kind == "parallel"
                    body = stmts(depth + 1, inner, vs + [v])
                    out.append(For(sid, v, Const(draw(st.integers(0, 2))), Const(draw(st.integers(2, 6))), loop_kind,
                                   body, num_stages=draw(st.integers(1, 3)) if loop_kind == "pipelined" else 0))
        return tuple(out)

    body = stmts(0, False, [])
    return Kernel("gen", (G,), (1,), (Var("bx"),), 128, (S, L), body)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_programs())
def test_round_trip_is_the_identity_on_generated_programs(k):
    assert _round_trip(k) == k


# ----------------------------------------------------------------------------------------------------
# Encoding


def test_build_terms_rejects_a_tile_op_inside_a_parallel_body():
    k = Kernel("bad", (G,), (1,), (Var("bx"),), 128, (S,), (
        For(1, Var("i"), Const(0), Const(4), "parallel", (Fill(2, Region.full(S), Const(0.0, "float32")),)),))
    with pytest.raises(ScheduleError, match=r"Fill \(sid 2\) inside a T.Parallel"):
        build_terms(k)


def test_build_terms_rejects_a_symbolic_parallel_extent():
    n = Var("n")
    k = Kernel("bad", (G,), (1,), (Var("bx"),), 128, (S,), (
        For(1, Var("i"), Const(0), n, "parallel", (Store(2, S, (Const(0),), Const(1.0, "float32")),)),))
    with pytest.raises(ScheduleError, match="symbolic range"):
        build_terms(k)


def test_duplicate_statement_ids_are_rejected():
    st_ = Store(1, S, (Const(0),), Const(1.0, "float32"))
    k = Kernel("dup", (G,), (1,), (Var("bx"),), 128, (S,), (st_, st_))
    with pytest.raises(ValueError, match="statement id 1 is used twice"):
        encode(k, NO_RULES, EGraph())


def _body(s, loop_sid: int):
    from egglog import get_callable_args

    return get_callable_args(s.encoding.terms[loop_sid])[1]


def test_bug2_facts_in_the_egraph_cover_every_producer_kind():
    from egtile.schedule import dataflow as D

    s = saturate(bug2_kernel())
    g, t, B = s.egraph, s.encoding.terms, _body(s, 1)
    # Both buffers are guarded by the loop's barriers, the SIMT-produced one included.
    assert s.holds(D.guarded(B, String("B_shared")))
    assert s.holds(D.guarded(B, String("A_shared")))
    # `B_out[ko, 0] = B_shared[0]` (sid 5) reads a guarded buffer; the SIMT store loop (2) is a producer.
    assert g.extract(D.reads_guarded(B, t[5])).value is True
    assert s.holds(D.producer(t[2], B)) and s.holds(D.producer(t[4], B))
    assert s.holds(D.consumer(t[5], B)) and not s.holds(D.producer(t[5], B))
    assert g.extract(D.sid_of(t[4])).value == 4


def test_the_wait_from_tma_only_mutant_derives_its_own_narrower_relation():
    from egtile.rules import barrier

    s = saturate(bug2_kernel(), R.mutant("wait-from-tma-only"))
    g, t, B = s.egraph, s.encoding.terms, _body(s, 1)
    # Only the TMA copy counts for the mutant's relation, so sid 5's read of B_shared is not "TMA-guarded".
    assert s.holds(barrier.guarded_tma(B, String("A_shared")))
    assert not s.holds(barrier.guarded_tma(B, String("B_shared")))
    assert g.extract(barrier.reads_tma_guarded(B, t[5])).value is False


def test_bug1_extern_loop_is_not_effect_local():
    from egtile.schedule import dataflow as D

    s = saturate(bug1_kernel())
    assert s.egraph.extract(D.fails_st(String("effect-local"), s.encoding.terms[4])).value is True
    r = optimize(bug1_kernel())
    rej = next(x for x in r.rejected if x.rule == "replicate-parallel" and x.sid == 4)
    assert rej.failed == ("effect-local",) and "counters" in rej.reason and "address_of" in rej.reason


# ----------------------------------------------------------------------------------------------------
# Staged saturation


def test_every_stage_saturates_on_the_seeds_and_is_reported():
    r = optimize(bug2_kernel())
    assert [s.stage for s in r.stages] == ["restructure", "pipeline", "copy", "barrier", "partition"]
    assert all(s.stop_reason == "saturated" and s.nodes > 0 and s.iterations >= 1 for s in r.stages)
    assert "pipeline-warp-specialize" in r.stages[1].fired
    assert not r.limits_hit


def test_an_iteration_limit_is_reported_and_warned_not_silent():
    with pytest.warns(RuntimeWarning, match="iteration-limit"):
        r = optimize(K.late_read(4), limits=Limits(iterations=1))
    barrier = next(s for s in r.stages if s.stage == "barrier")
    assert barrier.stop_reason == "iteration-limit"
    assert "LIMIT HIT" in r.explain()


def test_a_node_limit_is_reported():
    with pytest.warns(RuntimeWarning, match="node-limit"):
        r = optimize(bug2_kernel(), limits=Limits(nodes=10))
    assert r.limits_hit and all(s.stop_reason == "node-limit" for s in r.limits_hit)


def test_an_egglog_failure_in_a_rule_is_a_rule_error_naming_it():
    from egtile.rules.partition import elect

    bad = Rule(
        name="divide-by-zero", stage="partition", doc="a broken user rule",
        variables=(("sid", i64),),
        lhs=lambda v: schema.Stmt.scalar(v.sid),
        rhs=lambda v: elect(v.sid / i64(0)),
    )
    with pytest.raises(RuleError, match=r"rule 'divide-by-zero' \(stage 'partition'\)"):
        optimize(bug2_kernel(), rules=R.builtin() + bad)


def test_a_rust_panic_is_wrapped_too(monkeypatch):
    class PanicException(BaseException):
        pass

    def boom(self, *a, **k):
        raise PanicException("assertion failed: cost >= 0")

    from egtile.schedule.saturate import program

    g = EGraph()
    encode(bug2_kernel(), R.builtin(), g)
    monkeypatch.setattr(EGraph, "run", boom)
    stage, rules = R.builtin().stages()[1]
    with pytest.raises(RuleError, match="pipeline-serial.*Rust panic"):
        run_stage(g, stage, rules, Limits(), program(R.builtin()).support)


def test_decoding_an_unknown_constructor_is_an_error():
    from egtile.rules.partition import elect
    from egtile.schedule.decode import names_of

    with pytest.raises(ScheduleError, match="no declaration of the ruleset names"):
        to_node(schema.Block.nil())
    node = to_node(elect(3), names_of(R.builtin().decisions))
    assert node.op == "elect" and node.sid == 3
    with pytest.raises(ScheduleError, match="scheduling decision"):
        decode_kernel((node,), bug2_kernel())


def test_bool_analysis_defaults_exist_for_every_member():
    from egtile.schedule import dataflow as D

    s = saturate(bug1_kernel())
    B, t = _body(s, 2), s.encoding.terms
    for sid in (3, 4):
        assert isinstance(s.egraph.extract(D.writes_guarded(B, t[sid])).value, bool)
    assert s.egraph.extract(D.reads_guarded(B, t[4])) == Bool(False)


def test_the_fast_table_reader_agrees_with_function_values():
    from egtile.schedule.tables import _rows_slow, rows

    s = saturate(bug2_kernel())
    fast = rows(s.egraph, schema.diag, 3)
    assert fast and sorted(fast) == sorted(_rows_slow(s.egraph, schema.diag))
    assert ("pipeline-warp-specialize", "!", 1) in fast


def test_reused_egraphs_leave_no_state_between_calls():
    first = optimize(bug1_kernel())
    second = optimize(bug2_kernel())
    again = optimize(bug1_kernel())
    assert again.scheduled == first.scheduled and again.cost == first.cost
    assert [s.nodes for s in again.stages] == [s.nodes for s in first.stages]
    assert optimize(bug2_kernel()).scheduled == second.scheduled
