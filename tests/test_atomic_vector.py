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


def edge_kernel():
    """Lanes at columns read from data, some past the tensors' edge: TileLang masks an atomic there (it adds
    nothing) and reads zero for a value past the edge, as for an element store and load."""

    @T.prim_func
    def main(col: T.Tensor((M,), "int32"), A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(M):
                T.atomic_addx4(B[i, col[i]], A[i, 0])
                T.atomic_addx4(C[i, 0:4], A[i, col[i]:col[i] + 4])
                T.atomic_add(C[i, col[i] + 8], A[i, 1])

    return main


def _edge_reference(col, A, B0, C0):
    B, C = B0.double().clone(), C0.double().clone()
    for i, c in enumerate(col.tolist()):
        for k in range(4):
            if 0 <= c + k < N:
                B[i, c + k] += A[i, k].double()
                C[i, k] += A[i, c + k].double()
        if 0 <= c + 8 < N:
            C[i, c + 8] += A[i, 1].double()
    return B, C


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_lanes_past_the_edge_add_nothing_and_read_zero(target):
    k = egtile.compile(edge_kernel(), target=target)
    g = torch.Generator().manual_seed(13)
    col = torch.tensor([0, 4, 60, 62, 63, 56, 61, 30], dtype=torch.int32)
    A, B0, C0 = (torch.randn(M, N, generator=g) for _ in range(3))
    B, C = B0.clone(), C0.clone()
    k(col, A, B, C)
    rb, rc = _edge_reference(col, A, B0, C0)
    torch.testing.assert_close(B.double(), rb, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(C.double(), rc, rtol=1e-6, atol=1e-6)


def test_a_constant_lane_past_the_edge_is_refused_at_the_users_line():
    with pytest.raises(ShapeError, match=r"T.atomic_addx4 \(value A\)"):
        @T.prim_func
        def bad(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(M):
                    T.atomic_addx4(B[i, 0], A[i, N - 2])


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
    k = egtile.compile(edge_kernel(), target="cuda")
    g = torch.Generator().manual_seed(14)
    col = torch.tensor([0, 4, 60, 62, 63, 56, 61, 30], dtype=torch.int32)
    A, B0, C0 = (torch.randn(M, N, generator=g) for _ in range(3))
    B, C = B0.cuda(), C0.cuda()
    k(col.cuda(), A.cuda(), B, C)
    rb, rc = _edge_reference(col, A, B0, C0)
    torch.testing.assert_close(B.cpu().double(), rb, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(C.cpu().double(), rc, rtol=1e-6, atol=1e-6)
