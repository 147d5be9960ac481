"""The rule-authoring API: Rule / RuleSet values, register / catalog, condition removal, mutants, and the
worked example of docs/rules.md (executed as written)."""

from __future__ import annotations

import re
from pathlib import Path

import egtile.rules as R
import pytest
from egglog import i64
from egtile.rules import Rule, RuleSet
from seed_schedules import bug2_kernel

import egtile
from egtile.schedule.schema import Stmt
from egtile.ir import Copy, TileOp, TmaLoad, swalk

DOC = Path(__file__).resolve().parents[1] / "docs" / "rules.md"


def _misaligned_cp_async_kernel():
    """A producer copy into the second row of a shared tile: 16 B chunks, but not 128 B aligned (no TMA)."""
    from egtile import language as T

    @T.prim_func
    def main(In: T.Tensor((4, 8), "float16"), Out: T.Tensor((4, 8), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((2, 8), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[k, 0:8], X_s[1, 0:8])
                for i in T.Parallel(8):
                    Out[k, i] = X_s[1, i]

    return main


def test_catalog_lists_every_builtin_rule_in_stage_order():
    names = [r.name for r in R.catalog()]
    assert names[:3] == ["parallel-fission", "pipeline-serial", "pipeline-warp-specialize"]
    assert {"copy-to-tma", "copy-to-cp-async", "copy-to-simt", "copy-to-simt-producer", "produce-simt", "sink-wait",
            "hoist-release", "partition-parallel", "replicate-parallel", "elect-scalar", "replicate-scalar"} <= set(names)
    assert [s for s, _ in R.default().stages()] == list(R.STAGES)
    declared = {d.constructor for d in R.declarations()}
    for r in R.catalog():
        assert r.doc and r.stage, r.name
        # Every rule builds a declared constructor (cost, lowering, explanation in one place); the barrier moves
        # rebuild a list, a restructuring rule builds a new form of an encoded statement, and a rule that rewrites a
        # statement list (the prologue load, egtile.rules.prologue_tma) builds a new form of the list.
        from egtile.schedule.schema import Block

        assert r.produces in declared or r.produces == Block.cons or isinstance(r.rhs(r.pattern_vars()), Block), \
            r.name


def test_every_rule_and_condition_is_documented():
    text = DOC.read_text()
    for r in R.builtin():
        assert f"`{r.name}`" in text, f"docs/rules.md does not list rule {r.name}"
        for c in r.conditions:
            assert c.name in text, f"docs/rules.md does not name condition {c.name} of {r.name}"
    for m in R.MUTANTS:
        assert f"`{m}`" in text


def test_the_worked_example_of_docs_rules_md_registers_a_rule_that_optimize_uses():
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL).group(1)
    before = optimize_tree_ops(_misaligned_cp_async_kernel())
    assert "simt_load" in before and "cp_async_load" not in before
    try:
        exec(compile(code, str(DOC), "exec"), {})  # noqa: S102 - the documented example, run as written
        assert "auto-cp-async" in [r.name for r in R.catalog()]
        r = egtile.optimize(_misaligned_cp_async_kernel())
        ops = {n.op for top in r.tree for n in top.walk()}
        assert "cp_async_load" in ops
        assert any(d.rule == "auto-cp-async" for d in r.decisions)
        cp = [x for x in swalk(r.scheduled.body) if isinstance(x, TileOp) and x.inst == "cp_async"]
        assert len(cp) == 1 and isinstance(cp[0].op, Copy)
        full = r.scheduled.barrier("full_0")
        assert full.arrive_count == 128
        # On the seed the TMA copy is eligible, so TMA stays cheaper than the new alternative.
        r2 = egtile.optimize(bug2_kernel())
        assert any(isinstance(x, TmaLoad) for x in swalk(r2.scheduled.body))
    finally:
        R.unregister("auto-cp-async")
    assert "auto-cp-async" not in [r.name for r in R.catalog()]


def optimize_tree_ops(f) -> set[str]:
    return {n.op for top in egtile.optimize(f).tree for n in top.walk()}


def _dummy(name: str = "my-rule") -> Rule:
    from egtile.rules.partition import elect

    return Rule(name=name, stage="my-stage", doc="d", variables=(("sid", i64),),
                lhs=lambda v: Stmt.scalar(v.sid), rhs=lambda v: elect(v.sid))


def test_a_stage_name_close_to_a_builtin_one_warns():
    from egtile.rules.partition import elect

    with pytest.warns(UserWarning, match="stage 'copyy' is not a builtin stage.*did you mean 'copy'"):
        Rule(name="typo", stage="copyy", doc="d", variables=(("sid", i64),),
             lhs=lambda v: Stmt.scalar(v.sid), rhs=lambda v: elect(v.sid))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _dummy()  # a user stage of its own name: no warning


@pytest.mark.parametrize("name", ["", "   "])
def test_a_rule_without_a_name_is_refused(name):
    from egtile.errors import RuleError

    with pytest.raises(RuleError, match="a Rule needs a non-empty name"):
        _dummy(name)


def test_register_rejects_builtin_names_duplicates_and_non_rules():
    with pytest.raises(ValueError, match="builtin"):
        R.register(_dummy("sink-wait"))
    R.register(_dummy())
    try:
        with pytest.raises(ValueError, match="already registered"):
            R.register(_dummy())
        R.register(_dummy(), replace=True)
        assert [s for s, _ in R.default().stages()][-1] == "my-stage"
    finally:
        R.unregister("my-rule")
    with pytest.raises(TypeError, match="Rule, RuleSet or Decision"):
        R.register("sink-wait")
    with pytest.raises(KeyError, match="no registered user rule or declaration"):
        R.unregister("nope")


def test_ruleset_values_without_rule_and_without_condition():
    rs = R.builtin()
    assert "replicate-parallel" not in rs.without("replicate-parallel")
    assert "replicate-parallel" in rs  # values: the original is unchanged
    weak = rs.without_condition("replicate-parallel", "effect-local")
    assert weak.rule("replicate-parallel").conditions == ()
    assert rs.rule("replicate-parallel").conditions[0].name == "effect-local"
    with pytest.raises(KeyError, match="has no side condition 'nope'"):
        rs.without_condition("replicate-parallel", "nope")
    with pytest.raises(KeyError, match="has no rule"):
        rs.rule("nope")
    with pytest.raises(ValueError, match="two rules named"):
        RuleSet("dup", (rs.rule("sink-wait"), rs.rule("sink-wait")))


def test_every_mutant_is_a_ruleset_that_differs_from_the_builtin_one():
    assert set(R.MUTANTS) >= {"wait-from-tma-only", "effect-blind-to-address-of", "absolute-stage-parity",
                              "arrive-count-off-by-one", "release-before-last-read"}
    base = R.builtin()
    for name in R.MUTANTS:
        m = R.mutant(name)
        # A condition mutant changes a rule; a protocol mutant changes one declaration's lowering.
        assert isinstance(m, RuleSet) and (m.rules != base.rules or m.decisions != base.decisions), name
    with pytest.raises(KeyError, match="known mutants"):
        R.mutant("nope")


def test_optimize_accepts_a_list_of_rules_and_rejects_other_things():
    r = egtile.optimize(bug2_kernel(), rules=list(R.builtin()))
    assert r.rules.name == "custom"
    with pytest.raises(egtile.errors.ArgumentError, match="RuleSet or a sequence"):
        egtile.optimize(bug2_kernel(), rules=["sink-wait"])


def test_at_least_thirty_builtin_conditions_are_derived_in_the_egraph():
    conds = [c for r in R.BUILTIN for c in r.conditions]
    derived = [c for c in conds if c.in_egraph]
    assert len(derived) >= 30, [c.name for c in conds if not c.in_egraph]
    # Only hardware oracles stay in Python: the TMA tensor-map limits, the cp.async widths, the register file,
    # the wgmma shapes / descriptors / register budget (SS and register-A) and the TMA store box.
    # The ping-pong's oracles: wgmma eligibility of its gemms, its constant barrier ids, and the count of the loop
    # body's top-level gemms (a structural count egglog has no aggregate for; egtile.rules.pingpong.gemms_of).
    assert {c.name for c in conds if not c.in_egraph} == {"tma-eligible", "cp-async-eligible", "register-budget",
                                                          "wgmma-eligible", "wgmma-rs-eligible", "tma-store-eligible",
                                                          # the wgmma instruction forms: operand types, and the
                                                          # FP8 form's K-major operands
                                                          "wgmma-operand-types", "wgmma-8bit-k-major",
                                                          "pingpong-gemms-on-tensor-cores", "pingpong-barrier-ids-free",
                                                          "pingpong-two-gemm-turns",
                                                          # the prologue load's: tma-eligible on the kernel-level copy
                                                          "prologue-copy-tma-eligible",
                                                          # the overlap's split of the body into head / softmax /
                                                          # tail (egtile.rules.overlap.split_of), the same counts
                                                          "overlap-two-gemms", "overlap-gemms-on-tensor-cores",
                                                          "overlap-head-independent", "overlap-softmax-independent",
                                                          "overlap-two-stages",
                                                          # the carried wait's: whether the loop bounds decide the
                                                          # head's selects (egtile.analysis.decide's interval proof,
                                                          # egtile.rules.pingpong_carry.open_selects)
                                                          "carry-head-selects-decided"}
    # A derived condition brings the egglog rules that compute it, or reads the core dataflow relations.
    for c in derived:
        assert c.checks or c.derive or c.name in {"prefer-allows-simt", "prefer-allows-tma", "prefer-cp-async",
                                                  "no-read-of-guarded", "no-write-of-guarded",
                                                  "no-access-of-guarded",
                                                  "pingpong-two-consumer-warpgroups"}, c.name  # kernel_threads
