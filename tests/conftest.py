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


# The longest CPU tests (pytest --durations, 2-core CI machine), started first: pytest-xdist hands out tests in
# collection order, and one of these collected last keeps one worker busy while the other has finished (CI's
# 2 workers idled up to ~100 s that way). Order only; every test still runs.
LONG_FIRST = (
    "tests/test_verify_crosscheck.py::test_long_loops_agree_and_use_the_window",
    "tests/soundness/test_rules_sound.py::test_default_rules_are_sound",
    "tests/test_threads.py::test_compile_in_worker_threads_free_in_main_thread",
    "tests/test_verify_crosscheck.py::test_generated_schedules_agree",
    "tests/test_verify_valueflow.py::test_legal_schedules_have_no_value_flow_violation",
    "tests/test_dataflow_oracle.py::test_derived_relations_equal_the_python_analyses",
    "tests/test_sim_batch.py::test_batched_loops_equal_per_element",
    "tests/soundness/test_condition_mutants.py::test_a_preference_condition_mutant_is_legal",
    "tests/test_names.py::test_every_identifier_egtile_emits_or_includes_is_safe_as_a_user_name",
    "tests/soundness/test_rules_sound.py::test_generated_schedules_compile_with_nvrtc",
)


def _long_rank(item) -> int:
    for i, prefix in enumerate(LONG_FIRST):
        if item.nodeid.startswith(prefix):
            return i
    return len(LONG_FIRST)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_long_rank)  # stable: the rest keeps its order
    gpu_items = [it for it in items if it.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    from egtile.api import hopper_available

    if hopper_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU of compute capability 9.0")
    for it in gpu_items:
        it.add_marker(skip)
