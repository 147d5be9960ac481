"""codegen/include/egtile_wgmma.cuh and egtile.layout against the hardware.

GPU tests (``@pytest.mark.gpu``), each on fresh random inputs with a poisoned output, every element
compared:

(a) TMA writes a tile with each swizzle mode; the raw shared-memory bytes equal
    ``SmemTile.address`` (egtile.layout's swizzle function and panel layout);
(b) one warpgroup runs four m64nNk16 wgmma (K = 64, so three descriptor advances) in the SS form for
    f16 and bf16, every transposition, every swizzle of A and of B, several N; the descriptors come
    from ``WgmmaOperand.descriptor`` and every accumulator register is placed by
    ``wgmma_accumulator(N)`` before the comparison with torch;
(c) the RS form, with each thread's A registers filled from ``wgmma_a_registers()`` and packed on the
    device by ``eg_pack_f16x2`` / ``eg_pack_bf16x2``.

The accumulators start as NaN, so a first instruction that did not honour ``scale-d = 0`` shows. CPU
tests check that these sources compile with NVRTC for sm_90a, that the SASS has HGMMA (and UTMALDG where
TMA is used) and no local memory, that every N from 8 to 256 assembles, that the preprocessor tables of
the header are consistent, and that the device descriptor encoder equals ``Descriptor.encode``.

On a GPU machine without egtile installed this module needs only torch, cuda-bindings, egtile.layout and
codegen/nvrtc.py (``python -m pytest --noconftest tests/test_wgmma_header.py``).
"""

from __future__ import annotations

import ctypes
import functools
import random
import re
import sys
from pathlib import Path

import pytest

from egtile.codegen import nvrtc
from egtile.layout import (
    Descriptor, Major, SmemTile, Swizzle, WgmmaOperand, wgmma_a_registers, wgmma_accumulator,
)

HEADER = Path(nvrtc.INCLUDE_DIR) / "egtile_wgmma.cuh"
K = 64                      # four k16 steps per probe
SWIZZLES = list(Swizzle)

# ---- kernel sources ----------------------------------------------------------------------------------

_PRELUDE = r"""
#include "egtile_tma.cuh"
#include "egtile_mbarrier.cuh"
#include "egtile_sync.cuh"
#include "egtile_wgmma.cuh"

// A wait that traps after ~2 s instead of hanging the test run when no TMA completes the phase.
__device__ __forceinline__ void probe_wait(eg_u64* bar, eg_u32 parity) {
  const long long start = clock64();
  eg_u32 done = 0;
  while (!done) {
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(eg_smem_addr(bar)), "r"(parity) : "memory");
    if (!done && clock64() - start > 4000000000LL) __trap();
  }
}

// boxes: (c0, c1, shared byte offset) per TMA copy; one thread issues them all on one barrier.
__device__ __forceinline__ void probe_load(unsigned char* dst, const CUtensorMap* tmap, eg_u64* bar, const int* boxes,
                                           int nbox) {
  for (int i = 0; i < nbox; ++i) eg_tma_load_2d(dst + boxes[3 * i + 2], tmap, bar, boxes[3 * i], boxes[3 * i + 1]);
}

__device__ __forceinline__ unsigned char* probe_align(unsigned char* p) {
  return p + ((1024u - (eg_smem_addr(p) & 1023u)) & 1023u);
}
"""

TMA_SOURCE = _PRELUDE + r"""
extern "C" __global__ void tma_probe(const __grid_constant__ CUtensorMap tmap, const int* boxes, int nbox,
                                     unsigned nbytes, unsigned* out) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ eg_u64 bar;
  unsigned char* tile = probe_align(smem_raw);
  if (threadIdx.x == 0) { eg_mbarrier_init(&bar, 1); eg_fence_mbarrier_init(); }
  __syncthreads();
  if (threadIdx.x == 0) { eg_mbarrier_arrive_expect_tx(&bar, nbytes); probe_load(tile, &tmap, &bar, boxes, nbox); }
  probe_wait(&bar, 0);
  for (unsigned w = threadIdx.x; w < nbytes / 4; w += blockDim.x) out[w] = reinterpret_cast<const unsigned*>(tile)[w];
}
"""


def ss_source(n: int, ab: str, ta: int, tb: int, scale_b: int = 1) -> str:
    return _PRELUDE + rf"""
extern "C" __global__ void __launch_bounds__(128, 1)
wgmma_ss_probe(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
               const int* boxes_a, int nbox_a, const int* boxes_b, int nbox_b, unsigned bytes_a, unsigned bytes_b,
               const eg_u64* desc_a, const eg_u64* desc_b, float* out) {{
  extern __shared__ unsigned char smem_raw[];
  __shared__ eg_u64 bar;
  unsigned char* a_tile = probe_align(smem_raw);
  unsigned char* b_tile = a_tile + ((bytes_a + 1023u) & ~1023u);
  if (threadIdx.x == 0) {{ eg_mbarrier_init(&bar, 1); eg_fence_mbarrier_init(); }}
  __syncthreads();
  if (threadIdx.x == 0) {{
    eg_mbarrier_arrive_expect_tx(&bar, bytes_a + bytes_b);
    probe_load(a_tile, &tmap_a, &bar, boxes_a, nbox_a);
    probe_load(b_tile, &tmap_b, &bar, boxes_b, nbox_b);
  }}
  probe_wait(&bar, 0);
  float d[{n // 2}];
#pragma unroll
  for (int i = 0; i < {n // 2}; ++i) d[i] = __int_as_float(0x7fc00000);  // NaN: scale-d = 0 must ignore it
  const eg_u64 base_a = eg_smem_addr(a_tile) >> 4, base_b = eg_smem_addr(b_tile) >> 4;
  eg_wgmma_fence_operand(d);
  eg_wgmma_fence();
#pragma unroll
  for (int j = 0; j < {K // 16}; ++j)
    eg_wgmma_ss<{n}, {ab}, {ta}, {tb}, 1, {scale_b}>(d, desc_a[j] + base_a, desc_b[j] + base_b, j > 0);
  eg_wgmma_commit_group();
  eg_wgmma_wait_group<0>();
  eg_wgmma_fence_operand(d);
#pragma unroll
  for (int i = 0; i < {n // 2}; ++i) out[threadIdx.x * {n // 2} + i] = d[i];
}}
"""


def rs_source(n: int, ab: str, tb: int) -> str:
    pack = "eg_pack_bf16x2" if ab == "__nv_bfloat16" else "eg_pack_f16x2"
    return _PRELUDE + rf"""
extern "C" __global__ void __launch_bounds__(128, 1)
wgmma_rs_probe(const __grid_constant__ CUtensorMap tmap_b, const int* boxes_b, int nbox_b, unsigned bytes_b,
               const float* a_vals, const eg_u64* desc_b, float* out) {{
  extern __shared__ unsigned char smem_raw[];
  __shared__ eg_u64 bar;
  unsigned char* b_tile = probe_align(smem_raw);
  if (threadIdx.x == 0) {{ eg_mbarrier_init(&bar, 1); eg_fence_mbarrier_init(); }}
  __syncthreads();
  if (threadIdx.x == 0) {{ eg_mbarrier_arrive_expect_tx(&bar, bytes_b); probe_load(b_tile, &tmap_b, &bar, boxes_b, nbox_b); }}
  // this thread's A fragment for each k-step: slots 0..7 of wgmma_a_registers(), two per register
  eg_u32 a[{K // 16}][4];
  const float* mine = a_vals + threadIdx.x * {K // 16} * 8;
#pragma unroll
  for (int j = 0; j < {K // 16}; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) a[j][r] = {pack}(mine[j * 8 + 2 * r], mine[j * 8 + 2 * r + 1]);
  probe_wait(&bar, 0);
  float d[{n // 2}];
#pragma unroll
  for (int i = 0; i < {n // 2}; ++i) d[i] = __int_as_float(0x7fc00000);
  const eg_u64 base_b = eg_smem_addr(b_tile) >> 4;
  eg_wgmma_fence_operand(d);
#pragma unroll
  for (int j = 0; j < {K // 16}; ++j) eg_wgmma_fence_operand(a[j]);
  eg_wgmma_fence();
#pragma unroll
  for (int j = 0; j < {K // 16}; ++j) eg_wgmma_rs<{n}, {ab}, {tb}>(d, a[j], desc_b[j] + base_b, j > 0);
  eg_wgmma_commit_group();
  eg_wgmma_wait_group<0>();
  eg_wgmma_fence_operand(d);
#pragma unroll
  for (int i = 0; i < {n // 2}; ++i) out[threadIdx.x * {n // 2} + i] = d[i];
}}
"""


def all_n_source() -> str:
    """Every N of both forms and both types in one kernel (assembly check only)."""
    body = []
    for n in range(8, 257, 8):
        body.append(f"  {{ float d[{n // 2}] = {{}}; eg_wgmma_fence(); eg_wgmma_ss<{n}, half>(d, da, db, s); "
                    f"eg_wgmma_rs<{n}, __nv_bfloat16, 1>(d, a, db, 1); eg_wgmma_commit_group(); "
                    f"eg_wgmma_wait_group<0>(); eg_wgmma_fence_operand(d); out[{n}] = d[{n // 2 - 1}]; }}")
    return ('#include "egtile_wgmma.cuh"\nextern "C" __global__ void all_n(float* out, eg_u64 da, eg_u64 db, '
            'eg_u32 s) {\n  eg_u32 a[4] = {1u, 2u, 3u, 4u};\n' + "\n".join(body) + "\n}\n")


TYPES = {"float16": "half", "bfloat16": "__nv_bfloat16"}
SS_CASES = [(dt, ta, tb, n) for dt in TYPES for ta in (0, 1) for tb in (0, 1)
            for n in ((24, 64, 256) if tb == 0 else (64, 256))]
RS_CASES = [(dt, tb, n) for dt in TYPES for tb in (0, 1) for n in ((24, 64, 256) if tb == 0 else (64, 256))]


@functools.lru_cache(maxsize=None)
def _compiled(source: str, name: str) -> bytes:
    out = nvrtc.compile_cuda(source, name)
    assert "C7508" not in out.log and "error" not in out.log.lower(), out.log
    return out.cubin


# ---- CPU: header tables, descriptor encoder, compilation, SASS ----------------------------------------------

def test_define_lines_name_the_operands_after_the_accumulators():
    lines = re.findall(r"^EG_WGMMA_DEFINE\((.*)\)$", HEADER.read_text(), re.M)
    got = [tuple(int(x) for x in line.split(",")) for line in lines]
    assert [g[0] for g in got] == list(range(8, 257, 8))
    for n, q, *tail in got:
        assert q == n // 8 and tail == list(range(n // 2, n // 2 + 9)), (n, q, tail)
    text = HEADER.read_text()
    for k in range(32):
        assert f'#define EG_WGMMA_S4_{k} "%{4 * k}, %{4 * k + 1}, %{4 * k + 2}, %{4 * k + 3}"' in text


def test_device_descriptor_encoder_equals_the_layout_model():
    rng = random.Random(12)
    cases = [Descriptor(rng.randrange(0, 1 << 14) * 16, rng.randrange(0, 1 << 14) * 16, rng.randrange(0, 1 << 14) * 16,
                        rng.choice(SWIZZLES), rng.randrange(8)) for _ in range(40)]
    asserts = "\n".join(f"static_assert(eg_wgmma_desc_encode({d.start}u, {d.lbo}u, {d.sbo}u, {d.swizzle.descriptor_code}u, "
                        f"{d.base_offset}u) == {d.encode()}ull, \"descriptor {i}\");" for i, d in enumerate(cases))
    adv = cases[0]
    asserts += (f"\nstatic_assert(eg_wgmma_desc_advance({adv.encode()}ull, 96u) == {adv.advanced(96).encode()}ull, "
                f"\"advance\");" if adv.start + 96 < (1 << 18) else "")
    # static_asserts are evaluated by the compiler: a mismatch is a compile error
    nvrtc.compile_cuda('#include "egtile_wgmma.cuh"\n' + asserts + '\nextern "C" __global__ void k() {}\n', "enc.cu")


def _sass(cubin: bytes) -> tuple[str, set[str]]:
    """(disassembly, opcodes). Opcode names stop at lower-case letters (``HGMMA.64``), so shapes such as
    ``HGMMA.64x256x16.F32`` are matched in the text."""
    from egtile.codegen import sass

    if not sass.available():
        pytest.skip("cuobjdump/nvdisasm not installed")
    text = sass.disassemble(cubin)
    return text, sass.opcodes(text)


def _usage(cubin: bytes) -> dict[str, int]:
    from egtile.codegen import sass

    return sass.resource_usage(cubin)


@pytest.mark.parametrize("case", [("float16", 0, 0, 256), ("float16", 1, 1, 64), ("bfloat16", 0, 1, 256),
                                  ("bfloat16", 1, 0, 24)], ids=str)
def test_ss_probe_compiles_to_hgmma_and_tma(case):
    dt, ta, tb, n = case
    cubin = _compiled(ss_source(n, TYPES[dt], ta, tb), "ss.cu")
    text, ops = _sass(cubin)
    suffix = ".BF16" if dt == "bfloat16" else ""
    trans = ("\\.tnspA" if ta else "") + ("\\.tnspB" if tb else "")
    # four SS instructions (A and B descriptors), the requested transposes
    assert len(re.findall(rf"HGMMA\.64x{n}x16\.F32{suffix} R\d+, gdesc\[UR\d+\]{trans},", text)) == 4, text
    assert "UTMALDG.2D" in ops and "WARPGROUP.ARRIVE" in ops
    assert _usage(cubin)["LOCAL"] == 0


@pytest.mark.parametrize("case", [("float16", 0, 256), ("bfloat16", 1, 64)], ids=str)
def test_rs_probe_compiles_to_hgmma(case):
    dt, tb, n = case
    cubin = _compiled(rs_source(n, TYPES[dt], tb), "rs.cu")
    text, ops = _sass(cubin)
    suffix = ".BF16" if dt == "bfloat16" else ""
    trans = "\\.tnspB" if tb else ""
    # four RS instructions: A from registers, B from a descriptor
    assert len(re.findall(rf"HGMMA\.64x{n}x16\.F32{suffix} R\d+, R\d+, gdesc\[UR\d+\]{trans},", text)) == 4, text
    assert "UTMALDG.2D" in ops
    assert _usage(cubin)["LOCAL"] == 0


def test_tma_probe_compiles_to_utmaldg():
    assert "UTMALDG.2D" in _sass(_compiled(TMA_SOURCE, "tma.cu"))[1]


def test_every_n_assembles():
    text, _ = _sass(_compiled(all_n_source(), "all_n.cu"))
    for n in range(8, 257, 8):
        assert re.search(rf"HGMMA\.64x{n}x16\.F32 ", text), n            # SS, f16
        assert re.search(rf"HGMMA\.64x{n}x16\.F32\.BF16 R\d+, R\d+, ", text), n   # RS, bf16


# ---- GPU harness -------------------------------------------------------------------------------------------

def _driver():
    from cuda.bindings import driver as d

    return d


def _ok(result):
    d = _driver()
    err, *rest = result if isinstance(result, tuple) else (result,)
    assert err == d.CUresult.CUDA_SUCCESS, f"CUDA driver call failed: {err}"
    return rest[0] if len(rest) == 1 else (tuple(rest) if rest else None)


@functools.lru_cache(maxsize=None)
def _function(cubin: bytes, name: str):
    import torch

    d = _driver()
    torch.cuda.init()
    _ok(d.cuInit(0))
    ctx = _ok(d.cuDevicePrimaryCtxRetain(_ok(d.cuDeviceGet(torch.cuda.current_device()))))
    _ok(d.cuCtxSetCurrent(ctx))
    module = _ok(d.cuModuleLoadData(cubin))
    fn = _ok(d.cuModuleGetFunction(module, name.encode()))
    _ok(d.cuFuncSetAttribute(fn, d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 200 * 1024))
    return fn


def _launch(fn, threads: int, smem: int, args: list) -> None:
    """One CTA; args are torch tensors (passed as pointers), CUtensorMap objects or ctypes scalars."""
    import torch

    d = _driver()
    keep, addrs = [], []
    for a in args:
        if isinstance(a, torch.Tensor):
            keep.append(ctypes.c_uint64(a.data_ptr()))
            addrs.append(ctypes.addressof(keep[-1]))
        elif isinstance(a, d.CUtensorMap):
            keep.append(a)
            addrs.append(int(a.getPtr()))
        else:
            keep.append(a)
            addrs.append(ctypes.addressof(a))
    arr = (ctypes.c_void_p * len(addrs))(*addrs)
    cfg = d.CUlaunchConfig()
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = threads, 1, 1
    cfg.sharedMemBytes = smem
    cfg.hStream = d.CUstream(torch.cuda.current_stream().cuda_stream)
    cfg.numAttrs = 0
    _ok(d.cuLaunchKernelEx(cfg, fn, ctypes.addressof(arr), 0))
    torch.cuda.synchronize()


def _tensor_map(t, tile: SmemTile):
    """The tensor map that loads ``tile`` from the 2-D row-major tensor ``t`` (one box = one panel)."""
    import torch

    d = _driver()
    kind = {torch.float16: "FLOAT16", torch.bfloat16: "BFLOAT16", torch.int16: "UINT16"}[t.dtype]
    rows, cols = t.shape
    return _ok(d.cuTensorMapEncodeTiled(
        getattr(d.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{kind}"), 2, t.data_ptr(),
        [d.cuuint64_t(cols), d.cuuint64_t(rows)], [d.cuuint64_t(t.stride(0) * t.element_size())],
        [d.cuuint32_t(tile.panel_cols), d.cuuint32_t(tile.rows)], [d.cuuint32_t(1), d.cuuint32_t(1)],
        d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(d.CUtensorMapSwizzle, tile.swizzle.tensor_map_name),
        d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))


def _boxes(tile: SmemTile):
    import torch

    return torch.tensor([v for c0, off in tile.tma_boxes() for v in (c0, 0, off)], dtype=torch.int32, device="cuda")


def _panel(sw: Swizzle) -> int | None:
    return 16 if sw is Swizzle.NONE else None


# ---- (a) TMA swizzle ------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("sw,panel", [(s, _panel(s)) for s in SWIZZLES] + [(Swizzle.NONE, None)],
                         ids=lambda x: getattr(x, "name", str(x)))
def test_tma_writes_the_swizzled_layout(sw, panel):
    import torch

    rows, cols = 64, 128
    tile = SmemTile(rows, cols, 2, sw, panel)
    fn = _function(_compiled(TMA_SOURCE, "tma.cu"), "tma_probe")
    for trial in range(2):
        # distinct random 16-bit values (0xFFFF excluded: it is the poison)
        vals = torch.randperm(0xFFFF, device="cuda")[: rows * cols].to(torch.int32)
        src = vals.to(torch.int16).view(rows, cols).contiguous()
        out = torch.full((tile.nbytes // 4,), -1, dtype=torch.int32, device="cuda")
        _launch(fn, 128, tile.nbytes + 1024, [_tensor_map(src, tile), _boxes(tile), ctypes.c_int(tile.num_panels),
                                              ctypes.c_uint(tile.nbytes), out])
        got = out.view(torch.int16).cpu().to(torch.int32) & 0xFFFF
        want = torch.full_like(got, -1)
        want[_address_index(tile)] = vals.cpu()
        assert (want >= 0).all()
        bad = (got != want).nonzero().flatten()
        assert bad.numel() == 0, f"{sw.name}: {bad.numel()} misplaced halves, first at byte {2 * int(bad[0])}"


@functools.lru_cache(maxsize=None)
def _address_index(tile: SmemTile):
    """Half-word index in the buffer of each row-major tile element, from egtile.layout."""
    import torch

    return torch.tensor([tile.address(r, c) // 2 for r in range(tile.rows) for c in range(tile.cols)])


# ---- (b) SS and (c) RS wgmma --------------------------------------------------------------------------------------

def _operand_inputs(major: Major, mn: int, role: str, sw: Swizzle, dt):
    """A random operand (logical mn x K, values exact in dt), the global tensor TMA reads, the tile, and
    the four per-k-step descriptors (start relative to the tile)."""
    import torch

    logical = torch.randn(mn, K, dtype=torch.float32, device="cuda").to(dt)
    glob = logical.contiguous() if major is Major.K else logical.t().contiguous()
    tile = SmemTile(glob.shape[0], glob.shape[1], 2, sw, _panel(sw))
    op = WgmmaOperand(tile, major, role)
    words = [op.descriptor(0, 16 * j, mn).encode() for j in range(K // 16)]
    signed = [w - (1 << 64) if w >= 1 << 63 else w for w in words]       # the same 64 bits as int64
    return logical, glob, tile, torch.tensor(signed, dtype=torch.int64, device="cuda")


def _placed(out, n: int):
    """The 64 x n accumulator from the register dump out[thread * n/2 + reg]."""
    import torch

    rows, cols = _accumulator_index(n)
    d = torch.full((64, n), float("nan"), dtype=torch.float64)
    d[rows, cols] = out.cpu().double()
    return d


@functools.lru_cache(maxsize=None)
def _accumulator_index(n: int):
    """(row, col) index tensors of register dump entry thread * n/2 + reg, from egtile.layout."""
    import torch

    frag = wgmma_accumulator(n)
    coords = [frag.coord(t, v) for t in range(128) for v in range(n // 2)]
    return torch.tensor([r for r, _ in coords]), torch.tensor([c for _, c in coords])


def _compare(got, a, b, what: str) -> None:
    import torch

    ref = a.double().cpu() @ b.double().cpu()
    # products of 16-bit values are exact in f32; each of the K additions rounds (<= 1 f32 ulp, also for
    # tensor cores that truncate): |D - A B| <= K 2^-23 (|A| |B|)
    bound = K * 2.0 ** -23 * (a.double().abs().cpu() @ b.double().abs().cpu()) + 1e-30
    assert not torch.isnan(got).any(), f"{what}: NaN in the result (an unwritten register or scale-d ignored)"
    err = (got - ref).abs()
    assert (err <= bound).all(), f"{what}: max error {float(err.max()):.3g} at {divmod(int(err.argmax()), got.shape[1])}"


@pytest.mark.gpu
@pytest.mark.parametrize("dt,ta,tb,n", SS_CASES, ids=lambda x: str(x))
def test_wgmma_ss_every_swizzle(dt, ta, tb, n):
    import torch

    tdt = getattr(torch, dt)
    fn = _function(_compiled(ss_source(n, TYPES[dt], ta, tb), "ss.cu"), "wgmma_ss_probe")
    for sa in SWIZZLES:
        for sb in SWIZZLES:
            a, ga, ta_tile, da = _operand_inputs(Major.MN if ta else Major.K, 64, "A", sa, tdt)
            bt, gb, tb_tile, db = _operand_inputs(Major.MN if tb else Major.K, n, "B", sb, tdt)   # bt: n x K
            out = torch.full((128 * n // 2,), float("nan"), dtype=torch.float32, device="cuda")
            smem = ((ta_tile.nbytes + 1023) // 1024) * 1024 + tb_tile.nbytes + 1024
            _launch(fn, 128, smem, [_tensor_map(ga, ta_tile), _tensor_map(gb, tb_tile), _boxes(ta_tile),
                                    ctypes.c_int(ta_tile.num_panels), _boxes(tb_tile), ctypes.c_int(tb_tile.num_panels),
                                    ctypes.c_uint(ta_tile.nbytes), ctypes.c_uint(tb_tile.nbytes), da, db, out])
            _compare(_placed(out, n), a, bt.t(), f"SS {dt} tnspA={ta} tnspB={tb} N={n} A:{sa.name} B:{sb.name}")


@pytest.mark.gpu
def test_wgmma_ss_negated_b():
    import torch

    n = 64
    fn = _function(_compiled(ss_source(n, "half", 0, 0, scale_b=-1), "ssneg.cu"), "wgmma_ss_probe")
    a, ga, ta_tile, da = _operand_inputs(Major.K, 64, "A", Swizzle.B128, torch.float16)
    bt, gb, tb_tile, db = _operand_inputs(Major.K, n, "B", Swizzle.B64, torch.float16)
    out = torch.full((128 * n // 2,), float("nan"), dtype=torch.float32, device="cuda")
    _launch(fn, 128, 3 * 1024 + ta_tile.nbytes + tb_tile.nbytes,
            [_tensor_map(ga, ta_tile), _tensor_map(gb, tb_tile), _boxes(ta_tile), ctypes.c_int(ta_tile.num_panels),
             _boxes(tb_tile), ctypes.c_int(tb_tile.num_panels), ctypes.c_uint(ta_tile.nbytes),
             ctypes.c_uint(tb_tile.nbytes), da, db, out])
    _compare(_placed(out, n), a, -bt.t(), "SS imm-scale-b = -1")


@pytest.mark.gpu
@pytest.mark.parametrize("dt,tb,n", RS_CASES, ids=lambda x: str(x))
def test_wgmma_rs_every_swizzle(dt, tb, n):
    import torch

    tdt = getattr(torch, dt)
    fn = _function(_compiled(rs_source(n, TYPES[dt], tb), "rs.cu"), "wgmma_rs_probe")
    afrag = wgmma_a_registers()
    for sb in SWIZZLES:
        a = torch.randn(64, K, dtype=torch.float32).to(tdt)
        # a_vals[t][j][slot] = A[row, 16 j + col] for (slot, row, col) in the register-A fragment of thread t
        vals = torch.empty(128, K // 16, 8, dtype=torch.float32)
        for t in range(128):
            for v, r, c in afrag.elements(t):
                vals[t, :, v] = a[r, c::16][: K // 16].float()
        bt, gb, tb_tile, db = _operand_inputs(Major.MN if tb else Major.K, n, "B", sb, tdt)
        out = torch.full((128 * n // 2,), float("nan"), dtype=torch.float32, device="cuda")
        _launch(fn, 128, tb_tile.nbytes + 1024, [_tensor_map(gb, tb_tile), _boxes(tb_tile),
                                                 ctypes.c_int(tb_tile.num_panels), ctypes.c_uint(tb_tile.nbytes),
                                                 vals.cuda(), db, out])
        _compare(_placed(out, n), a, bt.t(), f"RS {dt} tnspB={tb} N={n} B:{sb.name}")


# ---- the GEMM prototype's main loop (benchmarks/prototypes/wgmma_gemm.py) ----------------------------------

def _prototype():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "prototypes" / "wgmma_gemm.py"
    spec = importlib.util.spec_from_file_location("wgmma_gemm_prototype", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod              # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("index", [0, 9], ids=["Bt-K-major", "B-MN-major"])
def test_gemm_prototype_main_loop_is_hgmma_without_spills(index):
    proto = _prototype()
    cfg = proto.variants()[index]
    cubin, log = proto.compile_cubin(cfg, 1024, 1024, 1024)
    assert "C7508" not in log and "C7515" not in log, log       # setmaxnreg honoured, wgmma not serialized
    text, ops = _sass(cubin)
    assert re.search(r"HGMMA\.64x256x16\.F32", text)
    assert "UTMALDG.2D" in ops and re.search(r"USETMAXREG\.DEALLOC\S* 0x28\b", text), sorted(ops)  # producer: 40
    assert re.search(r"USETMAXREG\.TRY_ALLOC\S* \w+, 0xe8\b", text)                          # consumers: 232
    assert not re.search(r"\b(LDL|STL)\b", text)
    assert _usage(cubin)["LOCAL"] == 0


def test_gemm_prototype_pair_release_has_no_gpu_scope_membar():
    # mbarrier.arrive.release.cluster compiles to MEMBAR.ALL.GPU before every arrive; in the consumer loop
    # that cost ~40% of the throughput on the H200 (docs/design/wgmma.md). The pair schedule's stage
    # release must be plain arrives; the only GPU-scope fences left are the two cluster barriers.
    proto = _prototype()
    cfg = next(v for v in proto.variants() if v.cluster == 2 and v.persistent)
    cubin, log = proto.compile_cubin(cfg, 1024, 1024, 1024)
    text, _ = _sass(cubin)
    assert "UTMALDG.2D.MULTICAST" in text
    assert len(re.findall(r"MEMBAR\.ALL\.GPU", text)) == 2, log
    assert len(re.findall(r"UCGABAR_WAIT", text)) == 2
