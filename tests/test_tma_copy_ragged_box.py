"""A ``T.tma_copy(..., barrier=)`` box that starts inside the tensor and runs past its edge (wsbreak f3: K = 56 with a
16-wide box, the last box half outside A and B) is a correct TMA load: the TMA unit zero-fills the outside part and
still completes the whole box's bytes on the mbarrier, the ``expect_tx`` egtile emits. It was refused with
"indices 0..63; expected 0..55". The interpreter and the simulator must deliver zeros there, and the generated
tensor map must have the tensor's own dimensions (so the hardware zero-fills). A box that starts outside the
tensor is still refused, at the user's line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ShapeError

HERE = Path(__file__)


def ragged_ws_gemm(M=32, N=32, K=56, bk=16, S=2):
    """wsbreak f3's kernel: a producer warpgroup TMA-loads A and B tiles into an S-stage ring, a consumer runs
    T.gemm; K is not a multiple of bk, so the last tiles run past A's and B's edge."""
    KT = (K + bk - 1) // bk

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 1, threads=256) as (bx, by):
            A_s = T.alloc_shared((S, M, bk), "float16")
            B_s = T.alloc_shared((S, bk, N), "float16")
            C_l = T.alloc_fragment((M, N), "float32")
            full = T.alloc_barrier([128] * S)
            empty = T.alloc_barrier([128] * S)
            with T.ws(0):
                T.clear(C_l)
            for ko in T.serial(KT):
                with T.ws(1):
                    T.mbarrier_wait_parity(empty[ko % S], ((ko // S) % 2) ^ 1)
                    T.tma_copy(A[0:M, ko * bk:(ko + 1) * bk], A_s[ko % S, :, :], barrier=full[ko % S])
                    T.tma_copy(B[ko * bk:(ko + 1) * bk, 0:N], B_s[ko % S, :, :], barrier=full[ko % S])
                    T.mbarrier_arrive(full[ko % S])
                with T.ws(0):
                    T.mbarrier_wait_parity(full[ko % S], (ko // S) % 2)
                    T.gemm(A_s[ko % S, :, :], B_s[ko % S, :, :], C_l)
                    T.mbarrier_arrive(empty[ko % S])
            with T.ws(0):
                T.copy(C_l, C[0, 0])

    return main


def ragged_tiles(R=8, K=56, bk=16):
    """Each box of X (R x K) lands in shared memory and is copied out whole into Y (R x KT*bk): Y shows what the
    load delivered past the edge."""
    KT = (K + bk - 1) // bk

    @T.prim_func
    def main(X: T.Tensor((R, K), "float32"), Y: T.Tensor((R, KT * bk), "float32")):
        with T.Kernel(1, threads=256):
            buf = T.alloc_shared((R, bk), "float32")
            full = T.alloc_barrier(128)
            empty = T.alloc_barrier(128)
            for k in T.serial(KT):
                with T.ws(1):
                    T.mbarrier_wait_parity(empty, (k % 2) ^ 1)
                    T.tma_copy(X[0:R, k * bk:(k + 1) * bk], buf, barrier=full)
                    T.mbarrier_arrive(full)
                with T.ws(0):
                    T.mbarrier_wait_parity(full, k % 2)
                    for i, j in T.Parallel(R, bk):
                        Y[i, k * bk + j] = buf[i, j]
                    T.mbarrier_arrive(empty)

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_ragged_k_gemm_matches_float64_torch(target):
    g = torch.Generator().manual_seed(7)
    a = torch.randn(32, 56, generator=g).half()
    b = torch.randn(56, 32, generator=g).half()
    c = torch.full((32, 32), float("nan"))
    egtile.compile(ragged_ws_gemm(), target=target)(a, b, c)
    ref = a.double() @ b.double()
    assert torch.isfinite(c).all()
    assert (c.double() - ref).abs().max() <= 1e-3 * (a.double().abs() @ b.double().abs()).max()


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_the_part_past_the_edge_is_delivered_as_zeros(target):
    g = torch.Generator().manual_seed(8)
    x = torch.randn(8, 56, generator=g) + 3.0  # no zeros of its own
    y = torch.full((8, 64), float("nan"))
    egtile.compile(ragged_tiles(), target=target)(x, y)
    assert torch.equal(y[:, :56], x)
    assert torch.equal(y[:, 56:], torch.zeros(8, 8))


def test_ragged_kernels_compile_with_nvrtc_and_the_tensor_map_is_the_tensors_shape():
    for kernel, shapes in ((ragged_ws_gemm(), {"A": (32, 56), "B": (56, 32)}), (ragged_tiles(), {"X": (8, 56)})):
        k = egtile.compile(kernel, target="cuda")
        assert k._built.cubin[:4] == b"\x7fELF"
        # the launcher encodes each map with its parameter's shape as the global dimensions (egtile.runtime.launch):
        # the box's part past them is what the TMA unit zero-fills
        params = {p.name: tuple(p.shape) for p in k._built.params}
        boxes = {t.buffer: tuple(t.box) for t in k._built.tma}
        for name, shape in shapes.items():
            assert params[name] == shape, (name, params[name])
            assert 16 in boxes[name] and all(b <= s for b, s in zip(boxes[name], shape)), (name, boxes[name])
        assert "expect_tx" in k._built.source


def _line(marker: str) -> int:
    for n, text in enumerate(HERE.read_text().splitlines(), 1):
        if marker in text and "_line(" not in text:
            return n
    raise AssertionError(marker)


def test_a_box_that_starts_outside_the_tensor_is_refused_at_the_users_line():
    with pytest.raises(ShapeError) as e:
        @T.prim_func
        def main(X: T.Tensor((8, 56), "float32"), Y: T.Tensor((8, 80), "float32")):
            with T.Kernel(1, threads=256):
                buf = T.alloc_shared((8, 16), "float32")
                full = T.alloc_barrier(128)
                for k in T.serial(5):  # k * 16 reaches 64, past the last column 55
                    with T.ws(1):
                        T.tma_copy(X[0:8, k * 16:(k + 1) * 16], buf, barrier=full)  # mark-outside
                        T.mbarrier_arrive(full)
                    with T.ws(0):
                        T.mbarrier_wait_parity(full, k % 2)
                        for i, j in T.Parallel(8, 16):
                            Y[i, k * 16 + j] = buf[i, j]
    msg = str(e.value)
    assert "starts outside X in dimension 1" in msg and "0..64" in msg and "expected 0..55" in msg, msg
    assert e.value.loc.line == _line("# mark-outside")


def test_a_shared_destination_past_its_end_is_still_refused():
    with pytest.raises(ShapeError) as e:
        @T.prim_func
        def main(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8, 16), "float32")):
            with T.Kernel(1, threads=256):
                buf = T.alloc_shared((8, 24), "float32")
                full = T.alloc_barrier(128)
                with T.ws(1):
                    T.tma_copy(X[0:8, 0:16], buf[0:8, 16:32], barrier=full)  # mark-smem
                    T.mbarrier_arrive(full)
                with T.ws(0):
                    T.mbarrier_wait_parity(full, 0)
                    for i, j in T.Parallel(8, 16):
                        Y[i, j] = buf[i, j]
    assert e.value.loc.line == _line("# mark-smem")
