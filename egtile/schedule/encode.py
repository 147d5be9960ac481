"""Encode an ``ir.Kernel`` into egglog terms plus the base relations and hardware oracles its rules read.

``build_terms`` is pure: it maps each statement to a :class:`~egtile.schedule.schema.Stmt` term. ``encode``
inserts the terms into an e-graph together with

* the base relations of :mod:`egtile.schedule.dataflow`, one set of rows per statement, from its own syntax
  (:func:`egtile.schedule.facts.base_rows`); every legality fact is derived from them by rule;
* the hardware oracles the active rules declare (:class:`~egtile.schedule.rule.FactSpec`,
  :class:`~egtile.schedule.rule.NumSpec`), each computed once for the statements in its scope.

The terms go in as one ``let``; rows through egglog's ``input`` command (a tab-separated file per table),
two orders of magnitude faster than a Python egglog expression per row.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from dataclasses import dataclass, field

from egglog import EGraph

from egtile.errors import ScheduleError
from egtile.ir import AtomicAdd, Const, Copy, Extern, For, If, Kernel, Stmt, Store
from egtile.schedule import dataflow as D
from egtile.schedule import schema
from egtile.schedule.facts import TILE_OPS, FactContext, _check_name, base_rows
from egtile.schedule.rule import FactSpec, NumSpec, RuleSet
from egtile.verdict import Verdict


@dataclass
class Encoding:
    """A kernel inside an e-graph.

    Attributes:
        kernel: the encoded kernel.
        ctx: placement and memoized analysis facts.
        root: the root list term (the kernel body), bound with ``let`` in the e-graph.
        terms: ``sid -> encoded term`` of every statement.
        verdicts: ``(oracle name, sid) -> Verdict`` for every boolean oracle computed (held or not).
        nums: ``(name, sid) -> value`` for every oracle number inserted.
        leaf_work: ``sid -> cycles`` of every leaf statement (the ``leaf_work`` base relation).
        rows: number of rows inserted.
    """

    kernel: Kernel
    ctx: FactContext
    root: schema.Block
    terms: dict[int, schema.Stmt]
    verdicts: dict[tuple[str, int], Verdict] = field(default_factory=dict)
    nums: dict[tuple[str, int], int] = field(default_factory=dict)
    leaf_work: dict[int, int] = field(default_factory=dict)
    rows: int = 0
    seconds: float = 0.0


def parallel_extent(loop: For) -> int:
    """The static trip count of a ``T.Parallel`` loop.

    Raises:
        ScheduleError: a symbolic range (a parallel loop is mapped onto threads and needs a static extent).
    """
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
                parallel_extent(s)
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


def in_scope(ctx: FactContext, sid: int, scope: str) -> bool:
    """Whether statement ``sid`` is in an oracle's scope (see :class:`~egtile.schedule.rule.FactSpec`)."""
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
        case "copy":
            return isinstance(s, Copy)
    raise ValueError(f"unknown oracle scope {scope!r} (expected block, thread, pipelined, member, copy, any)")


def _verdict(value) -> Verdict:
    return value if isinstance(value, Verdict) else Verdict(bool(value))


_SCRATCH = threading.local()


def scratch_dir() -> str:
    """A directory private to this thread of this process for the ``input`` command's files (kept for the
    process's life: creating and removing a directory per call costs more than the rows)."""
    d = getattr(_SCRATCH, "dir", None)
    if d is None or not os.path.isdir(d):
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        d = _SCRATCH.dir = tempfile.mkdtemp(prefix="egtile-rows-", dir=base)
        import atexit
        import shutil

        atexit.register(shutil.rmtree, d, True)
    return d


def load_rows(egraph: EGraph, table, rows: list[tuple], tmp: str | None, name: str) -> None:
    """Bulk-insert ``rows`` into ``table`` with egglog's ``input`` command (a tab-separated file)."""
    if not rows:
        return
    path = os.path.join(tmp or scratch_dir(), f"{name}.tsv")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines("\t".join(str(c) for c in row) + "\n" for row in rows)
    try:
        egraph.input(table, path)
    finally:
        os.unlink(path)


_TABLES = {"own_read": D.own_read, "own_write": D.own_write, "own_ptr": D.own_ptr, "scope": D.scope,
           "kind": D.kind, "prefer": D.prefer, "index_var": D.index_var, "addr_var": D.addr_var,
           "addr_load": D.addr_load, "loop_var": D.loop_var, "var_kind": D.var_kind,
           "kernel_threads": D.kernel_threads, "num_stages": D.num_stages, "leaf_work": D.leaf_work}


def encode(kernel: Kernel, rules: RuleSet, egraph: EGraph) -> Encoding:
    """Insert ``kernel``, its base relations and the oracles ``rules`` need into ``egraph``.

    Raises:
        ScheduleError: see :func:`build_terms`.
        ValueError: a fact or buffer name that cannot be written as a table cell.
    """
    t0 = time.perf_counter()
    ctx = FactContext.of(kernel)
    root_term, terms = build_terms(kernel)
    root = egraph.let("root", root_term)
    egraph.register(D.root(root))
    enc = Encoding(kernel, ctx, root, terms)
    tables = base_rows(ctx)
    enc.leaf_work = {sid: w for sid, w in tables["leaf_work"]}
    facts: list[tuple[str, int]] = []
    for spec in rules.oracles:
        _check_name(spec.name)
        for sid in ctx.stmts:
            if not in_scope(ctx, sid, spec.scope):
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
    enc.rows = len(facts) + len(nums) + sum(len(r) for r in tables.values())
    for name, rows in tables.items():
        load_rows(egraph, _TABLES[name], rows, None, name)
    load_rows(egraph, schema.fact, facts, None, "fact")
    load_rows(egraph, schema.num, nums, None, "num")
    enc.seconds = time.perf_counter() - t0
    return enc


__all__ = ["Encoding", "build_terms", "encode", "in_scope", "load_rows", "parallel_extent"]
