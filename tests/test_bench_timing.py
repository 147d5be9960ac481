"""benchmarks/_timing.py: contenders take turns, and none is always timed first."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from _timing import in_turns, summary  # noqa: E402


def test_each_contender_once_per_round_with_the_first_rotating():
    order: list[str] = []

    def timer(name, ms):
        return lambda: (order.append(name), ms)[1]

    got = in_turns({"cudnn": timer("cudnn", 1.5), "egtile": timer("egtile", 1.25), "flash": timer("flash", 3.0)}, 4)
    assert got == {"cudnn": [1.5] * 4, "egtile": [1.25] * 4, "flash": [3.0] * 4}
    rounds = [order[i:i + 3] for i in range(0, 12, 3)]
    assert [r[0] for r in rounds] == ["cudnn", "egtile", "flash", "cudnn"]
    assert all(sorted(r) == ["cudnn", "egtile", "flash"] for r in rounds)


def test_no_contenders_no_rounds():
    assert in_turns({}, 3) == {}


def test_summary_is_the_median_and_the_relative_range():
    med, spread = summary([2.0, 1.0, 4.0])
    assert med == 2.0 and spread == 1.5
