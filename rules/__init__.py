"""egtile's scheduling rules and the rule-authoring API (installed as ``egtile.rules``).

One module per decision, each reading like the hardware fact it encodes, with its conditions, its
constructors' declarations (cost, lowering, explanation) and its rules in one place:

* :mod:`.structure`: the encoded constructors (undecided and decided) and their lowering;
* :mod:`.fission`: ``T.Parallel`` fission in a pipelined body (a rule that creates statements);
* :mod:`.pipeline`: ``T.Pipelined`` -> serial;
* :mod:`.warp_specialize`: ``T.Pipelined`` -> producer/consumer warpgroups with full/empty mbarriers;
* :mod:`.pingpong`: the same split whose two consumer warpgroups take turns on the tensor core (named-barrier
  handshake, FA3's ping-pong);
* :mod:`.overlap`: the same split whose consumer loop is rotated so that the second gemm of block j-1 runs
  under the softmax of block j (FA3's intra-warpgroup overlap);
* :mod:`.overlap_pingpong`: the rotated split whose two consumer warpgroups also take turns (FA3's schedule at head
  dim 128: both together);
* :mod:`.pingpong_carry`: the ping-pong whose turn holds no wait (the second gemm of block j completes at the first
  gemm's wait of block j+1);
* :mod:`.software_pipeline`: ``T.Pipelined`` -> the block's threads issue TMA / cp.async copies S-1
  iterations ahead on full mbarriers, with a CTA barrier before a stage is reused;
* :mod:`.copy`: copy instruction per issuing context (TMA | cp.async | SIMT);
* :mod:`.barrier`: consumer wait / release positions;
* :mod:`.partition`: thread mapping of ``T.Parallel`` and scalar statements;
* :mod:`.fragment`: when a fragment can live in registers, and how its users then run (by layout);
* :mod:`.swizzle`: the shared layouts (swizzle modes) a wgmma operand buffer may take, and their cost;
* :mod:`.mma`: ``T.gemm`` -> ``wgmma.mma_async`` (accumulator split, operand swizzles);
* :mod:`.epilogue`: ``T.copy(fragment, global)`` through a swizzled shared tile and a TMA store.

API: :class:`Rule`, :class:`Condition`, :class:`Violation`, :func:`form_condition`, :func:`stmt_condition`,
:class:`FactSpec`, :class:`NumSpec` (hardware oracles), :class:`Decision`, :class:`Cost`,
:class:`RuleSet`, :func:`holds`; the registry: :func:`register`, :func:`unregister`, :func:`catalog`,
:func:`default`, :func:`builtin`; soundness-test mutants: :data:`MUTANTS`, :func:`mutant`.
See ``docs/rules.md`` for every rule and the tutorial that adds an instruction from outside egtile.
"""

from __future__ import annotations

from collections.abc import Callable

from egtile.rules import copy  # noqa: I001 - copy first: barrier and the loop schedules read its oracles
from egtile.rules import (
    barrier,
    epilogue,
    fission,
    fragment,
    mma,
    overlap,
    overlap_pingpong,
    partition,
    pingpong,
    pingpong_carry,
    pipeline,
    prologue_tma,
    software_pipeline,
    structure,
    swizzle,
    warp_specialize,
)
from egtile.schedule.decision import Cost, CostInput, Decision, static
from egtile.schedule.rule import (
    STAGES,
    Condition,
    FactSpec,
    NumSpec,
    Rule,
    RuleSet,
    Violation,
    form_condition,
    holds,
    stmt_condition,
)
from egtile.verdict import Verdict

BUILTIN: tuple[Rule, ...] = (fission.RULES + pipeline.RULES + warp_specialize.RULES + pingpong.RULES + overlap.RULES
                             + overlap_pingpong.RULES + pingpong_carry.RULES + prologue_tma.RULES
                             + software_pipeline.RULES
                             + copy.RULES + epilogue.RULES + barrier.RULES + partition.RULES + mma.RULES)
"""egtile's own rules, in stage order."""

BUILTIN_DECISIONS: tuple[Decision, ...] = (structure.DECISIONS + pipeline.DECISIONS + warp_specialize.DECISIONS
                                           + pingpong.DECISIONS + overlap.DECISIONS + overlap_pingpong.DECISIONS
                                           + pingpong_carry.DECISIONS + prologue_tma.DECISIONS
                                           + software_pipeline.DECISIONS + copy.DECISIONS + barrier.DECISIONS
                                           + partition.DECISIONS + mma.DECISIONS + epilogue.DECISIONS)
"""The declarations of every constructor the builtin rules use."""

_REGISTERED: dict[str, Rule] = {}
_REGISTERED_DECISIONS: dict[str, Decision] = {}


def register(*rules: Rule | RuleSet | Decision, replace: bool = False) -> tuple[Rule, ...]:
    """Add user rules (or every rule of user rulesets) and the declarations of their constructors to the
    default catalog.

    ``optimize(kernel)`` (with ``rules=None``) then runs them with the builtin rules, in their stage.

    Args:
        rules: rules, rulesets (their rules and declarations) or :class:`Decision` declarations.
        replace: allow replacing a registered user rule or declaration of the same name.

    Returns:
        the rules registered.

    Raises:
        ValueError: a rule's or declaration's name is a builtin one's, or already registered (and not
            ``replace``).
        TypeError: something that is not a :class:`Rule`, :class:`RuleSet` or :class:`Decision`.
    """
    flat: list[Rule] = []
    decls: list[Decision] = []
    for r in rules:
        if isinstance(r, RuleSet):
            flat.extend(r.rules)
            decls.extend(r.decisions)
        elif isinstance(r, Rule):
            flat.append(r)
        elif isinstance(r, Decision):
            decls.append(r)
        else:
            raise TypeError(f"egtile.rules.register expects Rule, RuleSet or Decision values, got {type(r).__name__}")
    builtin_decls = {d.name for d in BUILTIN_DECISIONS}
    for d in decls:
        if d.name in builtin_decls:
            raise ValueError(f"constructor name {d.name!r} is a builtin declaration; pick another name")
        if d.name in _REGISTERED_DECISIONS and not replace and _REGISTERED_DECISIONS[d.name] != d:
            raise ValueError(f"a declaration named {d.name!r} is already registered; pass replace=True to replace it")
    builtin_names = {b.name for b in BUILTIN}
    for r in flat:
        if r.name in builtin_names:
            raise ValueError(f"rule name {r.name!r} is a builtin rule; pick another name (or build a RuleSet with "
                             "egtile.rules.default().replace(rule) to change a builtin for one optimize call)")
        if r.name in _REGISTERED and not replace:
            raise ValueError(f"a rule named {r.name!r} is already registered; pass replace=True to replace it")
    for r in flat:
        _REGISTERED[r.name] = r
    for d in decls:
        _REGISTERED_DECISIONS[d.name] = d
    return tuple(flat)


def unregister(name: str) -> None:
    """Remove a registered user rule or declaration (``KeyError`` if none has that name)."""
    hit = False
    if name in _REGISTERED:
        del _REGISTERED[name]
        hit = True
    if name in _REGISTERED_DECISIONS:
        del _REGISTERED_DECISIONS[name]
        hit = True
    if not hit:
        raise KeyError(f"no registered user rule or declaration named {name!r}; registered: "
                       f"{sorted(_REGISTERED) + sorted(_REGISTERED_DECISIONS)}")


def catalog() -> tuple[Rule, ...]:
    """Every rule ``optimize`` runs by default: the builtin rules, then the registered user rules."""
    return BUILTIN + tuple(_REGISTERED.values())


def declarations() -> tuple[Decision, ...]:
    """Every constructor declaration ``optimize`` uses by default: the builtin ones, then the registered."""
    return BUILTIN_DECISIONS + tuple(_REGISTERED_DECISIONS.values())


def builtin() -> RuleSet:
    """egtile's own rules and declarations only."""
    return RuleSet("builtin", BUILTIN, BUILTIN_DECISIONS)


def default() -> RuleSet:
    """The ruleset ``optimize`` uses when ``rules=None``: :func:`catalog` with :func:`declarations`."""
    return RuleSet("default", catalog(), declarations())


# ----------------------------------------------------------------------------------------------------
# Mutants: each reproduces a known class of scheduling bug by weakening one rule. Soundness tests run
# them through optimize and check that the verifier and the simulator catch the result.

MUTANTS: dict[str, str] = {
    "wait-from-tma-only": "sink-wait checks only TMA-produced buffers (TileLang seed bug 2): the consumer's wait "
                          "can pass a read of a SIMT- or cp.async-produced buffer",
    "effect-blind-to-address-of": "the effect analysis ignores pointers handed to extern calls, and thread mapping "
                                  "follows it as TileLang's has_non_local_store did (seed bug 1): an extern taking "
                                  "address_of(shared[i]) is replicated, not partitioned",
    "absolute-stage-parity": "stage and parity come from the absolute loop index k instead of k - start",
    "arrive-count-off-by-one": "full[s]'s arrive count is one less than the arrivals the producer makes",
    "release-before-last-read": "hoist-release checks only writes of guarded buffers: the consumer releases a stage "
                                "before its last read of it",
    "swp-no-barrier-before-stage-reuse": "warp specialization removed (so extraction picks the software pipeline) and "
                                         "the software-pipelined loop drops its CTA barrier before a stage is reused: "
                                         "the copy issued S-1 iterations ahead overwrites a stage other threads may "
                                         "still read",
    "all-producer-threads-wait": "every producer thread waits on empty[s] even when only the elected thread issues "
                                 "(TMA-only producers): idle waiters never arrive, fall behind by two phases and "
                                 "wait on an aliased parity",
    "fission-across-local-flow": "parallel-fission without fission-keeps-local-flow: a T.Parallel is split between "
                                 "a statement that writes a local value and the one that reads it, so each thread "
                                 "reads the value its last iteration of the first loop left",
}


MUTANT_GAPS: dict[tuple[str, str], str] = {
    ("all-producer-threads-wait", "verify"): "the verifier treats the producer warpgroup as one agent, so it cannot see "
                                              "threads that wait without ever arriving (issue 15: checkers without "
                                              "blind spots)",
    ("all-producer-threads-wait", "sim"): "no simulator policy starves one waiting thread for two phases yet (issue 15)",
    ("fission-across-local-flow", "verify"): "the verifier checks ordering, not the value flow of local buffers "
                                             "(issue 15)",
    ("fission-across-local-flow", "sim"): "the random programs have no load-and-compute T.Parallel; "
                                          "tests/test_rules_fission.py catches it on one",
}
"""(mutant, checker) pairs the soundness suite's random programs do not catch yet, with why. Each is a known
gap, listed so that the suite says so instead of passing silently; removing an entry is the goal."""


_USER_MUTANTS: dict[str, Callable[[], RuleSet]] = {}


def register_mutant(name: str, build: Callable[[], RuleSet], doc: str) -> None:
    """Add a rule author's mutant: ``build()`` returns the ruleset with the mutation applied (a rule's condition
    removed or weakened, a declaration's lowering replaced: :meth:`RuleSet.replace_condition`,
    :meth:`RuleSet.without_condition`, :meth:`RuleSet.replace_decision`). It joins :data:`MUTANTS` with ``doc``, so
    :func:`mutant` builds it and ``tests/soundness/test_mutants_caught.py`` hunts it with each checker on its own
    (register it before that module is collected: in your ``conftest.py``).

    Raises:
        ValueError: ``name`` is a builtin mutant's.
    """
    if name in MUTANTS and name not in _USER_MUTANTS:
        raise ValueError(f"{name!r} is a builtin mutant of egtile.rules; pick another name")
    if not callable(build):
        raise TypeError(f"register_mutant({name!r}): build must be a callable returning the mutated RuleSet")
    MUTANTS[name] = doc
    _USER_MUTANTS[name] = build


def unregister_mutant(name: str) -> None:
    """Remove a mutant added with :func:`register_mutant` (no error if there is none)."""
    if _USER_MUTANTS.pop(name, None) is not None:
        MUTANTS.pop(name, None)


def mutant(name: str) -> RuleSet:
    """The builtin ruleset with mutation ``name`` applied (see :data:`MUTANTS`; a rule author's own, added with
    :func:`register_mutant`, is built by its ``build``); usable as ``optimize(kernel, rules=egtile.rules.mutant(name))``.
    Condition mutants replace or drop a rule's side condition; protocol mutants replace one declaration's lowering.

    Raises:
        KeyError: unknown mutant name (the message lists the known ones).
    """
    from dataclasses import replace as _replace

    if name in _USER_MUTANTS:
        return _USER_MUTANTS[name]()
    rs = builtin()
    match name:
        case "wait-from-tma-only":
            sink = rs.rule("sink-wait").replace_condition("no-read-of-guarded", barrier.NO_READ_OF_TMA_GUARDED)
            return rs.replace(sink, name=f"mutant:{name}")
        case "effect-blind-to-address-of":
            blind = holds(partition.EFFECT_LOCAL_IGNORING_ADDRESS_OF, name="effect-local")
            only_nonlocal = holds(partition.NONLOCAL_IGNORING_ADDRESS_OF)
            for rep, part in (("replicate-parallel", "partition-parallel"), ("replicate-scalar", "elect-scalar")):
                rs = rs.replace(rs.rule(rep).replace_condition("effect-local", blind))
                rs = rs.replace(rs.rule(part).with_condition(only_nonlocal))
            return RuleSet(f"mutant:{name}", rs.rules, rs.decisions)
        case "absolute-stage-parity" | "arrive-count-off-by-one":
            adjust, phase = (0, "absolute") if name == "absolute-stage-parity" else (-1, "normalized")
            ws = _replace(warp_specialize.WS, lower=warp_specialize.ws_lowering(phase, adjust))
            return rs.replace_decision(ws, name=f"mutant:{name}")
        case "swp-no-barrier-before-stage-reuse":
            swp = _replace(software_pipeline.SWP, lower=software_pipeline.swp_lowering(war_barrier=False))
            rs = rs.replace_decision(swp).without("pipeline-warp-specialize")
            return RuleSet(f"mutant:{name}", rs.rules, rs.decisions)
        case "release-before-last-read":
            hoist = rs.rule("hoist-release").replace_condition("no-access-of-guarded", barrier.NO_WRITE_OF_GUARDED)
            return rs.replace(hoist, name=f"mutant:{name}")
        case "all-producer-threads-wait":
            ws = _replace(rs.rule("pipeline-warp-specialize"), rhs=warp_specialize.ws_rhs("warpgroup"))
            return rs.replace(ws, name=f"mutant:{name}")
        case "fission-across-local-flow":
            return rs.without_condition("parallel-fission", "fission-keeps-local-flow")
    if name in MUTANTS:
        raise KeyError(f"mutant {name!r} is listed in egtile.rules.MUTANTS but nothing builds it: add a mutant of your "
                       "own with egtile.rules.register_mutant(name, build, doc), not by editing the dict")
    raise KeyError(f"unknown mutant {name!r}; known mutants: {sorted(MUTANTS)}")


__all__ = [
    "BUILTIN", "BUILTIN_DECISIONS", "MUTANTS", "MUTANT_GAPS", "STAGES", "Condition", "Cost", "CostInput", "Decision", "FactSpec",
    "NumSpec", "Rule", "RuleSet", "Verdict", "Violation", "barrier", "builtin", "catalog", "copy", "declarations",
    "default", "epilogue", "fission", "form_condition", "fragment", "holds", "mma", "mutant", "register_mutant", "unregister_mutant", "overlap", "overlap_pingpong", "partition", "pingpong_carry", "pipeline", "register",
    "software_pipeline", "static", "stmt_condition", "structure", "swizzle", "unregister", "warp_specialize",
]
