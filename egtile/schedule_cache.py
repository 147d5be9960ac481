"""On-disk cache of compiled kernels: tile IR -> (schedule, explanation, cubin).

A warm compile (the same kernel traced again, in this or a later process) skips the e-graph and NVRTC:
it costs the trace, one SHA-256 over the pickled IR and one file read.

Key: SHA-256 over the pickled ``ir.Kernel`` (statement locations included, so error messages never
point at stale lines), the target architecture, egtile's version, the names of the registered rules,
and the text of every source file of the scheduler and the backend (``egtile/``, ``rules/``,
``codegen/``), so that any change to what would decide or emit the schedule misses. Only egtile's own
rules are cached: while a user rule is registered (``egtile.rules.register``), whose code lives outside
egtile and cannot be fingerprinted, :func:`enabled` is false and every compile runs the e-graph;
``optimize(..., rules=...)`` always runs it.

Location and switches are the cubin cache's (:mod:`egtile.codegen.cache`): ``$EGTILE_CACHE_DIR``
(default ``~/.cache/egtile``), ``EGTILE_DISABLE_CACHE=1``. Entries are pickles written atomically; an
entry that cannot be read (truncated, from another Python) is ignored and rebuilt.
"""

from __future__ import annotations

import functools
import hashlib
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from egtile import __version__
from egtile.ir.kernel import Kernel
from egtile.ir.scheduled import Scheduled

_PACKAGE_ROOT = Path(__file__).resolve().parent


@dataclass(frozen=True)
class CachedSchedule:
    """A schedule read back from the cache; quacks like :class:`egtile.optimize.ScheduleResult` for
    what a compiled kernel needs (``scheduled``, ``cost``, ``explain()``)."""

    scheduled: Scheduled
    cost: int
    explanation: str

    def explain(self) -> str:
        return self.explanation


@functools.lru_cache(maxsize=1)
def _compiler_fingerprint() -> str:
    """SHA-256 over the scheduler's and backend's source files (computed once per process)."""
    import egtile.codegen
    import egtile.rules

    roots = {_PACKAGE_ROOT, Path(egtile.rules.__file__).resolve().parent, Path(egtile.codegen.__file__).resolve().parent}
    h = hashlib.sha256(__version__.encode())
    for root in sorted(roots):
        for f in sorted(root.rglob("*")):
            if f.suffix in (".py", ".cuh", ".h") and "__pycache__" not in f.parts:
                h.update(str(f.relative_to(root)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def enabled() -> bool:
    """Whether compiles may use the cache: only with egtile's builtin rules (no user rule registered)."""
    from egtile import rules

    return len(rules.catalog()) == len(rules.BUILTIN)


def key(kernel: Kernel, arch: str) -> str:
    """Cache key of ``kernel`` compiled for ``arch`` with the registered default rules."""
    from egtile import rules

    h = hashlib.sha256()
    h.update(pickle.dumps(kernel, protocol=5))
    h.update(arch.encode())
    h.update("\0".join(r.name for r in rules.BUILTIN).encode())
    h.update(_compiler_fingerprint().encode())
    return h.hexdigest()


def _path(k: str) -> Path | None:
    from egtile.codegen.cache import cache_dir

    d = cache_dir()
    return None if d is None else d / "schedules" / f"{k}.pkl"


def load(k: str) -> tuple[CachedSchedule, Any] | None:
    """``(schedule, built kernel or None)`` stored under ``k``, or ``None``."""
    path = _path(k)
    if path is None:
        return None
    try:
        with path.open("rb") as f:
            entry = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return None
    if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], CachedSchedule)):
        return None
    return entry


def store(k: str, result: Any, built: Any = None) -> None:
    """Save ``result`` (a ScheduleResult) and the ``built`` kernel (or None) under ``k``; no-op when the
    cache is disabled or not writable."""
    from egtile.codegen.cache import atomic_write

    path = _path(k)
    if path is None:
        return
    entry = (CachedSchedule(result.scheduled, int(result.cost), result.explain()), built)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, pickle.dumps(entry, protocol=5))
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass
