"""wgmma operands given as column slices of a shared buffer (egtile.rules.mma, ``wgmma-operand-slice``): TileLang's
``T.gemm(Q_shared[:, :D], ...)`` and ``Q_shared[:, D:]`` over a query tile with a rope tail. A slice that starts on
a column panel of its buffer's swizzle is read by the tensor cores through descriptors of the slice's own tile; one
that does not stays on the SIMT path and ``explain()`` names the condition. Values against float64 on fresh random
inputs with NaN-poisoned outputs, in the simulator and on the GPU; the descriptors' byte addresses against the
buffer's layout element by element."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.codegen import build, sass
from egtile.ir import swalk
from egtile.ir.wgmma import WgmmaMma
from egtile.layout import Major, SmemTile, Swizzle, WgmmaOperand
from egtile.layout.smem import descriptor_address

from _check import check, poisoned

M, N, D, R, W = 64, 64, 128, 64, 64


def sliced_kernel(lo: int = 0, hi: int = D):
    """``S = Q[:, lo:hi] K[:, lo:hi]^T + Q[:, D:] K[:, D:]^T`` (A and B K-major column slices of ``D + R``-column
    tiles) and ``O = fp16(S) V[:, W:]`` (B an MN-major column slice: N is V's contiguous dimension)."""

    @T.prim_func
    def main(Q: T.Tensor((M, D + R), "float16"), K: T.Tensor((N, D + R), "float16"),
             V: T.Tensor((N, 2 * W), "float16"), S: T.Tensor((M, N), "float32"), O: T.Tensor((M, W), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Q_s = T.alloc_shared((M, D + R), "float16")
            K_s = T.alloc_shared((N, D + R), "float16")
            V_s = T.alloc_shared((N, 2 * W), "float16")
            P_s = T.alloc_shared((M, N), "float16")
            S_f = T.alloc_fragment((M, N), "float32")
            O_f = T.alloc_fragment((M, W), "float32")
            T.copy(Q[bx * M:(bx + 1) * M, :], Q_s)
            T.copy(K, K_s)
            T.copy(V, V_s)
            T.clear(S_f)
            T.gemm(Q_s[:, lo:hi], K_s[:, lo:hi], S_f, transpose_B=True)
            T.gemm(Q_s[:, D:], K_s[:, D:], S_f, transpose_B=True)
            T.copy(S_f, S)
            T.copy(S_f, P_s)
            T.clear(O_f)
            T.gemm(P_s, V_s[:, W:], O_f)
            T.copy(O_f, O)

    return main


def pipelined_kernel(blocks: int = 3):
    """``S = sum_k Q[:, :D] KV_k[:, :D]^T + Q[:, D:] KV_k[:, D:]^T`` over key blocks ``KV_k`` loaded in a
    ``T.Pipelined`` loop: the slices are of a staged buffer, filled by TMA one panel per box."""

    @T.prim_func
    def main(Q: T.Tensor((M, D + R), "bfloat16"), KV: T.Tensor((blocks * N, D + R), "bfloat16"),
             S: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Q_s = T.alloc_shared((M, D + R), "bfloat16")
            KV_s = T.alloc_shared((N, D + R), "bfloat16")
            S_f = T.alloc_fragment((M, N), "float32")
            T.copy(Q, Q_s)
            T.clear(S_f)
            for k in T.Pipelined(blocks, num_stages=2):
                T.copy(KV[k * N:(k + 1) * N, :], KV_s)
                T.gemm(Q_s[:, :D], KV_s[:, :D], S_f, transpose_B=True)
                T.gemm(Q_s[:, D:], KV_s[:, D:], S_f, transpose_B=True)
            T.copy(S_f, S)

    return main


def _run_pipelined(target: str, device: str, seed: int, blocks: int = 3) -> bool:
    k = egtile.compile(pipelined_kernel(blocks), target=target)
    g = torch.Generator().manual_seed(seed)
    Q = (torch.randn(M, D + R, generator=g) / 4).to(torch.bfloat16)
    KV = (torch.randn(blocks * N, D + R, generator=g) / 4).to(torch.bfloat16)
    ref = sum(Q.double() @ KV[i * N:(i + 1) * N].double().T for i in range(blocks))
    S = poisoned((M, N), torch.float32, device)
    k(Q.to(device), KV.to(device), S)
    return check("S", S, ref, rtol=1e-3, atol=2e-3)


def test_slices_of_a_staged_buffer_in_a_pipeline():
    r = egtile.optimize(pipelined_kernel())
    nodes = [x for x in swalk(r.scheduled.body) if isinstance(x, WgmmaMma)]
    assert len(nodes) == 2 and all(len(x.gemm.b.extents) == 3 for x in nodes), r.explain()  # staged KV_s
    build(r.scheduled)
    assert _run_pipelined("sim", "cpu", seed=5)


def _inputs(device, seed):
    g = torch.Generator().manual_seed(seed)
    Q, K = ((torch.randn(n, D + R, generator=g) / 4).to(torch.float16) for n in (M, N))
    V = (torch.randn(N, 2 * W, generator=g) / 4).to(torch.float16)
    s = Q.double() @ K.double().T
    o = s.to(torch.float32).to(torch.float16).double() @ V[:, W:].double()
    return [x.to(device) for x in (Q, K, V)], s, o


def _run(target: str, device: str, seed: int) -> bool:
    k = egtile.compile(sliced_kernel(), target=target)
    (Q, K, V), s, o = _inputs(device, seed)
    S, O = poisoned((M, N), torch.float32, device), poisoned((M, W), torch.float32, device)
    k(Q, K, V, S, O)
    # float32 accumulation of D + R products of magnitude 1/16; P is S rounded to float16 (one ulp of S's size)
    return check("S", S, s, rtol=1e-3, atol=1e-3) and check("O", O, o, rtol=2e-3, atol=2e-2)


def test_panel_aligned_slices_are_wgmma_operands():
    r = egtile.optimize(sliced_kernel())
    nodes = [x for x in swalk(r.scheduled.body) if isinstance(x, WgmmaMma)]
    assert len(nodes) == 3, r.explain()
    by_k = {(x.gemm.a.extents[-1], x.gemm.b.extents[-1]): x for x in nodes[:2]}
    assert set(by_k) == {(D, D), (R, R)}
    assert all((x.a_major, x.b_major) == ("K", "K") for x in nodes[:2])
    assert nodes[2].b_major == "MN" and nodes[2].gemm.b.extents[-1] == W
    # 128-byte swizzle: 64-column panels, so every slice here starts on one
    assert {r.scheduled.buffer(n).layout for n in ("Q_s", "K_s", "V_s")} == {"swizzle128"}
    built = build(r.scheduled)  # NVRTC to a cubin: the descriptors of each slice are emitted
    if sass.available():
        assert sass.disassemble(built.cubin).count("HGMMA.64x64x16.F32") == (D + R) // 16 + N // 16


def test_a_slice_off_the_panels_stays_simt_and_explain_names_the_condition():
    # columns [16, 128): 16 float16 columns are one 32-byte panel, so only the 32-byte swizzle can read it, and the
    # other slice of Q_s and K_s takes it too (a buffer has one layout); [8, 120) starts on no panel of any swizzle
    r16 = egtile.optimize(sliced_kernel(lo=16))
    assert len([x for x in swalk(r16.scheduled.body) if isinstance(x, WgmmaMma)]) == 3
    assert r16.scheduled.buffer("Q_s").layout == r16.scheduled.buffer("K_s").layout == "swizzle32"
    r = egtile.optimize(sliced_kernel(lo=8, hi=120))
    assert len([x for x in swalk(r.scheduled.body) if isinstance(x, WgmmaMma)]) == 2
    text = r.explain()
    assert "wgmma-operand-slice" in text and "does not start on a column panel" in text, text


def test_slice_descriptors_read_the_buffers_bytes():
    # the tile of the slice's columns, based at its first element, reads what the buffer holds there: for every
    # element of every instruction, the descriptor's address (PTX ISA canonical layout) is the buffer's address
    for sw in (Swizzle.B128, Swizzle.B64, Swizzle.B32):
        whole = SmemTile(64, 192, 2, sw)
        pc = whole.panel_cols
        for c0 in range(0, 192, pc):
            for n in range(pc, 192 - c0 + 1, pc):
                if n % 16:
                    continue
                sub = SmemTile(64, n, 2, sw)
                base = whole.offset(0, c0)
                assert base % sw.pattern_bytes == 0 and whole.address(0, c0) == base
                for major in (Major.K, Major.MN):
                    op = WgmmaOperand(sub, major, "A" if major is Major.K else "B")
                    if major is Major.K:
                        for k0 in range(0, n, 16):
                            d = op.descriptor(0, k0)
                            for mn in range(64):
                                for k in range(16):
                                    got = descriptor_address(d.advanced(base), major, 2, mn, k)
                                    assert got == whole.address(mn, c0 + k0 + k)
                    elif n <= 256:
                        d = op.descriptor(0, 0, n)
                        for mn in range(n):
                            for k in range(16):
                                got = descriptor_address(d.advanced(base), major, 2, mn, k)
                                assert got == whole.address(k, c0 + mn)


def test_slices_match_float64_in_the_simulator():
    assert _run("sim", "cpu", seed=3)


@pytest.mark.gpu
def test_slices_match_float64_on_the_gpu():
    assert _run("cuda", "cuda", seed=4)
    assert _run_pipelined("cuda", "cuda", seed=6, blocks=8)
