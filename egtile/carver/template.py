"""``tilelang.carver.template``: operator templates whose roller recommends tile configurations.

egtile keeps the templates' names and arguments so that host code ports, and has no roller: the e-graph's cost
model decides the schedule of a given configuration and :func:`egtile.autotune` measures the configurations you
list. :meth:`MatmulTemplate.recommend_hints` therefore raises :class:`~egtile.errors.UnsupportedError` with that
alternative instead of inventing hints.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from egtile.errors import UnsupportedError
from egtile.language import tracer


@dataclass(frozen=True)
class _Template:
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    arch: Any = None

    def with_arch(self, arch: Any) -> _Template:
        return replace(self, arch=arch)

    def recommend_hints(self, topk: int = 10) -> list[Any]:
        raise UnsupportedError(
            f"{type(self).__name__}.recommend_hints: TileLang's roller (hardware-model tile recommendations) is "
            "not part of egtile: list the configurations to try and tune them with egtile.autotune(configs=...) "
            "(the e-graph's cost model schedules each one)", tracer.user_loc())


class MatmulTemplate(_Template):
    """``MatmulTemplate(M=, N=, K=, in_dtype=, out_dtype=, accum_dtype=, ...)`` (arguments kept, not used)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "kwargs", dict(kwargs))
        object.__setattr__(self, "arch", None)


__all__ = ["MatmulTemplate"]
