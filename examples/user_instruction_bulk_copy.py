"""A new Hopper instruction, added from outside egtile: the 1-D bulk copy (``cp.async.bulk``).

PTX ISA "cp.async.bulk" (sm_90): ``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst],
[src], size, [mbar]`` copies ``size`` contiguous bytes from global to shared memory asynchronously and
completes them as transaction bytes on an mbarrier, like a TMA tile load but without a tensor map: the
source is a plain pointer. ``size`` and both addresses must be multiples of 16 bytes. It reaches rows a TMA
box cannot (a box has at most 256 elements per dimension).

Everything egtile needs to choose it, check it and run it is in this file and reaches egtile through its
public registries only (``docs/rules.md`` walks through it):

1. the scheduled-IR node :class:`BulkCopy` (what the executors see);
2. the decision constructor ``bulk_load(sid, ctx)`` and its declaration (cost, lowering, label);
3. the hardware oracle ``bulk-eligible`` and the rule ``copy-to-bulk`` with its side conditions;
4. its CUDA emitter, simulator semantics, listing, CTA-barrier access summary and verifier model.

Run ``python examples/user_instruction_bulk_copy.py [--target auto|interp|sim|cuda] [--small]``: it schedules a
pipelined row copy, checks that extraction picked the bulk copy, verifies the schedule, compiles it with NVRTC
and finds ``UBLKCP`` in the SASS (when cuobjdump is installed), then runs it on the target (on an sm_90 GPU by
default, else in the CPU simulator) against a float64 torch reference on a NaN-poisoned output.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from math import gcd

import torch
from _check import check, parse_args, poisoned, report
from egglog import String, StringLike, eq, function, i64, i64Like, relation, rule, var

import egtile
import egtile.rules as R
from egtile import language as T
from egtile.codegen import Needs, build, register_emitter, sass, unregister_emitter
from egtile.codegen.ops.common import barrier_ref, region_addr, sid_comment
from egtile.errors import CodegenError, SimulationError
from egtile.ir import ArriveExpectTx, BinOp, Const, Copy, Elect, Expr, Region, Var, dtype
from egtile.ir.printer import format_expr, format_region, register_listing, unregister_listing
from egtile.lower.sync import register_accesses, unregister_accesses
from egtile.rules import copy as copy_rules
from egtile.rules.api import Condition, Cost, Decision, FactSpec, Rule, Verdict
from egtile.schedule import cost as C
from egtile.schedule import dataflow as D
from egtile.schedule.schema import Stmt, fact
from egtile.sim import register_semantics, unregister_semantics

ARGS = parse_args(__doc__)

BULK_ALIGN = 16
"""cp.async.bulk: size and both addresses are multiples of 16 bytes (PTX ISA "cp.async.bulk")."""


# ----------------------------------------------------------------------------------------------------
# 1. The scheduled-IR node


@dataclass(frozen=True)
class BulkCopy:
    """``cp.async.bulk`` of the contiguous region ``src`` (global) into ``dst`` (shared), completing its bytes
    on ``barrier[stage]``. Issued by one thread, after an ``arrive.expect_tx`` of the same bytes."""

    src: Region
    dst: Region
    barrier: str
    stage: Expr
    sid: int | None = None

    @property
    def nbytes(self) -> int:
        return self.dst.numel * dtype(self.dst.buffer.dtype).bytes


# ----------------------------------------------------------------------------------------------------
# 2. The decision constructor and its declaration


@function
def bulk_load(sid: i64Like, ctx: StringLike) -> Stmt:
    """An issued copy as one elected thread's ``arrive.expect_tx`` plus a ``cp.async.bulk``."""


def _issue(n, lw, ic):
    """Lowering as an item of a pipelined loop's issue list: 1 arrival (plus the bytes) on ``full[stage]``."""
    c = lw.stmt(n.sid, ic.ctx)
    nbytes = c.dst.numel * dtype(c.dst.buffer.dtype).bytes
    body = (ArriveExpectTx(ic.full, ic.stage, nbytes), BulkCopy(c.src, c.dst, ic.full, ic.stage, sid=n.sid))
    return ([*body] if ic.threads.count == 1 else [Elect(ic.threads, body)]), 1


def _cost(c) -> int:
    # One instruction with a flat address (no tensor-map fetch): half a TMA issue, plus the bytes.
    nbytes = c.stmt.dst.numel * dtype(c.stmt.dst.buffer.dtype).bytes
    return C.TMA_ISSUE // 2 + nbytes // C.GLOBAL_BYTES_PER_CYCLE


BULK_LOAD = Decision("bulk_load", bulk_load, (("sid", i64), ("ctx", String)), "decision",
                     Cost(_cost, doc="TMA_ISSUE / 2 + bytes / GLOBAL_BYTES_PER_CYCLE"), issue=_issue,
                     label="cp.async.bulk")


# ----------------------------------------------------------------------------------------------------
# 3. The hardware oracle, the side conditions and the rule


def _divisor(e: Expr) -> int:
    """A ``g`` such that ``e`` is always a multiple of ``g`` (0: always zero)."""
    match e:
        case Const(value=v) if type(v) is int:
            return abs(v)
        case BinOp(op="+" | "-", a=a, b=b):
            return gcd(_divisor(a), _divisor(b))
        case BinOp(op="*", a=a, b=b):
            return _divisor(a) * _divisor(b)
    return 1


def _contiguous(r: Region) -> tuple[bool, int]:
    """Whether ``r`` is one contiguous run of its row-major buffer, and a divisor of its start (elements)."""
    shape, ext = r.buffer.shape, r.extents
    dims = [d for d, e in enumerate(ext) if e != 1]
    dense = not dims or all(ext[d] == shape[d] for d in range(dims[0] + 1, len(ext)))
    stride, start = 1, 0
    for d in range(len(shape) - 1, -1, -1):
        start = gcd(start, _divisor(r.offsets[d]) * stride)
        stride *= shape[d]
    return dense, start


def _bulk_eligible(ctx, s) -> Verdict:
    if not isinstance(s, Copy):
        return Verdict.fail("not a T.copy")
    reasons = []
    if s.src.buffer.scope != "global" or s.dst.buffer.scope != "shared":
        reasons.append(f"cp.async.bulk copies global -> shared; this copy is {s.src.buffer.scope} -> "
                       f"{s.dst.buffer.scope}")
    elem = dtype(s.src.buffer.dtype).bytes
    if dtype(s.dst.buffer.dtype).bytes != elem or s.src.buffer.dtype != s.dst.buffer.dtype:
        reasons.append("cp.async.bulk copies bytes and cannot convert dtypes")
    nbytes = s.dst.numel * elem
    if nbytes % BULK_ALIGN:
        reasons.append(f"{nbytes} bytes is not a multiple of {BULK_ALIGN}")
    for side, r in (("source", s.src), ("destination", s.dst)):
        dense, start = _contiguous(r)
        if not dense:
            reasons.append(f"the {side} region of {r.buffer.name} is not one contiguous run")
        if (start * elem) % BULK_ALIGN:
            reasons.append(f"the {side} start in {r.buffer.name} is not provably {BULK_ALIGN}-byte aligned")
    return Verdict.of(reasons)


BULK_ELIGIBLE = FactSpec("bulk-eligible", "cp.async.bulk can move the copy: global -> shared, one contiguous run "
                         "on each side, a multiple of 16 bytes from 16-byte aligned starts (PTX ISA cp.async.bulk)",
                         _bulk_eligible, scope="member")

bulk_capable = relation("user_bulk_capable", Stmt)
"""The statement is a copy cp.async.bulk can move and whose preference allows it."""


def _capability():
    st, s = var("st", Stmt), var("s", i64)
    yield rule(eq(st).to(Stmt.copy(s)), fact(String("bulk-eligible"), s), D.prefer(s, String("auto"))).then(
        bulk_capable(st),
        # One elected thread issues it alone, and asynchronously: the loop schedules read these.
        copy_rules.single_issue(st), copy_rules.async_capable(st))


CAN_BULK = Condition(
    "bulk-eligible", BULK_ELIGIBLE.doc, lambda v: (fact("bulk-eligible", v.sid),), derive=tuple(_capability()),
    oracles=(BULK_ELIGIBLE,))
PREFER_AUTO = Condition("prefer-auto", "the copy's prefer_instruction is auto (it names no other instruction)",
                        lambda v: (D.prefer(v.sid, String("auto")),))

copy_to_bulk = Rule(
    name="copy-to-bulk", stage="copy",
    doc="An issued T.copy of one contiguous run -> one issuing thread's arrive.expect_tx(full[s], bytes) then "
        "cp.async.bulk completing those bytes on full[s] (PTX ISA cp.async.bulk, mbarrier complete_tx). Legal in "
        "every issuing context: a single thread issues it.",
    variables=(("sid", i64), ("ctx", String)),
    lhs=lambda v: Stmt.issue(Stmt.copy(v.sid), v.ctx),
    rhs=lambda v: bulk_load(v.sid, v.ctx),
    conditions=(CAN_BULK, PREFER_AUTO),
)


# ----------------------------------------------------------------------------------------------------
# 4. The executors


BULK_PTX = """\
__device__ __forceinline__ void user_bulk_g2s(void* dst, const void* src, eg_u32 bytes, eg_u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(eg_smem_addr(dst)), "l"(src), "r"(bytes), "r"(eg_smem_addr(bar)) : "memory");
}"""


def emit(s: BulkCopy, ctx) -> list[str]:
    if s.nbytes % BULK_ALIGN:
        raise CodegenError(f"BulkCopy (sid {s.sid}): {s.nbytes} bytes; cp.async.bulk moves multiples of 16 bytes")
    return [f"user_bulk_g2s({region_addr(s.dst, ctx)}, {region_addr(s.src, ctx)}, {s.nbytes}, "
            f"{barrier_ref(s.barrier, s.stage, ctx)});{sid_comment(s.sid)}"]


def simulate(m, s: BulkCopy, th):
    """Read the source at issue, land the writes when the policy completes the copy, then complete its bytes
    on the barrier stage (the primitives a TMA load uses)."""
    th.sid = s.sid
    what = f"BulkCopy (sid {s.sid}) in block {m.coords}"
    if m.mem(s.src.buffer.name, th).scope != "global" or m.mem(s.dst.buffer.name, th).scope != "shared":
        raise SimulationError(f"{what}: cp.async.bulk copies global memory into shared memory")
    bar = m.barrier(s.barrier)
    stage = m.stage_of(bar, s.stage, th, "BulkCopy")
    writes = m.gather(s.src, s.dst, th, s.sid, what, op="bulk-copy")
    m.issue_async(th, s.sid, writes, op="bulk-copy", barrier=bar, stage=stage, tx_bytes=s.nbytes)
    return m.PREEMPT


def listing(s: BulkCopy) -> list[str]:
    return [f"bulk_copy {format_region(s.src)} -> {format_region(s.dst)} completes "
            f"{s.barrier}[{format_expr(s.stage)}]  # [{s.sid}]"]


def accesses(s: BulkCopy, acc, owner_of):
    # the bulk copy writes shared memory through the async proxy: egtile fences an ordinary access of the buffer
    # before it (egtile.lower.proxy)
    return acc.region(s.dst, write=True, proxy=True) | acc.region(s.src, write=False)


def _verifier_model():
    """The verifier's own model (it stays independent of the rules): an asynchronous write of ``dst`` that
    completes ``nbytes`` transaction bytes on ``barrier[stage]``, exactly like a TMA load."""
    from egtile import verifier as V

    return getattr(V, "register_model", None)


def register() -> None:
    """Register the instruction with egtile: the rule and its declaration, and every executor's handler."""
    R.register(copy_to_bulk, BULK_LOAD)
    register_emitter(BulkCopy, emit, device_code=(BULK_PTX,),
                     needs=lambda s, sched: Needs(shared_align=((s.dst.buffer.name, BULK_ALIGN),)),
                     param_align=lambda s, ctx: [(s.src.buffer.name, BULK_ALIGN)])
    register_semantics(BulkCopy, simulate)
    register_listing(BulkCopy, listing)
    register_accesses(BulkCopy, accesses)
    model = _verifier_model()
    if model is not None:
        model(BulkCopy, kind="async-copy", src="src", dst="dst", barrier="barrier", stage="stage", tx="nbytes")


def unregister() -> None:
    """Undo :func:`register`."""
    from egtile import verifier as V

    if getattr(V, "unregister_model", None) is not None:
        with contextlib.suppress(Exception):
            V.unregister_model(BulkCopy)
    unregister_accesses(BulkCopy)
    unregister_listing(BulkCopy)
    unregister_semantics(BulkCopy)
    unregister_emitter(BulkCopy)
    R.unregister("copy-to-bulk")
    R.unregister("bulk_load")


@contextlib.contextmanager
def registered():
    register()
    try:
        yield
    finally:
        unregister()


# ----------------------------------------------------------------------------------------------------
# The demonstration


def row_pipeline(rows: int = 8, width: int = 512, blocks: int = 2):
    """``Out[r, :] = In[r, :] * 2 + 1``, one row per iteration through two shared stages. A row of 512 floats
    is too wide for a TMA box (256 elements at most): without the bulk copy it would be a SIMT producer."""

    @T.prim_func
    def main(In: T.Tensor((blocks * rows, width), "float32"), Out: T.Tensor((blocks * rows, width), "float32")):
        with T.Kernel(blocks, threads=128) as bx:
            X_s = T.alloc_shared((width,), "float32")
            for k in T.Pipelined(rows, num_stages=2):
                T.copy(In[bx * rows + k, 0:width], X_s)
                for i in T.Parallel(width):
                    Out[bx * rows + k, i] = X_s[i] * 2.0 + 1.0

    return main


def main() -> int:
    rows, width = (4, 64) if ARGS.small else (8, 512)
    prim = row_pipeline(rows, width)
    with registered():
        r = egtile.optimize(prim)
        ops = {n.op for top in r.tree for n in top.walk()}
        print("instructions chosen:", ", ".join(sorted(ops & {"bulk_load", "tma_load", "simt_load"})))
        ok = "bulk_load" in ops
        problems = egtile.verify(r.scheduled)
        print("verify:", "clean" if not problems else problems)
        ok &= not problems
        if sass.available():
            has = any(o.startswith("UBLKCP") for o in sass.opcodes(sass.disassemble(build(r.scheduled).cubin)))
            print("SASS has UBLKCP:", has)
            ok &= has
        k = egtile.compile(prim, target=ARGS.target)
        x = torch.randn(2 * rows, width, device=k.device)
        y = poisoned(tuple(x.shape), torch.float32, k.device)
        k(x, y)
        # x * 2 is exact and + 1 rounds once: the float32 result is the correctly rounded float64 one.
        ok &= check("Out", y, x.double() * 2 + 1, rtol=2.0**-24, atol=0.0)
    return report("user_instruction_bulk_copy", k.target, ok)


if __name__ == "__main__":
    sys.exit(main())
