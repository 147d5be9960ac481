"""Buffer views (``T.reshape`` / ``T.view``) and bit casts (``T.reinterpret``), with TileLang's semantics.

A view is another row-major shape over its base's storage (``egtile.language.bufview``): accesses through it are
accesses of the base, so the simulator's dataflow sees them on the base (a race through a view is a race on the
base). Every kernel here is run on fresh random inputs into a poisoned output and compared with torch.
"""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import EgtileError, ShapeError, UnsupportedError

M, Q, H = 4, 4, 8


def _reshaped_reduce():
    """A fragment of shape (M, Q * H) seen as (M, Q, H): scaled through the view, reduced over its last dimension
    (``T.reduce_sum`` / ``reduce_max`` on a view), a region of the view filled, and a view copied out."""

    @T.prim_func
    def main(X: T.Tensor((M, Q * H), "float32"), S: T.Tensor((M, Q), "float32"), Mx: T.Tensor((M, Q), "float32"),
             Y: T.Tensor((M * Q, H), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            s = T.alloc_fragment((M, Q * H), "float32")
            v = T.reshape(s, (M, Q, H))
            sums = T.alloc_fragment((M, Q), "float32")
            maxs = T.alloc_fragment((M, Q), "float32")
            T.copy(X, s)
            for i, q, h in T.Parallel(M, Q, H):
                v[i, q, h] = v[i, q, h] * (h + 1)
            T.reduce_sum(v, sums, dim=-1)
            T.reduce_max(v, maxs, dim=2, clear=True)
            T.copy(sums, S)
            T.copy(maxs, Mx)
            T.fill(v[0:2, 1, :], 7.0)  # a region of the view: rows 0..1, q = 1
            T.copy(T.view(s, shape=(M * Q, H)), Y)

    return main


def test_reshape_and_view_read_and_write_the_base_storage():
    kern = egtile.compile(_reshaped_reduce(), target="sim")
    x = torch.randn(M, Q * H)
    s, mx, y = (torch.full(sh, float("nan")) for sh in ((M, Q), (M, Q), (M * Q, H)))
    kern(x, s, mx, y)
    scaled = x.reshape(M, Q, H) * torch.arange(1, H + 1, dtype=torch.float32)
    torch.testing.assert_close(s, scaled.sum(-1), rtol=1e-5, atol=1e-5)
    assert torch.equal(mx, scaled.amax(-1))
    want = scaled.clone()
    want[0:2, 1, :] = 7.0
    assert torch.equal(y, want.reshape(M * Q, H))


def _split_view_of_a_parameter():
    """A view of a global parameter, in TileLang's own spelling ``T.Tensor(shape, dtype, buf.data)``: the (2, 64)
    view of a 128-vector, copied into and written element-wise."""

    @T.prim_func
    def main(A: T.Tensor((2, 64), "float16"), B: T.Tensor((128,), "float16")):
        with T.Kernel(1, threads=64) as _bx:
            b2 = T.Tensor((2, 64), "float16", B.data)
            sh = T.alloc_shared((2, 64), "float16")
            T.copy(A, sh)
            T.copy(sh, b2)
            for i, j in T.Parallel(2, 64):
                b2[i, j] = b2[i, j] + T.float16(1)

    return main


def test_a_view_of_a_parameter_writes_the_parameter():
    kern = egtile.compile(_split_view_of_a_parameter(), target="sim")
    a = torch.randn(2, 64).half()
    b = torch.full((128,), float("nan")).half()
    kern(a, b)
    assert torch.equal(b, (a + 1).reshape(128))


def _race_through_a_view():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            s = T.alloc_shared((128,), "float32")
            v = T.reshape(s, (2, 64))
            for i, j in T.Parallel(2, 64):
                v[i, j] = A[i * 64 + j]
                s[(i * 64 + j + 1) % 128] = A[i * 64 + j]  # another iteration's element of the same storage
            T.copy(s, B)

    return main


def test_a_race_through_a_view_is_a_race_on_its_base():
    # found before scheduling (egtile.analysis.parallel_races: the two stores meet at different iterations), or by
    # the verifier and the simulator; either way named on the base buffer s
    with pytest.raises(EgtileError, match=r"buffer s\b"):
        kern = egtile.compile(_race_through_a_view(), target="sim")
        kern(torch.randn(128), torch.full((128,), float("nan")))


def test_views_refuse_what_they_do_not_model():
    def body(make):
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as _bx:
                s = T.alloc_shared((64,), "float32")
                make(s)

        return main

    with pytest.raises(ShapeError, match="element count"):
        body(lambda s: T.reshape(s, (8, 9)))
    with pytest.raises(UnsupportedError, match="over a shared buffer only"):  # of another dtype: tests/test_overlay.py
        body(lambda s: T.view(T.alloc_fragment((64,), "float32"), dtype="int32"))
    with pytest.raises(ShapeError, match="must fit its storage"):
        body(lambda s: T.view(s, shape=(64,), dtype="float64"))
    with pytest.raises(UnsupportedError, match="T.gemm on a buffer view"):
        body(lambda s: T.gemm(T.reshape(s, (8, 8)), T.reshape(s, (8, 8)), T.reshape(s, (8, 8))))


def _bit_casts():
    """``T.reinterpret`` both ways and at two widths: a float32's sign bit flipped through its bits, the exponent
    field read from them (TileLang's ``fast_log2_ceil`` idiom), a power of two made from bits, float16 bits."""

    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), H: T.Tensor((128,), "float16"), Bits: T.Tensor((128,), "uint32"),
             Neg: T.Tensor((128,), "float32"), Exp: T.Tensor((128,), "int32"), Pow: T.Tensor((128,), "float32"),
             HB: T.Tensor((128,), "uint16"), Key: T.Tensor((128,), "uint32")):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(128):
                b = T.reinterpret(X[i], T.uint32)
                Bits[i] = b
                Neg[i] = T.reinterpret(b ^ T.cast(0x80000000, T.uint32), T.float32)
                Exp[i] = T.cast((b >> 23) & 0xFF, T.int32) - 127
                Pow[i] = T.reinterpret((i % 16 - 8 + 127) << 23, T.float32)
                HB[i] = T.reinterpret(H[i], T.uint16)
                # an order-preserving key of the float (TileLang's radix top-k idiom): a bit cast under a select
                Key[i] = T.if_then_else(X[i] < 0, ~b, b | T.cast(0x80000000, T.uint32))

    return main


def _check_bit_casts(target: str, device: str) -> None:
    kern = egtile.compile(_bit_casts(), target=target)
    x = torch.randn(128) * 100
    h = torch.randn(128).half()
    bits, hb = torch.full((128,), 7, dtype=torch.uint32), torch.full((128,), 7, dtype=torch.uint16)
    neg, pw = torch.full((128,), float("nan")), torch.full((128,), float("nan"))
    ex = torch.full((128,), -999, dtype=torch.int32)
    key = torch.full((128,), 7, dtype=torch.uint32)
    args = [t.to(device) for t in (x, h, bits, neg, ex, pw, hb, key)]
    kern(*args)
    bits, neg, ex, pw, hb, key = (t.cpu() for t in args[2:])
    raw = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    want = torch.where(x < 0, 0xFFFFFFFF - raw, raw | 0x80000000)
    assert torch.equal(key.view(torch.int32).to(torch.int64) & 0xFFFFFFFF, want)
    assert torch.equal(torch.argsort(want), torch.argsort(x))
    assert torch.equal(bits.view(torch.int32), x.view(torch.int32))
    assert torch.equal(neg, -x)
    assert torch.equal(ex, torch.frexp(x).exponent - 1)
    assert torch.equal(pw, torch.pow(2.0, (torch.arange(128) % 16 - 8).float()))
    assert torch.equal(hb.view(torch.int16), h.view(torch.int16))


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_reinterpret_reads_the_bits(target):
    _check_bit_casts(target, "cpu")


def test_reinterpret_compiles_with_nvrtc():
    from egtile.codegen import generate

    pytest.importorskip("cuda.bindings")
    from egtile.codegen import nvrtc

    low = generate(egtile.optimize(_bit_casts()).scheduled)
    assert "eg_bitcast<unsigned int>" in low.source and "eg_bitcast<float>" in low.source
    try:
        nvrtc.compile_cuda(low.source, f"{low.symbol}.cu")
    except ImportError:
        pytest.skip("NVRTC is not installed")


@pytest.mark.gpu
def test_reinterpret_on_the_gpu():
    _check_bit_casts("cuda", "cuda")


@pytest.mark.gpu
def test_views_on_the_gpu():
    kern = egtile.compile(_reshaped_reduce(), target="cuda")
    x = torch.randn(M, Q * H)
    outs = [torch.full(sh, float("nan"), device="cuda") for sh in ((M, Q), (M, Q), (M * Q, H))]
    kern(x.cuda(), *outs)
    s, mx, y = (t.cpu() for t in outs)
    scaled = x.reshape(M, Q, H) * torch.arange(1, H + 1, dtype=torch.float32)
    torch.testing.assert_close(s, scaled.sum(-1), rtol=1e-5, atol=1e-5)
    assert torch.equal(mx, scaled.amax(-1))
    want = scaled.clone()
    want[0:2, 1, :] = 7.0
    assert torch.equal(y, want.reshape(M * Q, H))


def test_reinterpret_refuses_another_width():
    with pytest.raises(EgtileError, match="keeps the width"):
        @T.prim_func
        def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "uint16")):
            with T.Kernel(1, threads=128) as _bx:
                for i in T.Parallel(128):
                    Y[i] = T.reinterpret(X[i], T.uint16)


def _conv(n, c, h, w, f, k, s, d, p, block_m=64, block_n=32, block_k=32):
    """A 2-D convolution as TileLang writes it: ``T.im2col`` tiles of the NHWC image times the filter seen as a
    ``(k k c, f)`` matrix (``T.Tensor(shape, dtype, buf.data)``), the output written through an ``(n oh ow, f)`` view;
    ``k k c`` is not a multiple of ``block_k``, so the last filter tile runs past the view's edge (zero-padded)."""
    oh = (h + 2 * p - d * (k - 1) - 1) // s + 1
    ow = (w + 2 * p - d * (k - 1) - 1) // s + 1

    @T.prim_func
    def main(X: T.Tensor((n, h, w, c), "float16"), Wt: T.Tensor((k, k, c, f), "float16"),
             Out: T.Tensor((n, oh, ow, f), "float16")):
        with T.Kernel(T.ceildiv(f, block_n), T.ceildiv(n * oh * ow, block_m), threads=128) as (bx, by):
            xs = T.alloc_shared((block_m, block_k), "float16")
            ws = T.alloc_shared((block_k, block_n), "float16")
            acc = T.alloc_fragment((block_m, block_n), "float32")
            w_flat = T.Tensor((k * k * c, f), "float16", Wt.data)
            out_flat = T.reshape(Out, (n * oh * ow, f))
            T.clear(acc)
            for ki in T.Pipelined(T.ceildiv(k * k * c, block_k), num_stages=2):
                T.im2col(X, xs, by, ki, k, s, d, p)
                T.copy(w_flat[ki * block_k, bx * block_n], ws)
                T.gemm(xs, ws, acc)
            T.copy(acc, out_flat[by * block_m, bx * block_n])

    return main, (n, oh, ow, f)


def test_im2col_convolution_through_views():
    n, c, h, w, f, k, s, d, p = 1, 8, 6, 7, 32, 3, 1, 1, 1  # k k c = 72: three tiles of 32, the last one partial
    prim, out_shape = _conv(n, c, h, w, f, k, s, d, p)
    kern = egtile.compile(prim, target="sim")
    x, wt = torch.randn(n, h, w, c).half(), torch.randn(k, k, c, f).half()
    out = torch.full(out_shape, float("nan")).half()
    kern(x, wt, out)
    ref = torch.conv2d(x.permute(0, 3, 1, 2).double(), wt.permute(3, 2, 0, 1).double(), stride=s, padding=p,
                       dilation=d).permute(0, 2, 3, 1)
    torch.testing.assert_close(out.double(), ref, rtol=1e-2, atol=1e-2)
