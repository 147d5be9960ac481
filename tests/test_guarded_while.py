"""A guarded `while` (egtile.language.guarded): a `while v < bound:` on a runtime value that is not counted, whose
variable is a local element the body provably moves up by at least 1 per pass, runs as `T.serial(bound - v0)` with
`if v < bound:` inside (stream-K's walk over its share of K iterations, one output tile per pass); every other one is
refused at its line with what egtile could not prove.

Each semantic test runs a kernel of our own on fresh random inputs with NaN-poisoned outputs on the reference
interpreter and the simulator, compared element by element against a float64 reference that runs the same `while`
in Python; the stream-K test also runs on the GPU (-m gpu)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from egtile import language as T
from egtile.errors import UnsupportedError
from _check import poisoned
from test_frontend import run

HERE = Path(__file__).resolve()
BK = 32


def line_of(marker: str) -> int:
    for n, text in enumerate(HERE.read_text().splitlines(), 1):
        if marker in text and "line_of(" not in text:
            return n
    raise AssertionError(marker)


def share(pid: int, per: int, extra: int) -> tuple[int, int]:
    return pid * per + min(pid, extra), (pid + 1) * per + min(pid + 1, extra)


def streamk(n_tiles: int, ipt: int, programs: int, *, le: bool = False, flipped: bool = False):
    """Program `pid` walks K iterations [start, last) of the flattened (tile, k) space, one pass per tile it
    touches: it sums that tile's K slices it owns into Out[pid, tile], counts its passes and stores where its
    walk ended (the loop variable after the loop)."""
    total = n_tiles * ipt
    per, extra = total // programs, total % programs

    @T.prim_func
    def main(X: T.Tensor((n_tiles, ipt * BK), "float32"), Out: T.Tensor((programs, n_tiles), "float32"),
             Passes: T.Tensor((programs,), "int32"), Last: T.Tensor((programs,), "int32")):
        with T.Kernel(programs, threads=64) as pid:
            s = T.alloc_local((1,), "int32")
            e = T.alloc_local((1,), "int32")
            passes = T.alloc_var(T.int32)
            acc = T.alloc_fragment((1, BK), "float32")
            row = T.alloc_fragment((1,), "float32")
            s[0] = pid * per + T.min(pid, extra)
            last = (pid + 1) * per + T.min(pid + 1, extra)
            passes = 0
            if le:
                while s[0] <= last - 1:
                    e[0] = T.min(s[0] + (ipt - s[0] % ipt), last)
                    tile = s[0] // ipt
                    T.clear(acc)
                    for k in T.serial(e[0] - s[0]):
                        for i, j in T.Parallel(1, BK):
                            acc[i, j] += X[tile, (s[0] % ipt + k) * BK + j]
                    T.reduce_sum(acc, row, dim=1)
                    Out[pid, tile] = row[0]
                    passes += 1
                    s[0] = e[0]
            elif flipped:
                while last > s[0]:
                    e[0] = T.min(s[0] + (ipt - s[0] % ipt), last)
                    tile = s[0] // ipt
                    T.clear(acc)
                    for k in T.serial(e[0] - s[0]):
                        for i, j in T.Parallel(1, BK):
                            acc[i, j] += X[tile, (s[0] % ipt + k) * BK + j]
                    T.reduce_sum(acc, row, dim=1)
                    Out[pid, tile] = row[0]
                    passes += 1
                    s[0] = e[0]
            else:
                while s[0] < last:
                    e[0] = T.min(s[0] + (ipt - s[0] % ipt), last)
                    tile = s[0] // ipt
                    T.clear(acc)
                    for k in T.serial(e[0] - s[0]):
                        for i, j in T.Parallel(1, BK):
                            acc[i, j] += X[tile, (s[0] % ipt + k) * BK + j]
                    T.reduce_sum(acc, row, dim=1)
                    Out[pid, tile] = row[0]
                    passes += 1
                    s[0] = e[0]
            Passes[pid] = passes
            Last[pid] = s[0]

    return main


def reference(x: torch.Tensor, n_tiles: int, ipt: int, programs: int):
    """The same walk in Python, float64; tiles a program does not touch stay NaN (its outputs are poisoned)."""
    total = n_tiles * ipt
    per, extra = total // programs, total % programs
    out = torch.full((programs, n_tiles), float("nan"), dtype=torch.float64)
    passes, last_v = [], []
    xs = x.double().view(n_tiles, ipt, BK).sum(2)
    for pid in range(programs):
        s, last = share(pid, per, extra)
        n = 0
        while s < last:
            e = min(s + (ipt - s % ipt), last)
            out[pid, s // ipt] = xs[s // ipt, s % ipt:s % ipt + (e - s)].sum()
            n += 1
            s = e
        passes.append(n)
        last_v.append(s)
    return out, torch.tensor(passes, dtype=torch.int32), torch.tensor(last_v, dtype=torch.int32)


CASES = [(3, 4, 2), (5, 3, 4), (2, 8, 3), (4, 2, 8)]  # the last: more programs than passes for some


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("n_tiles,ipt,programs", CASES)
@pytest.mark.parametrize("form", ["lt", "le", "flipped"])
def test_a_stream_k_walk_matches_the_python_while(target, n_tiles, ipt, programs, form):
    if target == "sim" and form != "lt" and (n_tiles, ipt, programs) != CASES[0]:
        pytest.skip("the other test forms run on the simulator for the first case only (time)")
    x = torch.randn(n_tiles, ipt * BK, generator=torch.Generator().manual_seed(n_tiles * 31 + ipt + programs))
    out = poisoned((programs, n_tiles), torch.float32, "cpu")
    passes, last = poisoned((programs,), torch.int32, "cpu"), poisoned((programs,), torch.int32, "cpu")
    run(streamk(n_tiles, ipt, programs, le=form == "le", flipped=form == "flipped"), x, out, passes, last,
        target=target)
    ref, ref_passes, ref_last = reference(x, n_tiles, ipt, programs)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert torch.equal(passes, ref_passes) and torch.equal(last, ref_last)


@pytest.mark.gpu
@pytest.mark.parametrize("n_tiles,ipt,programs", CASES)
def test_a_stream_k_walk_matches_the_python_while_on_the_gpu(n_tiles, ipt, programs):
    x = torch.randn(n_tiles, ipt * BK)
    out = poisoned((programs, n_tiles), torch.float32, "cpu")
    passes, last = poisoned((programs,), torch.int32, "cpu"), poisoned((programs,), torch.int32, "cpu")
    run(streamk(n_tiles, ipt, programs), x, out, passes, last, target="cuda")
    ref, ref_passes, ref_last = reference(x, n_tiles, ipt, programs)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert torch.equal(passes, ref_passes) and torch.equal(last, ref_last)


# ---- refusals ---------------------------------------------------------------------------------------------------


def _refused(match: str):
    return pytest.raises(UnsupportedError, match=r"`while` on a runtime value that is not a counted loop.*this one is "
                                                 r"not: " + match)


def test_a_variable_that_may_not_move_up_is_refused():
    with _refused(r"egtile cannot prove that a pass moves s\[0\] up by at least 1") as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "int32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_local((1,), "int32")
                s[0] = 0
                while s[0] < 8:  # mark-no-progress
                    s[0] = T.max(s[0] + A[s[0]], 0)

    assert e.value.loc.line == line_of("# mark-no-progress")


def test_a_variable_moved_inside_a_branch_is_refused():
    with _refused(r"the body writes s\[0\] where its value cannot be followed") as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_local((1,), "int32")
                s[0] = 0
                while s[0] < 8:  # mark-branch
                    A[s[0]] = 1.0
                    if A[0] > 0.0:
                        s[0] = s[0] + 1

    assert e.value.loc.line == line_of("# mark-branch")


def test_a_bound_the_body_writes_is_refused():
    with _refused(r"the body writes n, which the bound reads") as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_local((1,), "int32")
                n = T.alloc_local((1,), "int32")
                s[0] = 0
                n[0] = 8
                while s[0] < n[0]:  # mark-bound
                    A[s[0]] = 1.0
                    n[0] = n[0] + 1
                    s[0] = s[0] + 2

    assert e.value.loc.line == line_of("# mark-bound")


def test_a_break_is_refused():
    with _refused(r"the body has a `break` at line \d+") as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_local((1,), "int32")
                s[0] = 0
                while s[0] < 8:  # mark-guarded-break
                    A[s[0]] = 1.0
                    s[0] = T.min(s[0] + 3, 8)
                    if s[0] > 100:
                        break

    assert e.value.loc.line == line_of("# mark-guarded-break")


def test_a_variable_that_is_not_a_local_element_is_refused():
    with _refused(r"the variable side of its test is not an element of a local variable") as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32"), S: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=32):
                while S[0] < 8:  # mark-global
                    A[S[0]] = 1.0
                    S[0] = S[0] + 1

    assert e.value.loc.line == line_of("# mark-global")


# ---- wrap-around and trip counts (fresh-user findings) ------------------------------------------------------------


def wrapping(dtype: str, v0: int, bound: int, step: int):
    @T.prim_func
    def main(Out: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=32):
            s = T.alloc_local((1,), dtype)
            n = T.alloc_var(T.int32)
            n = 0
            s[0] = v0
            while s[0] < bound:  # mark-wrap
                s[0] = s[0] + step
                n += 1
            Out[0] = n
            Out[1] = T.cast(s[0], "int32")

    return main


@pytest.mark.parametrize("dtype,v0,bound,step", [("uint8", 240, 250, 100), ("int8", 100, 101, 100)])
def test_an_update_that_may_wrap_around_is_refused(dtype, v0, bound, step):
    with _refused(r"its update .* may wrap around: .* outside " + dtype):
        wrapping(dtype, v0, bound, step)


def test_a_narrowing_cast_in_the_update_is_refused():
    with _refused(r"its update .* may wrap around: T.cast\(s\[0\] \+ 200, 'int8'\) reaches \[200, 200\], outside int8"):
        @T.prim_func
        def main(Out: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_local((1,), "int32")
                s[0] = 0
                while s[0] < 1:
                    s[0] = T.cast(T.cast(s[0] + 200, "int8"), "int32")
                Out[0] = s[0]


def test_a_trip_count_that_may_not_fit_int32_is_refused():
    with _refused(r"egtile cannot bound its trip count `bound - v0` within int32"):
        @T.prim_func
        def main(V: T.Tensor((2,), "int32"), Out: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_local((1,), "int32")
                s[0] = V[0]
                while s[0] < V[1]:  # both read from memory: the whole int32 range each
                    s[0] = s[0] + 1000000000
                Out[0] = s[0]


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("dtype,v0,bound,step", [("uint32", 7, 3, 1), ("int8", -100, 100, 1), ("uint8", 3, 240, 7)])
def test_narrow_and_unsigned_variables_match_the_python_while(target, dtype, v0, bound, step):
    out = poisoned((2,), torch.int32, "cpu")
    run(wrapping(dtype, v0, bound, step), out, target=target)
    s, n = v0, 0
    while s < bound:
        s, n = s + step, n + 1
    assert out.tolist() == [n, s]
