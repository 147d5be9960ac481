"""Each mutant of the rules (a side condition removed or weakened) is caught by the soundness checks
on some generated program within a fixed example budget. A mutant that escapes means the generator or
the checkers are too weak, not that the mutant is harmless: strengthen them.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from soundness.check import check, schedule
from soundness.conftest import long_budget
from soundness.programs import programs

from egtile import rules

BUDGET = 40
LONG_BUDGET = 400
# A listed gap is hunted over its whole budget to show it is still a gap: the simulator's two took 75 of the
# suite's CPU seconds at BUDGET. CI hunts a gap over the first GAP_BUDGET programs (the check is the same: it
# fails once a program among them catches the mutant); long runs over LONG_BUDGET, as for every mutant.
GAP_BUDGET = 8

# the mutants both checkers must catch, and those the rules list as pending a checker (caught now too)
ALL_MUTANTS = dict(rules.MUTANTS)


class Caught(Exception):
    def __init__(self, program, problems):
        super().__init__(f"{program}: {problems[0]}")
        self.program = program
        self.problems = problems


@pytest.mark.parametrize("checker", ["verify", "sim"])
@pytest.mark.parametrize("name", sorted(ALL_MUTANTS))
def test_mutant_is_caught(name, checker, soundness_long):
    """Both checkers catch every mutant on their own: the verifier statically, the simulator by running
    the schedule (its reports, or outputs that differ from the interpreter)."""
    gap = rules.MUTANT_GAPS.get((name, checker))
    mutant = rules.mutant(name)
    budget = long_budget(LONG_BUDGET) if soundness_long else (GAP_BUDGET if gap is not None else BUDGET)
    tried = []

    @settings(max_examples=budget, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    # the first generator's programs (the budgets were set on them); the widened one in long runs
    @given(programs(wide=soundness_long))
    def hunt(program):
        tried.append(program)
        sched = schedule(program.kernel, mutant)
        if sched is None:
            return
        problems = check(program.kernel, sched, program.args(), stop_early=True, only=checker)
        if problems:
            raise Caught(program, problems)

    if gap is not None:
        # A listed gap must still be a gap: once the checkers catch it, the entry has to go.
        try:
            hunt()
        except Caught:
            pytest.fail(f"{name} ({checker}) is caught now: remove it from egtile.rules.MUTANT_GAPS")
        pytest.xfail(f"known checker gap: {gap} (not caught on {len(tried)} programs)")
    with pytest.raises(Caught) as caught:
        hunt()
    assert caught.value.problems
    print(f"{name} ({checker}): caught after {len(tried)} program(s) on {caught.value}")


def test_every_listed_gap_names_a_real_mutant_and_checker():
    for name, checker in rules.MUTANT_GAPS:
        assert name in rules.MUTANTS and checker in ("verify", "sim")


def test_every_mutant_is_listed():
    # the parametrization above follows egtile.rules.MUTANTS; each one builds
    for name in ALL_MUTANTS:
        assert isinstance(rules.mutant(name), rules.RuleSet)


def test_a_rule_authors_mutant_registers_and_builds():
    """`register_mutant` adds a mutant without editing egtile's files; `mutant()` builds it, and a name only put in
    the dict says how to register it (it listed the name as known while refusing it)."""
    built = []

    def build():
        built.append(1)
        return rules.builtin().without_condition("parallel-fission", "fission-keeps-local-flow")

    rules.register_mutant("user:fission-blind", build, "fission ignores local flow (a rule author's mutant)")
    try:
        assert "user:fission-blind" in rules.MUTANTS
        assert isinstance(rules.mutant("user:fission-blind"), rules.RuleSet) and built == [1]
        with pytest.raises(ValueError, match="builtin mutant"):
            rules.register_mutant("wait-from-tma-only", build, "clash")
    finally:
        rules.unregister_mutant("user:fission-blind")
    assert "user:fission-blind" not in rules.MUTANTS
    rules.MUTANTS["user:only-in-dict"] = "no builder"
    try:
        with pytest.raises(KeyError, match=r"register_mutant\(name, build, doc\)"):
            rules.mutant("user:only-in-dict")
    finally:
        del rules.MUTANTS["user:only-in-dict"]
