"""wgmma's FP8 form (egtile.rules.mma): ``T.gemm`` on float8_e4m3fn / float8_e5m2 operands as
``wgmma.mma_async.sync.aligned.m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2}`` (PTX ISA 9.7.15.5.2).

What the e-graph chooses (K-major operands: A given M x K, B given N x K with ``transpose_B=True``) and what it
refuses with the reason (an MN-major 8-bit operand: the FP8 form has no imm-trans), that the schedules compute the
interpreter's result in the simulator (fresh random inputs, NaN-poisoned outputs, every element against a float64
reference of the fp8-decoded values), that the generated CUDA compiles with NVRTC to QGMMA (SASS through cuobjdump,
CPU only), that the checkers catch an operand read in the wrong major-ness, and (``-m gpu``) the H200.

On the GPU the FP8 tensor core accumulates with fewer significand bits than float32 (module docstring of
egtile.rules.mma), so the GPU tests compare exactly only inputs whose every partial sum is an integer below 2^13
(exact in any accumulator of 14 significant bits), and general inputs within a bound on that accumulation.
"""

from __future__ import annotations

import re

import pytest
import torch

import egtile
from egtile import language as T
from egtile.codegen import build, sass
from egtile.ir import swalk
from egtile.ir.wgmma import WgmmaMma

from _check import check, poisoned

E4M3, E5M2 = "float8_e4m3fn", "float8_e5m2"
PAIRS = [(E4M3, E4M3), (E5M2, E5M2), (E4M3, E5M2)]
SCALE = {E4M3: 8.0, E5M2: 64.0}
PTX = {E4M3: "E4M3", E5M2: "E5M2"}


def fp8_gemm(M: int, N: int, K: int, fa: str = E4M3, fb: str = E4M3, *, bm: int = 64, bn: int = 64, bk: int = 32,
             threads: int = 128, stages: int = 2, trans_a: bool = False, trans_b: bool = True):
    """C = op(A) @ op(B) in float32, A given M x K (K x M with ``trans_a``), B given N x K with ``trans_b`` (the
    K-major form TileLang's FP8 GEMM uses), else K x N."""
    a_shape, as_shape = ((K, M), (bk, bm)) if trans_a else ((M, K), (bm, bk))
    b_shape, bs_shape = ((N, K), (bn, bk)) if trans_b else ((K, N), (bk, bn))

    @T.prim_func
    def main(A: T.Tensor(a_shape, fa), B: T.Tensor(b_shape, fb), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, threads=threads) as (bx, by):
            A_s = T.alloc_shared(as_shape, fa)
            B_s = T.alloc_shared(bs_shape, fb)
            C_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for k in T.Pipelined(K // bk, num_stages=stages):
                if trans_a:
                    T.copy(A[k * bk, by * bm], A_s)
                else:
                    T.copy(A[by * bm, k * bk], A_s)
                if trans_b:
                    T.copy(B[bx * bn, k * bk], B_s)
                else:
                    T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f, transpose_A=trans_a, transpose_B=trans_b)
            T.copy(C_f, C[by * bm, bx * bn])

    return main


def two_accumulator_gemm(M: int, N: int, K: int, fmt: str = E4M3, *, bm: int = 64, bn: int = 64, bk: int = 32,
                         interval: int = 2, threads: int = 128):
    """DeepSeek's two-level accumulation with the constructs of TileLang's 2xAcc FP8 GEMM: the wgmma accumulator is
    added into a second float32 fragment and cleared every ``interval`` K tiles, the tail after the loop."""
    iters = K // bk

    @T.prim_func
    def main(A: T.Tensor((M, K), fmt), B: T.Tensor((N, K), fmt), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), fmt)
            B_s = T.alloc_shared((bn, bk), fmt)
            C_local = T.alloc_fragment((bm, bn), "float32")
            C_acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_local)
            T.clear(C_acc)
            for k in T.Pipelined(iters, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, C_local, transpose_B=True)
                if (k + 1) % interval == 0:
                    for i, j in T.Parallel(bm, bn):
                        C_acc[i, j] += C_local[i, j]
                    T.clear(C_local)
            if iters % interval != 0:
                for i, j in T.Parallel(bm, bn):
                    C_acc[i, j] += C_local[i, j]
            T.copy(C_acc, C[by * bm, bx * bn])

    return main


def operands(M, N, K, fa, fb, *, trans_a=False, trans_b=True, integers=False, seed=0, device="cpu"):
    """Fresh random fp8 operands in the kernel's layouts (``integers``: values in [-4, 4], whose products and every
    partial sum of K <= 512 of them are integers below 2^13) and the float64 reference of the decoded values with
    the sum of the absolute products."""
    g = torch.Generator().manual_seed(seed + 7 * M + 3 * N + K)

    def draw(shape, fmt):
        if integers:
            x = torch.randint(-4, 5, shape, generator=g).float()
        else:
            x = torch.randn(shape, generator=g) * SCALE[fmt]
        return x.to(getattr(torch, fmt))

    A = draw((K, M) if trans_a else (M, K), fa)
    B = draw((N, K) if trans_b else (K, N), fb)
    a64 = A.double().T if trans_a else A.double()
    b64 = B.double().T if trans_b else B.double()
    return A.to(device), B.to(device), a64 @ b64, a64.abs() @ b64.abs()


def f32_bound(K: int, rabs):
    """float32 accumulation of exact products: ``|error| <= K 2^-24 sum |a b|`` (the interpreter and the simulator)."""
    return rabs * K * 2.0 ** -24 + 1e-30


def _ops(r) -> set[str]:
    return {n.op for top in r.tree for n in top.walk()}


def _node(r):
    return next(x for x in swalk(r.scheduled.body) if isinstance(x, WgmmaMma))


# ---- what the e-graph chooses -----------------------------------------------------------------------


@pytest.mark.parametrize("fa,fb", PAIRS, ids=["e4m3", "e5m2", "e4m3xe5m2"])
def test_k_major_fp8_gemm_becomes_the_k32_wgmma(fa, fb):
    r = egtile.optimize(fp8_gemm(128, 128, 256, fa, fb, bm=64, bn=128, bk=128))
    assert "wgmma" in _ops(r)
    w = _node(r)
    assert (w.a_major, w.b_major) == ("K", "K")
    # 128 fp8 values of K are one 128-byte swizzle row
    assert (w.a_swizzle, w.b_swizzle) == ("swizzle128", "swizzle128")
    assert r.scheduled.fragment("C_f") == w.tiling.fragment()
    text = r.explain()
    assert f"m64n128k32.f32.{PTX[fa].lower()}.{PTX[fb].lower()} per k32 step" in text
    assert "wgmma-8bit-k-major" in text and "wgmma-operand-types" in text
    assert egtile.verify(r.scheduled) == []


@pytest.mark.parametrize("trans_a,trans_b,names", [(False, False, "transpose_B=False"),
                                                    (True, True, "transpose_A=True"),
                                                    (True, False, "transpose_A=True")],
                         ids=["B-KxN", "A-KxM", "both-MN"])
def test_mn_major_fp8_operand_stays_simt_and_explain_says_why(trans_a, trans_b, names):
    from egtile.rules import mma
    from egtile.schedule.facts import FactContext

    pf = fp8_gemm(64, 64, 64, E4M3, E5M2, trans_a=trans_a, trans_b=trans_b)
    r = egtile.optimize(pf)
    assert not any(op.startswith("wgmma") for op in _ops(r))
    line = next(x for x in r.explain().splitlines() if "SIMT gemm" in x)
    why = r.explain().split(line, 1)[1].splitlines()[1]
    assert "wgmma-8bit-k-major" in why and names in why and "K-major only" in why, why
    ctx = FactContext.of(pf.kernel)
    g = next(s for s in ctx.stmts.values() if type(s).__name__ == "Gemm")
    assert mma.wgmma_options(ctx, g)[0] == 0
    assert not mma.WGMMA_8BIT_K_MAJOR.compute(ctx, g).ok and mma.WGMMA_OPERAND_TYPES.compute(ctx, g).ok


def test_16bit_operands_keep_both_transposes():
    # the K-major restriction is the 8-bit form's: f16 B given K x N (MN-major, imm-trans-b) stays a wgmma
    from egtile.rules import mma

    from egtile.ir import walk

    g = fp8_gemm(64, 64, 64, trans_b=False).kernel
    gemm = next(s for s in walk(g.body) if type(s).__name__ == "Gemm")
    assert mma.k_major_problems(gemm, "float16", "float16") == [] and mma.k_major_problems(gemm, E4M3, E4M3)
    assert mma.operand_type_problems(E4M3, E5M2) == [] and mma.operand_type_problems("float16", E4M3)
    assert mma.k_step(E5M2) == 32 and mma.k_step("bfloat16") == 16


# ---- the simulator computes what the interpreter computes ---------------------------------------------


def _run(pf, target, M, N, K, fa, fb, **kw):
    k = egtile.compile(pf, target=target)
    out = {}
    for integers in (False, True):
        A, B, ref, rabs = operands(M, N, K, fa, fb, integers=integers, seed=11, **kw)
        C = poisoned((M, N), torch.float32, "cpu")
        k(A, B, C)
        assert check(f"{target} {fa} x {fb}", C, ref, rtol=0.0, atol=f32_bound(K, rabs))
        if integers:  # every partial sum exact: the result is the reference, bit for bit
            assert torch.equal(C.double(), ref)
        out[integers] = C
    return out


@pytest.mark.parametrize("fa,fb", PAIRS, ids=["e4m3", "e5m2", "e4m3xe5m2"])
def test_fp8_wgmma_matches_the_interpreter_and_torch_in_the_simulator(fa, fb):
    M, N, K = 64, 64, 128  # 4 K tiles over 2 stages: every stage refilled while the loop runs
    pf = fp8_gemm(M, N, K, fa, fb)
    assert "wgmma" in _ops(egtile.optimize(pf))
    sim = _run(pf, "sim", M, N, K, fa, fb)
    interp = _run(pf, "interp", M, N, K, fa, fb)
    assert torch.equal(sim[True], interp[True])


def test_two_warpgroups_split_an_fp8_accumulator_in_the_simulator():
    M, N, K = 128, 64, 64
    pf = fp8_gemm(M, N, K, E5M2, E4M3, bm=128, bn=64, bk=64, threads=256)
    r = egtile.optimize(pf)
    assert _node(r).tiling.warpgroups == 2
    _run(pf, "sim", M, N, K, E5M2, E4M3)


def test_mn_major_fp8_gemm_still_computes_on_the_simt_cores():
    M, N, K = 64, 64, 64
    _run(fp8_gemm(M, N, K, E4M3, E4M3, trans_b=False), "sim", M, N, K, E4M3, E4M3, trans_b=False)


def test_two_accumulator_fp8_gemm_runs_on_the_tensor_cores():
    # DeepSeek's 2xAcc with TileLang's example tile (128 x 128 x 64, 128 threads): the two float32 accumulators
    # are register fragments now (they were 128 KB of shared memory on the SIMT path: a ResourceError)
    big = two_accumulator_gemm(256, 256, 512, bm=128, bn=128, bk=64)
    r = egtile.optimize(big)
    assert "wgmma" in _ops(r)
    assert r.scheduled.fragment("C_local") is not None and r.scheduled.fragment("C_acc") is not None
    assert egtile.verify(r.scheduled) == []
    # and at a simulator size, the tail included (5 K tiles, promoted every 2)
    M, N, K = 64, 64, 160
    _run(two_accumulator_gemm(M, N, K), "sim", M, N, K, E4M3, E4M3)


# ---- NVRTC and SASS -----------------------------------------------------------------------------------


@pytest.mark.skipif(not sass.available(), reason="cuobjdump/nvdisasm not installed")
@pytest.mark.parametrize("fa,fb", [(E4M3, E4M3), (E5M2, E4M3)], ids=["e4m3", "e5m2xe4m3"])
def test_nvrtc_compiles_the_fp8_wgmma_to_qgmma(fa, fb):
    pytest.importorskip("cuda.bindings")
    r = egtile.optimize(fp8_gemm(4096, 4096, 4096, fa, fb, bm=128, bn=128, bk=128))
    try:
        built = build(r.scheduled)
    except ImportError:
        pytest.skip("NVRTC is not installed")
    text = sass.disassemble(built.cubin)
    # the FP8 tensor-core instruction's SASS name is QGMMA (HGMMA is the 16-bit one)
    assert f"QGMMA.64x128x32.F32.{PTX[fa]}.{PTX[fb]}" in text, sorted(set(re.findall(r"\w*GMMA[\w.]*", text)))
    assert "HGMMA" not in text and "UTMALDG" in text
    assert not re.search(r"\b(LDL|STL)\b", text)
    assert sass.resource_usage(built.cubin)["LOCAL"] == 0
    assert "C7512" not in built.log, built.log  # "wgmma serialized"


# ---- the checkers: an operand read in the wrong major-ness ---------------------------------------------


def test_fp8_b_read_mn_major_is_caught_by_the_verifier_and_the_simulator():
    from egtile.errors import SimulationError
    from egtile.rules import mma
    from egtile.sim import POLICIES, simulate

    pf = fp8_gemm(64, 64, 64)
    r = egtile.optimize(pf, rules=mma.mutant("wgmma-b-major-flipped"))
    assert _node(r).b_major == "MN"
    found = egtile.verify(r.scheduled)
    assert any(v.property == "L1" and "read K-major" not in str(v) and "MN-major" in str(v) for v in found), found
    A, B, _, _ = operands(64, 64, 64, E4M3, E4M3)
    for policy in POLICIES:
        C = poisoned((64, 64), torch.float32, "cpu")
        with pytest.raises(SimulationError, match="operand B is read MN-major"):
            simulate(r.scheduled, A, B, C, policy=policy, seed=1)


# ---- the H200 -----------------------------------------------------------------------------------------

GPU_CASES = [
    dict(M=128, N=128, K=256, bm=64, bn=64, bk=32),
    dict(M=256, N=256, K=512, bm=128, bn=128, bk=128, threads=256, stages=3),
]


def fp8_accumulation_bound(K: int, rabs):
    """The H200's FP8 tensor core keeps about 13 significand bits after the point in its running sum (e8m13, a
    truncation): at most ``2^-12`` of the running sum's magnitude, itself at most ``sum |a b|``, per addition, for
    at most ``K`` additions."""
    return rabs * K * 2.0 ** -12 + 1e-30


def _run_gpu(case, fa, fb):
    c = dict(case)
    M, N, K = c.pop("M"), c.pop("N"), c.pop("K")
    k = egtile.compile(fp8_gemm(M, N, K, fa, fb, **c), target="cuda")
    # the tensor cores' FP8 form, not the SIMT gemm (which would pass the same checks)
    assert "eg_wgmma_ss_f8<" in k.get_kernel_source() and any(isinstance(x, WgmmaMma) for x in swalk(k.scheduled.body))
    for integers in (True, False):
        A, B, ref, rabs = operands(M, N, K, fa, fb, integers=integers, seed=5, device="cuda")
        C = poisoned((M, N), torch.float32, "cuda")
        k(A, B, C)
        got = C.cpu().double()
        ref32 = (A.float() @ B.float().T).cpu().double()  # torch's float32 matmul of the decoded values
        if integers:
            assert torch.equal(got, ref) and torch.equal(ref32, ref)
        else:
            assert check(f"cuda {fa} x {fb} {M}x{N}x{K}", C, ref, rtol=0.0, atol=fp8_accumulation_bound(K, rabs))
            rel = float((got - ref).norm() / ref.norm())
            rel32 = float((ref32 - ref).norm() / ref.norm())
            worst = float(((got - ref).abs() / rabs).max())
            print(f"fp8 gemm {fa} x {fb} {M}x{N}x{K}: relative error {rel:.3e} (torch float32 {rel32:.3e}), "
                  f"max |err| / sum|ab| = {worst:.3e} (2^-13 = {2.0 ** -13:.3e})")
            assert rel < 2.0 ** -10, rel


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=["64x64x32-1wg", "128x128x128-2wg"])
@pytest.mark.parametrize("fmt", [E4M3, E5M2])
def test_fp8_wgmma_on_the_gpu(fmt, case):
    _run_gpu(case, fmt, fmt)


@pytest.mark.gpu
def test_mixed_fp8_wgmma_on_the_gpu():
    _run_gpu(GPU_CASES[0], E5M2, E4M3)
