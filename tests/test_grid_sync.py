"""``T.sync_grid()`` (egtile.language.grid_sync): the code after a top-level grid barrier is a second kernel launched
after the first, so every block reads what every block wrote before it; block state carried across is refused."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.codegen import nvrtc
from egtile.errors import UnsupportedError
from _check import poisoned

BLOCKS = 4


def two_phase(n: int, threads: int = 128, *, carry: str = "", renew: bool = False):
    """Phase 1: each block sums its slice into Part[b] (through shared memory); grid barrier; phase 2: each block
    reads every block's partial sum (a value only a grid-wide order makes visible) and stores the others' total
    scaled by its own slice's first element, read again from global memory or (``carry``) from block state."""
    per = n // BLOCKS

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Part: T.Tensor((BLOCKS,), "float32"), Out: T.Tensor((BLOCKS,), "float32")):
        with T.Kernel(BLOCKS, threads=threads) as b:
            xs = T.alloc_shared((per,), "float32")
            row = T.alloc_fragment((1,), "float32")
            tot = T.alloc_var("float32")
            T.copy(X[b * per], xs)
            first = X[b * per]
            T.reduce_sum(T.reshape(xs, (1, per)), row, dim=1)
            Part[b] = row[0]
            T.sync_grid()
            if renew:
                T.copy(X[b * per], xs)
            tot = 0.0
            for k in T.serial(BLOCKS):
                tot += Part[k]
            if carry == "shared" or renew:
                Out[b] = (tot - Part[b]) * xs[0]
            elif carry == "let":
                Out[b] = (tot - Part[b]) * first
            else:
                Out[b] = (tot - Part[b]) * X[b * per]

    return main


def _reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    parts = x.double().view(BLOCKS, -1).sum(1)
    return parts, (parts.sum() - parts) * x.double().view(BLOCKS, -1)[:, 0]


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("renew", [False, True], ids=["global", "renewed-shared"])
def test_every_block_reads_every_blocks_result_after_the_barrier(target, renew):
    k = egtile.compile(two_phase(1024, renew=renew), target=target)
    x = torch.randn(1024, generator=torch.Generator().manual_seed(7 + renew))
    part, out = poisoned((BLOCKS,), torch.float32, "cpu"), poisoned((BLOCKS,), torch.float32, "cpu")
    k(x, part, out)
    ref_part, ref_out = _reference(x)
    torch.testing.assert_close(part.double(), ref_part, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(out.double(), ref_out, rtol=1e-5, atol=1e-4)


def test_the_barrier_splits_the_block_into_two_kernels_that_compile():
    k = egtile.compile(two_phase(1024), target="sim")
    assert len(k.kernels) == 2
    first, second = (kk.kernel for kk in k.kernels)
    assert first.grid == second.grid == (BLOCKS,) and first.threads == second.threads == 128
    # each declares the buffers it uses: the shared slice belongs to the first kernel only
    assert "xs" in {b.name for b in first.allocs} and "xs" not in {b.name for b in second.allocs}
    for i, kk in enumerate(k.kernels):
        assert nvrtc.compile_cuda(kk.get_kernel_source(), f"grid_sync_{i}.cu").cubin
    text = k.explain()  # each kernel says where the split is
    assert "front end: T.sync_grid() at line" in text and "front end: this kernel is the code after T.sync_grid()" in text


@pytest.mark.parametrize("carry", ["shared", "let"])
def test_block_state_read_across_the_barrier_is_refused_at_the_reading_line(carry):
    with pytest.raises(UnsupportedError, match=r"(written|bound) before T.sync_grid\(\) \(line \d+.*\) and read after it") as e:
        two_phase(1024, carry=carry)
    assert e.value.loc is not None and e.value.loc.file.endswith("test_grid_sync.py")
    assert "Out[b] = (tot - Part[b])" in (e.value.loc.text or "")


def test_a_barrier_inside_a_loop_is_refused():
    with pytest.raises(UnsupportedError, match=r"T.sync_grid\(\) inside T.serial.*top level"):
        @T.prim_func
        def main(X: T.Tensor((128,), "float32")):
            with T.Kernel(2, threads=128):
                for _ in T.serial(2):
                    T.sync_grid()
                    X[0] = 1.0


def test_a_barrier_in_per_thread_code_is_refused():
    with pytest.raises(UnsupportedError, match="per-thread code"):
        @T.prim_func
        def main(X: T.Tensor((128,), "float32")):
            with T.Kernel(2, threads=128):
                tx = T.get_thread_binding()
                X[tx] = 1.0
                T.sync_grid()


@pytest.mark.gpu
def test_every_block_reads_every_blocks_result_on_the_gpu():
    k = egtile.compile(two_phase(1 << 16, threads=256), target="cuda")
    x = torch.randn(1 << 16, device="cuda")
    part, out = poisoned((BLOCKS,), torch.float32, "cuda"), poisoned((BLOCKS,), torch.float32, "cuda")
    k(x, part, out)
    ref_part, ref_out = _reference(x.cpu())
    torch.testing.assert_close(part.double().cpu(), ref_part, rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(out.double().cpu(), ref_out, rtol=1e-5, atol=1e-3)


def test_block_state_read_across_two_barriers_is_refused():
    # a fresh-user finding: each launch starts the block over, so a value from before the first barrier is gone
    # after the second too (the check compared neighbouring kernels only)
    with pytest.raises(UnsupportedError, match=r"v \(local\) is written before T.sync_grid\(\)"):
        @T.prim_func
        def main(X: T.Tensor((256,), "float32"), S: T.Tensor((4,), "float32"), Out: T.Tensor((4,), "float32")):
            with T.Kernel(4, threads=32) as b:
                v = T.alloc_var("float32")
                v = X[b * 64]
                S[b] = X[b * 64]
                T.sync_grid()
                Out[b] = S[(b + 1) % 4]
                T.sync_grid()
                Out[b] = Out[b] + v


def rewritten_after_the_barrier(n: int = 256):
    """Block state written whole again after the barrier before it is read: a variable reset by a store and a
    shared tile refilled by a T.Parallel."""

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Part: T.Tensor((BLOCKS,), "float32"), Out: T.Tensor((BLOCKS,), "float32")):
        with T.Kernel(BLOCKS, threads=64) as b:
            xs = T.alloc_shared((64,), "float32")
            acc = T.alloc_var("float32")
            acc = 0.0
            for i in T.Parallel(64):
                xs[i] = X[b * 64 + i]
            for i in T.serial(64):
                acc += xs[i]
            Part[b] = acc
            T.sync_grid()
            acc = 0.0
            for i in T.Parallel(64):
                xs[i] = X[((b + 1) % BLOCKS) * 64 + i]
            for k in T.serial(BLOCKS):
                acc += Part[k]
            Out[b] = acc * xs[0]

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_block_state_written_whole_after_the_barrier_is_accepted(target):
    x = torch.randn(256, generator=torch.Generator().manual_seed(11))
    part, out = poisoned((BLOCKS,), torch.float32, "cpu"), poisoned((BLOCKS,), torch.float32, "cpu")
    egtile.compile(rewritten_after_the_barrier(), target=target)(x, part, out)
    parts = x.double().view(BLOCKS, -1).sum(1)
    torch.testing.assert_close(part.double(), parts, rtol=1e-5, atol=1e-4)
    firsts = x.double().view(BLOCKS, -1)[:, 0].roll(-1)
    torch.testing.assert_close(out.double(), parts.sum() * firsts, rtol=1e-5, atol=1e-4)


def test_a_random_stream_does_not_survive_the_barrier_and_the_message_says_so():
    with pytest.raises(UnsupportedError, match=r"the T.sync_grid\(\) at line \d+ started a new launch"):
        @T.prim_func
        def main(Out: T.Tensor((4,), "uint32")):
            with T.Kernel(4, threads=1) as b:
                T.rng_init(7, 0, b * 4)
                T.sync_grid()
                Out[b] = T.rng_rand()
