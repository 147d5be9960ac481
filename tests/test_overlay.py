"""Views of another dtype (``T.view(base, shape, dtype=)``) as scratch over dead storage: ``egtile.analysis.overlay``
(the proof, refusing at the user's line) and ``egtile.interp_overlay`` (the interpreter's per-byte check).

The accepted kernel is TileLang's ``dsa_sparse_finetune/sparse_mla_bwd.py`` construct at a small size: a bfloat16
shared tile, read by a gemm, then reused inside a pipelined (or serial) loop as float32 scratch for the
accumulator, which is copied out through it in two halves. It runs on fresh random integer inputs (every product
and sum exact in float32) into a poisoned output, compared element by element with a float64 reference, on the
interpreter and the simulator, and compiles with NVRTC; ``-m gpu`` runs it on the device.
"""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.analysis import overlay
from egtile.errors import UnsupportedError

K, B = 2, 2  # key tiles, blocks


def _scratch_kernel(loop: str = "pipelined", variant: str = "ok"):
    """``Out[b, rows of tile k] = 2 * (A[b, tile k] @ W)``: the product in a register accumulator, stored through a
    float32 view of the bfloat16 tile ``S`` it was computed from (half of the rows at a time), then read back.

    ``variant`` plants one mistake each: ``read-base`` reads ``S`` after the scratch was written; ``read-view-first``
    reads the scratch before writing it (it holds ``S``'s bits); ``carried`` loads ``S`` once before the loop, so
    the second iteration's gemm reads ``S`` after the first iteration's scratch; ``both`` copies ``S`` into the
    scratch in one statement; ``half`` writes half the scratch and reads all of it."""

    def loop_of(n):
        return T.Pipelined(n, num_stages=0) if loop == "pipelined" else T.serial(n)

    @T.prim_func
    def main(A: T.Tensor((B, 32 * K, 16), "bfloat16"), W: T.Tensor((16, 16), "bfloat16"),
             Out: T.Tensor((B, 32 * K, 16), "float32")):
        with T.Kernel(B, threads=128) as bx:
            S = T.alloc_shared((32, 16), "bfloat16")
            Wsh = T.alloc_shared((16, 16), "bfloat16")
            acc = T.alloc_fragment((32, 16), "float32")
            scratch = T.view(S, shape=(16, 16), dtype="float32")
            T.copy(W, Wsh)
            if variant == "carried":
                T.copy(A[bx, 0:32, :], S)
            for k in loop_of(K):
                if variant != "carried":
                    T.copy(A[bx, k * 32:(k + 1) * 32, :], S)
                T.gemm(S, Wsh, acc, clear_accum=True)
                for s in range(2):
                    if variant == "read-view-first":
                        for i, j in T.Parallel(16, 16):
                            Out[bx, k * 32 + 16 * s + i, j] = scratch[i, j]
                    if variant == "both":
                        for i, j in T.Parallel(16, 16):
                            scratch[i, j] = S[i, j]
                    for i, j in T.Parallel(32, 16):
                        if i < (8 if variant == "half" else 16):
                            scratch[i, j] = acc[i + 16 * s, j]
                    for i, j in T.Parallel(16, 16):
                        Out[bx, k * 32 + 16 * s + i, j] = scratch[i, j] * 2.0
                    if variant == "read-base":
                        for i, j in T.Parallel(16, 16):
                            Out[bx, k * 32 + 16 * s + i, j] = S[i, j]

    return main


def _inputs():
    a = torch.randint(-4, 5, (B, 32 * K, 16)).bfloat16()  # small integers: every float32 sum is exact
    w = torch.randint(-4, 5, (16, 16)).bfloat16()
    return a, w, (a.double() @ w.double()) * 2


def _run(kern, device: str = "cpu") -> None:
    a, w, want = _inputs()
    out = torch.full((B, 32 * K, 16), float("nan"), device=device)
    kern(a.to(device), w.to(device), out)
    assert torch.equal(out.cpu().double(), want)


@pytest.mark.parametrize("loop", ["pipelined", "serial"])
@pytest.mark.parametrize("target", ["interp", "sim"])
def test_scratch_over_dead_storage_matches(target, loop):
    kern = egtile.compile(_scratch_kernel(loop), target=target)
    assert [(o.view, o.base) for o in _scratch_kernel(loop).kernel.overlays] == [("scratch", "S")]
    _run(kern)


def test_the_view_is_a_buffer_of_its_own():
    kern = _scratch_kernel().kernel
    scratch = next(b for b in kern.allocs if b.name == "scratch")
    assert (scratch.shape, scratch.dtype, scratch.scope) == ((16, 16), "float32", "shared")
    assert overlay.observations(kern) == ()


def _line_of(pattern: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(_scratch_kernel)
    return first + next(i for i, text in enumerate(lines) if pattern in text)


@pytest.mark.parametrize("variant, why, culprit", [
    ("read-base", "reads S whose bytes may have been written through scratch", "+ i, j] = S[i, j]"),
    ("read-view-first", "reads scratch whose bytes may have been written through S", "= scratch[i, j]\n"),
    ("carried", "reads S whose bytes may have been written through scratch", "T.gemm(S, Wsh"),
    ("both", "touches both S and scratch", "scratch[i, j] = S[i, j]"),
    ("half", "reads scratch whose bytes may have been written through S", "= scratch[i, j] * 2.0"),
])
@pytest.mark.parametrize("target", ["interp", "sim"])
def test_observing_the_reinterpretation_is_refused_at_its_line(variant, why, culprit, target):
    with pytest.raises(UnsupportedError, match=why) as err:
        egtile.compile(_scratch_kernel(variant=variant), target=target)
    line = _line_of(culprit)
    # the culprit is the statement's loop or the statement itself (a T.Parallel is named at its `for` line)
    assert err.value.loc is not None and err.value.loc.line in (line, line - 1), (err.value.loc, line)
    assert "T.view(S, dtype=float32) as scratch" in str(err.value)


def test_a_planted_acceptance_is_caught_by_the_interpreter(monkeypatch):
    """The proof switched off: the interpreter's own per-byte check still refuses each observation, at the read."""
    monkeypatch.setattr(overlay, "observations", lambda kernel: ())
    for variant, read in (("read-base", "reads S["), ("read-view-first", "reads scratch["), ("carried", "reads S[")):
        kern = egtile.compile(_scratch_kernel(variant=variant), target="interp")
        with pytest.raises(UnsupportedError, match=r"(?s)" + read.replace("[", r"\[") + ".*last written through"):
            _run(kern)
    # ... and still accepts the kernel whose reads each see their own buffer's bytes
    _run(egtile.compile(_scratch_kernel(), target="interp"))


def test_scratch_compiles_with_nvrtc():
    from egtile.codegen import generate

    pytest.importorskip("cuda.bindings")
    from egtile.codegen import nvrtc

    low = generate(egtile.optimize(_scratch_kernel()).scheduled)
    try:
        nvrtc.compile_cuda(low.source, f"{low.symbol}.cu")
    except ImportError:
        pytest.skip("NVRTC is not installed")


@pytest.mark.gpu
def test_scratch_over_dead_storage_on_the_gpu():
    _run(egtile.compile(_scratch_kernel(), target="cuda"), "cuda")


def _view_in_roles():
    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            S = T.alloc_shared((128,), "float32")
            V = T.view(S, shape=(128,), dtype="int32")
            full = T.alloc_barrier(128)
            tx = T.get_thread_binding()
            if tx >= 128:
                T.copy(X, S)
                for i in T.Parallel(128):
                    V[i] = 7
                T.barrier_arrive(full)
            else:
                T.barrier_wait(full, 0)
                T.copy(S, Y)

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_view_in_a_kernel_with_roles_is_refused_on_every_target(target):
    # fresh-user findings: the protocol path skipped the proof on sim, and concurrent roles were read in order
    with pytest.raises(UnsupportedError, match=r"T.view\(S\) as V with another dtype in a kernel with warp-specialized "
                                               r"roles|observe"):
        egtile.compile(_view_in_roles(), target=target)
