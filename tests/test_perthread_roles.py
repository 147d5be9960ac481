"""TileLang's per-thread form of hand-written warp specialization (egtile/language/roles.py): after
``tx = T.get_thread_binding()`` in a kernel with ``T.alloc_barrier``, conditions that select whole warpgroups
(``if tx >= 128:`` / ``elif`` / ``else``) are roles, as ``with T.ws(g):``, so the verifier and the simulator check
the user's own protocol; register budgets, ``T.fence_proxy_async``, ``T.wgmma_gemm`` / ``T.wait_wgmma`` are
accepted with TileLang's meaning. Own small kernels, fresh random inputs, outputs poisoned with NaN, compared
with torch."""

from __future__ import annotations

import os

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ScheduleError, UnsupportedError
from egtile.ir.protocol import RoleBlock

from protocol_kernels import line

FILE = os.path.abspath(__file__)
STEPS, BLOCK, S = 4, 128, 2


def relay(bug=None):
    """Warpgroup 1 (``tx >= 128``) TMA-loads a row of X per step into a 2-stage ring; warpgroup 0 (``else``)
    waits, writes ``X * 2 + 1`` and releases the stage. ``bug`` plants one protocol bug."""

    @T.prim_func
    def main(X: T.Tensor((STEPS, BLOCK), "float32"), Y: T.Tensor((STEPS, BLOCK), "float32")):
        with T.Kernel(1, threads=256):
            buf = T.alloc_shared((S, BLOCK), "float32")
            full = T.alloc_barrier([128] * S)
            empty = T.alloc_barrier([128] * S)
            tx = T.get_thread_binding()
            for k in T.serial(STEPS):
                if tx >= 128:
                    T.set_max_nreg(80, 0)
                    T.barrier_wait(empty[k % S], ((k // S) % 2) ^ 1)
                    T.tma_copy(X[k, 0], buf[k % S, :], barrier=full[k % S])  # @tma
                    if bug != "no_arrive":
                        T.barrier_arrive(full[k % S])
                else:
                    T.set_max_nreg(240, 1)
                    if bug == "read_before_wait":
                        for i in T.Parallel(BLOCK):
                            Y[k, i] = buf[k % S, i] * 2.0 + 1.0  # @early_read
                    T.barrier_wait(full[k % S], ((k // S) % 2) ^ (1 if bug == "parity" else 0))  # @wait
                    if bug != "read_before_wait":
                        for i in T.Parallel(BLOCK):
                            Y[k, i] = buf[k % S, i] * 2.0 + 1.0
                    T.fence_proxy_async()
                    T.barrier_arrive(empty[k % S])

    return main


def _run(fn, *shapes_in, out_shape):
    kernel = egtile.compile(fn, target="sim")
    xs = [torch.randn(*s) for s in shapes_in]
    y = torch.full(out_shape, float("nan"))
    kernel(*xs, y)
    return xs, y


def test_warpgroup_conditions_are_roles_and_the_protocol_runs():
    fn = relay()
    roles = [s for s in _walk(fn.kernel.body) if isinstance(s, RoleBlock)]
    assert sorted(r.groups for r in roles) == [(0,), (1,)]
    (x,), y = _run(fn, (STEPS, BLOCK), out_shape=(STEPS, BLOCK))
    torch.testing.assert_close(y, x * 2 + 1, rtol=0, atol=0)


def three_roles():
    """An ``if`` / ``elif`` / ``else`` chain over 384 threads: warpgroup 2 loads, warpgroups 0 and 1 each write
    their own half of the row, both release the stage (``empty`` counts 256 arrivals). The producer's branch
    comes first: egtile's verifier checks a protocol against the sequential reading of the program, in which a
    load must come before the reads it feeds (docs/language.md)."""
    half = BLOCK // 2

    @T.prim_func
    def main(X: T.Tensor((STEPS, BLOCK), "float32"), Y: T.Tensor((STEPS, BLOCK), "float32")):
        with T.Kernel(1, threads=384):
            buf = T.alloc_shared((S, BLOCK), "float32")
            full = T.alloc_barrier([128] * S)
            empty = T.alloc_barrier([256] * S)
            tx = T.get_thread_binding()
            for k in T.serial(STEPS):
                if tx >= 256:
                    T.barrier_wait(empty[k % S], ((k // S) % 2) ^ 1)
                    T.tma_copy(X[k, 0], buf[k % S, :], barrier=full[k % S])
                    T.barrier_arrive(full[k % S])
                elif tx < 128:
                    T.barrier_wait(full[k % S], (k // S) % 2)
                    for i in T.Parallel(half):
                        Y[k, i] = buf[k % S, i] - 3.0
                    T.barrier_arrive(empty[k % S])
                else:
                    T.barrier_wait(full[k % S], (k // S) % 2)
                    for i in T.Parallel(half):
                        Y[k, half + i] = buf[k % S, half + i] * buf[k % S, half + i]
                    T.barrier_arrive(empty[k % S])

    return main


def test_an_elif_chain_gives_one_role_per_branch():
    fn = three_roles()
    roles = [s for s in _walk(fn.kernel.body) if isinstance(s, RoleBlock)]
    assert sorted(r.groups for r in roles) == [(0,), (1,), (2,)]
    (x,), y = _run(fn, (STEPS, BLOCK), out_shape=(STEPS, BLOCK))
    h = BLOCK // 2
    torch.testing.assert_close(y[:, :h], x[:, :h] - 3, rtol=0, atol=0)
    torch.testing.assert_close(y[:, h:], x[:, h:] * x[:, h:], rtol=0, atol=0)


# bug -> (the culprit's marker, words the report's headline must hold)
CASES = {
    "parity": ("wait", ["parity 1 at k=0", "full[0]", "returns at once"]),
    "no_arrive": ("tma", ["nothing arrives on full[0]"]),
    "read_before_wait": ("early_read", ["read of `buf`", "comes before"]),
}


@pytest.mark.parametrize("bug", sorted(CASES))
def test_a_wrong_per_thread_protocol_is_reported_at_the_culprit(bug):
    marker, words = CASES[bug]
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(relay(bug), target="sim")
    head = exc.value.message.split("\n")[1]
    assert f"{FILE}:{line(relay, marker)}" in head, exc.value.message
    for w in words:
        assert w in head, (w, head)
    assert exc.value.loc is not None and exc.value.loc.line == line(relay, marker)


def test_per_thread_code_beside_roles_is_refused_at_its_line():
    with pytest.raises(UnsupportedError) as exc:
        @T.prim_func
        def main(X: T.Tensor((256,), "float32"), Y: T.Tensor((256,), "float32")):
            with T.Kernel(1, threads=256):
                bar = T.alloc_barrier(256)
                tx = T.get_thread_binding()
                T.barrier_arrive(bar)
                T.barrier_wait(bar, 0)
                Y[tx] = X[tx]  # @per_thread
    assert "per-thread code on the thread index" in exc.value.message
    assert "beside the warpgroup roles" in exc.value.message
    assert exc.value.loc.line == line(test_per_thread_code_beside_roles_is_refused_at_its_line, "per_thread")


def test_a_condition_on_part_of_a_warpgroup_is_not_a_role():
    with pytest.raises(UnsupportedError) as exc:
        @T.prim_func
        def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=256):
                bar = T.alloc_barrier(64)
                tx = T.get_thread_binding()
                if tx < 64:
                    T.barrier_arrive(bar)  # @split
    assert "branch on part of a warpgroup" in exc.value.message
    assert exc.value.loc.line == line(test_a_condition_on_part_of_a_warpgroup_is_not_a_role, "split")


def test_wgmma_gemm_and_wait_wgmma_compute_the_product():
    M, N, K = 64, 32, 32

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((N, K), "float16")
            c = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.fill(c, 7.0)  # cleared by the first product (clear_accum=(j == 0), a condition on the loop index)
            for j in T.unroll(2):
                T.wgmma_gemm(a[:, j * (K // 2): (j + 1) * (K // 2)], b[:, j * (K // 2): (j + 1) * (K // 2)], c,
                             transpose_B=True, clear_accum=(j == 0))
            T.wait_wgmma(0)
            T.copy(c, C)

    kernel = egtile.compile(main, target="sim")
    a, b = torch.randn(M, K).half(), torch.randn(N, K).half()
    c = torch.full((M, N), float("nan"))
    kernel(a, b, c)
    ref = a.double() @ b.double().T
    torch.testing.assert_close(c.double(), ref, rtol=0, atol=K * 2.0 ** -22 * float((a.abs().double() @ b.abs().double().T).max()))


def _walk(stmts):
    for s in stmts:
        yield s
        for field in ("body", "then_body", "else_body"):
            yield from _walk(getattr(s, field, ()) or ())


def test_a_tma_load_into_a_strided_part_of_a_shared_buffer_lands_in_place():
    """Each half of a row-major (8, 64) shared tile is a strided region: egtile issues it as one TMA box per row
    (a box lands densely); the halves are swapped on the way."""
    R, W = 8, 64
    h = W // 2

    @T.prim_func
    def main(X: T.Tensor((R, W), "float32"), Y: T.Tensor((R, W), "float32")):
        with T.Kernel(1, threads=256):
            buf = T.alloc_shared((R, W), "float32")
            full = T.alloc_barrier(128)
            tx = T.get_thread_binding()
            if tx >= 128:
                T.tma_copy(X[:, h:], buf[:, :h], barrier=full)
                T.tma_copy(X[:, :h], buf[:, h:], barrier=full)
                T.barrier_arrive(full)
            else:
                T.barrier_wait(full, 0)
                for i, j in T.Parallel(R, W):
                    Y[i, j] = buf[i, j] * 3.0

    (x,), y = _run(main, (R, W), out_shape=(R, W))
    torch.testing.assert_close(y, torch.cat([x[:, h:], x[:, :h]], dim=1) * 3, rtol=0, atol=0)


def own_loops(bug=None):
    """TileLang's FlashMLA form: each role loops over all rounds, concurrently, the consumer's role first in
    program order (it waits on phases the producer's later role completes): no sequential reading exists."""

    @T.prim_func
    def main(X: T.Tensor((STEPS, BLOCK), "float32"), Y: T.Tensor((STEPS, BLOCK), "float32")):
        with T.Kernel(1, threads=256):
            buf = T.alloc_shared((S, BLOCK), "float32")
            full = T.alloc_barrier([128] * S)
            empty = T.alloc_barrier([128] * S)
            tx = T.get_thread_binding()
            if tx < 128:  # @consumer
                for k in T.serial(STEPS):
                    if bug == "read_before_wait":
                        for i in T.Parallel(BLOCK):
                            Y[k, i] = buf[k % S, i] * 2.0 - 1.0  # @own_early_read
                    T.barrier_wait(full[k % S], ((k // S) % 2) ^ (1 if bug == "parity" else 0))  # @own_wait
                    if bug != "read_before_wait":
                        for i in T.Parallel(BLOCK):
                            Y[k, i] = buf[k % S, i] * 2.0 - 1.0
                    T.barrier_arrive(empty[k % S])
            else:
                for k in T.serial(STEPS):
                    T.barrier_wait(empty[k % S], ((k // S) % 2) ^ 1)
                    T.tma_copy(X[k, 0], buf[k % S, :], barrier=full[k % S])
                    if bug != "no_arrive":
                        T.barrier_arrive(full[k % S])

    return main


def test_roles_that_each_run_their_own_loop_are_checked_by_the_simulator():
    fn = own_loops()
    (x,), y = _run(fn, (STEPS, BLOCK), out_shape=(STEPS, BLOCK))
    torch.testing.assert_close(y, x * 2 - 1, rtol=0, atol=0)
    assert "checked on each simulated run" in egtile.compile(fn, target="sim").explain()


@pytest.mark.parametrize("bug, marker, words", [("no_arrive", "own_wait", ["full[0] phase 0", "no statement arrives"]),
                                               ("read_before_wait", "own_early_read", ["buf"]),
                                               ("parity", None, ["full[0] phase 0", "uninitialized-read of buf"])])
def test_a_wrong_protocol_of_roles_with_own_loops_is_reported_by_the_simulator(bug, marker, words):
    from egtile.errors import SimulationError

    with pytest.raises(SimulationError) as exc:
        _run(own_loops(bug), (STEPS, BLOCK), out_shape=(STEPS, BLOCK))
    head = "\n".join(exc.value.message.split("\n")[:3])
    for w in words:
        assert w in head, (w, exc.value.message)
    if marker is not None:  # a wait that returns at once: its consequence (the read of nothing) and the deadlock
        assert exc.value.loc is not None and exc.value.loc.line == line(own_loops, marker), exc.value.message


def test_the_static_check_of_roles_with_own_loops_carries_the_caveat():
    """The static check (what target="cuda" requires) has no sequential reading of this form: its report says
    so, naming both roles' lines, instead of leaving the user to hunt a bug."""
    from egtile.lower.protocol import schedule_protocol
    from egtile.verifier.protocol import check_protocol

    with pytest.raises(ScheduleError) as exc:
        check_protocol(schedule_protocol(own_loops().kernel).scheduled)
    assert f"note: the roles at lines {line(own_loops, 'consumer')}, " in exc.value.message, exc.value.message


def prefetch_pair():
    """Each warpgroup runs its own loop (so the simulator checks the protocol) over one buffer it both reads
    cooperatively and refills with its own elected T.tma_copy right after the read: egtile's split of the
    read over the role's threads needs a named barrier before the refill (TileLang's wgmma reads its operand
    as one warpgroup instruction)."""

    @T.prim_func
    def main(X: T.Tensor((STEPS, BLOCK), "float32"), Y: T.Tensor((2, STEPS, BLOCK), "float32")):
        with T.Kernel(1, threads=256):
            buf0 = T.alloc_shared((BLOCK,), "float32")
            buf1 = T.alloc_shared((BLOCK,), "float32")
            full0 = T.alloc_barrier(128)
            full1 = T.alloc_barrier(128)
            tx = T.get_thread_binding()
            if tx < 128:
                T.tma_copy(X[0, 0], buf0, barrier=full0)
                T.barrier_arrive(full0)
                for k in T.serial(STEPS):
                    T.barrier_wait(full0, k % 2)
                    for i in T.Parallel(BLOCK):
                        Y[0, k, i] = buf0[BLOCK - 1 - i] * 2.0
                    if k < STEPS - 1:
                        T.tma_copy(X[k + 1, 0], buf0, barrier=full0)
                        T.barrier_arrive(full0)
            else:
                T.tma_copy(X[0, 0], buf1, barrier=full1)
                T.barrier_arrive(full1)
                for k in T.serial(STEPS):
                    T.barrier_wait(full1, k % 2)
                    for i in T.Parallel(BLOCK):
                        Y[1, k, i] = buf1[(i + 1) % BLOCK] - 5.0
                    if k < STEPS - 1:
                        T.tma_copy(X[k + 1, 0], buf1, barrier=full1)
                        T.barrier_arrive(full1)

    return main


def test_a_role_that_refills_a_buffer_it_read_cooperatively_gets_a_named_barrier():
    (x,), y = _run(prefetch_pair(), (STEPS, BLOCK), out_shape=(2, STEPS, BLOCK))
    torch.testing.assert_close(y[0], x.flip(1) * 2, rtol=0, atol=0)
    torch.testing.assert_close(y[1], x.roll(-1, 1) - 5, rtol=0, atol=0)


def test_the_interpreter_refuses_roles_that_each_run_their_own_loop():
    with pytest.raises(UnsupportedError) as exc:
        egtile.compile(own_loops(), target="interp")
    assert 'use target="sim"' in exc.value.message
    assert exc.value.loc.line == line(own_loops, "consumer")


def _role_accumulator():
    @T.prim_func
    def main(X: T.Tensor((128, 4), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            bar = T.alloc_barrier(128)
            tx = T.get_thread_binding()
            if tx >= 128:
                T.barrier_arrive(bar)
            else:
                T.barrier_wait(bar, 0)
                acc = T.alloc_var("float32")
                acc = 0.0  # a constant: still one copy per thread
                for j in T.serial(4):
                    acc = acc + X[tx, j]
                Y[tx] = acc

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_per_thread_variable_initialized_by_a_constant_in_a_role_is_per_thread(target):
    # a fresh-user finding: `acc = 0.0` ran once at the role's level, so each thread's sum started from the last one
    import torch
    from _check import poisoned

    x = torch.randn(128, 4, generator=torch.Generator().manual_seed(3))
    y = poisoned((128,), torch.float32, "cpu")
    egtile.compile(_role_accumulator(), target=target)(x, y)
    torch.testing.assert_close(y.double(), x.double().sum(1), rtol=1e-6, atol=1e-6)


def _role_uniform_accumulator():
    @T.prim_func
    def main(X: T.Tensor((4, 128), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            buf = T.alloc_shared((2, 128), "float32")
            full = T.alloc_barrier([128] * 2)
            empty = T.alloc_barrier([128] * 2)
            tx = T.get_thread_binding()
            if tx >= 128:
                for k in T.serial(4):
                    T.barrier_wait(empty[k % 2], ((k // 2) % 2) ^ 1)
                    T.tma_copy(X[k, 0], buf[k % 2, :], barrier=full[k % 2])
                    T.barrier_arrive(full[k % 2])
            else:
                acc = T.alloc_var("float32")
                acc = 0.0
                for k in T.serial(4):
                    T.barrier_wait(full[k % 2], (k // 2) % 2)
                    acc = acc + buf[k % 2, 0]  # no tx: the same on every thread, still each thread's own copy
                    T.barrier_arrive(empty[k % 2])
                Y[tx] = acc + X[0, tx] * 0.0

    return main


def test_a_per_thread_variable_updated_without_the_thread_index_in_a_role_is_every_threads():
    # a fresh-user finding: role-level stores to a per-thread variable ran on one elected thread
    import torch
    from _check import poisoned

    x = torch.randn(4, 128, generator=torch.Generator().manual_seed(5))
    y = poisoned((128,), torch.float32, "cpu")
    egtile.compile(_role_uniform_accumulator(), target="sim")(x, y)
    want = torch.full((128,), float(x.double()[:, 0].sum()), dtype=torch.float64)
    torch.testing.assert_close(y.double(), want, rtol=1e-6, atol=1e-6)


def _set_before_the_roles():
    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            bar = T.alloc_barrier(128)
            acc = T.alloc_var("float32")
            acc = 5.0  # every thread's own copy, before the roles split
            tx = T.get_thread_binding()
            if tx >= 128:
                T.barrier_arrive(bar)
            else:
                T.barrier_wait(bar, 0)
                Y[tx] = acc + X[tx]

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_per_thread_variable_set_before_the_roles_is_read_in_a_role(target):
    # a fresh-user finding: the verifier took one role's copy of the block-level store for the other's and
    # refused the kernel (value flow); both copies together are the write
    from _check import poisoned

    x = torch.randn(128, generator=torch.Generator().manual_seed(9))
    y = poisoned((128,), torch.float32, "cpu")
    egtile.compile(_set_before_the_roles(), target=target)(x, y)
    torch.testing.assert_close(y.double(), x.double() + 5.0, rtol=1e-6, atol=1e-6)
