"""``T.sync_threads()`` inside a serial loop or an ``if`` of per-thread code (egtile.language.threads): the region
is split there and the loop or branch becomes block-level when its bounds or condition cannot differ between
threads (TileLang allows the barrier exactly then); a per-thread one is refused at the barrier's line naming
the dependence. Our own kernels, on interp and sim against torch, and through NVRTC."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import UnsupportedError


def _rounds(n: int, rounds: int):
    """Each round every thread reads its neighbour's value (written by another thread before the barrier), then
    writes its own; a uniform branch on a read-only flag reverses the row the same way."""

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), F: T.Tensor((1,), "int32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=n) as _bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((n,), "float32")
            t = T.alloc_shared((n,), "float32")
            s[tx] = X[tx]
            for _r in T.serial(rounds):
                T.sync_threads()
                t[tx] = s[(tx + 1) % n] * 2.0
                T.sync_threads()
                s[tx] = t[tx] + 1.0
            if F[0] > 0:
                T.sync_threads()
                t[tx] = s[n - 1 - tx]
                T.sync_threads()
                s[tx] = t[tx]
            T.sync_threads()
            Y[tx] = s[tx]

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("flag", [0, 1])
def test_barriers_in_a_uniform_loop_and_branch_of_per_thread_code(target, flag):
    n, rounds = 64, 3
    x = torch.randn(n)
    y = torch.full((n,), float("nan"))
    egtile.compile(_rounds(n, rounds), target=target)(x, torch.tensor([flag], dtype=torch.int32), y)
    want = x.clone()  # float32: each + rounds as the kernel's float32 arithmetic does (the * 2.0 is exact)
    for _ in range(rounds):
        want = torch.roll(want, -1) * 2.0 + 1.0
    if flag:
        want = want.flip(0)
    torch.testing.assert_close(y, want, rtol=0, atol=0)


def test_the_split_region_compiles_with_nvrtc():
    from egtile.codegen import nvrtc

    src = egtile.compile(_rounds(64, 3), target="cuda").get_kernel_source()
    assert "__syncthreads()" in src or "bar.sync" in src
    try:
        nvrtc.compile_cuda(src, "rounds.cu")
    except ImportError:
        pytest.skip("NVRTC is not installed")


def test_a_barrier_under_a_per_thread_branch_is_refused_naming_the_thread_index():
    # TileLang's named barrier over the first `count` threads (bar.sync id, count) under `if tx < count`
    with pytest.raises(UnsupportedError, match=r"inside the `if` of per-thread code.*thread index `tx`.*bar.sync id, "
                                               r"count") as e:
        @T.prim_func
        def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as _bx:
                tx = T.get_thread_binding()
                s = T.alloc_shared((64,), "float32")
                s[tx] = X[tx]
                if tx < 32:
                    T.sync_threads(3, 32)  # @partial
                    Y[tx] = s[tx + 32]

        egtile.compile(main, target="sim")
    assert e.value.loc is not None and e.value.loc.text.endswith("# @partial")


def test_a_barrier_under_a_loop_bounded_by_a_per_thread_value_is_refused():
    with pytest.raises(UnsupportedError, match=r"loop over `k`.*local buffer") as e:
        @T.prim_func
        def main(X: T.Tensor((64,), "int32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as _bx:
                tx = T.get_thread_binding()
                n = T.alloc_local((1,), "int32")
                n[0] = X[tx]
                for k in T.serial(n[0]):
                    T.sync_threads()  # @loop
                    Y[tx] = 1.0

        egtile.compile(main, target="sim")
    assert e.value.loc is not None and e.value.loc.text.endswith("# @loop")
