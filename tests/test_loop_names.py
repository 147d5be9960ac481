"""Python names in loops the kernel runs (egtile.language.pyops.Loop, the source front end). A loop that runs on the
GPU (T.serial, T.Parallel, T.Pipelined, range with a runtime bound, a counted while) has its body traced once, so a
Python name holds one traced value for every iteration: it cannot carry a value to the next iteration (``x = x + 2``)
nor out of the loop. Both used to trace silently to a wrong kernel (every iteration read the value from before the
loop) or crash while running (a loop variable read after its loop); both are refused at the user's line now, naming
the variable and ``T.alloc_var``, which carries. A Python loop (``range`` of Python ints) keeps Python's meaning.
Runs on fresh random inputs, outputs poisoned, every element against torch."""

from __future__ import annotations

import inspect

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import DSLError, UnsupportedError

from _check import check, poisoned


def _carried_serial():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), n: T.Tensor((1,), "int32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as _b:
            x = 0.0
            for t in T.serial(n[0]):
                x = x + A[t]
                for j in T.Parallel(8):
                    Y[j] = x
    return k


def _carried_runtime_range():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), n: T.Tensor((1,), "int32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as _b:
            s = 0.0
            for t in range(n[0]):
                if t > 2:
                    s = A[t]
                Y[t] = s
    return k


def _carried_counted_while():
    @T.prim_func
    def k(n: T.Tensor((1,), "int32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as _b:
            x = 0
            v = 0
            while v < n[0]:
                x = x + 2
                for j in T.Parallel(1):
                    Y[v] = T.cast(x, "float32")
                v = v + 1
    return k


def _carried_parallel():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as _b:
            acc = 0.0
            for i in T.Parallel(8):
                acc = acc + A[i]
                Y[i] = acc
    return k


def _line(make, text: str) -> int:
    """The line of ``make``'s source holding ``text`` (the loop statement a refusal points at)."""
    lines, start = inspect.getsourcelines(make)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


@pytest.mark.parametrize("make,name,loop", [(_carried_serial, "x", "for t in T.serial"),
                                            (_carried_runtime_range, "s", "for t in range(n[0])"),
                                            (_carried_counted_while, "x", "while v < n[0]"),
                                            (_carried_parallel, "acc", "for i in T.Parallel(8)")])
def test_a_python_name_carried_between_iterations_of_a_gpu_loop_is_refused(make, name, loop):
    line = _line(make, loop)
    with pytest.raises(UnsupportedError, match=rf"`{name}` is read in the loop at line {line} before the loop body "
                       r"assigns it[\s\S]*T\.alloc_var") as e:
        egtile.compile(make(), target="sim")
    assert e.value.loc is not None and e.value.loc.line == line


def _read_after(loop_var: bool):
    @T.prim_func
    def k(n: T.Tensor((1,), "int32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as _b:
            x = 0
            for v in T.serial(n[0]):
                x = v * 10
            for j in T.Parallel(8):
                Y[j] = T.cast(v if loop_var else x, "float32")
    return k


@pytest.mark.parametrize("loop_var,name", [(False, "x"), (True, "v")])
def test_a_name_a_gpu_loop_assigns_has_no_value_after_it(loop_var, name):
    line = _line(_read_after, "for v in T.serial")
    with pytest.raises(DSLError, match=rf"`{name}` is assigned inside the loop at line {line}[\s\S]*no value after"):
        egtile.compile(_read_after(loop_var), target="sim")


def _alloc_var_carries():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), n: T.Tensor((1,), "int32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as _b:
            x = T.alloc_var("float32")
            x = 0.0
            for t in T.serial(n[0]):
                x = x + A[t]
                tmp = x * 2.0  # a temporary assigned before it is read in the same iteration: no carry
                for j in T.Parallel(1):
                    Y[t] = tmp
            for j in T.Parallel(1):
                Y[7] = x
    return k


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_t_alloc_var_carries_across_iterations_and_out_of_the_loop(target):
    kern = egtile.compile(_alloc_var_carries(), target=target)
    g = torch.Generator().manual_seed(5)
    a = torch.randn(8, generator=g)
    y = poisoned((8,), torch.float32, "cpu")
    kern(a, torch.tensor([6], dtype=torch.int32), y)
    ref = torch.full((8,), float("nan"), dtype=torch.float64)
    ref[:6] = torch.cumsum(a[:6].double(), 0) * 2
    ref[7] = a[:6].double().sum()
    assert check("Y[:6]", y[:6], ref[:6], rtol=1e-5, atol=1e-6) and check("Y[7]", y[7:], ref[7:], rtol=1e-5, atol=1e-6)


def _python_range():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as _b:
            x = 0.0
            for t in range(4):  # Python ints: unrolled while tracing, Python's meaning
                x = x + A[t]
            last = t
            for j in T.Parallel(8):
                Y[j] = x + A[last]
    return k


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_python_range_keeps_pythons_meaning(target):
    kern = egtile.compile(_python_range(), target=target)
    g = torch.Generator().manual_seed(6)
    a = torch.randn(8, generator=g)
    y = poisoned((8,), torch.float32, "cpu")
    kern(a, y)
    assert check("Y", y, (a[:4].double().sum() + a[3].double()).expand(8), rtol=1e-5, atol=1e-6)


def _both_branches_assign():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as _b:
            for i in T.Parallel(8):
                if A[i] > 0:
                    s = A[i]
                else:
                    s = -A[i]
                Y[i] = s
    return k


def test_both_branches_assigning_a_name_is_no_carry_and_the_if_rule_speaks():
    """(A name assigned in a runtime branch has no value after it: egtile's rule for `if`, older than this one.)"""
    with pytest.raises(DSLError, match=r"`s` is assigned inside the `if` on a runtime value"):
        egtile.compile(_both_branches_assign(), target="sim")


def _binding_after(runtime_count: bool, bound_before: bool):
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), n: T.Tensor((1,), "int32"), Y: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=32) as _b:
            if bound_before:
                last = A[7]
            for t in T.serial(n[0] if runtime_count else 6):
                last = A[t] * 3.0  # a let-binding: the value read here, in a local every iteration writes
            Y[0] = last
            Y[1] = last + 1.0
    return k


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_let_binding_after_a_loop_that_runs_holds_the_last_iteration(target):
    kern = egtile.compile(_binding_after(False, False), target=target)
    g = torch.Generator().manual_seed(7)
    a = torch.randn(8, generator=g)
    y = poisoned((2,), torch.float32, "cpu")
    kern(a, torch.tensor([6], dtype=torch.int32), y)
    assert check("Y", y, torch.stack([a[5].double() * 3, a[5].double() * 3 + 1]), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("runtime_count,bound_before", [(True, False), (False, True), (True, True)])
def test_a_let_binding_after_a_loop_that_may_not_run_or_over_an_older_value_is_refused(runtime_count, bound_before):
    """A runtime trip count may be zero (the local never written), and a name bound before the loop would keep its
    old value then: neither is what one traced value can say."""
    with pytest.raises(DSLError, match=r"`last` is assigned inside the loop at line \d+[\s\S]*no value after"):
        egtile.compile(_binding_after(runtime_count, bound_before), target="sim")
