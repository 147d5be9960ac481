"""``T.gemm`` on the tensor cores: ``wgmma.mma_async`` with shared-memory descriptors (sm_90a).

Hardware facts (PTX ISA 9.7.15, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions"):

* ``wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16}`` multiplies a 64 x 16 A by a 16 x N B
  (N a multiple of 8 in [8, 256]) into a 64 x N f32 D held in the registers of the 128 threads of one
  warpgroup, in a layout the instruction fixes (9.7.15.5.1.1.1). A and B are read from shared memory
  through 64-bit matrix descriptors (9.7.15.5.1.2.2) whose LBO / SBO / swizzle fields describe the tile's
  layout; ``imm-trans-a/b`` read an operand MN-major (transposed), for 16-bit types only.
* The FP8 form ``wgmma.mma_async.sync.aligned.m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2}`` (9.7.15.5.2): a k32 step
  (every instruction reads 32 bytes of K, 16 f16 or 32 fp8 values), the same f32 accumulator layout, A and B
  of either 8-bit format independently (``.atype`` and ``.btype`` may differ only for FP8), and no
  ``imm-trans-a/b`` operands: "the transpose operation is only supported for the .f16/.bf16 types", so an
  8-bit operand in shared memory is read K-major only: A as M x K (``transpose_A=False``), B as N x K
  (``transpose_B=True``, TileLang's FP8 GEMM). The descriptors are the same with 1-byte elements (a 128-byte
  swizzle row holds 128 values). The tensor core's FP8 products are exact in float32 (at most 4 + 4
  significand bits); egtile's interpreter and simulator accumulate them in float32, the H200's FP8 tensor
  core adds them with fewer significand bits (DeepSeek-V3's report: about 14), so on the GPU an FP8 gemm
  agrees with float32 within that accumulation's bound, not bit for bit (docs/language.md, "Arithmetic").
* It is asynchronous: ``wgmma.fence`` orders earlier register accesses before it, ``commit_group`` closes
  a group, ``wait_group N`` waits until at most N groups are pending (9.7.15.7). Until then the
  accumulator registers and the shared operands belong to the tensor core.
* The operands are read by the *async proxy*: shared memory written by ordinary stores must be fenced
  with ``fence.proxy.async`` by its writers before the wgmma reads it (9.7.13.3.2); TMA writes are async
  already and are ordered by the mbarrier wait alone.

The rewrite ``gemm-to-wgmma``: a ``T.gemm`` (encoded ``tile(sid)``) -> ``wgmma(sid, split, swa, swb)``, one
alternative per legal option: how the accumulator tile is split over the kernel's consumer warpgroups
(``split``: rows or columns, :class:`egtile.layout.AccumulatorTiling`, the instruction N the widest that
fits) and the swizzle of each operand's shared buffer (``swa`` / ``swb``, :mod:`egtile.rules.swizzle`).
The declaration fixes those layouts for the whole schedule (``Decision.layouts``): the accumulator
fragment goes to registers in the tiling's layout (:mod:`egtile.rules.fragment`), the operand buffers are
laid out in their swizzle (the TMA loads that fill them, and any SIMT access, use the same layout). Its
lowering is the wgmma issue and ``wait_group 0`` (operands written by generic stores get their
``fence.proxy.async`` with the CTA barrier that orders the stores before the wgmma, :mod:`egtile.lower.sync`): ``T.gemm`` is synchronous, so its accumulator is complete and its operands free when the
next statement runs (the stage release that follows it in a pipeline comes after the wait).

Side conditions:

* ``wgmma-operand-types`` (hardware oracle :func:`operand_type_problems`): A and B form an instruction: both
  f16, both bf16, or each an 8-bit float (e4m3 / e5m2, mixed allowed);
* ``wgmma-8bit-k-major`` (hardware oracle :func:`k_major_problems`): an 8-bit operand is K-major (no
  imm-trans for .e4m3/.e5m2): ``T.gemm(A, B, C, transpose_B=True)`` with A given M x K and B given N x K. Any
  other transposition of an 8-bit operand stays the SIMT gemm (a transposing copy into a K-major tile would be
  another statement's decision; egtile does not make it), which ``explain()`` says;
* ``wgmma-eligible`` (hardware oracle :func:`wgmma_options`, which requires the two above): A and B are whole
  2-D shared tiles or column slices of them (``wgmma-operand-slice`` below); C is a whole 2-D f32 fragment; K a
  multiple of the instruction's K (16, 32 for 8-bit types); the kernel's threads whole
  warpgroups; some (split, swa, swb) is legal: the tiling exists, its accumulator registers can be held while
  the wgmma is in flight (``setmaxnreg`` plan less ``egtile.rules.fragment.INFLIGHT_RESERVE``: in-flight
  accumulators cannot spill; the rest of the fragment group may, at a cost, see below), each operand buffer can take its mode
  and every instruction's operand is expressible by a descriptor in it; when the accumulator is tied to row
  fragments (a softmax: :mod:`egtile.lower.fragment_layouts`), ``wgmma-rows-across-warpgroups``
  (:func:`_row_shuffle_problems`): within a warp a row's replicas are combined by butterfly shuffles; an N split
  over ``W`` warpgroups (each warpgroup issues ``m64nN'`` on its ``N / W`` columns, several instructions for a
  slice wider than 256) leaves replicas of every row in each warpgroup, so each row reduction also combines the
  warpgroups' partials through a ``W x rows`` shared scratch with a CTA barrier before and after the loads
  (:func:`egtile.rules.fragment.cross_warp_reduce`; TileLang's ``GemmWarpPolicy.FullCol``); that split is an
  alternative only where the M split cannot hold the rows (``rows % (64 W) != 0``: 64 rows over two
  warpgroups), so a group's gemms, which share their rows, all take the one split that exists;
* ``wgmma-operand-slice`` (:func:`operand_columns`, checked per swizzle in :func:`_in_layout_problems`): an operand
  given as a slice ``buf[:, c0:c0 + n]`` of a 2-D shared buffer (TileLang's ``Q_shared[:, :D]`` and ``Q_shared[:, D:]``
  of a query tile with a rope tail) covers all the buffer's rows, at constant columns, in a swizzled layout whose
  column panels it starts on (``c0`` a multiple of the panel's columns). A tile is stored as column panels of the
  swizzle span, ``rows x span`` bytes each and back to back (:class:`egtile.layout.SmemTile`), and a panel starts on
  a whole swizzle pattern (8-row groups), so the slice's bytes are the panels ``c0 / pc ..`` of the buffer exactly as
  the tile ``rows x n`` would lay them out: its descriptors are that tile's, based at the slice's first element
  (``tests/test_wgmma_slices.py`` checks the byte addresses element by element). The columns are the contiguous
  dimension, so a slice is along K for a K-major operand and along M or N for an MN-major one;
* ``wgmma-buffer-one-layout`` (:func:`_one_layout_problems`): an option reading shared buffer ``X`` in layout ``l``
  is kept only when every other ``T.gemm`` reading ``X`` that has wgmma options of its own admits ``l``: a buffer has
  one layout, and two gemms reading it in different roles (a K-major B here, an MN-major B of an N-split tile there)
  may admit different swizzles. The filter takes each gemm's layouts over all its splits: two gemms that agree on a
  layout only under splits extraction does not take are refused at lowering, naming both (``needs two layouts``);
* ``fragment-users-admit-registers``: every other statement touching C can run by the register layout
  (:mod:`egtile.rules.fragment`);
* ``fragment-peers-in-lockstep``: a ``T.Parallel`` that touches several 2-D fragments of C's group (peers:
  flash-attention backward combines two accumulators into the next gemm's register A) accesses each at the
  iteration's own element and each has the nest's shape; the group's one layout then puts element ``(i, j)``
  of every peer in the same thread's registers at the same slot (:mod:`egtile.rules.fragment`);
* ``wgmma-operands-async-proxy``: no pipeline producer that asks for cp.async (``prefer_instruction``) writes A
  or B. TMA writes through the async proxy already; a SIMT producer's generic stores are fenced by their writers
  (``fence.proxy.async`` before each producer thread's arrive on ``full``, :mod:`egtile.rules.copy`, the
  ``wgmma-simt-operand-unfenced`` mutant); cp.async writes complete after the issuing thread moved on, where no
  fence of the writer can follow them, and the PTX ISA does not say which proxy they use: egtile keeps the two
  apart (conservative: the request wins and the gemm stays SIMT, which ``explain()`` says).

Cost: the tensor core's time for ``M x N x K`` MACs (``WGMMA_MACS_PER_CYCLE``), a quarter of the shared
bytes the instructions read (the split that reads A fewer times wins a tie), the fence/commit/wait,
each operand's swizzle cost (TMA boxes, bank conflicts), and the gemm's share of its fragment group's spill
cost when the group's live registers exceed the ``setmaxnreg`` allocation (``egtile.rules.fragment.spill_of``:
ptxas then spills to local memory; an estimate, 0 when they fit, noted by ``explain()``).
"""

from __future__ import annotations

from math import ceil

from egglog import Bool, String, StringLike, eq, function, i64, i64Like, ne, relation, rule, var

from egtile.ir import Gemm, ThreadRange, dtype
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.layout import LayoutError, Major, WgmmaOperand
from egtile.layout.fragment import row_projection
from egtile.layout.tiling import SPLITS, AccumulatorTiling
from egtile.lower import fragment_layouts
from egtile.rules import fragment as F
from egtile.rules import swizzle as SW
from egtile.rules import warp_specialize as WS
from egtile.schedule import cost as C
from egtile.schedule import dataflow as D
from egtile.schedule.decision import Cost, Decision
from egtile.schedule.rule import Condition, FactSpec, NumSpec, Rule, Violation, holds, stmt_condition
from egtile.schedule.schema import Stmt, num
from egtile.verdict import Verdict

WGMMA_DTYPES = ("float16", "bfloat16")
"""The 16-bit operand types (one type for A and B; register A takes only these)."""
WGMMA_FP8 = ("float8_e4m3fn", "float8_e5m2")
"""The 8-bit operand types of the FP8 form (``.e4m3`` / ``.e5m2``, independently for A and B)."""
K_STEP = 16
"""K of one 16-bit instruction (k16); :func:`k_step` gives every type's."""
ACC_RESERVE = 64
"""Registers per consumer thread kept free of accumulators: addresses, descriptors, loop counters and the
epilogue's temporaries (the prototype's 128 accumulators under setmaxnreg 232 left 104, without spills).
:func:`max_accumulators` is that no-spill budget; the oracles no longer refuse an option above it (the spill is
a cost, egtile.rules.fragment), only one above what a thread can hold in flight."""
WGMMA_MACS_PER_CYCLE = 2048
"""Dense f16/bf16 multiply-accumulates per cycle per SM: H100/H200 SXM, 989.4 TFLOP/s at 1.83 GHz over
132 SMs (NVIDIA H100 datasheet) = 2048 MAC/cycle/SM. FP8: twice that (1978.9 TFLOP/s dense, same datasheet)."""
SMEM_BYTES_PER_CYCLE = 128
"""Shared-memory bandwidth per SM (32 banks x 4 bytes per cycle; CUDA C++ Programming Guide, "Shared Memory")."""
WGMMA_GROUP = 3 * C.MBARRIER_OP
"""wgmma.fence + commit_group + wait_group around one T.gemm (estimate, of the order of an mbarrier operation each)."""

# ----------------------------------------------------------------------------------------------------
# The instruction forms: operand types, K step, 8-bit operands K-major


def k_step(dt: str) -> int:
    """K of one instruction for operands of type ``dt``: 32 bytes of K (k16 for 16-bit, k32 for 8-bit types)."""
    from egtile.layout import K_BYTES

    return K_BYTES // dtype(dt).bytes


def is_fp8(dt: str) -> bool:
    return dtype(dt).name in WGMMA_FP8


def macs_per_cycle(dt: str) -> int:
    """Dense multiply-accumulates per cycle per SM for operands of type ``dt`` (:data:`WGMMA_MACS_PER_CYCLE`)."""
    return WGMMA_MACS_PER_CYCLE * (2 if is_fp8(dt) else 1)


def ptx_type(dt: str) -> str:
    """The PTX operand type of ``dt`` in a wgmma (``.f16``, ``.bf16``, ``.e4m3``, ``.e5m2``), without the dot."""
    return {"float16": "f16", "bfloat16": "bf16", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}[dtype(dt).name]


def operand_type_problems(a_dtype: str, b_dtype: str) -> list[str]:
    """Why A and B of these types form no wgmma.mma_async instruction ([] if they do): both f16, both bf16, or
    each e4m3 / e5m2 (PTX ISA 9.7.15.5.2: .atype and .btype may differ only for the FP8 form)."""
    a, b = dtype(a_dtype).name, dtype(b_dtype).name
    if (a in WGMMA_FP8 and b in WGMMA_FP8) or (a == b and a in WGMMA_DTYPES):
        return []
    if a in WGMMA_FP8 + WGMMA_DTYPES and b in WGMMA_FP8 + WGMMA_DTYPES:
        return [f"operand types {a_dtype} x {b_dtype}: wgmma takes f16 x f16, bf16 x bf16 or 8-bit floats "
                "(e4m3/e5m2) on both sides"]
    return [f"operand types {a_dtype} x {b_dtype}: wgmma.mma_async multiplies f16, bf16 or 8-bit floats "
            "(e4m3/e5m2) here"]


def k_major_problems(g: Gemm, a_dtype: str, b_dtype: str) -> list[str]:
    """Why an 8-bit operand of ``g`` would be read MN-major ([] if none is): the FP8 form has no imm-trans-a/b,
    so A must be given M x K (``transpose_A=False``) and B N x K (``transpose_B=True``)."""
    out = []
    if is_fp8(a_dtype) and g.trans_a:
        out.append(f"A ({g.a.buffer.name}, {a_dtype}) is given K x M (transpose_A=True): wgmma reads 8-bit operands "
                   "K-major only (no imm-trans-a for .e4m3/.e5m2, PTX ISA 9.7.15.5.2); give A as M x K")
    if is_fp8(b_dtype) and not g.trans_b:
        out.append(f"B ({g.b.buffer.name}, {b_dtype}) is given K x N (transpose_B=False): wgmma reads 8-bit operands "
                   "K-major only (no imm-trans-b for .e4m3/.e5m2, PTX ISA 9.7.15.5.2); give B as N x K with "
                   "transpose_B=True")
    return out


def _form_verdict(ctx, s, problems) -> Verdict:
    if not isinstance(s, Gemm):
        return Verdict(False, ("not a T.gemm",))
    k = ctx.kernel
    A, B = (k.buffer(r.buffer.name) for r in (s.a, s.b))
    p = problems(s, A, B)
    return Verdict(not p, tuple(p))


WGMMA_OPERAND_TYPES = FactSpec(
    "wgmma-operand-types", "A and B form a wgmma.mma_async instruction: f16 x f16, bf16 x bf16, or e4m3/e5m2 x "
    "e4m3/e5m2 (egtile.rules.mma.operand_type_problems)",
    lambda ctx, s: _form_verdict(ctx, s, lambda g, A, B: operand_type_problems(A.dtype, B.dtype)), scope="any")
WGMMA_8BIT_K_MAJOR = FactSpec(
    "wgmma-8bit-k-major", "every 8-bit operand is read K-major: A given M x K, B given N x K with transpose_B=True "
    "(no imm-trans for .e4m3/.e5m2; egtile.rules.mma.k_major_problems)",
    lambda ctx, s: _form_verdict(ctx, s, lambda g, A, B: k_major_problems(g, A.dtype, B.dtype)), scope="any")

# ----------------------------------------------------------------------------------------------------
# The hardware oracle: which (split, swa, swb) options are legal


def option_bit(split: str, swa: str, swb: str) -> int:
    """The bit of option ``(split, swa, swb)`` in the ``wgmma-options`` mask."""
    return 1 << (SPLITS.index(split) * 16 + SW.LAYOUTS.index(swa) * 4 + SW.LAYOUTS.index(swb))


OPTIONS = tuple((sp, a, b) for sp in SPLITS for a in SW.LAYOUTS for b in SW.LAYOUTS)


SLICE = "wgmma-operand-slice"
"""The named condition of an operand given as a column slice of its shared buffer (module docstring)."""


def operand_columns(r, buf) -> tuple[int, int] | None:
    """``(c0, n)`` when region ``r`` of 2-D buffer ``buf`` is all its rows at columns ``[c0, c0 + n)`` with constant
    offsets (a whole buffer is ``(0, cols)``); ``None`` for any other region (``wgmma-operand-slice``)."""
    from egtile.ir import Const

    if len(buf.shape) != 2 or len(r.extents) != 2 or not all(isinstance(o, Const) for o in r.offsets):
        return None
    r0, c0 = (int(o.value) for o in r.offsets)
    rows, n = r.extents
    if r0 != 0 or rows != buf.shape[0] or c0 < 0 or n <= 0 or c0 + n > buf.shape[1]:
        return None
    return c0, n


def matrix_k(g: Gemm) -> int:
    """The K of ``T.gemm`` ``g``: its A region's columns (rows when transposed)."""
    rows, cols = g.a.extents[-2:]
    return rows if g.trans_a else cols


def max_accumulators(threads: int) -> int:
    """Accumulator registers a consumer thread may hold: its ``setmaxnreg`` allocation under warp
    specialization (:func:`egtile.rules.warp_specialize.consumer_regs`) less :data:`ACC_RESERVE`."""
    return WS.consumer_regs(threads) - ACC_RESERVE


def operand(g: Gemm, role: str, tile) -> WgmmaOperand:
    """The wgmma operand of ``g``'s ``role`` (A or B) stored as ``tile``: A is K-major unless transposed, B
    (given as K x N) is MN-major unless transposed."""
    if role == "A":
        return WgmmaOperand(tile, Major.MN if g.trans_a else Major.K, "A")
    return WgmmaOperand(tile, Major.K if g.trans_b else Major.MN, "B")


def _operand_problems(g: Gemm, role: str, tile, tiling: AccumulatorTiling, k: int) -> list[str]:
    op = operand(g, role, tile)
    for w in range(tiling.warpgroups):
        for mi in range(tiling.m_blocks):
            for ni in range(tiling.n_blocks):
                r0, c0 = tiling.origin(w, mi, ni)
                for k0 in range(0, k, op.k_per_instruction):
                    p = op.problems(r0, 64, k0) if role == "A" else op.problems(c0, tiling.n, k0)
                    if p:
                        return p
    return []


def wgmma_options(ctx, g) -> tuple[int, list[str]]:
    """The mask of legal ``(split, swa, swb)`` options of ``T.gemm`` ``g`` (:func:`option_bit`) and, when it is
    0, why (module docstring, ``wgmma-eligible``): its own options (:func:`_ss_local`) whose operand layouts every
    other gemm reading the same buffer can take (``wgmma-buffer-one-layout``, :func:`_one_layout_problems`)."""
    if not isinstance(g, Gemm):
        return 0, ["not a T.gemm"]
    return _one_layout_options(ctx, g, "wgmma-options", _ss_local(ctx, g), (
        (option_bit(sp, la, lb), f"{sp} split, A {la}, B {lb}", ((g.a, la), (g.b, lb))) for sp, la, lb in OPTIONS))


def _one_layout_options(ctx, g: Gemm, name: str, local: tuple[int, list[str]], options) -> tuple[int, list[str]]:
    """The bits of ``local``'s mask whose operand layouts pass :func:`_one_layout_problems`, and why none does;
    ``options`` gives each bit with its label and its ``(region, layout)`` pairs (memoized per gemm as ``name``)."""
    key = (name, g.sid)
    if key in ctx._memo:
        return ctx._memo[key]
    mask, why = local
    kept = 0
    for bit, label, operands in options:
        if mask & bit:
            p = _one_layout_problems(ctx, g, operands)
            if p:
                why.append(f"{label}: {p[0]}")
            else:
                kept |= bit
    out = (kept, [] if kept else why)
    ctx._memo[key] = out
    return out


def _ss_local(ctx, g) -> tuple[int, list[str]]:
    """The options of ``g`` on its own (types, tiles, warpgroups, registers, descriptors), and why none."""
    key = ("wgmma-options-local", g.sid)
    if key in ctx._memo:
        return ctx._memo[key]
    k = ctx.kernel
    A, B, Cb = (k.buffer(r.buffer.name) for r in (g.a, g.b, g.c))
    why: list[str] = []
    if A.scope != "shared" or B.scope != "shared":
        why.append(f"operands {A.name} ({A.scope}) and {B.name} ({B.scope}) must both be shared (register-A wgmma "
                   "is not implemented)")
    if Cb.scope != "fragment":
        why.append(f"the accumulator {Cb.name} is {Cb.scope}; wgmma accumulates in registers (T.alloc_fragment)")
    why += [f"wgmma-operand-types: {x}" for x in operand_type_problems(A.dtype, B.dtype)]
    why += [f"wgmma-8bit-k-major: {x}" for x in k_major_problems(g, A.dtype, B.dtype)]
    if dtype(Cb.dtype).name != "float32":
        why.append(f"accumulator type {Cb.dtype}: wgmma accumulates in float32 here")
    if any(len(b.shape) != 2 for b in (A, B, Cb)) or not g.c.whole:
        why.append("A, B and C must be 2-D buffers, C whole")
    elif operand_columns(g.a, A) is None or operand_columns(g.b, B) is None:
        why.append(f"{SLICE}: A and B must be whole shared buffers or slices of their columns (every row, constant "
                   "column offsets)")
    if k.threads % 128 or k.threads < 128:
        why.append(f"the kernel has {k.threads} threads; wgmma runs on whole warpgroups (multiples of 128)")
    if why:
        ctx._memo[key] = (0, why)
        return 0, why
    M, N = Cb.shape
    K = matrix_k(g)
    ks = k_step(A.dtype)
    if K % ks:
        why.append(f"K = {K} is not a multiple of {ks} (wgmma k{ks} for {A.dtype})")
        ctx._memo[key] = (0, why)
        return 0, why
    W = k.threads // 128
    rows = fragment_layouts.has_rows(k, Cb.name)
    mask = 0
    for split in SPLITS:
        tiling = AccumulatorTiling.of(M, N, W, split)
        p = tiling.problems()
        if not p and tiling.registers_per_thread > F.inflight_limit(k.threads):
            p = [f"{tiling.registers_per_thread} accumulator registers per thread exceed the budget of "
                 f"{F.inflight_limit(k.threads)} a thread can hold while the wgmma is in flight (setmaxnreg "
                 f"{WS.consumer_regs(k.threads)} less {F.INFLIGHT_RESERVE}); more consumer threads "
                 f"(T.Kernel(..., threads=)) or a smaller tile"]
        if not p and rows:
            p = _row_shuffle_problems(tiling)
        if p:
            why += [f"{split} split: {x}" for x in p]
            continue
        for la in SW.LAYOUTS:
            pa = _in_layout_problems(ctx, g, "A", la, tiling, K)
            if pa:
                why.append(f"{split} split, A {la}: {pa[0]}")
                continue
            for lb in SW.LAYOUTS:
                pb = _in_layout_problems(ctx, g, "B", lb, tiling, K)
                if not pb and A.name == B.name and la != lb:
                    pb = [f"{ONE_LAYOUT}: A and B are both {A.name}, which has one layout"]
                if pb:
                    why.append(f"{split} split, B {lb}: {pb[0]}")
                    continue
                mask |= option_bit(split, la, lb)
    out = (mask, [] if mask else why)
    ctx._memo[key] = out
    return out


WGMMA_ELIGIBLE = FactSpec(
    "wgmma-eligible", "some accumulator tiling and operand swizzles make the T.gemm a wgmma.mma_async sequence "
    "(egtile.rules.mma.wgmma_options: types, whole tiles, warpgroups, register budget, descriptor expressibility, "
    "TMA boxes per swizzle span)",
    lambda ctx, s: Verdict(wgmma_options(ctx, s)[0] != 0, tuple(wgmma_options(ctx, s)[1][:6])), scope="any")
WGMMA_OPTIONS = NumSpec("wgmma-options", "bit mask of the legal (split, swa, swb) options (egtile.rules.mma.option_bit)",
                        lambda ctx, s: wgmma_options(ctx, s)[0] or None, scope="any")

wgmma_option = relation("wgmma_option", i64, String, String, String)
"""``wgmma_option(sid, split, swa, swb)``: a legal option of gemm ``sid`` (from the ``wgmma-options`` mask)."""


def _option_rules():
    s, m = var("s", i64), var("m", i64)
    for sp, a, b in OPTIONS:
        bit = option_bit(sp, a, b)
        yield rule(eq(m).to(num("wgmma-options", s)), ne(m & i64(bit)).to(i64(0)), name=f"wgmma-option:{sp}:{a}:{b}").then(
            wgmma_option(s, String(sp), String(a), String(b)))


OPTION_RULES = tuple(_option_rules())


# ----------------------------------------------------------------------------------------------------
# wgmma-operands-async-proxy (derived in the e-graph)


def _async_violations(w):
    # w.st: the gemm; w.b an operand (read, not the written accumulator w.sc); w.x a producer writing it, a
    # T.copy w.i whose prefer_instruction asks for cp.async
    yield Violation((D.reads(w.st, w.b), D.writes(w.st, w.sc), ne(w.b).to(w.sc), D.producer(w.x, w.blk),
                     D.writes(w.x, w.b), eq(w.i).to(D.sid_of(w.x)), WS.copy_rules.allows(w.i, String("cp_async"))),
                    w.i, 1, w.b)


def _explain_async(ctx, sid: int) -> str:
    out = []
    for a, _b, buf in ctx.witnesses("wgmma-operands-async-proxy", sid):
        who = ctx.describe(a) if a in ctx.facts.stmts else "a producer"
        out.append(f"{who} writes operand {buf} and asks for cp.async (prefer_instruction), whose writes egtile "
                   "does not order before an async-proxy read")
    return "; ".join(dict.fromkeys(out)) or "an operand's producer asks for cp.async"


OPERANDS_ASYNC_PROXY = stmt_condition(
    "wgmma-operands-async-proxy", "no pipeline producer that asks for cp.async writes A or B (egtile.rules.mma)",
    _async_violations, _explain_async, derive=WS.copy_rules.ALLOWS)

# ----------------------------------------------------------------------------------------------------
# The constructor, its cost and its lowering


@function
def wgmma(sid: i64Like, split: StringLike, swa: StringLike, swb: StringLike) -> Stmt:
    """``T.gemm`` ``sid`` as wgmma.mma_async instructions with its accumulator split ``split`` over the consumer
    warpgroups and its operands in shared layouts ``swa`` / ``swb``."""


ONE_LAYOUT = "wgmma-buffer-one-layout"
"""The named condition that every gemm reading one shared buffer on the tensor cores reads it in one layout."""


def _local_layouts(ctx, g: Gemm, name: str) -> frozenset[str] | None:
    """The swizzles in which ``g``'s own wgmma options (shared A or register A) read shared buffer ``name``; ``None``
    when ``g`` has none, so it runs on the SIMT cores, which read any layout."""
    ss, _ = _ss_local(ctx, g)
    rs, _ = _rs_local(ctx, g)
    if not (ss or rs):
        return None
    out: set[str] = set()
    for sp, la, lb in OPTIONS:
        if ss & option_bit(sp, la, lb):
            out |= {la} if g.a.buffer.name == name else set()
            out |= {lb} if g.b.buffer.name == name else set()
    for sp, lb in RS_BITS:
        if rs & rs_bit(sp, lb) and g.b.buffer.name == name:
            out.add(lb)
    return frozenset(out)


def _one_layout_problems(ctx, g: Gemm, operands) -> list[str]:
    """``wgmma-buffer-one-layout``: a buffer has one layout (its tensor maps, descriptors and SIMT addresses all use
    it), so an option of ``g`` that reads shared buffer ``X`` in layout ``l`` is kept only when every other ``T.gemm``
    reading ``X`` that can run on the tensor cores at all can read it in ``l`` too. Each gemm's options for ``X`` are
    then the layouts all of them admit, and extraction, whose swizzle cost orders one buffer's layouts alike in every
    gemm (wider spans: fewer TMA boxes, fewer bank conflicts), gives each the same one. Found on TileLang's sparse MLA
    backward: ``KV_tail_shared`` is the K-major B of one gemm (128-byte swizzle) and the MN-major B of another
    (64-byte swizzle at most)."""
    for r, layout in operands:
        name = r.buffer.name
        if ctx.kernel.buffer(name).scope != "shared":
            continue
        for sid, s in ctx.stmts.items():
            if not isinstance(s, Gemm) or s.sid == g.sid or name not in (s.a.buffer.name, s.b.buffer.name):
                continue
            theirs = _local_layouts(ctx, s, name)
            if theirs is not None and layout not in theirs:
                return [f"{ONE_LAYOUT}: {name} is read by the T.gemm of sid {sid} too, which can read it only as "
                        f"{', '.join(sorted(theirs)) or 'no swizzle'}; a buffer has one layout"]
    return []


def _in_layout_problems(ctx, g: Gemm, role: str, layout: str, tiling: AccumulatorTiling, K: int) -> list[str]:
    """Why shared operand ``role`` cannot be read by the tiling's instructions in swizzle ``layout``: its buffer
    cannot take the mode, a column slice does not start on one of the mode's panels (``wgmma-operand-slice``), or
    some instruction's operand is not expressible by a descriptor in it."""
    r = g.a if role == "A" else g.b
    buf = ctx.kernel.buffer(r.buffer.name)
    problems = SW.buffer_problems(ctx, buf.name, layout)
    if problems:
        return problems
    c0, n = operand_columns(r, buf)
    try:
        whole = SW.smem_tile(*buf.shape, buf.dtype, layout)
        if (c0, n) != (0, buf.shape[1]) and (layout == "linear" or c0 % whole.panel_cols):
            return [f"{SLICE}: {buf.name}[:, {c0}:{c0 + n}] does not start on a column panel of {layout} "
                    f"({whole.panel_cols} columns a panel; a slice of an unswizzled tile is not a tile a descriptor reads)"]
        return _operand_problems(g, role, SW.smem_tile(buf.shape[0], n, buf.dtype, layout), tiling, K)
    except LayoutError as e:
        return [f"{SLICE}: {e}" if n != buf.shape[1] else str(e)]


ROWS_ACROSS_WARPGROUPS = "wgmma-rows-across-warpgroups"
"""The named condition of an N split whose accumulator group has row fragments (module docstring)."""


def _row_shuffle_problems(tiling: AccumulatorTiling) -> list[str]:
    """Why a tiling cannot serve an accumulator group with row fragments (a softmax), ``wgmma-rows-across-warpgroups``:
    the replicas of a row within a warp are combined by ``shfl.sync.bfly`` (a power of two of them, inside the warp:
    :meth:`egtile.layout.RowFragment.warp_lanes`); replicas in other warpgroups (an N split over ``W`` warpgroups:
    warpgroup ``w`` holds columns ``[w N/W, (w+1) N/W)`` of every row) are combined through a shared scratch of
    ``W x rows`` partials and a CTA barrier per row reduction (:func:`egtile.rules.fragment.cross_warp_reduce`),
    which the split takes only where the rows cannot stay in one warpgroup: the M split does not fill the
    warpgroups (64 rows over 2 warpgroups; TileLang's ``GemmWarpPolicy.FullCol``)."""
    try:
        rp = row_projection(tiling.fragment())
        rp.warp_lanes()
    except LayoutError as e:
        return [f"{ROWS_ACROSS_WARPGROUPS}: its rows cannot be reduced by shuffles: {e}"]
    if rp.cross_warp_groups > 1 and not AccumulatorTiling.of(tiling.rows, tiling.cols, tiling.warpgroups, "M").problems():
        return [f"{ROWS_ACROSS_WARPGROUPS}: a row's replicas would span {rp.cross_warp_groups} warpgroups (a shared-memory "
                "combine and a CTA barrier per row reduction) while the M split keeps every row in one warpgroup"]
    return []


def tiling_of(kernel, g: Gemm, split: str) -> AccumulatorTiling:
    M, N = kernel.buffer(g.c.buffer.name).shape
    return AccumulatorTiling.of(M, N, kernel.threads // 128, split)  # type: ignore[arg-type]


def _k_of(kernel, g: Gemm) -> int:
    return matrix_k(g)


def wgmma_cost(kernel, g: Gemm, split: str, swa: str, swb: str) -> int:
    """Cycles of one wgmma T.gemm per block (module docstring)."""
    t = tiling_of(kernel, g, split)
    K = _k_of(kernel, g)
    eb = dtype(g.a.buffer.dtype).bytes
    mma = ceil(t.rows * t.cols * K / macs_per_cycle(g.a.buffer.dtype))
    ks = k_step(g.a.buffer.dtype)
    steps = K // ks
    smem = steps * t.warpgroups * t.instructions * (64 * ks + ks * t.n) * eb // SMEM_BYTES_PER_CYCLE
    A, B = (kernel.buffer(r.buffer.name) for r in (g.a, g.b))
    sw = SW.swizzle_cost(*A.shape, A.dtype, swa, steps) + SW.swizzle_cost(*B.shape, B.dtype, swb, steps)
    return mma + smem // 4 + WGMMA_GROUP + sw + F.spill_cost(kernel, g)


def _cost(c) -> int:
    return wgmma_cost(c.kernel, c.stmt, c.params["split"], c.params["swa"], c.params["swb"])


def _majors(g: Gemm) -> tuple[str, str]:
    return ("MN" if g.trans_a else "K"), ("K" if g.trans_b else "MN")


def wgmma_lowering(wait: int | None = 0, flip_b: bool = False):
    """The lowering of ``wgmma(sid, split, swa, swb)``: the issue, then ``wait_group wait`` (``0``: ``T.gemm`` is
    synchronous; anything else is a mutant, :data:`MUTANTS`); ``flip_b`` reads B in the other major-ness (a
    mutant)."""

    def lower(n, lw, ctx):
        split, swa, swb = n.params
        g = lw.stmt(n.sid, ctx)
        tiling = tiling_of(lw.kernel, lw.facts.stmts[n.sid], split)
        threads = ThreadRange(0, tiling.threads)
        if not (ctx.threads.begin <= 0 and tiling.threads <= ctx.threads.end):
            from egtile.errors import ScheduleError

            raise ScheduleError(f"wgmma T.gemm (sid {n.sid}) needs threads [0, {tiling.threads}) but runs on "
                                f"[{ctx.threads.begin}, {ctx.threads.end})", lw.facts.stmts[n.sid].loc)
        a_major, b_major = _majors(g)
        if flip_b:
            b_major = "MN" if b_major == "K" else "K"
        out = [WgmmaMma(g, tiling, a_major, b_major, str(swa), str(swb), threads)]
        if wait is not None:
            out.append(WgmmaWait(wait, threads, sid=n.sid, fragments=(g.c.buffer.name,)))
        return out

    return lower


def wgmma_layouts(operands: bool = True):
    """The layouts the decision fixes: the accumulator's register layout and (``operands``) each operand
    buffer's swizzle; without them the buffers stay linear while the descriptors still read the swizzle (a
    mutant)."""

    def layouts(n, facts):
        split, swa, swb = n.params
        g = facts.stmts[n.sid]
        out = [(g.c.buffer.name, tiling_of(facts.kernel, g, split).fragment())]
        if operands:
            out += [(g.a.buffer.name, str(swa)), (g.b.buffer.name, str(swb))]
        return out

    return layouts


def instruction_name(g: Gemm, n: int) -> str:
    """The PTX instruction shape and types of ``g`` at instruction width ``n`` (``m64n128k32.f32.e4m3.e5m2``)."""
    a, b = g.a.buffer.dtype, g.b.buffer.dtype
    return f"m64n{n}k{k_step(a)}.f32.{ptx_type(a)}.{ptx_type(b)}"


def _details(n, lowered) -> str:
    for x in lowered:
        if isinstance(x, WgmmaMma):
            t = x.tiling
            ks = k_step(x.gemm.a.buffer.dtype)
            return (f"{t.instructions} x {instruction_name(x.gemm, t.n)} per k{ks} step per warpgroup, "
                    f"{t.warpgroups} warpgroup(s), "
                    f"{t.split} split, {t.registers_per_thread} accumulator registers per thread; A {x.a_swizzle} "
                    f"{x.a_major}-major, B {x.b_swizzle} {x.b_major}-major; wait_group 0")
    return ""


def split_notes(n, ctx):
    """``explain()``'s note on a wgmma whose split puts a row's replicas in several warpgroups while its group has row
    fragments (``wgmma-rows-across-warpgroups``): where the row reductions combine through shared memory."""
    from egtile.ir import Decision as Made

    kernel = ctx.facts.kernel
    g = ctx.facts.stmts.get(n.sid)
    if not isinstance(g, Gemm) or not fragment_layouts.has_rows(kernel, g.c.buffer.name):
        return []
    t = tiling_of(kernel, g, str(n.params[0]))
    groups = row_projection(t.fragment()).cross_warp_groups if not t.problems() else 1
    if groups == 1:
        return []
    return [Made(ROWS_ACROSS_WARPGROUPS, n.sid, f"N split over {t.warpgroups} warpgroups, rows combined in shared memory",
                 f"{t.rows} rows do not split over {t.warpgroups} warpgroups of m64 (the M split does not exist), so each "
                 f"warpgroup issues m64n{t.n} on its {t.wg_cols} columns of every row (TileLang's GemmWarpPolicy.FullCol); "
                 f"each row reduction over {g.c.buffer.name}'s group then shuffles within each warp and combines the "
                 f"{groups} warpgroups' partials through a {groups} x {t.rows} shared scratch, with a CTA barrier "
                 "between the stores and the loads")]


def layout_notes(n, ctx) -> list:
    """``explain()``'s note on an operand buffer that takes a narrower swizzle than its gemm alone would: another gemm
    reading the buffer admits only that one (``wgmma-buffer-one-layout``)."""
    from egtile.ir import Decision as Made

    g = ctx.facts.stmts.get(n.sid)
    if not isinstance(g, Gemm):
        return []
    chosen = ((g.a, str(n.params[1])), (g.b, str(n.params[2]))) if len(n.params) == 3 else ((g.b, str(n.params[1])),)
    out = []
    for r, layout in chosen:
        own = _local_layouts(ctx.facts, g, r.buffer.name) or frozenset()
        best = next((x for x in SW.LAYOUTS if x in own), layout)
        if best == layout:
            continue
        others = [f"sid {s.sid}" for s in ctx.facts.stmts.values() if isinstance(s, Gemm) and s.sid != g.sid
                  and r.buffer.name in (s.a.buffer.name, s.b.buffer.name)]
        out.append(Made(ONE_LAYOUT, n.sid, f"{r.buffer.name} {layout}",
                        f"{r.buffer.name} takes {layout}, not {best}: a buffer has one layout, and the T.gemm of "
                        f"{', '.join(others)} reads it too and admits no wider swizzle"))
    return out


def _wgmma_notes(n, ctx):
    return [*F.spill_notes(n, ctx), *split_notes(n, ctx), *layout_notes(n, ctx)]


WGMMA = Decision("wgmma", wgmma, (("sid", i64), ("split", String), ("swa", String), ("swb", String)), "decision",
                 Cost(_cost, doc="M N K / WGMMA_MACS_PER_CYCLE + shared bytes read / (4 SMEM_BYTES_PER_CYCLE) + "
                                 "WGMMA_GROUP + swizzle_cost(A) + swizzle_cost(B) + spill share "
                                 "(egtile.rules.fragment.spill_cost)"),
                 lower=wgmma_lowering(), label="wgmma", details=_details, layouts=wgmma_layouts(), notes=_wgmma_notes)

# ----------------------------------------------------------------------------------------------------
# The rule

gemm_to_wgmma = Rule(
    name="gemm-to-wgmma", stage="partition",
    doc="T.gemm -> fence.proxy.async; wgmma.fence; wgmma.mma_async.m64nNk16 (SS, f32 += f16/bf16 x f16/bf16) or "
        ".m64nNk32 (f32 += e4m3/e5m2 x e4m3/e5m2, both operands K-major) per K step and instruction; commit_group; "
        "wait_group 0 (PTX ISA 9.7.15), one alternative per legal accumulator "
        "split and operand swizzle pair; the accumulator moves to registers in the instruction's layout and the "
        "operands' shared buffers take the swizzle (see the module docstring for the legality argument).",
    variables=(("sid", i64), ("split", String), ("swa", String), ("swb", String)),
    lhs=lambda v: Stmt.tile(v.sid),
    # the legal (split, swa, swb) of the oracle's mask bind the variables (one alternative per option): a
    # binding, not a side condition, since without it the variables would be unbound
    bindings=lambda v: (D.kind(v.sid, String("gemm")), wgmma_option(v.sid, v.split, v.swa, v.swb)),
    rhs=lambda v: wgmma(v.sid, v.split, v.swa, v.swb),
    conditions=(holds(WGMMA_OPERAND_TYPES), holds(WGMMA_8BIT_K_MAJOR), holds(WGMMA_ELIGIBLE), F.USERS_ADMIT_REGISTERS,
                F.PEERS_IN_LOCKSTEP, OPERANDS_ASYNC_PROXY),
    oracles=(WGMMA_OPTIONS,),
    support=OPTION_RULES,
)

# ----------------------------------------------------------------------------------------------------
# Register A (RS): T.gemm(P_frag, V_shared, O_frag), attention's second gemm

RS_BITS = tuple((sp, b) for sp in SPLITS for b in SW.LAYOUTS)


def rs_bit(split: str, swb: str) -> int:
    """The bit of option ``(split, swb)`` in the ``wgmma-rs-options`` mask."""
    return 1 << RS_BITS.index((split, swb))


def wgmma_rs_options(ctx, g) -> tuple[int, list[str]]:
    """The mask of legal ``(split, swb)`` register-A options of ``T.gemm`` ``g`` (:func:`rs_bit`) and, when it is 0,
    why: its own options (:func:`_rs_local`) whose B layout every other gemm reading B's buffer can take
    (``wgmma-buffer-one-layout``)."""
    if not isinstance(g, Gemm):
        return 0, ["not a T.gemm"]
    return _one_layout_options(ctx, g, "wgmma-rs-options", _rs_local(ctx, g), (
        (rs_bit(sp, lb), f"{sp} split, B {lb}", ((g.b, lb),)) for sp, lb in RS_BITS))


def _rs_local(ctx, g) -> tuple[int, list[str]]:
    """The register-A options of ``T.gemm`` ``g`` on its own and, when there is none, why (``wgmma-rs-eligible``): A
    is a whole 2-D 16-bit fragment, not transposed (register A is K-major), of C's rows; B a 2-D shared tile of A's
    type (whole or a column slice); C a whole 2-D f32 fragment; K a multiple of 16
    and at most 256; whole warpgroups; the split gives each warpgroup its own rows of C (M split, or one
    warpgroup), so its A registers are rows it holds (:func:`egtile.layout.operand_a.rs_a_layout`); accumulator
    plus A registers within the budget; B expressible by a descriptor in some swizzle."""
    from egtile.layout.operand_a import rs_a_layout, rs_a_problems

    key = ("wgmma-rs-options-local", g.sid)
    if key in ctx._memo:
        return ctx._memo[key]
    k = ctx.kernel
    A, B, Cb = (k.buffer(r.buffer.name) for r in (g.a, g.b, g.c))
    why: list[str] = []
    if A.scope != "fragment":
        why.append(f"A ({A.name}) is {A.scope}, not a fragment")
    if B.scope != "shared":
        why.append(f"B ({B.name}) is {B.scope}; wgmma reads B from shared memory")
    if Cb.scope != "fragment" or dtype(Cb.dtype).name != "float32":
        why.append(f"the accumulator {Cb.name} must be a float32 fragment")
    if dtype(A.dtype).name != dtype(B.dtype).name or dtype(A.dtype).name not in WGMMA_DTYPES:
        why.append(f"operand types {A.dtype} x {B.dtype}: register A is .f16x2/.bf16x2 here (the FP8 form's "
                   "register A, four .b32 of 8-bit values per k32 step, is not implemented)")
    if g.trans_a:
        why.append("a transposed register A (register A is K-major)")
    if any(len(b.shape) != 2 for b in (A, B, Cb)) or not (g.a.whole and g.c.whole):
        why.append("A and C must be whole 2-D buffers")
    elif operand_columns(g.b, B) is None:
        why.append(f"{SLICE}: B must be a whole shared buffer or a slice of its columns (every row, constant column "
                   "offsets)")
    if k.threads % 128 or k.threads < 128:
        why.append(f"the kernel has {k.threads} threads; wgmma runs on whole warpgroups")
    if why:
        ctx._memo[key] = (0, why)
        return 0, why
    M, N = Cb.shape
    K = A.shape[1]
    if A.shape[0] != M:
        why.append(f"A has {A.shape[0]} rows, C {M}")
    W = k.threads // 128
    p = rs_a_problems(M, K, W)
    if p:
        why += [f"register A layout: {x}" for x in p]
    if why:
        ctx._memo[key] = (0, why)
        return 0, why
    a_regs = rs_a_layout(M, K, W).registers_per_thread
    rows = fragment_layouts.has_rows(k, Cb.name)
    mask = 0
    for split in SPLITS:
        tiling = AccumulatorTiling.of(M, N, W, split)
        p = tiling.problems()
        if not p and split == "N" and W > 1:
            p = ["each warpgroup would need every row of A (an N split): register A holds only the warpgroup's rows"]
        if not p and tiling.registers_per_thread + a_regs > F.inflight_limit(k.threads):
            p = [f"{tiling.registers_per_thread} accumulator + {a_regs} A registers per thread exceed the budget of "
                 f"{F.inflight_limit(k.threads)} a thread can hold while the wgmma is in flight"]
        if not p and rows:
            p = _row_shuffle_problems(tiling)
        if p:
            why += [f"{split} split: {x}" for x in p]
            continue
        for lb in SW.LAYOUTS:
            pb = _in_layout_problems(ctx, g, "B", lb, tiling, K)
            if pb:
                why.append(f"{split} split, B {lb}: {pb[0]}")
                continue
            mask |= rs_bit(split, lb)
    out = (mask, [] if mask else why)
    ctx._memo[key] = out
    return out


WGMMA_RS_ELIGIBLE = FactSpec(
    "wgmma-rs-eligible", "some accumulator split and B swizzle make the T.gemm a register-A wgmma.mma_async sequence "
    "(egtile.rules.mma.wgmma_rs_options: 16-bit K-major fragment A of C's rows in the accumulator-derived layout, K % 16, "
    "M split, register budget, B descriptor expressibility)",
    lambda ctx, s: Verdict(wgmma_rs_options(ctx, s)[0] != 0, tuple(wgmma_rs_options(ctx, s)[1][:6])), scope="any")
WGMMA_RS_OPTIONS = NumSpec("wgmma-rs-options", "bit mask of the legal (split, swb) register-A options "
                           "(egtile.rules.mma.rs_bit)", lambda ctx, s: wgmma_rs_options(ctx, s)[0] or None, scope="any")

wgmma_rs_option = relation("wgmma_rs_option", i64, String, String)
"""``wgmma_rs_option(sid, split, swb)``: a legal register-A option of gemm ``sid``."""


def _rs_option_rules():
    s, m = var("s", i64), var("m", i64)
    for sp, b in RS_BITS:
        bit = rs_bit(sp, b)
        yield rule(eq(m).to(num("wgmma-rs-options", s)), ne(m & i64(bit)).to(i64(0)), name=f"wgmma-rs-option:{sp}:{b}").then(
            wgmma_rs_option(s, String(sp), String(b)))


RS_OPTION_RULES = tuple(_rs_option_rules())


@function
def wgmma_rs(sid: i64Like, split: StringLike, swb: StringLike) -> Stmt:
    """``T.gemm`` ``sid`` as register-A wgmma.mma_async instructions, accumulator split ``split``, B in layout ``swb``."""


def wgmma_rs_cost(kernel, g: Gemm, split: str, swb: str) -> int:
    """Cycles of one register-A wgmma T.gemm per block: as :func:`wgmma_cost` without A's shared reads."""
    t = tiling_of(kernel, g, split)
    K = _k_of(kernel, g)
    eb = dtype(g.b.buffer.dtype).bytes
    mma = ceil(t.rows * t.cols * K / WGMMA_MACS_PER_CYCLE)
    steps = K // K_STEP
    smem = steps * t.warpgroups * t.instructions * (K_STEP * t.n) * eb // SMEM_BYTES_PER_CYCLE
    B = kernel.buffer(g.b.buffer.name)
    return mma + smem // 4 + WGMMA_GROUP + SW.swizzle_cost(*B.shape, B.dtype, swb, steps) + F.spill_cost(kernel, g)


def wgmma_rs_lowering(k_order=None):
    """The lowering of ``wgmma_rs(sid, split, swb)``: the register-A issue (A's k16 slices in order, or
    ``k_order(K // 16)``: a mutant), then ``wait_group 0``."""

    def lower(n, lw, ctx):
        split, swb = n.params
        g = lw.stmt(n.sid, ctx)
        src = lw.facts.stmts[n.sid]
        tiling = tiling_of(lw.kernel, src, split)
        if not (ctx.threads.begin <= 0 and tiling.threads <= ctx.threads.end):
            from egtile.errors import ScheduleError

            raise ScheduleError(f"wgmma T.gemm (sid {n.sid}) needs threads [0, {tiling.threads}) but runs on "
                                f"[{ctx.threads.begin}, {ctx.threads.end})", src.loc)
        steps = _k_of(lw.kernel, src) // K_STEP
        order = tuple(range(steps)) if k_order is None else tuple(k_order(steps))
        threads = ThreadRange(0, tiling.threads)
        return [WgmmaMma(g, tiling, "K", _majors(g)[1], "linear", str(swb), threads, a_registers=True, a_k_order=order),
                WgmmaWait(0, threads, sid=n.sid, fragments=(g.c.buffer.name,))]

    return lower


def _rs_layouts(n, facts):
    from egtile.layout.operand_a import rs_a_layout

    split, swb = n.params
    g = facts.stmts[n.sid]
    M, K = facts.kernel.buffer(g.a.buffer.name).shape
    return [(g.c.buffer.name, tiling_of(facts.kernel, g, split).fragment()),
            (g.a.buffer.name, rs_a_layout(M, K, facts.kernel.threads // 128)), (g.b.buffer.name, str(swb))]


def _rs_details(n, lowered) -> str:
    for x in lowered:
        if isinstance(x, WgmmaMma):
            t = x.tiling
            return (f"{t.instructions} x m64n{t.n}k16 per k16 step per warpgroup, A from registers (4 x .f16x2 per "
                    f"step), {t.warpgroups} warpgroup(s), {t.split} split; B {x.b_swizzle} {x.b_major}-major; wait_group 0")
    return ""


WGMMA_RS = Decision("wgmma_rs", wgmma_rs, (("sid", i64), ("split", String), ("swb", String)), "decision",
                    Cost(lambda c: wgmma_rs_cost(c.kernel, c.stmt, c.params["split"], c.params["swb"]),
                         doc="M N K / WGMMA_MACS_PER_CYCLE + B's shared bytes / (4 SMEM_BYTES_PER_CYCLE) + WGMMA_GROUP + "
                             "swizzle_cost(B) + spill share (egtile.rules.fragment.spill_cost)"),
                    lower=wgmma_rs_lowering(), label="wgmma (A from registers)", details=_rs_details, layouts=_rs_layouts,
                    notes=lambda n, ctx: [*F.spill_notes(n, ctx), *layout_notes(n, ctx)])

gemm_to_wgmma_rs = Rule(
    name="gemm-to-wgmma-rs", stage="partition",
    doc="T.gemm with A a register fragment -> wgmma.fence; wgmma.mma_async.m64nNk16 (RS: A as four .f16x2 registers "
        "per thread per k16 step, B through a shared descriptor) per step and instruction; commit_group; wait_group 0 "
        "(PTX ISA 9.7.15.5.1.1.1, register fragment A). A's register layout is the accumulator tiling's layout of an "
        "M x K tile with 16-bit values (each k16 slice is the instruction's A fragment), fixed by the decision; the "
        "fragment that feeds it (attention's cast copy of S) inherits it (egtile.lower.fragment_layouts).",
    variables=(("sid", i64), ("split", String), ("swb", String)),
    lhs=lambda v: Stmt.tile(v.sid),
    bindings=lambda v: (D.kind(v.sid, String("gemm")), wgmma_rs_option(v.sid, v.split, v.swb)),
    rhs=lambda v: wgmma_rs(v.sid, v.split, v.swb),
    conditions=(holds(WGMMA_RS_ELIGIBLE), F.USERS_ADMIT_REGISTERS, F.PEERS_IN_LOCKSTEP, OPERANDS_ASYNC_PROXY),
    oracles=(WGMMA_RS_OPTIONS,),
    support=RS_OPTION_RULES,
)

# ----------------------------------------------------------------------------------------------------
# explain(): why a T.gemm stays on the SIMT cores


def simt_gemm_notes(n, ctx):
    """``explain()``'s note on a ``T.gemm`` extracted as the cooperative SIMT gemm (``tile``) when no wgmma rule
    matched it (no legal option binds their variables, so no rule was rejected by a side condition): the
    oracle's reasons, led by the named instruction-form conditions (``wgmma-operand-types``,
    ``wgmma-8bit-k-major``) that failed."""
    from egtile.ir import Decision as Made

    g = ctx.facts.stmts.get(n.sid)
    if not isinstance(g, Gemm) or any((r, n.sid) in ctx.cand for r in ("gemm-to-wgmma", "gemm-to-wgmma-rs")):
        return []
    if g.a.buffer.scope == "fragment":
        why = wgmma_rs_options(ctx.facts, g)[1]
    else:
        why = wgmma_options(ctx.facts, g)[1]
    if not why:
        return []
    return [Made("gemm-to-wgmma", n.sid, "SIMT gemm (cooperative tile op)",
                 "no wgmma form is legal, so the T.gemm runs on the SIMT cores (its accumulator in shared memory): "
                 + "; ".join(dict.fromkeys(why[:4])))]


from egtile.rules import mma_async as _async  # noqa: E402  (its rules build on the synchronous ones above)

RULES = (gemm_to_wgmma, gemm_to_wgmma_rs) + _async.RULES
DECISIONS = (WGMMA, WGMMA_RS) + _async.DECISIONS

# ----------------------------------------------------------------------------------------------------
# Mutants (soundness tests of the checkers: tests/test_rules_mma.py)

MUTANTS: dict[str, str] = {
    "wgmma-no-wait": "the wgmma lowering drops wait_group: the accumulator is read, and the operand stage released "
                     "for refill, while the tensor core may still be working",
    "wgmma-wait-one-pending": "wait_group 1 instead of 0: the group issued last stays in flight past the stage "
                              "release that lets the producer refill its operands, and past the epilogue's read",
    "wgmma-swizzle-disagreement": "the operand buffers keep the linear layout (TMA writes them unswizzled) while "
                                  "the wgmma descriptors still read them swizzled",
    "wgmma-b-major-flipped": "the wgmma reads B in the other major-ness than the T.gemm gives it (imm-trans-b "
                             "flipped: the transposed tile; for 8-bit operands an MN-major read, which the FP8 form "
                             "does not have)",
    "wgmma-simt-operand-unfenced": "a SIMT producer's threads arrive on full[s] without fence.proxy.async after "
                                   "storing a wgmma operand: the consumer's wait orders the stores for the generic "
                                   "proxy only, and the wgmma reads the tile through the async proxy",
}
"""Protocol mutants of the wgmma decision; the simulator and the verifier must each catch every one."""

RS_MUTANTS: dict[str, str] = {
    "wgmma-rs-a-slices-reversed": "the register-A wgmma reads A's k16 slices in reverse order: step kk multiplies A "
                                  "columns of another slice with B's rows 16 kk.. (a register A layout that does not "
                                  "match the instruction's)",
}
"""Protocol mutants of the register-A wgmma decision (tests/test_rules_attention.py: they need a gemm with A in
registers); :func:`mutant` builds them too."""


def mutant(name: str):
    """The builtin ruleset with wgmma mutant ``name`` (:data:`MUTANTS`) applied.

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    from dataclasses import replace

    from egtile.rules import builtin

    match name:
        case "wgmma-no-wait":
            d = replace(WGMMA, lower=wgmma_lowering(wait=None))
        case "wgmma-wait-one-pending":
            d = replace(WGMMA, lower=wgmma_lowering(wait=1))
        case "wgmma-swizzle-disagreement":
            d = replace(WGMMA, layouts=wgmma_layouts(operands=False))
        case "wgmma-b-major-flipped":
            d = replace(WGMMA, lower=wgmma_lowering(flip_b=True))
        case "wgmma-rs-a-slices-reversed":
            d = replace(WGMMA_RS, lower=wgmma_rs_lowering(k_order=lambda n: reversed(range(n))))
        case "wgmma-simt-operand-unfenced":
            from egtile.rules import copy as K

            rs = builtin()
            for decl, issue in ((K.SIMT_LOAD, K.issue_simt_load), (K.SIMT_LOOP, K.issue_simt_loop),
                                (K.SIMT_PRODUCE, K.issue_simt)):
                rs = rs.replace_decision(replace(decl, issue=issue(fence=False)), name=f"mutant:{name}")
            return rs
        case _:
            raise KeyError(f"unknown wgmma mutant {name!r}; known: {sorted(MUTANTS)}")
    return builtin().replace_decision(d, name=f"mutant:{name}")

__all__ = ["DECISIONS", "MUTANTS", "RS_MUTANTS", "OPERANDS_ASYNC_PROXY", "RULES", "WGMMA", "WGMMA_ELIGIBLE", "WGMMA_OPTIONS",
           "WGMMA_8BIT_K_MAJOR", "WGMMA_FP8", "WGMMA_OPERAND_TYPES", "instruction_name", "is_fp8", "k_major_problems",
           "k_step", "macs_per_cycle", "operand_type_problems", "ptx_type", "simt_gemm_notes",
           "WGMMA_RS", "WGMMA_RS_ELIGIBLE", "WGMMA_RS_OPTIONS", "gemm_to_wgmma", "gemm_to_wgmma_rs", "rs_bit",
           "wgmma_rs", "wgmma_rs_cost", "wgmma_rs_lowering", "wgmma_rs_options",
           "max_accumulators", "operand", "option_bit", "tiling_of", "mutant", "wgmma", "wgmma_cost", "wgmma_layouts",
           "wgmma_lowering", "wgmma_options"]
