"""Per-thread state (``T.alloc_var`` / ``T.alloc_local``) that tile ops set, and branches on a per-thread flag.

Two egtile bugs found by porting TileLang's examples (``deepseek_mla/amd/benchmark_mla_decode_amd_tilelang.py``'s
combine kernel; ``blocksparse_attention/example_tilelang_sparse_gqa_decode_*.py``), each reduced to its construct:

* ``T.clear`` / ``T.fill`` / ``T.copy`` into a local buffer was a cooperative tile op, its elements split across
  the threads, so only one thread's copy was set (the verifier's L1 refused the schedule). Every thread sets its
  own copy now (``egtile.language.per_thread``).
* an ``if`` on a block-uniform ``T.alloc_var`` flag whose side needs a CTA barrier was not sealed (the lowering
  counted only condition reads that need barriers; a local's do not), so the verifier refused it (L1-L3).
"""

from __future__ import annotations

import math

import pytest
import torch

from _check import poisoned

import egtile
from egtile import language as T
from egtile.errors import UnsupportedError


@egtile.jit(out_idx=[-1], target="sim")
def combine(H, S, D):
    """The flash-decoding combine: a log-sum-exp over splits in per-thread scalars (``T.clear`` of one)."""

    @T.prim_func
    def main(glse: T.Tensor((H, S), "float32"), Op: T.Tensor((H, S, D), "float32"),
             Out: T.Tensor((H, D), "float32")):
        with T.Kernel(H, threads=32) as by:
            acc = T.alloc_fragment([D], "float32")
            row = T.alloc_local([2], "float32")
            lse_sum = T.alloc_var("float32")
            lse_max = T.alloc_var("float32")
            sc = T.alloc_var("float32")
            T.clear(lse_sum)
            T.clear(acc)
            T.fill(lse_max, -T.infinity("float32"))
            for k in T.serial(S):
                lse_max = T.max(lse_max, glse[by, k])
            for k in T.Pipelined(S, num_stages=1):
                lse_sum += T.exp2(glse[by, k] - lse_max)
            lse_sum = T.log2(lse_sum) + lse_max
            for k in T.serial(S):
                T.copy(glse[by, k], row[0])  # a start point into a local
                sc = T.exp2(row[0] - lse_sum)
                for i in T.Parallel(D):
                    acc[i] += Op[by, k, i] * sc
            T.copy(glse[by, 0:2], row)  # a region into a local: every thread holds both
            for i in T.Parallel(D):
                Out[by, i] = acc[i] + row[0] - row[1]

    return main


def test_tile_ops_into_per_thread_buffers_set_every_threads_copy():
    H, S, D = 2, 3, 32
    k = combine(H, S, D)
    g, op = torch.randn(H, S), torch.randn(H, S, D)
    out = k(g, op)
    w = torch.softmax(g.double() * math.log(2.0), -1)
    ref = (w[..., None] * op.double()).sum(1) + (g[:, 0] - g[:, 1]).double()[:, None]
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


def test_a_tile_op_into_a_large_local_buffer_is_refused_by_name():
    with pytest.raises(UnsupportedError, match="per-thread buffer big of 2048 elements"):
        @T.prim_func
        def main(Out: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32):
                big = T.alloc_local([2048], "float32")
                T.clear(big)
                for i in T.Parallel(64):
                    Out[i] = big[i]


@egtile.jit(out_idx=[-1], target="sim")
def flagged(M, N, nblk):
    """A flag set under a uniform branch of a loop, then an ``if`` on it whose side needs CTA barriers."""

    @T.prim_func
    def main(X: T.Tensor((nblk, M, N), "float32"), idx: T.Tensor((nblk,), "int32"),
             Out: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((M, N), "float32")
            rs = T.alloc_fragment((M,), "float32")
            flag = T.alloc_var("bool")
            T.fill(acc, 1.0)
            flag = False
            for k in T.serial(nblk):
                if idx[k] >= 0:
                    flag = True
                    for i, j in T.Parallel(M, N):
                        acc[i, j] += X[idx[k], i, j]
            if flag:
                T.reduce_sum(acc, rs, dim=1)
                for i, j in T.Parallel(M, N):
                    acc[i, j] = acc[i, j] / rs[i]
            T.copy(acc, Out)

    return main


@pytest.mark.parametrize("picks", [[2, -1, 0], [-1, -1, -1]])
def test_a_branch_on_a_uniform_flag_that_needs_barriers_is_sealed(picks):
    M, N, nb = 16, 32, 3
    k = flagged(M, N, nb)
    idx = torch.tensor(picks, dtype=torch.int32)
    X = torch.rand(nb, M, N) + 0.5
    out = k(X, idx)
    ref = torch.ones(M, N, dtype=torch.float64)
    for v in picks:
        if v >= 0:
            ref += X[v].double()
    if any(v >= 0 for v in picks):
        ref = ref / ref.sum(1, keepdim=True)
    torch.testing.assert_close(out.double(), ref, rtol=1e-6, atol=1e-6)


def _compaction(writers: int):
    @egtile.jit(out_idx=[1], target="sim")
    def compact(N):
        """A stream compaction in per-thread code: the positive elements of X, in order, at the front of Y.
        ``writers`` threads each run the whole loop with their own counter."""

        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                tx = T.get_thread_binding()
                c = T.alloc_var("int32", 0)
                if tx < writers:
                    for i in T.serial(N):
                        if X[i] > 0:
                            Y[c] = X[i]
                            c += 1

        return main

    return compact


def test_one_thread_writing_at_a_data_dependent_index_is_ordered_by_its_program():
    # The verifier's L2 used to refuse this (the two writes of Y[c] at i and i+1 touch unknown elements, and
    # only footprints with known owners were ordered by program order); one thread ran both, so they are ordered.
    N = 96
    k = _compaction(1)(N)
    X = torch.randn(N)
    Y = k(X)  # Y is poisoned (NaN) before the call: the elements past the compacted prefix stay NaN
    ref = X[X > 0]
    assert torch.equal(Y[: len(ref)], ref)
    assert torch.isnan(Y[len(ref):]).all()


def test_two_threads_writing_at_data_dependent_indices_still_race():
    # negative control: two threads each compacting into the same Y write the same elements, unordered. The
    # verifier cannot prove it either way (indices read from a per-thread variable), so on target "sim" the
    # simulator finds the race on the data (egtile.api._check_schedule; on "cuda" it is refused unproven)
    k = _compaction(2)(64)
    X = torch.randn(64)
    X[0] = abs(X[0]) + 0.5  # at least one positive element: both threads write Y[0]
    with pytest.raises(egtile.errors.SimulationError, match=r"race on Y\["):
        k(X)


def _across_sync(target: str, read_v_after: bool):
    @egtile.jit(out_idx=[1], target=target)
    def k(N):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=N) as bx:
                S = T.alloc_shared((N,), "float32")
                scale = T.alloc_var("float32", 3.0)  # set before the thread region: every thread's copy holds it
                tx = T.get_thread_binding()
                v = T.alloc_var("float32", 0.0)
                v = X[tx] * 2.0
                S[tx] = v
                T.sync_threads()
                w = T.alloc_var("float32", 0.0)
                if read_v_after:
                    Y[tx] = v * scale
                else:
                    w = S[(tx + 1) % N]
                    Y[tx] = w * scale

        return main

    return k


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_per_thread_variable_read_across_a_sync_keeps_each_threads_value(target):
    # Each region between barriers is one T.Parallel over the threads, so a variable of one region would end with
    # it: the read used to give another thread's value (all zeros, or thread 31's), then was refused; it is now
    # each thread's own copy, a row of a block array (egtile.language.carried), as a CUDA local variable is.
    N = 32
    x = torch.randn(N)
    kern = _across_sync(target, True)(N)
    y = kern(x)
    torch.testing.assert_close(y.double(), 6.0 * x.double(), rtol=1e-6, atol=1e-6)
    assert "per-thread variable 'v'" in kern.explain()


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_block_level_variables_and_each_region_s_own_cross_no_sync(target):
    N = 32
    x = torch.randn(N)
    y = _across_sync(target, False)(N)(x)
    torch.testing.assert_close(y.double(), 6.0 * x.double().roll(-1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_tile_op_in_per_thread_code_is_block_level_work_between_two_regions(target):
    # TileLang's pattern: each thread fills its element of a shared tile, a barrier, then one cooperative T.copy /
    # reduction of the tile, then per-thread code again. It used to be refused on sim ("Copy inside a T.Parallel body").
    N = 128

    @egtile.jit(out_idx=[1, 2], target=target)
    def k():
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=N) as bx:
                S = T.alloc_shared((N,), "float32")
                total = T.alloc_shared((1,), "float32")
                tx = T.get_thread_binding()
                S[tx] = X[tx] * X[tx]
                T.sync_threads()
                T.copy(S, Y)
                T.reduce_sum(S, total, dim=0)
                Z[tx] = S[tx] / total[0]

        return main

    x = torch.randn(N)
    y, z = k()(x)
    sq = x.double() ** 2
    torch.testing.assert_close(y.double(), sq, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(z.double(), sq / sq.sum(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("where, match", [
    ("branch", "a tile op inside the `if` of per-thread code, whose condition may differ"),
    ("indexed", "a tile op whose tile is indexed by the thread index `tx`"),
])
def test_a_tile_op_nested_in_or_indexed_by_per_thread_code_is_refused_at_its_line(where, match):
    with pytest.raises(UnsupportedError, match=match) as err:
        @T.prim_func
        def main(X: T.Tensor((4, 32), "float32"), Y: T.Tensor((4, 32), "float32")):
            with T.Kernel(1, threads=32) as bx:
                S = T.alloc_shared((4, 32), "float32")
                tx = T.get_thread_binding()
                if where == "branch":  # a branch on tx that also uses tx stays per-thread (thread_branch.py)
                    if tx < 16:
                        Y[0, tx] = 1.0
                        T.copy(X, S)
                else:
                    T.copy(X[tx % 4, 0:32], S[tx % 4, 0:32])
                T.copy(S, Y)
    assert "T.copy(X" in err.value.loc.text


def _row_per_thread_gemv(N, K):
    """TileLang's per-thread gemv shape: each thread clears its own accumulator (``T.clear`` inside the thread
    region, i.e. inside its ``T.Parallel`` body) and sums one row."""

    @T.prim_func
    def main(A: T.Tensor((K,), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as _bx:
            tn = T.get_thread_binding(0)
            acc = T.alloc_local((1,), "float32")
            T.clear(acc)
            for k in T.serial(K):
                acc[0] += A[k].astype("float32") * B[tn, k].astype("float32")
            C[tn] = acc[0]

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_clear_inside_per_thread_code_sets_each_threads_accumulator(target):
    N, K = 32, 24
    a = torch.randn(K, dtype=torch.float16)
    b = torch.randn(N, K, dtype=torch.float16)
    c = torch.full((N,), float("nan"))
    egtile.compile(_row_per_thread_gemv(N, K), target=target)(a, b, c)
    torch.testing.assert_close(c.double(), b.double() @ a.double(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_per_thread_variable_crossing_a_barrier_inside_a_serial_loop_keeps_its_value(target):
    # the barrier splits the loop's body into two regions; v written in the first is read in the second
    @T.prim_func
    def main(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            tx = T.get_thread_binding()
            v = T.alloc_var("float32", 0.0)
            for i in T.serial(3):
                v = v * 0.5 + X[(tx + i) % 32]
                T.sync_threads()
                Y[tx] = v

    x = torch.randn(32)
    y = torch.full((32,), float("nan"))
    egtile.compile(main, target=target)(x, y)
    xd = x.double()
    ref = torch.zeros(32, dtype=torch.float64)
    for i in range(3):
        ref = ref * 0.5 + xd.roll(-i)
    torch.testing.assert_close(y.double(), ref, rtol=1e-6, atol=1e-6)


def _per_thread_reduce(kind: str, clear: bool, dim: int):
    @T.prim_func
    def main(X: T.Tensor((32, 3, 5), "float16"), Y0: T.Tensor((32, 5), "float32"), Y: T.Tensor((32, 5), "float32")):
        with T.Kernel(1, threads=32) as bx:
            tx = T.get_thread_binding()
            part = T.alloc_local((3, 5), "float16")
            out = T.alloc_local((5,) if dim == 0 else (3,), "float32")
            for i, j in T.Parallel(3, 5):
                part[i, j] = X[tx, i, j]
            for j in T.serial(5 if dim == 0 else 3):
                out[j] = Y0[tx, j]
            getattr(T, f"reduce_{kind}")(part, out, dim=dim, clear=clear)
            for j in T.serial(5 if dim == 0 else 3):
                Y[tx, j] = out[j]

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("kind", ["sum", "max", "min", "abssum", "absmax"])
@pytest.mark.parametrize("clear", [True, False])
def test_a_reduction_of_per_thread_buffers_runs_on_each_threads_own_copies(target, kind, clear):
    # It used to be one cooperative reduction at the block's level, which read a single thread's copies and
    # gave every thread that thread's result, silently.
    dim = 1 if kind in ("sum", "absmax") else 0
    x = torch.randn(32, 3, 5).half()
    y0 = torch.randn(32, 5)
    y = poisoned((32, 5), torch.float32, "cpu")
    egtile.compile(_per_thread_reduce(kind, clear, dim), target=target)(x, y0, y)
    xd = x.double()
    src = xd.abs() if kind.startswith("abs") else xd
    red = {"sum": src.sum(dim + 1), "abssum": src.sum(dim + 1), "max": src.amax(dim + 1), "absmax": src.amax(dim + 1),
           "min": src.amin(dim + 1)}[kind]
    n = red.shape[1]
    if not clear:
        old = y0.double()[:, :n]
        red = old + red if kind in ("sum", "abssum") else torch.minimum(old, red) if kind == "min" else \
            torch.maximum(old, red)
    torch.testing.assert_close(y.double()[:, :n], red, rtol=1e-5, atol=1e-5)
    assert torch.isnan(y[:, n:]).all()


def test_a_reduction_between_a_per_thread_and_a_shared_buffer_is_refused_at_its_line():
    with pytest.raises(UnsupportedError, match="between the per-thread buffer part and the shared buffer S") as err:
        @T.prim_func
        def main(X: T.Tensor((32, 4), "float32"), Y: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                S = T.alloc_shared((1,), "float32")
                tx = T.get_thread_binding()
                part = T.alloc_local((4,), "float32")
                for j in T.serial(4):
                    part[j] = X[tx, j]
                T.reduce_sum(part, S, dim=0)
                Y[tx] = S[0]
    assert "T.reduce_sum(part, S" in err.value.loc.text


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_parallel_loop_in_per_thread_code_is_block_level_work(target):
    # TileLang splits a T.Parallel over the block's threads wherever it stands; egtile made every thread run it whole
    # and refused the result as a race naming a loop the user never wrote (a fresh user's report)
    N = 64

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            S[tx] = X[tx] + 1.0
            T.sync_threads()
            for i in T.Parallel(N):
                S[i] = S[i] * 2.0
            T.sync_threads()
            Y[tx] = S[(tx + 1) % N]

    x = torch.randn(N)
    y = poisoned((N,), torch.float32, "cpu")
    egtile.compile(main, target=target)(x, y)
    torch.testing.assert_close(y.double(), (2.0 * (x.double() + 1.0)).roll(-1), rtol=1e-6, atol=1e-6)
