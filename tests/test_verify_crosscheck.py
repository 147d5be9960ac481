"""The symbolic verifier agrees with the enumerating one (``egtile.verifier.reference``).

Both must report the same violations, by property, statements, buffer and barrier (``Violation.key``),
on every hand-built schedule (correct and with each planted bug), on the schedules the rules and every
mutant produce for the soundness suite's random programs, and on the same programs lengthened to long
trip counts, where the symbolic verifier traces a window of the loop (``egtile.verifier.window``) and the
reference every iteration. ``verify(..., window=False)`` (every iteration, symbolic footprints) must
agree as well, so that a disagreement points at the footprints or at the window. (Value flow, which
the reference does not check, is compared separately: ``tests/test_verify_valueflow.py``.)
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from soundness.check import VARIANTS, ruleset, schedule
from soundness.programs import programs
from verify import corpus

from egtile import rules
from egtile.verifier import reference, verify
from egtile.verifier.window import Windows

BUDGET = 3  # programs per mutant (44 mutants)
GENERATED = 8  # programs for the cheapest schedule and the named variants
LONG = 2  # lengthened programs in CI (each with 9 rulesets at 61 trips: the most expensive crosscheck); LONG_BUDGET with --soundness-long
LONG_BUDGET = 60


@pytest.fixture(scope="module")
def soundness_long(request) -> bool:
    from soundness.conftest import long_run

    return long_run(request.config)


def keys(vs) -> set:
    return {v.key() for v in vs}


_CHECKED: set = set()  # schedules already compared (many mutants leave most schedules unchanged)


def agree(sched, *, name: str) -> None:
    """The same violations; value flow (a check the reference does not make) is left out here and
    tested in ``tests/test_verify_valueflow.py``."""
    ident = (sched.kernel, sched.body, sched.barriers, sched.buffers, sched.threads, sched.staged)
    if ident in _CHECKED:
        return
    _CHECKED.add(ident)
    want = keys(reference.verify(sched))
    got = keys(verify(sched, value_flow=False))
    assert got == want, f"{name}: symbolic-only {got - want}, reference-only {want - got}"
    full = keys(verify(sched, window=False, value_flow=False))
    assert full == want, f"{name} (window=False): symbolic-only {full - want}, reference-only {want - full}"


@pytest.mark.parametrize("name, sched", corpus.handbuilt(), ids=[n for n, _ in corpus.handbuilt()])
def test_handbuilt_schedules_agree(name, sched):
    agree(sched, name=name)


_DRAWN: dict[int, list] = {}


def _programs(n: int) -> list:
    if n in _DRAWN:
        return _DRAWN[n]
    out = _DRAWN[n] = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def draw(p):
        out.append(p)

    draw()
    return out


def _rulesets() -> list[tuple[str, rules.RuleSet]]:
    return [("default", rules.default())] + [(v, ruleset(v)) for v in VARIANTS if v != "cheapest"]


def test_generated_schedules_agree(soundness_long):
    """The cheapest schedule and the named variants of random programs."""
    for p in _programs(LONG_BUDGET if soundness_long else GENERATED):
        for name, s in corpus.unique((n, schedule(p.kernel, rs)) for n, rs in _rulesets()):
            agree(s, name=f"{p} [{name}]")


@pytest.mark.parametrize("mutant", [n for n, _ in corpus.mutants()])
def test_mutant_schedules_agree(mutant, soundness_long):
    """Every mutant's schedules (egtile.rules.MUTANTS and each rule without each named condition)."""
    rs = dict(corpus.mutants())[mutant]
    progs = _programs(LONG_BUDGET if soundness_long else BUDGET)
    for name, s in corpus.unique((str(p), schedule(p.kernel, rs)) for p in progs):
        agree(s, name=f"{mutant} on {name}")


@pytest.mark.parametrize("trips", [61])
def test_long_loops_agree_and_use_the_window(trips, soundness_long):
    """Generated programs with ``trips`` iterations: the window is used (and confirmed) on most of them,
    and the verdicts still agree with the reference's full enumeration, mutants included."""
    used = confirmed = 0
    plain = Windows.confirm

    def spy(self, traces, analysis, space):
        nonlocal used, confirmed
        ok = plain(self, traces, analysis, space)
        if self.used:
            used += 1
            confirmed += ok
        return ok

    Windows.confirm = spy
    try:
        progs = _programs(LONG_BUDGET if soundness_long else LONG)
        rsets = _rulesets()[:3] + [(n, rules.mutant(n)) for n in sorted(rules.MUTANTS)]
        legal = {n for n, _ in _rulesets()[:3]}
        for p in progs:
            k = corpus.lengthen(p.kernel, trips)
            for name, s in corpus.unique((n, schedule(k, rs)) for n, rs in rsets):
                agree(s, name=f"{p} x{trips} [{name}]")
                if name in legal:  # and value flow raises no false alarm across the window
                    assert verify(s) == verify(s, value_flow=False), f"{p} x{trips} [{name}]"
    finally:
        Windows.confirm = plain
    assert used and confirmed, "the window was never used: the test does not test it"


def _branch_schedules() -> list:
    """Schedules with barriers under data-dependent conditions (sealed sides, nested ones) and their mutants."""
    import egtile
    from test_uniform_branches import _sealed, block_sparse_gemm, drop_seal, flag_kernel, masked_gemm

    out = []
    for name, f in [("block-sparse-pipelined", block_sparse_gemm(64, 32, 64)),
                    ("block-sparse-serial", block_sparse_gemm(32, 32, 64, pipelined=False)),
                    ("flag", flag_kernel()), ("flag-nested", flag_kernel(nested=True))]:
        sched = egtile.optimize(f).scheduled
        out.append((name, sched))
        for side in range(len(_sealed(sched))):
            for which in ("start", "end"):
                out.append((f"{name}-side{side}-drop-{which}", drop_seal(sched, which, side)))
    ws = egtile.optimize(masked_gemm(64, 64, 128)).scheduled
    out.append(("masked-gemm-ws", ws))
    role = _sealed_in_role(ws)
    out.append(("masked-gemm-ws-sealed-in-role", role))
    for which in ("start", "end"):
        out.append((f"masked-gemm-ws-sealed-in-role-drop-{which}", drop_seal(role, which)))
    return out


def _sealed_in_role(sched):
    """``sched`` (warp specialized, a data-dependent SIf in the consumer role) with that SIf's side sealed by
    the role's named barrier: a sealed side inside one agent, whose accesses pair with the producer's."""
    import dataclasses

    from egtile.ir import RoleSplit, SeqLoop, SIf, SyncThreads

    def go(stmts, role):
        out = []
        for s in stmts:
            if isinstance(s, SIf) and role is not None:
                seal = SyncThreads(role.threads, 1)
                s = dataclasses.replace(s, then_body=(seal, *s.then_body, seal))
            elif isinstance(s, SeqLoop):
                s = dataclasses.replace(s, body=go(s.body, role))
            elif isinstance(s, RoleSplit):
                s = dataclasses.replace(s, roles=tuple(dataclasses.replace(r, body=go(r.body, r)) for r in s.roles))
            out.append(s)
        return tuple(out)

    return dataclasses.replace(sched, body=go(sched.body, None))


def test_data_dependent_branch_schedules_agree():
    seen = {}
    for name, sched in _branch_schedules():
        agree(sched, name=name)
        seen[name] = keys(verify(sched))
    assert seen["masked-gemm-ws"] == set() and seen["masked-gemm-ws-sealed-in-role"] == set()
    for name, found in seen.items():
        if "drop" in name:
            assert any(k[0] == "L3" for k in found), (name, found)
        else:
            assert found == set(), (name, found)
