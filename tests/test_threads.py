"""Kernels compiled in one thread and freed in another (issue 9 item 9): no pyo3 "EGraph is unsendable"
error, no leaked e-graph, and a compiled kernel holds plain Python data only."""

from __future__ import annotations

import gc
import sys
import threading

import pytest

import egtile
from egtile import language as T


def pipelined(c: float):
    @T.prim_func
    def main(X: T.Tensor((32, 192), "float16"), Y: T.Tensor((32, 192), "float16")):
        with T.Kernel(2, threads=128) as bx:
            X_shared = T.alloc_shared((16, 64), "float16")
            for ko in T.Pipelined(3, num_stages=2):
                T.copy(X[bx * 16, ko * 64], X_shared)
                for i, j in T.Parallel(16, 64):
                    Y[bx * 16 + i, ko * 64 + j] = X_shared[i, j] * c

    return main


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2 ** 20


def _compile_in_thread(c: float):
    out = []
    t = threading.Thread(target=lambda: out.append(egtile.compile(pipelined(c), target="sim")))
    t.start()
    t.join()
    return out[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_compile_in_worker_threads_free_in_main_thread(monkeypatch):
    monkeypatch.setenv("EGTILE_DISABLE_CACHE", "1")
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(f"{u.exc_type.__name__}: {u.exc_value}"))
    n = 8

    def round_of_compiles() -> float:
        before = _rss_mb()
        was_enabled = gc.isenabled()
        gc.disable()  # no automatic collection inside the workers: the worst case, and deterministic
        try:
            kernels = [_compile_in_thread(2.0 + k) for k in range(n)]
            assert all(k.scheduled is not None for k in kernels)
            del kernels
            gc.collect()  # in the main thread: would drop any e-graph the workers left in cycles
        finally:
            if was_enabled:
                gc.enable()
        return _rss_mb() - before

    # The first round also warms malloc's per-thread arenas (freed memory stays in them); a leak grows
    # every round by the same amount.
    round_of_compiles()
    # A leak grows every round by the same amount; allocator noise (other tests' memory in this process
    # returning to arenas) does not, so the least growth of three rounds measures a leak.
    growth = min(round_of_compiles() for _ in range(3))
    assert not unraisable, unraisable[:3]
    # each leaked template was ~2.4 MB (review: 230 -> 518 MB over 120 compiles); allow noise, not leaks
    assert growth < 1.0 * n, f"RSS grew {growth:.1f} MB over {n} more compiles in fresh threads"


def test_a_compiled_kernel_holds_no_egglog_object():
    k = _compile_in_thread(4.0)
    seen: set[int] = set()
    found: list[str] = []

    def visit(obj, path: str, depth: int) -> None:
        if depth > 40 or id(obj) in seen or len(found) > 5:
            return
        seen.add(id(obj))
        mod = type(obj).__module__ or ""
        if mod.startswith("egglog"):
            # the registered rule declarations are module-level values, not per-compile e-graph state
            if ".rules." not in path:
                found.append(f"{path}: {type(obj).__qualname__}")
            return
        if isinstance(obj, (str, bytes, int, float, bool, type(None))):
            return
        if isinstance(obj, dict):
            for key, v in obj.items():
                visit(v, f"{path}[{key!r:.20}]", depth + 1)
        elif isinstance(obj, (list, tuple, set, frozenset)):
            for i, v in enumerate(obj):
                visit(v, f"{path}[{i}]", depth + 1)
        else:
            for name in getattr(obj, "__dict__", {}):
                visit(getattr(obj, name), f"{path}.{name}", depth + 1)
            for name in getattr(type(obj), "__slots__", ()):
                if hasattr(obj, name):
                    visit(getattr(obj, name), f"{path}.{name}", depth + 1)

    visit(k, "kernel", 0)
    assert not found, found
