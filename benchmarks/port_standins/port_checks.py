"""How the TileLang port harness counts comparisons made by the examples' own helper modules (measuring only).

Some examples compare their kernel's output with their reference through a helper module next to them (kda's
``test_utils_kda``, the dsa and v32 ``utils``, gdn's ``test_utils``) instead of ``torch.testing.assert_close``:

* an **asserting similarity check** (``assert_similar``, ``assert_tensors_similar``) is the example's own comparison.
  Called with ``raise_assert=False`` / ``should_raise=False`` it only prints a failure; it is judged as asserting
  all the same, and the example still goes on after a failure, as it chose;
* a **printed comparison** (kda's ``compare_tensors(name, x, y)`` prints the largest absolute and relative errors;
  dsa's ``get_err_ratio(x, y)`` is printed) decides nothing itself. The *porter's check* judges it with FLA's error
  ratio, the metric of the examples' own ``FLA_KDA/fla_utils.py`` and ``utils.py`` and of flash-linear-attention's
  tests (most often at 0.005): rms(x - y) / rms(x) below :data:`RATIO` taken both ways, or max |x - y| <= 1e-6;
  and every element finite on both sides and the shapes equal.

:class:`ExampleHelpers` is a ``sys.meta_path`` finder that wraps those functions in each helper module loaded from
under the ported examples' folder (never egtile's or a library's modules). A porter's check never stands in for a
comparison the example makes itself: ``benchmarks/tilelang_port.py`` reports a file whose only comparisons are
printed ones as ``checked``, apart from ``matched``.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

#: FLA's error ratio bound: flash-linear-attention's tests use 0.005 most often (462 of its assert_close calls).
RATIO = 0.005


@dataclass
class Tally:
    """What one file's comparisons came to: the example's own (``own``/``own_failed``) and the porter's checks of
    the comparisons it only prints (``porter``/``porter_failed``, each with a line in ``said``)."""

    own: int = 0
    own_failed: int = 0
    porter: int = 0
    porter_failed: int = 0
    said: list[str] = field(default_factory=list)

    def clear(self) -> None:
        self.own = self.own_failed = self.porter = self.porter_failed = 0
        self.said.clear()


def judge(label: str, x: Any, y: Any, tally: Tally) -> bool:
    """The porter's check of one printed pair; the verdict and its numbers are recorded in ``tally``."""
    x = torch.as_tensor(x).detach().double().flatten()
    y = torch.as_tensor(y).detach().double().flatten()
    if x.shape != y.shape:
        ok, what = False, f"{label}: shapes {tuple(x.shape)} and {tuple(y.shape)}"
    elif not (bool(torch.isfinite(x).all()) and bool(torch.isfinite(y).all())):
        bad = int((~torch.isfinite(x)).sum() + (~torch.isfinite(y)).sum())
        ok, what = False, f"{label}: {bad} value(s) not finite"
    else:
        diff = (x - y).abs()
        err = diff.square().mean().sqrt().item()
        ratio = max(err / (x.square().mean().sqrt().item() + 1e-8), err / (y.square().mean().sqrt().item() + 1e-8))
        ok = diff.max().item() <= 1e-6 or ratio < RATIO
        what = f"{label}: error ratio {ratio:.2e}, max abs {diff.max().item():.2e}"
    if ok:
        tally.porter += 1
    else:
        tally.porter_failed += 1
    tally.said.append(what if ok else "MISSED " + what)
    return ok


def asserting(f: Callable, tally: Tally) -> Callable:
    """``f``, an example helper's similarity check, counted as the example's comparison and judged asserting."""
    def checked(*a, **k):
        quiet = k.get("raise_assert", True) is False or k.get("should_raise", True) is False
        if quiet:
            k = {kk: (True if kk in ("raise_assert", "should_raise") else v) for kk, v in k.items()}
        try:
            r = f(*a, **k)
        except AssertionError:
            tally.own_failed += 1
            if quiet:
                return None
            raise
        tally.own += 1
        return r
    return checked


def printed(f: Callable, tally: Tally, first: str, second: str, label: str | None) -> Callable:
    """``f``, a helper that only prints how far ``first`` is from ``second``: each call is judged by the porter's
    check, then runs as written."""
    names = f.__code__.co_varnames[: f.__code__.co_argcount]

    def judged(*a, **k):
        bound = dict(zip(names, a), **k)
        judge(f"{f.__name__}({bound.get(label, '')})" if label else f.__name__, bound[first], bound[second], tally)
        return f(*a, **k)
    return judged


def wrappers(tally: Tally) -> dict[str, Callable[[Callable], Callable]]:
    """The helper functions the harness wraps, by name."""
    return {
        "assert_similar": lambda f: asserting(f, tally),
        "assert_tensors_similar": lambda f: asserting(f, tally),
        "compare_tensors": lambda f: printed(f, tally, "x", "y", "name"),  # kda: prints max abs / rel errors
        "get_err_ratio": lambda f: printed(f, tally, "x", "y", None),      # dsa: its ratio, printed
    }


class ExampleHelpers(importlib.abc.MetaPathFinder):
    """Wraps :func:`wrappers`' functions in every module loaded from under ``root`` (the ported examples' folder;
    ``None``: none) that defines them itself."""

    def __init__(self, tally: Tally) -> None:
        self.root: str | None = None
        self.wrap = wrappers(tally)

    def find_spec(self, name, path, target=None):  # noqa: ANN001 (importlib's protocol)
        if self.root is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not str(spec.origin or "").startswith(self.root) or not hasattr(spec.loader, "exec_module"):
            return None
        run = spec.loader.exec_module
        wrap = self.wrap

        def exec_module(module):
            run(module)
            for fname, w in wrap.items():
                fn = module.__dict__.get(fname)
                if callable(fn) and getattr(fn, "__module__", None) == module.__name__:
                    setattr(module, fname, w(fn))
        spec.loader.exec_module = exec_module
        return spec
