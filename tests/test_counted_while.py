"""A counted `while` on a runtime value (egtile.language.counted): `while v < bound: ...; v = v + step` is a serial
loop over its computed trip count, with TileLang's meaning (the value of `v` in each iteration, and after the loop
the first value that fails the test); every `while` on a runtime value that is not provably counted is refused at
its line, naming the condition it fails.

Each semantic test runs a kernel of our own on fresh random inputs with NaN-poisoned outputs on the reference
interpreter and the simulator, compared element by element against a torch reference computed in float64; the
grid-strided test also runs on the H200 (-m gpu)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from egtile import language as T
from egtile.errors import UnsupportedError
from test_frontend import run

HERE = Path(__file__).resolve()
CPU = ("interp", "sim")


def line_of(marker: str) -> int:
    for n, text in enumerate(HERE.read_text().splitlines(), 1):
        if marker in text and "line_of(" not in text:
            return n
    raise AssertionError(marker)


def visits(n_blocks: int, n_split: int, le: bool = False) -> dict[int, list[int]]:
    """The row blocks each program visits in TileLang's `while bx < n_blocks: ...; bx = bx + n_split` (Python's
    own while, the reference), and the value of `bx` after the loop under key -1 - program."""
    out: dict[int, list[int]] = {}
    for b in range(n_split):
        bx, seen = b, []
        while (bx <= n_blocks) if le else (bx < n_blocks):
            seen.append(bx)
            bx = bx + n_split
        out[b], out[-1 - b] = seen, [bx]
    return out


def reference(x: torch.Tensor, block: int, n_split: int, n_blocks: int, le: bool = False):
    """Y[row] = 2 * X[row] + bx for the rows of each visited block, the final `bx` per program (float64)."""
    want = visits(n_blocks, n_split, le)
    y = torch.full(x.shape, float("nan"), dtype=torch.float64)
    for b in range(n_split):
        for bx in want[b]:
            rows = slice(bx * block, (bx + 1) * block)
            y[rows] = x[rows].double() * 2.0 + bx
    last = torch.tensor([want[-1 - b][0] for b in range(n_split)], dtype=torch.int32)
    return y, last


# ---- (1) a grid-strided loop over row blocks ---------------------------------------------------------------


def strided_rows(n_rows: int, block: int, n_split: int, cols: int):
    """Programs `b` of `n_split` visit row blocks `b, b + n_split, ...` (`bx`, a `T.alloc_var`, read in the body
    and after the loop)."""
    n_blocks = T.ceildiv(n_rows, block)

    @T.prim_func
    def main(X: T.Tensor((n_rows, cols), "float32"), Y: T.Tensor((n_rows, cols), "float32"),
             Last: T.Tensor((n_split,), "int32")):
        with T.Kernel(n_split, threads=64) as b:
            s = T.alloc_shared((block, cols), "float32")
            bx = T.alloc_var(T.int32)
            bx = b
            while bx < n_blocks:
                T.copy(X[bx * block:(bx + 1) * block, :], s)
                for i, j in T.Parallel(block, cols):
                    Y[bx * block + i, j] = s[i, j] * 2.0 + bx
                bx = bx + n_split
            Last[b] = bx

    return main


# (rows, block, n_split): 5 blocks over 3 programs (2, 2, 1 trips), and 3 blocks over 5 programs (programs 3
# and 4 run no iteration; 5 is not a multiple of 3 and 3 is not one of 5)
SHAPES = [(40, 8, 3), (24, 8, 5)]


@pytest.mark.parametrize("target", CPU)
@pytest.mark.parametrize("rows,block,n_split", SHAPES)
@pytest.mark.parametrize("make", ["strided_rows", "strided_rows_augassign"])
def test_a_grid_strided_while_visits_each_block_once(target, rows, block, n_split, make):
    cols = 16
    x = torch.randn(rows, cols)
    y = torch.full((rows, cols), float("nan"))
    last = torch.full((n_split,), -12345, dtype=torch.int32)
    run(globals()[make](rows, block, n_split, cols), x, y, last, target=target)
    want_y, want_last = reference(x, block, n_split, rows // block)
    torch.testing.assert_close(y.double(), want_y, rtol=0, atol=1e-6)
    assert torch.equal(last, want_last), (last, want_last)


@pytest.mark.gpu
@pytest.mark.parametrize("rows,block,n_split", SHAPES)
def test_a_grid_strided_while_visits_each_block_once_on_the_gpu(rows, block, n_split):
    cols = 16
    x = torch.randn(rows, cols)
    y = torch.full((rows, cols), float("nan"))
    last = torch.full((n_split,), -12345, dtype=torch.int32)
    run(strided_rows(rows, block, n_split, cols), x, y, last, target="cuda")
    want_y, want_last = reference(x, block, n_split, rows // block)
    torch.testing.assert_close(y.double(), want_y, rtol=0, atol=1e-6)
    assert torch.equal(last, want_last), (last, want_last)


def strided_rows_data_bound(n_rows: int, block: int, n_split: int, cols: int):
    """The same loop with its bound read from tensor data (a runtime trip count) and `bx` a plain name."""

    @T.prim_func
    def main(X: T.Tensor((n_rows, cols), "float32"), NB: T.Tensor((1,), "int32"),
             Y: T.Tensor((n_rows, cols), "float32"), Last: T.Tensor((n_split,), "int32")):
        with T.Kernel(n_split, threads=64) as b:
            s = T.alloc_shared((block, cols), "float32")
            bx = b
            while NB[0] > bx:
                T.copy(X[bx * block:(bx + 1) * block, :], s)
                for i, j in T.Parallel(block, cols):
                    Y[bx * block + i, j] = s[i, j] * 2.0 + bx
                bx = n_split + bx
            Last[b] = bx

    return main


@pytest.mark.parametrize("target", CPU)
@pytest.mark.parametrize("n_blocks", [0, 2, 4, 7])
def test_a_grid_strided_while_with_a_bound_read_from_tensor_data(target, n_blocks):
    rows, block, n_split, cols = 56, 8, 3, 16
    x = torch.randn(rows, cols)
    y = torch.full((rows, cols), float("nan"))
    last = torch.full((n_split,), -12345, dtype=torch.int32)
    run(strided_rows_data_bound(rows, block, n_split, cols), x, torch.tensor([n_blocks], dtype=torch.int32), y, last,
        target=target)
    want_y, want_last = reference(x, block, n_split, n_blocks)
    visited = ~torch.isnan(want_y)
    torch.testing.assert_close(y.double()[visited], want_y[visited], rtol=0, atol=1e-6)
    assert torch.isnan(y[~visited]).all()  # rows of blocks past the bound are never written
    assert torch.equal(last, want_last), (last, want_last)


# ---- (2) `current = v ... v = current + s`, and (3) `<=` ---------------------------------------------------


def aliased_rows(n_rows: int, block: int, n_split: int, cols: int, le: bool):
    """TileLang's AMD attention form: `current = bx` at the top of the body, `bx = current + n_split` last; with
    `le`, the loop runs to the last block inclusive (`while bx <= last_block`)."""
    n_blocks = T.ceildiv(n_rows, block)
    last_block = n_blocks - 1

    @T.prim_func
    def main(X: T.Tensor((n_rows, cols), "float32"), Y: T.Tensor((n_rows, cols), "float32"),
             Last: T.Tensor((n_split,), "int32")):
        with T.Kernel(n_split, threads=64) as b:
            bx = T.alloc_var(T.int32)
            bx = b
            if le:
                while bx <= last_block:
                    current = bx
                    offset = current * block
                    for i, j in T.Parallel(block, cols):
                        Y[offset + i, j] = X[offset + i, j] * 2.0 + bx
                    bx = current + n_split
            else:
                while bx < n_blocks:
                    current = bx
                    offset = current * block
                    for i, j in T.Parallel(block, cols):
                        Y[offset + i, j] = X[offset + i, j] * 2.0 + current
                    bx = current + n_split
            Last[b] = bx

    return main


@pytest.mark.parametrize("target", CPU)
@pytest.mark.parametrize("le", [False, True], ids=["lt", "le"])
@pytest.mark.parametrize("rows,block,n_split", SHAPES)
def test_the_current_plus_step_form_and_le(target, le, rows, block, n_split):
    cols = 16
    x = torch.randn(rows, cols)
    y = torch.full((rows, cols), float("nan"))
    last = torch.full((n_split,), -12345, dtype=torch.int32)
    run(aliased_rows(rows, block, n_split, cols, le), x, y, last, target=target)
    n_blocks = rows // block
    want_y, want_last = reference(x, block, n_split, n_blocks - 1 if le else n_blocks, le=le)
    torch.testing.assert_close(y.double(), want_y, rtol=0, atol=1e-6)
    assert torch.equal(last, want_last), (last, want_last)


def test_le_and_lt_visit_the_same_blocks_here_but_the_reference_tells_them_apart():
    """The `<=` reference is not the `<` one shifted by accident: with the bound as the last block it visits the
    same blocks, with the bound as the block count it visits one more."""
    assert visits(5, 3, le=True)[1] == [1, 4] and visits(4, 3, le=True)[1] == [1, 4]
    assert visits(4, 3)[1] == [1] and visits(4, 3, le=True)[-2] == [7]


# ---- Python-valued whiles keep Python's meaning -------------------------------------------------------------


def python_whiles(n: int):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            i = 0
            while i < n:  # a counted shape on Python values: unrolled while tracing, as Python runs it
                Y[i] = X[i] * 3.0
                i = i + 1
            j = n
            while j > 0:  # not counted-shaped (decreasing): Python's loop
                j -= 2
            else:
                Y[0] = Y[0] + j  # j == 0 or -1 after Python's loop
    return main


@pytest.mark.parametrize("target", CPU)
@pytest.mark.parametrize("n", [4, 5])
def test_python_valued_whiles_keep_pythons_meaning(target, n):
    x = torch.randn(n)
    y = torch.full((n,), float("nan"))
    run(python_whiles(n), x, y, target=target)
    want = x.double() * 3.0
    want[0] += -(n % 2)
    torch.testing.assert_close(y.double(), want, rtol=0, atol=1e-6)


# ---- (4) refusals ---------------------------------------------------------------------------------------------


def _refused(match: str):
    return pytest.raises(UnsupportedError, match=r"`while` on a runtime value that is not a counted loop \(" + match)


def test_a_step_that_is_not_positive_is_refused():
    with _refused(r"the step is 0, not a Python int > 0") as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(2, threads=32) as b:
                v = b
                while v < 4:  # mark-step-zero
                    A[v] = 1.0
                    v = v + 0

    assert e.value.loc.line == line_of("# mark-step-zero")


def test_a_runtime_step_is_refused():
    with _refused(r"the step is a runtime value, not a Python int > 0") as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32"), S: T.Tensor((1,), "int32")):
            with T.Kernel(2, threads=32) as b:
                v = b
                while v < 4:  # mark-step-runtime
                    A[v] = 1.0
                    v = v + S[0]

    assert e.value.loc.line == line_of("# mark-step-runtime")


def test_a_variable_assigned_twice_is_refused():
    with _refused(r"`v` is assigned 2 times in the body \(lines (\d+) and (\d+)\)") as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(2, threads=32) as b:
                v = b
                while v < 4:  # mark-twice
                    v = v + 1  # mark-twice-first
                    A[v] = 1.0
                    v = v + 2

    assert e.value.loc.line == line_of("# mark-twice")
    assert f"lines {line_of('# mark-twice-first')} and {line_of('# mark-twice-first') + 2}" in str(e.value)


def test_a_variable_assigned_inside_an_if_is_refused():
    with _refused(r"`v` is assigned inside the `if` at line (\d+)") as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(2, threads=32) as b:
                v = T.alloc_var(T.int32)
                v = b
                while v < 4:  # mark-if
                    A[v] = 1.0
                    if A[v] > 0.5:  # mark-if-inner
                        v = v + 1
                    v = v + 2

    assert e.value.loc.line == line_of("# mark-if")
    assert f"inside the `if` at line {line_of('# mark-if-inner')}" in str(e.value)


def test_a_continue_as_the_last_statement_is_named_as_a_jump():
    with _refused(r"the body has a `continue` at line (\d+)") as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(2, threads=32) as b:
                v = b
                while v < 4:  # mark-continue
                    A[v] = 1.0
                    v = v + 1
                    continue  # mark-continue-inner

    assert e.value.loc.line == line_of("# mark-continue")
    assert f"`continue` at line {line_of('# mark-continue-inner')}" in str(e.value)


def test_a_break_in_the_body_is_refused():
    with _refused(r"the body has a `break` at line (\d+)") as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(2, threads=32) as b:
                v = b
                while v < 4:  # mark-break
                    for k in range(3):
                        if k == 2:
                            break  # a nested loop's own break is fine
                    A[v] = 1.0
                    if v > 100:
                        break  # mark-break-inner
                    v = v + 1

    assert e.value.loc.line == line_of("# mark-break")
    assert f"`break` at line {line_of('# mark-break-inner')}" in str(e.value)


def test_a_bound_the_body_changes_is_refused():
    with _refused(r"the bound `n` reads `n`, which the body assigns \(line (\d+)\)") as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32"), N: T.Tensor((1,), "int32")):
            with T.Kernel(2, threads=32) as b:
                v = b
                n = N[0]
                while v < n:  # mark-bound
                    A[v] = 1.0
                    n = n - 1  # mark-bound-inner
                    v = v + 1

    assert e.value.loc.line == line_of("# mark-bound")
    assert f"(line {line_of('# mark-bound-inner')})" in str(e.value)


def test_a_bound_buffer_the_body_writes_is_refused():
    with _refused(r"the body writes N, which the bound reads") as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32"), N: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=32) as b:
                v = b
                while v < N[0]:  # mark-bound-buffer
                    A[v] = 1.0
                    N[0] = N[0] - 1
                    v = v + 1

    assert e.value.loc.line == line_of("# mark-bound-buffer")


def test_a_store_into_the_variable_elsewhere_is_refused():
    with _refused(r"the body writes `v` at line (\d+) other than as its last statement") as e:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(2, threads=32) as b:
                v = T.alloc_var(T.int32)
                v = b
                while v < 4:  # mark-store
                    A[v] = 1.0
                    v[0] = 7  # mark-store-inner
                    v = v + 1

    assert e.value.loc.line == line_of("# mark-store")
    assert f"at line {line_of('# mark-store-inner')}" in str(e.value)


def test_an_uncounted_test_is_still_refused_with_the_alternative():
    with _refused(r"its test is not `v < bound` or `v <= bound`.*T.serial") as e:
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32) as b:
                v = b
                while v != 4:  # mark-ne
                    A[v] = 1.0
                    v = v + 1

    assert e.value.loc.line == line_of("# mark-ne")


def strided_rows_augassign(n_rows: int, block: int, n_split: int, cols: int):
    """`strided_rows` with the last statement written `bx += n_split` (the same counted loop)."""
    n_blocks = T.ceildiv(n_rows, block)

    @T.prim_func
    def main(X: T.Tensor((n_rows, cols), "float32"), Y: T.Tensor((n_rows, cols), "float32"),
             Last: T.Tensor((n_split,), "int32")):
        with T.Kernel(n_split, threads=64) as b:
            s = T.alloc_shared((block, cols), "float32")
            bx = T.alloc_var(T.int32)
            bx = b
            while bx < n_blocks:
                T.copy(X[bx * block:(bx + 1) * block, :], s)
                for i, j in T.Parallel(block, cols):
                    Y[bx * block + i, j] = s[i, j] * 2.0 + bx
                bx += n_split
            Last[b] = bx

    return main



def test_a_start_and_bound_read_from_memory_whose_difference_may_wrap_are_refused():
    # a fresh-user finding: the trip count was computed in int32 and wrapped (-2e9 .. 2e9 ran no iteration)
    with pytest.raises(UnsupportedError, match=r"egtile cannot bound `bound - bx` within int32"):
        @T.prim_func
        def main(V: T.Tensor((2,), "int32"), Out: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=32):
                bx = V[0]
                while bx < V[1]:
                    Out[0] = bx
                    bx = bx + 1000000000


def test_a_narrow_variable_that_may_wrap_around_is_refused():
    # a fresh-user finding: in C `v + 10` on an int8 wraps from 120 to -126 and the loop never ends
    with pytest.raises(UnsupportedError, match=r"`v` is int8 and may wrap around"):
        @T.prim_func
        def main(Out: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=32):
                v = T.alloc_var("int8")
                v = 0
                while v < 127:
                    Out[0] = T.cast(v, "int32")
                    v = v + 10
