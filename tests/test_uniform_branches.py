"""Block-level ``T.If`` on data (issue 9.5): uniform conditions with barriers compile, verify and simulate.

A condition every thread of the block evaluates on the same values (a read-only mask, a flag in global
memory the kernel never writes, shared memory) may guard code that needs CTA barriers: every thread takes
the same side, so each ``bar.sync`` is reached by all the threads it counts. The lowering seals such a
side (a barrier first and last) and the verifier checks it as a unit (``egtile.verifier.paths``).

Checked here: TileLang's block-sparse GEMM (``T.If(Mask[by, k])`` around the k-step's copies and gemm, in a
``T.Pipelined`` and in a ``T.serial`` loop) and a ``T.If(Flag[0])`` kernel with an else side, nested branches,
against float64 references on fresh random inputs and masks, with outputs poisoned; both verifiers agree;
a non-uniform condition that needs a barrier is refused at the user's line; and mutants are caught: a
dropped seal barrier by both verifiers and the simulator, a non-uniform condition taken for uniform by both
verifiers (L7).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ScheduleError
from egtile.ir import RoleSplit, SIf, SyncThreads
from egtile.verifier import reference


def block_sparse_gemm(M, N, K, bM=32, bN=32, bK=16, threads=64, pipelined=True):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             Mask: T.Tensor((M // bM, K // bK), "int32"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // bN, M // bM, threads=threads) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "float16")
            B_s = T.alloc_shared((bK, bN), "float16")
            C_l = T.alloc_fragment((bM, bN), "float32")
            T.clear(C_l)
            loop = T.Pipelined(K // bK, num_stages=2) if pipelined else T.serial(K // bK)
            for k in loop:
                with T.If(Mask[by, k] != 0):
                    T.copy(A[by * bM, k * bK], A_s)
                    T.copy(B[k * bK, bx * bN], B_s)
                    T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bM, bx * bN])

    return main


def masked_gemm(M, N, K, bM=64, bN=64, bK=32):
    """The mask around the gemm only: the loads stay unconditional, so the loop keeps its warp-specialized
    TMA pipeline and the consumer's branch needs no barrier."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             Mask: T.Tensor((M // bM, K // bK), "int32"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // bN, M // bM, threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "float16")
            B_s = T.alloc_shared((bK, bN), "float16")
            C_l = T.alloc_fragment((bM, bN), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // bK, num_stages=2):
                T.copy(A[by * bM, k * bK], A_s)
                T.copy(B[k * bK, bx * bN], B_s)
                with T.If(Mask[by, k] != 0):
                    T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bM, bx * bN])

    return main


def block_sparse_ref(A, B, mask, bM, bK):
    A64, B64 = A.double(), B.double()
    keep = mask.repeat_interleave(bM, 0).repeat_interleave(bK, 1).double()
    return (A64 * keep) @ B64


def flag_kernel(n=64, threads=64, nested=False):
    """``Y = f(X)`` where the side taken depends on ``Flag[0]`` (and, nested, on ``Flag[1]``). Each side reads
    elements of ``S`` other threads wrote before the branch (its start barrier is load-bearing) and ``Y`` reads
    elements of ``U`` other threads wrote inside the branch (its end barrier is)."""

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Flag: T.Tensor((2,), "int32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            S = T.alloc_shared((n,), "float32")
            U = T.alloc_shared((n,), "float32")
            V = T.alloc_shared((n,), "float32")
            for i in T.Parallel(n):
                S[i] = X[i]
            with T.If(Flag[0] != 0):
                for i in T.Parallel(n):
                    U[i] = S[(i + 1) % n] * 2.0
                if nested:
                    with T.If(Flag[1] != 0):
                        for i in T.Parallel(n):
                            V[i] = U[(i + 5) % n] - 1.0
                        for i in T.Parallel(n):
                            U[i] = V[(i + 7) % n] + 0.5
            with T.Else():
                for i in T.Parallel(n):
                    U[i] = S[(i + 2) % n] * 3.0
            for i in T.Parallel(n):
                Y[i] = U[(i + 5) % n]

    return main


def flag_ref(X, flag, nested=False):
    x = X.double()

    def at(v, s):  # v[(i + s) % n]
        return torch.roll(v, -s)

    if flag[0]:
        u = at(x, 1) * 2.0
        if nested and flag[1]:
            u = at(at(u, 5) - 1.0, 7) + 0.5
    else:
        u = at(x, 2) * 3.0
    return at(u, 5)


def _sealed(sched):
    """The sides of data-dependent SIfs that hold barriers."""
    out = []
    for s in egtile.ir.swalk(sched.body):
        if isinstance(s, SIf):
            out += [side for side in (s.then_body, s.else_body) if any(isinstance(x, SyncThreads) for x in side)]
    return out


def _replace_side(stmts, old, new):
    """``stmts`` with the SIf side ``old`` (by identity) replaced by ``new``."""
    out = []
    for s in stmts:
        match s:
            case SIf():
                then_body = new if s.then_body is old else _replace_side(s.then_body, old, new)
                else_body = new if s.else_body is old else _replace_side(s.else_body, old, new)
                s = dataclasses.replace(s, then_body=then_body, else_body=else_body)
            case RoleSplit(roles=roles):
                s = dataclasses.replace(s, roles=tuple(dataclasses.replace(r, body=_replace_side(r.body, old, new))
                                                       for r in roles))
            case _ if hasattr(s, "body") and isinstance(getattr(s, "body"), tuple):
                s = dataclasses.replace(s, body=_replace_side(s.body, old, new))
        out.append(s)
    return tuple(out)


def drop_seal(sched, which: str, side_index: int = 0):
    """The mutant that drops the first (``"start"``) or last (``"end"``) barrier of a sealed side."""
    side = _sealed(sched)[side_index]
    new = side[1:] if which == "start" else side[:-1]
    return dataclasses.replace(sched, body=_replace_side(sched.body, side, new))


def _props(violations):
    return {v.property for v in violations}


def _keys(violations):
    return sorted(v.key() for v in violations)


# ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pipelined", [True, False], ids=["pipelined", "serial"])
def test_block_sparse_gemm_matches_float64_on_random_masks(pipelined):
    M, N, K, bM, bN, bK = 64, 64, 64, 32, 32, 16
    f = block_sparse_gemm(M, N, K, bM, bN, bK, pipelined=pipelined)
    sched = egtile.optimize(f).scheduled
    assert egtile.verify(sched) == []
    assert reference.verify(sched) == []
    assert _sealed(sched), "the k-step needs barriers inside the branch"
    kernel = egtile.compile(f, target="sim")
    gen = torch.Generator().manual_seed(0xB5 + pipelined)
    for trial in range(2):
        A = torch.randn(M, K, generator=gen).half()
        B = torch.randn(K, N, generator=gen).half()
        mask = (torch.rand(M // bM, K // bK, generator=gen) < 0.5).int()
        mask[trial, :2] = 1  # two consecutive steps taken: the seal between them is load-bearing
        C = torch.full((M, N), float("nan")).half()
        kernel(A, B, mask, C)
        ref = block_sparse_ref(A, B, mask, bM, bK)
        bound = 2.0**-11 * ref.abs() + K * 2.0**-23 * (A.double().abs() @ B.double().abs())
        assert torch.all((C.double() - ref).abs() <= bound), (mask, (C.double() - ref).abs().max())


def test_a_mask_around_the_gemm_keeps_the_tma_pipeline():
    M, N, K, bM, bN, bK = 64, 64, 128, 64, 64, 32
    f = masked_gemm(M, N, K)
    sched = egtile.optimize(f).scheduled
    assert sched.barriers, "warp-specialized: the loads are TMA with mbarriers"
    assert egtile.verify(sched) == [] and reference.verify(sched) == []
    kernel = egtile.compile(f, target="sim")
    gen = torch.Generator().manual_seed(0x3A5C)
    A = torch.randn(M, K, generator=gen).half()
    B = torch.randn(K, N, generator=gen).half()
    mask = (torch.rand(M // bM, K // bK, generator=gen) < 0.5).int()
    mask[0, :2] = 1
    C = torch.full((M, N), float("nan")).half()
    kernel(A, B, mask, C)
    ref = block_sparse_ref(A, B, mask, bM, bK)
    bound = 2.0**-11 * ref.abs() + K * 2.0**-23 * (A.double().abs() @ B.double().abs())
    assert torch.all((C.double() - ref).abs() <= bound)


@pytest.mark.parametrize("nested", [False, True], ids=["flat", "nested"])
def test_flag_branch_matches_float64_on_every_flag(nested):
    f = flag_kernel(nested=nested)
    sched = egtile.optimize(f).scheduled
    assert egtile.verify(sched) == []
    assert reference.verify(sched) == []
    kernel = egtile.compile(f, target="sim")
    gen = torch.Generator().manual_seed(0xF1A6 + nested)
    for flag in ([0, 0], [1, 0], [1, 1], [0, 1]):
        X = torch.randn(64, generator=gen)
        Y = torch.full((64,), float("nan"))
        kernel(X, torch.tensor(flag, dtype=torch.int32), Y)
        ref = flag_ref(X, flag, nested)
        # at most four float32 roundings of values below 4 |X| + 2 (the reference is float64)
        bound = 4 * 2.0**-24 * (4 * X.double().abs().max() + 2)
        assert torch.all((Y.double() - ref).abs() <= bound), flag


def test_non_uniform_condition_with_a_barrier_is_refused_at_its_line():
    with pytest.raises(ScheduleError) as err:
        egtile.compile(counter_kernel(), target="sim")
    msg = str(err.value)
    assert "not block-uniform" in msg and "Flag" in msg and "T.If" in msg
    assert err.value.loc is not None and err.value.loc.line > 0


def test_the_refusal_s_advice_a_shared_copy_of_the_flag_compiles():
    """The error suggests copying the flag into shared memory: one thread reads it, every thread reads the copy."""

    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Flag: T.Tensor((1,), "int32"), Y: T.Tensor((2, 64), "float32")):
        with T.Kernel(2, threads=64) as bx:
            S = T.alloc_shared((64,), "float32")
            F = T.alloc_shared((1,), "int32")
            F[0] = Flag[0]
            with T.If(F[0] == 0):
                for i in T.Parallel(64):
                    S[i] = X[i] * 2.0
                for i in T.Parallel(64):
                    Y[bx, i] = S[(i + 1) % 64]
            T.atomic_add(Flag[0], 1)

    sched = egtile.optimize(main).scheduled
    assert egtile.verify(sched) == [] and reference.verify(sched) == []
    kernel = egtile.compile(main, target="sim")
    X = torch.randn(64)
    F = torch.zeros(1, dtype=torch.int32)
    Y = torch.full((2, 64), float("nan"))
    kernel(X, F, Y)  # blocks run in order on the CPU: block 0 sees 0, block 1 sees 1
    assert int(F[0]) == 2
    assert torch.equal(Y[0], torch.roll(X, -1) * 2.0) and torch.isnan(Y[1]).all()


def test_a_non_uniform_branch_ordered_from_outside_keeps_its_condition_read_pending():
    """The barrier before a non-uniform branch comes before its condition: the condition's read of Flag still
    needs a barrier before the later atomic write of Flag (it was dropped once)."""

    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Flag: T.Tensor((1,), "int32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            S = T.alloc_shared((64,), "float32")
            for i in T.Parallel(64):
                S[i] = X[i]
            with T.If(Flag[0] != 0):
                for i in T.Parallel(64):
                    Y[i] = S[(i + 1) % 64]
            T.atomic_add(Flag[0], 1)

    sched = egtile.optimize(main).scheduled
    assert egtile.verify(sched) == []
    kernel = egtile.compile(main, target="sim")
    for flag in (0, 3):
        X = torch.randn(64)
        F = torch.tensor([flag], dtype=torch.int32)
        Y = torch.full((64,), float("nan"))
        kernel(X, F, Y)
        assert int(F[0]) == flag + 1
        if flag:
            assert torch.equal(Y, torch.roll(X, -1))
        else:
            assert torch.isnan(Y).all()


def counter_kernel(blocks=2, via_local=False):
    """A branch on ``Flag[0]``, which every block increments: another block may change it between two threads'
    reads (on the GPU the threads of one block can disagree), so the branch may not hold a barrier."""

    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Flag: T.Tensor((1,), "int32"), Y: T.Tensor((blocks, 64), "float32")):
        with T.Kernel(blocks, threads=64) as bx:
            S = T.alloc_shared((64,), "float32")
            f = T.alloc_local((1,), "int32")
            f[0] = Flag[0]
            with T.If((f[0] if via_local else Flag[0]) == 0):
                for i in T.Parallel(64):
                    S[i] = X[i] * 2.0
                for i in T.Parallel(64):
                    Y[bx, i] = S[(i + 1) % 64]  # needs a barrier inside the branch
            T.atomic_add(Flag[0], 1)

    return main


def test_a_condition_on_a_local_copy_of_written_data_is_refused():
    with pytest.raises(ScheduleError) as err:
        egtile.compile(counter_kernel(via_local=True), target="sim")
    msg = str(err.value)
    assert "not block-uniform" in msg and "it reads local buffer" in msg


# ---------------------------------------------------------------------------------------------------- mutants


@pytest.mark.parametrize("which", ["start", "end"])
def test_dropping_a_seal_barrier_is_caught_by_both_checkers(which):
    sched = egtile.optimize(flag_kernel()).scheduled
    bad = drop_seal(sched, which)
    v = egtile.verify(bad)
    assert {"L1", "L3"} <= _props(v), v
    assert _keys(v) == _keys(reference.verify(bad))
    r = egtile.simulate(bad, torch.randn(64), torch.tensor([1, 0], dtype=torch.int32), torch.zeros(64))
    assert any(x.kind == "read-after-write" for x in r.races), r.errors()


def test_an_unsealed_block_sparse_step_is_refused_by_the_verifier():
    """Without its start barrier the k-step still runs race-free (the previous step's end barrier orders it),
    but the verifier checks a side with barriers under a data-dependent condition only as a sealed unit."""
    f = block_sparse_gemm(32, 32, 64, pipelined=False)
    bad = drop_seal(egtile.optimize(f).scheduled, "start")
    v = egtile.verify(bad)
    assert any(x.property == "L3" and "sealed" in x.message for x in v), v
    assert _keys(v) == _keys(reference.verify(bad))


def test_a_non_uniform_condition_taken_for_uniform_is_caught_by_both_checkers(monkeypatch):
    """The mutant puts the barriers inside the branch on ``Flag[0]``; the verifier reports L7 naming why the
    condition is not uniform (and so does the enumerating verifier).

    The simulator cannot catch this one: it runs blocks one after another, so no other block changes
    ``Flag`` while a block's threads read it, and a block's own writes are ordered by its barriers; threads
    of one simulated block never disagree on a block-level condition (on the GPU they can)."""
    from egtile.analysis import uniform
    from egtile.verdict import Verdict

    monkeypatch.setattr(uniform.Uniformity, "of", lambda self, e, thread_vars=(): Verdict.of([]))
    bad = egtile.optimize(counter_kernel()).scheduled
    assert any(isinstance(x, SyncThreads) for s in egtile.ir.swalk(bad.body) if isinstance(s, SIf)
               for x in s.then_body)
    v = egtile.verify(bad)
    assert any(x.property == "L7" and "Flag" in x.message for x in v), v
    assert _keys(v) == _keys(reference.verify(bad))


# ---------------------------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("pipelined", [True, False], ids=["pipelined", "serial"])
def test_block_sparse_gemm_on_gpu(pipelined):
    M, N, K, bM, bN, bK = 256, 256, 512, 64, 64, 32
    kernel = egtile.compile(block_sparse_gemm(M, N, K, bM, bN, bK, threads=128, pipelined=pipelined),
                            target="cuda")
    g = torch.Generator().manual_seed(0xB5B5)
    for density in (0.0, 0.3, 1.0):
        A = torch.randn(M, K, generator=g).half()
        B = torch.randn(K, N, generator=g).half()
        mask = (torch.rand(M // bM, K // bK, generator=g) < density).int()
        C = torch.full((M, N), float("nan"), device="cuda").half()
        kernel(A.cuda(), B.cuda(), mask.cuda(), C)
        torch.cuda.synchronize()
        ref = block_sparse_ref(A, B, mask, bM, bK)
        bound = 2.0**-11 * ref.abs() + K * 2.0**-23 * (A.double().abs() @ B.double().abs())
        assert torch.all((C.cpu().double() - ref).abs() <= bound), density


@pytest.mark.gpu
def test_a_mask_around_the_gemm_on_gpu():
    M, N, K, bM, bN, bK = 256, 256, 512, 64, 64, 32
    kernel = egtile.compile(masked_gemm(M, N, K), target="cuda")
    g = torch.Generator().manual_seed(0x3A5D)
    A = torch.randn(M, K, generator=g).half()
    B = torch.randn(K, N, generator=g).half()
    mask = (torch.rand(M // bM, K // bK, generator=g) < 0.5).int()
    C = torch.full((M, N), float("nan"), device="cuda").half()
    kernel(A.cuda(), B.cuda(), mask.cuda(), C)
    torch.cuda.synchronize()
    ref = block_sparse_ref(A, B, mask, bM, bK)
    bound = 2.0**-11 * ref.abs() + K * 2.0**-23 * (A.double().abs() @ B.double().abs())
    assert torch.all((C.cpu().double() - ref).abs() <= bound)


@pytest.mark.gpu
@pytest.mark.parametrize("nested", [False, True], ids=["flat", "nested"])
def test_flag_branch_on_gpu(nested):
    kernel = egtile.compile(flag_kernel(nested=nested), target="cuda")
    g = torch.Generator().manual_seed(0xF1A7)
    for flag in ([0, 0], [1, 0], [1, 1], [0, 1]):
        X = torch.randn(64, generator=g)
        Y = torch.full((64,), float("nan"), device="cuda")
        kernel(X.cuda(), torch.tensor(flag, dtype=torch.int32, device="cuda"), Y)
        torch.cuda.synchronize()
        ref = flag_ref(X, flag, nested)
        bound = 4 * 2.0**-24 * (4 * X.double().abs().max() + 2)
        assert torch.all((Y.cpu().double() - ref).abs() <= bound), flag
