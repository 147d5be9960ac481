"""benchmarks/port_standins/port_checks.py: the port harness's judgement of the comparisons TileLang's examples make
through their own helper modules. The porter's check must pass a kernel output within rounding of its reference and
miss one that is off, has a NaN (an element nobody wrote) or has another shape; an asserting helper told not to
raise still counts its failure; only modules under the examples' folder are wrapped."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "benchmarks" / "port_standins"))
import port_checks  # noqa: E402

R = torch.Generator().manual_seed(7)


def _ref(n: int = 4096) -> torch.Tensor:
    return torch.randn(n, generator=R, dtype=torch.float64)


def test_rounding_passes_and_an_error_above_the_ratio_misses():
    ref = _ref()
    t = port_checks.Tally()
    assert port_checks.judge("bf16", ref.to(torch.bfloat16), ref, t)  # bfloat16 rounding: ratio ~2e-3
    off = ref.clone()
    off[: len(off) // 8] += 0.05  # one element in eight off by 5% of the rms: ratio ~1.8e-2
    assert not port_checks.judge("off", off, ref, t)
    assert (t.porter, t.porter_failed) == (1, 1)
    assert t.said[1].startswith("MISSED off: error ratio")


def test_the_ratio_is_taken_both_ways():
    ref = _ref()
    tiny = ref * 1e-3  # x close to zero: rms(x - y)/rms(y) is ~1 but rms(x - y)/rms(x) is ~1e3
    t = port_checks.Tally()
    assert not port_checks.judge("scaled", ref, tiny, t)
    assert not port_checks.judge("scaled", tiny, ref, t)


def test_a_nan_or_another_shape_misses():
    ref = _ref()
    nan = ref.clone()
    nan[17] = float("nan")
    t = port_checks.Tally()
    assert not port_checks.judge("nan", nan, ref, t)
    assert not port_checks.judge("shape", ref[:-1], ref, t)
    assert "1 value(s) not finite" in t.said[0] and "shapes" in t.said[1]


def test_exact_to_a_millionth_passes_at_any_scale():
    ref = _ref() * 1e-9  # a ratio of tiny values is noise: FLA's max-abs bound decides
    t = port_checks.Tally()
    assert port_checks.judge("tiny", ref + 5e-7 * torch.sign(_ref()), ref, t)


def test_an_asserting_helper_told_not_to_raise_still_counts_its_failure():
    def assert_similar(x, y, eps=1e-8, raise_assert=True):
        if (x - y).abs().max() > eps:
            if raise_assert:
                raise AssertionError
            print("only printed")

    t = port_checks.Tally()
    wrapped = port_checks.asserting(assert_similar, t)
    ref = _ref()
    assert wrapped(ref, ref + 1, raise_assert=False) is None  # the example goes on, as it chose
    wrapped(ref, ref)
    with pytest.raises(AssertionError):
        wrapped(ref, ref + 1)
    assert (t.own, t.own_failed) == (1, 2)


def test_only_helper_modules_under_the_examples_folder_are_wrapped(tmp_path, monkeypatch):
    ex = tmp_path / "examples" / "kda"
    ex.mkdir(parents=True)
    (ex / "my_utils_a.py").write_text(textwrap.dedent("""
        def compare_tensors(name, x, y):
            return "printed"
    """))
    out = tmp_path / "elsewhere"
    out.mkdir()
    (out / "my_utils_b.py").write_text((ex / "my_utils_a.py").read_text())
    t = port_checks.Tally()
    finder = port_checks.ExampleHelpers(t)
    finder.root = str(tmp_path / "examples") + "/"
    monkeypatch.syspath_prepend(str(ex))
    monkeypatch.syspath_prepend(str(out))
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    import my_utils_a
    import my_utils_b
    ref = _ref()
    assert my_utils_a.compare_tensors("dq", ref, ref + 1) == "printed"  # runs as written, and is judged
    assert my_utils_b.compare_tensors("dq", ref, ref + 1) == "printed"  # not under the examples: not judged
    assert (t.porter, t.porter_failed) == (0, 1) and t.said[0].startswith("MISSED compare_tensors(dq)")
    for m in ("my_utils_a", "my_utils_b"):
        sys.modules.pop(m, None)
