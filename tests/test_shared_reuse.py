"""A dead shared buffer's space reused (egtile.analysis.shared_reuse, TileLang's MergeSharedMemoryAllocations): an
MLA-decode-shaped kernel whose shared buffers laid side by side exceed a block's 227 KB runs with its output tile
in its query tile's space; each condition that keeps the renaming meaningful refuses the pair it is about."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.analysis import shared_reuse
from egtile.errors import ResourceError

from _check import poisoned

H, D, BN = 64, 512, 64


def decode_kernel(n: int = 128, variant: str = "reuse"):
    """``Out = sum_k (Q K_k^T rounded to float16) K_k`` over key blocks ``K_k`` of ``BN`` rows, an MLA decode without
    the softmax. Q, two stages of KV and O are 64 x 512 float16 tiles: 4 x 64 KB do not fit a block, three do.
    ``variant``: "reuse" (O first written after the loop: it may take Q's space), "q-read-after" (Q read once more
    after O's first write: lives overlap), "partial" (O's first write covers half of it), "other-dtype" (O float32
    is another type: no renaming)."""
    o_dtype = "float32" if variant == "other-dtype" else "float16"

    @T.prim_func
    def main(Q: T.Tensor((H, D), "float16"), KV: T.Tensor((n, D), "float16"), Out: T.Tensor((H, D), o_dtype)):
        with T.Kernel(1, threads=256) as bx:
            Q_s = T.alloc_shared((H, D), "float16")
            KV_s = T.alloc_shared((BN, D), "float16")
            S_s = T.alloc_shared((H, BN), "float16")
            O_s = T.alloc_shared((H, D), o_dtype)
            acc_s = T.alloc_fragment((H, BN), "float32")
            acc_o = T.alloc_fragment((H, D), "float32")
            T.copy(Q[bx * H:(bx + 1) * H, :], Q_s)
            T.fill(acc_o, 0)
            for k in T.Pipelined(n // BN, num_stages=2):
                T.copy(KV[k * BN:(k + 1) * BN, :], KV_s)
                T.clear(acc_s)
                T.gemm(Q_s, KV_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.copy(acc_s, S_s)
                T.gemm(S_s, KV_s, acc_o, policy=T.GemmWarpPolicy.FullCol)
            if variant == "partial":
                T.copy(acc_o[:, :D // 2], O_s[:, :D // 2])
                T.copy(acc_o[:, D // 2:], O_s[:, D // 2:])
            else:
                T.copy(acc_o, O_s)
            if variant == "q-read-after":
                T.copy(Q_s[:, :8], O_s[:, :8])
            T.copy(O_s, Out[bx * H:(bx + 1) * H, :])

    return main


def _reference(Q, KV, n):
    out = torch.zeros(H, D, dtype=torch.float64)
    for k in range(n // BN):
        K = KV[k * BN:(k + 1) * BN].double()
        s = (Q.double() @ K.T).to(torch.float32).to(torch.float16).double()
        out += s @ K
    return out


def test_candidates_name_the_dead_query_tile():
    kernel = decode_kernel().kernel
    (r,) = shared_reuse.candidates(kernel)
    assert (r.buffer, r.space, r.bytes) == ("O_s", "Q_s", H * D * 2)
    renamed = shared_reuse.apply(kernel, (r,))
    assert "O_s" not in {b.name for b in renamed.allocs}
    assert "O_s" not in str(renamed) and str(renamed).count("Q_s") > str(kernel).count("Q_s")


@pytest.mark.parametrize("variant", ["q-read-after", "partial", "other-dtype"])
def test_each_condition_refuses_its_pair(variant):
    assert shared_reuse.candidates(decode_kernel(variant=variant).kernel) == ()


def test_over_the_limit_kernel_runs_in_reused_space_and_matches_float64():
    n = 128
    k = egtile.compile(decode_kernel(n), target="sim")
    sched = k.schedule_result.scheduled
    assert "O_s" not in {b.name for b in sched.buffers}
    assert "shared-reuse: O_s in Q_s" in k.explain()
    torch.manual_seed(5)
    Q = (torch.randn(H, D) / 8).to(torch.float16)
    KV = (torch.randn(n, D) / 8).to(torch.float16)
    out = poisoned((H, D), torch.float16, "cpu")
    k(Q, KV, out)
    torch.testing.assert_close(out.double(), _reference(Q, KV, n), rtol=2e-3, atol=2e-3)


def test_without_a_dead_buffer_the_limit_is_still_named():
    # Q_s is read after O_s's first write; KV_s, dead by then, is versioned by the pipeline: the error says both
    with pytest.raises(ResourceError, match="shared-reuse: O_s cannot take KV_s's space: KV_s written-outside-pipelines"):
        egtile.compile(decode_kernel(variant="q-read-after"), target="sim")


def test_the_limit_names_the_condition_that_kept_a_pair_apart():
    with pytest.raises(ResourceError, match="shared-reuse: O_s cannot take Q_s's space: first-write-whole"):
        egtile.compile(decode_kernel(variant="partial"), target="sim")


def test_a_buffer_updated_by_a_parallel_loop_after_its_first_copy_takes_a_dead_space():
    # found by a fresh user: "written outside loops" refused any loop, where only a T.Pipelined loop versions a buffer
    R, C = 64, 512

    @T.prim_func
    def main(X: T.Tensor((R, C), "float16"), Y: T.Tensor((R, C), "float16"), O1: T.Tensor((R, C), "float16"),
             O2: T.Tensor((R, C), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((R, C), "float16")
            B_s = T.alloc_shared((R, C), "float16")
            C_s = T.alloc_shared((R, C), "float16")
            D_s = T.alloc_shared((R, C), "float16")
            T.copy(X, A_s)
            T.copy(Y, B_s)
            T.copy(X, C_s)
            T.copy(A_s, O1)
            T.copy(Y, D_s)
            for i, j in T.Parallel(R, C):
                D_s[i, j] = D_s[i, j] + B_s[i, j] * C_s[i, j]
            T.copy(D_s, O2)

    k = egtile.compile(main, target="sim")
    assert "shared-reuse: D_s in A_s" in k.explain()
    g = torch.Generator().manual_seed(7)
    X, Y = ((torch.randn(R, C, generator=g) / 2).to(torch.float16) for _ in range(2))
    o1, o2 = poisoned((R, C), torch.float16, "cpu"), poisoned((R, C), torch.float16, "cpu")
    k(X, Y, o1, o2)
    assert torch.equal(o1, X)
    torch.testing.assert_close(o2.double(), (Y.double() + Y.double() * X.double()), rtol=2e-3, atol=2e-3)


@pytest.mark.gpu
def test_reused_space_on_the_gpu_matches_float64():
    n = 512
    k = egtile.compile(decode_kernel(n), target="cuda")
    torch.manual_seed(6)
    Q = (torch.randn(H, D) / 8).to(torch.float16).cuda()
    KV = (torch.randn(n, D) / 8).to(torch.float16).cuda()
    out = poisoned((H, D), torch.float16, "cuda")
    k(Q, KV, out)
    torch.testing.assert_close(out.cpu().double(), _reference(Q.cpu(), KV.cpu(), n), rtol=2e-3, atol=2e-3)


def test_a_renaming_that_breaks_lives_apart_is_caught_by_the_value_check():
    """The checkers check the renamed program, not the renaming (docs/soundness.md): what stands behind a renaming is
    the analysis's conditions and this file's value checks. Planted here: O_s into Q_s although Q_s is read after O_s's
    first write (the condition lives-apart refuses it); the renamed kernel is a legal program, so the simulator reports
    nothing, and its output differs from the float64 reference exactly where the late read of Q_s lands."""
    n = 128
    kernel = decode_kernel(n, variant="q-read-after").kernel
    assert shared_reuse.candidates(kernel) == ()
    planted = shared_reuse.apply(kernel, (shared_reuse.Reuse("O_s", "Q_s", 0, 0, H * D * 2),))
    torch.manual_seed(8)
    Q = (torch.randn(H, D) / 8).to(torch.float16)
    KV = (torch.randn(n, D) / 8).to(torch.float16)
    res = egtile.simulate(egtile.optimize(planted).scheduled, Q, KV, poisoned((H, D), torch.float16, "cpu"))
    assert not res.races and res.deadlock is None
    out = res.outputs[2].double()
    ref = _reference(Q, KV, n)
    ref[:, :8] = Q[:, :8].double()  # the program's meaning: the late copy reads Q
    torch.testing.assert_close(out[:, 8:], ref[:, 8:], rtol=2e-3, atol=2e-3)
    assert not torch.allclose(out[:, :8], ref[:, :8], rtol=2e-3, atol=2e-3)
