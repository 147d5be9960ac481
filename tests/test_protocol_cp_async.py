"""Per-thread code inside a warpgroup role and TileLang's per-thread cp.async (egtile/language/roles.py,
egtile/language/cp_async.py, egtile/lower/protocol.py): a TMA-free producer role gathers rows by an index tensor with
``T.ptx_cp_async`` of 16 bytes per thread into a staged shared buffer and arrives with
``T.cp_async_barrier_noinc``; the consumer role waits and sums each row. Own kernels, fresh random inputs, outputs
poisoned with NaN, every element compared with a float64 reference; the verifier and the simulator catch the
protocol's mutants; the refusals point at the user's line."""

from __future__ import annotations

import os

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import DSLError, ScheduleError, SimulationError, UnsupportedError
from egtile.ir.scheduled import CpAsyncCopy, RoleSplit, ThreadLoop, swalk
from egtile.ir.usersync import UserCpAsyncArrive
from egtile.lower.protocol import schedule_protocol
from egtile.sim import simulate
from egtile.verifier import verify

from protocol_kernels import line

FILE = os.path.abspath(__file__)
NSRC, D, BR, STEPS, S = 40, 64, 16, 4, 2  # 16 rows of 64 halves per step: 8 threads x 16 bytes per row


def gather(bug=None, nbytes=16):
    """Per step ``k``: warpgroup 1 (``tx >= 128``) waits for stage ``k % S`` to be free, each of its threads copies
    ``nbytes`` of row ``Idx[k * BR + (tx - 128) // 8]`` of ``X`` with one ``T.ptx_cp_async`` and arrives (noinc);
    warpgroup 0 waits, sums each row of the stage into ``Y[k]`` and releases it. ``bug`` plants one mistake."""
    per = nbytes // 2  # halves per copy
    parts = D // per  # copies per row

    @T.prim_func
    def main(X: T.Tensor((NSRC, D), "float16"), Idx: T.Tensor((STEPS * BR,), "int32"),
             Y: T.Tensor((STEPS, BR), "float32")):
        with T.Kernel(1, threads=256):
            buf = T.alloc_shared((S, BR, D), "float16")
            tile = T.alloc_fragment((BR, D), "float32")
            sums = T.alloc_fragment((BR,), "float32")
            full = T.alloc_barrier([128] * S)
            empty = T.alloc_barrier([128] * S)
            tx = T.get_thread_binding()
            for k in T.serial(STEPS):
                if tx >= 128:
                    T.barrier_wait(empty[k % S], ((k // S) & 1) ^ 1)
                    for r in T.serial(BR * parts // 128):
                        row = Idx[k * BR + r * (128 // parts) + (tx - 128) // parts]
                        T.ptx_cp_async(  # @copy
                            T.access_ptr(buf[k % S, r * (128 // parts) + (tx - 128) // parts,
                                             (tx - 128) % parts * per], "w", per),
                            T.access_ptr(X[row, (tx - 128) % parts * per], "r", per), per)
                    if bug != "no_arrive":
                        T.cp_async_barrier_noinc(full[k % S])  # @arrive
                else:
                    if bug == "early":
                        T.copy(buf[k % S, :, :], tile)  # @early
                    T.barrier_wait(full[k % S], ((k // S) & 1) ^ (1 if bug == "parity" else 0))  # @wait
                    if bug != "early":
                        T.copy(buf[k % S, :, :], tile)
                    T.reduce_sum(tile, sums, dim=1)
                    T.copy(sums, Y[k, :])
                    T.barrier_arrive(empty[k % S])
            if bug in ("unwaited_copy", "unwaited_arrive"):  # one more copy after the loop that nothing observes
                if tx >= 128:
                    T.barrier_wait(empty[0], ((STEPS // S) & 1) ^ 1)
                    T.ptx_cp_async(T.access_ptr(buf[0, (tx - 128) // parts, (tx - 128) % parts * per], "w", per),  # @unwaited_copy
                                   T.access_ptr(X[0, (tx - 128) % parts * per], "r", per), per)
                    if bug == "unwaited_arrive":
                        T.cp_async_barrier_noinc(full[0])  # @unwaited_arrive

    return main


def own_loops():
    """TileLang's FlashMLA form: each role runs its own loop over all steps (checked on each simulated run), and the
    producer's per-thread code stores a validity flag per row to shared memory (one thread per row) and copies
    only valid rows, as the DeepSeek sparse decoders do."""

    @T.prim_func
    def main(X: T.Tensor((NSRC, D), "float16"), Idx: T.Tensor((STEPS * BR,), "int32"),
             Y: T.Tensor((STEPS, BR), "float32")):
        with T.Kernel(1, threads=256):
            buf = T.alloc_shared((S, BR, D), "float16")
            valid = T.alloc_shared((S, BR), "bool")
            tile = T.alloc_fragment((BR, D), "float32")
            sums = T.alloc_fragment((BR,), "float32")
            full = T.alloc_barrier([128] * S)
            empty = T.alloc_barrier([128] * S)
            tx = T.get_thread_binding()
            if tx >= 128:
                for k in T.serial(STEPS):
                    T.barrier_wait(empty[k % S], ((k // S) & 1) ^ 1)
                    row = Idx[k * BR + (tx - 128) // 8]
                    if (tx - 128) % 8 == 0:
                        valid[k % S, (tx - 128) // 8] = row < NSRC // 2
                    if row < NSRC // 2:
                        T.ptx_cp_async(T.access_ptr(buf[k % S, (tx - 128) // 8, (tx - 128) % 8 * 8], "w", 8),
                                       T.access_ptr(X[row, (tx - 128) % 8 * 8], "r", 8), 8)
                    T.cp_async_barrier_noinc(full[k % S])
            else:
                for k in T.serial(STEPS):
                    T.barrier_wait(full[k % S], (k // S) & 1)
                    for i, j in T.Parallel(BR, D):
                        tile[i, j] = T.if_then_else(valid[k % S, i], T.cast(buf[k % S, i, j], "float32"), 0.0)
                    T.reduce_sum(tile, sums, dim=1)
                    T.copy(sums, Y[k, :])
                    T.barrier_arrive(empty[k % S])

    return main


def inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(NSRC, D, generator=g).half()
    idx = torch.randint(0, NSRC, (STEPS * BR,), generator=g, dtype=torch.int32)
    return x, idx


def reference(x, idx, valid_below=None):
    rows = x.double()[idx.long()]
    if valid_below is not None:
        rows = rows * (idx.long() < valid_below).double()[:, None]
    return rows.sum(1).reshape(STEPS, BR)


def close(y, ref, x, idx):
    """Every element within the float32 summation bound of 64 terms (each fp16 value is exact in float32)."""
    bound = 64 * 2.0 ** -24 * x.double()[idx.long()].abs().sum(1).reshape(STEPS, BR) + 1e-12
    assert not torch.isnan(y).any()
    err = (y.double() - ref).abs()
    assert (err <= bound).all(), err.max()


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("nbytes", [16, 8, 4])
def test_gathered_rows_match_the_float64_reference(target, nbytes):
    kernel = egtile.compile(gather(nbytes=nbytes), target=target)
    x, idx = inputs(nbytes)
    y = torch.full((STEPS, BR), float("nan"))
    kernel(x, idx, y)
    close(y, reference(x, idx), x, idx)


def test_the_producer_runs_its_per_thread_code_once_per_thread_and_the_verifier_checks_it():
    sched = schedule_protocol(gather().kernel).scheduled
    assert verify(sched) == []
    (split,) = [s for s in sched.body if isinstance(s, RoleSplit)]
    producer = next(r for r in split.roles if r.threads.begin == 128)
    loops = [s for s in swalk(producer.body) if isinstance(s, ThreadLoop)]
    assert len(loops) == 1 and loops[0].mapping == "partitioned" and loops[0].extents == (128,)
    assert loops[0].threads == producer.threads
    copies = [s for s in swalk(loops[0].body) if isinstance(s, CpAsyncCopy)]
    assert len(copies) == 1 and copies[0].nbytes == 16
    assert any(isinstance(s, UserCpAsyncArrive) for s in swalk(producer.body))
    text = schedule_protocol(gather().kernel).explain()
    assert "16-byte cp.async.cg.shared.global" in text


def test_roles_that_each_run_their_own_loop_are_checked_on_the_simulated_run():
    kernel = egtile.compile(own_loops(), target="sim")
    x, idx = inputs(3)
    y = torch.full((STEPS, BR), float("nan"))
    kernel(x, idx, y)
    close(y, reference(x, idx, NSRC // 2), x, idx)


# ---- mutants: the verifier and the simulator each catch them -------------------------------------------------------

def _sim(bug):
    sched = schedule_protocol(gather(bug).kernel).scheduled
    x, idx = inputs(5)
    return sched, simulate(sched, x, idx, torch.full((STEPS, BR), float("nan")))


def test_a_missing_noinc_arrive_deadlocks_and_is_reported():
    sched, r = _sim("no_arrive")
    assert any(v.property == "L3" and "full[0]" in v.message for v in verify(sched))
    assert r.deadlock is not None and "Wait full[0]" in str(r.deadlock) and "0/128 arrivals" in str(r.deadlock)
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(gather("no_arrive"), target="sim")
    assert "nothing arrives on full[0]" in exc.value.message
    # the fix names the arrival cp.async needs (T.mbarrier_arrive would arrive before the copies land)
    assert "T.cp_async_barrier_noinc" in exc.value.message


def test_a_wait_with_the_wrong_parity_is_reported_at_the_wait():
    sched, r = _sim("parity")
    props = {v.property for v in verify(sched)}
    assert {"L1", "L4"} <= props
    assert not r.ok and any("race on buf" in e or "uninitialized-read of buf" in e for e in r.errors())
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(gather("parity"), target="sim")
    assert exc.value.loc.line == line(gather, "wait")
    assert "waits for parity 1 at k=0" in exc.value.message


def test_a_read_before_the_wait_is_a_race_with_the_cp_async():
    sched, r = _sim("early")
    assert any(v.property == "L1" and "async copy" in v.message for v in verify(sched))
    races = [e for e in r.errors() if "race on buf" in e]
    assert races and "cp.async by thread 128" in races[0]
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(gather("early"), target="sim")
    assert exc.value.loc.line == line(gather, "early")


def test_a_misaligned_cp_async_is_a_simulation_error():
    @T.prim_func
    def main(X: T.Tensor((4, 64), "float16"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            buf = T.alloc_shared((16, 64), "float16")
            full = T.alloc_barrier(128)
            tx = T.get_thread_binding()
            if tx >= 128:
                T.ptx_cp_async(T.access_ptr(buf[(tx - 128) // 8, (tx - 128) % 8 * 8 + 2], "w", 4),  # @misaligned
                               T.access_ptr(X[0, 2], "r", 4), 4)
                T.cp_async_barrier_noinc(full)
            else:
                T.barrier_wait(full, 0)
                for i in T.Parallel(128):
                    Y[i] = buf[i // 8, i % 8 * 8 + 2]

    sched = schedule_protocol(main.kernel).scheduled
    with pytest.raises(SimulationError) as exc:
        simulate(sched, torch.randn(4, 64).half(), torch.full((128,), float("nan")))
    assert "X[0, 2] is at byte offset 4 of its buffer, not a multiple of 8" in exc.value.message
    assert exc.value.loc.line == line(test_a_misaligned_cp_async_is_a_simulation_error, "misaligned")


# ---- refusals ------------------------------------------------------------------------------------------------------

def _trace(body):
    @T.prim_func
    def main(X: T.Tensor((64, 64), "float16"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=256):
            buf = T.alloc_shared((16, 64), "float16")
            full = T.alloc_barrier(128)
            tx = T.get_thread_binding()
            body(X, Y, buf, full, tx)

    return main.kernel


def test_cp_async_outside_a_role_is_refused():
    with pytest.raises(UnsupportedError) as exc:
        @T.prim_func
        def main(X: T.Tensor((64,), "float16")):
            with T.Kernel(1, threads=128):
                buf = T.alloc_shared((64,), "float16")
                T.ptx_cp_async(T.access_ptr(buf[0], "w", 8), T.access_ptr(X[0], "r", 8), 8)  # @outside
        main.kernel
    assert "outside a warpgroup role" in exc.value.message
    assert exc.value.loc.line == line(test_cp_async_outside_a_role_is_refused, "outside")


@pytest.mark.parametrize("case, words", [
    ("predicate", "predicated form"),
    ("bytes", "are 6 bytes"),
    ("extent", "covers 4 elements, the copy moves 8"),
    ("mode", "has access mode 'r'"),
    ("direction", "global memory into shared memory"),
])
def test_wrong_cp_async_operands_are_refused(case, words):
    def body(X, Y, buf, full, tx):
        with T.If(tx >= 128):
            if case == "predicate":
                T.ptx_cp_async(T.access_ptr(buf[0, 0], "w", 8), T.access_ptr(X[0, 0], "r", 8), 8, predicate=tx < 200)
            elif case == "bytes":
                T.ptx_cp_async(T.access_ptr(buf[0, 0], "w", 3), T.access_ptr(X[0, 0], "r", 3), 3)
            elif case == "extent":
                T.ptx_cp_async(T.access_ptr(buf[0, 0], "w", 4), T.access_ptr(X[0, 0], "r", 8), 8)
            elif case == "mode":
                T.ptx_cp_async(T.access_ptr(buf[0, 0], "r", 8), T.access_ptr(X[0, 0], "r", 8), 8)
            else:
                T.ptx_cp_async(T.access_ptr(X[0, 0], "w", 8), T.access_ptr(buf[0, 0], "r", 8), 8)
            T.cp_async_barrier_noinc(full)

    with pytest.raises((DSLError, UnsupportedError)) as exc:
        _trace(body)
    assert words in exc.value.message, exc.value.message


def test_access_ptr_is_no_value():
    def body(X, Y, buf, full, tx):
        with T.If(tx >= 128):
            Y[0] = T.access_ptr(X[0, 0], "r", 8) + 1  # @arith

    with pytest.raises(DSLError) as exc:
        _trace(body)
    assert "is a pointer for T.ptx_cp_async" in exc.value.message


def test_an_element_access_ptr_is_an_extern_pointer():
    def body(X, Y, buf, full, tx):
        with T.If(tx >= 128):
            T.call_extern("void", "touch", T.access_ptr(Y[tx - 128], "rw"))

    kernel = _trace(body)
    from egtile.ir.kernel import AddressOf, Extern, walk

    (ext,) = [s for s in walk(kernel.body) if isinstance(s, Extern)]
    assert isinstance(ext.args[0], AddressOf) and ext.args[0].load.buffer.name == "Y"


def test_a_barrier_statement_inside_per_thread_code_is_refused_at_its_line():
    def body(X, Y, buf, full, tx):
        with T.If(tx >= 128):
            with T.If((tx - 128) % 2 == 0):
                T.cp_async_barrier_noinc(full)  # @inner

    with pytest.raises(UnsupportedError) as exc:
        _trace(body)
    assert "inside per-thread code of a warpgroup role" in exc.value.message
    assert exc.value.loc.line == line(test_a_barrier_statement_inside_per_thread_code_is_refused_at_its_line, "inner")


def test_a_tile_op_indexed_by_the_thread_inside_a_role_is_refused():
    def body(X, Y, buf, full, tx):
        with T.If(tx >= 128):
            T.copy(X[tx - 128, :], buf[0, :])  # @tile

    with pytest.raises(UnsupportedError) as exc:
        _trace(body)
    assert "whose operands use the thread index `tx` inside a warpgroup role" in exc.value.message
    assert exc.value.loc.line == line(test_a_tile_op_indexed_by_the_thread_inside_a_role_is_refused, "tile")


# ---- CUDA ----------------------------------------------------------------------------------------------------------

def test_the_gather_compiles_with_nvrtc_to_cp_async_and_the_noinc_arrive():
    from egtile.codegen import build

    built = build(schedule_protocol(gather().kernel).scheduled)
    assert built.cubin[:4] == b"\x7fELF" and built.arch.startswith("sm_90")
    assert "eg_cp_async_16(" in built.source and "eg_cp_async_mbarrier_arrive_noinc(" in built.source
    small = build(schedule_protocol(gather(nbytes=4).kernel).scheduled)
    assert "eg_cp_async_4(" in small.source


@pytest.mark.gpu
def test_the_gather_on_the_gpu():
    kernel = egtile.compile(gather(), target="cuda")
    x, idx = inputs(11)
    y = torch.full((STEPS, BR), float("nan"), device="cuda")
    kernel(x.cuda(), idx.cuda(), y)
    close(y.cpu(), reference(x, idx), x, idx)



@pytest.mark.parametrize("arrive", [False, True], ids=["no_arrival", "arrival_no_wait_observes"])
def test_a_cp_async_copy_nothing_observes_is_refused_and_reported_by_the_simulator(arrive):
    # the block may exit while the copy is in flight; the values are right, so only these reports catch it
    bug = "unwaited_arrive" if arrive else "unwaited_copy"
    at = line(gather, bug)
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(gather(bug), target="interp")
    text = str(exc.value)
    assert ("phase 2 of full[0] is completed by a cp.async arrival" if arrive
            else "no T.cp_async_barrier_noinc follows in its role") in text, text
    headline, fix = text.split("\n")[1:3]  # the diagnosis: the copy (or its arrival) at its line, then the fix
    assert f":{at})" in headline and fix.strip().startswith("fix: "), text
    g = torch.Generator().manual_seed(5)
    x = torch.randn(NSRC, D, generator=g).half()
    idx = torch.randint(0, NSRC, (STEPS * BR,), generator=g, dtype=torch.int32)
    r = simulate(schedule_protocol(gather(bug).kernel).scheduled, x, idx,
                 torch.full((STEPS, BR), float("nan")))
    assert not r.races and r.deadlock is None
    (err,) = r.barrier_errors
    assert err.sid is not None and any(f":{at})" in n for n in r.named()), (err, r.named())
    assert ("completes this phase, but no thread waits for it" if arrive else "no T.cp_async_barrier_noinc") \
        in str(err), err
    # the values are right all the same: nothing but the reports tells the kernel is unsafe
    y = r.outputs[2].double()
    assert torch.allclose(y, x.double()[idx.long()].sum(1).view(STEPS, BR), atol=1e-3)
