"""Rule-level mutants (issue 15 item 3): every named side condition of every rule of the default ruleset,
removed (``RuleSet.without_condition``), makes a schedule some check rejects, or is argued not to be a
legality condition.

The conditions are enumerated from ``egtile.rules.default()`` at collection time
(:func:`soundness.conditions.named_conditions`), so a condition a rule gains (a new rule's, or one added to
``rules/fragment.py`` or ``rules/mma.py``) fails :func:`test_every_named_condition_has_a_mutant_test` until
it gets a verdict here: ``HUNTED`` (the random programs catch it; ``python tests/soundness/conditions.py``
finds which), ``WITNESS`` (a kernel on which the mutant's schedule is caught), ``COVERED`` (an
``egtile.rules.MUTANTS`` entry drops the same condition and the named test catches it), or ``NOT_LEGALITY``
(the condition states a user preference or a cost choice, or is implied by another condition, the
definition of a producer or the rule's own binding: the mutant's schedule of the named kernel is *legal*, which
the test checks). A witnessed condition whose mutant is not caught yet is listed in ``GAPS``
with why (an expected failure that fails once the gap closes), as ``egtile.rules.MUTANT_GAPS`` does.

What "caught" means: the mutant's compile raises (a loud refusal, not a silent wrong kernel), or its
schedule differs from the default one and ``verify``, the simulator under every policy, or the comparison
with the reference interpreter on fresh random inputs finds a problem (``soundness.check.check``); for the
preference conditions, the schedule uses an instruction the program excluded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import pytest
import torch
from soundness.check import check
from soundness.conditions import _examples, _try_schedule, condition_mutant, hunt, named_conditions
from soundness.programs import programs

from egtile import language as T
from egtile import rules
from egtile.ir import Kernel, swalk

KEYS = named_conditions()

# ----------------------------------------------------------------------------------------------------
# conditions the generated programs catch (first catch at program n of the fixed sequence: conditions.py)

HUNT_BUDGET = 16
HUNTED: set[tuple[str, str]] = {
    ("pipeline-warp-specialize", "ws-has-producer"),
    ("partition-parallel", "no-escaping-local-write"),
    ("sink-wait", "no-read-of-guarded"),
    ("hoist-release", "no-access-of-guarded"),
    ("replicate-scalar", "effect-local"),
}

# ----------------------------------------------------------------------------------------------------
# witness kernels


def _copy_consume(threads: int = 128, stages: int = 2, n: int = 4, width: int = 64, **copy_kw) -> Kernel:
    @T.prim_func
    def main(In: T.Tensor((n, width), "float16"), Out: T.Tensor((n, width), "float16")):
        with T.Kernel(1, threads=threads) as _bx:
            X_s = T.alloc_shared((width,), "float16")
            for k in T.Pipelined(n, num_stages=stages):
                T.copy(In[k, 0:width], X_s, **copy_kw)
                for i in T.Parallel(width):
                    Out[k, i] = X_s[width - 1 - i] + T.float16(1.0)

    return main.kernel


def _no_producer() -> Kernel:
    @T.prim_func
    def main(A: T.Tensor((4, 64), "float32"), Out: T.Tensor((4, 64), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            for k in T.Pipelined(4, num_stages=2):
                for i in T.Parallel(64):
                    Out[k, i] = A[k, 63 - i] + 1.0

    return main.kernel


def _zero_stages() -> Kernel:
    from dataclasses import replace

    k = _copy_consume()
    return replace(k, body=(replace(k.body[0], num_stages=0),))


def _read_previous_round() -> Kernel:
    """The consumer reads ``X_s`` before the copy of its iteration: iteration ``k`` must see iteration
    ``k - 1``'s copy (a loop-carried dependence through the produced buffer; ``X_s`` is touched only in the
    loop, so ``ws-produced-private`` holds). Staged, the read sees the copy of its own stage instead."""
    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                for i in T.Parallel(64):
                    with T.If(k > 0):
                        Out[k, i] = X_s[63 - i]
                T.copy(In[k, 0:64], X_s)

    return main.kernel


def _producer_reads_consumer_write() -> Kernel:
    @T.prim_func
    def main(G: T.Tensor((8, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(G[k, 0:64], X_s)
                for i in T.Parallel(64):
                    G[k + 1, i] = X_s[i] * T.float16(2.0)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]

    return main.kernel


def _consumer_writes_next_round() -> Kernel:
    """The copy fills ``X_s[0:32]``; a consumer writes ``X_s[32:64]`` after the reads, for the next iteration
    to read (written before read in the body order: ``ws-produced-written-before-read`` holds). Staged, the
    next iteration reads the other stage's copy of ``X_s[32:64]``, which holds another round's value."""
    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 32), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[k, 0:32], X_s[0:32])
                for i in T.Parallel(32):
                    with T.If(k > 0):
                        Out[k, i] = X_s[63 - i]
                for i in T.Parallel(32):
                    X_s[32 + i] = X_s[i] * T.float16(2.0)

    return main.kernel


def _produced_read_after_loop() -> Kernel:
    @T.prim_func
    def main(In: T.Tensor((5, 64), "float16"), Out: T.Tensor((5, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(5, num_stages=2):
                T.copy(In[k, 0:64], X_s)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]
            for i in T.Parallel(64):
                Out[0, i] = X_s[63 - i]

    return main.kernel


def _pipeline_in_serial_loop(outer_in_copy: bool = True) -> Kernel:
    """A pipelined loop run twice by a serial loop; ``outer_in_copy=False``: its copy does not mention the
    outer variable (so ``swp-producer-independent`` holds and only ``ws-runs-once`` keeps it out)."""
    @T.prim_func
    def main(In: T.Tensor((6, 64), "float16"), Out: T.Tensor((6, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for j in T.serial(2):
                for k in T.Pipelined(3, num_stages=2):
                    T.copy(In[(j * 3 if outer_in_copy else 0) + k, 0:64], X_s)
                    for i in T.Parallel(64):
                        Out[j * 3 + k, i] = X_s[63 - i]

    return main.kernel


def _pipeline_under_data_branch() -> Kernel:
    """A pipelined copy loop inside a branch on a tensor's value (block-uniform: each block reads its own flag)."""
    @T.prim_func
    def main(In: T.Tensor((2, 4, 64), "float16"), N: T.Tensor((2,), "int32"), Out: T.Tensor((2, 4, 64), "float16")):
        with T.Kernel(2, threads=128) as bx:
            X_s = T.alloc_shared((64,), "float16")
            if N[bx] > 4:
                for k in T.Pipelined(4, num_stages=2):
                    T.copy(In[bx, k, 0:64], X_s)
                    for i in T.Parallel(64):
                        Out[bx, k, i] = X_s[63 - i] + T.float16(1.0)

    return main.kernel


def _shared_source_producer() -> Kernel:
    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            A_s = T.alloc_shared((4, 64), "float16")
            X_s = T.alloc_shared((64,), "float16")
            T.copy(In[0:4, 0:64], A_s)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A_s[k, 0:64], X_s)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[63 - i]

    return main.kernel


def _simt_producer() -> Kernel:
    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                for j in T.Parallel(64):
                    X_s[j] = In[k, 63 - j]
                for i in T.Parallel(64):
                    Out[k, i] = X_s[63 - i]

    return main.kernel


def _source_written_in_kernel(threads: int = 128) -> Kernel:
    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=threads) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for i in T.Parallel(64):
                In[1, i] = In[1, i] * T.float16(3.0)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[k, 0:64], X_s)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[63 - i]

    return main.kernel


def _fission_local() -> Kernel:
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            L = T.alloc_local((1,), "float32")
            for i in T.Parallel(64):
                L[0] = X[i] * 2.0
                Y[i] = L[0] + X[63 - i]

    return main.kernel


def _vector_local_escape() -> Kernel:
    @T.prim_func
    def main(X: T.Tensor((512,), "float32"), Y: T.Tensor((512,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            L = T.alloc_local((512,), "float32")
            for i in T.Parallel(512):
                L[i] = X[i] * 2.0
            for i in T.Parallel(512):
                Y[i] = L[511 - i]

    return main.kernel


def _extern_address_of() -> Kernel:
    from seed_schedules import bug1_kernel

    k = bug1_kernel()
    return getattr(k, "kernel", k)


def _block_local() -> Kernel:
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            L = T.alloc_local((1,), "float32")
            L[0] = X[0] * 2.0
            for i in T.Parallel(64):
                Y[i] = X[i] + L[0]

    return main.kernel


def _block_copy(**kw) -> Kernel:
    @T.prim_func
    def main(In: T.Tensor((64,), "float16"), Out: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            T.copy(In[0:64], X_s, **kw)
            for i in T.Parallel(64):
                Out[i] = X_s[63 - i]

    return main.kernel


def _store_copy(width: int = 64, **kw) -> Kernel:
    @T.prim_func
    def main(In: T.Tensor((width,), "float32"), Out: T.Tensor((width,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((width,), "float32")
            for i in T.Parallel(width):
                X_s[i] = In[width - 1 - i] * 2.0
            T.copy(X_s, Out[0:width], **kw)

    return main.kernel


def _fragment_store(**kw) -> Kernel:
    """A whole 2-D fragment copied to a global tile (``copy-via-tma-store``'s pattern)."""
    @T.prim_func
    def main(X: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            C_f = T.alloc_fragment((64, 64), "float32")
            for i, j in T.Parallel(64, 64):
                C_f[i, j] = X[63 - i, j] * 2.0
            T.copy(C_f, C[0, 0], **kw)

    return main.kernel


def _tma_copy_beside_simt_producer() -> Kernel:
    """A copy that asks for TMA beside a SIMT store-loop producer: the producer warpgroup's wait mode is the
    whole warpgroup (not every producer is single-issue), so ``copy-to-simt-producer`` matches the copy."""
    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), In2: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            Y_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[k, 0:64], X_s, prefer_instruction="tma")
                for j in T.Parallel(64):
                    Y_s[j] = In2[k, 63 - j]
                for i in T.Parallel(64):
                    Out[k, i] = X_s[63 - i] + Y_s[i]

    return main.kernel


def _gemm(bk: int = 32, dtype: str = "float16", reduce: bool = False, simt_a: bool = False,
          tail: str | None = None, cp_async_a: bool = False) -> Kernel:
    """``C = A B`` over two K blocks, with ``tail``, a statement after the gemm in the pipelined body, so that the deferred-wait rules
    (egtile.rules.mma_async) have a wait position: ``free`` touches neither the accumulator nor the operands
    (a scratch row), ``serial`` is the same in a serial loop (not straight-line), ``acc`` reads and writes the
    accumulator, ``operand`` overwrites operand B's tile (both followed by a read of the stage, so that the stage
    release, which the lowering never moves a wait past, comes after them)."""
    @T.prim_func
    def main(A: T.Tensor((64, 2 * bk), dtype), B: T.Tensor((2 * bk, 64), dtype), C: T.Tensor((64, 64), "float32"),
             R: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            A_s = T.alloc_shared((64, bk), dtype)
            B_s = T.alloc_shared((bk, 64), dtype)
            if tail is not None:
                X_s = T.alloc_shared((64,), "float32")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.clear(C_f)
            for ko in T.Pipelined(2, num_stages=2):
                if simt_a:
                    for i, j in T.Parallel(64, bk):
                        A_s[i, j] = A[i, ko * bk + j]
                else:
                    T.copy(A[0, ko * bk], A_s, prefer_instruction="cp_async" if cp_async_a else None)
                T.copy(B[ko * bk, 0], B_s)
                T.gemm(A_s, B_s, C_f)
                if tail == "free":
                    for i in T.Parallel(64):
                        X_s[i] = T.float32(ko) + 1.0
                elif tail == "serial":
                    for t in T.serial(2):
                        X_s[t] = T.float32(ko + t)
                elif tail == "acc":
                    for i, j in T.Parallel(64, 64):
                        C_f[i, j] = C_f[i, j] * 0.5
                elif tail == "operand":
                    for i, j in T.Parallel(bk, 64):
                        B_s[i, j] = T.float16(1.0)
                if tail in ("acc", "operand"):
                    # a later read of the stage keeps its release (which the wait may not pass) after the tail
                    for i in T.Parallel(64):
                        X_s[i] = T.float32(A_s[i, 0])
            if reduce:
                # a row fragment stored to memory and rescaled in one nest: every replica must write the registers,
                # one may store, so the accumulator's group stays in shared memory (egtile.rules.fragment)
                r_f = T.alloc_fragment((64,), "float32")
                T.reduce_sum(C_f, r_f, dim=1)
                for i in T.Parallel(64):
                    R[i] = r_f[i]
                    r_f[i] = r_f[i] * 2.0
            T.copy(C_f, C[0, 0])

    return main.kernel


def _gemm_tail(tail: str = "free", **kw) -> Kernel:
    return _gemm(tail=tail, **kw)


def _chained_gemm(n: int = 64, simt_v: bool = False, reduce: bool = False, tail: str | None = None,
                  cp_async_v: bool = False) -> Kernel:
    """``O = f16(A B^T) V`` over two K/V blocks: the first gemm's accumulator cast to float16 in registers is
    the second's A operand (``gemm-to-wgmma-rs``, attention's ``P V``). ``n``: the first gemm's N (the second's
    K); ``simt_v``: V's tile written by a T.Parallel (generic stores); ``reduce``: a row sum of the output
    copied out (a user that keeps the fragment group in shared memory).
    ``tail``: a statement after the register-A gemm (``free``, ``serial``, ``acc`` as in
    :func:`_gemm`; ``operand`` rewrites the register A operand ``P``; both followed by a read of the stage, so
    that the stage release, which the lowering never moves a wait past, comes after them)."""
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((2 * n, 32), "float16"), V: T.Tensor((2 * n, 64), "float16"),
             O: T.Tensor((64, 64), "float32"), R: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            Q_s = T.alloc_shared((64, 32), "float16")
            K_s = T.alloc_shared((n, 32), "float16")
            V_s = T.alloc_shared((n, 64), "float16")
            if tail is not None:
                X_s = T.alloc_shared((64,), "float32")
            S = T.alloc_fragment((64, n), "float32")
            P = T.alloc_fragment((64, n), "float16")
            O_f = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], Q_s)
            T.clear(O_f)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(B[k * n, 0], K_s)
                if simt_v:
                    for i, j in T.Parallel(n, 64):
                        V_s[i, j] = V[k * n + i, j]
                else:
                    T.copy(V[k * n, 0], V_s, prefer_instruction="cp_async" if cp_async_v else None)
                T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
                T.copy(S, P)
                T.gemm(P, V_s, O_f)
                if tail == "free":
                    for i in T.Parallel(64):
                        X_s[i] = T.float32(k) + 1.0
                elif tail == "serial":
                    for t in T.serial(2):
                        X_s[t] = T.float32(k + t)
                elif tail == "acc":
                    for i, j in T.Parallel(64, 64):
                        O_f[i, j] = O_f[i, j] * 0.5
                elif tail == "operand":
                    T.copy(S, P)
                if tail in ("acc", "operand"):
                    for i in T.Parallel(64):
                        X_s[i] = T.float32(V_s[0, i])
            if reduce:
                r_f = T.alloc_fragment((64,), "float32")
                T.reduce_sum(O_f, r_f, dim=1)
                for i in T.Parallel(64):
                    R[i] = r_f[i]
                    r_f[i] = r_f[i] * 2.0
            T.copy(O_f, O[0, 0])

    return main.kernel


def _chained_tail(tail: str = "free", **kw) -> Kernel:
    return _chained_gemm(tail=tail, **kw)


def _peer_transposed() -> Kernel:
    """Flash-attention backward's combination of two accumulators into the next gemm's register A, with one peer
    read at ``[j, i]`` (an element another thread holds): ``fragment-peers-in-lockstep`` keeps the group in shared
    memory. A free statement after the first and the last gemm gives the deferred-wait rules a wait position."""
    @T.prim_func
    def main(Kt: T.Tensor((64, 64), "float16"), Q: T.Tensor((64, 64), "float16"), V: T.Tensor((64, 64), "float16"),
             dO: T.Tensor((64, 64), "float16"), D: T.Tensor((64,), "float32"), dK: T.Tensor((64, 64), "float32"),
             R: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            Ks = T.alloc_shared((64, 64), "float16")
            q = T.alloc_shared((64, 64), "float16")
            Vs = T.alloc_shared((64, 64), "float16")
            do = T.alloc_shared((64, 64), "float16")
            d_s = T.alloc_shared((64,), "float32")
            qkT = T.alloc_fragment((64, 64), "float32")
            dpT = T.alloc_fragment((64, 64), "float32")
            dsT = T.alloc_fragment((64, 64), "float16")
            dk = T.alloc_fragment((64, 64), "float32")
            T.copy(Kt, Ks)
            T.copy(Q, q)
            T.copy(V, Vs)
            T.copy(dO, do)
            T.clear(dk)
            T.gemm(Ks, q, qkT, transpose_B=True, clear_accum=True)
            T.copy(D, d_s)
            T.gemm(Vs, do, dpT, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(64, 64):
                dsT[i, j] = qkT[j, i] * (dpT[i, j] - d_s[j])
            T.gemm(dsT, q, dk)
            for i in T.Parallel(64):
                R[i] = d_s[i] * 2.0
            T.copy(dk, dK)

    return main.kernel


def _pp_attention(dim: int = 32, threads: int = 256, block_M: int = 128, causal: bool = False) -> Kernel:
    """examples/flash_attention.py at one block of ``block_M`` query rows and two key blocks of 64: with 256
    threads the two consumer warpgroups of the ping-pong (egtile.rules.pingpong)."""
    import flash_attention as FA

    return FA.flashattn.__wrapped__(1, 1, 128, dim, causal, block_M=block_M, block_N=64, threads=threads,
                                    num_stages=2).kernel


def _pp_one_gemm() -> Kernel:
    """A 128 x 64 GEMM over two K blocks with 256 threads: one T.gemm in the pipelined body, no pair of turns."""
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=256) as _bx:
            A_s = T.alloc_shared((128, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_f = T.alloc_fragment((128, 64), "float32")
            T.clear(C_f)
            for ko in T.Pipelined(2, num_stages=2):
                T.copy(A[0, ko * 32], A_s)
                T.copy(B[ko * 32, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[0, 0])

    return main.kernel


def _pp_shared_probabilities() -> Kernel:
    """tests/verify/kernels.flash_attention with two consumer warpgroups: its probabilities go through shared
    memory (T.copy(S, P_s)), a consumer write of shared memory inside the loop."""
    from verify.kernels import flash_attention

    return flash_attention(seq=128, dim=32, block_M=128, block_N=64, threads=256).kernel


def _pp_one_stage() -> Kernel:
    """Two gemms per block on one register-A operand, two consumer warpgroups, one pipeline stage (the shape of
    TileLang's fused-MoE example): a turn waits on block j+1's stage while the partner still holds block j's."""
    @T.prim_func
    def main(X: T.Tensor((128, 32), "float16"), W: T.Tensor((16, 32), "float16"), U: T.Tensor((16, 32), "float16"),
             O: T.Tensor((128, 16), "float32")):
        with T.Kernel(1, threads=256) as _bx:
            a = T.alloc_fragment((128, 16), "float16")
            w = T.alloc_shared((16, 16), "float16")
            u = T.alloc_shared((16, 16), "float16")
            g = T.alloc_fragment((128, 16), "float32")
            h = T.alloc_fragment((128, 16), "float32")
            T.clear(g)
            T.clear(h)
            for k in T.Pipelined(2, num_stages=1):
                T.copy(X[0:128, k * 16:(k + 1) * 16], a)
                T.copy(W[0:16, k * 16:(k + 1) * 16], w)
                T.gemm(a, w, g, transpose_B=True)
                T.copy(U[0:16, k * 16:(k + 1) * 16], u)
                T.gemm(a, u, h, transpose_B=True)
            for i, j in T.Parallel(128, 16):
                O[i, j] = g[i, j] * h[i, j]

    return main.kernel


def _ovpp_shared_probabilities() -> Kernel:
    """An attention-shaped loop of two consumer warpgroups (128 rows, 256 threads) whose probabilities go through
    shared memory (``T.copy(S, P_s)`` before ``P V``): a consumer write of shared memory inside a loop the rotation
    accepts (egtile.rules.overlap_pingpong, pingpong-consumers-write-registers)."""
    @T.prim_func
    def main(Q: T.Tensor((128, 16), "float16"), K: T.Tensor((32, 16), "float16"), V: T.Tensor((32, 16), "float16"),
             O: T.Tensor((128, 16), "float32")):
        with T.Kernel(1, threads=256) as _bx:
            Q_s = T.alloc_shared((128, 16), "float16")
            K_s = T.alloc_shared((16, 16), "float16")
            V_s = T.alloc_shared((16, 16), "float16")
            P_s = T.alloc_shared((128, 16), "float16")
            S = T.alloc_fragment((128, 16), "float32")
            acc = T.alloc_fragment((128, 16), "float32")
            T.copy(Q, Q_s)
            T.clear(acc)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(K[k * 16:(k + 1) * 16, :], K_s)
                T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(128, 16):
                    S[i, j] = S[i, j] * 0.5
                T.copy(S, P_s)
                T.copy(V[k * 16:(k + 1) * 16, :], V_s)
                T.gemm(P_s, V_s, acc)
            T.copy(acc, O)

    return main.kernel


def _ov_attention(stages: int = 2) -> Kernel:
    """examples/flash_attention.py at one block of 64 query rows and four key blocks of 16 (one consumer
    warpgroup): the intra-warpgroup overlap's form (egtile.rules.overlap)."""
    import flash_attention as FA

    return FA.flashattn.__wrapped__(1, 1, 64, 16, False, block_M=64, block_N=16, threads=128,
                                    num_stages=stages).kernel


def _ov_head_touches_o(first: bool = False) -> Kernel:
    """An attention-shaped loop whose head (before Q K^T) halves the output accumulator O: moving P V of the
    previous block past it changes O (egtile.rules.overlap, overlap-head-independent). ``first``: the halving
    right after Q K^T instead, the first statement after it (nothing left to overlap)."""
    @T.prim_func
    def main(Q: T.Tensor((64, 16), "float16"), K: T.Tensor((32, 16), "float16"), V: T.Tensor((32, 16), "float16"),
             O: T.Tensor((64, 16), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            Q_s = T.alloc_shared((64, 16), "float16")
            K_s = T.alloc_shared((16, 16), "float16")
            V_s = T.alloc_shared((16, 16), "float16")
            S = T.alloc_fragment((64, 16), "float32")
            P = T.alloc_fragment((64, 16), "float16")
            acc = T.alloc_fragment((64, 16), "float32")
            T.copy(Q, Q_s)
            T.clear(acc)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(K[k * 16:(k + 1) * 16, :], K_s)
                if not first:
                    for i, j in T.Parallel(64, 16):
                        acc[i, j] = acc[i, j] * 0.5
                T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
                if first:
                    for i, j in T.Parallel(64, 16):
                        acc[i, j] = acc[i, j] * 0.5
                for i, j in T.Parallel(64, 16):
                    S[i, j] = S[i, j] * 0.25
                T.copy(S, P)
                T.copy(V[k * 16:(k + 1) * 16, :], V_s)
                T.gemm(P, V_s, acc)
            T.copy(acc, O)

    return main.kernel


def _prologue(between: str = "", in_loop: str = "", after: str = "", width: int = 64, src: str = "global",
              prefer: str = "auto") -> Kernel:
    """A tile of A copied before a warp-specialized loop that multiplies it by NK tiles of B
    (egtile.rules.prologue_tma's form), with a planted access of the copy's destination between the copy and the
    loop (``between``), in the loop (``in_loop``) or after it (``after``); ``width``: A's columns (4 makes a
    row of 8 bytes, which no tensor map describes); ``src="shared"``: the copy moves A from a shared staging
    buffer (not a load)."""
    m, k_, n_, nk = 64, width, 64, 2

    @T.prim_func
    def main(A: T.Tensor((m, k_), "float16"), B: T.Tensor((nk * 16, n_), "float16"),
             C: T.Tensor((m, n_), "float32"), D: T.Tensor((m, k_), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            A_g = T.alloc_shared((m, k_), "float16")
            A_s = T.alloc_shared((m, k_), "float16")
            B_s = T.alloc_shared((16, n_), "float16")
            acc = T.alloc_fragment((m, n_), "float32")
            if src == "shared":
                T.copy(A, A_g)
                T.copy(A_g, A_s)
            else:
                T.copy(A, A_s, prefer_instruction=prefer)
            if between == "write":
                for i, j in T.Parallel(m, k_):
                    A_s[i, j] = A_s[i, j] * 0.5
            T.clear(acc)
            for k in T.Pipelined(nk, num_stages=2):
                T.copy(B[k * 16:(k + 1) * 16, 0:n_], B_s)
                for i, j in T.Parallel(m, n_):
                    acc[i, j] = acc[i, j] + T.cast(A_s[i, (j + k) % k_], "float32") * T.cast(B_s[k, j], "float32")
                if in_loop == "write":
                    for i, j in T.Parallel(m, k_):
                        A_s[i, j] = A_s[i, j] + 1.0
            if after == "read":
                T.copy(A_s, D)
            T.copy(acc, C)

    return main.kernel


def _greedy_register_rules() -> rules.RuleSet:
    from dataclasses import replace

    from egtile.rules import NumSpec

    greedy = NumSpec("ws.inc", "a plan that ignores the budget", lambda ctx, s: 256, scope="pipelined")
    ws = rules.default().rule("pipeline-warp-specialize")
    return rules.default().replace(replace(ws, oracles=(greedy,) + ws.oracles))


# ----------------------------------------------------------------------------------------------------
# checks


def _args(kernel: Kernel, seed: int = 0) -> list[torch.Tensor]:
    """Fresh random inputs for every parameter (small integers for gemm operands ``A``, ``B``, ``V``, so every
    accumulation, and the chained gemm's float16 cast of its first product, is exact); outputs are compared whole against the interpreter run from the same start."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for p in kernel.params:
        dt = getattr(torch, p.dtype)
        if dt.is_floating_point:
            v = torch.randint(-3, 4, p.shape, generator=g).to(dt) if p.name in ("A", "B", "V") else \
                torch.randn(p.shape, generator=g).to(dt)
        else:
            v = torch.randint(1, 9, p.shape, generator=g, dtype=dt)
        out.append(v)
    return out


def checkers(kernel: Kernel, sched) -> list[str]:
    return check(kernel, sched, _args(kernel), stop_early=True)


def _instructions(sched) -> set[str]:
    return {type(x).__name__ for x in swalk(sched.body)}


def excludes(*names: str) -> Callable[[Kernel, object], list[str]]:
    """The program asked for a copy without these instructions (``disable_tma``, ``prefer_instruction``)."""
    def f(kernel, sched):
        bad = _instructions(sched) & set(names)
        return [f"the schedule uses {sorted(bad)}, which the program's copy excluded"] if bad else []
    return f


def requires(name: str) -> Callable[[Kernel, object], list[str]]:
    """The program asked for this instruction (``prefer_instruction="tma"``)."""
    def f(kernel, sched):
        return [] if name in _instructions(sched) else [f"the program asked for {name}; the schedule has none"]
    return f


def checkers_and_nvrtc(kernel: Kernel, sched) -> list[str]:
    """The checkers, then the backend: CUDA C++ that NVRTC refuses (an instruction form the hardware has
    not, e.g. a cp.async of 2 bytes) is a loud failure at compile time, not a wrong result."""
    problems = checkers(kernel, sched)
    if problems:
        return problems
    from egtile.codegen import build

    try:
        build(sched)
    except Exception as e:  # noqa: BLE001 -- any refusal of the backend counts
        return [f"codegen/NVRTC: {type(e).__name__}: {str(e)[:200]}"]
    return []


@dataclass(frozen=True)
class Witness:
    """A kernel on which the mutant's schedule is caught by ``catch`` (default: the checkers). ``force``
    names rules removed from both rulesets and ``cheap`` constructor declarations whose cost is set to 0
    in both, so that extraction takes the mutant's alternative where the e-graph holds it; ``base``
    replaces the default ruleset (an oracle the condition guards against)."""

    make: Callable[[], Kernel]
    catch: Callable[[Kernel, object], list[str]] = checkers
    force: tuple[str, ...] = ()
    cheap: tuple[str, ...] = ()
    base: Callable[[], rules.RuleSet] | None = None

    def ruleset(self) -> rules.RuleSet:
        from dataclasses import replace

        from egtile.rules import static

        rs = self.base() if self.base else rules.default()
        for r in self.force:
            rs = rs.without(r)
        for d in self.cheap:
            rs = rs.replace_decision(replace(rs.decision(d), cost=static(0)))
        return rs


NO_WS = ("pipeline-warp-specialize",)
WS, SWP = ("ws",), ("swp",)
WITNESS: dict[tuple[str, str], Witness] = {
    ("pipeline-warp-specialize", "ws-num-stages"): Witness(_zero_stages, cheap=WS),
    ("pipeline-warp-specialize", "ws-no-producer-reads-consumer-write"): Witness(_producer_reads_consumer_write,
                                                                                 cheap=WS),
    ("pipeline-warp-specialize", "ws-no-consumer-writes-producer-buffer"): Witness(_consumer_writes_next_round,
                                                                                   cheap=WS),
    ("pipeline-warp-specialize", "ws-produced-written-before-read"): Witness(_read_previous_round, cheap=WS),
    ("pipeline-warp-specialize", "ws-produced-private"): Witness(_produced_read_after_loop, cheap=WS),
    ("pipeline-warp-specialize", "ws-whole-warpgroups"): Witness(lambda: _copy_consume(threads=96), cheap=WS),
    ("pipeline-warp-specialize", "ws-runs-once"): Witness(_pipeline_in_serial_loop, cheap=WS),
    # mbarrier operations under a branch on data: the verifier's L3 refuses the schedule (a loud compile error)
    ("pipeline-warp-specialize", "ws-outside-data-branch"): Witness(_pipeline_under_data_branch, cheap=WS),
    ("pipeline-software-pipeline", "ws-outside-data-branch"): Witness(_pipeline_under_data_branch, force=NO_WS,
                                                                      cheap=SWP),
    ("pipeline-warp-specialize", "register-budget"): Witness(lambda: _copy_consume(threads=512), cheap=WS,
                                                              base=_greedy_register_rules),
    ("pipeline-software-pipeline", "ws-has-producer"): Witness(_no_producer, force=NO_WS, cheap=SWP),
    ("pipeline-software-pipeline", "ws-no-consumer-writes-producer-buffer"): Witness(_consumer_writes_next_round,
                                                                                     force=NO_WS, cheap=SWP),
    ("pipeline-software-pipeline", "ws-produced-written-before-read"): Witness(_read_previous_round, force=NO_WS,
                                                                               cheap=SWP),
    ("pipeline-software-pipeline", "ws-produced-private"): Witness(_produced_read_after_loop, force=NO_WS,
                                                                   cheap=SWP),
    ("pipeline-software-pipeline", "ws-runs-once"): Witness(lambda: _pipeline_in_serial_loop(outer_in_copy=False),
                                                            force=NO_WS, cheap=SWP),
    ("copy-to-simt", "prefer-allows-simt"): Witness(lambda: _block_copy(prefer_instruction="tma"),
                                                    catch=requires("TmaLoad")),
    ("copy-to-tma", "tma-eligible"): Witness(lambda: _copy_consume(width=4), cheap=("tma_load",),
                                             catch=checkers_and_nvrtc),
    ("copy-to-tma", "prefer-allows-tma"): Witness(lambda: _copy_consume(disable_tma=True), cheap=("tma_load",),
                                                  catch=excludes("TmaLoad")),
    ("copy-to-cp-async", "cp-async-eligible"): Witness(lambda: _copy_consume(width=1, prefer_instruction="cp_async"),
                                                       cheap=("cp_async_load",), catch=checkers_and_nvrtc),
    ("copy-to-simt-producer", "prefer-allows-simt"): Witness(_tma_copy_beside_simt_producer,
                                                             cheap=("simt_load",), catch=requires("TmaLoad")),
    ("copy-via-tma-store", "prefer-allows-tma"): Witness(lambda: _fragment_store(disable_tma=True),
                                                         cheap=("copy_tma_store",), catch=excludes("TmaStore")),
    ("replicate-parallel", "effect-local"): Witness(_extern_address_of, cheap=("replicated",)),
    ("elect-scalar", "no-escaping-local-write"): Witness(_block_local, force=("replicate-scalar",)),
    ("gemm-to-wgmma", "fragment-users-admit-registers"): Witness(lambda: _gemm(reduce=True), cheap=("wgmma",)),
    ("gemm-to-wgmma", "wgmma-operands-async-proxy"): Witness(lambda: _gemm(cp_async_a=True), cheap=("wgmma",)),
    ("gemm-to-wgmma-rs", "fragment-users-admit-registers"): Witness(lambda: _chained_gemm(reduce=True),
                                                                    cheap=("wgmma_rs",)),
    ("gemm-to-wgmma-rs", "wgmma-operands-async-proxy"): Witness(lambda: _chained_gemm(cp_async_v=True),
                                                                cheap=("wgmma_rs",)),
    # the deferred wgmma wait (egtile.rules.mma_async): the synchronous rules' conditions on kernels with a
    # statement after the gemm (a wait position), and the rules' own
    ("gemm-to-wgmma-async", "fragment-users-admit-registers"): Witness(lambda: _gemm_tail(reduce=True),
                                                                       cheap=("wgmma_async",)),
    ("gemm-to-wgmma-async", "wgmma-operands-async-proxy"): Witness(lambda: _gemm_tail(cp_async_a=True),
                                                                   cheap=("wgmma_async",)),
    ("gemm-to-wgmma-async", "wgmma-async-accumulator-untouched"): Witness(lambda: _gemm_tail("acc")),
    ("gemm-to-wgmma-async", "wgmma-async-operands-unmodified"): Witness(lambda: _gemm_tail("operand")),
    ("gemm-to-wgmma-rs-async", "fragment-users-admit-registers"): Witness(lambda: _chained_tail(reduce=True),
                                                                          cheap=("wgmma_rs_async",)),
    ("gemm-to-wgmma-rs-async", "wgmma-operands-async-proxy"): Witness(lambda: _chained_tail(cp_async_v=True),
                                                                      cheap=("wgmma_rs_async",)),
    ("gemm-to-wgmma-rs-async", "wgmma-async-accumulator-untouched"): Witness(lambda: _chained_tail("acc")),
    ("gemm-to-wgmma-rs-async", "wgmma-async-operands-unmodified"): Witness(lambda: _chained_tail("operand")),
    # peers of a loop by layout (flash-attention backward): a peer read at another element
    ("gemm-to-wgmma", "fragment-peers-in-lockstep"): Witness(_peer_transposed, cheap=("wgmma",)),
    ("gemm-to-wgmma-rs", "fragment-peers-in-lockstep"): Witness(_peer_transposed, cheap=("wgmma_rs",)),
    ("gemm-to-wgmma-async", "fragment-peers-in-lockstep"): Witness(_peer_transposed, cheap=("wgmma_async",)),
    ("gemm-to-wgmma-rs-async", "fragment-peers-in-lockstep"): Witness(_peer_transposed, cheap=("wgmma_rs_async",)),
    # the consumer warpgroups' ping-pong (egtile.rules.pingpong), forced by a free ws_pingpong: one warpgroup
    # waits for a partner that does not exist; one gemm gives no pair of turns (the lowering refuses, loudly); a
    # shared write in the loop puts a consumer CTA barrier inside a turn (the verifier's model check: deadlock)
    ("pipeline-warp-specialize-pingpong", "pingpong-two-consumer-warpgroups"): Witness(
        lambda: _pp_attention(threads=128, block_M=64), cheap=("ws_pingpong",)),
    ("pipeline-warp-specialize-pingpong", "pingpong-two-gemm-turns"): Witness(_pp_one_gemm, cheap=("ws_pingpong",)),
    ("pipeline-warp-specialize-pingpong", "pingpong-consumers-write-registers"): Witness(
        _pp_shared_probabilities, cheap=("ws_pingpong",)),
    # one stage: a turn waits on the next block's stage while the partner holds the current one (a deadlock through
    # the producer: the verifier's model check with the mbarriers, and the simulator)
    ("pipeline-warp-specialize-pingpong", "pingpong-two-stages"): Witness(_pp_one_stage, cheap=("ws_pingpong",)),
    # the intra-warpgroup overlap (egtile.rules.overlap), forced by a free ws_overlap: one gemm gives no head and
    # tail (the lowering refuses, loudly); K = 8 gives no wgmma to rotate (refused loudly); one stage deadlocks
    # (the next block's stage is waited while the previous one is held); a head that halves O runs before the
    # previous block's P V and changes O (the simulator against the interpreter)
    ("pipeline-warp-specialize-overlap", "overlap-two-gemms"): Witness(_pp_one_gemm, cheap=("ws_overlap",)),
    ("pipeline-warp-specialize-overlap", "overlap-gemms-on-tensor-cores"): Witness(
        lambda: _pp_attention(dim=8), cheap=("ws_overlap",)),
    ("pipeline-warp-specialize-overlap", "overlap-two-stages"): Witness(
        lambda: _ov_attention(stages=1), cheap=("ws_overlap",)),
    ("pipeline-warp-specialize-overlap", "overlap-head-independent"): Witness(_ov_head_touches_o, cheap=("ws_overlap",)),
    # the rotation and the ping-pong together (egtile.rules.overlap_pingpong), forced by a free ws_overlap_pingpong:
    # one warpgroup waits for a partner that does not exist; a shared write in the loop puts a consumer CTA barrier
    # inside a turn (the verifier's model check: deadlock)
    ("pipeline-warp-specialize-overlap-pingpong", "pingpong-two-consumer-warpgroups"): Witness(
        lambda: _pp_attention(threads=128, block_M=64), cheap=("ws_overlap_pingpong",)),
    ("pipeline-warp-specialize-overlap-pingpong", "pingpong-consumers-write-registers"): Witness(
        _ovpp_shared_probabilities, cheap=("ws_overlap_pingpong",)),
    # the prologue copy issued by the producer's TMA (egtile.rules.prologue_tma): a write of the tile between the copy
    # and the loop runs before the load that now comes later (the verifier: no wait orders it; the simulator: the
    # interpreter's values differ); a consumer write of the tile in the loop loses the consumers' CTA barrier, since
    # the tile is now guarded by the load's mbarrier (the verifier and the simulator: a race between iterations)
    ("pipeline-prologue-tma", "prologue-copy-commutes"): Witness(lambda: _prologue(between="write")),
    ("pipeline-prologue-tma", "prologue-copy-read-only-in-loop"): Witness(lambda: _prologue(in_loop="write")),
}

_CP_ASYNC_OPERAND = ("egtile's checkers model a cp.async write as visible to the async proxy once the mbarrier wait "
                     "completes (no writer fence: the verifier's and the simulator's proxy model), so a wgmma reading a "
                     "cp.async-written operand passes them; the condition is conservative where the PTX ISA does not "
                     "say which proxy cp.async writes through, and stays until a GPU test settles it")
GAPS: dict[tuple[str, str], str] = {
    (rule, "wgmma-operands-async-proxy"): _CP_ASYNC_OPERAND
    for rule in ("gemm-to-wgmma", "gemm-to-wgmma-rs", "gemm-to-wgmma-async", "gemm-to-wgmma-rs-async")}
"""Witnessed conditions whose mutant is not caught yet, with why: each a known gap, listed so that the suite
says so instead of passing silently (the test fails once the gap closes, so the entry has to go)."""

COVERED: dict[tuple[str, str], str] = {
    # the same mutant is egtile.rules.MUTANTS["fission-across-local-flow"]; the random programs have no
    # load-and-compute T.Parallel (rules.MUTANT_GAPS), the fission tests catch it in the simulator
    ("parallel-fission", "fission-keeps-local-flow"):
        "tests/test_rules_fission.py::test_the_mutant_splits_a_local_value_from_its_reader_and_the_simulator_catches_it",
}

NOT_LEGALITY: dict[tuple[str, str], tuple[Callable[[], Kernel], str]] = {
    ("copy-to-cp-async", "prefer-cp-async"): (
        lambda: _copy_consume(width=64),
        "cp.async is issued only when the program asks for it (T.async_copy): a user's choice, not legality; an "
        "eligible copy moved by cp.async with its commit/arrive protocol is legal"),
    ("produce-simt", "not-a-copy"): (
        _copy_consume,
        "a T.copy produced by the SIMT producer rule directly instead of through copy-to-simt-producer: the same "
        "SIMT store loop, legal; the condition keeps the copy's instruction choice in one place (and its "
        "prefer_instruction honoured)"),
    ("pipeline-software-pipeline", "swp-num-stages"): (
        lambda: _copy_consume(stages=1),
        "with one stage the software pipeline issues no copy ahead of its iteration (a synchronous copy, wait and "
        "barrier per iteration): legal, only not faster; the condition keeps the alternative out as useless"),
    ("gemm-to-wgmma-async", "wgmma-async-straight-line"): (
        lambda: _gemm_tail("serial"),
        "the condition keeps the decided wait position where the lowering can put it; without it the position may "
        "lie past a loop, and egtile.lower.mma_wait stops at the first non-plain statement (the serial loop): the "
        "wait lands right after the issue, legal"),
    ("gemm-to-wgmma-rs-async", "wgmma-async-straight-line"): (
        lambda: _chained_tail("serial"),
        "as for gemm-to-wgmma-async: the lowering never moves the wait past a loop, branch or wgmma"),
    ("sink-wait", "no-write-of-guarded"): (
        _copy_consume,
        "a consumer never writes a guarded (produced) buffer once the loop is pipelined: "
        "ws-no-consumer-writes-producer-buffer refuses both pipelines for such a loop, so this condition is "
        "implied (defence in depth)"),
    # implied conditions (defence in depth): another condition, the definition of a producer or the rule's own
    # binding already keeps out every match the condition refuses, so the mutant's schedule is the rules' own
    ("pipeline-warp-specialize", "ws-producers-shared-from-global"): (
        _shared_source_producer,
        "implied by the definition of a producer (egtile.schedule.dataflow: a member that writes a non-shared or "
        "reads a non-global buffer is disqualified, so it is a consumer); the shared-to-shared copy of the witness "
        "is no producer, ws-has-producer refuses the loop and the mutant's schedule is the serial one"),
    ("pipeline-software-pipeline", "ws-producers-shared-from-global"): (
        _shared_source_producer, "as for warp specialization: implied by the definition of a producer"),
    ("pipeline-software-pipeline", "ws-no-producer-reads-consumer-write"): (
        _producer_reads_consumer_write,
        "implied: swp-async-producers makes every producer a global -> shared T.copy, whose only read is its "
        "global source, and swp-producer-independent refuses a source the kernel writes (through a pointer "
        "included: kernel_write(ANY)), which a consumer's write is"),
    ("pipeline-software-pipeline", "swp-producer-independent"): (
        lambda: _source_written_in_kernel(threads=96),
        "conservative given the other conditions: a source written inside the loop is refused by "
        "ws-no-producer-reads-consumer-write, one written before the loop is ordered by the CTA barrier the "
        "lowering places (the TMA load's global source is tracked, issue 15's fix), one written after it is "
        "after every issue; an address variable other than the loop variable or a block index is an enclosing "
        "loop's (ws-runs-once); an address loaded from memory the kernel never writes is the same value early. "
        "Warp specialization issues as early with no such condition. The witness has 96 threads, so the "
        "mutant's schedule is the software pipeline itself, and it is legal"),
    ("pipeline-warp-specialize", "ws-producer-wait-mode"): (
        _simt_producer,
        "not a refusal: the condition's query is empty, so it can reject no match; it only carries the wait "
        "mode's derivation (the table the rule's mode binding reads). Its mutant cannot admit a schedule the rules "
        "refuse; on the SIMT-producer witness it schedules the kernel as the rules do, and legally"),
    ("pipeline-software-pipeline", "swp-async-producers"): (
        _simt_producer,
        "implied by the copy rules' issue contexts: the software pipeline issues its producers in context "
        "'prefetch', where only copy-to-tma (TMA eligible, prefer auto/tma) and copy-to-cp-async (cp.async "
        "eligible and asked for) match; the SIMT producer rules match context 'warpgroup' only, so without the "
        "condition the swp node of a SIMT producer has no extractable issue term (extraction does not take it "
        "even at swp cost 0) and the mutant's schedule is the rules' own"),
    ("gemm-to-wgmma", "wgmma-eligible"): (
        lambda: _gemm(bk=8),
        "implied by the binding: wgmma_option(sid, split, swa, swb) is filled from the wgmma-options mask, which "
        "is 0 for an ineligible gemm (K = 8 on the witness), so the mutant has no wgmma alternative for it"),
    ("gemm-to-wgmma", "wgmma-operand-types"): (
        lambda: _gemm(dtype="float32"),
        "implied by the binding: wgmma_options requires the operand types (its mask is 0 for float32 x float32 on "
        "the witness), so wgmma_option(sid, split, swa, swb) has no row and the mutant has no wgmma alternative"),
    ("gemm-to-wgmma", "wgmma-8bit-k-major"): (
        lambda: _gemm(dtype="float8_e4m3fn"),
        "implied by the binding: wgmma_options requires 8-bit operands K-major (its mask is 0 for the witness's fp8 "
        "B given K x N), so the mutant has no wgmma alternative; an MN-major 8-bit read is what the verifier's and "
        "the simulator's instruction-form checks catch (mutant wgmma-b-major-flipped, tests/test_rules_mma_fp8.py)"),
    ("gemm-to-wgmma-async", "wgmma-operand-types"): (
        lambda: _gemm_tail(dtype="float32"),
        "implied by the binding, as for gemm-to-wgmma: wgmma_option holds only the oracle's legal options"),
    ("gemm-to-wgmma-async", "wgmma-8bit-k-major"): (
        lambda: _gemm_tail(dtype="float8_e4m3fn"),
        "implied by the binding, as for gemm-to-wgmma: wgmma_option holds only the oracle's legal options"),
    ("gemm-to-wgmma-rs", "wgmma-rs-eligible"): (
        lambda: _chained_gemm(n=8),
        "implied by the binding: wgmma_rs_option(sid, split, swb) is filled from the same oracle's legal options "
        "only, so an ineligible gemm (K = 8 on the witness) has no register-A alternative in the mutant either"),
    ("gemm-to-wgmma-async", "wgmma-eligible"): (
        lambda: _gemm_tail(bk=8),
        "implied by the binding, as for gemm-to-wgmma: wgmma_option(sid, split, swa, swb) holds only the oracle's "
        "legal options, so an ineligible gemm (K = 8 on the witness) has no deferred-wait alternative either"),
    ("gemm-to-wgmma-rs-async", "wgmma-rs-eligible"): (
        lambda: _chained_tail(n=8),
        "implied by the binding, as for gemm-to-wgmma-rs: wgmma_rs_option(sid, split, swb) holds only the "
        "oracle's legal options"),
    ("copy-via-tma-store", "tma-store-eligible"): (
        lambda: _store_copy(width=2),
        "implied by the binding: staging_option(sid, layout) is filled from the tma-store-layouts mask, which "
        "egtile.rules.epilogue.tma_store_eligibility makes 0 (no option) for every copy the fact refuses"),
    ("pipeline-warp-specialize-pingpong", "pingpong-gemms-on-tensor-cores"): (
        lambda: _pp_attention(dim=8),
        "conservative (defence in depth): it keeps the handshake to bodies whose gemms are wgmma groups on register "
        "accumulators, where the two warpgroups share no memory inside the loop. On the SIMT witness (K = 8: no wgmma, "
        "fragments in shared memory) the forced ping-pong passes the verifier's model check and the simulator (the "
        "CTA barriers the fragments need fall outside the turns); a barrier inside a turn is "
        "pingpong-consumers-write-registers' witness, which deadlocks and is caught"),
    ("pipeline-warp-specialize-pingpong", "pingpong-barrier-ids-free"): (
        lambda: _pp_attention(dim=16),  # the smallest head dim of a wgmma schedule: the simulator's cost
        "holds for every kernel (its oracle compares the constant ids 3 and 4 with the ids egtile's CTA barriers use: "
        "0, and 1 and 2 inside the roles), so its mutant schedules every kernel as the rules do; a colliding id is "
        "what tests/test_rules_pingpong.py's planted wrong-id handshake and the verifier's id check catch"),
    ("pipeline-warp-specialize-overlap-pingpong", "pingpong-barrier-ids-free"): (
        _copy_consume,  # any kernel: the condition is constant (the small copy loop keeps the check cheap)
        "as for pipeline-warp-specialize-pingpong: the oracle compares the constant ids 3 and 4 with the ids egtile's "
        "CTA barriers use, so it holds for every kernel; a colliding or wrong id is what "
        "tests/test_rules_overlap_pingpong.py's planted wrong-id handshake and the verifier's id check catch"),
    ("pipeline-warp-specialize-overlap", "overlap-softmax-independent"): (
        lambda: _ov_head_touches_o(first=True),
        "a profitability condition: it refuses a body where the statement right after the first gemm already touches "
        "the second gemm's accumulator or register A (nothing would run under the second gemm) or where a loop or "
        "branch comes first. The rotation is legal either way: the lowering puts wait_group 1 and wait_group 0 "
        "back to back in the body's own list, and every statement that touches the second gemm's operands still "
        "follows the wait_group 0"),
    ("pipeline-warp-specialize-pingpong-carry", "carry-head-selects-decided"): (
        lambda: _pp_attention(dim=16, causal=True),
        "a profitability condition (egtile.rules.pingpong_carry): where the causal mask is versioned into a branch, "
        "ptxas serializes every wgmma (C7518), but the carried wait is legal; "
        "tests/test_rules_pingpong_carry.py forces the carry on the causal kernel with this condition dropped and "
        "checks the verifier and the simulator against float64"),
    ("pipeline-prologue-tma", "prologue-copy-unused-after-loop"): (
        lambda: _prologue(after="read"),
        "conservative (defence in depth): a statement after the loop runs after the role split's closing CTA barrier, "
        "which every consumer thread reaches after its wait on the load's mbarrier (an acquire), so the producer "
        "threads see the tile too; the condition keeps the load's only readers the consumers, whose wait the "
        "verifier checks directly"),
    ("pipeline-prologue-tma", "prologue-copy-global-to-shared"): (
        lambda: _prologue(src="shared"),
        "implied by prologue-copy-tma-eligible: egtile.analysis.tma_eligibility describes only global -> shared "
        "copies, so the witness's shared -> shared copy is refused by it and the mutant schedules it as the rules do"),
    ("pipeline-prologue-tma", "prologue-copy-tma-eligible"): (
        lambda: _prologue(width=4),
        "implied by the binding: the load is issue(copy, 'elected'), whose only instruction is copy-to-tma, guarded by "
        "the same tma-eligible oracle; without a tensor map (8-byte rows on the witness) the issue term has no "
        "extractable alternative, so ws_prologue is not extracted and the mutant's schedule is the rules' own"),
    ("pipeline-prologue-tma", "prologue-copy-allows-tma"): (
        lambda: _prologue(prefer="simt"),
        "a user preference, and implied by the binding: copy-to-tma, the issue term's only instruction, requires "
        "prefer-allows-tma itself, so a copy that asks for SIMT gets no TMA load from the mutant either"),
    ("vectorize-parallel", "no-escaping-local-write"): (
        _vector_local_escape,
        "implied by the vector-width oracle (egtile.analysis.vector_width): every store of a vectorized nest "
        "mentions the innermost variable, and an access of a local buffer that mentions it makes the width 1 (no "
        "binding), so a vectorized body never writes a local buffer"),
}


# ----------------------------------------------------------------------------------------------------
# tests


def test_every_named_condition_has_a_mutant_test():
    """Fails when a rule of the default ruleset has a named condition without a verdict here (a rule added
    or a condition gained: give it a witness kernel, or run ``python tests/soundness/conditions.py``)."""
    listed = HUNTED | set(WITNESS) | set(NOT_LEGALITY) | set(COVERED)
    missing = [k for k in KEYS if k not in listed]
    assert not missing, ("named conditions without a mutant test (add a WITNESS, HUNTED after "
                         f"tests/soundness/conditions.py catches it, or a NOT_LEGALITY argument): {missing}")
    stale = sorted(listed - set(KEYS))
    assert not stale, f"verdicts for conditions the default ruleset no longer has: {stale}"
    assert not (HUNTED & set(WITNESS)) and not (set(WITNESS) & set(NOT_LEGALITY))


@pytest.mark.parametrize("key", sorted(COVERED), ids=lambda k: f"{k[0]}.{k[1]}")
def test_a_covered_condition_names_a_test_that_uses_its_mutant(key):
    from pathlib import Path

    path, name = COVERED[key].split("::")
    src = (Path(__file__).parents[2] / path).read_text()
    assert f"def {name}(" in src
    mutant = next((m for m in rules.MUTANTS if m in src), None)
    assert mutant is not None and key in _mutant_conditions(mutant), (key, mutant)


def _mutant_conditions(name: str) -> set[tuple[str, str]]:
    """The conditions egtile.rules.mutant(name) drops (rules of the builtin set that lost a condition)."""
    m, b = rules.mutant(name), rules.builtin()
    return {(r.name, c.name) for r in b if r.name in m
            for c in r.conditions if c.name not in {x.name for x in m.rule(r.name).conditions}}


def _different(a, b) -> bool:
    return a is None or (a.body, a.buffers, a.barriers, a.threads) != (b.body, b.buffers, b.barriers, b.threads)


def _witness_outcome(key, check_reference: bool = True) -> str | None:
    """``None`` when the mutant is caught on its witness, else why not. ``check_reference``: also check
    that the rules' own schedule of the witness is clean (long runs; the cost of a CI run is there)."""
    w = WITNESS[key]
    kernel = w.make()
    base = w.ruleset()
    sched, err = _try_schedule(kernel, base.without_condition(*key))
    if err is not None:
        return None  # the mutant's compile fails loudly (the lowering refuses what the condition kept out)
    ref, ref_err = _try_schedule(kernel, base)
    assert ref_err is None, ref_err
    if ref is not None and check_reference:
        assert not w.catch(kernel, ref), f"{key}: the witness's legal schedule is not clean"
    if sched is None:
        # where the rules compile the witness and the mutant refuses it, the refusal is loud
        return None if ref is not None else "neither the rules nor the mutant schedule the witness"
    if ref is not None and not _different(ref, sched):
        return "the mutant schedules the witness as the rules do (another condition or the cost keeps it out)"
    try:
        problems = w.catch(kernel, sched)
    except Exception:  # noqa: BLE001 -- a checker that cannot even run the schedule (malformed) caught it
        return None
    return None if problems else "the mutant's schedule of the witness passes every check"


@pytest.mark.parametrize("key", [k for k in KEYS if k in WITNESS], ids=lambda k: f"{k[0]}.{k[1]}")
def test_condition_mutant_is_caught_on_its_witness(key, soundness_long):
    if key in GAPS and not soundness_long:
        pytest.xfail(f"known gap (checked in --soundness-long runs): {GAPS[key]}")
    why = _witness_outcome(key, check_reference=soundness_long)
    if key in GAPS:
        if why is None:
            pytest.fail(f"{key} is caught on its witness now: remove it from GAPS")
        pytest.xfail(f"known gap: {GAPS[key]} ({why})")
    assert why is None, f"{key}: {why}"


@pytest.mark.parametrize("key", [k for k in KEYS if k in NOT_LEGALITY], ids=lambda k: f"{k[0]}.{k[1]}")
def test_a_preference_condition_mutant_is_legal(key):
    make, _why = NOT_LEGALITY[key]
    kernel = make()
    sched, err = _try_schedule(kernel, condition_mutant(*key))
    assert err is None and sched is not None
    assert not checkers(kernel, sched)


@cache
def _hunt_programs() -> tuple:
    return tuple(_examples(programs(), HUNT_BUDGET))


@pytest.mark.parametrize("key", [k for k in KEYS if k in HUNTED], ids=lambda k: f"{k[0]}.{k[1]}")
def test_condition_mutant_is_caught_on_generated_programs(key):
    caught = hunt(_hunt_programs(), {key: condition_mutant(*key)},
                  check=lambda k, s, a: check(k, s, a, stop_early=True))
    assert key in caught, f"{key}: no problem found in {HUNT_BUDGET} generated programs"
