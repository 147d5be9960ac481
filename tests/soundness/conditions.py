"""Rule-level mutants: every named side condition of every rule of the default ruleset, removed one at a time
(``RuleSet.without_condition``), and a hunt for a program on which the weakened rule makes a schedule the
checkers reject.

:func:`named_conditions` enumerates them from ``egtile.rules.default()`` (so a condition a rule gains is a
mutant at once); :func:`hunt` walks generated programs in a fixed order, schedules each with the default
ruleset and with every still-uncaught mutant, and checks only the schedules that differ from the default
one (a mutant that schedules a program exactly as the default rules do cannot be caught on it).

``python tests/soundness/conditions.py [N]`` runs the hunt over ``N`` programs of each generator and prints,
for each condition, the first program that caught it (the figures of docs/soundness.md).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from egtile import rules
from egtile.errors import ScheduleError
from egtile.schedule.driver import optimize


def named_conditions(rs: rules.RuleSet | None = None) -> list[tuple[str, str]]:
    """``(rule, condition)`` for every named side condition of every rule of ``rs`` (default ruleset)."""
    rs = rs if rs is not None else rules.default()
    return [(r.name, c.name) for r in rs for c in r.conditions]


def condition_mutant(rule: str, condition: str) -> rules.RuleSet:
    return rules.default().without_condition(rule, condition)


@dataclass
class Catch:
    program: object
    how: str


def _try_schedule(kernel, rs):
    """``(scheduled | None, error | None)``: a refusal (``ScheduleError``) is no schedule; any other error
    (a lowering that raises, a rule the e-graph cannot encode) is the mutant failing loudly."""
    try:
        return optimize(kernel, rules=rs).scheduled, None
    except ScheduleError:
        return None, None
    except Exception as e:  # noqa: BLE001 -- a mutant that crashes the compiler is caught, loudly
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def hunt(programs: Iterable, mutants: dict[tuple[str, str], rules.RuleSet], *,
         check: Callable, log: Callable[[str], None] | None = None) -> dict[tuple[str, str], Catch]:
    """The first program of ``programs`` on which each mutant's schedule differs from the default's and
    ``check(kernel, sched, args)`` reports a problem (or the mutant's compile raises)."""
    caught: dict[tuple[str, str], Catch] = {}
    default = rules.default()
    for n, program in enumerate(programs):
        try:
            result = optimize(program.kernel, rules=default)
            base, failed = result.scheduled, {(x.rule, c) for x in result.rejected for c in x.failed}
        except ScheduleError:
            base, failed = None, None
        for key, rs in mutants.items():
            if key in caught or (failed is not None and key not in failed):
                # the default run rejected no match of the rule for this condition: without it the e-graph
                # is the same (a rule fires only where every condition holds), so is the schedule
                continue
            sched, err = _try_schedule(program.kernel, rs)
            if err is not None:
                caught[key] = Catch(program, f"compile raised {err}")
            elif sched is None or (base is not None and sched.body == base.body and sched.buffers == base.buffers
                                   and sched.barriers == base.barriers and sched.threads == base.threads):
                continue
            else:
                problems = check(program.kernel, sched, program.args())
                if problems:
                    caught[key] = Catch(program, problems[0])
            if key in caught and log:
                log(f"  {key[0]}.{key[1]}: caught at program {n}: {caught[key].how[:160]}")
        if len(caught) == len(mutants):
            break
    return caught


def _examples(strategy, n: int, seed: int = 0) -> list:
    """``n`` programs of ``strategy`` in a fixed order (derandomized hypothesis generation)."""
    from hypothesis import HealthCheck, Phase, given, settings

    out: list = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(p):
        out.append(p)

    collect()
    return out


def main(n: int) -> None:
    from soundness.check import check
    from soundness.gemm_programs import gemm_programs
    from soundness.programs import programs

    from egtile.externs import register_extern, registered

    if registered("atomic_inc") is None:  # as the suite's conftest does
        register_extern("atomic_inc", lambda ptr: ptr.atomic_add(1))
    keys = named_conditions()
    mutants = {k: condition_mutant(*k) for k in keys}
    t0 = time.time()
    progs = _examples(programs(), n) + _examples(gemm_programs(), max(1, n // 4))
    print(f"{len(keys)} named conditions, {len(progs)} programs", flush=True)
    caught = hunt(progs, mutants, check=lambda k, s, a: check(k, s, a, stop_early=True),
                  log=lambda s: print(s, flush=True))
    for k in keys:
        print(f"{'CAUGHT' if k in caught else 'alive '} {k[0]}.{k[1]}" + (f"  ({caught[k].program})" if k in caught else ""))
    print(f"{len(caught)}/{len(keys)} caught over {len(progs)} programs in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/soundness/", 1)[0])
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
