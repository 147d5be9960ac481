"""Measurement switches for the lowering's optional passes, read from the environment.

``EGTILE_WITHOUT_LOWERING=version-uniform-guard`` turns the causal-mask versioning off
(:mod:`egtile.analysis.versioning`); ``EGTILE_WITH_LOWERING=clear-into-scale-d`` turns the fold of a zero fill
into the wgmma's scale-d on (:mod:`egtile.lower.clear_accum`; off by default: ptxas already folds the fill);
``EGTILE_WITH_LOWERING=heaviest-first`` binds a grid dimension reversed (:mod:`egtile.analysis.dispatch_order`; off by
default: neutral on the H200's causal attention).
Both change the generated kernel, so :func:`egtile.schedule_cache.key` hashes :func:`current`: a kernel cached
under one setting is never served under another.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: the passes each switch may name, with the default each has
OPTIONAL_PASSES = {"version-uniform-guard": True, "clear-into-scale-d": False, "heaviest-first": False}


@dataclass(frozen=True)
class LoweringSwitches:
    """The optional lowering passes switched on for this compile."""

    on: frozenset[str]

    def __contains__(self, name: str) -> bool:
        return name in self.on


def _names(var: str) -> set[str]:
    names = {n.strip() for n in os.environ.get(var, "").split(",") if n.strip()}
    unknown = names - OPTIONAL_PASSES.keys()
    if unknown:
        raise ValueError(f"{var} names {', '.join(sorted(unknown))}, which egtile does not know; "
                         f"the optional lowering passes are {', '.join(sorted(OPTIONAL_PASSES))}")
    return names


def current() -> LoweringSwitches:
    """The switches the environment sets now (``EGTILE_WITH_LOWERING`` / ``EGTILE_WITHOUT_LOWERING``)."""
    with_, without = _names("EGTILE_WITH_LOWERING"), _names("EGTILE_WITHOUT_LOWERING")
    both = with_ & without
    if both:
        raise ValueError(f"EGTILE_WITH_LOWERING and EGTILE_WITHOUT_LOWERING both name {', '.join(sorted(both))}")
    on = {n for n, default in OPTIONAL_PASSES.items() if (default or n in with_) and n not in without}
    return LoweringSwitches(frozenset(on))


__all__ = ["OPTIONAL_PASSES", "LoweringSwitches", "current"]
