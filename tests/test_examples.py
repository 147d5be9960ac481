"""End-to-end tests of the example kernels in examples/ (every script but the seed reproducers).

Each example is run in-process as ``python examples/<name>.py --target <target> --small`` (``runpy``, so
torch is imported once): it builds its kernel with ``@egtile.jit``, runs it on fresh random inputs,
compares every output element with a float64 torch reference on a NaN-poisoned output, prints
``<name>  target=<target>  PASS|FAIL`` and exits 0 or 1. The test requires exit status 0 and the PASS
line.

Targets: ``interp`` always; ``sim`` when ``egtile.sim.simulate`` and ``egtile.schedule.driver.optimize`` exist
(skipped with the reason when a module is absent, non-strict xfail while a present module does not
provide its entry point yet); ``cuda`` on a compute-capability-9.0 GPU (``gpu`` marker).

The sabotage tests show the examples' checks can fail: with the interpreter made to skip the last
block(s) of the grid, every example must report FAIL.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import runpy
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES_DIR = ROOT / "examples"
NOT_EXAMPLES = {"seed_bug1.py", "seed_bug2.py", "run_seeds.py"}  # the seed reproducers have their own runner
EXAMPLES = sorted(p for p in EXAMPLES_DIR.glob("*.py") if p.name not in NOT_EXAMPLES and not p.name.startswith("_"))
EXPECTED = {"elementwise_add", "pipelined_scale", "row_softmax", "gemm", "quickstart"}


def _sim_marks() -> list:
    """Marks of the ``sim`` cases: skip if a module the target needs is absent, xfail if it is present but its
    entry point does not import yet, none once both import."""
    needed = (("egtile.sim", "simulate"), ("egtile.schedule.driver", "optimize"))
    for module, attr in needed:
        if importlib.util.find_spec(module) is None:
            return [pytest.mark.skip(reason=f"target 'sim' needs {module}.{attr}; module {module} is absent")]
    for module, attr in needed:
        try:
            getattr(importlib.import_module(module), attr)
        except Exception as err:  # noqa: BLE001  (a module being written may fail to import in any way)
            return [pytest.mark.xfail(strict=False, reason=f"{module}.{attr} is not importable yet: "
                                                           f"{type(err).__name__}: {err}")]
    return []


TARGETS = [
    pytest.param("interp", id="interp"),
    pytest.param("sim", id="sim", marks=_sim_marks()),
    pytest.param("cuda", id="cuda", marks=pytest.mark.gpu),
]


def run_example(path: Path, target: str, monkeypatch, capsys) -> tuple[int, str]:
    """Run ``path`` as ``__main__`` with ``--target target --small``; its exit status and stdout."""
    monkeypatch.setattr(sys, "argv", [str(path), "--target", target, "--small"])
    monkeypatch.syspath_prepend(str(EXAMPLES_DIR))
    with pytest.raises(SystemExit) as exc:
        runpy.run_path(str(path), run_name="__main__")
    code = exc.value.code
    return (0 if code is None else code), capsys.readouterr().out


def test_the_examples_are_all_here():
    assert {p.stem for p in EXAMPLES} >= EXPECTED
    for p in EXAMPLES:
        doc = p.read_text().lstrip()
        assert doc.startswith('"""'), f"{p.name} must open with a titled docstring"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_passes(path: Path, target: str, monkeypatch, capsys):
    torch.manual_seed(0x5EED + len(path.stem))  # fresh inputs per example, reproducible on failure
    code, out = run_example(path, target, monkeypatch, capsys)
    assert code == 0, out
    assert f"{path.stem}  target={target}  PASS" in out.splitlines(), out


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_reports_fail_when_a_block_is_not_run(path: Path, monkeypatch, capsys):
    """The examples' checks can fail: an interpreter that skips the last index of the first grid dimension
    leaves output elements unwritten (NaN in the poisoned output), and the example must say FAIL."""
    import egtile.interp

    real = egtile.interp.interpret

    def skip_last_blocks(kernel, *tensors):
        grid = (kernel.grid[0] - 1,) + tuple(kernel.grid[1:])
        real(dataclasses.replace(kernel, grid=grid), *tensors)

    monkeypatch.setattr(egtile.interp, "interpret", skip_last_blocks)
    code, out = run_example(path, "interp", monkeypatch, capsys)
    assert code == 1, out
    assert f"{path.stem}  target=interp  FAIL" in out.splitlines(), out


def test_check_flags_nan_and_out_of_tolerance_elements(capsys):
    sys.path.insert(0, str(EXAMPLES_DIR))
    try:
        from _check import check
    finally:
        sys.path.remove(str(EXAMPLES_DIR))
    ref = torch.randn(4, 5, dtype=torch.float64)
    assert check("ok", ref.float(), ref, rtol=2.0**-24, atol=0.0)
    nan = ref.clone()
    nan[2, 3] = float("nan")
    assert not check("nan", nan, ref, rtol=1.0, atol=1.0)
    off = ref.clone()
    off[1, 4] += 1e-3
    assert not check("off", off, ref, rtol=0.0, atol=5e-4)
    out = capsys.readouterr().out
    assert "worst at (2, 3)" in out and "worst at (1, 4)" in out
    assert not check("shape", ref[:2], ref, rtol=1.0, atol=1.0)
