"""``T.atomic_addx2`` / ``T.atomic_addx4`` (egtile.language.extern): TileLang's vector atomics, each lane one atomic
read-modify-write, at an element or a region of consecutive elements, into rows chosen by data so that several
iterations add into the same elements. Fresh random inputs, every element against float64, on every CPU target
and on the GPU; the refusals name the construct."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ShapeError, UnsupportedError

M, N, ROWS = 8, 64, 4


def scatter_kernel():
    @T.prim_func
    def main(idx: T.Tensor((M,), "int32"), A: T.Tensor((M, N), "float32"), B: T.Tensor((ROWS, N), "float32"),
             H: T.Tensor((M, N), "float16"), G: T.Tensor((ROWS, N), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, N), "float32")
            T.copy(A, A_s)
            for i, j in T.Parallel(M, N // 4):
                T.atomic_addx4(B[idx[i], j * 4], A_s[i, j * 4])
            for i, j in T.Parallel(M, N // 2):
                T.atomic_addx2(G[idx[i], j * 2:j * 2 + 2], H[i, j * 2:j * 2 + 2])

    return main


def _run(target: str, device: str, seed: int) -> None:
    k = egtile.compile(scatter_kernel(), target=target)
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, ROWS, (M,), generator=g, dtype=torch.int32)
    A, H = torch.randn(M, N, generator=g), torch.randn(M, N, generator=g).half()
    B0, G0 = torch.randn(ROWS, N, generator=g), torch.randn(ROWS, N, generator=g).half()
    B, G = B0.clone().to(device), G0.clone().to(device)
    k(idx.to(device), A.to(device), B, H.to(device), G)
    rows = idx.long()
    torch.testing.assert_close(B.cpu().double(), B0.double().index_add(0, rows, A.double()), rtol=1e-5, atol=1e-5)
    # float16 atomics round after each add: up to M adds into one element, an ulp of the running sum each
    torch.testing.assert_close(G.cpu().double(), G0.double().index_add(0, rows, H.double()), rtol=0, atol=M * 2 ** -7)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_vector_atomics_add_every_lane(target):
    _run(target, "cpu", seed=11)


def test_the_lanes_compile_to_atomics():
    from egtile.codegen import build, sass

    built = build(egtile.optimize(scatter_kernel()).scheduled)
    if sass.available():
        # the float32 lanes are reductions into global memory (no value returned); the float16 ones atomics too
        text = sass.disassemble(built.cubin)
        assert "REDG.E.ADD.F32" in text and "ATOM.E." in text


def test_a_region_of_the_wrong_width_names_the_construct():
    with pytest.raises(ShapeError, match=r"T.atomic_addx4: the destination region of B has extents \(1, 2\)"):
        @T.prim_func
        def bad(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(M):
                    T.atomic_addx4(B[i, 0:2], A[i, 0:2])


def test_return_prev_is_refused_by_name():
    with pytest.raises(UnsupportedError, match=r"T.atomic_addx2\(return_prev=True\)"):
        @T.prim_func
        def bad(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(M):
                    T.atomic_addx2(B[i, 0], A[i, 0], return_prev=True)


@pytest.mark.gpu
def test_vector_atomics_on_the_gpu():
    _run("cuda", "cuda", seed=12)
