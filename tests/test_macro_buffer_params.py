"""``T.SharedBuffer`` / ``T.FragmentBuffer`` / ``T.LocalBuffer`` as annotations of ``@T.macro`` parameters
(egtile.language.macro): the macro works on the caller's buffer itself, and a buffer of another memory, shape or
dtype is an error at the call."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import DSLError, DTypeError

N = 64


@T.macro
def sort_pairs(keys: T.SharedBuffer([N], dtype=T.float32), vals: T.SharedBuffer([N], dtype=T.int32)):
    """Bitonic sort of ``keys`` (descending) carrying ``vals``, in place, on the caller's shared buffers."""
    T.sync_threads()
    for i1 in T.serial(6):
        for i2 in T.serial(i1 + 1):
            for i in T.Parallel(N):
                up = (i & (1 << (i1 + 1))) != 0
                j = i ^ (1 << (i1 - i2))
                if i < j and ((up and keys[i] > keys[j]) or (not up and keys[i] < keys[j])):
                    t = keys[i]
                    keys[i] = keys[j]
                    keys[j] = t
                    v = vals[i]
                    vals[i] = vals[j]
                    vals[j] = v
            T.sync_threads()


def _sorter():
    @T.prim_func
    def sorter(X: T.Tensor((2, N), "float32"), K: T.Tensor((2, N), "float32"), V: T.Tensor((2, N), "int32")):
        with T.Kernel(2, threads=64) as b:
            ks = T.alloc_shared((N,), "float32")
            vs = T.alloc_shared((N,), "int32")
            for i in T.Parallel(N):
                ks[i] = X[b, i]
                vs[i] = i
            sort_pairs(ks, vs)
            for i in T.Parallel(N):
                K[b, i] = ks[i]
                V[b, i] = vs[i]

    return sorter


@pytest.mark.parametrize("target", ["sim", "interp"])
def test_a_macro_sorts_the_callers_shared_buffers(target):
    k = egtile.compile(_sorter(), target=target)
    X = torch.randn(2, N, generator=torch.Generator().manual_seed(3))
    K = torch.full((2, N), float("nan"))
    V = torch.full((2, N), -7, dtype=torch.int32)
    k(X, K, V)
    # the last merge (i1 = 5) has `up` false for every i < 64: a smaller keys[i] moves behind, descending order
    ref_k, ref_v = torch.sort(X.double(), dim=1, descending=True)
    torch.testing.assert_close(K.double(), ref_k, rtol=0, atol=0)
    torch.testing.assert_close(V.long(), ref_v, rtol=0, atol=0)


def _caller(alloc: str, shape=(N,), dtype="float32"):
    @T.macro
    def scale(buf: T.SharedBuffer([N], dtype=T.float32)):
        for i in T.Parallel(N):
            buf[i] = buf[i] * 2.0

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=64) as _b:
            buf = getattr(T, alloc)(shape, dtype)
            scale(buf)
            for i in T.Parallel(N):
                Y[i] = X[i]

    return main


@pytest.mark.parametrize("alloc, shape, dtype, what", [
    ("alloc_fragment", (N,), "float32", "receives fragment buffer"),
    ("alloc_shared", (N // 2,), "float32", "of shape"),
    ("alloc_shared", (N,), "float16", "of dtype float32"),
])
def test_a_buffer_the_annotation_does_not_describe_is_refused_at_the_call(alloc, shape, dtype, what):
    with pytest.raises(DSLError, match=what) as e:
        egtile.compile(_caller(alloc, shape, dtype), target="sim")
    assert "test_macro_buffer_params.py" in str(e.value) and "T.SharedBuffer" in str(e.value)


def test_fragment_and_local_annotations():
    @T.macro
    def double(f: T.FragmentBuffer, loc: T.LocalBuffer((1,), T.float32)):
        for i in T.Parallel(N):
            f[i] = f[i] * 2.0 + loc[0]

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=64) as _b:
            f = T.alloc_fragment((N,), "float32")
            loc = T.alloc_local((1,), "float32")
            loc[0] = 1.0
            T.copy(X, f)
            double(f, loc)
            T.copy(f, Y)

    X = torch.randn(N, generator=torch.Generator().manual_seed(5))
    Y = torch.full((N,), float("nan"))
    egtile.compile(main, target="sim")(X, Y)
    torch.testing.assert_close(Y, (X.double() * 2 + 1).float(), rtol=0, atol=0)  # one rounding


@pytest.mark.gpu
def test_a_macro_sorts_the_callers_shared_buffers_on_cuda():
    k = egtile.compile(_sorter(), target="cuda")
    X = torch.randn(2, N, generator=torch.Generator().manual_seed(4))
    K = torch.full((2, N), float("nan"), device="cuda")
    V = torch.full((2, N), -7, dtype=torch.int32, device="cuda")
    k(X.cuda(), K, V)
    ref_k, ref_v = torch.sort(X.double(), dim=1, descending=True)
    torch.testing.assert_close(K.double().cpu(), ref_k, rtol=0, atol=0)
    torch.testing.assert_close(V.long().cpu(), ref_v, rtol=0, atol=0)


def test_an_annotation_naming_a_local_of_the_kernel_factory_is_checked():
    """This module has ``from __future__ import annotations``: the annotation is the string
    ``"T.FragmentBuffer([n], accum_dtype)"``, and ``accum_dtype`` / ``n`` are locals of the factory that the macro's
    body does not name (so its closure lacks them). It was evaluated in the globals and closure only, failed, and the
    check was skipped: a float16 fragment passed a float32 annotation."""

    def factory(accum_dtype, buffer_dtype):
        n = N

        @T.macro
        def bump(buf: T.FragmentBuffer([n], accum_dtype)):
            for i in T.Parallel(N):
                buf[i] = buf[i] + 1

        @T.prim_func
        def main(X: T.Tensor((N,), buffer_dtype), Y: T.Tensor((N,), buffer_dtype)):
            with T.Kernel(1, threads=64) as _b:
                f = T.alloc_fragment((N,), buffer_dtype)
                T.copy(X, f)
                bump(f)
                T.copy(f, Y)

        return main

    with pytest.raises(DSLError, match="of dtype float32 but buffer 'f' holds float16") as e:
        factory("float32", "float16")
    assert "test_macro_buffer_params.py" in str(e.value)
    X = torch.randn(N, generator=torch.Generator().manual_seed(int(torch.randint(0, 2 ** 31, ()))))
    Y = torch.full((N,), float("nan"))
    egtile.compile(factory("float32", "float32"), target="sim")(X, Y)
    torch.testing.assert_close(Y, (X.double() + 1).float(), rtol=0, atol=0)


def _twice(dtype_annotation, dtype_alloc):
    """TileLang's attention examples: ``accum_dtype = "float"`` annotates a fragment parameter that
    ``T.alloc_fragment(..., accum_dtype)`` made float32."""

    @T.macro
    def twice(buf: T.FragmentBuffer([N], dtype_annotation)):
        for i in T.Parallel(N):
            buf[i] = buf[i] * 2 + 1

    @T.prim_func
    def main(X: T.Tensor((N,), dtype_alloc), Y: T.Tensor((N,), dtype_alloc)):
        with T.Kernel(1, threads=64) as _b:
            f = T.alloc_fragment((N,), dtype_alloc)
            T.copy(X, f)
            twice(f)
            T.copy(f, Y)

    return main


@pytest.mark.parametrize("target", ["sim", "interp"])
@pytest.mark.parametrize("annotation, alloc, torch_dtype", [
    ("float", "float32", torch.float32),
    ("half", "float16", torch.float16),
    ("fp16", "half", torch.float16),
    (torch.float32, "float", torch.float32),
    (T.float32, "float32", torch.float32),
])
def test_a_dtype_alias_in_the_annotation_names_the_buffers_dtype(annotation, alloc, torch_dtype, target):
    X = torch.randn(N, generator=torch.Generator().manual_seed(int(torch.randint(0, 2 ** 31, ())))).to(torch_dtype)
    Y = torch.full((N,), float("nan"), dtype=torch_dtype)
    egtile.compile(_twice(annotation, alloc), target=target)(X, Y)
    want = (X.double() * 2 + 1).to(torch_dtype)  # x * 2 is exact: one rounding, of the sum
    torch.testing.assert_close(Y, want, rtol=0, atol=0)


def test_an_alias_of_another_dtype_is_still_refused_and_an_unknown_one_is_named():
    with pytest.raises(DSLError, match="of dtype float16 but buffer 'f' holds float32") as e:
        egtile.compile(_twice("half", "float32"), target="sim")
    assert "test_macro_buffer_params.py" in str(e.value) and "T.FragmentBuffer" in str(e.value)
    with pytest.raises(DTypeError, match="T.FragmentBuffer of dtype flaot: unknown dtype 'flaot'") as e:
        egtile.compile(_twice("flaot", "float32"), target="sim")
    assert "test_macro_buffer_params.py" in str(e.value)



def _symbolic_annotation(target):
    @egtile.jit(out_idx=[1], target=target)
    def factory(n=N):
        m = T.symbolic("m")

        @T.macro
        def twice(buf: T.FragmentBuffer([m], "float")):
            for i in T.Parallel(n):
                buf[i] = buf[i] * 2 - 1

        @T.prim_func
        def main(X: T.Tensor((m,), "float32"), Y: T.Tensor((m,), "float32")):
            with T.Kernel(1, threads=64) as _b:
                f = T.alloc_fragment((n,), "float32")
                T.copy(X[0:n], f)
                twice(f)
                T.copy(f, Y[0:n])

        return main

    return factory


@pytest.mark.parametrize("target", ["sim", "interp"])
def test_a_symbolic_size_in_the_annotation_is_the_one_bound_for_the_call(target):
    """``T.symbolic`` in an ``@egtile.jit`` factory is bound per call from the tensors' shapes; the annotation's
    entry is that size, so it matches a fragment of that extent and refuses one of another."""
    X = torch.randn(N, generator=torch.Generator().manual_seed(int(torch.randint(0, 2 ** 31, ()))))
    torch.testing.assert_close(_symbolic_annotation(target)()(X), (X.double() * 2 - 1).float(), rtol=0, atol=0)
    with pytest.raises(DSLError, match=r"T.FragmentBuffer of shape \(128,\) but buffer 'f' has shape \(64,\)"):
        _symbolic_annotation(target)()(torch.randn(2 * N))
