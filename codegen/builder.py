"""``ir.Scheduled`` -> :class:`BuiltKernel` (source + cubin + launch metadata), through the cache."""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass

from egtile import __version__
from egtile.engine.callback import apply_cuda_postproc
from egtile.errors import SourceLoc
from egtile.ir.scheduled import Scheduled

from egtile.codegen import cache, nvrtc
from egtile.codegen.emit import Generated, ParamSpec, generate
from egtile.codegen.layout import TmaOperand


@dataclass(frozen=True)
class BuiltKernel:
    """A compiled kernel and what launching it needs.

    Attributes:
        symbol: the ``extern "C"`` kernel name in ``cubin``.
        source: the generated CUDA C++.
        cubin: the sm_90a ELF image (``cuModuleLoadData``).
        arch: the NVRTC target, ``"sm_90a"``.
        threads: threads per block.
        grid: blocks per grid dimension, x first.
        smem_bytes: dynamic shared memory per block (bytes).
        params: global-buffer parameters in order (name, dtype, shape, required alignment in bytes).
        tma: tensor-map parameters, following the buffers (parameter name, global buffer, box).
        log: NVRTC's warnings (empty when clean).
        cache_hit: the cubin came from the on-disk cache (no NVRTC call was made).
        compile_s: seconds spent in emission + cache lookup + NVRTC.
        fast_math: compiled with NVRTC's ``--use_fast_math`` (TileLang's ``TL_ENABLE_FAST_MATH``) instead of
            egtile's default arithmetic contract.
    """

    symbol: str
    source: str
    cubin: bytes
    arch: str
    threads: int
    grid: tuple[int, ...]
    smem_bytes: int
    params: tuple[ParamSpec, ...]
    tma: tuple[TmaOperand, ...]
    log: str
    cache_hit: bool
    compile_s: float
    fast_math: bool = False


_SID = re.compile(r"// sid (\d+)")


def _locator(s: Scheduled, source: str):
    """Generated line number -> the user's source line of the nearest statement marker above it."""
    from egtile.ir.kernel import walk

    lines = source.split("\n")
    locs = {st.sid: st.loc for st in walk(s.kernel.body)}

    def locate(n: int) -> SourceLoc | None:
        for k in range(n - 1, max(-1, n - 40), -1):
            line = lines[k] if k < len(lines) else ""
            if "T.import_source #" in line:
                return s.kernel.loc
            m = _SID.search(line)
            if m:
                return locs.get(int(m.group(1))) or s.kernel.loc
        return s.kernel.loc

    return locate


def build(s: Scheduled, *, arch: str = nvrtc.DEFAULT_ARCH, fast_math: bool = False) -> BuiltKernel:
    """Emit CUDA C++ for ``s`` and compile it to a cubin (or take the cubin from the cache); ``fast_math``:
    NVRTC's ``--use_fast_math`` (:data:`nvrtc.FAST_MATH_OPTIONS`).

    No GPU is needed. Raises CodegenError / ResourceError (cannot lower) or CompileError (NVRTC
    rejected the program: log and offending generated lines in the message).
    """
    t0 = time.perf_counter()
    low: Generated = generate(s)
    source = apply_cuda_postproc(low.source, arch)  # tilelang.engine.callback's hook (egtile.engine.callback)
    if source != low.source:
        low = dataclasses.replace(low, source=source)
    key = cache.cache_key(low.source, nvrtc.header_texts(), nvrtc.options(arch, fast_math), nvrtc.nvrtc_version(), __version__)
    hit = cache.load(key, low.symbol)  # None unless the cached cubin checks out (codegen/cache.py)
    if hit is not None:
        cubin, log = hit
    else:
        out = nvrtc.compile_cuda(low.source, f"{low.symbol}.cu", arch, locate=_locator(s, low.source),
                                 fast_math=fast_math)
        cubin, log = out.cubin, out.log
        cache.store(key, cubin, log, low.symbol)
    return BuiltKernel(low.symbol, low.source, cubin, arch, low.threads, low.grid, low.smem_bytes, low.params,
                       low.tma, log, hit is not None, time.perf_counter() - t0, fast_math)
