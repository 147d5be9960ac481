"""`egtile.optimize(...)` and `egtile.verify(...)` are the functions whatever was imported first (their modules,
egtile.schedule.driver and the package egtile.verifier, have other names, so importing them never rebinds the
attributes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROGRAM = """
import sys
sys.path.insert(0, {tests!r})
{first}
import egtile
from seed_schedules import bug2_kernel
r = egtile.optimize(bug2_kernel())
assert egtile.verify(r.scheduled) == []
assert egtile.verify(__import__("seed_schedules").bug2_schedule(wait_after_first_read=True))[0].property == "L1"
print("ok")
"""


@pytest.mark.parametrize("first", ["", "import egtile.verifier", "from egtile.verifier import verify",
                                   "import egtile.schedule.driver", "from egtile.schedule.driver import optimize"])
def test_entry_points_are_callable_in_every_import_order(first):
    from pathlib import Path

    tests = str(Path(__file__).resolve().parent)
    out = subprocess.run([sys.executable, "-c", PROGRAM.format(tests=tests, first=first)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
