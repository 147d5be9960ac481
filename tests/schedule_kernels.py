"""Small kernels for the scheduler's tests (egraph, rules, cost, optimize), written in the DSL.

Each factory returns a traced ``PrimFunc`` (``.kernel`` is the ``ir.Kernel``).
"""

from __future__ import annotations

from egtile import language as T


def cp_async_variant(iters: int = 4, block: int = 16, cp_elems: int = 8, threads: int = 128):
    """TileLang PR #2166's test kernel: an explicit cp.async copy into ``B_shared`` read by the first
    consumer statement, a TMA copy into ``A_shared`` read by the second."""

    @T.prim_func
    def main(A: T.Tensor((iters, block), "float16"), B: T.Tensor((iters, cp_elems), "float16"),
             B_out: T.Tensor((iters,), "float16"), A_out: T.Tensor((iters, block), "float16")):
        with T.Kernel(1, threads=threads) as _bx:
            A_shared = T.alloc_shared((block,), "float16")
            B_shared = T.alloc_shared((cp_elems,), "float16")
            for ko in T.Pipelined(iters, num_stages=2):
                T.async_copy(B[ko, 0:cp_elems], B_shared)
                T.copy(A[ko, 0:block], A_shared)
                B_out[ko] = B_shared[0]
                for i in T.Parallel(block):
                    A_out[ko, i] = A_shared[i]

    return main


def copy_consume(start: int, stop: int, stages: int, width: int = 64, rows: int | None = None):
    """``for k in T.Pipelined(start, stop, num_stages=stages)``: copy row k into shared, then consume it."""
    rows = rows if rows is not None else max(stop, 1)

    @T.prim_func
    def main(In: T.Tensor((rows, width), "float16"), Out: T.Tensor((rows, width), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((width,), "float16")
            for k in T.Pipelined(start, stop, num_stages=stages):
                T.copy(In[k, 0:width], X_s)
                for i in T.Parallel(width):
                    Out[k, i] = X_s[i] * T.float16(2.0)

    return main


def write_after_read(n: int = 4, width: int = 64):
    """Reads shared ``X_s`` and then refills it from global for the next iteration."""

    @T.prim_func
    def main(In: T.Tensor((n + 1, width), "float16"), Out: T.Tensor((n, width), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((width,), "float16")
            T.copy(In[0, 0:width], X_s)
            for k in T.Pipelined(n, num_stages=2):
                for i in T.Parallel(width):
                    Out[k, i] = X_s[i] + T.float16(1.0)
                T.copy(In[k + 1, 0:width], X_s)

    return main


def no_tma(n: int = 4, width: int = 4):
    """A pipelined copy of ``width`` float16 elements: 8 bytes, not a multiple of 16, so no TMA."""

    @T.prim_func
    def main(In: T.Tensor((n, width), "float16"), Out: T.Tensor((n, width), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((width,), "float16")
            for k in T.Pipelined(n, num_stages=2):
                T.copy(In[k, 0:width], X_s)
                for i in T.Parallel(width):
                    Out[k, i] = X_s[i] - T.float16(3.0)

    return main


def gemm(M: int = 32, N: int = 32, K: int = 32, bk: int = 16):
    """A plain (not pipelined) tiled GEMM: C = A @ B in float32."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            A_s = T.alloc_shared((M, bk), "float16")
            B_s = T.alloc_shared((bk, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.clear(C_f)
            for ko in T.serial(K // bk):
                T.copy(A[0, ko * bk], A_s)
                T.copy(B[ko * bk, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C)

    return main


def pipelined_gemm(M: int = 32, N: int = 32, K: int = 64, bk: int = 16, stages: int = 2):
    """A pipelined tiled GEMM (the classic warp-specialization candidate)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            A_s = T.alloc_shared((M, bk), "float16")
            B_s = T.alloc_shared((bk, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.clear(C_f)
            for ko in T.Pipelined(K // bk, num_stages=stages):
                T.copy(A[0, ko * bk], A_s)
                T.copy(B[ko * bk, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C)

    return main


def elementwise(n: int = 512, block: int = 128):
    """``C = A + B`` over a 1-D grid."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(n // block, threads=128) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return main


def local_accumulate(n: int = 64):
    """A ``T.Parallel`` writing a ``local`` buffer that a later statement reads: only replication is legal."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), Out: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            acc = T.alloc_local((n,), "float32")
            for i in T.Parallel(n):
                acc[i] = A[i] * 2.0
            Out[0] = acc[3] + acc[7]

    return main


def stmt_count_kernel(n_stmts: int = 50):
    """A kernel of about ``n_stmts`` statements: a pipelined loop with a copy and many consumers."""

    @T.prim_func
    def main(In: T.Tensor((8, 64), "float16"), Out: T.Tensor((8, n_stmts), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(8, num_stages=2):
                T.copy(In[k, 0:64], X_s)
                for j in range(n_stmts - 2):
                    Out[k, j] = X_s[j % 64] + T.float16(j)

    return main


def late_read(free: int = 4, width: int = 64):
    """A pipelined loop whose consumer runs ``free`` statements that touch no shared buffer before the
    one that reads the copied tile, and one more after it: the wait can sink past the first ``free``."""

    @T.prim_func
    def main(In: T.Tensor((4, width), "float16"), Out: T.Tensor((4, width), "float16"),
             Side: T.Tensor((4, free + 1), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((width,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[k, 0:width], X_s)
                for j in range(free):
                    Side[k, j] = T.float16(j)
                for i in T.Parallel(width):
                    Out[k, i] = X_s[i]
                Side[k, free] = T.float16(-1.0)

    return main


# ----------------------------------------------------------------------------------------------------
# Running a schedule against the reference interpreter


def random_inputs(kernel, outputs: tuple[str, ...], seed: int = 0):
    """Fresh random tensors per parameter (never all zeros); outputs poisoned (NaN / -12345)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = []
    for p in kernel.params:
        dt = getattr(torch, p.dtype)
        if p.name in outputs:
            t = torch.full(p.shape, float("nan") if dt.is_floating_point else -12345).to(dt)
        elif dt.is_floating_point:
            t = (torch.rand(p.shape, generator=g) * 4 + 0.5).to(dt)
        else:
            t = torch.randint(1, 9, p.shape, generator=g, dtype=dt)
        out.append(t)
    return out


def check_schedule(scheduled, outputs: tuple[str, ...], *, seed: int = 0, policy: str = "adversarial",
                   full: bool = True) -> None:
    """Verify ``scheduled`` statically (no violation), simulate it (races, deadlocks, repeated nonlocal
    iterations must be absent) and compare every element of every output with the reference interpreter
    of the unscheduled kernel (``full``: the kernel writes every output element, so no poison may remain)."""
    import torch

    from egtile.interp import interpret
    from egtile.sim import simulate
    from egtile.verifier import verify

    violations = verify(scheduled)
    assert not violations, [str(v) for v in violations[:3]]

    k = scheduled.kernel
    args = random_inputs(k, outputs, seed)
    res = simulate(scheduled, *args, policy=policy, seed=seed)
    assert res.ok, res.errors()[:5]
    ref = [a.clone() for a in args]
    interpret(k, *ref)
    for p, got, want in zip(k.params, res.outputs, ref):
        if p.name in outputs:
            if full:
                assert not torch.isnan(want.float()).any() and not (want == -12345).any(), \
                    f"reference left {p.name} partly unwritten"
            torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True,
                                       msg=lambda m, name=p.name: f"{name}: schedule differs from the interpreter: {m}")
