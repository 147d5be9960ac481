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

import itertools
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


class _Terms:
    """Builds the encoded terms from egglog-python's expression declarations directly.

    An egglog-python constructor call (``Stmt.par(sid, body)``) re-binds its signature, solves type
    variables and merges declarations on every call: about 0.1-0.5 ms each, 2-3 calls per statement, the
    largest part of encoding. The encoded constructors are fixed (an ``i64`` statement id, then lists), so
    each is called once on sample arguments here, and every term is then the same declaration tree
    (``TypedExprDecl(return type, CallDecl(constructor, args))``) built directly: the tree egglog-python's
    own call would build (a test compares both on every example). :meth:`of` falls back to ordinary calls
    if egglog-python's internals differ from what this expects.
    """

    def __init__(self) -> None:
        from egglog.declarations import CallDecl, LitDecl, TypedExprDecl
        from egglog.runtime import RuntimeExpr

        S, B = schema.Stmt, schema.Block
        nil = B.nil()
        samples = {"nil": nil, "cons": B.cons(S.leaf(0), nil)}
        for name in ("scalar", "copy", "tile", "leaf"):
            samples[name] = getattr(S, name)(0)
        for name in ("par", "pipelined", "loop", "inner_loop"):
            samples[name] = getattr(S, name)(0, nil)
        for name in ("branch", "inner_branch"):
            samples[name] = getattr(S, name)(0, nil, nil)
        self._decls = samples["inner_branch"].__egg_decls__.copy()
        self._decls.update(*samples.values())
        self._typed = {k: v.__egg_typed_expr__ for k, v in samples.items()}
        self._i64 = self._typed["leaf"].expr.args[0].tp
        for k, t in self._typed.items():
            if not isinstance(t.expr, CallDecl):  # pragma: no cover - internals changed
                raise TypeError(k)
        self._call, self._lit, self._typed_decl, self._expr = CallDecl, LitDecl, TypedExprDecl, RuntimeExpr
        self.nil = self._typed["nil"]

    def node(self, name: str, sid: int | None, *args):
        """The declaration of constructor ``name`` applied to statement id ``sid`` (``None``: none) and ``args``."""
        t = self._typed[name]
        if sid is not None:
            args = (self._typed_decl(self._i64, self._lit(sid)), *args)
        return self._typed_decl(t.tp, self._call(t.expr.callable, args, t.expr.bound_tp_params))

    def wrap(self, decl):
        """The egglog-python expression of declaration ``decl``."""
        return self._expr.__from_values__(self._decls, decl)

    def let(self, egraph: EGraph, name: str, decl):
        """``egraph.let(name, wrap(decl))``, sending the term to egglog as one command built here.

        egglog-python's ``let`` translates the declaration tree node by node through its generic
        converter (it looks for shared subterms first, then converts each call with its type and
        callable lookups: about 0.2 ms per node); the encoded constructors' egglog names are looked up
        once here and the tree is sent as egglog program text.
        """
        from egglog import bindings
        from egglog.declarations import LetRefDecl

        state = egraph._state
        egraph._add_decls(self._decls)
        names = {t.expr.callable: state.callable_ref_to_egg(t.expr.callable) for t in self._typed.values()}
        if any(rev for _n, rev in names.values()):  # pragma: no cover - a constructor with reversed arguments
            return egraph.let(name, self.wrap(decl))
        # egglog's expression objects copy their whole argument subtrees when built (quadratic in a list's
        # length; so does egglog-python's own let): every subtree of more than _CHUNK nodes is bound to a
        # global of its own first and referenced by name. (Program text parsed by egglog is no better: each
        # node's span keeps a copy of the whole text.)
        span, call, lit, Int, Var = bindings.PanicSpan(), bindings.Call, bindings.Lit, bindings.Int, bindings.Var
        cmds: list = []

        def conv(t):
            e = t.expr
            if isinstance(e, self._lit):
                return lit(span, Int(int(e.value))), 1
            args, size = [], 1
            for a in e.args:
                x, n = conv(a)
                args.append(x)
                size += n
            out = call(span, names[e.callable][0], args)
            if size > _CHUNK:
                g = f"$__egtile_term_{next(_GLOBALS)}"
                cmds.append(bindings.ActionCommand(bindings.Let(span, g, out)))
                # egglog-python translates a term that contains this one (explain's look-ups of statement
                # e-classes) down to here only, as its own let would have cached it
                cache[e] = ref = Var(span, g)
                return ref, 1
            return out, size

        cache = state.expr_to_egg_cache

        var = name if name.startswith("$") else f"${name}"
        top, _ = conv(decl)
        cmds.append(bindings.ActionCommand(bindings.Let(span, var, top)))
        egraph._run_program(*cmds)
        cache[decl.expr] = Var(span, var)
        return self._expr.__from_values__(egraph.__egg_decls__, self._typed_decl(decl.tp, LetRefDecl(name)))


_FAST: list[_Terms | None] = []
_CHUNK = 48
_GLOBALS = itertools.count()


def _fast() -> _Terms | None:
    if not _FAST:
        try:
            _FAST.append(_Terms())
        except Exception:  # noqa: BLE001 - pragma: no cover - egglog-python internals changed: slow path
            _FAST.append(None)
    return _FAST[0]


def _block_list(stmts: tuple[Stmt, ...], terms: dict[int, schema.Stmt], where: str, fast: _Terms | None = None):
    items = [_stmt(s, terms, where, fast) for s in stmts]
    if fast is not None:
        out = fast.nil
        for t in reversed(items):
            out = fast.node("cons", None, t, out)
        return out
    out = schema.Block.nil()
    for t in reversed(items):
        out = schema.Block.cons(t, out)
    return out


def _stmt(s: Stmt, terms: dict[int, schema.Stmt], where: str, fast: _Terms | None = None):
    if fast is not None:
        t = _stmt_node(s, terms, where, fast)
        terms[s.sid] = t
        return t
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


def _stmt_node(s: Stmt, terms: dict, where: str, fast: _Terms):
    """:func:`_stmt`'s term as a declaration (the same constructor for the same statement)."""
    if where == "thread":
        match s:
            case For(kind="pipelined"):
                raise ScheduleError(f"T.Pipelined over {s.var.name} (sid {s.sid}) inside a T.Parallel body: a "
                                    "pipeline needs the whole block's threads", s.loc)
            case For(body=body):
                return fast.node("inner_loop", s.sid, _block_list(body, terms, "thread", fast))
            case If(then_body=a, else_body=b):
                return fast.node("inner_branch", s.sid, _block_list(a, terms, "thread", fast),
                                 _block_list(b, terms, "thread", fast))
            case _ if isinstance(s, TILE_OPS):
                raise ScheduleError(f"{type(s).__name__} (sid {s.sid}) inside a T.Parallel body: tile operations "
                                    "are run cooperatively by all threads and cannot sit in a per-thread loop", s.loc)
            case _:
                return fast.node("leaf", s.sid)
    match s:
        case Store() | Extern() | AtomicAdd():
            return fast.node("scalar", s.sid)
        case Copy():
            return fast.node("copy", s.sid)
        case For(kind="parallel", body=body):
            parallel_extent(s)
            return fast.node("par", s.sid, _block_list(body, terms, "thread", fast))
        case For(kind="pipelined", body=body):
            return fast.node("pipelined", s.sid, _block_list(body, terms, "block", fast))
        case For(body=body):
            return fast.node("loop", s.sid, _block_list(body, terms, "block", fast))
        case If(then_body=a, else_body=b):
            return fast.node("branch", s.sid, _block_list(a, terms, "block", fast), _block_list(b, terms, "block", fast))
        case _:
            return fast.node("tile", s.sid)


def build_terms(kernel: Kernel, *, direct: bool = True) -> tuple[schema.Block, dict[int, schema.Stmt]]:
    """The kernel body as a list term, and ``sid -> term`` for every statement (no e-graph involved).

    ``direct=False`` builds every term through egglog-python's constructor calls (the reference the
    direct builder, :class:`_Terms`, is tested against).

    Raises:
        ScheduleError: a construct that has no schedule at all (a tile op or a pipeline inside a
            ``T.Parallel`` body, a parallel loop with a symbolic range).
    """
    terms: dict[int, schema.Stmt] = {}
    fast = _fast() if direct else None
    if fast is None:
        return _block_list(kernel.body, terms, "block"), terms
    root = fast.wrap(_block_list(kernel.body, terms, "block", fast))
    return root, {sid: fast.wrap(t) for sid, t in terms.items()}


def insert_root(egraph: EGraph, root: schema.Block) -> schema.Block:
    """``egraph.let("root", root)`` (through :meth:`_Terms.let` when the direct builder is available)."""
    fast = _fast()
    if fast is not None:
        try:
            return fast.let(egraph, "root", root.__egg_typed_expr__)
        except (AttributeError, TypeError, KeyError):  # pragma: no cover - internals changed
            pass
    return egraph.let("root", root)


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
    root = insert_root(egraph, root_term)
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
