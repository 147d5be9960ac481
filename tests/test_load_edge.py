"""An element load past a global tensor's edge reads zero (TileLang's LegalizeSafeMemoryAccess meaning for loads:
``egtile.language.safeload``), the same in the interpreter, the simulator and the generated CUDA.

Egtile's own kernels with the constructs of TileLang's block-sparse MQA (an element load at a start read from
tensor data, through a let-binding) and of a shifted window (an index whose loop range reaches past either end),
on fresh random inputs with outputs poisoned, against torch; loads the trace proves inside stay plain; an element
taken as a place (``T.atomic_add``'s target) is the plain element; a guarded load is never vectorized (a vector
load would read every lane). GPU: the same kernels on the H200 (``-m gpu``).
"""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.ir import Load, Select, Store, ThreadLoop, swalk, walk
from egtile.language.safeload import interval


def block_gather(n, nblocks, B=32):
    """``Y[b, i] = 2 * X[Blk[b] * B + i]``: each block reads the ``B`` elements of the tile its data names; a tile
    reaching past ``X``'s end (or starting before it) reads zero there."""

    @T.prim_func
    def main(Blk: T.Tensor((nblocks,), "int32"), X: T.Tensor((n,), "float32"), Y: T.Tensor((nblocks, B), "float32")):
        with T.Kernel(nblocks, threads=32) as bx:
            S = T.alloc_shared((B,), "float32")
            start = Blk[bx] * B
            for i in T.Parallel(B):
                S[i] = X[start + i]
            for i in T.Parallel(B):
                Y[bx, i] = S[i] * 2.0

    return main


def shifted(n, shift, B=32):
    """``Y[i] = X[i - shift] + X[i]``: the first load's range reaches before ``X`` (shift > 0) or past it."""

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, B), threads=32) as bx:
            for i in T.Parallel(B):
                if bx * B + i < n:
                    Y[bx * B + i] = X[bx * B + i - shift] + X[T.min(bx * B + i, n - 1)]

    return main


def _gather_ref(blk, X, B=32):
    n = X.shape[0]
    Y = torch.zeros(len(blk), B, dtype=torch.float64)
    for b, s in enumerate(blk.tolist()):
        for i in range(B):
            if 0 <= s * B + i < n:
                Y[b, i] = 2 * X[s * B + i].double()
    return Y


def _shift_ref(X, shift):
    n = X.shape[0]
    Y = X.double().clone()
    for i in range(n):
        if 0 <= i - shift < n:
            Y[i] += X[i - shift].double()
    return Y


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_gather_at_a_data_start_reads_zero_past_either_end(target):
    n, nb = 80, 5  # 80 = 2.5 tiles of 32: tile 2 runs past the end, tile 3 is wholly past it, tile -1 before it
    blk = torch.tensor([0, 2, 3, -1, 1], dtype=torch.int32)
    X = torch.randn(n)
    Y = torch.full((nb, 32), float("nan"))
    egtile.compile(block_gather(n, nb), target=target)(blk, X, Y)
    torch.testing.assert_close(Y.double(), _gather_ref(blk, X), rtol=0, atol=0)


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("shift", [5, -7])
def test_a_window_past_either_end_reads_zero(target, shift):
    n = 72
    X = torch.randn(n)
    Y = torch.full((n,), float("nan"))
    egtile.compile(shifted(n, shift), target=target)(X, Y)
    torch.testing.assert_close(Y.double(), _shift_ref(X, shift), rtol=1e-6, atol=1e-6)


def _loads(kernel):
    out = []
    for st in walk(kernel.body):
        if isinstance(st, Store):
            stack = [st.value]
            while stack:
                e = stack.pop()
                out.append(e)
                stack += [getattr(e, f) for f in ("a", "b", "cond", "value") if hasattr(e, f)]
                stack += list(getattr(e, "indices", ()))
    return out


def test_only_loads_not_proved_inside_are_guarded():
    """``X[bx * B + i - shift]`` (reaches past) and ``X[Blk[bx] * B + i]`` (data) are selects; ``X[min(.., n - 1)]``
    (proved inside by its interval) and ``Blk[bx]`` (a block index in range) stay plain loads."""
    exprs = _loads(shifted(72, 5).kernel)
    guarded = [e for e in exprs if isinstance(e, Select)]
    assert len(guarded) == 1 and isinstance(guarded[0].a, Load) and guarded[0].b.value == 0.0
    plain = [e for e in exprs if isinstance(e, Load) and e not in (guarded[0].a,)]
    assert plain and all(e.buffer.name == "X" for e in plain)
    exprs = _loads(block_gather(80, 5).kernel)
    assert sum(isinstance(e, Select) for e in exprs) == 1
    assert any(isinstance(e, Load) and e.buffer.name == "Blk" for e in exprs)


def test_interval_follows_min_floordiv_and_modulo_of_ranged_indices():
    r = {"i": (0, 32), "b": (0, 3)}
    from egtile.ir.kernel import BinOp, Const, Var

    i, b = Var("i"), Var("b")
    assert interval(BinOp("+", BinOp("*", b, Const(32)), i), r) == (0, 95)
    assert interval(BinOp("//", i, Const(4)), r) == (0, 7)
    assert interval(BinOp("%", BinOp("+", i, Const(3)), Const(8)), r) == (0, 7)
    assert interval(BinOp("min", i, Const(9)), r) == (0, 9)
    assert interval(BinOp("//", BinOp("-", i, Const(4)), Const(4)), r) is None  # a negative numerator: not followed
    assert interval(Var("k"), r) is None


def test_an_atomic_target_and_a_copy_start_are_the_plain_element():
    @T.prim_func
    def main(I: T.Tensor((32,), "int32"), X: T.Tensor((32,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                T.atomic_add(Y[I[i]], X[i])

    from egtile.ir import AtomicAdd

    (at,) = [s for s in walk(main.kernel.body) if isinstance(s, AtomicAdd)]
    assert at.buffer.name == "Y"
    I = torch.randint(0, 64, (32,), dtype=torch.int32)
    X = torch.randn(32)
    Y = torch.zeros(64)
    egtile.compile(main, target="sim")(I, X, Y)
    ref = torch.zeros(64, dtype=torch.float64).index_add_(0, I.long(), X.double())
    torch.testing.assert_close(Y.double(), ref, rtol=1e-6, atol=1e-6)


def test_the_cuda_reads_a_guarded_load_only_inside_and_never_as_a_vector():
    # 128 elements over 32 threads: unguarded, the gather would be a 4-wide vector load (past the edge too)
    sched = egtile.optimize(block_gather(320, 5, B=128)).scheduled
    gathers = [s for s in swalk(sched.body) if isinstance(s, ThreadLoop)
               and any(isinstance(x.stmt, Store) and x.stmt.buffer.name == "S" for x in swalk(s.body) if hasattr(x, "stmt"))]
    assert gathers and all(s.vector == 1 for s in gathers)
    src = egtile.codegen.generate(sched).source
    assert " ? " in src and "X[" in src


@pytest.mark.gpu
def test_gpu_loads_past_the_edge_read_zero():
    blk = torch.tensor([0, 2, 3, -1, 1], dtype=torch.int32, device="cuda")
    X = torch.randn(80, device="cuda")
    Y = torch.full((5, 32), float("nan"), device="cuda")
    egtile.compile(block_gather(80, 5), target="cuda")(blk, X, Y)
    torch.testing.assert_close(Y.double().cpu(), _gather_ref(blk.cpu(), X.cpu()), rtol=0, atol=0)
    X = torch.randn(320, device="cuda")
    Y = torch.full((5, 128), float("nan"), device="cuda")
    egtile.compile(block_gather(320, 5, B=128), target="cuda")(blk, X, Y)
    torch.testing.assert_close(Y.double().cpu(), _gather_ref(blk.cpu(), X.cpu(), B=128), rtol=0, atol=0)
    for shift in (5, -7):
        X = torch.randn(72, device="cuda")
        Y = torch.full((72,), float("nan"), device="cuda")
        egtile.compile(shifted(72, shift), target="cuda")(X, Y)
        torch.testing.assert_close(Y.double().cpu(), _shift_ref(X.cpu(), shift), rtol=1e-6, atol=1e-6)
