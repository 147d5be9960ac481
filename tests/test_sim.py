"""The simulator (egtile.sim): values against the interpreter, and every kind of report.

Inputs are fresh random tensors; outputs are poisoned (a finite sentinel, so equality is exact) before
every run, and every element is compared with :func:`egtile.interpret` of the unscheduled kernel.
"""

from __future__ import annotations

import pytest
import torch
from seed_schedules import bug1_schedule, bug2_schedule
from soundness import handbuilt as hb

import egtile
from egtile.errors import (
    ArgumentError, DTypeError, ExternModelError, ShapeError, SimulationError,
)
from egtile.ir import (
    AtomicAdd, BinOp, Buffer, Const, Extern, Kernel, Leaf, Load, Scheduled, Store, ThreadLoop, ThreadRange, Var,
)
from egtile.sim import POLICIES, Race, SimResult, simulate

POISON = -3.0


def ws_args(n: int, start: int = 0, width: int = 64):
    rows = n + start
    return [torch.randn(rows, width).half(), torch.randn(rows, width).half(),
            torch.full((rows, width), POISON).half(), torch.full((rows, width), POISON).half()]


def reference(kernel: Kernel, args):
    ref = [a.clone() for a in args]
    egtile.interpret(kernel, *ref)
    return ref


def assert_matches(result: SimResult, ref) -> None:
    assert len(result.outputs) == len(ref)
    for got, want in zip(result.outputs, ref):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want), (got, want)


# ----------------------------------------------------------------------------------------------------
# Correct schedules: no report, the interpreter's values, under every policy


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", ["ws", "ws-start", "ws-3stages", "ws-1trip", "ws-0trip", "tile-ops", "cp-async",
                                  "tma-store"])
def test_correct_schedule_matches_interpreter(policy, case):
    match case:
        case "ws":
            sched, args = hb.ws_schedule(), ws_args(4)
        case "ws-start":
            sched, args = hb.ws_schedule(start=3, n=5), ws_args(5, 3)
        case "ws-3stages":
            sched, args = hb.ws_schedule(stages=3, n=7), ws_args(7)
        case "ws-1trip":
            sched, args = hb.ws_schedule(n=1), ws_args(1)
        case "ws-0trip":
            sched, args = hb.ws_schedule(n=0, start=1), ws_args(0, 1)
        case "tile-ops":
            sched = hb.tile_ops_schedule()
            args = [torch.randn(16, 16).half(), torch.randn(16, 16).half(), torch.full((16, 16), POISON),
                    torch.full((16,), POISON)]
        case "cp-async":
            sched, args = hb.cp_async_schedule(), [torch.randn(3, 32), torch.full((3, 32), POISON)]
        case "tma-store":
            sched, args = hb.tma_store_schedule(), [torch.randn(64), torch.full((64,), POISON)]
    ref = reference(sched.kernel, args)
    result = simulate(sched, *args, policy=policy, seed=7)
    assert result.ok, result.errors()
    assert_matches(result, ref)
    assert result.policy == policy


def test_outputs_are_copies_and_inputs_untouched():
    args = ws_args(4)
    before = [a.clone() for a in args]
    result = simulate(hb.ws_schedule(), *args)
    for a, b, out in zip(args, before, result.outputs):
        assert torch.equal(a, b)  # the caller's tensors are never written
        assert out.data_ptr() != a.data_ptr()
    assert not torch.equal(result.outputs[3], args[3])  # ... while the simulated A_out was


def test_seeded_random_policy_is_reproducible():
    args = ws_args(4)
    r1 = simulate(hb.ws_schedule(), *args, policy="random", seed=11)
    r2 = simulate(hb.ws_schedule(), *args, policy="random", seed=11)
    assert r1.stats["steps"] == r2.stats["steps"]
    assert_matches(r1, r2.outputs)


# ----------------------------------------------------------------------------------------------------
# Races


@pytest.mark.parametrize("policy", POLICIES)
def test_seed_bug2_race_names_buffer_and_statement(policy):
    args = ws_args(4)
    result = simulate(bug2_schedule(wait_after_first_read=True), *args, policy=policy, seed=1)
    b_races = [r for r in result.races if r.buffer == "B_shared"]
    assert b_races, result.errors()
    # the read of B_shared by the B_out statement (sid 5) races with the SIMT producer's store (sid 3)
    assert any(r.later.sid == 5 or (r.earlier is not None and r.earlier.sid == 5) for r in b_races)
    assert any(r.kind in ("read-after-write", "write-after-read") and {r.earlier.sid, r.later.sid} == {3, 5}
               for r in b_races if r.earlier is not None)
    race = b_races[0]
    assert race.element[0] in (0, 1) and race.element[1] == 0  # B_shared[stage, 0]
    assert not result.ok
    with pytest.raises(SimulationError, match="B_shared"):
        result.raise_for_errors()


def test_missing_barrier_between_tile_ops_is_a_race():
    args = [torch.randn(16, 16).half(), torch.randn(16, 16).half(), torch.full((16, 16), POISON),
            torch.full((16,), POISON)]
    result = simulate(hb.tile_ops_schedule(drop_sync_before_gemm=True), *args)
    gemm_reads = [r for r in result.races if r.later.sid == 4 and r.buffer in ("A_s", "B_s")]
    assert gemm_reads, result.errors()
    assert all(0 <= i < 16 for r in gemm_reads for i in r.element)


def test_release_before_last_read_is_a_write_after_read_race():
    result = simulate(hb.ws_schedule(release_before_last_read=True), *ws_args(4), policy="round_robin")
    war = [r for r in result.races if r.kind == "write-after-read" and r.buffer == "A_shared"]
    assert war, result.errors()
    assert war[0].earlier.sid == 7 and war[0].later.sid == 4 and war[0].later.op == "tma-load"


def test_cp_async_data_without_noinc_arrive_is_a_race():
    result = simulate(hb.cp_async_schedule(skip_arrive=True), torch.randn(3, 32), torch.full((3, 32), POISON))
    raw = [r for r in result.races if r.kind == "read-after-write" and r.buffer == "S"]
    assert raw and raw[0].earlier.op == "cp.async" and raw[0].later.sid == 4, result.errors()


def test_tma_store_without_fence_is_a_proxy_race():
    result = simulate(hb.tma_store_schedule(fence=False), torch.randn(64), torch.full((64,), POISON))
    proxy = [r for r in result.races if r.kind == "proxy"]
    assert proxy and proxy[0].buffer == "S" and proxy[0].earlier.sid == 2 and proxy[0].later.sid == 3


def test_inter_block_plain_writes_to_one_element_race():
    out = Buffer("Out", (4,), "float32", "global")
    bx = Var("bx")
    st = Store(1, out, (Const(0),), BinOp("+", Const(1.0, "float32"), Const(0.0, "float32")))
    k = Kernel("clash", (out,), (2,), (bx,), 32, (), (st,))
    from egtile.ir import Elect
    sched = Scheduled(k, 32, (), (), (Elect(ThreadRange(0, 32), (Leaf(st),)),))
    result = simulate(sched, torch.full((4,), POISON))
    inter = [r for r in result.races if r.kind == "inter-block"]
    assert inter and inter[0].buffer == "Out" and inter[0].element == (0,)
    assert inter[0].earlier.block == (0,) and inter[0].later.block == (1,)


def test_race_str_names_everything():
    r = simulate(bug2_schedule(wait_after_first_read=True), *ws_args(4)).races[0]
    assert isinstance(r, Race)
    text = str(r)
    assert "B_shared" in text and "sid 5" in text and "thread" in text


# ----------------------------------------------------------------------------------------------------
# Deadlocks


@pytest.mark.parametrize("policy", POLICIES)
def test_arrive_count_too_high_deadlocks_with_blocking_points(policy):
    result = simulate(hb.ws_schedule(full_count_delta=1), *ws_args(4), policy=policy, seed=2)
    dl = result.deadlock
    assert dl is not None and not result.ok
    assert len(dl.blocked) == 256  # every thread is listed
    consumers = [b for b in dl.blocked if b.role == "consumer"]
    assert len(consumers) == 128
    assert all("full_0[0]" in b.point and "129/130 arrivals" in b.point for b in consumers)
    assert {b.thread for b in dl.blocked} == set(range(256))
    assert "deadlock" in str(dl) and "threads 0-127 (consumer)" in str(dl)


def test_syncthreads_inside_a_role_deadlocks():
    result = simulate(hb.ws_schedule(syncthreads_in_role=True), *ws_args(4))
    assert result.deadlock is not None
    assert any("bar.sync 0" in b.point and b.role == "consumer" for b in result.deadlock.blocked)


@pytest.mark.parametrize("policy", POLICIES)
def test_arrive_count_too_low_completes_phases_early(policy):
    # 129 arrivals per phase on a count of 128: each phase completes one arrival early; the extra
    # arrivals pile up into later phases and one is left over at exit (or data is read too early)
    args = ws_args(4)
    result = simulate(hb.ws_schedule(full_count_delta=-1), *args, policy=policy, seed=4)
    assert not result.ok
    found = [e for e in result.barrier_errors if e.barrier == "full_0"] + \
        [r for r in result.races if r.buffer in ("A_shared", "B_shared")]
    assert found or result.deadlock is not None, result.errors()


@pytest.mark.parametrize("policy", POLICIES)
def test_parity_from_absolute_index_with_nonzero_start_fails(policy):
    args = ws_args(5, 1)
    ref = reference(hb.ws_schedule(start=1, n=5).kernel, args)
    result = simulate(hb.ws_schedule(start=1, n=5, absolute_parity=True), *args, policy=policy, seed=4)
    assert not result.ok
    assert any(r.buffer in ("A_shared", "B_shared") and r.later.sid in (5, 7, 3, 4) for r in result.races) or \
        result.deadlock is not None, result.errors()
    assert any(not torch.equal(g, w) for g, w in zip(result.outputs, ref)) or result.races


def test_wrong_tx_bytes_deadlock():
    result = simulate(hb.ws_schedule(tx_delta=-2), *ws_args(4), policy="adversarial")
    assert result.deadlock is not None
    assert any("-2 tx bytes pending" in b.point for b in result.deadlock.blocked)


# ----------------------------------------------------------------------------------------------------
# Repeated nonlocal iterations


@pytest.mark.parametrize("policy", POLICIES)
def test_seed_bug1_repeated_iterations(policy):
    A = torch.randn(16, 32).half()
    counts = torch.full((16, 16), -7, dtype=torch.int32)
    good = simulate(bug1_schedule(), A, counts, policy=policy, seed=3)
    assert good.ok, good.errors()
    assert torch.equal(good.outputs[1][0], torch.full((16,), 2, dtype=torch.int32))
    assert torch.equal(good.outputs[1][1:], counts[1:])
    bad = simulate(bug1_schedule(replicate_extern=True), A, counts, policy=policy, seed=3)
    reps = bad.repeated_iterations
    assert len(reps) == 2 * 16  # every (ko, i)
    assert all(r.sid == 4 and r.count == 128 and set(r.threads) == set(range(128)) for r in reps)
    assert {dict(r.env)["ko"] for r in reps} == {0, 1}
    assert {dict(r.iteration)["i"] for r in reps} == set(range(16))
    assert torch.equal(bad.outputs[1][0], torch.full((16,), 256, dtype=torch.int32))


def test_replicated_local_body_is_not_reported():
    # every thread computes the same value into its own local buffer: legal replication
    X = Buffer("X", (8,), "float32", "global")
    L = Buffer("L", (8,), "float32", "local")
    i = Var("i")
    st = Store(1, L, (i,), Load(X, (i,)))
    k = Kernel("local", (X,), (1,), (Var("bx"),), 64, (L,), ())
    sched = Scheduled(k, 64, (L,), (), (ThreadLoop((i,), (8,), "replicated", ThreadRange(0, 64), (Leaf(st),), sid=1),))
    result = simulate(sched, torch.randn(8))
    assert result.ok, result.errors()


def test_nonlocal_leaf_run_by_every_thread_is_reported():
    X = Buffer("X", (1,), "int32", "global")
    st = AtomicAdd(1, X, (Const(0),), Const(1))
    k = Kernel("atom", (X,), (1,), (Var("bx"),), 32, (), (st,))
    sched = Scheduled(k, 32, (), (), (Leaf(st),))
    result = simulate(sched, torch.zeros(1, dtype=torch.int32))
    assert result.outputs[0].item() == 32
    assert len(result.repeated_iterations) == 1 and result.repeated_iterations[0].sid == 1
    assert result.repeated_iterations[0].count == 32


# ----------------------------------------------------------------------------------------------------
# Bad input


def test_bad_arguments():
    sched = hb.ws_schedule()
    with pytest.raises(ArgumentError, match="expects 4 tensor"):
        simulate(sched, *ws_args(4)[:3])
    with pytest.raises(DTypeError):
        simulate(sched, *[a.float() for a in ws_args(4)])
    with pytest.raises(ArgumentError, match="unknown simulation policy"):
        simulate(sched, *ws_args(4), policy="fastest")
    with pytest.raises(ArgumentError, match="ir.Scheduled"):
        simulate("not a kernel")


def test_out_of_range_access_raises_shape_error():
    X = Buffer("X", (4,), "float32", "global")
    st = Store(1, X, (Const(4),), Const(1.0, "float32"))
    k = Kernel("oob", (X,), (1,), (Var("bx"),), 32, (), (st,))
    from egtile.ir import Elect
    sched = Scheduled(k, 32, (), (), (Elect(ThreadRange(0, 32), (Leaf(st),)),))
    with pytest.raises(ShapeError, match="X dimension 0 accessed at index 4"):
        simulate(sched, torch.zeros(4))


def test_extern_without_model_raises():
    X = Buffer("X", (4,), "float32", "global")
    st = Extern(1, "no_such_model_xyz", "void", ())
    k = Kernel("ext", (X,), (1,), (Var("bx"),), 32, (), (st,))
    from egtile.ir import Elect
    sched = Scheduled(k, 32, (), (), (Elect(ThreadRange(0, 32), (Leaf(st),)),))
    with pytest.raises(ExternModelError, match="no_such_model_xyz"):
        simulate(sched, torch.zeros(4))


def test_kernel_input_is_scheduled_first():
    from seed_schedules import bug2_kernel

    args = ws_args(4)
    result = simulate(bug2_kernel(), *args, policy="adversarial")
    assert result.ok, result.errors()
    assert_matches(result, reference(bug2_kernel(), args))


# ----------------------------------------------------------------------------------------------------
# Runtime errors point at the user's line (the statement's SourceLoc) and name the statement


def _error_kernels():
    from egtile import language as T

    @T.prim_func
    def leaf(I: T.Tensor((2,), "int32"), X: T.Tensor((4,), "float32")):
        with T.Kernel(1):
            # past a shared buffer's end (past a global tensor's edge an element store is masked: test_store_edge)
            s = T.alloc_shared((4,), "float32")
            s[I[0]] = 1.0  # mark-sim-leaf-oob
            X[0] = s[0]

    @T.prim_func
    def tile(I: T.Tensor((2,), "int32"), X: T.Tensor((8, 16), "float32"), Y: T.Tensor((16,), "float32")):  # mark-sim-def
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((16,), "float32")
            T.copy(X[I[0], 0:16], s)  # mark-sim-tile
            T.copy(s, Y)  # mark-sim-store

    @T.prim_func
    def ws(A: T.Tensor((64, 16), "float16"), B: T.Tensor((64, 16), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((16, 16), "float16")
            for k in T.Pipelined(4, num_stages=2):  # mark-sim-pipelined
                T.copy(A[k * 16, 0], s)
                T.copy(s, B[k * 16, 0])

    @T.prim_func
    def ext(X: T.Tensor((4,), "int32")):
        with T.Kernel(1):
            T.call_extern("void", "no_such_model_sim", T.address_of(X[0]))  # mark-sim-extern

    return leaf.kernel, tile.kernel, ws.kernel, ext.kernel


def _error_case(kind: str):
    """(schedule or kernel, its arguments, expected error type, marker of the expected user line, sid)."""
    import dataclasses

    from egtile.ir import TileOp
    from egtile.schedule.driver import optimize

    leaf, tile, ws, ext = _error_kernels()
    tile_args = [torch.tensor([3, 0], dtype=torch.int32), torch.randn(8, 16), torch.full((16,), POISON)]
    match kind:
        case "leaf-out-of-range":
            return leaf, [torch.tensor([4, 0], dtype=torch.int32), torch.randn(4)], ShapeError, "# mark-sim-leaf-oob", 1
        case "tile-op-out-of-range":
            # a T.copy past a tensor's edge is clipped (TileLang's semantics, tests/test_copy_edge.py); a T.fill of a
            # region outside its tensor is still an error while running
            from egtile import language as T

            @T.prim_func
            def fill(I: T.Tensor((2,), "int32"), X: T.Tensor((8, 16), "float32")):
                with T.Kernel(1, threads=128):
                    T.fill(X[I[0], 0:16], 1.0)  # mark-sim-fill

            return fill, [torch.tensor([8, 0], dtype=torch.int32), torch.randn(8, 16)], ShapeError, "# mark-sim-fill", 1
        case "thread-limit":
            sched = optimize(tile).scheduled
            return dataclasses.replace(sched, threads=2048), tile_args, SimulationError, "# mark-sim-def", None
        case "unknown-buffer":
            sched = optimize(tile).scheduled
            return dataclasses.replace(sched, buffers=()), tile_args, SimulationError, "# mark-sim-tile", 1
        case "cp-async-to-global":
            sched = optimize(tile).scheduled
            body = tuple(dataclasses.replace(s, inst="cp_async") if isinstance(s, TileOp) and s.op.sid == 2 else s
                         for s in sched.body)
            return dataclasses.replace(sched, body=body), tile_args, SimulationError, "# mark-sim-store", 2
        case "barrier-stage-out-of-range":
            # one-stage barrier arrays indexed with k % 2: the waits inside the pipelined loop (which have
            # no sid of their own) report the loop's line
            sched = optimize(ws).scheduled
            bars = tuple(dataclasses.replace(b, stages=1) for b in sched.barriers)
            args = [torch.randn(64, 16).half(), torch.full((64, 16), POISON).half()]
            return dataclasses.replace(sched, barriers=bars), args, SimulationError, "# mark-sim-pipelined", 1
        case "extern-without-model":
            return ext, [torch.randint(0, 9, (4,), dtype=torch.int32)], ExternModelError, "# mark-sim-extern", 1
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["leaf-out-of-range", "tile-op-out-of-range", "thread-limit", "unknown-buffer",
                                  "cp-async-to-global", "barrier-stage-out-of-range", "extern-without-model"])
def test_runtime_errors_name_the_statement_and_the_user_line(kind):
    from pathlib import Path

    from test_language import line_of

    target, args, error, marker, sid = _error_case(kind)
    with pytest.raises(error) as e:
        simulate(target, *args)
    line = line_of(marker, __file__)
    text = Path(__file__).read_text().splitlines()[line - 1].strip()
    assert e.value.loc is not None and e.value.loc.line == line, str(e.value)
    assert text in str(e.value) and f"test_sim.py:{line}" in str(e.value)
    if sid is not None:
        assert f"(statement {sid}, thread " in str(e.value)


def test_a_race_on_an_if_condition_names_the_if():
    """The loads of a condition are the `if`'s: an inter-block race whose read is `if F[0] > 0.0:` named the
    statement before it (a fresh user's report, 2026-12-07)."""
    import egtile
    from egtile import language as T

    @T.prim_func
    def main(X: T.Tensor((32,), "float32"), Y: T.Tensor((2, 32), "float32"), F: T.Tensor((1,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            tx = T.get_thread_binding()
            if bx == 0:
                if tx == 0:
                    F[0] = -1.0
            T.sync_threads()
            Y[bx, tx] = X[tx]
            if F[0] > 0.0:  # @cond
                Y[bx, tx] = 5.0

    with pytest.raises(egtile.errors.SimulationError, match=r"inter-block race on F\[0\]") as e:
        egtile.compile(main, target="sim")(torch.randn(32), torch.zeros(2, 32), torch.ones(1))
    assert "# @cond" in open(__file__).read().splitlines()[e.value.loc.line - 1]
