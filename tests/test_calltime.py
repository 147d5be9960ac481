"""Sizes and scalars bound when a kernel is called (egtile.language.calltime, egtile.callbind): ``T.dynamic`` in an
``@egtile.jit`` kernel factory and scalar kernel parameters, with TileLang's semantics: one specialized kernel
per distinct binding (cached), the binding read from the tensors' shapes, every use of the name its value."""

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ArgumentError, ShapeError, UnsupportedError


@egtile.jit(target="interp")
def row_sums(N: int = 16, block: int = 8):
    M = T.dynamic("M")  # the rows: bound per call from X's shape
    shape = [M, N]

    @T.prim_func
    def main(X: T.Tensor(shape, "float32"), S: T.Tensor((M,), "float32"),
             P: T.Tensor((T.ceildiv(M, block), N), "float32")):
        with T.Kernel(T.ceildiv(M, block), threads=32) as bx:  # the grid from M
            for i in T.serial(block):
                if bx * block + i < M:  # a guard with M
                    acc = T.alloc_var("float32", 0.0)
                    for j in T.serial(N):
                        acc += X[bx * block + i, j]
                    S[bx * block + i] = acc
            for j in T.Parallel(N):
                P[bx, j] = X[T.min(bx * block, M - 1), j]  # an index with M

    return main


def _row_sums_ref(X, block):
    m = X.shape[0]
    P = torch.stack([X[min(b * block, m - 1)] for b in range(-(-m // block))])
    return X.sum(1), P


@pytest.mark.parametrize("m", [13, 24])
def test_dynamic_size_is_bound_from_the_tensor_shape_at_each_call(m):
    kernel = row_sums()
    X = torch.randn(m, 16)
    S = torch.full((m,), float("nan"))
    P = torch.full((-(-m // 8), 16), float("nan"))
    kernel(X, S, P)
    ref_s, ref_p = _row_sums_ref(X.double(), 8)
    torch.testing.assert_close(S.double(), ref_s, rtol=1e-5, atol=1e-5)
    assert torch.equal(P.double(), ref_p)


def test_one_kernel_per_binding_cached_and_reused():
    kernel = row_sums()
    runs = []
    for m in (9, 17, 9):
        X = torch.randn(m, 16)
        S = torch.full((m,), float("nan"))
        P = torch.full((-(-m // 8), 16), float("nan"))
        kernel(X, S, P)
        runs.append(kernel.last)
        torch.testing.assert_close(S.double(), X.double().sum(1), rtol=1e-5, atol=1e-5)
    assert runs[0] is runs[2] and runs[0] is not runs[1]
    assert runs[0].kernel.params[0].shape == (9, 16) and runs[1].kernel.params[0].shape == (17, 16)
    assert row_sums() is kernel  # the factory's own cache: one CallBoundKernel per factory arguments


def test_two_tensors_that_disagree_on_a_dynamic_size_are_refused_naming_both():
    kernel = row_sums()
    with pytest.raises(ShapeError) as info:
        kernel(torch.randn(16, 16), torch.empty(12), torch.empty(2, 16))
    msg = str(info.value)
    assert "'M' is 16 from tensor X (dimension 0) but 12 from tensor S (dimension 0)" in msg
    with pytest.raises(ShapeError, match="tensor P .* needs 2 in dimension 0"):
        kernel(torch.randn(16, 16), torch.empty(16), torch.empty(3, 16))


def _scaled_copy(N: int = 16, block: int = 8):
    M = T.dynamic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), n: T.int32, alpha: T.float32, Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
            for i, j in T.Parallel(block, N):
                if bx * block + i < M:
                    Y[bx * block + i, j] = X[bx * block + i, j] * alpha + T.cast(n * (j % 3), "float32")

    return main


@pytest.mark.parametrize("target, calls", [("sim", [(20, 3, 0.5)]), ("interp", [(20, 3, 0.5), (8, -2, 1.25)])])
def test_scalar_parameters_and_a_dynamic_size_with_out_idx(target, calls):
    kernel = egtile.jit(out_idx=[-1], target=target)(_scaled_copy)()
    for m, n, alpha in calls:
        X = torch.randn(m, 16)
        Y = kernel(X, n, alpha)
        ref = X.double() * alpha + (n * (torch.arange(16) % 3)).double()
        torch.testing.assert_close(Y.double(), ref, rtol=1e-6, atol=1e-6)
    with pytest.raises(ArgumentError, match="scalar parameter n: T.int32 expects"):
        kernel(torch.randn(8, 16), 1.5, 1.0)
    with pytest.raises(ArgumentError, match="takes 3 argument"):
        kernel(torch.randn(8, 16), 1)


@T.prim_func
def repeat_rows(X: T.Tensor((8,), "float32"), reps: T.int32, Y: T.Tensor((4, 8), "float32")):  # mark-scalar-param
    with T.Kernel(1, threads=32):
        for r in T.serial(reps):  # a loop bounded by the scalar
            for j in T.Parallel(8):
                Y[r, j] = X[j] * (r + 1)


def test_a_module_level_prim_func_with_a_scalar_parameter_is_specialized_per_value():
    kernel = egtile.compile(repeat_rows, target="interp")
    for reps in (2, 4):
        X = torch.randn(8)
        Y = torch.full((4, 8), float("nan"))
        kernel(X, reps, Y)
        for r in range(4):
            if r < reps:
                assert torch.equal(Y[r], X * float(r + 1))  # one float32 product, rounded once on both sides
            else:
                assert torch.isnan(Y[r]).all()  # rows past the bound are never written


def test_dynamic_outside_a_jit_factory_and_decisions_on_an_unbound_size_are_refused():
    def factory():
        M = T.dynamic("M")

        @T.prim_func
        def main(X: T.Tensor((M,), "float32")):
            with T.Kernel(1, threads=32):
                X[0] = 1.0

        return main

    with pytest.raises(UnsupportedError, match="needs the kernel factory decorated with @egtile.jit"):
        factory()

    @egtile.jit(target="interp")
    def decides():
        M = T.dynamic("M")
        block = 64 if M > 128 else 32  # a decision on a value known only at the call

        @T.prim_func
        def main(X: T.Tensor((M,), "float32")):
            with T.Kernel(1, threads=block):
                X[0] = 1.0

        return main

    with pytest.raises(UnsupportedError, match="uses T.dynamic size 'M' as a number"):
        decides()


def test_a_size_named_only_by_an_output_cannot_be_bound():
    @egtile.jit(out_idx=[-1], target="interp")
    def f():
        M, K = T.dynamic("M, K")

        @T.prim_func
        def main(X: T.Tensor((M,), "float32"), Y: T.Tensor((K,), "float32")):
            with T.Kernel(1, threads=32):
                Y[0] = X[0]

        return main

    with pytest.raises(ArgumentError, match="size.s. K of tensor Y .* in no input tensor's shape"):
        f()(torch.randn(4))


# ---- eager functions: sizes computed before the annotation that binds them ------------------------------------


@egtile.jit(target="interp")
def group_means(X, S, group: int = 4):
    M, G, K = T.const("M, G, K")
    groups = T.ceildiv(K, group)  # T.ceildiv of a name no annotation has bound yet
    S: T.Tensor((M * G,), T.float32)  # computed from G, which only the next annotation binds
    X: T.Tensor((G, M, K), T.float32)
    Out = T.empty((G, M, groups), T.float32)
    with T.Kernel(G, threads=32) as g:
        for i, c in T.Parallel(M, groups):
            acc = T.alloc_var("float32", 0.0)
            for k in T.serial(group):
                acc += X[g, i, c * group + k]
            Out[g, i, c] = acc / group + S[g * M + i]
    return Out


def test_eager_sizes_computed_from_names_a_later_annotation_binds():
    X = torch.randn(3, 5, 8)
    S = torch.randn(15)
    out = group_means(X, S)
    ref = X.double().reshape(3, 5, 2, 4).mean(-1) + S.double().reshape(3, 5, 1)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ShapeError, match="tensor S of 'group_means' has 14 in dimension 0; its annotation computes 15"):
        group_means(X, torch.randn(14))


@egtile.jit
def _tiles_of(Q, DQ, dim, BS=16):
    # TileLang's NSA backward: a tile count from egtile.cdiv of a T.const before the annotation that binds it
    batch, seq_len = T.const("batch, seq_len")
    NS = egtile.cdiv(seq_len, BS)
    dq_shape = [NS, batch, seq_len, dim]
    Q: T.Tensor([batch, seq_len, dim], "float32")
    DQ: T.Tensor(dq_shape, "float32")
    with T.Kernel(NS, batch, threads=32) as (i_s, i_b):
        for i, d in T.Parallel(BS, dim):
            DQ[i_s, i_b, i_s * BS + i, d] = Q[i_b, i_s * BS + i, d] * 2.0


def test_cdiv_of_a_name_a_later_annotation_binds():
    for seq_len in (48, 40):  # 40 = 2.5 tiles of 16: cdiv gives 3, the last tile's stores past row 40 are masked
        Q = torch.randn(2, seq_len, 8)
        DQ = torch.full((3, 2, seq_len, 8), float("nan"))
        _tiles_of(Q, DQ, dim=8)
        want = torch.full((3, 2, seq_len, 8), float("nan"), dtype=torch.float64)
        for s in range(3):
            want[s, :, s * 16:(s + 1) * 16] = 2 * Q[:, s * 16:(s + 1) * 16].double()
        torch.testing.assert_close(DQ.double(), want, equal_nan=True)
    with pytest.raises(ShapeError, match="dimension 0"):
        _tiles_of(Q, torch.zeros(4, 2, 40, 8), dim=8)


@pytest.mark.gpu
def test_call_time_sizes_and_scalars_on_the_gpu():
    kernel = egtile.jit(out_idx=[-1], target="cuda")(_scaled_copy)()
    for m, n, alpha in [(20, 3, 0.5), (8, -2, 1.25)]:
        X = torch.randn(m, 16, device="cuda")
        Y = kernel(X, n, alpha)
        ref = X.double() * alpha + (n * (torch.arange(16, device="cuda") % 3)).double()
        torch.testing.assert_close(Y.double(), ref, rtol=1e-6, atol=1e-6)


@T.prim_func
def typed_scalars(X: T.Tensor((8,), "float32"), u: T.uint8, n: T.int32, h: T.float16,
                  Y: T.Tensor((8,), "float32")):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(8):
            Y[i] = T.if_then_else(u < 200, X[i], -1.0) + T.if_then_else(i < n, 0.0, 100.0) + T.cast(h, "float32")


@pytest.mark.parametrize("u, n", [(300, 4), (-1, 4), (3, 2**31), (3, -(2**31) - 1)])
def test_a_scalar_outside_its_dtype_is_refused_not_wrapped(u, n):
    k = egtile.compile(typed_scalars, out_idx=[-1], target="sim")
    with pytest.raises(ArgumentError, match="outside T.(uint8|int32)'s range"):
        k(torch.randn(8), u, n, 0.5)


def test_a_float_scalar_holds_its_dtypes_value():
    k = egtile.compile(typed_scalars, out_idx=[-1], target="sim")
    X = torch.randn(8)
    for h in (0.1, 70000.0):
        want = X.double() + torch.where(torch.arange(8) < 5, 0.0, 100.0).double() + \
            float(torch.tensor(h, dtype=torch.float16).float())
        torch.testing.assert_close(k(X, 3, 5, h).double(), want, rtol=2.0**-24, atol=0.0)


def test_an_empty_tensor_for_a_dynamic_size_is_refused_at_the_call():
    # It was refused at the T.Tensor annotation ("shape entries must be positive, got (0,)"), naming neither the
    # call nor the tensor (a fresh user's report).
    @egtile.jit(out_idx=[1], target="interp")
    def copy_rows():
        M = T.dynamic("M")

        @T.prim_func
        def main(X: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, 32), threads=32) as bx:
                for i in T.Parallel(32):
                    Y[bx * 32 + i] = X[bx * 32 + i]

        return main

    with pytest.raises(ShapeError, match=r"tensor X has shape \(0,\), which binds T.dynamic size 'M' to 0") as err:
        copy_rows()(torch.randn(0))
    assert "copy_rows()(torch.randn(0))" in err.value.loc.text
