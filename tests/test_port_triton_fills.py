"""benchmarks/port_standins/port_triton_fills.py: the fills the TileLang port harness gives triton's CPU interpreter
(measuring environment only). Each kernel runs in a fresh subprocess (the fills patch triton globally) on fresh
random inputs and is compared element by element against torch: bfloat16 loads, arithmetic, comparisons, casts and
stores rounded as the GPU's bfloat16 arithmetic does (float32 product and sum, rounded to nearest even), a bfloat16
``tl.dot`` against a float64 matmul, a float kernel argument typed float32 (the product of a bfloat16 block with it
is float32, as compiled), a ``tl.exp`` bound to a module-level name, and libdevice's ``exp2``. triton is never an
egtile dependency: without it (CI) the test is skipped."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")

FILLS = Path(__file__).resolve().parents[1] / "benchmarks" / "port_standins"

KERNEL = textwrap.dedent(f"""
    import os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, {str(FILLS)!r})
    import port_triton_fills
    filled = port_triton_fills.fill()
    import torch, triton, triton.language as tl
    import triton.language.extra.libdevice as tldevice

    exp_alias = tl.exp          # fla 0.2's `exp = tl.exp`
    exp2_dev = tldevice.exp2    # fla's libdevice exp2

    @triton.jit
    def kernel(X, Y, DOT, ELT, SCALED, EXP, N: tl.constexpr, scale):
        o = tl.arange(0, N)
        idx = o[:, None] * N + o[None, :]
        x = tl.load(X + idx)
        y = tl.load(Y + idx)
        tl.store(DOT + idx, tl.dot(x, y))
        w = tl.where(x > y, x * y, 0.5) + x          # bfloat16 product, literal, comparison and sum
        tl.store(ELT + idx, w)
        tl.store(SCALED + idx, x * scale)            # bfloat16 * float32 argument: float32
        tl.store(EXP + idx, exp_alias(x.to(tl.float32)) + exp2_dev(y.to(tl.float32)))

    torch.manual_seed(int(sys.argv[1]))
    n = 16
    x = torch.randn(n, n).bfloat16()
    y = torch.randn(n, n).bfloat16()
    dot = torch.full((n, n), float("nan"))
    elt = torch.full((n, n), float("nan")).bfloat16()
    scaled = torch.full((n, n), float("nan"))
    ex = torch.full((n, n), float("nan"))
    scale = float(torch.rand(()).item()) + 0.1
    kernel[(1,)](x, y, dot, elt, scaled, ex, N=n, scale=scale)

    assert {{"bfloat16", "bfloat16 constants", "float arguments", "builtin aliases", "libdevice"}} <= set(filled), filled
    want_dot = (x.double() @ y.double()).float()
    assert torch.allclose(dot, want_dot, rtol=1e-5, atol=1e-5), (dot - want_dot).abs().max()
    prod = (x.float() * y.float()).bfloat16()        # one rounding, as the GPU's bfloat16 multiply
    want_elt = (torch.where(x > y, prod, torch.tensor(0.5).bfloat16()).float() + x.float()).bfloat16()
    assert torch.equal(elt, want_elt), (elt.float() - want_elt.float()).abs().max()
    want_scaled = x.float() * torch.tensor(scale, dtype=torch.float32)
    assert torch.equal(scaled, want_scaled), (scaled - want_scaled).abs().max()
    want_ex = torch.exp(x.double()) + torch.exp2(y.double())
    assert torch.allclose(ex.double(), want_ex, rtol=1e-6, atol=1e-6), (ex.double() - want_ex).abs().max()
    print("ok")
""")


@pytest.mark.parametrize("seed", [0, 1])
def test_fills_give_compiled_triton_meaning(tmp_path, seed):
    script = tmp_path / "kernel.py"
    script.write_text(KERNEL)
    run = subprocess.run([sys.executable, str(script), str(seed)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stdout + run.stderr
