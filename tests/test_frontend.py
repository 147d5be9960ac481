"""The source front end (egtile.language.source, pyops, letbind): Python control flow and bindings on runtime values
mean what they mean in TileLang, and every kernel that traced before traces to the same IR.

Each semantic test runs a kernel of our own on fresh random inputs with NaN-poisoned outputs, on the reference
interpreter and the simulator, against a torch (float64 where it matters) reference; the let-binding test also
runs on the H200 (-m gpu)."""

from __future__ import annotations

import importlib
import inspect
import warnings
from pathlib import Path

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import DSLError, UnsupportedError
from egtile.language.source import SourceUnavailableWarning

HERE = Path(__file__).resolve()
CPU = ("interp", "sim")


def line_of(marker: str) -> int:
    for n, text in enumerate(HERE.read_text().splitlines(), 1):
        if marker in text and "line_of(" not in text:
            return n
    raise AssertionError(marker)


def nan(*shape, dtype=torch.float32, device="cpu"):
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def run(func, *tensors, target):
    egtile.compile(func, target=target)(*tensors)


# ---- let-bindings ------------------------------------------------------------------------------------------


def let_before_atomic(n: int = 128):
    """The issue's case: ``v`` is the value read before the atomic, not after it."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), Out: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128):
            for tx in T.Parallel(n):
                v = A[tx]
                T.atomic_add(A[tx], 1.0)
                Out[tx] = v

    return main


@pytest.mark.parametrize("target", CPU)
def test_a_let_binding_is_the_value_read_before_a_later_atomic(target):
    a = torch.randn(128)
    a0, out = a.clone(), nan(128)
    run(let_before_atomic(), a, out, target=target)
    assert torch.equal(out, a0), "v must hold A[tx] as read before the atomic"
    assert torch.equal(a, a0 + 1)


@pytest.mark.gpu
def test_a_let_binding_is_the_value_read_before_a_later_atomic_on_the_gpu():
    a = torch.randn(128, device="cuda")
    a0, out = a.clone(), nan(128, device="cuda")
    egtile.compile(let_before_atomic(), target="cuda")(a, out)
    torch.cuda.synchronize()
    assert torch.equal(out, a0) and torch.equal(a, a0 + 1)


def test_a_binding_nothing_overwrites_is_inlined_and_leaves_the_ir_as_before(monkeypatch):
    def make():
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                for i in T.Parallel(64):
                    v = A[i] * 2.0
                    w = v + A[63 - i]
                    B[i] = w - v

        return main

    with_front_end = make().kernel
    monkeypatch.setenv("EGTILE_SOURCE_FRONTEND", "0")
    assert make().kernel == with_front_end
    assert not any(b.scope == "local" for b in with_front_end.allocs)


def block_level_let_then_copy(n: int = 64):
    """A block-level binding of a global element, then a copy that overwrites it: ``first`` is the old value."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), Out: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((n,), "float32")
            T.copy(A, S)
            first = S[0]
            T.copy(B, S)
            for i in T.Parallel(n):
                Out[i] = S[i] + first

    return main


@pytest.mark.parametrize("target", CPU)
def test_a_block_level_binding_survives_a_copy_over_what_it_read(target):
    a, b, out = torch.randn(64), torch.randn(64), nan(64)
    run(block_level_let_then_copy(), a, b, out, target=target)
    assert torch.equal(out, b + a[0])


def binding_used_after_its_loop(n: int = 8):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), Out: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=32):
            for k in T.serial(n):
                last = A[k] * 3.0
            Out[0] = last
            Out[1] = last + 1.0

    return main


@pytest.mark.parametrize("target", CPU)
def test_a_binding_read_after_its_loop_holds_the_last_iteration(target):
    a, out = torch.randn(8), nan(2)
    run(binding_used_after_its_loop(), a, out, target=target)
    assert torch.equal(out, torch.stack([a[-1] * 3, a[-1] * 3 + 1]))


# ---- runtime if / elif / else, and / or / not, conditional expressions -------------------------------------


def branches(n: int = 128):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), Out: T.Tensor((n,), "float32")):
        with T.Kernel(2, threads=64) as bx:
            for t in T.Parallel(64):
                i = bx * 64 + t
                if A[i] > 0 and not B[i] > 0.5:
                    Out[i] = A[i]
                elif A[i] < -1 or B[i] < -1:
                    Out[i] = -A[i] if i % 2 == 0 else B[i]
                elif -0.5 < A[i] <= 0.0:
                    Out[i] = 2.0
                else:
                    Out[i] = 3.0

    return main


def branches_reference(a, b):
    i = torch.arange(a.numel())
    return torch.where((a > 0) & ~(b > 0.5), a,
                       torch.where((a < -1) | (b < -1), torch.where(i % 2 == 0, -a, b),
                                   torch.where((-0.5 < a) & (a <= 0.0), 2.0, 3.0)))


@pytest.mark.parametrize("target", CPU)
def test_runtime_if_elif_else_with_and_or_not_chains_and_conditional_expressions(target):
    a, b, out = torch.randn(128) * 2, torch.randn(128) * 2, nan(128)
    run(branches(), a, b, out, target=target)
    assert torch.equal(out, branches_reference(a, b))


def test_python_values_keep_python_control_flow():
    """On Python values nothing changes: a static if picks its branch at trace time (no T.If in the IR)."""
    from egtile.ir.kernel import If, walk

    def make(flag):
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(4):
                    if flag and 2 < 3 < 4:
                        A[i] = 1.0
                    else:
                        A[i] = 2.0

        return main

    for flag in (True, False):
        k = make(flag).kernel
        assert not any(isinstance(s, If) for s in walk(k.body))
        assert k.body[0].body[0].value.value == (1.0 if flag else 2.0)


def test_a_name_assigned_in_a_runtime_branch_has_no_value_after_it():
    with pytest.raises(DSLError, match=r"`v` is assigned inside the `if` on a runtime value.*T.alloc_var") as e:
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(4):
                    if A[i] > 0:
                        v = A[i]
                    else:
                        v = 0.0
                    A[i] = v + 1.0  # mark-poisoned-use

    assert e.value.loc.line == line_of("# mark-poisoned-use")


def test_break_inside_a_runtime_branch_is_refused_at_its_line():
    with pytest.raises(UnsupportedError, match="`break` inside an `if` on a runtime value") as e:
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(4):
                    for j in range(3):
                        if A[i] > j:
                            break  # mark-break
                    A[i] = 0.0

    assert e.value.loc.line == line_of("# mark-break")


def test_a_runtime_while_is_refused_with_the_alternative():
    with pytest.raises(UnsupportedError, match=r"`while` on a runtime value.*T.serial") as e:
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(4):
                    while A[i] > 0:  # mark-while
                        A[i] = A[i] - 1.0

    assert e.value.loc.line == line_of("# mark-while")


def test_errors_point_at_the_users_line_and_column():
    with pytest.raises(DSLError) as e:
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(4):
                    A[i] = A[i] + T.nope(1)  # mark-column

    loc = e.value.loc
    text = HERE.read_text().splitlines()[loc.line - 1]
    assert loc.line == line_of("# mark-column") and loc.col == text.index("T.nope") + 1
    assert f":{loc.line}:{loc.col}" in str(e.value)


# ---- T.alloc_var and range loops ----------------------------------------------------------------------------


def counting(rows: int = 8, cols: int = 16):
    @T.prim_func
    def main(A: T.Tensor((rows, cols), "float32"), N: T.Tensor((rows,), "int32"), S: T.Tensor((rows,), "float32")):
        with T.Kernel(rows, threads=32) as r:
            count = T.alloc_var(T.int32, 0)
            total = T.alloc_var("float32")
            total = 0.0
            for j in range(r * 2 + 1):  # a bound known when the block runs: a serial loop
                if A[r, j] > 0:
                    count += 1
                total = total + A[r, j]
            for j in range(1, cols, 4):  # a static range unrolls, with its step
                total += A[r, j] * 0.0
            N[r] = count
            S[r] = total

    return main


@pytest.mark.parametrize("target", CPU)
def test_alloc_var_and_runtime_range_loops(target):
    a = torch.randn(8, 16)
    n, s = torch.full((8,), -7, dtype=torch.int32), nan(8)
    run(counting(), a, n, s, target=target)
    mask = torch.arange(16)[None, :] < (torch.arange(8) * 2 + 1)[:, None]
    assert torch.equal(n, ((a > 0) & mask).sum(1).to(torch.int32))
    ref = torch.zeros(8)
    for j in range(16):  # the kernel's summation order, float32
        ref = torch.where(mask[:, j], ref + a[:, j], ref)
    assert torch.equal(s, ref)


def stepped(n: int = 32):
    @T.prim_func
    def main(Out: T.Tensor((2, n), "float32")):
        with T.Kernel(2, threads=32) as b:
            for i in T.Parallel(n):
                Out[b, i] = 0.0
            for k in range(2, 20 + b * 9, 3):  # stop known when the block runs
                Out[b, k] = T.cast(k, "float32")
            for k in T.serial(n - 1, 0, -8):
                Out[b, k] = -1.0

    return main


@pytest.mark.parametrize("target", CPU)
def test_range_with_a_runtime_stop_and_a_step(target):
    out = nan(2, 32)
    run(stepped(), out, target=target)
    ref = torch.zeros(2, 32)
    for b in range(2):
        for k in range(2, 20 + b * 9, 3):
            ref[b, k] = k
        for k in range(31, 0, -8):
            ref[b, k] = -1.0
    assert torch.equal(out, ref)


# ---- fallback and identity ----------------------------------------------------------------------------------


def test_a_kernel_without_source_is_traced_as_before_with_a_warning():
    src = (
        "@T.prim_func\n"
        "def main(A: T.Tensor((4,), 'float32')):\n"
        "    with T.Kernel(1, threads=32):\n"
        "        for i in T.Parallel(4):\n"
        "            A[i] = A[i] * 2.0\n")
    scope = {"T": T}
    with pytest.warns(SourceUnavailableWarning, match="cannot read the source"):
        exec(compile(src, "<generated>", "exec"), scope)  # noqa: S102
    a = torch.randn(4)
    ref = a * 2
    egtile.compile(scope["main"], target="interp")(a)
    assert torch.equal(a, ref)


def _factories():
    """Kernels of the examples and the schedule tests, with the arguments the tests give them."""
    gemm = importlib.import_module("gemm")
    softmax = importlib.import_module("row_softmax")
    ew = importlib.import_module("elementwise_add")
    sk = importlib.import_module("schedule_kernels")
    s1, s2 = importlib.import_module("seed_bug1"), importlib.import_module("seed_bug2")
    out = [lambda: gemm.matmul.fn(64, 64, 96), lambda: softmax.row_softmax.fn(16, 64),
           lambda: s1.bug1_kernel.fn(16, 32, 16, 16), lambda: s2.bug2_kernel.fn(4, 64)]
    out.append(lambda: ew.elementwise_add.fn(64, 64))
    for name in ("cp_async_variant", "copy_consume", "write_after_read", "no_tma", "gemm", "pipelined_gemm",
                 "elementwise", "local_accumulate", "stmt_count_kernel", "late_read"):
        fn = getattr(sk, name)
        params = inspect.signature(fn).parameters
        if all(p.default is not inspect.Parameter.empty for p in params.values()):
            out.append(fn)
        else:
            out.append(lambda fn=fn: fn(0, 4, 2))
    return out


def test_every_example_and_schedule_kernel_traces_to_the_same_ir_with_and_without_the_front_end(monkeypatch):
    import sys

    monkeypatch.setattr(sys, "argv", ["pytest"])  # the examples parse their command line at import
    with warnings.catch_warnings():
        warnings.simplefilter("error", SourceUnavailableWarning)
        kernels = [f().kernel for f in _factories()]
    monkeypatch.setenv("EGTILE_SOURCE_FRONTEND", "0")
    before = [f().kernel for f in _factories()]
    assert len(kernels) >= 12
    for new, old in zip(kernels, before):
        assert new == old, new.name
