"""A row fragment stored to memory by one replica per row (``LayoutLoop.once``, egtile.rules.fragment): ``T.copy(lse,
Lse[...])`` and ``for i in T.Parallel(M): Out[...] = rows[i]`` keep the accumulator group in registers (the wgmma
path) instead of moving it to shared memory; each row is stored once, past a tensor's edge not at all."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import egtile
from egtile import language as T
from egtile.codegen import nvrtc
from egtile.ir import swalk
from egtile.ir.fragment import LayoutLoop
from egtile.ir.wgmma import WgmmaMma
from egtile.layout import RowFragment

from _check import poisoned


def rows_kernel(m: int = 128, n: int = 64, k: int = 32, bm: int = 64, threads: int = 128, both: bool = False):
    """Per row of ``A B^T``: its maximum by ``T.copy`` out of a row fragment, twice its sum by a ``T.Parallel``
    store (guarded past the end, as TileLang's examples write it). ``m`` need not be a multiple of ``bm``: the
    copy's region then runs past ``RowMax``'s edge (clipped). ``both``: the store loop also writes a row fragment
    (registers and memory in one nest)."""

    @T.prim_func
    def main(A: T.Tensor((m, k), "float16"), B: T.Tensor((n, k), "float16"),
             RowMax: T.Tensor((m,), "float32"), RowSum: T.Tensor((m,), "float32")):
        with T.Kernel(T.ceildiv(m, bm), threads=threads) as bx:
            A_s = T.alloc_shared((bm, k), "float16")
            B_s = T.alloc_shared((n, k), "float16")
            acc = T.alloc_fragment((bm, n), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            sm = T.alloc_fragment((bm,), "float32")
            T.copy(A[bx * bm:(bx + 1) * bm, :], A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc, transpose_B=True)
            T.reduce_max(acc, mx, dim=1)
            T.reduce_sum(acc, sm, dim=1)
            T.copy(mx, RowMax[bx * bm:(bx + 1) * bm])
            for i in T.Parallel(bm):
                if bx * bm + i < m:
                    RowSum[bx * bm + i] = sm[i] * 2
                    if both:
                        mx[i] = sm[i]

    return main


def _reference(A, B):
    s = A.double() @ B.double().T
    return s.max(1).values, 2 * s.sum(1)


def _once_loops(sched):
    return sorted((x.fragment, x.once) for x in swalk(sched.body) if isinstance(x, LayoutLoop)
                  and isinstance(sched.fragment(x.fragment), RowFragment))


@pytest.mark.parametrize("m,threads", [(128, 128), (123, 128), (256, 256)], ids=["whole", "past-the-edge", "2wg"])
def test_rows_are_stored_once_from_registers_and_match_float64(m, threads):
    bm = 64 if threads == 128 else 128
    k = egtile.compile(rows_kernel(m=m, bm=bm, threads=threads), target="sim")
    sched = k.schedule_result.scheduled
    assert [g.gemm.c.buffer.name for g in swalk(sched.body) if isinstance(g, WgmmaMma)] == ["acc"]
    assert isinstance(sched.fragment("mx"), RowFragment) and isinstance(sched.fragment("sm"), RowFragment)
    assert _once_loops(sched) == [("mx", True), ("sm", True)]
    assert k.explain().count("fragment-row-store: stored by one replica per row") == 2
    torch.manual_seed(m + threads)
    A, B = torch.randn(m, 32, dtype=torch.float16), torch.randn(64, 32, dtype=torch.float16)
    mx, sm = poisoned((m,), torch.float32, "cpu"), poisoned((m,), torch.float32, "cpu")
    k(A, B, mx, sm)
    ref_mx, ref_sm = _reference(A, B)
    torch.testing.assert_close(mx.double(), ref_mx, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sm.double(), ref_sm, rtol=1e-4, atol=1e-3)


def test_the_cuda_kernel_guards_the_store_with_the_first_replica_and_compiles():
    k = egtile.compile(rows_kernel(m=123), target="sim")
    src = k.get_kernel_source()
    assert src.count("% 4 == 0)) {") == 2  # the quad's lane 0 of each row, once per store
    assert nvrtc.compile_cuda(src, "rows.cu").cubin


def test_a_nest_writing_registers_and_memory_keeps_the_group_in_shared_memory_and_says_why():
    r = egtile.optimize(rows_kernel(both=True))
    assert r.scheduled.fragment("acc") is None
    assert "only one replica may store" in r.explain()


def test_a_once_loop_that_writes_a_register_is_refused_by_the_verifier():
    sched = egtile.optimize(rows_kernel()).scheduled
    reduce_max = next(x for x in swalk(sched.body) if type(x).__name__ == "RowReduce")
    row = reduce_max.reduce.dst  # mx, a row register fragment
    from egtile.ir import Load, Store, Var
    from egtile.ir.scheduled import Leaf

    def writes_register(stmts):
        out = []
        for x in stmts:
            if isinstance(x, LayoutLoop) and x.once:
                i = x.vars[0]
                x = replace(x, body=(Leaf(Store(x.sid, row, (i,), Load(row, (Var(i.name),)))),))
            elif isinstance(getattr(x, "body", None), tuple):
                x = replace(x, body=writes_register(x.body))
            out.append(x)
        return tuple(out)

    bad = replace(sched, body=writes_register(sched.body))
    assert [v for v in egtile.verify(bad) if "other replicas then miss" in v.message]


@pytest.mark.gpu
@pytest.mark.parametrize("m,threads", [(123, 128), (256, 256)], ids=["past-the-edge", "2wg"])
def test_rows_are_stored_once_on_the_gpu(m, threads):
    bm = 64 if threads == 128 else 128
    k = egtile.compile(rows_kernel(m=m, bm=bm, threads=threads), target="cuda")
    A, B = torch.randn(m, 32, dtype=torch.float16), torch.randn(64, 32, dtype=torch.float16)
    mx, sm = poisoned((m,), torch.float32, "cuda"), poisoned((m,), torch.float32, "cuda")
    k(A.cuda(), B.cuda(), mx, sm)
    ref_mx, ref_sm = _reference(A, B)
    torch.testing.assert_close(mx.double().cpu(), ref_mx, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sm.double().cpu(), ref_sm, rtol=1e-4, atol=1e-3)


def test_a_row_stored_to_shared_memory_is_read_back_after_a_barrier():
    """The row lands in shared memory by its first replica; every thread then reads it (the CTA barrier between
    comes from the accesses, egtile.lower.sync; the simulator reports a missing one as a race)."""

    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((64, 32), "float16"), Out: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((64, 32), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            mx = T.alloc_fragment((64,), "float32")
            mx_s = T.alloc_shared((64,), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc, transpose_B=True)
            T.reduce_max(acc, mx, dim=1)
            T.copy(mx, mx_s)
            for i in T.Parallel(64):
                Out[63 - i] = mx_s[i] + 1

    sched = egtile.optimize(main).scheduled
    assert _once_loops(sched) == [("mx", True)]
    A, B = torch.randn(64, 32, dtype=torch.float16), torch.randn(64, 32, dtype=torch.float16)
    res = egtile.simulate(sched, A, B, poisoned((64,), torch.float32, "cpu"))
    assert res.ok, res
    torch.testing.assert_close(res.outputs[2].double(), (A.double() @ B.double().T).max(1).values.flip(0) + 1,
                               rtol=1e-5, atol=1e-5)


def _gathered_rows():
    """Per block, ``A B^T`` and its row maxima stored at rows read from a tensor (sparse attention's gathered
    tokens)."""

    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((64, 32), "float16"), Idx: T.Tensor((2,), "int32"),
             Out: T.Tensor((256, 64), "float32"), Lse: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((64, 32), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            m = T.alloc_fragment((64,), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc, transpose_B=True)
            T.reduce_max(acc, m, dim=1)
            row = Idx[bx]
            T.copy(acc, Out[row:row + 64, :])
            T.copy(m, Lse[row:row + 64])

    return main


def _check_gathered(out, lse, A, B):
    s = A.double() @ B.double().T
    for r0 in (0, 128):
        torch.testing.assert_close(out[r0:r0 + 64], s, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(lse[r0:r0 + 64], s.max(1).values, rtol=1e-5, atol=1e-5)
    assert torch.isnan(out[64:128]).all() and torch.isnan(lse[192:]).all()  # rows no block names stay poisoned


def test_rows_and_the_accumulator_stored_at_rows_read_from_data():
    """``T.copy(acc, Out[row:row + 64, :])`` and ``T.copy(m, Lse[row:row + 64])`` with ``row`` read from a tensor
    (sparse attention's gathered tokens): the verifier records the by-layout stores as accesses it cannot place,
    the simulator places them."""

    r = egtile.optimize(_gathered_rows())
    assert r.scheduled.fragment("acc") is not None and egtile.verify(r.scheduled) == []
    A, B = torch.randn(64, 32, dtype=torch.float16), torch.randn(64, 32, dtype=torch.float16)
    idx = torch.tensor([128, 0], dtype=torch.int32)
    res = egtile.simulate(r.scheduled, A, B, idx, poisoned((256, 64), torch.float32, "cpu"),
                          poisoned((256,), torch.float32, "cpu"))
    assert res.ok
    _check_gathered(res.outputs[3].double(), res.outputs[4].double(), A, B)


@pytest.mark.gpu
def test_rows_and_the_accumulator_stored_at_rows_read_from_data_on_the_gpu():
    k = egtile.compile(_gathered_rows(), target="cuda")
    A, B = torch.randn(64, 32, dtype=torch.float16), torch.randn(64, 32, dtype=torch.float16)
    idx = torch.tensor([128, 0], dtype=torch.int32)
    out, lse = poisoned((256, 64), torch.float32, "cuda"), poisoned((256,), torch.float32, "cuda")
    k(A.cuda(), B.cuda(), idx.cuda(), out, lse)
    _check_gathered(out.double().cpu(), lse.double().cpu(), A, B)
