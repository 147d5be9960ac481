"""``T.copy`` past a tensor's edge (issue 14): TileLang's zero-padded reads and dropped writes.

A copy region of a global tensor may run past the tensor on either side of any dimension; its elements
outside read as zero and are never written (``Region.clip``, ``egtile.language.copy_op``). Checked here on
egtile's own small kernels, against torch on fresh random inputs with outputs poisoned: a GEMM whose sizes are
no multiple of its tiles (TMA loads and the staged TMA store past the edge), SIMT copies with a start before
the tensor and an end past it into shared memory and a fragment, a register accumulator stored past the edge
by its layout (wgmma), the generated CUDA's predicates, the copy instruction choice (TMA stays, cp.async
refuses), both verifiers on a clipped store whose unclipped box would alias the next row (no false race) and
the refusals that remain (a shared region out of its buffer, a negative constant start). GPU: the same
kernels on the H200 (``-m gpu``).
"""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ShapeError
from egtile.ir import Copy, TileOp, TmaLoad, TmaStore, swalk, walk
from egtile.verifier import reference


def edge_gemm(M, N, K, bM=16, bN=16, bK=16, threads=128, simt_out=False):
    """``C = A @ B`` with ``ceildiv`` grids: the last tiles of every dimension run past the tensors' edges. The
    result leaves by the staged TMA store, or with ``simt_out`` by the accumulator's own (predicated) stores."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "float16")
            B_s = T.alloc_shared((bK, bN), "float16")
            C_l = T.alloc_fragment((bM, bN), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                T.copy(A[by * bM, k * bK], A_s)
                T.copy(B[k * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bM, bx * bN], disable_tma=simt_out)

    return main


def shift_kernel(n, shift, B=32, frag=False, simt_out=True):
    """``Y[i] = 2 * X[i - shift]`` (zero where ``i - shift`` is outside ``X``): each block copies the window
    ``X[bx * B - shift : + B]`` (before the start for block 0, past the end for the last) with SIMT loads,
    doubles it, and copies it out to ``Y[bx * B : + B]`` (past the end for the last block), with SIMT stores
    unless ``simt_out`` is false (then the staged TMA store)."""

    @T.prim_func
    def main(X: T.Tensor((2, n), "float32"), Y: T.Tensor((2, n), "float32")):
        with T.Kernel(T.ceildiv(n, B), threads=64) as bx:
            S = T.alloc_fragment((2, B), "float32") if frag else T.alloc_shared((2, B), "float32")
            T.copy(X[0:2, bx * B - shift: bx * B - shift + B], S, disable_tma=True)
            for i, j in T.Parallel(2, B):
                S[i, j] = S[i, j] * 2.0
            T.copy(S, Y[0:2, bx * B: bx * B + B], disable_tma=simt_out)

    return main


def shift_ref(X, shift):
    n = X.shape[1]
    Y = torch.zeros_like(X, dtype=torch.float64)
    for i in range(n):
        if 0 <= i - shift < n:
            Y[:, i] = 2 * X[:, i - shift].double()
    return Y


def _poisoned(*shape):
    return torch.full(shape, float("nan"), dtype=torch.float32)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_gemm_past_every_edge_matches_torch(target):
    M, N, K = 12, 24, 24  # no multiple of the 16 x 16 x 16 tiles
    kern = egtile.compile(edge_gemm(M, N, K), target=target)
    A, B = torch.randn(M, K).half(), torch.randn(K, N).half()
    C = _poisoned(M, N)
    kern(A, B, C)
    ref = A.double() @ B.double()
    # float32 accumulation of 40 products of float16 values below 6 in magnitude: far below 1e-3
    assert torch.all((C.double() - ref).abs() <= 1e-3 * (1 + ref.abs()))


def test_gemm_past_the_edge_keeps_tma_loads_and_the_tma_store():
    sched = egtile.optimize(edge_gemm(20, 24, 24)).scheduled
    loads = [x for x in swalk(sched.body) if isinstance(x, TmaLoad)]
    stores = [x for x in swalk(sched.body) if isinstance(x, TmaStore)]
    assert {x.src.buffer.name for x in loads} == {"A", "B"} and all(x.src.clip for x in loads)
    outs = [x.dst for x in stores] + [x.op.dst for x in swalk(sched.body)
                                      if isinstance(x, TileOp) and isinstance(x.op, Copy) and x.op.dst.buffer.name == "C"]
    assert outs and all(r.clip for r in outs)
    assert egtile.verify(sched) == [] and reference.verify(sched) == []


@pytest.mark.parametrize("frag, shift, simt_out", [(False, 5, True), (True, -7, True), (True, 5, False)])
def test_simt_copy_before_the_start_and_past_the_end(frag, shift, simt_out):
    n = 72  # three blocks of 32: the last window ends past the tensor
    X = torch.randn(2, n)
    ref = shift_ref(X, shift)
    f = shift_kernel(n, shift, frag=frag, simt_out=simt_out)
    stores = [x for x in swalk(egtile.optimize(f).scheduled.body) if isinstance(x, TmaStore)]
    assert bool(stores) != simt_out
    for target in ("interp", "sim"):
        Y = _poisoned(2, n)
        egtile.compile(f, target=target)(X, Y)
        assert torch.equal(Y.double(), ref), target


def test_generated_simt_copy_predicates_both_sides():
    src = egtile.codegen.generate(egtile.optimize(shift_kernel(72, 5)).scheduled).source
    # the load of X is zero outside [0, 72) and the store of Y skipped outside it
    assert "< 72) ? (" in src and ": eg_cast<float>(0.0f))" in src
    assert "if (" in src and "< 72) Y[" in src


def test_register_accumulator_stored_past_the_edge_by_its_layout():
    """A wgmma accumulator (registers, one layout) copied out past the tensor's edge: each slot's store is
    predicated; interp and sim agree with torch."""
    M, N, K = 40, 72, 64
    f = edge_gemm(M, N, K, bM=64, bN=64, bK=32, threads=128, simt_out=True)
    sched = egtile.optimize(f).scheduled
    assert sched.fragments, "the accumulator should be placed in registers"
    src = egtile.codegen.generate(sched).source
    assert "< 72) C[" in src  # each slot's store into C is predicated
    A, B = torch.randn(M, K).half(), torch.randn(K, N).half()
    ref = A.double() @ B.double()
    C = _poisoned(M, N)
    egtile.compile(f, target="sim")(A, B, C)
    assert torch.all((C.double() - ref).abs() <= 1e-3 * (1 + ref.abs()))


def test_clipped_store_whose_box_would_alias_the_next_row_is_no_race():
    """``S`` (4 x 32) stored at ``Y[r, 0]`` of a 24-column ``Y``: columns 24..31 of each row are outside. Read
    unclipped, row ``i``'s element ``(i, 24 + j)`` would be flat element ``(i + 1, j)``, which another thread
    writes: a false write-write race. Clipped, both verifiers find none and the simulator agrees."""

    @T.prim_func
    def main(X: T.Tensor((8, 32), "float32"), Y: T.Tensor((8, 24), "float32")):
        with T.Kernel(2, threads=64) as bx:
            S = T.alloc_shared((4, 32), "float32")
            T.copy(X[bx * 4, 0], S)
            T.copy(S, Y[bx * 4, 0])

    sched = egtile.optimize(main).scheduled
    assert egtile.verify(sched) == [] and reference.verify(sched) == []
    X = torch.randn(8, 32)
    Y = _poisoned(8, 24)
    egtile.compile(main, target="sim")(X, Y)
    assert torch.equal(Y, X[:, :24])


def test_cp_async_refuses_a_copy_past_the_edge_and_names_why():
    from egtile.analysis import cp_async_eligibility

    f = edge_gemm(20, 24, 24)
    copies = [s for s in walk(f.kernel.body) if isinstance(s, Copy) and s.src.buffer.name == "A"]
    v = cp_async_eligibility(copies[0])
    assert not v.ok and "past the edge of A" in str(v.reasons)


def test_a_copy_inside_the_tensor_is_not_clipped():
    f = edge_gemm(32, 32, 32)
    assert not any(s.src.clip or s.dst.clip for s in walk(f.kernel.body) if isinstance(s, Copy))
    sched = egtile.optimize(f).scheduled
    assert not any(x.src.clip for x in swalk(sched.body) if isinstance(x, TmaLoad))
    assert not any(x.op.src.clip or x.op.dst.clip for x in swalk(sched.body)
                   if isinstance(x, TileOp) and isinstance(x.op, Copy))


def test_a_shared_region_out_of_its_buffer_is_still_refused():
    with pytest.raises(ShapeError, match=r"S dimension 0 .*expected 0..15"):
        @T.prim_func
        def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(2, threads=32) as bx:
                S = T.alloc_shared((16,), "float32")
                T.copy(X[bx * 32: bx * 32 + 8], S[bx * 12: bx * 12 + 8])
                T.copy(S, Y[bx * 16: bx * 16 + 16])


def test_a_negative_constant_start_is_still_refused():
    with pytest.raises(ShapeError, match=r"constant -4"):
        @T.prim_func
        def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                S = T.alloc_shared((16,), "float32")
                T.copy(X[-4:12], S)
                T.copy(S, Y[bx * 16: bx * 16 + 16])


@pytest.mark.gpu
def test_gpu_copies_past_the_edge_match_torch():
    """On the H200: TMA loads / store and the wgmma accumulator past the edge, and the SIMT shift windows."""
    # (12, 24, 40): A's 16-row box is taller than A (boxDim > globalDim, zero-filled by the tensor map)
    for M, N, K, kw in ((20, 24, 40, {}), (12, 24, 40, {}), (40, 72, 64, dict(bM=64, bN=64, bK=32)),
                        (40, 72, 64, dict(bM=64, bN=64, bK=32, simt_out=True))):
        A, B = torch.randn(M, K, device="cuda").half(), torch.randn(K, N, device="cuda").half()
        C = torch.full((M, N), float("nan"), device="cuda")
        egtile.compile(edge_gemm(M, N, K, **kw), target="cuda")(A, B, C)
        ref = A.double() @ B.double()
        assert torch.all((C.double() - ref).abs() <= 1e-3 * (1 + ref.abs())), (M, N, K)
    for frag in (False, True):
        for shift in (5, -7):
            for simt_out in (False, True):
                X = torch.randn(2, 72, device="cuda")
                Y = torch.full((2, 72), float("nan"), device="cuda")
                egtile.compile(shift_kernel(72, shift, frag=frag, simt_out=simt_out), target="cuda")(X, Y)
                assert torch.equal(Y.double().cpu(), shift_ref(X.cpu(), shift)), (frag, shift, simt_out)


def _two_stores(col: int, width: int):
    """``S`` (4 x 32, clipped to ``Y``'s 24 columns) and then ``R`` (4 x ``width``) stored at column ``col``."""

    @T.prim_func
    def main(X: T.Tensor((8, 32), "float32"), Y: T.Tensor((8, 24), "float32")):
        with T.Kernel(2, threads=64) as bx:
            S = T.alloc_shared((4, 32), "float32")
            R = T.alloc_shared((4, width), "float32")
            T.copy(X[bx * 4, 0], S)
            T.copy(X[bx * 4, 0], R)
            T.copy(S, Y[bx * 4, 0])
            T.copy(R, Y[bx * 4:bx * 4 + 4, col:col + width])

    return main


def _without_barriers(sched):
    import dataclasses

    from egtile.ir import SyncThreads

    return dataclasses.replace(sched, body=tuple(s for s in sched.body if not isinstance(s, SyncThreads)))


def test_a_race_on_the_clipped_store_s_inside_part_is_caught():
    """``R`` at column 4 overwrites columns 4..23, which the clipped store of ``S`` writes by other threads: with
    the barrier between them dropped, both verifiers report the write-write race on ``Y``."""
    sched = egtile.optimize(_two_stores(4, 20)).scheduled
    assert egtile.verify(sched) == []
    bad = _without_barriers(sched)
    for found in (egtile.verify(bad), reference.verify(bad)):
        assert any("Y" in str(v) for v in found), found


def test_a_store_wholly_past_the_edge_races_with_nothing():
    """``R`` at column 24 lies wholly past ``Y``'s edge: nothing is written, so without the barrier there is still
    no race (unclipped, its box would be row ``i + 1``'s first 8 columns, which ``S``'s store writes)."""
    bad = _without_barriers(egtile.optimize(_two_stores(24, 8)).scheduled)
    assert egtile.verify(bad) == [] and reference.verify(bad) == []


def test_a_start_read_from_data_is_clipped_while_running():
    """``T.copy(X[I[0]:I[0] + 4, :], S)``: the start is data, so the copy is clipped; rows past the end read zero."""

    @T.prim_func
    def main(I: T.Tensor((1,), "int32"), X: T.Tensor((8, 16), "float32"), Y: T.Tensor((4, 16), "float32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((4, 16), "float32")
            T.copy(X[I[0]:I[0] + 4, 0:16], S)
            T.copy(S, Y)

    X = torch.randn(8, 16)
    for target in ("interp", "sim"):
        kern = egtile.compile(main, target=target)
        for start in (6, 8, 2):
            Y = _poisoned(4, 16)
            kern(torch.tensor([start], dtype=torch.int32), X, Y)
            ref = torch.zeros(4, 16)
            ref[: max(0, min(4, 8 - start))] = X[start:start + 4]
            assert torch.equal(Y, ref), (target, start)
