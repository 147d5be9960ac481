"""Fragment groups beyond the register budget (egtile.rules.fragment, "Register pressure"): they stay in registers,
with an estimated spill cost and an explain() note, instead of moving to shared memory, where TileLang's
flash-attention example at its own defaults (128x128 blocks, head dim 128, 128 threads: 272 fragment registers per
thread at the peak) overflowed the 227 KB per block (L8, 297488 bytes). A wgmma whose accumulator (and register A)
cannot be held while it is in flight is still refused (tests/test_rules_mma.py, 256 accumulator registers).

CPU: the schedule, the checker and the estimate. GPU (``-m gpu``): the example at its defaults against a float64
reference on fresh random inputs, causal and not, through NVRTC's spilling cubin.

    python3 -m pytest -q tests/test_fragment_spill.py            # CPU part
    python3 -m pytest -q -m gpu tests/test_fragment_spill.py     # on the H200
"""

from __future__ import annotations

import math

import pytest
import torch

import egtile
from egtile.ir import swalk
from egtile.ir.wgmma import WgmmaMma
from egtile.rules import fragment as F

from _check import check, poisoned
from attention_port import flashattn
from gemm_kernels import gemm_kernel

DEFAULTS = dict(block_M=128, block_N=128, num_stages=1, threads=128)  # the example's main()


@pytest.fixture(scope="module")
def tilelang_default():
    # S = 1024: several key blocks, so that the output accumulator is live across the loop (at S = block_N
    # ptxas folds the single iteration and the pressure disappears)
    return egtile.optimize(flashattn(1, 1, 1024, 128, False, **DEFAULTS))


def test_tilelang_default_config_keeps_its_fragments_in_registers(tilelang_default):
    r = tilelang_default
    assert egtile.verify(r.scheduled) == []
    frags = [b.name for b in r.scheduled.buffers if b.scope == "fragment"]
    assert frags and all(r.scheduled.fragment(n) is not None for n in frags), frags
    mma = [x for x in swalk(r.scheduled.body) if isinstance(x, WgmmaMma)]
    assert len(mma) == 2 and [x.a_registers for x in mma] == [False, True]
    assert {b.name for b in r.scheduled.buffers if b.scope == "shared"} == {"Q_shared", "K_shared", "V_shared",
                                                                              "O_shared"}


def test_explain_says_the_group_spills_and_why_it_was_chosen(tilelang_default):
    text = tilelang_default.explain()
    assert "fragment-registers: registers, beyond the budget (ptxas spills)" in text
    assert "hold 272 registers per thread" in text and "against the 240 of setmaxnreg at 128 consumer threads" in text
    assert "about 56 registers per thread spill to local memory" in text
    assert "no cheaper alternative holds" in text


def test_live_peak_counts_the_loop_carried_output_with_the_scores_not_the_cast():
    k = flashattn(1, 1, 1024, 128, False, **DEFAULTS).kernel
    sp = F.spill_of(k, "acc_s")
    # acc_s and acc_o: 128 x 128 f32 over 128 threads = 128 each; 4 rows per thread of each live row fragment
    assert {"acc_s", "acc_o"} <= set(sp.live) and "acc_s_cast" not in sp.live
    assert sp.peak == 128 + 128 + 4 * (len(sp.live) - 2)
    assert sp.available == 240 and sp.spilled == sp.peak + F.SPILL_RESERVE - 240 > 0
    # charged once over the group: the two gemms' shares add up to the group's cost
    gemms = _gemms(k)
    assert len(gemms) == 2
    shares = [F.spill_cost(k, g) for g in gemms]
    assert sum(shares) >= sp.cost and max(shares) - min(shares) <= 1


@pytest.mark.parametrize("threads,block_M", [(256, 128), (128, 64)])
def test_configs_that_fit_are_charged_nothing(threads, block_M):
    k = flashattn(1, 1, 1024, 128, False, block_M=block_M, block_N=128, num_stages=1, threads=threads).kernel
    sp = F.spill_of(k, "acc_s")
    assert sp.spilled == 0 and sp.cost == 0
    assert all(F.spill_cost(k, g) == 0 for g in _gemms(k))


def test_a_gemm_accumulator_between_the_old_budget_and_the_inflight_limit_runs_on_wgmma():
    # 128 x 192 f32 on one warpgroup: 192 accumulator registers per thread, over setmaxnreg 240 less 64 (the old
    # budget, which put C in shared memory on SIMT cores) and within 240 less 16 (what a thread can hold in flight)
    r = egtile.optimize(gemm_kernel(256, 384, 128, block_M=128, block_N=192, block_K=32, threads=128))
    assert egtile.verify(r.scheduled) == []
    mma = [x for x in swalk(r.scheduled.body) if isinstance(x, WgmmaMma)]
    assert mma and mma[0].tiling.registers_per_thread == 192
    assert F.spill_of(r.scheduled.kernel, "C_f").spilled == 0  # 192 + the reserve fit 240: no note
    assert "fragment-registers" not in r.explain()


def _gemms(k):
    from egtile.ir import walk

    return [s for s in walk(k.body) if type(s).__name__ == "Gemm"]


def _reference(Q, K, V, causal):
    q, k, v = (x.double().transpose(1, 2) for x in (Q, K, V))
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    return (p @ v).transpose(1, 2), (p @ v.abs()).transpose(1, 2)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_tilelang_default_config_matches_a_float64_reference_on_the_h200(causal):
    b, h, s, d = 2, 4, 1024, 128
    kernel = egtile.compile(flashattn(b, h, s, d, causal, **DEFAULTS), target="cuda")
    assert "fragment-registers" in kernel.explain()
    Q, K, V = (torch.randn(b, s, h, d, dtype=torch.float16, device="cuda") for _ in range(3))
    O = poisoned((b, s, h, d), torch.float16, "cuda")  # noqa: E741
    kernel(Q, K, V, O)
    ref, scale = _reference(Q, K, V, causal)
    u = 2.0**-11  # examples/flash_attention.py's bound: 4 u (P |V|) + u |ref|
    assert check("O", O, ref, rtol=u, atol=4 * u * scale + 1e-6)


def _with_consumer_regs(sched, n: int):
    from dataclasses import replace

    from egtile.ir.scheduled import RoleSplit

    def fix(stmts):
        out = []
        for s in stmts:
            if isinstance(s, RoleSplit):
                s = replace(s, roles=tuple(replace(r, setmaxnreg=("inc", n)) if r.setmaxnreg and r.setmaxnreg[0] == "inc"
                                           else r for r in s.roles))
            elif hasattr(s, "body") and isinstance(getattr(s, "body"), tuple):
                s = replace(s, body=tuple(fix(s.body)))
            out.append(s)
        return out

    return replace(sched, body=tuple(fix(sched.body)))


def test_the_checker_refuses_a_wgmma_whose_inflight_registers_exceed_its_roles_setmaxnreg(tilelang_default):
    # the P V wgmma keeps 128 accumulator + 64 A registers until its wait: under setmaxnreg 200 (a planted
    # allocation; the schedule asks 240) they cannot be held, and spilling them is not allowed
    bad = _with_consumer_regs(tilelang_default.scheduled, 200)
    found = [v for v in egtile.verify(bad) if v.property == "L8"]
    assert any("holds 192 accumulator and A registers" in v.message and "setmaxnreg 200" in v.message for v in found), found
    assert not any("holds 128 accumulator" in v.message for v in found)  # Q K^T: 128 + 16 <= 200
