"""Shared test set-up.

* ``tests/`` and ``examples/`` are importable (``seed_schedules``, ``seed_bug1``, ``seed_bug2``).
* The CPU model of the seeds' extern ``atomic_inc`` (``atomicAdd(ptr, 1)``) is registered for the whole
  session, as ``examples/run_seeds.py`` registers it; tests about unmodeled externs use other names.
* ``@pytest.mark.gpu`` tests are skipped without a compute-capability-9.0 GPU.
* The on-disk caches (cubins, schedules) live in a fresh directory per session, so no test result
  depends on what an earlier run or the user left in ``~/.cache/egtile``; it is removed at exit.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

_CACHE = tempfile.mkdtemp(prefix="egtile-test-cache-")
os.environ["EGTILE_CACHE_DIR"] = _CACHE
# Each process (and each xdist worker) removes its own cache when it exits: runs must not pile up
# directories in the temp dir.
atexit.register(shutil.rmtree, _CACHE, True)

import pytest

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT / "tests", ROOT / "examples"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))


def atomic_inc(ptr) -> None:
    """CPU model of ``extern "C" __device__ void atomic_inc(int* ptr) { atomicAdd(ptr, 1); }``."""
    ptr.atomic_add(1)


@pytest.fixture(scope="session", autouse=True)
def _atomic_inc_model():
    from egtile.externs import register_extern

    register_extern("atomic_inc", atomic_inc)
    yield


def pytest_configure(config):
    # Also declared in pyproject.toml; repeated here so that a copy of tests/ run elsewhere (the GPU
    # batch, .ci/gpu) knows the marker too.
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU of compute capability 9.0 (skipped without one)")


def pytest_addoption(parser):
    # Registered here, in the start-up conftest, so that `pytest --soundness-long` works from the root
    # (tests/soundness/conftest.py reads it; see docs/soundness.md).
    parser.addoption("--soundness-long", action="store_true", default=False,
                     help="run the soundness suite (tests/soundness) with large example budgets")


def pytest_collection_modifyitems(config, items):
    gpu_items = [it for it in items if it.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    from egtile.api import hopper_available

    if hopper_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU of compute capability 9.0")
    for it in gpu_items:
        it.add_marker(skip)
