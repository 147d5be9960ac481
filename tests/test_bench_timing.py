"""benchmarks/_timing.py: contenders take turns, and none is always timed first."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from _timing import in_turns, summary  # noqa: E402


def test_each_contender_once_per_round_in_orders_that_vary():
    order: list[str] = []

    def timer(name, ms):
        return lambda: (order.append(name), ms)[1]

    names = ("cudnn", "flash", "efficient", "egtile")
    got = in_turns({n: timer(n, 1.0 + i) for i, n in enumerate(names)}, 12)
    assert got == {n: [1.0 + i] * 12 for i, n in enumerate(names)}
    rounds = [tuple(order[i:i + 4]) for i in range(0, 48, 4)]
    assert all(sorted(r) == sorted(names) for r in rounds)
    # no contender always follows the same one (a fixed cycle would), and none is always first
    before = {n: {r[r.index(n) - 1] for r in rounds if r.index(n)} for n in names}
    assert all(len(b) > 1 for b in before.values())
    assert len({r[0] for r in rounds}) > 1
    # seeded: the same orders every run
    order.clear()
    in_turns({n: timer(n, 1.0) for n in names}, 12)
    assert [tuple(order[i:i + 4]) for i in range(0, 48, 4)] == rounds


def test_no_contenders_no_rounds():
    assert in_turns({}, 3) == {}


def test_summary_is_the_median_and_the_relative_range():
    med, spread = summary([2.0, 1.0, 4.0])
    assert med == 2.0 and spread == 1.5


def test_clock_log_attributes_each_sample_to_the_turn_it_fell_in(tmp_path, monkeypatch, capsys):
    # a stand-in nvidia-smi that samples whatever clock the running contender last wrote
    now = tmp_path / "mhz"
    now.write_text("1000")
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/bash\nwhile true; do echo \"$(date '+%Y/%m/%d %H:%M:%S.%3N'), $(cat " + str(now)
                    + "), 650.5\"; sleep 0.02; done\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:" + __import__("os").environ["PATH"])
    monkeypatch.setenv("EGTILE_BENCH_CLOCKS", "1")
    import time

    def runs_at(mhz):
        def turn():
            now.write_text(str(mhz))
            time.sleep(0.4)
            return 1.0
        return turn

    in_turns({"slow": runs_at(1410), "fast": runs_at(1965)}, 2)
    out = capsys.readouterr().out
    assert "clock slow: 1410 MHz, 650 W" in out or "clock slow: 1410 MHz, 651 W" in out, out
    assert "clock fast: 1965 MHz" in out, out


def test_clock_log_is_silent_unless_asked(monkeypatch, capsys):
    monkeypatch.delenv("EGTILE_BENCH_CLOCKS", raising=False)
    in_turns({"a": lambda: 1.0}, 1)
    assert capsys.readouterr().out == ""
