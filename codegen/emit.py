"""``ir.Scheduled`` -> one CUDA C++ translation unit for NVRTC.

Shape of the generated kernel::

    #include "egtile_*.cuh"                 // egtile's device helpers (inline PTX)
    #include <headers statements declare>    // Emitter.headers beyond egtile's own
    <device code statements declare>         // Emitter.device_code, each once
    <T.import_source strings, verbatim>
    extern "C" __global__ void __launch_bounds__(threads, 1)
    <name>_kernel(<dtype>* <param>, ..., const __grid_constant__ CUtensorMap eg_tmap_<buf>_<k>, ...) {
      extern __shared__ __align__(1024) unsigned char smem[];
      <ctype>* <buffer> = reinterpret_cast<<ctype>*>(smem + <offset>);   // shared and fragment buffers
      eg_u64* eg_bar_<name> = ...;                                        // mbarrier arrays
      unsigned char* eg_scratch_<name> = smem + <offset>;                  // statements' scratch areas
      <ctype> <local>[<numel>];                                           // local buffers, per thread
      const int eg_tid = threadIdx.x; const int <block var> = blockIdx.{x,y,z} (or their expressions of the launch position: Scheduled.dispatch);
      if (eg_tid == 0) { mbarrier.init each barrier; fence.mbarrier_init }  __syncthreads();
      <body>
    }

``__launch_bounds__(threads, 1)`` gives ptxas the register cap at entry that ``setmaxnreg`` needs
(otherwise it ignores it, warning C7508).

The body is each statement's registered emitter (:mod:`egtile.codegen.registry`, egtile's own in
:mod:`egtile.codegen.ops`); the includes, helpers, tensor maps, shared layout and parameter alignment come
from what those emitters declare (:mod:`egtile.codegen.resources`). egtile's own headers are always
included, in a fixed order, so that the source of a kernel does not depend on which of them it uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from pathlib import Path

from egtile import __version__
from egtile.ir.dispatch import LAUNCH
from egtile.ir.dtypes import dtype
from egtile.ir.scheduled import Scheduled, ThreadRange, swalk

from egtile.codegen import ops  # noqa: F401  (registers egtile's own emitters)
from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen import exprs
from egtile.codegen.exprs import ctype
from egtile.codegen.layout import SMEM_BASE_ALIGN, TmaOperand, collect_tma, plan_smem, scratch_ident
from egtile.codegen.names import barrier_ident, ident, kernel_symbol, schedule_scope
from egtile.codegen.registry import EMITTERS, emit_stmts
from egtile.codegen.resources import KernelNeeds, kernel_needs
from egtile.codegen.threads import TID, indent

# egtile's own device headers, always included in this order (a stable source and cache key)
HEADERS = ("egtile_common.cuh", "egtile_mbarrier.cuh", "egtile_tma.cuh", "egtile_cp_async.cuh", "egtile_sync.cuh")
TMA_GLOBAL_ALIGN = 16
_GRID_AXES = ("x", "y", "z")


@dataclass(frozen=True)
class ParamSpec:
    """One global-buffer parameter as the launcher must check it.

    Attributes:
        name: the kernel parameter's name.
        dtype: element dtype name.
        shape: static shape (elements), outermost first.
        align: bytes the tensor's data pointer must be a multiple of (16 for TMA operands
            (cuTensorMapEncodeTiled globalAddress), the chunk size for cp.async sources, else the element size).
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    align: int


@dataclass(frozen=True)
class Generated:
    """The generated source with what the launcher needs.

    Attributes:
        symbol: the ``extern "C"`` kernel name.
        source: CUDA C++ source (includes egtile's headers by name).
        threads: threads per block.
        grid: blocks per grid dimension (x first).
        smem_bytes: dynamic shared memory per block (bytes).
        params: the global-buffer parameters, in kernel parameter order.
        tma: the tensor-map parameters, after the buffers, in this order.
    """

    symbol: str
    source: str
    threads: int
    grid: tuple[int, ...]
    smem_bytes: int
    params: tuple[ParamSpec, ...]
    tma: tuple[TmaOperand, ...]


def _signature(s: Scheduled, symbol: str, tma: tuple[TmaOperand, ...]) -> str:
    args = [f"{ctype(p.dtype)}* {ident(p.name)}" for p in s.kernel.params]
    args += [f"const __grid_constant__ CUtensorMap {t.param}" for t in tma]
    return (f'extern "C" __global__ void __launch_bounds__({s.threads}, 1)\n'
            f"{symbol}({', '.join(args)}) {{")


def _prologue(s: Scheduled, ctx: Ctx, tma: tuple[TmaOperand, ...]) -> list[str]:
    if ctx.smem.base_align > 128:
        # the dynamic shared window is not aligned beyond 16 bytes by itself: round the base up (the layout
        # reserved the slack) so that every swizzle pattern starts where its buffer's offset says
        a = ctx.smem.base_align
        lines = [f"extern __shared__ __align__({SMEM_BASE_ALIGN}) unsigned char eg_smem_raw[];",
                 f"unsigned char* const smem = eg_smem_raw + (({a}u - (eg_smem_addr(eg_smem_raw) & {a - 1}u)) & {a - 1}u);"]
    else:
        lines = [f"extern __shared__ __align__({SMEM_BASE_ALIGN}) unsigned char smem[];"]
    for name, off in ctx.smem.buffers:
        t = ctype(s.buffer(name).dtype)
        lines.append(f"{t}* {ident(name)} = reinterpret_cast<{t}*>(smem + {off});")
    for name, off in ctx.smem.barriers:
        lines.append(f"eg_u64* {barrier_ident(name)} = reinterpret_cast<eg_u64*>(smem + {off});")
    for name, off in ctx.smem.scratch:
        lines.append(f"unsigned char* {scratch_ident(name)} = smem + {off};")
    for b in s.buffers:
        if b.scope == "local":
            lines.append(f"{ctype(b.dtype)} {ident(b.name)}[{b.numel}];")
        elif (f := s.fragment(b.name)) is not None:
            # a register fragment: each thread holds its slots (egtile.ir.fragment); indexed by constants only
            lines.append(f"{ctype(b.dtype)} {ident(b.name)}[{f.values_per_thread}];  // registers: {f.name}")
    lines.append(f"const int {TID} = (int)threadIdx.x;")
    if s.threads == 1:
        lines.append(f"(void){TID};  // a one-thread block: every thread range is thread 0, tested by no condition")
    if len(s.kernel.block_vars) > len(_GRID_AXES):
        raise codegen_error(ctx, f"grid has {len(s.kernel.block_vars)} dimensions; CUDA supports 3")
    if s.dispatch is None:
        bound = [f"blockIdx.{axis}" for axis in _GRID_AXES[:len(s.kernel.block_vars)]]
    else:
        # the block indices of another start order (egtile.ir.dispatch): the same map the simulator evaluates
        lin = " + ".join(f"{_launch_stride(s, d)}u * blockIdx.{axis}" if d else f"blockIdx.{axis}"
                         for d, axis in enumerate(_GRID_AXES[:len(s.kernel.block_vars)]))
        lines.append(f"const int {ident(LAUNCH)} = (int)({lin});")
        bound = [exprs.emit(e, ctx) for e in s.dispatch.indices()]
    for v, idx in zip(s.kernel.block_vars, bound):
        lines.append(f"const {ctype(v.dtype)} {ident(v.name)} = ({ctype(v.dtype)})({idx});")
        lines.append(f"(void){ident(v.name)};  // a block index the body may not use")
    # Each tensor map's descriptor is fetched into the TMA unit ahead of the block's first tile copy, which would
    # otherwise wait for it at the start of every block (a hint: nothing waits on it, no value depends on it).
    prefetch = [f"eg_tma_prefetch_descriptor(&{t.param});" for t in tma]
    if s.barriers:
        init = [f"eg_mbarrier_init(&{barrier_ident(m.name)}[{i}], {m.arrive_count});"
                for m in s.barriers for i in range(m.stages)]
        lines += [f"if ({TID} == 0) {{", *indent(prefetch + init), "  eg_fence_mbarrier_init();", "}",
                  "__syncthreads();"]
    elif prefetch:
        lines += [f"if ({TID} == 0) {{", *indent(prefetch), "}"]
    return lines


def _launch_stride(s: Scheduled, d: int) -> int:
    """Blocks of the launch position per step of grid dimension ``d`` (``x`` fastest)."""
    return prod(int(m) for m in s.kernel.grid[:d])


def _param_specs(s: Scheduled, ctx: Ctx, tma: tuple[TmaOperand, ...]) -> tuple[ParamSpec, ...]:
    align = {p.name: dtype(p.dtype).bytes for p in s.kernel.params}
    for t in tma:
        align[t.buffer] = max(align[t.buffer], TMA_GLOBAL_ALIGN)
    for st in swalk(s.body):
        em = EMITTERS.get(type(st))
        if em is None or em.param_align is None:
            continue
        for name, bytes_ in em.param_align(st, ctx):
            if name in align:
                align[name] = max(align[name], bytes_)
    return tuple(ParamSpec(p.name, dtype(p.dtype).name, tuple(p.shape), align[p.name]) for p in s.kernel.params)


FP8_HEADER = "egtile_fp8.cuh"
"""Included after :data:`HEADERS` only by a kernel whose code names an 8-bit float type (``__nv_fp8_*``)."""
RNG_HEADER = "egtile_rng.cuh"
"""Included after :data:`HEADERS` only by a kernel that calls ``T.rng_init`` / ``T.rng_rand`` (``eg_rng_*``,
:mod:`egtile.rng`)."""


def _includes(needs: KernelNeeds, fp8: bool = False, rng: bool = False) -> list[str]:
    names = list(HEADERS) + ([FP8_HEADER] if fp8 else []) + ([RNG_HEADER] if rng else []) + \
        [h for h in needs.headers if h not in HEADERS]
    return [f"#include {h}" if h.startswith("<") else f'#include "{h}"' for h in names]


def _device_code(needs: KernelNeeds) -> list[str]:
    out: list[str] = []
    for i, code in enumerate(needs.device_code):
        out += [f"// ---- device code of a registered emitter #{i}", *code.rstrip("\n").split("\n"), ""]
    return out


def _sources(s: Scheduled) -> list[str]:
    out: list[str] = []
    for i, src in enumerate(s.kernel.sources):
        out += [f"// ---- T.import_source #{i} (verbatim)", *src.rstrip("\n").split("\n"),
                f"// ---- end of T.import_source #{i}", ""]
    return out


def generate(s: Scheduled) -> Generated:
    """Generate the kernel of ``s``.

    Raises:
        CodegenError: a statement the backend cannot lower, or one whose class has no registered emitter
            (message names it and the user's line).
        ResourceError: shared memory or threads beyond what an sm_90 block may use.
    """
    with schedule_scope(s):  # user names -> C identifiers, injective for this kernel (codegen/names.py)
        return _generate(s)


def _generate(s: Scheduled) -> Generated:
    needs = kernel_needs(s)
    smem = plan_smem(s, needs)
    tma = collect_tma(s, needs)
    ctx = Ctx(s, smem, tma, ThreadRange(0, s.threads)).ranged(
        *((v.name, 0, n) for v, n in zip(s.kernel.block_vars, s.kernel.grid)))  # blockIdx is below the grid's extent
    symbol = kernel_symbol(s.kernel.name)
    # the file's name only: an absolute path would make the source (and the cache key) machine-dependent
    where = f" ({Path(s.kernel.loc.file).name}:{s.kernel.loc.line})" if s.kernel.loc is not None else ""
    body = _prologue(s, ctx, tma) + emit_stmts(s.body, ctx)
    signature = _signature(s, symbol, tma)
    fp8 = any("__nv_fp8_" in line for line in (signature, *body))
    rng = any("eg_rng_" in line for line in body)
    head = [
        f"// Generated by egtile {__version__} from kernel {s.kernel.name!r}{where}.",
        f"// {s.threads} threads/block, grid {tuple(s.kernel.grid)}, {smem.total} bytes of dynamic shared memory, "
        f"{len(s.barriers)} mbarrier arrays, {len(tma)} TMA tensor maps.",
        *_includes(needs, fp8, rng),
        "",
        *_device_code(needs),
    ]
    source = "\n".join(head + _sources(s) + [signature, *indent(body), "}", ""])
    return Generated(symbol, source, s.threads, tuple(s.kernel.grid), smem.total, _param_specs(s, ctx, tma), tma)


def emit(s: Scheduled) -> str:
    """The CUDA C++ source of schedule ``s`` (see :func:`generate` for errors)."""
    return generate(s).source
