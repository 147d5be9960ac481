"""One shared buffer read by two gemms on the tensor cores takes one layout (egtile.rules.mma,
``wgmma-buffer-one-layout``). ``X`` is the K-major B of ``S = Q X^T`` (any swizzle) and the MN-major B of
``O = fp16(S) X`` whose 64 x 64 accumulator is N-split over two warpgroups (32 columns each: a 128-byte panel of
64 columns is more than one instruction reads), the shape of TileLang's sparse MLA backward (``KV_tail_shared``).
Before the condition, extraction chose the 128-byte swizzle for one and the 64-byte one for the other, and the
lowering refused the schedule ("needs two layouts")."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.ir import swalk
from egtile.ir.wgmma import WgmmaMma

from _check import check, poisoned

M = N = 64


def two_roles_kernel():
    @T.prim_func
    def main(Q: T.Tensor((M, N), "float16"), X: T.Tensor((N, N), "float16"), S: T.Tensor((M, N), "float32"),
             O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=256) as bx:
            Q_s = T.alloc_shared((M, N), "float16")
            X_s = T.alloc_shared((N, N), "float16")
            P_s = T.alloc_shared((M, N), "float16")
            S_f = T.alloc_fragment((M, N), "float32")
            O_f = T.alloc_fragment((M, N), "float32")
            T.copy(Q, Q_s)
            T.copy(X, X_s)
            T.gemm(Q_s, X_s, S_f, transpose_B=True, clear_accum=True)
            T.copy(S_f, S)
            T.copy(S_f, P_s)
            T.gemm(P_s, X_s, O_f, clear_accum=True)
            T.copy(O_f, O)

    return main


def test_both_gemms_read_the_buffer_in_the_one_layout_they_admit():
    r = egtile.optimize(two_roles_kernel())
    nodes = [x for x in swalk(r.scheduled.body) if isinstance(x, WgmmaMma)]
    assert len(nodes) == 2, r.explain()
    assert [x.b_major for x in nodes] == ["K", "MN"]
    assert {x.b_swizzle for x in nodes} == {r.scheduled.buffer("X_s").layout} == {"swizzle64"}
    assert "wgmma-buffer-one-layout" in r.explain()


def _run(target, device, seed):
    k = egtile.compile(two_roles_kernel(), target=target)
    g = torch.Generator().manual_seed(seed)
    Q, X = ((torch.randn(M, N, generator=g) / 4).to(torch.float16) for _ in range(2))
    s = Q.double() @ X.double().T
    o = s.to(torch.float32).to(torch.float16).double() @ X.double()
    S, O = poisoned((M, N), torch.float32, device), poisoned((M, N), torch.float32, device)
    k(Q.to(device), X.to(device), S, O)
    return check("S", S, s, rtol=1e-3, atol=1e-3) and check("O", O, o, rtol=2e-3, atol=2e-2)


def test_matches_float64_in_the_simulator():
    assert _run("sim", "cpu", seed=1)


@pytest.mark.gpu
def test_matches_float64_on_the_gpu():
    assert _run("cuda", "cuda", seed=2)
