"""The protocol reports name the culprit, not the consequence: for each planted bug of a small hand-written
warp-specialized kernel (tests/protocol_kernels.py), the verifier's report (egtile.compile, target "sim") leads
with the statement to change at the user's file:line, the barrier, the phase or parity, and a fix; the
simulator's own report (egtile.sim.simulate, run anyway) names the same culprit where it finds one."""

from __future__ import annotations

import os

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ScheduleError, SimulationError
from egtile.lower.protocol import schedule_protocol
from egtile.sim import simulate

from protocol_kernels import divergent, line, scale, tile_ring

FILE = os.path.join(os.path.dirname(__file__), "protocol_kernels.py")


def _headline(err: ScheduleError, verdict: str = "hand-written barrier protocol is wrong") -> tuple[str, str]:
    lines = err.message.split("\n")
    assert verdict in lines[0]
    assert lines[2].strip().startswith("fix: "), err.message
    return lines[1], lines[2]


# bug -> (the culprit's marker, words the headline must hold, words the fix must hold)
CASES = {
    "parity": ("full_wait", ["parity 1 at k=0", "full[0]", "phases start at 0", "returns at once"],
               ["at k=0 this wait gives parity 1", "parity (k // S) % 2",
                f"check that (`T.mbarrier_arrive(full[k % S])` at line {line(scale, 'full_arrive')})"]),
    "no_full_arrive": ("tma", ["nothing arrives on full[0]", "phase 0", f"{line(scale, 'full_wait')}"],
                       ["arrive on `full[k % S]` in wg1 after the T.tma_copy at line"]),
    "no_empty_arrive": ("read", ["nothing arrives on empty[0]", "phase 0"],
                        [f"arrive on `empty[k % S]` in wg0 after the last read of `buf` at line {line(scale, 'read')}"]),
    "read_before_wait": ("early_read", ["read of `buf`", f"line {line(scale, 'full_wait')}", "comes before"],
                         [f"after the wait at line {line(scale, 'full_wait')}"]),
    "count": ("full_alloc", ["arrive_count 256", "128 arrivals", "full[0]", "phase 0",
                             f"line {line(scale, 'full_arrive')}"], ["use 128"]),
    "expect_tx": ("expect", ["128 threads of wg1", "128 x 512 = 65536", "phase 0 of full[0]", "deliver 512"],
                  ["bytes per phase, whichever thread posts it", "remove this call"]),
}


def test_an_arrive_on_the_wrong_slot_is_named_by_the_fix():
    """The wait and the arrivals disagree and the verifier cannot know which side the user got wrong (found by a
    fresh user: the report blamed a correct wait and told them to flip its parity): the fix names the arrive too."""
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(scale("wrong_slot"), target="sim")
    head, fix = _headline(exc.value)
    assert f"line {line(scale, 'wrong_slot_arrive')}" in head + fix, (head, fix)
    assert "drop an" not in fix


@pytest.mark.parametrize("bug", sorted(CASES))
def test_the_verifier_names_the_culprit_line_first(bug):
    marker, head_words, fix_words = CASES[bug]
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(scale(bug), target="sim")
    head, fix = _headline(exc.value)
    assert f"{FILE}:{line(scale, marker)}" in head, head
    for w in head_words:
        assert w in head, (w, head)
    for w in fix_words:
        assert w in fix, (w, fix)
    assert exc.value.loc is not None and exc.value.loc.line == line(scale, marker)
    assert "what the verifier found:" in exc.value.message  # the verifier's own words stay below


def test_a_wait_in_a_divergent_branch_names_the_wait_and_the_branch():
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(divergent(), target="sim")
    # a condition on data around a barrier operation is beyond the verifier (it does not follow such paths), which
    # says so rather than calling the protocol wrong; the culprit line still names the wait and the branch
    head, fix = _headline(exc.value, "cannot check its hand-written barrier protocol")
    assert f"{FILE}:{line(divergent, 'div_wait')}" in head and "inside the branch `if X[0, 0] > 0.0`" in head
    assert "out of the branch" in fix
    assert exc.value.loc.line == line(divergent, "div_wait")


def test_the_correct_kernel_runs_and_matches():
    kernel = egtile.compile(scale(), target="sim")
    x = torch.randn(4, 128, generator=torch.Generator().manual_seed(5))
    y = torch.full((4, 128), float("nan"))
    kernel(x, y)
    assert torch.equal(y, x * 2)


def _sim_error(fn) -> SimulationError:
    sched = schedule_protocol(fn.kernel).scheduled
    x = torch.randn(4, 128, generator=torch.Generator().manual_seed(6))
    r = simulate(sched, x, torch.full((4, 128), float("nan")))
    assert not r.ok
    with pytest.raises(SimulationError) as exc:
        r.raise_for_errors()
    return exc.value


# the simulator's culprit, where its run shows one: bug -> (marker of the error's line, words of its first line)
SIM_CASES = {
    "no_full_arrive": ("full_wait", ["full[0] phase 0", "no statement arrives on full", "T.mbarrier_arrive is missing"]),
    "no_empty_arrive": ("empty_wait", ["empty[0] phase 0", "no statement arrives on empty"]),
    "count": ("full_alloc", ["128/256 arrivals", "arrive_count 256", f"protocol_kernels.py:{line(scale, 'full_arrive')}"]),
    "expect_tx": ("expect", ["65536 expected transaction bytes", "per thread"]),
    "read_before_wait": ("early_read", ["buf"]),
}


@pytest.mark.parametrize("bug", sorted(SIM_CASES))
def test_the_simulator_report_names_the_culprit_and_user_lines(bug):
    marker, words = SIM_CASES[bug]
    err = _sim_error(scale(bug))
    first = err.message.split("\n")[0]
    for w in words:
        assert w in first, (w, err.message)
    assert err.loc is not None and err.loc.line == line(scale, marker), (err.loc, err.message)
    assert "statements named above:" in err.message and "protocol_kernels.py:" in err.message


def test_every_simulator_report_names_statements_whichever_path_raises_it():
    """SimResult carries the kernel: raise_for_errors names statements and lines without egtile.api."""
    sched = schedule_protocol(scale("parity").kernel).scheduled
    r = simulate(sched, torch.randn(4, 128), torch.full((4, 128), float("nan")))
    assert r.kernel is sched.kernel
    named = r.named()
    assert named and all("protocol_kernels.py:" in n for n in named)


def _two_rounds(looped: bool):
    """Two rounds of a one-stage protocol: written as a loop (what egtile's verifier groups phases by), or one
    after the other, which the verifier counts as one phase receiving both rounds' arrivals."""
    if looped:
        @T.prim_func
        def main(X: T.Tensor((2, 128), "float32"), Y: T.Tensor((2, 128), "float32")):
            with T.Kernel(1, threads=256):
                buf = T.alloc_shared((128,), "float32")
                full = T.alloc_barrier(128)
                empty = T.alloc_barrier(128)
                for r in T.serial(2):
                    with T.ws(1):
                        T.mbarrier_wait_parity(empty, (r % 2) ^ 1)
                        T.tma_copy(X[r, 0], buf, barrier=full)
                        T.mbarrier_arrive(full)
                    with T.ws(0):
                        T.mbarrier_wait_parity(full, r % 2)
                        for i in T.Parallel(128):
                            Y[r, i] = buf[i] * 2.0
                        T.mbarrier_arrive(empty)
        return main

    @T.prim_func
    def main(X: T.Tensor((2, 128), "float32"), Y: T.Tensor((2, 128), "float32")):
        with T.Kernel(1, threads=256):
            buf = T.alloc_shared((128,), "float32")
            full = T.alloc_barrier(128)
            empty = T.alloc_barrier(128)
            with T.ws(1):
                T.tma_copy(X[0, 0], buf, barrier=full)
                T.mbarrier_arrive(full)
                T.mbarrier_wait_parity(empty, 0)
                T.tma_copy(X[1, 0], buf, barrier=full)
                T.mbarrier_arrive(full)
            with T.ws(0):
                T.mbarrier_wait_parity(full, 0)
                for i in T.Parallel(128):
                    Y[0, i] = buf[i] * 2.0
                T.mbarrier_arrive(empty)
                T.mbarrier_wait_parity(full, 1)
                for i in T.Parallel(128):
                    Y[1, i] = buf[i] * 2.0
    return main


def test_rounds_written_one_after_another_are_refused_with_the_loop_form_named():
    """A known limitation of the verifier's phase grouping (by loop iteration): the error says how to write it."""
    with pytest.raises(ScheduleError, match=r"write the rounds as a loop"):
        egtile.compile(_two_rounds(looped=False), target="sim")
    x = torch.randn(2, 128)
    y = torch.full((2, 128), float("nan"))
    egtile.compile(_two_rounds(looped=True), target="sim")(x, y)
    torch.testing.assert_close(y, x * 2.0, rtol=0, atol=0)


def _ring(bug: str):
    """Two blocks of a two-stage TMA ring, 6 rounds; `bug` makes one wait's parity right for rounds 0 and 1 only."""
    return tile_ring(2, 6, free_parity=(lambda k, s: T.min(k // s, 1) ^ 1) if bug == "release" else None,
                     data_parity=(lambda k, s, by: T.min(k // s, 1)) if bug == "data" else None)


@pytest.mark.parametrize("bug, head, fix", [
    ("release", "waits for parity 0 at k=4, but what it guards comes with phase 1 of empty[0] (parity 1): parity 0 "
                "names phase 0, which has completed", "it must wait for parity 1 (phase 1 of empty[0])"),
    ("data", "waits for parity 1 at k=4, but what it guards comes with phase 2 of full[0] (parity 0): parity 1 names "
             "phase 1, which has completed", "it must wait for parity 0 (phase 2 of full[0])"),
])
def test_a_parity_wrong_from_the_second_lap_on_names_the_phase_it_must_wait_for(bug, head, fix):
    # The report used to say the barrier was "still in phase 0" and the wait "must wait for parity 0 (the first
    # phase)" at k=4, contradicting itself (a fresh soundness tester's report).
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(_ring(bug), target="sim")
    first, fix_line = exc.value.message.split("\n")[1:3]
    assert head in first and "still in phase 0" not in first
    assert fix in fix_line


def _signaller(waits: bool):
    """full[s] counts 256 arrivals: the TMA producer's (wg1, after its wait for a free slot) and a signalling
    warpgroup's (wg2), which waits for the free slot too only when `waits`."""
    return tile_ring(2, 4, signaller="waits" if waits else "free")


def test_an_agent_arriving_ahead_of_the_previous_phase_is_reported():
    # The verifier grouped each agent's j-th arrivals into phase j; wg2, waiting on nothing, can arrive for round
    # k + S while phase k is pending, where the hardware counts it: phase 0 completes on wg2's arrivals with no TMA
    # bytes. It passed the verifier (and the cuda target) while the simulator deadlocked (a fresh soundness tester's
    # report).
    from egtile.lower.protocol import schedule_protocol
    from egtile.verifier import verify

    found = verify(schedule_protocol(_signaller(False).kernel).scheduled)
    assert any(v.property == "L4" and "wg2's arrival on full[0]" in v.message and "belongs to phase 1" in v.message
               for v in found), found
    assert not verify(schedule_protocol(_signaller(True).kernel).scheduled)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_the_signalling_warpgroup_that_waits_for_the_slot_runs(target):
    x = torch.randn(32, 64)
    y = torch.full_like(x, float("nan"))
    egtile.compile(_signaller(True), target=target)(x, y)
    assert torch.equal(y, 2.0 * x)


def _prefetching(stages: int = 2, steps: int = 5, count: str = "const"):
    """The producer runs one round ahead: it loads round 0 before the loop and round k + 1 in iteration k."""
    BLOCK = 128

    @T.prim_func
    def main(X: T.Tensor((2, steps, BLOCK), "float32"), n: T.Tensor((2,), "int32"),
             Y: T.Tensor((2, steps, BLOCK), "float32")):
        with T.Kernel(2, threads=256) as bx:
            buf = T.alloc_shared((stages, BLOCK), "float32")
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([128] * stages)
            cnt = steps if count == "const" else n[bx]
            with T.ws(1):
                if cnt > 0:
                    T.tma_copy(X[bx, 0, 0], buf[0, :], barrier=full[0])
                    T.mbarrier_arrive(full[0])
            for k in T.serial(cnt):
                with T.ws(1):
                    if k + 1 < cnt:
                        T.mbarrier_wait_parity(empty[(k + 1) % stages], (((k + 1) // stages) % 2) ^ 1)
                        T.tma_copy(X[bx, k + 1, 0], buf[(k + 1) % stages, :], barrier=full[(k + 1) % stages])
                        T.mbarrier_arrive(full[(k + 1) % stages])
                with T.ws(0):
                    T.mbarrier_wait_parity(full[k % stages], (k // stages) % 2)
                    for i in T.Parallel(BLOCK):
                        Y[bx, k, i] = buf[k % stages, i] * 2.0 + k
                    T.mbarrier_arrive(empty[k % stages])

    return main


@pytest.mark.parametrize("stages", [2, 3])
def test_a_producer_one_round_ahead_is_a_correct_protocol(stages):
    # Its first wait on stage 1 passes on the pre-armed phase and its first on stage 0 waits for phase 0: the
    # verifier wanted one offset for the whole barrier array and suggested a parity that deadlocks (a fresh user's
    # report). The offset is per stage now.
    x = torch.randn(2, 5, 128)
    y = torch.full_like(x, float("nan"))
    egtile.compile(_prefetching(stages), target="sim")(x, torch.tensor([5, 5], dtype=torch.int32), y)
    ref = 2.0 * x + torch.arange(5, dtype=torch.float32).view(1, 5, 1)
    assert torch.equal(y, ref)


def test_a_protocol_the_verifier_cannot_decide_is_not_called_wrong():
    # the prologue's TMA load under `if n[bx] > 0:` is a data-dependent condition around barrier operations, which
    # the verifier does not enumerate: a limit of the analysis, reported as such
    with pytest.raises(ScheduleError, match=r"egtile's verifier cannot check its hand-written barrier protocol \(a "
                                            r"limit of the analysis") as exc:
        egtile.compile(_prefetching(2, count="data"), target="sim")
    assert "protocol is wrong" not in exc.value.message


def test_a_role_index_from_a_range_loop_says_the_loop_is_serial():
    # `for c in range(2): with T.ws(c):` in a kernel with barriers: the range is a serial loop on the GPU, so `c` is
    # a runtime value; the refusal said only "must be a Python int" (a fresh user's report)
    from egtile.errors import DSLError

    with pytest.raises(DSLError, match=r"`c` is a loop variable: in a kernel with barriers `for c in range\(...\)` is "
                                       r"a serial loop .* `for c in list\(range\(...\)\)`"):
        @T.prim_func
        def main(X: T.Tensor((2, 128), "float32"), Y: T.Tensor((2, 128), "float32")):
            with T.Kernel(1, threads=384) as bx:
                T.alloc_barrier(128)
                for c in range(2):
                    with T.ws(c):
                        for i in T.Parallel(128):
                            Y[c, i] = X[c, i]
