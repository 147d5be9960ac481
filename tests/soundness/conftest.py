"""Options and fixtures of the soundness suite (``tests/soundness``).

``--soundness-long`` (or ``EGTILE_SOUNDNESS_LONG=1``) raises the example budgets for a local run:

    .venv/bin/python -m pytest tests/soundness --soundness-long
    EGTILE_SOUNDNESS_EXAMPLES=100 .venv/bin/python -m pytest tests/soundness --soundness-long   # sized

pytest reads ``pytest_addoption`` only from conftest files it loads at start-up, so the flag works when
``tests/soundness`` is named on the command line (as above); the environment variable works however
the suite is selected.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser):
    try:
        parser.addoption("--soundness-long", action="store_true", default=False,
                         help="run the soundness suite with large example budgets (minutes to hours)")
    except ValueError:
        pass  # already registered by a conftest loaded earlier (e.g. tests/conftest.py)


def long_run(config) -> bool:
    try:
        flag = config.getoption("--soundness-long")
    except ValueError:
        flag = False
    return bool(flag) or os.environ.get("EGTILE_SOUNDNESS_LONG", "") not in ("", "0")


def long_budget(default: int) -> int:
    """The example budget of a long run: ``default``, or ``EGTILE_SOUNDNESS_EXAMPLES`` when set (to size a
    long run to the time at hand)."""
    return int(os.environ.get("EGTILE_SOUNDNESS_EXAMPLES", default))


@pytest.fixture(scope="session")
def soundness_long(request) -> bool:
    return long_run(request.config)


@pytest.fixture(scope="session", autouse=True)
def _extern_models():
    from egtile.externs import register_extern, registered

    if registered("atomic_inc") is None:
        register_extern("atomic_inc", lambda ptr: ptr.atomic_add(1))
    yield
