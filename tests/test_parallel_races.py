"""A store that every iteration of a T.Parallel makes to one shared/global element is refused as the user's race,
at its line, before scheduling (egtile.analysis.parallel_races); guarded or fully indexed stores are not."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import KernelRaceError, ScheduleError


def kernel(form: str):
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            s = T.alloc_shared((64,), "float32")
            T.clear(s)
            if form == "lost-update":
                for i in T.Parallel(64):
                    s[0] = s[0] + X[i]  # @race
            elif form == "two-dims":
                for i, j in T.Parallel(8, 8):
                    s[i] = X[i * 8 + j]  # @race
            elif form == "guarded":
                for i in T.Parallel(64):
                    if i == 0:
                        s[0] = X[0]
            else:
                for i in T.Parallel(64):
                    s[i] = X[i] * 2.0
            T.copy(s, Y)

    return main


@pytest.mark.parametrize("target", ["sim", "interp"])
@pytest.mark.parametrize("form", ["lost-update", "two-dims"])
def test_a_definite_race_is_the_users_error_at_its_line(form, target):
    # on interp too: its in-order run of the iterations computed the serial sum, making the race look correct
    with pytest.raises(ScheduleError, match=r"race in the kernel, not a schedule egtile chose") as e:
        egtile.compile(kernel(form), target=target)
    assert "egtile's rules" not in str(e.value)
    assert e.value.loc is not None and e.value.loc.text.endswith("# @race")


@pytest.mark.parametrize("form", ["guarded", "indexed"])
def test_guarded_or_indexed_stores_compile_and_compute(form):
    x = torch.randn(64)
    y = torch.full((64,), float("nan"))
    egtile.compile(kernel(form), target="sim")(x, y)
    want = torch.zeros(64)
    if form == "guarded":
        want[0] = x[0]
    else:
        want = x * 2.0
    torch.testing.assert_close(y, want, rtol=0, atol=0)


def neighbour_kernel(form: str):
    """A store and an access of the same shared buffer in one T.Parallel: a race when they meet at two different
    iterations (``s[i]`` written, ``s[i + 1]`` read), not when they meet only within one iteration or never."""

    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            s = T.alloc_shared((64,), "float32")
            T.clear(s)
            if form == "read-next":
                for i in T.Parallel(63):  # @loop
                    s[i] = X[i]
                    Y[i] = s[i + 1]
            elif form == "write-next":
                for i in T.Parallel(31):  # @loop
                    s[2 * i] = X[i]
                    s[2 * i + 2] = X[i + 32]
            elif form == "wrap-around":  # not linear: the last iteration reads the first one's element
                for i in T.Parallel(64):  # @loop
                    s[i] = X[i]
                    Y[i] = s[(i + 1) % 64]
            elif form == "halves":
                for i in T.Parallel(64):  # @loop
                    s[i // 2] = X[i]
            elif form == "rows":
                for i, j in T.Parallel(7, 8):  # @loop
                    s[i * 8 + j] = X[i * 8 + j]
                    Y[i * 8 + j] = s[i * 8 + j + 8]
            elif form == "same-iteration":
                for i in T.Parallel(64):
                    s[i] = X[i]
                    Y[i] = s[i] * 2.0
            elif form == "permuted":  # a bijection: each element is written and read by one iteration
                for i in T.Parallel(64):
                    s[(i * 5) % 64] = X[i]
                    Y[i] = s[(i * 5) % 64] + 1.0
            elif form == "beyond-the-loop":  # reads the half no iteration writes
                for i in T.Parallel(32):
                    s[i] = X[i]
                    Y[i] = s[i + 32] + s[i]
            else:  # the fix the message suggests: two loops, ordered
                for i in T.Parallel(64):
                    s[i] = X[i]
                for i in T.Parallel(63):
                    Y[i] = s[i + 1]

    return main


@pytest.mark.parametrize("form", ["read-next", "write-next", "rows", "wrap-around", "halves"])
def test_a_store_meeting_another_iterations_access_is_the_users_race_at_the_loop(form):
    with pytest.raises(ScheduleError, match=r"at another iteration .*race in the kernel, not a schedule egtile chose") as e:
        egtile.compile(neighbour_kernel(form), target="sim")
    assert "egtile's rules" not in str(e.value)
    assert e.value.loc is not None and e.value.loc.text.endswith("# @loop")


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("form", ["same-iteration", "permuted", "beyond-the-loop", "split"])
def test_accesses_that_meet_only_within_an_iteration_compile_and_compute(form, target):
    x = torch.randn(64)
    y = torch.full((64,), float("nan"))
    egtile.compile(neighbour_kernel(form), target=target)(x, y)
    want = torch.full((64,), float("nan"))
    if form == "same-iteration":
        want = x * 2.0
    elif form == "permuted":
        want = x + 1.0
    elif form == "beyond-the-loop":
        want[:32] = x[:32]  # s[32:] is the cleared half
    else:
        want[:63] = x[1:]
    torch.testing.assert_close(y, want, rtol=0, atol=0, equal_nan=True)


def _per_thread(synced: bool):
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            tx = T.get_thread_binding()  # @region
            s = T.alloc_shared((64,), "float32")
            s[tx] = X[tx]
            if synced:
                T.sync_threads()
            Y[tx] = s[(tx + 1) % 64]

    return main


def test_per_thread_code_reading_a_neighbours_store_without_a_barrier_is_the_users_race():
    with pytest.raises(ScheduleError, match=r"at another iteration .*T.sync_threads\(\) between the store and the access"):
        egtile.compile(_per_thread(False), target="sim")


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_per_thread_code_with_the_barrier_computes(target):
    x = torch.randn(64)
    y = torch.full((64,), float("nan"))
    egtile.compile(_per_thread(True), target=target)(x, y)
    torch.testing.assert_close(y, torch.roll(x, -1), rtol=0, atol=0)


def _tree(synced: bool, guard_all: bool = False):
    """A tree reduction in per-thread code: the shared store and the reads of it sit under ``if tx < half`` in a
    serial loop, where the check of a nest's direct stores does not look (module egtile.analysis.parallel_races,
    the guarded check). Without its barriers the verifier used to find the race and blame egtile's rules."""
    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            s = T.alloc_shared((128,), "float32")
            tx = T.get_thread_binding()
            s[tx] = X[tx]
            if synced:
                T.sync_threads()
            for k in T.serial(7):
                half = 64 >> k
                if tx < half:
                    s[tx] = s[tx] + s[tx + half]  # @tree
                if synced:
                    T.sync_threads()
            if tx == 0:
                Y[0] = s[0]

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_tree_reduction_without_its_barriers_is_the_users_race_at_the_region(target):
    with pytest.raises(ScheduleError, match=r"race in the kernel, not a schedule egtile chose") as err:
        egtile.compile(_tree(False), target=target)
    msg = str(err.value)
    assert isinstance(err.value, KernelRaceError)  # the user's race, told apart from a refused schedule
    assert "shared buffer s" in msg and "at another iteration" in msg and "T.sync_threads()" in msg
    assert "bug in egtile's rules" not in msg


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_the_tree_reduction_with_its_barriers_computes(target):
    x = torch.randn(128)
    y = torch.full((1,), float("nan"))
    egtile.compile(_tree(True), target=target)(x, y)
    torch.testing.assert_close(y.double(), x.double().sum().reshape(1), rtol=1e-5, atol=1e-5)


def _guarded_halves():
    """Stores and reads under branches that never meet at two iterations: each element is written and read by one
    iteration only (no race; the guarded check must not claim one)."""
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            s = T.alloc_shared((64,), "float32")
            T.clear(s)
            for i in T.Parallel(64):
                for k in T.serial(3):
                    if i < 32:
                        s[i] = s[i] + X[i]
                    else:
                        s[i] = s[i] - X[i] * (k + 1)
            T.copy(s, Y)

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_accesses_under_branches_that_meet_only_within_an_iteration_compute(target):
    x = torch.randn(64)
    y = torch.full((64,), float("nan"))
    egtile.compile(_guarded_halves(), target=target)(x, y)
    want = torch.cat([3 * x[:32], -6 * x[32:]])
    torch.testing.assert_close(y, want, rtol=1e-6, atol=1e-6)


def test_a_race_found_by_evaluation_names_its_two_iterations_and_the_store_line():
    """``s[i] = s[63 - i] + 1``: the iterations that meet are a pair (63 - i and i), not a fixed shift, so the message
    gives the pair it found (it used to say "iteration i + 63")."""
    @T.prim_func
    def mirror(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            s = T.alloc_shared((64,), "float32")
            T.copy(X, s)
            for i in T.Parallel(64):
                s[i] = s[63 - i] + 1.0  # @mirror
            T.copy(s, Y)

    with pytest.raises(ScheduleError) as err:
        egtile.compile(mirror, target="interp")
    msg = str(err.value)
    line = next(n for n, t in enumerate(open(__file__).read().splitlines(), 1) if t.rstrip().endswith("# @mirror"))
    assert f"(line {line})" in msg and "i + 63" not in msg
    import re

    m = re.search(r"the store at iteration i = (\d+) meets the access at iteration i = (\d+)", msg)
    assert m and int(m.group(1)) + int(m.group(2)) == 63 and m.group(1) != m.group(2)


def _atomics(form: str):
    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            S = T.alloc_shared((4,), "float32")
            T.clear(S)
            tx = T.get_thread_binding()
            T.atomic_add(S[tx % 4], X[tx])  # @atomic
            if form == "guarded-store":
                if tx == 5:
                    S[1] = 7.0
            if form == "synced":
                T.sync_threads()
            Y[tx] = S[tx % 4]

    return main


@pytest.mark.parametrize("form", ["read", "guarded-store"])
def test_an_atomic_and_a_plain_access_of_its_element_at_another_iteration_are_the_users_race(form):
    # They were reported as "a bug in egtile's rules" by the verifier (a fresh soundness tester's report): the
    # atomics of other threads reach S[tx % 4] in no order with this thread's read (or thread 5's store).
    with pytest.raises(KernelRaceError, match=r"T.atomic_add\(S\[.*writes the element of shared buffer S") as err:
        egtile.compile(_atomics(form), target="interp")
    assert "T.get_thread_binding()" in err.value.loc.text


@pytest.mark.parametrize("target", ["sim", "interp"])
def test_atomics_of_one_element_read_after_a_barrier_are_no_race(target):
    x = torch.randn(128)
    y = torch.full((128,), float("nan"))
    egtile.compile(_atomics("synced"), target=target)(x, y)
    sums = x.double().reshape(32, 4).sum(0)
    torch.testing.assert_close(y.double(), sums.repeat(32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shift", [1, -3])
def test_a_copy_between_overlapping_regions_of_one_buffer_is_the_users_race(shift):
    # interp computed a memmove, the simulator reported a race (a fresh user's report): refused at the line now
    a, b = (0, shift) if shift > 0 else (-shift, 0)

    with pytest.raises(KernelRaceError, match="the source and destination regions of s overlap") as err:
        @T.prim_func
        def main(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _bx:
                s = T.alloc_shared((32,), "float32")
                T.copy(X, s)
                T.copy(s[a:a + 28], s[b:b + 28])
                T.copy(s, Y)
    assert "T.copy(s[a:a + 28], s[b:b + 28])" in err.value.loc.text


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_copy_between_disjoint_regions_of_one_buffer_runs(target):
    @T.prim_func
    def main(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            s = T.alloc_shared((32,), "float32")
            T.copy(X, s)
            T.copy(s[0:16], s[16:32])
            T.copy(s, Y)

    x = torch.randn(32)
    y = torch.full((32,), float("nan"))
    egtile.compile(main, target=target)(x, y)
    assert torch.equal(y, torch.cat([x[:16], x[:16]]))


def _flag(synced: bool, guarded: bool):
    """Thread 0 (or each thread, its own element) stores a flag that every thread (its neighbour) reads in an `if`
    condition."""

    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((64,), "float32")
            if guarded:
                if tx == 0:
                    s[0] = X[0]
            else:
                s[tx] = X[tx]
            if synced:
                T.sync_threads()
            if (s[0] if guarded else s[(tx + 1) % 64]) > 0.0:
                Y[tx] = X[tx]
            else:
                Y[tx] = -X[tx]

    return main


@pytest.mark.parametrize("guarded", [True, False])
def test_a_store_meeting_another_iterations_if_condition_is_the_users_race(guarded):
    """The read in an `if` condition counts as a read (before, the race check missed it and the verifier's report
    blamed egtile's rules)."""
    with pytest.raises(KernelRaceError, match=r"writes the element of shared buffer s"):
        egtile.compile(_flag(False, guarded), target="sim")


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("guarded", [True, False])
def test_the_flag_read_after_its_barrier_computes(target, guarded):
    x = torch.randn(64)
    y = torch.full((64,), float("nan"))
    egtile.compile(_flag(True, guarded), target=target)(x, y)
    flag = x[0].expand(64) if guarded else torch.roll(x, -1)
    torch.testing.assert_close(y, torch.where(flag > 0, x, -x), rtol=0, atol=0)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_reads_of_own_and_unwritten_elements_beside_a_store_compute(target):
    """Iteration i writes S[2i + 1] and reads S[2i], S[2i + 1], S[2i + 2]: element 2i + 2 has two readers but no
    writer, so no two threads conflict. The verifier asked for a barrier (its same-thread test needed every element
    of the three reads to have one reader) and the kernel was 'a bug in egtile's rules' (a helper's report,
    2026-12-07)."""

    @T.prim_func
    def main(X: T.Tensor((130,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            S = T.alloc_shared((130,), "float32")
            T.copy(X, S)
            for i in T.Parallel(64):
                S[2 * i + 1] = X[i] * 2.0
                Y[i] = S[2 * i] + S[2 * i + 1] + S[2 * i + 2]

    x = torch.randn(130)
    y = torch.full((64,), float("nan"))
    egtile.compile(main, target=target)(x, y)
    xd = x.double()
    torch.testing.assert_close(y.double(), xd[0:128:2] + 2 * xd[:64] + xd[2:130:2], rtol=1e-6, atol=1e-6)
