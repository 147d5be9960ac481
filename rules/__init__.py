"""egtile's scheduling rules and the rule-authoring API (installed as ``egtile.rules``).

One module per decision, each reading like the hardware fact it encodes:

* :mod:`.pipeline`: ``T.Pipelined`` -> serial (and the stage/parity convention);
* :mod:`.warp_specialize`: ``T.Pipelined`` -> producer/consumer warpgroups with full/empty mbarriers;
* :mod:`.software_pipeline`: ``T.Pipelined`` -> the block's threads issue TMA / cp.async copies S-1
  iterations ahead on full mbarriers, with a CTA barrier before a stage is reused;
* :mod:`.copy`: copy instruction per context (TMA | cp.async | SIMT);
* :mod:`.barrier`: consumer wait / release positions;
* :mod:`.partition`: thread mapping of ``T.Parallel`` and scalar statements.

API (:mod:`.api`): :class:`Rule`, :class:`Condition`, :class:`FactSpec`, :class:`NumSpec`,
:class:`RuleSet`, :func:`holds`; the registry: :func:`register`, :func:`unregister`, :func:`catalog`,
:func:`default`, :func:`builtin`; soundness-test mutants: :data:`MUTANTS`, :func:`mutant`.
See ``docs/rules.md`` for every rule and a worked example of registering one.
"""

from __future__ import annotations

from egtile.rules import (
    barrier,
    copy,
    partition,
    pipeline,
    software_pipeline,
    warp_specialize,
)
from egtile.rules.api import (
    STAGES,
    Condition,
    FactSpec,
    NumSpec,
    Rule,
    RuleSet,
    Verdict,
    holds,
)

BUILTIN: tuple[Rule, ...] = (pipeline.RULES + warp_specialize.RULES + software_pipeline.RULES + copy.RULES
                             + barrier.RULES + partition.RULES)
"""egtile's own rules, in stage order."""

_REGISTERED: dict[str, Rule] = {}


def register(*rules: Rule | RuleSet, replace: bool = False) -> tuple[Rule, ...]:
    """Add user rules (or every rule of user rulesets) to the default catalog.

    ``optimize(kernel)`` (with ``rules=None``) then runs them with the builtin rules, in their stage.

    Args:
        rules: rules or rulesets.
        replace: allow replacing a registered user rule of the same name.

    Returns:
        the rules registered.

    Raises:
        ValueError: a rule's name is a builtin rule's, or already registered (and not ``replace``).
        TypeError: something that is not a :class:`Rule` or :class:`RuleSet`.
    """
    flat: list[Rule] = []
    for r in rules:
        if isinstance(r, RuleSet):
            flat.extend(r.rules)
        elif isinstance(r, Rule):
            flat.append(r)
        else:
            raise TypeError(f"egtile.rules.register expects Rule or RuleSet values, got {type(r).__name__}")
    builtin_names = {b.name for b in BUILTIN}
    for r in flat:
        if r.name in builtin_names:
            raise ValueError(f"rule name {r.name!r} is a builtin rule; pick another name (or build a RuleSet with "
                             "egtile.rules.default().replace(rule) to change a builtin for one optimize call)")
        if r.name in _REGISTERED and not replace:
            raise ValueError(f"a rule named {r.name!r} is already registered; pass replace=True to replace it")
    for r in flat:
        _REGISTERED[r.name] = r
    return tuple(flat)


def unregister(name: str) -> None:
    """Remove a registered user rule (``KeyError`` if none has that name)."""
    try:
        del _REGISTERED[name]
    except KeyError:
        raise KeyError(f"no registered user rule named {name!r}; registered: {sorted(_REGISTERED)}") from None


def catalog() -> tuple[Rule, ...]:
    """Every rule ``optimize`` runs by default: the builtin rules, then the registered user rules."""
    return BUILTIN + tuple(_REGISTERED.values())


def builtin() -> RuleSet:
    """egtile's own rules only."""
    return RuleSet("builtin", BUILTIN)


def default() -> RuleSet:
    """The ruleset ``optimize`` uses when ``rules=None``: :func:`catalog` as a :class:`RuleSet`."""
    return RuleSet("default", catalog())


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
}


def mutant(name: str) -> RuleSet:
    """The builtin ruleset with mutation ``name`` applied (see :data:`MUTANTS`); usable as
    ``optimize(kernel, rules=egtile.rules.mutant(name))``.

    Raises:
        KeyError: unknown mutant name (the message lists the known ones).
    """
    rs = builtin()
    match name:
        case "wait-from-tma-only":
            sink = rs.rule("sink-wait").replace_condition("no-read-of-guarded", barrier.NO_READ_OF_TMA_GUARDED)
            return rs.replace(sink, name=f"mutant:{name}")
        case "effect-blind-to-address-of":
            blind = holds(partition.EFFECT_LOCAL_IGNORING_ADDRESS_OF)
            only_nonlocal = holds(partition.NONLOCAL_IGNORING_ADDRESS_OF)
            for rep, part in (("replicate-parallel", "partition-parallel"), ("replicate-scalar", "elect-scalar")):
                rs = rs.replace(rs.rule(rep).replace_condition("effect-local", blind))
                rs = rs.replace(rs.rule(part).with_condition(only_nonlocal))
            return RuleSet(f"mutant:{name}", rs.rules)
        case "absolute-stage-parity" | "arrive-count-off-by-one":
            from dataclasses import replace as _replace

            adjust, phase = (0, "absolute") if name == "absolute-stage-parity" else (-1, "normalized")
            ws = _replace(rs.rule("pipeline-warp-specialize"), rhs=warp_specialize.ws_rhs(adjust, phase))
            return rs.replace(ws, name=f"mutant:{name}")
        case "swp-no-barrier-before-stage-reuse":
            from dataclasses import replace as _replace

            swp = _replace(rs.rule("pipeline-software-pipeline"), rhs=software_pipeline.swp_rhs(war_barrier=False))
            return RuleSet(f"mutant:{name}", rs.replace(swp).without("pipeline-warp-specialize").rules)
        case "release-before-last-read":
            hoist = rs.rule("hoist-release").replace_condition("no-access-of-guarded", barrier.NO_WRITE_OF_GUARDED)
            return rs.replace(hoist, name=f"mutant:{name}")
    raise KeyError(f"unknown mutant {name!r}; known mutants: {sorted(MUTANTS)}")


__all__ = [
    "BUILTIN", "MUTANTS", "STAGES", "Condition", "FactSpec", "NumSpec", "Rule", "RuleSet", "Verdict", "barrier",
    "builtin", "catalog", "copy", "default", "holds", "mutant", "partition", "pipeline", "register",
    "software_pipeline", "unregister", "warp_specialize",
]
