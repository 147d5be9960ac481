"""Hand-written warp specialization (TileLang's T.ws / T.alloc_barrier / T.mbarrier_* / T.tma_copy API): the
correct protocol compiles, verifies and matches a float64 reference in the simulator; each class of protocol bug
gets the verifier's report at the culprit's line, and the simulator's report when the schedule runs anyway."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import DSLError, EgtileError, ScheduleError, SimulationError
from egtile.lower.protocol import schedule_protocol
from egtile.sim import simulate

M = N = 32
K = 64
BM = BN = 32
BK = 16
S = 2


def ws_gemm(M, N, K, bm, bn, bk, S=2, bug=None, split=False):
    """A producer (warpgroup 1) / consumer (warpgroup 0) GEMM with full/empty barrier arrays; ``bug`` plants one
    protocol bug (the lines carry markers the tests look up); ``split``: the A tile comes in two copies issued from
    an inner serial loop, one arrive after them."""
    full_count = 256 if bug == "count" else 128
    h = bm // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((S, bm, bk), "float16")
            B_s = T.alloc_shared((S, bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            full = T.alloc_barrier([full_count] * S)  # @full_alloc
            empty = T.alloc_barrier([128] * S)
            with T.ws(0):
                T.clear(C_l)
            for ko in T.serial(K // bk):
                with T.ws(1):
                    if bug != "no_empty_wait":
                        T.mbarrier_wait_parity(empty[ko % S], ((ko // S) % 2) ^ (0 if bug == "empty_parity" else 1))  # @empty_wait
                    if bug == "arrive_first":
                        T.mbarrier_arrive(full[ko % S])  # @early_arrive
                    if split:
                        for j in T.serial(2):
                            T.tma_copy(A[by * bm + j * h, ko * bk], A_s[ko % S, j * h:j * h + h, :], barrier=full[ko % S])  # @tma_a_split
                    else:
                        T.tma_copy(A[by * bm, ko * bk], A_s[ko % S, :, :], barrier=full[ko % S])  # @tma_a
                    if bug == "arrive_between":
                        T.mbarrier_arrive(full[ko % S])  # @mid_arrive
                    if bug == "b_other_stage":
                        T.tma_copy(B[ko * bk, bx * bn], B_s[ko % S, :, :], barrier=full[(ko + 1) % S])  # @tma_b_other
                    else:
                        T.tma_copy(B[ko * bk, bx * bn], B_s[ko % S, :, :], barrier=full[ko % S])  # @tma_b
                    if bug == "expect_tx":
                        T.mbarrier_expect_tx(full[ko % S], 512)  # @expect
                    if bug not in ("no_arrive", "arrive_first", "arrive_between"):
                        T.mbarrier_arrive(full[ko % S])
                with T.ws(0):
                    if bug == "read_before_wait":
                        T.gemm(A_s[ko % S, :, :], B_s[ko % S, :, :], C_l)  # @early_gemm
                    if bug == "skip_first_wait":
                        if ko > 0:  # @skip_if
                            T.mbarrier_wait_parity(full[ko % S], (ko // S) % 2)  # @skip_wait
                    else:
                        T.mbarrier_wait_parity(full[ko % S], ((ko // S) % 2) ^ (1 if bug == "full_parity" else 0))  # @full_wait
                    if bug != "read_before_wait":
                        T.gemm(A_s[ko % S, :, :], B_s[ko % S, :, :], C_l)  # @gemm
                    T.barrier_arrive(empty[ko % S])
            if bug == "unwaited_load":  # an off-by-one prefetch: one more A tile that no consumer waits for
                with T.ws(1):
                    T.mbarrier_wait_parity(empty[0], ((K // bk // S) % 2) ^ 1)
                    T.tma_copy(A[by * bm, 0], A_s[0, :, :], barrier=full[0])  # @unwaited_load
                    T.mbarrier_arrive(full[0])
            with T.ws(0):
                T.copy(C_l, C[by * bm, bx * bn])

    return main


def line_of(marker: str) -> int:
    lines, start = inspect.getsourcelines(ws_gemm)
    for i, text in enumerate(lines):
        if text.rstrip().endswith(f"# @{marker}"):
            return start + i
    raise AssertionError(marker)


def inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(K, N, generator=g).half()
    return a, b, torch.full((M, N), float("nan"))


def bound(a, b):
    return K * 2.0**-23 * (a.double().abs() @ b.double().abs()) + 1e-12


@pytest.mark.parametrize("split", [False, True], ids=["one_copy", "copies_in_inner_loop"])
@pytest.mark.parametrize("target", ["interp", "sim"])
def test_correct_protocol_matches_the_float64_reference(target, split):
    # split: a round's copies from an inner serial loop, then its one arrive (the verifier used to cut the round
    # at each inner iteration and refuse it: "phase 0 receives 0 arrivals")
    kernel = egtile.compile(ws_gemm(M, N, K, BM, BN, BK, split=split), target=target)
    for seed in (1, 2):
        a, b, c = inputs(seed)
        kernel(a, b, c)
        ref = a.double() @ b.double()
        assert torch.isfinite(c).all()
        assert ((c.double() - ref).abs() <= bound(a, b)).all()


def test_correct_protocol_is_kept_verbatim_and_explained():
    kernel = egtile.compile(ws_gemm(M, N, K, BM, BN, BK), target="sim")
    text = kernel.explain()
    assert "the e-graph does not re-schedule" in text
    assert "hand-written-protocol" in text
    sched = kernel.scheduled
    assert sched.threads == 256  # the user's threads, no producer warpgroup added
    assert {b.name: (b.stages, b.arrive_count) for b in sched.barriers} == {"full": (2, 128), "empty": (2, 128)}
    assert egtile.optimize(kernel.kernel).scheduled == sched


# bug -> (the verifier's property, the marker of a statement the report lists, the marker of the culprit's line,
# where the error points and which its first line names)
BUGS = {
    "full_parity": ("L4", "full_wait", "full_wait"),      # returns at once: reads an old phase
    "empty_parity": ("L4", "empty_wait", "empty_wait"),   # deadlock (the consumer's wait on full is stuck too)
    "no_arrive": ("L3", "tma_a", "tma_b"),                # the phase never completes: arrive after the last copy
    "read_before_wait": ("L1", "early_gemm", "early_gemm"),
    "count": ("L3", "tma_a", "full_alloc"),               # arrive_count 256, 128 arrivals
    "expect_tx": ("L3", "tma_a", "expect"),               # expected bytes != delivered bytes
    "no_empty_wait": ("L2", "tma_a", "tma_a"),            # the producer overwrites a stage the consumer reads
    # the phase completes once the 128 arrivals are in with no bytes expected yet (PTX ISA 9.7.13.15.1): the
    # consumer reads the stage before the copies land (the simulator sees it only under some interleavings)
    "arrive_first": ("L3", "tma_a", "early_arrive"),
    "arrive_between": ("L3", "tma_b", "mid_arrive"),      # the first copy's bytes alone may complete the phase
    # the B copy completes on the next stage: that stage's phase gets bytes its round never arrives for
    "b_other_stage": ("L3", "tma_b_other", "tma_b_other"),
    # round 0 read with no wait ("the first tile is already there"): the report blamed the later waits' parities
    "skip_first_wait": ("L4", "skip_wait", "skip_if"),
    # a load no wait observes: the block may exit while it is in flight (every value is right)
    "unwaited_load": ("L3", "unwaited_load", "unwaited_load"),
}


@pytest.mark.parametrize("split", [False, True], ids=["one_copy", "copies_in_inner_loop"])
@pytest.mark.parametrize("bug", sorted(BUGS))
def test_each_protocol_bug_is_reported_at_compile_time_at_its_line(bug, split):
    prop, marker, culprit = BUGS[bug]
    if split:  # the A tile's copies come from an inner T.serial loop before the round's one arrive
        marker, culprit = (m + "_split" if m == "tma_a" else m for m in (marker, culprit))
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(ws_gemm(M, N, K, BM, BN, BK, bug=bug, split=split), target="sim")
    err = exc.value
    assert "hand-written barrier protocol is wrong" in err.message
    assert f"{prop}:" in err.message
    assert f"{__file__}:{line_of(marker)}: " in err.message, err.message  # every statement involved, at its line
    headline, fix = err.message.split("\n")[1:3]
    assert f"{__file__}:{line_of(culprit)}" in headline and fix.strip().startswith("fix: "), err.message
    assert err.loc is not None and err.loc.line == line_of(culprit), (err.loc, err.message)
    assert "statement " in err.message and __file__ in err.message


def test_the_expect_tx_report_names_the_user_statement():
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(ws_gemm(M, N, K, BM, BN, BK, bug="expect_tx"), target="sim")
    assert f"{__file__}:{line_of('expect')}" in exc.value.message
    assert "transaction bytes" in exc.value.message


def _simulate(bug):
    sched = schedule_protocol(ws_gemm(M, N, K, BM, BN, BK, bug=bug).kernel).scheduled
    a, b, c = inputs(3)
    return simulate(sched, a, b, c)


def test_the_simulator_reports_a_missing_arrive_as_a_deadlock_naming_barrier_and_threads():
    r = _simulate("no_arrive")
    assert not r.ok and r.deadlock is not None
    text = str(r.deadlock)
    assert "threads 0-127 (wg0) at Wait full[0]" in text
    assert f"{__file__}:{line_of('full_wait')}" in text
    assert "0/128 arrivals" in text


def test_the_simulator_reports_a_read_before_the_wait_as_a_race():
    r = _simulate("read_before_wait")
    assert any("race on A_s" in e for e in r.errors())


def test_the_simulator_reports_a_wrong_parity():
    r = _simulate("full_parity")
    assert not r.ok
    assert any("A_s" in e for e in r.errors())


def test_the_sim_target_refuses_a_wrong_protocol_before_running():
    with pytest.raises(ScheduleError):
        egtile.compile(ws_gemm(M, N, K, BM, BN, BK, bug="empty_parity"), target="sim")
    assert issubclass(SimulationError, EgtileError)


@pytest.mark.parametrize("split", [False, True], ids=["one_copy", "copies_in_inner_loop"])
def test_the_scheduled_kernel_compiles_with_nvrtc_for_sm90a(split):
    from egtile.codegen import build

    built = build(schedule_protocol(ws_gemm(128, 128, 128, 64, 64, 32, split=split).kernel).scheduled)
    assert built.arch.startswith("sm_90")
    assert "mbarrier.expect_tx.relaxed.cta.shared::cta.b64" in built.source
    # one expect_tx per copy, of its own box: each half of the 64 x 32 A tile (2 bytes an element) in the inner loop
    expects = [ln for ln in built.source.split("\n") if "eg_mbarrier_expect_tx(&" in ln]
    assert [ln.split(", ")[-1].split(")")[0] for ln in expects] == (["2048", "4096"] if split else ["4096", "4096"])
    assert built.cubin[:4] == b"\x7fELF"


def test_front_end_errors_point_at_the_user_line():
    with pytest.raises(DSLError) as exc:
        @T.prim_func
        def no_barrier(A: T.Tensor((32, 16), "float16")):
            with T.Kernel(1, threads=256):
                A_s = T.alloc_shared((32, 16), "float16")
                with T.ws(1):
                    T.tma_copy(A[0, 0], A_s)  # @@here
        no_barrier.kernel
    assert "needs barrier=" in exc.value.message and "@@here" in str(exc.value.loc)


def test_ws_names_only_existing_warpgroups():
    with pytest.raises(DSLError) as exc:
        @T.prim_func
        def k(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=256):
                with T.ws(2):
                    T.clear(A)
        k.kernel
    assert "warpgroups 0..1" in exc.value.message


@pytest.mark.gpu
@pytest.mark.parametrize("split", [False, True], ids=["one_copy", "copies_in_inner_loop"])
def test_correct_protocol_on_the_h200(split):
    kernel = egtile.compile(ws_gemm(256, 256, 256, 128, 128, 64, split=split), target="cuda")
    g = torch.Generator().manual_seed(7)
    a = torch.randn(256, 256, generator=g).half()
    b = torch.randn(256, 256, generator=g).half()
    c = torch.full((256, 256), float("nan"), device="cuda")
    kernel(a.cuda(), b.cuda(), c)
    ref = a.double() @ b.double()
    err = (c.cpu().double() - ref).abs()
    assert (err <= 256 * 2.0**-23 * (a.double().abs() @ b.double().abs()) + 1e-12).all(), err.max()


# ---- the other spellings of TileLang's WS examples (own kernels, same constructs) --------------------------------


def one_array_gemm(M, N, K, bm, bn, bk, S=2, loop=None):
    """Full and empty barriers in one array (``[0, S)`` full, ``[S, 2 S)`` empty), keyword arguments."""
    loop = loop or T.serial

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((S, bm, bk), "float16")
            B_s = T.alloc_shared((S, bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            mbars = T.alloc_barrier([128, 128] * S)
            with T.ws(0):
                T.clear(C_l)
            for ko in loop(T.ceildiv(K, bk)):
                with T.ws(1):
                    T.mbarrier_wait_parity(mbarrier=mbars[ko % S + S], parity=((ko // S) % 2) ^ 1)  # @one_array_wait
                    T.tma_copy(A[by * bm:(by + 1) * bm, ko * bk:(ko + 1) * bk], A_s[ko % S, :, :], barrier=mbars[ko % S])
                    T.tma_copy(B[ko * bk:(ko + 1) * bk, bx * bn:(bx + 1) * bn], B_s[ko % S, :, :], barrier=mbars[ko % S])
                    T.mbarrier_arrive(mbarrier=mbars[ko % S])
                with T.ws(0):
                    T.mbarrier_wait_parity(mbarrier=mbars[ko % S], parity=(ko // S) % 2)
                    T.gemm(A_s[ko % S, :, :], B_s[ko % S, :, :], C_l)
                    T.mbarrier_arrive(mbarrier=mbars[ko % S + S])
            with T.ws(0):
                T.copy(C_l, C[by * bm, bx * bn])

    return main


def single_stage_gemm(M, N, K, bm, bn, bk):
    """Two single barriers, one shared stage, ``T.Pipelined(num_stages=0)``, ``T.barrier_wait`` / ``barrier_arrive``,
    producer in warpgroup 0."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            with T.ws(1):
                T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=0):
                with T.ws(0):
                    T.barrier_wait(done, (ko + 1) % 2)
                    T.tma_copy(A[by * bm, ko * bk], A_s, barrier=ready)
                    T.tma_copy(B[ko * bk, bx * bn], B_s, barrier=ready)
                    T.barrier_arrive(ready)
                with T.ws(1):
                    T.barrier_wait(ready, ko % 2)
                    T.gemm(A_s, B_s, C_l)
                    T.barrier_arrive(done)
            with T.ws(1):
                T.copy(C_l, C[by * bm, bx * bn])

    return main


def simt_producer_scale(n=256, block=128, steps=4):
    """A producer warpgroup that fills a shared tile with ordinary stores (no TMA) and arrives; the consumer waits
    and writes ``2 * x``: the producer threads' arrivals release their writes."""

    @T.prim_func
    def main(X: T.Tensor((steps, n), "float32"), Y: T.Tensor((steps, n), "float32")):
        with T.Kernel(n // block, threads=256) as bx:
            buf = T.alloc_shared((block,), "float32")
            full = T.alloc_barrier(128)
            empty = T.alloc_barrier(128)
            for k in T.serial(steps):
                with T.ws(1):
                    T.mbarrier_wait_parity(empty, (k % 2) ^ 1)
                    T.copy(X[k, bx * block], buf)
                    T.mbarrier_arrive(full)
                with T.ws(0):
                    T.mbarrier_wait_parity(full, k % 2)
                    for i in T.Parallel(block):
                        Y[k, bx * block + i] = buf[i] * 2.0
                    T.mbarrier_arrive(empty)

    return main


@pytest.mark.parametrize("factory", [one_array_gemm, single_stage_gemm], ids=["one_array", "single_stage"])
def test_tilelang_spellings_match_the_reference(factory):
    kernel = egtile.compile(factory(M, N, K, BM, BN, BK), target="sim")
    a, b, c = inputs(11)
    kernel(a, b, c)
    ref = a.double() @ b.double()
    assert torch.isfinite(c).all() and ((c.double() - ref).abs() <= bound(a, b)).all()


def test_a_simt_producer_releases_its_writes_with_its_arrivals():
    kernel = egtile.compile(simt_producer_scale(), target="sim")
    x = torch.randn(4, 256)
    y = torch.full((4, 256), float("nan"))
    kernel(x, y)
    assert torch.equal(y, x * 2)


def test_a_python_range_over_barrier_rounds_is_refused_with_the_alternative():
    from egtile.errors import UnsupportedError

    with pytest.raises(UnsupportedError) as exc:
        egtile.compile(one_array_gemm(M, N, K, BM, BN, BK, loop=range), target="sim")
    assert "T.serial(n)" in exc.value.message
    assert exc.value.loc is not None and exc.value.loc.line == line_of_in(one_array_gemm, "one_array_wait")


def line_of_in(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, t in enumerate(lines) if t.rstrip().endswith(f"# @{marker}"))


def test_interp_runs_the_sequential_reading():
    kernel = egtile.compile(simt_producer_scale(), target="interp")
    x = torch.randn(4, 256)
    y = torch.full((4, 256), float("nan"))
    kernel(x, y)
    assert torch.equal(y, x * 2)


def test_the_listing_spells_the_protocol_as_tilelang():
    text = str(ws_gemm(M, N, K, BM, BN, BK).kernel)
    assert "with T.ws(1):" in text and "full = T.alloc_barrier([128, 128])" in text
    assert "T.tma_copy(" in text and ", barrier=full[" in text and "T.mbarrier_wait_parity(empty[" in text


def range_loop_gemm(M, N, K, bm, bn, bk, S=2):
    """TileLang's ``for ko in range(...)`` over the rounds: a serial loop in a kernel with barriers."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((S, bm, bk), "float16")
            B_s = T.alloc_shared((S, bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            mbars = T.alloc_barrier([128, 128] * S)
            with T.ws(0):
                T.clear(C_l)
            for ko in range(T.ceildiv(K, bk)):
                with T.ws(1):
                    T.mbarrier_wait_parity(mbars[ko % S + S], ((ko // S) % 2) ^ 1)
                    T.tma_copy(A[by * bm, ko * bk], A_s[ko % S, :, :], barrier=mbars[ko % S])
                    T.tma_copy(B[ko * bk, bx * bn], B_s[ko % S, :, :], barrier=mbars[ko % S])
                    T.mbarrier_arrive(mbars[ko % S])
                with T.ws(0):
                    T.mbarrier_wait_parity(mbars[ko % S], (ko // S) % 2)
                    T.gemm(A_s[ko % S, :, :], B_s[ko % S, :, :], C_l)
                    T.mbarrier_arrive(mbars[ko % S + S])
            with T.ws(0):
                T.copy(C_l, C[by * bm, bx * bn])

    return main


def test_a_range_loop_in_a_kernel_with_barriers_is_a_serial_loop():
    prim = range_loop_gemm(M, N, K, BM, BN, BK)
    assert "for ko in T.serial(4):" in str(prim.kernel)
    kernel = egtile.compile(prim, target="sim")
    a, b, c = inputs(12)
    kernel(a, b, c)
    ref = a.double() @ b.double()
    assert torch.isfinite(c).all() and ((c.double() - ref).abs() <= bound(a, b)).all()


def split_n_gemm(M=64, N=64, K=64, bk=32):
    """No barriers: both warpgroups share ``A``'s tile (a ``T.copy`` outside every ``T.ws``, by all threads) and each
    multiplies it by its own half of ``B`` (TileLang's copy/gemm-per-role example, in egtile's own kernel)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=256):
            A_s = T.alloc_shared((M, bk), "float16")
            B0 = T.alloc_shared((bk, N // 2), "float16")
            B1 = T.alloc_shared((bk, N // 2), "float16")
            C0 = T.alloc_fragment((M, N // 2), "float32")
            C1 = T.alloc_fragment((M, N // 2), "float32")
            with T.ws(1):
                T.clear(C1)
            with T.ws(0):
                T.clear(C0)
            for ko in T.serial(K // bk):
                T.copy(A[0, ko * bk], A_s)
                with T.ws(1):
                    T.copy(B[ko * bk, 0], B1)
                    T.gemm(A_s, B1, C1)
                with T.ws(0):
                    T.copy(B[ko * bk, N // 2], B0)
                    T.gemm(A_s, B0, C0)
            with T.ws(1):
                T.copy(C1, C[0, 0])
            with T.ws(0):
                T.copy(C0, C[0, N // 2])

    return main


def test_a_loop_mixing_roles_and_block_level_statements_gets_cta_barriers_between_them():
    kernel = egtile.compile(split_n_gemm(), target="sim")
    g = torch.Generator().manual_seed(13)
    a = torch.randn(64, 64, generator=g).half()
    b = torch.randn(64, 64, generator=g).half()
    c = torch.full((64, 64), float("nan"))
    kernel(a, b, c)
    ref = a.double() @ b.double()
    assert torch.isfinite(c).all()
    assert ((c.double() - ref).abs() <= 64 * 2.0**-23 * (a.double().abs() @ b.double().abs()) + 1e-12).all()


def scaled_stage_gemm(mode: str = "scale"):
    """The consumer scales its TMA-filled stage in place (``mode="scale"``: ordinary stores, the generic proxy) or
    reads it into a fragment (``"read"``: ordinary loads) before the gemm and releases it on ``empty``; the
    producer's next T.tma_copy overwrites it through the async proxy."""
    bm = bn = 32
    bk = 16

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=256) as bx:
            A_s = T.alloc_shared((S, bm, bk), "float16")
            B_s = T.alloc_shared((S, bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            A_l = T.alloc_fragment((bm, bk), "float16")
            full = T.alloc_barrier([128] * S)
            empty = T.alloc_barrier([128] * S)
            with T.ws(0):
                T.clear(C_l)
            for ko in T.serial(K // bk):
                with T.ws(1):
                    T.mbarrier_wait_parity(empty[ko % S], ((ko // S) % 2) ^ 1)
                    T.tma_copy(A[0, ko * bk], A_s[ko % S, :, :], barrier=full[ko % S])
                    T.tma_copy(B[ko * bk, 0], B_s[ko % S, :, :], barrier=full[ko % S])
                    T.mbarrier_arrive(full[ko % S])
                with T.ws(0):
                    T.mbarrier_wait_parity(full[ko % S], (ko // S) % 2)
                    if mode == "scale":
                        for i, j in T.Parallel(bm, bk):
                            A_s[ko % S, i, j] = A_s[ko % S, i, j] * T.float16(2.0)
                        T.gemm(A_s[ko % S, :, :], B_s[ko % S, :, :], C_l)
                    else:
                        for i, j in T.Parallel(bm, bk):
                            A_l[i, j] = A_s[ko % S, i, j] * T.float16(2.0)
                        T.gemm(A_l, B_s[ko % S, :, :], C_l)
                    T.mbarrier_arrive(empty[ko % S])
            with T.ws(0):
                T.copy(C_l, C[0, 0])

    return main


@pytest.mark.parametrize("mode", ["scale", "read"])
def test_a_stage_ordinary_accesses_touch_is_fenced_before_the_next_tma_load(mode):
    # PTX ISA 9.7.13.3.2: the generic writes (or reads) of A_s and the next round's TMA load (async proxy) of the
    # same bytes are ordered only with a fence.proxy.async on the path between them: egtile puts one on the
    # producer's issuing thread, after its wait on empty (DeepEP's LDS-then-TMA race was this, unfenced)
    from egtile.ir import swalk
    from egtile.ir.scheduled import Elect, FenceProxyAsync, TmaLoad
    from soundness.handbuilt import without

    sched = schedule_protocol(scaled_stage_gemm(mode).kernel).scheduled
    assert egtile.verify(sched) == []
    elects = [s for s in swalk(sched.body) if isinstance(s, Elect) and any(isinstance(x, TmaLoad) for x in s.body)]
    assert len(elects) == 2  # A_s and B_s: a gemm of a hand-written protocol reads its operands with ordinary loads
    for e in elects:
        assert [type(x).__name__ for x in e.body][-2:] == ["FenceProxyAsync", "TmaLoad"]
    kernel = egtile.compile(scaled_stage_gemm(mode), target="sim")
    assert "fence.proxy.async" in kernel.explain()
    a, b, c = inputs(5)
    kernel(a, b, c)
    ref = 2 * a.double() @ b.double()
    assert torch.isfinite(c).all()
    assert ((c.double() - ref).abs() <= 2 * bound(a, b)).all()

    mutant = without(sched, FenceProxyAsync)
    found = egtile.verify(mutant)
    assert any(v.property == "L6" and "TMA load" in v.message and v.buffer == "A_s" for v in found), found
    r = simulate(mutant, a, b, torch.full((M, N), float("nan")))
    assert any("proxy race on A_s" in e for e in r.errors()), r.errors()


def _placed(sched, where: str):
    """``sched`` (a ``scaled_stage_gemm``) with egtile's fences moved: ``before_release`` / ``after_release`` (one in
    the consumer, just before or just after its arrive on ``empty``), ``one_side`` / ``both_sides`` (the producer's,
    after its wait on ``empty``, on one or both sides of a branch on tensor data)."""
    from egtile.ir.kernel import BinOp, Const, Load
    from egtile.ir.scheduled import Arrive, FenceProxyAsync, RoleSplit, SeqLoop, SIf, Wait
    from soundness.handbuilt import without

    bare = without(sched, FenceProxyAsync)
    a = sched.kernel.params[0]
    cond = BinOp(">", Load(a, (Const(0, "int32"), Const(0, "int32"))), Const(0.0, "float32"))

    def loop(s, producer):
        body = []
        for x in s.body:
            consumer_arrive = not producer and isinstance(x, Arrive) and x.barrier == "empty"
            if consumer_arrive and where == "before_release":
                body.append(FenceProxyAsync())
            body.append(x)
            if consumer_arrive and where == "after_release":
                body.append(FenceProxyAsync())
            if producer and isinstance(x, Wait) and where in ("one_side", "both_sides"):
                body.append(SIf(cond, (FenceProxyAsync(),), (FenceProxyAsync(),) if where == "both_sides" else ()))
        return dataclasses.replace(s, body=tuple(body))

    def role(r):
        producer = r.threads.begin == 128
        return dataclasses.replace(r, body=tuple(loop(s, producer) if isinstance(s, SeqLoop) else s for s in r.body))

    return dataclasses.replace(bare, body=tuple(
        dataclasses.replace(s, roles=tuple(role(r) for r in s.roles)) if isinstance(s, RoleSplit) else s
        for s in bare.body))


@pytest.mark.parametrize("mode", ["scale", "read"])
@pytest.mark.parametrize("where, right", [("before_release", True), ("after_release", False),
                                          ("one_side", False), ("both_sides", True)])
def test_a_proxy_fence_counts_only_on_the_causality_path_of_every_run(mode, where, right):
    # PTX ISA 9.7.13.3.2: the fence must lie between the ordinary access and the TMA load in happens-before: the
    # consumer's own before its release (not after it), or the producer's after its wait on every path (a fence
    # under a branch on tensor data orders only the runs that take its side)
    sched = _placed(schedule_protocol(scaled_stage_gemm(mode).kernel).scheduled, where)
    found = egtile.verify(sched)
    assert (found == []) == right, found
    if not right:
        assert {v.property for v in found} == {"L6"}, found
    a, b, c = inputs(11)
    a[0, 0] = -abs(a[0, 0]) - 1.0  # the branch's condition is false: a one-sided fence does not run
    r = simulate(sched, a, b, c)
    assert any("proxy race on A_s" in e for e in r.errors()) != right, r.errors()


def test_the_only_proxy_fences_of_a_tma_pipeline_are_the_issuers():
    # a CTA barrier after a TMA load's issue orders nothing of its (async-proxy) write: it needs no fence of every
    # thread of the role before it (one was placed there, in every iteration, when the TMA write joined the pending
    # accesses as a generic one)
    from egtile.ir import swalk
    from egtile.ir.scheduled import Elect, FenceProxyAsync

    sched = schedule_protocol(ws_gemm(M, N, K, BM, BN, BK).kernel).scheduled
    in_elect = sum(isinstance(x, FenceProxyAsync) for e in swalk(sched.body) if isinstance(e, Elect) for x in e.body)
    every = sum(isinstance(x, FenceProxyAsync) for x in swalk(sched.body))
    assert in_elect == every == 2, (in_elect, every)  # the T.tma_copy of A_s and of B_s (a SIMT gemm reads them)


def persistent_gemm(bug=None, tiles=2, S=2):
    """A hand-written persistent loop: ``for t in T.serial(tiles)`` around the K loop, the round ``t * KT + ko``
    carrying the stage and the parity across tiles. ``bug``: ``"last_full_parity"`` flips the consumer's parity in
    the last round of each tile only; ``"empty_parity"`` flips the producer's release parity (a deadlock)."""
    KT = K // BK

    @T.prim_func
    def main(A: T.Tensor((tiles * M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((tiles * M, N), "float32")):
        with T.Kernel(1, threads=256) as bx:
            A_s = T.alloc_shared((S, BM, BK), "float16")
            B_s = T.alloc_shared((S, BK, BN), "float16")
            C_l = T.alloc_fragment((BM, BN), "float32")
            full = T.alloc_barrier([128] * S)
            empty = T.alloc_barrier([128] * S)
            for t in T.serial(tiles):
                with T.ws(0):
                    T.clear(C_l)
                for ko in T.serial(KT):
                    with T.ws(1):
                        T.mbarrier_wait_parity(empty[(t * KT + ko) % S], (((t * KT + ko) // S) % 2) ^ (0 if bug == "empty_parity" else 1))  # @p_empty_wait
                        T.tma_copy(A[t * BM, ko * BK], A_s[(t * KT + ko) % S, :, :], barrier=full[(t * KT + ko) % S])
                        T.tma_copy(B[ko * BK, 0], B_s[(t * KT + ko) % S, :, :], barrier=full[(t * KT + ko) % S])
                        T.mbarrier_arrive(full[(t * KT + ko) % S])
                    with T.ws(0):
                        if bug == "last_full_parity" and ko == KT - 1:
                            T.mbarrier_wait_parity(full[(t * KT + ko) % S], (((t * KT + ko) // S) % 2) ^ 1)  # @p_last_wait
                        else:
                            T.mbarrier_wait_parity(full[(t * KT + ko) % S], ((t * KT + ko) // S) % 2)
                        T.gemm(A_s[(t * KT + ko) % S, :, :], B_s[(t * KT + ko) % S, :, :], C_l)
                        T.mbarrier_arrive(empty[(t * KT + ko) % S])
                with T.ws(0):
                    T.copy(C_l, C[t * BM, 0])

    return main


def test_a_persistent_loop_carrying_the_parity_across_tiles_matches_the_reference():
    kernel = egtile.compile(persistent_gemm(), target="sim")
    g = torch.Generator().manual_seed(17)
    a = torch.randn(2 * M, K, generator=g).half()
    b = torch.randn(K, N, generator=g).half()
    c = torch.full((2 * M, N), float("nan"))
    kernel(a, b, c)
    ref = a.double() @ b.double()
    assert torch.isfinite(c).all() and ((c.double() - ref).abs() <= bound(a, b)).all()


@pytest.mark.parametrize("bug, marker, phrase", [
    ("last_full_parity", "p_last_wait", "waits for parity 0 at t=0, ko=3"),  # returns at once: reads phase 0's data
    ("empty_parity", "p_empty_wait", "waits for parity 0 at t=0, ko=0"),     # waits for its own release: deadlock
])
def test_a_wrong_parity_inside_nested_loops_is_blamed_on_the_wait(bug, marker, phrase):
    # the verifier writes a wait's iteration as "t=0, ko=3" inside two loops; the diagnosis read only "ko=3" and
    # fell back to a consequence: "no wait of wg0 on full comes before it" (there is one, with the wrong parity)
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(persistent_gemm(bug), target="sim")
    headline, fix = exc.value.message.split("\n")[1:3]
    assert f"{__file__}:{line_of_in(persistent_gemm, marker)}" in headline and phrase in headline, exc.value.message
    assert fix.strip().startswith("fix: at t=0, ko=") and "this wait gives parity 0" in fix, exc.value.message
    assert exc.value.loc is not None and exc.value.loc.line == line_of_in(persistent_gemm, marker)


def inner_wait_gemm(bug=None, S=2):
    """The consumer multiplies each stage in two K halves from an inner ``T.serial`` loop and waits on ``full`` again
    in each half (the second wait observes the phase the first one did and returns at once), then releases the stage
    once. ``bug``: ``"second_wait_parity"`` flips the second half's parity (it waits for the stage's next phase,
    which needs this round's release: deadlock); ``"release_between"`` releases after the first half (the producer
    may refill the stage while the second half reads it)."""
    h = BK // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=256) as bx:
            A_s = T.alloc_shared((S, BM, BK), "float16")
            B_s = T.alloc_shared((S, BK, BN), "float16")
            C_l = T.alloc_fragment((BM, BN), "float32")
            full = T.alloc_barrier([128] * S)
            empty = T.alloc_barrier([128] * S)
            with T.ws(0):
                T.clear(C_l)
            for ko in T.serial(K // BK):
                with T.ws(1):
                    T.mbarrier_wait_parity(empty[ko % S], ((ko // S) % 2) ^ 1)
                    T.tma_copy(A[0, ko * BK], A_s[ko % S, :, :], barrier=full[ko % S])
                    T.tma_copy(B[ko * BK, 0], B_s[ko % S, :, :], barrier=full[ko % S])
                    T.mbarrier_arrive(full[ko % S])
                with T.ws(0):
                    for j in T.serial(2):
                        if bug == "second_wait_parity":
                            T.mbarrier_wait_parity(full[ko % S], ((ko // S) % 2) ^ j)
                        else:
                            T.mbarrier_wait_parity(full[ko % S], (ko // S) % 2)
                        T.gemm(A_s[ko % S, :, j * h:j * h + h], B_s[ko % S, j * h:j * h + h, :], C_l)
                        if bug == "release_between" and j == 0:
                            T.mbarrier_arrive(empty[ko % S])
                    if bug != "release_between":
                        T.mbarrier_arrive(empty[ko % S])
            with T.ws(0):
                T.copy(C_l, C[0, 0])

    return main


def test_a_second_wait_on_the_same_phase_from_an_inner_loop_is_legal():
    # the L4 offset check counted each loop iteration's wait as a new round and refused the second wait of a round:
    # "its wait #1 on full[0] ... observes phase 0 ... (expected parity 1)"
    kernel = egtile.compile(inner_wait_gemm(), target="sim")
    for seed in (1, 2):
        a, b, c = inputs(seed)
        kernel(a, b, c)
        assert torch.isfinite(c).all() and ((c.double() - a.double() @ b.double()).abs() <= bound(a, b)).all()


@pytest.mark.parametrize("bug, prop", [("second_wait_parity", "L4"), ("release_between", "L2")])
def test_an_inner_loop_wait_with_a_wrong_parity_or_an_early_release_is_still_refused(bug, prop):
    sched = schedule_protocol(inner_wait_gemm(bug).kernel).scheduled
    assert prop in {v.property for v in egtile.verify(sched)}
    r = simulate(sched, *inputs(4))
    assert not r.ok


def inner_release_gemm(empty_count=256, S=2):
    """The consumer multiplies each stage in two K halves from an inner ``T.serial`` loop and arrives on ``empty``
    after each half: with ``empty_count`` 256 (128 threads x 2) the stage is free once both halves are read; with
    128 the first half's arrivals already complete the phase, and the producer may refill the stage under the
    second half."""
    h = BK // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=256) as bx:
            A_s = T.alloc_shared((S, BM, BK), "float16")
            B_s = T.alloc_shared((S, BK, BN), "float16")
            C_l = T.alloc_fragment((BM, BN), "float32")
            full = T.alloc_barrier([128] * S)
            empty = T.alloc_barrier([empty_count] * S)
            with T.ws(0):
                T.clear(C_l)
            for ko in T.serial(K // BK):
                with T.ws(1):
                    T.mbarrier_wait_parity(empty[ko % S], ((ko // S) % 2) ^ 1)
                    T.tma_copy(A[0, ko * BK], A_s[ko % S, :, :], barrier=full[ko % S])
                    T.tma_copy(B[ko * BK, 0], B_s[ko % S, :, :], barrier=full[ko % S])
                    T.mbarrier_arrive(full[ko % S])
                with T.ws(0):
                    T.mbarrier_wait_parity(full[ko % S], (ko // S) % 2)
                    for j in T.serial(2):
                        T.gemm(A_s[ko % S, :, j * h:j * h + h], B_s[ko % S, j * h:j * h + h, :], C_l)
                        T.mbarrier_arrive(empty[ko % S])
            with T.ws(0):
                T.copy(C_l, C[0, 0])

    return main


@pytest.mark.parametrize("S", [1, 2])
def test_arrivals_from_an_inner_loop_add_up_to_one_phase(S):
    # a round of a barrier is an iteration of the loops around its waits: the two halves' arrivals (no wait on
    # empty inside the j loop) are one phase of 256; each j used to be a phase of its own ("phase 0 of empty[0]
    # (ko=0, j=0) receives 128 arrivals, but its arrive_count is 256", and the diagnosis advised 128: a race)
    kernel = egtile.compile(inner_release_gemm(S=S), target="sim")
    for seed in (1, 2):
        a, b, c = inputs(seed)
        kernel(a, b, c)
        assert torch.isfinite(c).all() and ((c.double() - a.double() @ b.double()).abs() <= bound(a, b)).all()


def test_an_inner_loop_release_that_completes_the_phase_early_is_refused():
    sched = schedule_protocol(inner_release_gemm(empty_count=128).kernel).scheduled
    found = {v.property for v in egtile.verify(sched)}
    assert found & {"L2", "L3", "L4"}, found
    r = simulate(sched, *inputs(4))
    assert not r.ok


def test_arrivals_from_a_loop_that_one_wait_after_it_collects_are_one_phase():
    # the rounds of a barrier whose only wait is outside every loop: all its arrivals make one phase
    n = 4

    @T.prim_func
    def main(X: T.Tensor((n, 128), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            S = T.alloc_shared((n, 128), "float32")
            done = T.alloc_barrier([128 * n])
            with T.ws(1):
                for r in T.serial(n):
                    for i in T.Parallel(128):
                        S[r, i] = X[r, i] * 2.0
                    T.mbarrier_arrive(done[0])
            with T.ws(0):
                T.mbarrier_wait_parity(done[0], 0)
                for i in T.Parallel(128):
                    Y[i] = S[0, i] + S[1, i] + S[2, i] + S[3, i]

    kernel = egtile.compile(main, target="sim")
    x = torch.randn(n, 128)
    y = torch.full((128,), float("nan"))
    kernel(x, y)
    torch.testing.assert_close(y.double(), 2.0 * x.double().sum(0), rtol=1e-6, atol=1e-6)


def one_ahead(S: int, consumer_first: bool = False, nk: int = 6):
    """TileLang's prologue form: round 0 loaded before the loop, round ko + 1 inside it, once the consumer released
    its stage. With one stage (S = 1) and the producer's T.ws block first in the loop body, the program's sequential
    reading (egtile's meaning of a hand-written protocol) reads each round's tile after the next round's copy
    overwrote it, while the roles running concurrently read the right one: egtile refuses it, on "interp" too (which
    computed the sequential reading's wrong values without a word). The consumer's block first has a reading."""
    N, bk = 64, 16

    @T.prim_func
    def main(X: T.Tensor((N, nk * bk), "float32"), Y: T.Tensor((N, nk * bk), "float32")):
        with T.Kernel(1, threads=256) as bx:
            buf = T.alloc_shared((S, N, bk), "float32")
            full = T.alloc_barrier([128] * S)
            empty = T.alloc_barrier([128] * S)
            with T.ws(1):
                T.tma_copy(X[0, 0], buf[0, :, :], barrier=full[0])
                T.mbarrier_arrive(full[0])
            for ko in T.serial(nk):
                if consumer_first:
                    with T.ws(0):
                        T.mbarrier_wait_parity(full[ko % S], (ko // S) % 2)
                        for i, j in T.Parallel(N, bk):
                            Y[i, ko * bk + j] = buf[ko % S, i, j] * 2.0
                        T.mbarrier_arrive(empty[ko % S])
                with T.ws(1):
                    if ko + 1 < nk:
                        T.mbarrier_wait_parity(empty[(ko + 1) % S], (((ko + 1) // S) % 2) ^ 1)
                        T.tma_copy(X[0, (ko + 1) * bk], buf[(ko + 1) % S, :, :], barrier=full[(ko + 1) % S])  # @ahead_copy
                        T.mbarrier_arrive(full[(ko + 1) % S])
                if not consumer_first:
                    with T.ws(0):
                        T.mbarrier_wait_parity(full[ko % S], (ko // S) % 2)
                        for i, j in T.Parallel(N, bk):
                            Y[i, ko * bk + j] = buf[ko % S, i, j] * 2.0  # @ahead_read
                        T.mbarrier_arrive(empty[ko % S])

    return main


def _line_in(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, t in enumerate(lines) if t.rstrip().endswith(f"# @{marker}"))


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("S, consumer_first", [(1, True), (2, False), (3, False)])
def test_a_producer_one_round_ahead_runs_where_its_sequential_reading_is_its_meaning(target, S, consumer_first):
    kernel = egtile.compile(one_ahead(S, consumer_first), target=target)
    x = torch.randn(64, 96)
    y = torch.full_like(x, float("nan"))
    kernel(x, y)
    assert torch.equal(y, 2 * x)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_producer_overwriting_the_one_stage_first_in_program_order_is_refused_with_the_way_out(target):
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(one_ahead(1), target=target)
    headline, fix = exc.value.message.split("\n")[1:3]
    assert f":{_line_in(one_ahead, 'ahead_read')}" in headline and "sequential reading" in headline, headline
    assert "S >= 2" in fix and "T.ws block before" in fix, fix
    assert exc.value.loc.line == _line_in(one_ahead, "ahead_read")


def test_interp_refuses_a_protocol_the_verifier_finds_wrong():
    # it ran the sequential reading, whose values a protocol with a wrong parity does not compute on the GPU
    with pytest.raises(ScheduleError, match="hand-written barrier protocol is wrong"):
        egtile.compile(ws_gemm(M, N, K, BM, BN, BK, bug="full_parity"), target="interp")


def _unrolled_rounds():
    """Two rounds per iteration through helpers called twice, one stage: correct on the GPU (each arrival
    completes a phase that one wait observes), beyond the verifier, which tells rounds apart by loop iteration."""
    N, bk, nk, S = 64, 16, 4, 1

    def load(X, buf, full, empty, r):
        T.mbarrier_wait_parity(empty[r % S], ((r // S) % 2) ^ 1)
        T.tma_copy(X[0, r * bk], buf[r % S, :, :], barrier=full[r % S])
        T.mbarrier_arrive(full[r % S])

    def use(Y, buf, full, empty, r):
        T.mbarrier_wait_parity(full[r % S], (r // S) % 2)
        for i, j in T.Parallel(N, bk):
            Y[i, r * bk + j] = buf[r % S, i, j] * 2.0
        T.mbarrier_arrive(empty[r % S])  # @unrolled_release

    @T.prim_func
    def main(X: T.Tensor((N, nk * bk), "float32"), Y: T.Tensor((N, nk * bk), "float32")):
        with T.Kernel(1, threads=256) as bx:
            buf = T.alloc_shared((S, N, bk), "float32")
            full = T.alloc_barrier([128] * S)
            empty = T.alloc_barrier([128] * S)
            for k2 in T.serial(nk // 2):
                with T.ws(1):
                    load(X, buf, full, empty, 2 * k2)
                with T.ws(0):
                    use(Y, buf, full, empty, 2 * k2)
                with T.ws(1):
                    load(X, buf, full, empty, 2 * k2 + 1)
                with T.ws(0):
                    use(Y, buf, full, empty, 2 * k2 + 1)

    return main


def test_rounds_repeated_in_one_iteration_are_named_a_limit_with_the_loop_as_the_way_out():
    # the report led with "use 256 here" at the T.alloc_barrier, which deadlocks the second wait of each iteration
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(_unrolled_rounds(), target="sim")
    headline, fix = exc.value.message.split("\n")[1:3]
    assert "a limit of the verifier" in headline, headline
    assert fix.strip().startswith("fix: write the rounds as a loop") and "would hang" in fix, fix
    assert exc.value.loc.line == _line_in(_unrolled_rounds, "unrolled_release")


def thread_runahead(nk: int = 4):
    """Each phase of ``full`` (count 256) takes the producer's 128 arrivals of round r and one consumer arrival; the
    producer's next round waits only for the consumer's arrival (``ack``), not for the phase to complete. A fast
    producer warp's round-(r + 1) arrival can then complete phase r before a slow warp wrote its part of round r:
    the consumer reads stale elements. It passed both verifiers, which took the role's own earlier arrivals as known
    to all its threads by program order (one thread's order only)."""

    @T.prim_func
    def main(X: T.Tensor((nk, 128), "float32"), Y: T.Tensor((nk, 128), "float32")):
        with T.Kernel(1, threads=256) as bx:
            Xs = T.alloc_shared((nk, 128), "float32")
            full = T.alloc_barrier([256])
            ack = T.alloc_barrier([128] * 2)
            with T.ws(0):
                T.mbarrier_arrive(full[0])
                T.mbarrier_arrive(ack[0])
            for r in T.serial(nk):
                with T.ws(1):
                    if r >= 1:
                        T.mbarrier_wait_parity(ack[(r - 1) % 2], ((r - 1) // 2) % 2)
                    for i in T.Parallel(128):
                        Xs[r, i] = X[r, i] * 2.0
                    T.mbarrier_arrive(full[0])  # @runahead_arrive
                with T.ws(0):
                    T.mbarrier_wait_parity(full[0], r % 2)
                    for i in T.Parallel(128):
                        Y[r, i] = Xs[r, i]
                    if r + 1 < nk:
                        T.mbarrier_arrive(full[0])
                        T.mbarrier_arrive(ack[(r + 1) % 2])

    return main


def test_a_roles_arrival_that_its_other_warps_may_not_have_made_yet_is_refused():
    sched = schedule_protocol(thread_runahead().kernel).scheduled
    found = egtile.verify(sched)
    assert any(v.property == "L4" and "belongs to phase 1, but nothing orders it after phase 0" in v.message
               for v in found), found
    x = torch.randn(4, 128)
    r = simulate(sched, x, torch.full((4, 128), float("nan")), policy="adversarial")
    assert not r.ok  # the simulator's adversarial interleaving shows the stale read
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(thread_runahead(), target="sim")
    assert exc.value.loc.line == _line_in(thread_runahead, "runahead_arrive")


def sibling_rounds(nk: int = 3):
    """Two rounds per outer iteration, each role running them from its own inner loop (the producer's ``j``, the
    consumer's sibling ``j2``), a full handshake per round on one-stage barriers of count 128. The rounds of ``full``
    are the consumer's ``j2`` iterations, in which the producer has no statement: its two arrivals per ``ko`` each
    fill the count, so they are two phases (they were merged into one of 256 arrivals and refused)."""
    N, bk = 64, 16

    @T.prim_func
    def main(X: T.Tensor((N, 2 * nk * bk), "float32"), Y: T.Tensor((N, 2 * nk * bk), "float32")):
        with T.Kernel(1, threads=256) as bx:
            buf = T.alloc_shared((2, N, bk), "float32")
            full = T.alloc_barrier([128])
            empty = T.alloc_barrier([128])
            for ko in T.serial(nk):
                with T.ws(1):
                    for j in T.serial(2):
                        T.mbarrier_wait_parity(empty[0], (j % 2) ^ 1)
                        T.tma_copy(X[0, (2 * ko + j) * bk], buf[j, :, :], barrier=full[0])
                        T.mbarrier_arrive(full[0])
                with T.ws(0):
                    for j2 in T.serial(2):
                        T.mbarrier_wait_parity(full[0], j2 % 2)
                        for i, c in T.Parallel(N, bk):
                            Y[i, (2 * ko + j2) * bk + c] = buf[j2, i, c] * 2.0
                        T.mbarrier_arrive(empty[0])

    return main


def top_level_waits():
    """Every wait on ``done`` outside all loops, the producer's arrivals from a loop: one phase per iteration, each
    waited for (the consumer acknowledges phase 0 before the producer starts round 1)."""

    @T.prim_func
    def main(X: T.Tensor((2, 128), "float32"), Y: T.Tensor((2, 128), "float32")):
        with T.Kernel(1, threads=256) as bx:
            S = T.alloc_shared((2, 128), "float32")
            done = T.alloc_barrier([128])
            ack = T.alloc_barrier([128])
            with T.ws(1):
                for r in T.serial(2):
                    if r == 1:
                        T.mbarrier_wait_parity(ack[0], 0)
                    for i in T.Parallel(128):
                        S[r, i] = X[r, i] * 2.0
                    T.mbarrier_arrive(done[0])
            with T.ws(0):
                T.mbarrier_wait_parity(done[0], 0)
                for i in T.Parallel(128):
                    Y[0, i] = S[0, i]
                T.mbarrier_arrive(ack[0])
                T.mbarrier_wait_parity(done[0], 1)
                for i in T.Parallel(128):
                    Y[1, i] = S[1, i]

    return main


@pytest.mark.parametrize("factory, shape", [(sibling_rounds, (64, 96)), (top_level_waits, (2, 128))],
                         ids=["sibling_inner_loops", "top_level_waits"])
def test_arrivals_that_each_fill_the_count_are_phases_of_their_own(factory, shape):
    kernel = egtile.compile(factory(), target="sim")
    x = torch.randn(*shape)
    y = torch.full_like(x, float("nan"))
    kernel(x, y)
    assert torch.equal(y, 2 * x)
    egtile.compile(factory(), target="cuda")  # the verifier passes it, NVRTC builds it



def test_a_tma_load_no_wait_observes_is_reported_by_the_simulator_at_its_line():
    # the verifier's report is BUGS["unwaited_load"]; the simulator, run on the schedule the verifier refuses,
    # reports it at block exit, while every value is right
    a, b, c = inputs(3)
    sched = schedule_protocol(ws_gemm(M, N, K, BM, BN, BK, bug="unwaited_load").kernel).scheduled
    r = simulate(sched, a, b, c)
    assert not r.ok and not r.races and r.deadlock is None
    (err,) = r.barrier_errors
    assert (err.barrier, err.stage, err.phase) == ("full", 0, 2), err
    assert "no thread waits for it before the block exits" in err.message
    assert any(f":{line_of('unwaited_load')})" in n and "T.tma_copy" in n for n in r.named()), r.named()
    assert ((r.outputs[2].double() - a.double() @ b.double()).abs() <= bound(a, b)).all()
