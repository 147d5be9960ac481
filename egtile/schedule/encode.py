"""Encode an ``ir.Kernel`` into egglog terms plus the fact tables its rules read.

``build_terms`` is pure: it maps each statement to a :class:`~egtile.schedule.schema.Stmt` term (payload
stays in the kernel, found again by ``sid``). ``encode`` inserts the terms into an e-graph together with

* the placement facts every ruleset relies on (``sid_of``, ``member``, ``reads``/``writes`` of pipelined
  loop members, their producer/consumer role, the consumer list length),
* the Python facts (:class:`~egtile.rules.FactSpec`, :class:`~egtile.rules.NumSpec`) the active rules
  declare, each computed once for the statements in its scope,
* the cost table of :mod:`egtile.schedule.cost` (``num("cost.<constructor>", sid)``).

The terms go in as one ``let``; fact rows through egglog's ``input`` command.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field

from egglog import EGraph

from egtile.schedule import cost as C
from egtile.schedule import schema
from egtile.schedule.facts import TILE_OPS, FactContext
from egtile.schedule.schema import PRODUCER_THREADS
from egtile.errors import ScheduleError
from egtile.ir import AtomicAdd, Const, Copy, Extern, For, If, Kernel, Stmt, Store
from egtile.rules.api import FactSpec, NumSpec, RuleSet, Verdict


@dataclass
class Encoding:
    """A kernel inside an e-graph.

    Attributes:
        kernel: the encoded kernel.
        ctx: placement and memoized analysis facts.
        root: the root list term (the kernel body), bound with ``let`` in the e-graph.
        terms: ``sid -> encoded term`` of every statement.
        verdicts: ``(fact name, sid) -> Verdict`` for every Python fact computed (held or not).
        nums: ``(name, sid) -> value`` for every number inserted (costs included).
        rows: number of fact rows inserted.
    """

    kernel: Kernel
    ctx: FactContext
    root: schema.Block
    terms: dict[int, schema.Stmt]
    verdicts: dict[tuple[str, int], Verdict] = field(default_factory=dict)
    nums: dict[tuple[str, int], int] = field(default_factory=dict)
    rows: int = 0
    seconds: float = 0.0


def _parallel_extent(loop: For) -> int:
    if not (isinstance(loop.start, Const) and isinstance(loop.stop, Const)):
        raise ScheduleError(
            f"T.Parallel over {loop.var.name} (sid {loop.sid}) has a symbolic range; a parallel loop is mapped onto "
            "threads and needs a static extent (expected int start/stop)", loop.loc)
    return max(0, int(loop.stop.value) - int(loop.start.value))


def _block_list(stmts: tuple[Stmt, ...], terms: dict[int, schema.Stmt], where: str) -> schema.Block:
    out = schema.Block.nil()
    items = [_stmt(s, terms, where) for s in stmts]
    for t in reversed(items):
        out = schema.Block.cons(t, out)
    return out


def _stmt(s: Stmt, terms: dict[int, schema.Stmt], where: str) -> schema.Stmt:
    S = schema.Stmt
    if where == "thread":
        match s:
            case For(kind="pipelined"):
                raise ScheduleError(f"T.Pipelined over {s.var.name} (sid {s.sid}) inside a T.Parallel body: a "
                                    "pipeline needs the whole block's threads", s.loc)
            case For(body=body):
                t = S.inner_loop(s.sid, _block_list(body, terms, "thread"))
            case If(then_body=a, else_body=b):
                t = S.inner_branch(s.sid, _block_list(a, terms, "thread"), _block_list(b, terms, "thread"))
            case _ if isinstance(s, TILE_OPS):
                raise ScheduleError(f"{type(s).__name__} (sid {s.sid}) inside a T.Parallel body: tile operations "
                                    "are run cooperatively by all threads and cannot sit in a per-thread loop", s.loc)
            case _:
                t = S.leaf(s.sid)
    else:
        match s:
            case Store() | Extern() | AtomicAdd():
                t = S.scalar(s.sid)
            case Copy():
                t = S.copy(s.sid)
            case For(kind="parallel", body=body):
                _parallel_extent(s)
                t = S.par(s.sid, _block_list(body, terms, "thread"))
            case For(kind="pipelined", body=body):
                t = S.pipelined(s.sid, _block_list(body, terms, "block"))
            case For(body=body):
                t = S.loop(s.sid, _block_list(body, terms, "block"))
            case If(then_body=a, else_body=b):
                t = S.branch(s.sid, _block_list(a, terms, "block"), _block_list(b, terms, "block"))
            case _:
                t = S.tile(s.sid)
    terms[s.sid] = t
    return t


def build_terms(kernel: Kernel) -> tuple[schema.Block, dict[int, schema.Stmt]]:
    """The kernel body as a list term, and ``sid -> term`` for every statement (no e-graph involved).

    Raises:
        ScheduleError: a construct that has no schedule at all (a tile op or a pipeline inside a
            ``T.Parallel`` body, a parallel loop with a symbolic range).
    """
    terms: dict[int, schema.Stmt] = {}
    return _block_list(kernel.body, terms, "block"), terms


def _in_scope(ctx: FactContext, sid: int, scope: str) -> bool:
    s = ctx.stmts[sid]
    match scope:
        case "any":
            return True
        case "block":
            return ctx.context[sid] == "block"
        case "thread":
            return ctx.context[sid] == "thread"
        case "pipelined":
            return isinstance(s, For) and s.kind == "pipelined" and ctx.context[sid] == "block"
        case "member":
            return sid in ctx.pipeline_of
    raise ValueError(f"unknown fact scope {scope!r} (expected block, thread, pipelined, member, any)")


def _verdict(value) -> Verdict:
    return value if isinstance(value, Verdict) else Verdict(bool(value))


def _cost_table(ctx: FactContext) -> dict[tuple[str, int], int]:
    """``cost.<constructor>`` for every statement and each decision that can apply to it."""
    k = ctx.kernel
    T = k.threads
    out: dict[tuple[str, int], int] = {}
    for sid, s in ctx.stmts.items():
        if ctx.context[sid] != "block":
            continue
        match s:
            case Store() | Extern() | AtomicAdd():
                out["cost.elect", sid] = C.elect_cost(s)
                out["cost.replicate", sid] = C.replicate_cost(s)
            case Copy():
                out["cost.copy_simt", sid] = C.copy_cost(s, "simt", T)
                if sid in ctx.pipeline_of:
                    out["cost.tma_load", sid] = C.copy_cost(s, "tma", PRODUCER_THREADS)
                    out["cost.cp_async_load", sid] = C.copy_cost(s, "cp_async", PRODUCER_THREADS)
                    out["cost.simt_load", sid] = C.copy_cost(s, "simt_producer", PRODUCER_THREADS)
                    out["cost.tma_prefetch", sid] = C.copy_cost(s, "tma", T)
                    out["cost.cp_async_prefetch", sid] = C.copy_cost(s, "cp_async", T)
            case For(kind="parallel", body=body):
                ext = _parallel_extent(s)
                per_iter = sum(C.leaf_cost(b) for b in body)
                out["cost.partitioned", sid] = C.parallel_cost(ext, T, "partitioned", per_iter)
                out["cost.replicated", sid] = C.parallel_cost(ext, T, "replicated", per_iter)
            case For(kind="pipelined"):
                out["cost.serial", sid] = C.serial_pipeline_cost()
                out["cost.ws", sid] = C.ws_pipeline_cost()
                out["cost.swp", sid] = C.swp_pipeline_cost()
            case For() | If():
                pass
            case _:
                out["cost.tile", sid] = C.tile_cost(s, T)
    return out


def _check_name(name: str) -> str:
    if not name or any(c in name for c in "\t\n\r\"") or name != name.strip():
        raise ValueError(f"fact and buffer names must be non-empty, without tabs, newlines, quotes or outer "
                         f"spaces; got {name!r}")
    return name


def _load(egraph: EGraph, table, rows: list[tuple], tmp: str, name: str) -> None:
    """Bulk-insert ``rows`` into ``table`` with egglog's ``input`` command (a tab-separated file)."""
    if not rows:
        return
    path = os.path.join(tmp, f"{name}.tsv")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines("\t".join(str(c) for c in row) + "\n" for row in rows)
    egraph.input(table, path)


def encode(kernel: Kernel, rules: RuleSet, egraph: EGraph) -> Encoding:
    """Insert ``kernel`` and the facts ``rules`` need into ``egraph``.

    The statement terms go in as one ``let``; every fact row goes in through egglog's ``input`` command
    (one tab-separated file per table), which is two orders of magnitude faster than building a Python
    egglog expression per row. ``sid_of`` is derived inside the e-graph by the support rules.

    Raises:
        ScheduleError: see :func:`build_terms`.
        ValueError: a fact or buffer name that cannot be written as a table cell.
    """
    t0 = time.perf_counter()
    ctx = FactContext.of(kernel)
    root_term, terms = build_terms(kernel)
    root = egraph.let("root", root_term)
    enc = Encoding(kernel, ctx, root, terms)
    facts: list[tuple[str, int]] = []
    member: list[tuple[int, int]] = []
    reads: list[tuple[int, str]] = []
    writes: list[tuple[int, str]] = []
    # Placement facts of pipelined loops (what the support rules and the barrier rules read).
    for sid, loop in ctx.pipeline_of.items():
        member.append((sid, loop))
        role = "producer" if ctx.is_producer(sid) else "consumer"
        facts.append((role, sid))
        enc.verdicts[role, sid] = Verdict(True)
        reads += [(sid, _check_name(b)) for b in sorted(ctx.reads(sid))]
        writes += [(sid, _check_name(b)) for b in sorted(ctx.writes(sid))]
        if ctx.producer_kind(sid) == "tma":
            facts.append(("tma-producer", sid))
    for sid, s in ctx.stmts.items():
        if isinstance(s, For) and s.kind == "pipelined" and ctx.context[sid] == "block":
            consumers = sum(1 for b in s.body if not ctx.is_producer(b.sid))
            enc.nums["consumer-items", sid] = consumers + 2
    enc.nums.update(_cost_table(ctx))
    # The active rules' own facts.
    for spec in rules.facts:
        _check_name(spec.name)
        for sid in ctx.stmts:
            if not _in_scope(ctx, sid, spec.scope):
                continue
            if isinstance(spec, FactSpec):
                v = _verdict(spec.compute(ctx, ctx.stmts[sid]))
                enc.verdicts[spec.name, sid] = v
                if v.ok:
                    facts.append((spec.name, sid))
            elif isinstance(spec, NumSpec):
                n = spec.compute(ctx, ctx.stmts[sid])
                if n is not None:
                    enc.nums[spec.name, sid] = int(n)
    nums = [(name, sid, n) for (name, sid), n in enc.nums.items()]
    enc.rows = len(facts) + len(member) + len(reads) + len(writes) + len(nums)
    with tempfile.TemporaryDirectory(prefix="egtile-encode-") as tmp:
        _load(egraph, schema.fact, facts, tmp, "fact")
        _load(egraph, schema.member, member, tmp, "member")
        _load(egraph, schema.reads, reads, tmp, "reads")
        _load(egraph, schema.writes, writes, tmp, "writes")
        _load(egraph, schema.num, nums, tmp, "num")
    enc.seconds = time.perf_counter() - t0
    return enc


__all__ = ["PRODUCER_THREADS", "Encoding", "build_terms", "encode"]
