"""Each mutant of the rules (a side condition removed or weakened) is caught by the soundness checks
on some generated program within a fixed example budget. A mutant that escapes means the generator or
the checkers are too weak, not that the mutant is harmless: strengthen them.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from soundness.check import check, schedule
from soundness.programs import programs

from egtile import rules

BUDGET = 40
LONG_BUDGET = 400

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
    mutant = rules.mutant(name)
    budget = LONG_BUDGET if soundness_long else BUDGET
    tried = []

    @settings(max_examples=budget, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def hunt(program):
        tried.append(program)
        sched = schedule(program.kernel, mutant)
        if sched is None:
            return
        problems = check(program.kernel, sched, program.args(), stop_early=True, only=checker)
        if problems:
            raise Caught(program, problems)

    with pytest.raises(Caught) as caught:
        hunt()
    assert caught.value.problems
    print(f"{name} ({checker}): caught after {len(tried)} program(s) on {caught.value}")


def test_every_mutant_is_listed():
    # the parametrization above follows egtile.rules.MUTANTS; each one builds
    for name in ALL_MUTANTS:
        assert isinstance(rules.mutant(name), rules.RuleSet)
