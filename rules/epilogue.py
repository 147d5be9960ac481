"""The epilogue of a tile: ``T.copy(fragment, global tile)`` through shared memory and a TMA store.

Hardware facts:

* A register fragment's elements are spread over threads in its layout; stored directly, each thread
  writes a few adjacent elements of several rows (the wgmma accumulator: 2 columns of 2 rows per 8-column
  group), so one warp instruction touches 8 rows x 16 bytes: half-filled 32-byte sectors.
* ``cp.async.bulk.tensor`` shared -> global (PTX ISA 9.7.9.27) writes a whole box from shared memory in full
  lines; ``cp.async.bulk.commit_group`` / ``wait_group.read 0`` (9.7.9.28) tell when the shared source may
  be reused. The shared tile is read by the async proxy: the generic stores that filled it must be fenced
  by their writers (``fence.proxy.async.shared::cta``, 9.7.13.3.2) before the CTA barrier that orders them
  before the store (the barrier placement adds both, :mod:`egtile.lower.sync`).
* A swizzled staging tile (:mod:`egtile.rules.swizzle`) spreads the 8 rows of one warp store over the
  banks; its tensor map names the same swizzle (one box per column panel).

The rewrite ``copy-via-tma-store``: a block-level ``copy(sid)`` from a whole 2-D fragment to a global region
that is a 2-D tile once its unit dimensions are dropped (``O[b, rows, h, :]`` of a bshd tensor too) ->
``copy_tma_store(sid, layout)``: the copy into a fresh shared staging tile of the destination's type
(converting; by the fragment's layout when it is in registers, else cooperatively), then one elected thread's
TMA store of the tile, one alternative per staging layout. Legal when a tensor map can describe the destination
(``tma-store-eligible``: :func:`tma_store_eligibility`, with the kernel's shared memory plus the staging tile
within the 227 KiB of a block) and the copy's ``prefer_instruction`` allows TMA.

Cost: the staging stores (shared latency, bank conflicts of the layout), the barrier, one TMA issue per
box and the bytes; against ``copy_simt``'s exposed global latency.
"""

from __future__ import annotations

from math import ceil

from egglog import String, StringLike, eq, function, i64, i64Like, ne, relation, rule, var

from egtile.ir import Buffer, Copy, Elect, Region, TileOp, TmaStore, dtype
from egtile.layout import LayoutError
from egtile.rules import copy as copy_rules
from egtile.rules import fragment as F
from egtile.rules import swizzle as SW
from egtile.schedule import cost as C
from egtile.schedule.decision import Cost, Decision
from egtile.schedule.rule import Condition, FactSpec, NumSpec, Rule, holds
from egtile.schedule.schema import Stmt, num
from egtile.verdict import Verdict

SMEM_LIMIT = 232448
"""Dynamic shared memory an sm_90 block may opt into (CUDA C++ Programming Guide, 227 KiB)."""
SLACK = 1024
"""The alignment slack of a kernel with swizzled buffers (egtile.codegen.layout)."""
TMA_MAX_BOX = 256


def shared_upper_bound(ctx) -> int:
    """Bytes of shared memory the kernel needs: every shared buffer times the stages of the pipelined loop that
    may multi-version it, and every fragment that no wgmma can keep in registers (those stay in shared memory;
    the accumulator of a gemm a wgmma can take, and the A operand of one that takes A from registers, are
    counted as registers), 128-byte aligned, plus the slack of swizzled layouts. A schedule that keeps such a
    fragment in shared memory and stages its epilogue can still exceed the block: the declaration's
    ``spends_shared`` then has the driver extract again without the staged store."""
    from egtile.ir import For, Gemm
    from egtile.rules.mma import wgmma_options, wgmma_rs_options

    stages: dict[str, int] = {}
    for s in ctx.stmts.values():
        if isinstance(s, For) and s.kind == "pipelined":
            for b in s.body:
                for name in ctx.writes(b.sid):
                    stages[name] = max(stages.get(name, 1), max(1, s.num_stages))
    gemms = [s for s in ctx.stmts.values() if isinstance(s, Gemm)]
    rs = [g for g in gemms if wgmma_rs_options(ctx, g)[0]]
    registers = {g.c.buffer.name for g in gemms if wgmma_options(ctx, g)[0]} | \
        {g.c.buffer.name for g in rs} | {g.a.buffer.name for g in rs}
    total = SLACK
    for b in ctx.kernel.allocs:
        if b.scope == "shared" or (b.scope == "fragment" and b.name not in registers):
            total += -(-b.numel * dtype(b.dtype).bytes * stages.get(b.name, 1) // 128) * 128
    return total + 256


def _tile(dst: Region) -> tuple[int, int] | None:
    """``(rows, cols)`` of a destination region that is one 2-D tile once its unit dimensions are dropped, its
    columns along the tensor's innermost dimension (a bshd tensor's ``O[b, rows, h, :]``: TMA writes the box
    innermost first, so the staging tile's rows are the box's); ``None`` otherwise."""
    tile = tuple(dst.squeezed)
    if len(tile) != 2 or dst.extents[-1] != tile[1]:
        return None
    return tile  # type: ignore[return-value]


def tma_store_eligibility(ctx, s) -> tuple[int, list[str]]:
    """The mask of staging layouts (bit ``i`` for ``SW.LAYOUTS[i]``) with which ``T.copy`` ``s`` can be a TMA
    store, and why none when 0 (module docstring)."""
    if not isinstance(s, Copy):
        return 0, ["not a T.copy"]
    key = ("tma-store", s.sid)
    if key in ctx._memo:
        return ctx._memo[key]
    why: list[str] = []
    src, dst = s.src, s.dst
    if ctx.context.get(s.sid) != "block":
        why.append("not a block-level copy")
    if src.buffer.scope != "fragment" or not src.whole or len(src.extents) != 2:
        why.append(f"the source {src.buffer.name} is not a whole 2-D fragment")
    tile = _tile(dst)
    if dst.buffer.scope != "global" or tile is None:
        why.append(f"the destination {dst.buffer.name} is not a 2-D tile of a global tensor (unit dimensions aside) "
                   "whose columns are the tensor's innermost dimension")
    d = dtype(dst.buffer.dtype)
    if d.tma is None:
        why.append(f"{d.name} has no CUtensorMapDataType")
    if tile is not None and tuple(src.extents) != tile:
        why.append(f"source {src.extents} and destination {dst.extents} differ")
    if tile is not None and not 1 <= tile[0] <= TMA_MAX_BOX:
        why.append(f"box {dst.extents}: TMA boxes have 1..{TMA_MAX_BOX} rows")
    shape = dst.buffer.shape
    # every outer stride is a multiple of the innermost dimension's length
    if len(shape) >= 2 and (shape[-1] * d.bytes) % 16:
        why.append(f"{dst.buffer.name}'s rows are {shape[-1] * d.bytes} bytes; TMA needs 16-byte strides")
    if why:
        ctx._memo[key] = (0, why)
        return 0, why
    rows, cols = tile
    stage_bytes = rows * cols * d.bytes
    if shared_upper_bound(ctx) + stage_bytes > SMEM_LIMIT:
        why.append(f"a {stage_bytes}-byte staging tile does not fit the block's shared memory "
                   f"({shared_upper_bound(ctx)} bytes already, {SMEM_LIMIT} at most)")
    mask = 0
    for i, layout in enumerate(SW.LAYOUTS):
        try:
            t = SW.smem_tile(rows, cols, d.name, layout)
        except LayoutError as e:
            why.append(f"{layout}: {e}")
            continue
        if t.panel_cols > TMA_MAX_BOX or (t.row_bytes % 16):
            why.append(f"{layout}: a {t.panel_cols}-column box")
            continue
        if not why:
            mask |= 1 << i
    out = (mask, [] if mask else why)
    ctx._memo[key] = out
    return out


TMA_STORE_ELIGIBLE = FactSpec(
    "tma-store-eligible", "the copy's destination is a global tile a TMA store can write from a shared staging tile "
    "that fits the block (egtile.rules.epilogue.tma_store_eligibility)",
    lambda ctx, s: Verdict(tma_store_eligibility(ctx, s)[0] != 0, tuple(tma_store_eligibility(ctx, s)[1][:4])),
    scope="block")
STAGING_LAYOUTS = NumSpec("tma-store-layouts", "bit mask of the staging layouts (egtile.rules.swizzle.LAYOUTS)",
                          lambda ctx, s: tma_store_eligibility(ctx, s)[0] or None, scope="block")

staging_option = relation("staging_option", i64, String)


def _option_rules():
    s, m = var("s", i64), var("m", i64)
    for i, layout in enumerate(SW.LAYOUTS):
        yield rule(eq(m).to(num("tma-store-layouts", s)), ne(m & i64(1 << i)).to(i64(0)),
                   name=f"staging-option:{layout}").then(staging_option(s, String(layout)))


OPTION_RULES = tuple(_option_rules())


@function
def copy_tma_store(sid: i64Like, layout: StringLike) -> Stmt:
    """``T.copy`` ``sid`` staged through a shared tile in ``layout`` and written by one TMA store."""


def staged_cost(kernel, c: Copy, layout: str) -> int:
    """Cycles of the staged epilogue (module docstring)."""
    rows, cols = c.dst.squeezed
    eb = dtype(c.dst.buffer.dtype).bytes
    T = kernel.threads
    conflicts = {"swizzle128": 1, "swizzle64": 2, "swizzle32": 4, "linear": 8}[layout]
    stores = C.per_thread(ceil(rows * cols / T) * conflicts, T) + C.SHARED_LATENCY
    boxes = SW.tma_boxes(rows, cols, dtype(c.dst.buffer.dtype).name, layout)
    return stores + C.SYNCTHREADS + C.TMA_ISSUE * boxes + rows * cols * eb // C.GLOBAL_BYTES_PER_CYCLE


def _lower(n, lw, ctx):
    (layout,) = n.params
    c = lw.stmt(n.sid, ctx)
    rows, cols = c.dst.squeezed
    stage = lw.add_buffer(Buffer(f"{c.src.buffer.name}_stage", (rows, cols), c.dst.buffer.dtype, "shared"))
    lw.layouts[stage.name] = str(layout)
    stage = Buffer(stage.name, stage.shape, stage.dtype, "shared", str(layout))
    fill = Copy(c.sid, c.src, Region.full(stage), loc=c.loc)
    first = F.op_by_layout(fill, lw, ctx) or [TileOp(fill, "simt", ctx.threads)]
    store = TmaStore(Region.full(stage), c.dst, sid=n.sid, swizzle=str(layout))
    return [*first, Elect(ctx.threads, (store,))]


def _details(n, lowered) -> str:
    for x in lowered:
        if isinstance(x, Elect) and x.body and isinstance(x.body[0], TmaStore):
            st = x.body[0]
            return f"staged in {st.src.buffer.name} ({st.swizzle}), one TMA store by thread {x.threads.begin}"
    return ""


COPY_TMA_STORE = Decision(
    "copy_tma_store", copy_tma_store, (("sid", i64), ("layout", String)), "decision",
    Cost(lambda c: staged_cost(c.kernel, c.stmt, c.params["layout"]),
         doc="staging stores x bank conflicts + SYNCTHREADS + TMA_ISSUE x boxes + bytes / GLOBAL_BYTES_PER_CYCLE"),
    lower=_lower, label="staged TMA store", details=_details,
    # its bound counts every fragment a wgmma can take as registers; the e-graph may keep one in shared memory
    spends_shared=True)

PREFER_ALLOWS_TMA = Condition("prefer-allows-tma", copy_rules.PREFER_ALLOWS_TMA.doc,
                              copy_rules.PREFER_ALLOWS_TMA.query, derive=copy_rules.ALLOWS,
                              explain=copy_rules.PREFER_ALLOWS_TMA.explain)

copy_via_tma_store = Rule(
    name="copy-via-tma-store", stage="copy",
    doc="A block-level T.copy of a whole fragment to a global tile -> the copy into a shared staging tile (by the "
        "fragment's layout when it is in registers), fence.proxy.async + CTA barrier (placed with the barriers), one "
        "elected thread's TMA store and wait_group.read 0 (PTX ISA 9.7.9.27-28, 9.7.13.3.2), one alternative per "
        "staging layout. The same elements reach the same places: the staging tile holds the converted values and "
        "the store writes them out as a box.",
    variables=(("sid", i64), ("layout", String)),
    lhs=lambda v: Stmt.copy(v.sid),
    # the staging layouts the oracle's mask allows bind the variable (one alternative per layout)
    bindings=lambda v: (staging_option(v.sid, v.layout),),
    rhs=lambda v: copy_tma_store(v.sid, v.layout),
    conditions=(holds(TMA_STORE_ELIGIBLE), PREFER_ALLOWS_TMA),
    oracles=(STAGING_LAYOUTS,),
    support=OPTION_RULES,
)

RULES = (copy_via_tma_store,)
DECISIONS = (COPY_TMA_STORE,)

__all__ = ["COPY_TMA_STORE", "DECISIONS", "RULES", "TMA_STORE_ELIGIBLE", "copy_tma_store", "copy_via_tma_store",
           "shared_upper_bound", "staged_cost", "tma_store_eligibility"]
