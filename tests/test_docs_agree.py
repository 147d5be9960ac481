"""Numbers the docs state in more than one place agree: the port rate (docs/porting-tilelang.md keeps it, per file
and dated; docs/language.md's "Port rate" repeats its last count) and the README's time for the no-GPU test run.
Both had drifted apart (45 of 158 beside 99 of 158; "about 7 minutes" beside "about 10 minutes")."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_language_md_states_the_port_rate_porting_tilelang_md_keeps():
    port = re.search(r"(\d+) of the 158 files \((\d+)%\)", (ROOT / "docs/porting-tilelang.md").read_text())
    lang = re.findall(r"\*\*(\d+) of the 158 match \((\d+)%\)\*\*", (ROOT / "docs/language.md").read_text())
    assert port is not None and lang == [port.groups()]


def test_the_readme_gives_one_time_for_the_no_gpu_test_run():
    times = re.findall(r"about ([\d-]+) minutes", (ROOT / "README.md").read_text())
    assert len(times) >= 2 and len(set(times)) == 1
