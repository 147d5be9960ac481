"""Serial and pipelined loops whose trip count is read from tensor data (varlen attention's
``T.Pipelined(T.ceildiv(cu[b + 1] - cu[b], block))``): the verifier's representative counts
(``egtile.verifier.tripcount``), the simulator against torch, codegen's bound read once, and planted mutants of
the schedule that the verifier must catch (a wrong phase that only shows after a full period, producer and
consumer disagreeing on the count).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import UnsupportedError
from egtile.ir.kernel import BinOp, Const
from egtile.ir.scheduled import Role, RoleSplit, SeqLoop, Wait
from egtile.verifier import verify
from egtile.verifier.tripcount import representative_counts, runtime_loops
from protocol_kernels import tile_ring

BATCH, BLK, DIM, STAGES = 4, 16, 32, 2
ROWS = 160  # the segments fill a prefix of X (at most 157 rows); one kernel serves every draw


def segmented_gram(batch: int, n_rows: int, blk: int = BLK, stages: int = STAGES):
    """``Y[b] = X_b^T X_b`` over the rows of segment ``b`` (``cu[b]:cu[b+1]``) rounded up to whole blocks of
    ``blk`` rows (rows past the tensor read as zero), with a pipelined loop whose trip count is read from ``cu``."""

    @T.prim_func
    def gram(X: T.Tensor((n_rows, DIM), "float16"), cu: T.Tensor((batch + 1,), "int32"),
             Y: T.Tensor((batch, DIM, DIM), "float32")):
        with T.Kernel(batch, threads=128) as b:
            acc = T.alloc_fragment((DIM, DIM), "float32")
            xs = T.alloc_shared((blk, DIM), "float16")
            T.clear(acc)
            start = cu[b]
            for k in T.Pipelined(T.ceildiv(cu[b + 1] - start, blk), num_stages=stages):
                T.copy(X[start + k * blk:start + (k + 1) * blk, :], xs)
                T.gemm(xs, xs, acc, transpose_A=True)
            T.copy(acc, Y[b, :, :])

    return gram


def _reference(X: torch.Tensor, cu: torch.Tensor, blk: int = BLK) -> torch.Tensor:
    out = []
    for b in range(len(cu) - 1):
        a, n = int(cu[b]), int(cu[b + 1]) - int(cu[b])
        rows = X[a:a + -(-n // blk) * blk].double()
        out.append(rows.T @ rows)
    return torch.stack(out)


def _lengths(gen: torch.Generator) -> torch.Tensor:
    # one empty segment, one shorter than a block, one not a multiple of it, one over a full period (2 S blocks)
    lens = [0, int(torch.randint(1, BLK, (1,), generator=gen)), BLK + int(torch.randint(1, BLK, (1,), generator=gen)),
            2 * STAGES * BLK + int(torch.randint(1, 3 * BLK, (1,), generator=gen))]
    perm = torch.randperm(BATCH, generator=gen)
    return torch.tensor(lens, dtype=torch.int32)[perm]


def _inputs(seed: int):
    gen = torch.Generator().manual_seed(seed)
    lens = _lengths(gen)
    cu = torch.zeros(BATCH + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(lens, 0)
    X = torch.randn(ROWS, DIM, generator=gen).half()
    return X, cu


@pytest.fixture(scope="module")
def sim_kernel():
    # compiled once (scheduled, verified) for the module: the other tests read its schedule
    return egtile.compile(segmented_gram(BATCH, ROWS), target="sim")


@pytest.fixture(scope="module")
def schedule(sim_kernel):
    return sim_kernel.scheduled


def test_the_schedule_is_verified_at_representative_counts(schedule):
    loops = runtime_loops(schedule)
    assert len(loops) == 2 and {r.loop.sid for r in loops} == {loops[0].loop.sid}  # producer's and consumer's copy
    assert representative_counts(schedule) == (0, 1, 2, 3, 4, 5, 19)
    assert verify(schedule) == []


def test_sim_matches_torch_with_empty_and_ragged_segments(sim_kernel):
    k = sim_kernel
    for seed in (1,):  # one draw holds every kind of length (empty, short, ragged, over a period)
        X, cu = _inputs(seed)
        Y = torch.full((BATCH, DIM, DIM), float("nan"))
        k(X, cu, Y)
        torch.testing.assert_close(Y.double(), _reference(X, cu), rtol=1e-4, atol=1e-3)


def _consumer_waits(stmts, fn):
    """``stmts`` with ``fn`` applied to every ``Wait`` of the consumer role."""
    out = []
    for s in stmts:
        if isinstance(s, RoleSplit):
            roles = tuple(dataclasses.replace(r, body=_map(r.body, fn)) if r.name == "consumer" else r for r in s.roles)
            out.append(dataclasses.replace(s, roles=roles))
        else:
            out.append(s)
    return tuple(out)


def _map(stmts, fn):
    out = []
    for s in stmts:
        if isinstance(s, Wait):
            out.append(fn(s))
        elif isinstance(s, SeqLoop):
            out.append(dataclasses.replace(s, body=_map(s.body, fn)))
        else:
            out.append(s)
    return tuple(out)


def test_a_wrong_phase_after_one_period_is_caught(schedule):
    """The consumer waits for parity ``(k / 2S) & 1`` instead of ``(k / S) & 1``: right for the first ``S``
    iterations, a wait on an already completed phase from iteration ``S`` on (a read before the TMA lands).
    Only counts above ``S`` show it."""

    def slow_parity(w: Wait) -> Wait:
        assert isinstance(w.parity, BinOp) and w.parity.op == "&"
        div = w.parity.a
        assert isinstance(div, BinOp) and div.b == Const(STAGES, div.b.dtype)
        return dataclasses.replace(w, parity=dataclasses.replace(w.parity, a=dataclasses.replace(
            div, b=Const(2 * STAGES, div.b.dtype))))

    mutant = dataclasses.replace(schedule, body=_consumer_waits(schedule.body, slow_parity))
    found = verify(mutant)
    assert found, "a wrong mbarrier phase went unnoticed"
    # first seen at a count past S (counts 0 .. S run no wait on a wrong parity)
    assert all(f"running {n} iteration(s)" not in v.message for v in found for n in range(STAGES + 1)), found
    assert any(v.property in ("L1", "L2") and "iteration(s)" in v.message for v in found), found


def test_producer_and_consumer_must_agree_on_the_count(schedule):
    def longer(stmts):
        out = []
        for s in stmts:
            if isinstance(s, RoleSplit):
                roles = tuple(dataclasses.replace(r, body=tuple(
                    dataclasses.replace(x, stop=BinOp("+", x.stop, Const(1, "int32"))) if isinstance(x, SeqLoop)
                    else x for x in r.body)) if r.name == "producer" else r for r in s.roles)
                out.append(dataclasses.replace(s, roles=roles))
            else:
                out.append(s)
        return tuple(out)

    mutant = dataclasses.replace(schedule, body=longer(schedule.body))
    found = verify(mutant)
    assert any(v.property == "L7" and "not agree on the trip count" in v.message for v in found)


def test_codegen_reads_the_bound_once(schedule):
    from egtile.codegen import generate

    src = generate(schedule).source
    assert src.count("const int eg_stop_k = ") == 2  # one per role
    assert src.count("k < eg_stop_k;") == 2


def _shifted():
    @T.prim_func
    def shifted(X: T.Tensor((64,), "float32"), cu: T.Tensor((2,), "int32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32) as _b:
            s = T.alloc_shared((64,), "float32")
            for i in T.Parallel(64):
                s[i] = 0.0
            for k in T.serial(cu[0], cu[1]):
                s[k] = s[k] + 2.0 * X[k]
            for i in T.Parallel(64):
                Y[i] = s[i]

    return shifted


@pytest.mark.parametrize("target", ["sim", "interp"])
def test_a_loop_whose_start_and_stop_are_read_from_data(target):
    """``T.serial(cu[0], cu[1])``: a loop over ``max(cu[1] - cu[0], 0)`` iterations whose handle is
    ``cu[0] + k`` (egtile.language.loop); a stop below the start runs nothing, as Python's range."""
    k = egtile.compile(_shifted(), target=target)
    gen = torch.Generator().manual_seed(7)
    for a, b in ((5, 40), (30, 30), (41, 6), (0, 64), (63, 64)):
        X = torch.randn(64, generator=gen)
        Y = torch.full((64,), float("nan"))
        k(X, torch.tensor([a, b], dtype=torch.int32), Y)
        ref = torch.zeros(64, dtype=torch.float64)
        ref[a:b] = 2.0 * X[a:b].double()
        torch.testing.assert_close(Y.double(), ref, rtol=0, atol=0)


@pytest.mark.parametrize("target", ["sim", "interp"])
def test_the_start_is_the_value_read_when_the_loop_starts(target):
    """The body overwrites the shared element the start was read from: the handle keeps the start read at the
    loop's entry (a let-binding), as Python's range and TileLang's For."""

    @T.prim_func
    def once(X: T.Tensor((64,), "float32"), cu: T.Tensor((2,), "int32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32) as _b:
            s = T.alloc_shared((64,), "float32")
            bounds = T.alloc_shared((2,), "int32")
            for i in T.Parallel(64):
                s[i] = 0.0
            for i in T.Parallel(2):
                bounds[i] = cu[i]
            for k in T.serial(bounds[0], bounds[1]):
                if k == bounds[0]:
                    bounds[0] = 0
                s[k] = s[k] + X[k]
            for i in T.Parallel(64):
                Y[i] = s[i]

    k = egtile.compile(once, target=target)
    gen = torch.Generator().manual_seed(9)
    for a, b in ((5, 40), (30, 31)):
        X = torch.randn(64, generator=gen)
        Y = torch.full((64,), float("nan"))
        k(X, torch.tensor([a, b], dtype=torch.int32), Y)
        ref = torch.zeros(64)
        ref[a:b] = X[a:b]
        torch.testing.assert_close(Y, ref, rtol=0, atol=0)


def test_a_start_read_from_data_is_a_runtime_trip_count_from_zero():
    loops = runtime_loops(egtile.compile(_shifted(), target="sim").scheduled)
    assert len(loops) == 1
    loop = loops[0].loop
    assert loop.start == Const(0, "int32")  # the IR's start is known when the block runs
    assert "max" in repr(loop.stop)  # max(cu[1] - cu[0], 0): never a negative count


def _causal_segments(batch: int, n_rows: int, blk: int = BLK, stages: int = STAGES):
    """``Y[b] = sum of X_blk^T X_blk`` over the blocks ``k`` of segment ``b`` from ``min(first[b], n_b)`` to
    ``n_b = ceil(len_b / blk)``: varlen attention's causal backward loop, whose start and stop are both read from
    tensor data (``first``, ``cu``), pipelined."""

    @T.prim_func
    def causal(X: T.Tensor((n_rows, DIM), "float16"), cu: T.Tensor((batch + 1,), "int32"),
               first: T.Tensor((batch,), "int32"), Y: T.Tensor((batch, DIM, DIM), "float32")):
        with T.Kernel(batch, threads=128) as b:
            acc = T.alloc_fragment((DIM, DIM), "float32")
            xs = T.alloc_shared((blk, DIM), "float16")
            T.clear(acc)
            start = cu[b]
            n_blocks = T.ceildiv(cu[b + 1] - start, blk)
            loop_st = T.min(first[b], n_blocks)
            for k in T.Pipelined(loop_st, n_blocks, num_stages=stages):
                T.copy(X[start + k * blk:start + (k + 1) * blk, :], xs)
                T.gemm(xs, xs, acc, transpose_A=True)
            T.copy(acc, Y[b, :, :])

    return causal


def _causal_reference(X: torch.Tensor, cu: torch.Tensor, first: torch.Tensor, blk: int = BLK) -> torch.Tensor:
    out = []
    for b in range(len(cu) - 1):
        a, n = int(cu[b]), int(cu[b + 1]) - int(cu[b])
        nb = -(-n // blk)
        rows = X[a + min(int(first[b]), nb) * blk:a + nb * blk].double()
        out.append(rows.T @ rows)
    return torch.stack(out)


def _causal_inputs(seed: int):
    X, cu = _inputs(seed)
    gen = torch.Generator().manual_seed(seed + 100)
    nb = [-(-(int(cu[b + 1]) - int(cu[b])) // BLK) for b in range(BATCH)]
    # each case once, on segments drawn at random: from block 0, from a middle block, from past its last block
    # (no iteration), from its last block
    choice = torch.randperm(4, generator=gen).tolist()
    first = [[0, (n + 1) // 2, n + 3, max(n - 1, 0)][c] for n, c in zip(nb, choice)]
    return X, cu, torch.tensor(first, dtype=torch.int32)


@pytest.mark.parametrize("target", ["sim", "interp"])
def test_a_pipelined_loop_from_a_start_read_from_data(target):
    k = egtile.compile(_causal_segments(BATCH, ROWS), target=target)
    for seed in (11, 12):
        X, cu, first = _causal_inputs(seed)
        Y = torch.full((BATCH, DIM, DIM), float("nan"))
        k(X, cu, first, Y)
        torch.testing.assert_close(Y.double(), _causal_reference(X, cu, first), rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_a_pipelined_loop_from_a_start_read_from_data_on_cuda():
    k = egtile.compile(_causal_segments(BATCH, ROWS), target="cuda")
    for seed in (13, 14):
        X, cu, first = _causal_inputs(seed)
        Y = torch.full((BATCH, DIM, DIM), float("nan"), device="cuda")
        k(X.cuda(), cu.cuda(), first.cuda(), Y)
        torch.testing.assert_close(Y.double().cpu(), _causal_reference(X, cu, first), rtol=1e-4, atol=1e-3)


def test_the_causal_schedule_is_verified_at_representative_counts():
    sched = egtile.compile(_causal_segments(BATCH, ROWS), target="sim").scheduled
    loops = runtime_loops(sched)
    assert loops and all(r.loop.start == Const(0, "int32") for r in loops)
    assert verify(sched) == []


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [3, 4])
def test_cuda_matches_torch_with_empty_and_ragged_segments(seed):
    X, cu = _inputs(seed)
    k = egtile.compile(segmented_gram(BATCH, ROWS), target="cuda")
    Y = torch.full((BATCH, DIM, DIM), float("nan"), device="cuda")
    k(X.cuda(), cu.cuda(), Y)
    torch.testing.assert_close(Y.double().cpu(), _reference(X, cu), rtol=1e-4, atol=1e-3)


def test_a_bound_read_from_a_tensor_the_kernel_writes_is_not_uniform(schedule):
    """Another block may change a written tensor between two threads' reads of it: the count may differ."""
    from egtile.ir.kernel import Load
    from egtile.verifier.tripcount import check_runtime_loops

    y = schedule.kernel.buffer("Y")

    def reread(e):
        match e:
            case Load(buffer=b) if b.name == "cu":
                return Load(y, (Const(0, "int32"), Const(0, "int32"), Const(0, "int32")))
            case BinOp():
                return dataclasses.replace(e, a=reread(e.a), b=reread(e.b))
        return e

    def walk(stmts):
        out = []
        for s in stmts:
            if isinstance(s, SeqLoop):
                s = dataclasses.replace(s, stop=reread(s.stop), body=walk(s.body))
            elif isinstance(s, RoleSplit):
                s = dataclasses.replace(s, roles=tuple(dataclasses.replace(r, body=walk(r.body)) for r in s.roles))
            out.append(s)
        return tuple(out)

    found = check_runtime_loops(dataclasses.replace(schedule, body=walk(schedule.body)))
    assert found and all(v.property == "L7" for v in found)
    assert any("may differ between the threads" in v.message and "Y, which the kernel writes" in v.message
               for v in found), found


def _persistent_gemm(M: int, N: int, K: int, blocks: int, bm: int = 64, bn: int = 64, bk: int = 32):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(blocks, threads=128) as bid:
            As = T.alloc_shared((bm, bk), "float16")
            Bs = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            for bx, by in T.Persistent([T.ceildiv(M, bm), T.ceildiv(N, bn)], blocks, bid):
                T.clear(acc)
                for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                    T.copy(A[bx * bm, k * bk], As)
                    T.copy(B[k * bk, by * bn], Bs)
                    T.gemm(As, Bs, acc)
                T.copy(acc, C[bx * bm, by * bn])

    return gemm


def test_persistent_loop_computes_every_tile_once():
    """Three tiles over two blocks: the second wave is partial (one block's tile is past the grid). On the
    interpreter (the construct is the front end's serial loop and guard; the scheduled path runs in the GPU test
    and in the port of TileLang's persistent GEMM)."""
    gen = torch.Generator().manual_seed(5)
    A = torch.randn(192, 64, generator=gen).half()
    B = torch.randn(64, 64, generator=gen).half()
    C = torch.full((192, 64), float("nan"))
    egtile.compile(_persistent_gemm(192, 64, 64, 2), target="interp")(A, B, C)
    torch.testing.assert_close(C.double(), A.double() @ B.double(), rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_persistent_loop_on_cuda():
    gen = torch.Generator().manual_seed(6)
    A = torch.randn(320, 128, generator=gen).half()
    B = torch.randn(128, 192, generator=gen).half()
    C = torch.full((320, 192), float("nan"), device="cuda")
    egtile.compile(_persistent_gemm(320, 192, 128, 4), target="cuda")(A.cuda(), B.cuda(), C)
    torch.testing.assert_close(C.double().cpu(), A.double() @ B.double(), rtol=1e-4, atol=1e-3)


def test_tile_atomic_add_into_a_region_past_the_tensor_edge():
    """``T.atomic_add(D[s:s + 16, h, :], tile)`` at a start read from data: rows past the tensor are skipped."""

    @T.prim_func
    def scatter(X: T.Tensor((16, 8), "float32"), cu: T.Tensor((1,), "int32"), D: T.Tensor((40, 2, 8), "float32")):
        with T.Kernel(2, threads=128) as h:
            t = T.alloc_fragment((16, 8), "float32")
            T.copy(X, t)
            s = cu[0]
            T.atomic_add(D[s:s + 16, h, :], t)

    gen = torch.Generator().manual_seed(7)
    k = egtile.compile(scatter, target="interp")
    for start in (3, 31):  # inside; 7 rows past the edge
        X = torch.randn(16, 8, generator=gen)
        D0 = torch.randn(40, 2, 8, generator=gen)
        D = D0.clone()
        k(X, torch.tensor([start], dtype=torch.int32), D)
        want = D0.clone()
        n = min(16, 40 - start)
        want[start:start + n] += X[:n, None, :]
        torch.testing.assert_close(D, want)


def _user_ring(parity: str, count: str):
    """A hand-written two-stage TMA ring over `n[0]` (or a constant 24) tiles; the consumer's parity is right
    (`parity="right"`), or right for rounds 0..9 only (`"min"`: `T.min(k // S, 9) % 2`), or the consumer skips its
    release at k == 20 (`"skip"`)."""
    return tile_ring(1, 24, 8, count=count,
                     data_parity=(lambda k, s, by: T.min(k // s, 9) % 2) if parity == "min" else None,
                     release_if=(lambda k, by: k != 20) if parity == "skip" else None)


@pytest.mark.parametrize("parity", ["min", "skip"])
def test_a_runtime_loop_whose_body_stops_repeating_past_the_traced_counts_is_refused(parity):
    # The representative counts (0 .. 2S + 1 and 4 * 2S + 3 = 19 here) covered every count only for a body that
    # repeats with the pipeline's period; these break at round 10 (the parity) or k == 20 (a release skipped), past
    # them, and passed the verifier while the simulator deadlocked at a count of 24 (a fresh soundness tester's
    # report). With a constant count of 24 the verifier traces them whole and finds the bug itself.
    from egtile.lower.protocol import schedule_protocol

    found = verify(schedule_protocol(_user_ring(parity, "data").kernel).scheduled)
    assert any(v.property == "L7" and "does not repeat with the pipeline's period" in v.message for v in found), found
    static = verify(schedule_protocol(_user_ring(parity, "static").kernel).scheduled)
    assert static and not any("does not repeat" in v.message for v in static), static


def test_a_runtime_loop_whose_body_repeats_runs_at_any_count():
    x = torch.randn(16, 24 * 8)
    k = egtile.compile(_user_ring("right", "data"), target="sim")
    for count in (0, 7, 24):
        y = torch.full_like(x, float("nan"))
        k(x, torch.tensor([count], dtype=torch.int32), y)
        assert torch.equal(y[:, : count * 8], 2.0 * x[:, : count * 8])
        assert torch.isnan(y[:, count * 8:]).all()
