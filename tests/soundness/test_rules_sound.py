"""Soundness of the rules: every schedule the rules can produce for a random program is legal.

For each generated program (:mod:`programs`) the cheapest schedule of the default catalog and one more
legal schedule (extracted from the catalog with a rule removed, so extraction must pick another legal
term) are checked: ``verify`` finds nothing, and the simulator under every policy reports nothing and
reproduces the reference interpreter's outputs exactly. Fixed example budget and derandomized
generation: the run is the same on every machine.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from soundness.check import VARIANTS, check, ruleset, schedule, scheduled_result
from soundness.conftest import long_budget
from soundness.gemm_programs import gemm_programs
from soundness.programs import programs

from egtile import rules

BUDGET = 22  # programs in CI (each: the cheapest schedule, and another where a rule fired); 400 with --soundness-long
LONG_BUDGET = 400


def variant_choices() -> list[str]:
    """Named rule subsets, and the catalog without each of its rules in turn."""
    named = [v for v in VARIANTS if v != "cheapest"]
    return named + [f"without:{r.name}" for r in rules.catalog()]


def removed_rules(choice: str) -> tuple[str, ...]:
    """The rules variant ``choice`` removes from the default ruleset."""
    return (choice.split(":", 1)[1],) if choice.startswith("without:") else VARIANTS[choice]


def relevant_first(variants: list[str], fired: set[str]) -> list[str]:
    """``variants`` in their drawn order, those that remove a rule that fired in the cheapest schedule first.

    Removing rules none of which fired leaves the e-graph as it was (a rule that never fired added nothing)
    and so, nearly always, the cheapest schedule itself, which the loop below skips after paying a whole
    scheduling run for it; ordering by relevance spends those runs on variants that give another schedule."""
    return sorted(variants, key=lambda v: not any(r in fired for r in removed_rules(v)))


def variant_ruleset(choice: str) -> rules.RuleSet:
    if choice.startswith("without:"):
        return rules.default().without(choice.split(":", 1)[1])
    return ruleset(choice)


def _check_sound(generator, budget: int, soundness_long: bool, others: bool) -> None:
    """For each program drawn from ``generator`` (``budget`` of them): the default rules' cheapest schedule,
    and, when ``others``, the first variant (drawn order, relevant ones first) that gives another schedule, pass
    :func:`check` (verifier, simulator against the interpreter)."""

    @settings(max_examples=budget, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(generator, st.permutations(variant_choices()))
    def sound(program, variants):
        result = scheduled_result(program.kernel, rules.default())
        assert result is not None, f"the default rules find no schedule for {program}"
        cheapest = result.scheduled
        problems = check(program.kernel, cheapest, program.args())
        assert not problems, f"{program}, cheapest schedule:\n" + "\n".join(problems[:10])
        tally.update(programs=1, schedules=1)
        if soundness_long:  # progress, so that a long run stopped by a time limit still gives its figures
            print(f"[soundness] program {tally['programs']}: {program}", flush=True)
        if not others:
            return
        # the first variant (in drawn order, those removing a rule that fired first) that gives another schedule
        tried: set[frozenset] = set()
        for variant in relevant_first(variants, set(result.rules_fired))[:6]:
            removed = frozenset(removed_rules(variant))
            if removed in tried:  # "serial" is "without:pipeline-warp-specialize": the same ruleset
                continue
            tried.add(removed)
            other = schedule(program.kernel, variant_ruleset(variant))
            if other is None or other.body == cheapest.body:
                continue
            problems = check(program.kernel, other, program.args(seed=1))
            assert not problems, f"{program}, schedule {variant}:\n" + "\n".join(problems[:10])
            tally.update(schedules=1)
            if soundness_long:
                print(f"[soundness] program {tally['programs']}: second schedule ({variant})", flush=True)
            return

    tally = Counter()
    sound()
    print(f"[soundness] {tally['programs']} programs, {tally['schedules']} schedules checked (budget {budget})")


def test_default_rules_are_sound(soundness_long):
    budget = long_budget(LONG_BUDGET) if soundness_long else BUDGET
    _check_sound(programs(), budget, soundness_long, others=True)


GEMM_BUDGET = 3
GEMM_LONG_BUDGET = 80


def test_gemm_and_reduction_programs_are_sound(soundness_long):
    """The gemm / reduction generator (:mod:`gemm_programs`: wgmma or SIMT ``T.gemm`` into a register
    fragment or a shared tile, ``T.reduce_*``, a ``T.Parallel`` by the accumulator's layout with
    ``T.if_then_else``, whole and partial copies out, 1-3 consumer warpgroups): the cheapest schedule and
    one other legal one pass ``verify`` and reproduce the interpreter exactly in the simulator."""
    budget = long_budget(GEMM_LONG_BUDGET) if soundness_long else GEMM_BUDGET
    # the simulator is slow on a gemm tile: other schedules only in long runs
    _check_sound(gemm_programs(), budget, soundness_long, others=soundness_long)


CODEGEN_BUDGET = 8


def test_generated_schedules_compile_with_nvrtc(soundness_long):
    """The backend meets the same random programs: every cheapest schedule lowers to CUDA C++ that NVRTC
    compiles for sm_90a (no GPU needed), so a construct the rules can produce but codegen cannot emit
    shows up here, not on the user's GPU."""
    from soundness.protocol import missing_sass

    from egtile.codegen import build, sass

    @settings(max_examples=long_budget(LONG_BUDGET) if soundness_long else CODEGEN_BUDGET, derandomize=True, database=None,
              deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(programs())
    def compiles(program):
        sched = schedule(program.kernel, rules.default())
        assert sched is not None, f"the default rules find no schedule for {program}"
        built = build(sched)
        assert built.cubin[:4] == b"\x7fELF", program
        # the machine code holds the synchronization the schedule needs (fence.proxy.async as
        # FENCE.VIEW.ASYNC.S, try_wait.parity as SYNCS.PHASECHK, ...), not only the helpers' names
        if sass.available():
            missing = missing_sass(sched, sass.disassemble(built.cubin))
            assert not missing, f"{program}: {missing}"

    compiles()


GEMM_CODEGEN_BUDGET = 2


def test_generated_gemm_schedules_compile_with_nvrtc(soundness_long):
    """The gemm / reduction programs' cheapest schedules (wgmma or SIMT) lower to CUDA C++ that NVRTC
    compiles for sm_90a, with the synchronization the schedule needs present in the machine code."""
    from soundness.protocol import missing_sass

    from egtile.codegen import build, sass

    @settings(max_examples=long_budget(40) if soundness_long else GEMM_CODEGEN_BUDGET, derandomize=True,
              database=None, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(gemm_programs())
    def compiles(program):
        sched = schedule(program.kernel, rules.default())
        assert sched is not None, f"the default rules find no schedule for {program}"
        built = build(sched)
        assert built.cubin[:4] == b"\x7fELF", program
        if sass.available():
            missing = missing_sass(sched, sass.disassemble(built.cubin))
            assert not missing, f"{program}: {missing}"

    compiles()


GPU_BUDGET = 16


@pytest.mark.gpu
def test_generated_programs_on_the_gpu(soundness_long):
    """The widened generator's programs on the H200: each cheapest schedule's kernel, launched three times
    on fresh random inputs with poisoned outputs, reproduces the interpreter's outputs exactly (the
    programs use only exact operations: float16 +, -, * rounded once, integer atomics)."""
    import torch

    from egtile.codegen import build
    from egtile.interp import interpret
    from egtile.runtime import CudaKernel, gpu_available

    if not gpu_available():
        pytest.skip("needs a CUDA GPU of compute capability 9.0")

    @settings(max_examples=long_budget(200) if soundness_long else GPU_BUDGET, derandomize=True, database=None,
              deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(programs())
    def on_gpu(program):
        sched = schedule(program.kernel, rules.default())
        assert sched is not None, program
        kernel = CudaKernel(build(sched), sched, watchdog_s=30.0)
        for seed in range(3):
            args = program.args(seed)
            ref = [a.clone() for a in args]
            interpret(program.kernel, *ref)
            dev = [a.cuda() for a in args]
            kernel(*dev)
            torch.cuda.synchronize()
            for p, got, want in zip(program.kernel.params, dev, ref):
                assert torch.equal(got.cpu(), want), f"{program}: {p.name} differs on the GPU (seed {seed})"

    on_gpu()
