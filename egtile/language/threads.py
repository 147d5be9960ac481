"""Per-thread code: ``T.get_thread_binding``, ``threads=(x, y, z)``, ``T.thread_binding``, ``T.vectorized``,
``T.get_block_binding``, ``T.sync_threads``.

egtile's model is TileLang's tile model: statements of a block run as if once (the scheduler decides which
threads run them), and ``T.Parallel`` iterations are independent and spread over the threads. TileLang also
lets a kernel name its own thread (``tx = T.get_thread_binding()``) and write per-thread (SIMT) code.
egtile expresses that code in its own model:

* ``tx = T.get_thread_binding(dim)`` opens a *thread region*: every statement traced after it, up to the end
  of the statement list it stands in, is the body of one ``T.Parallel`` loop over the block's threads, and
  ``tx`` is that loop's index (``threads=(x, y, z)``: thread ``t`` has ``(t % x, t // x % y, t // (x*y))``,
  threadIdx.x fastest, as in CUDA). The scheduler partitions such a loop one iteration per thread, so the
  region's code runs as the per-thread code it was written as; the simulator checks the iterations are
  independent (a race is reported, never hidden).
* What the region cannot express is threads talking to each other inside it: a ``T.sync_threads()`` inside
  a region ends it and starts another over the same thread index (egtile places the CTA barrier between the
  two from their dataflow). A per-thread variable whose value crosses such a barrier (read, in one thread region,
  after another region over the same index wrote it: before it, or in an earlier iteration of a serial loop
  holding both; :func:`_values_across_sync`) is kept as one copy per thread, element ``[t]`` of a block array
  (:mod:`egtile.language.carried`), which is what a CUDA local variable is. A ``T.sync_threads()`` inside a
  serial loop or an ``if`` of the region splits it the same way once the region closes (:func:`_split`): the loop (or branch) becomes block-level,
  with a region before and after the barrier inside it. TileLang allows a barrier there when every thread
  reaches it, i.e. the loop's bounds or the branch's condition are block-uniform; egtile accepts bounds and
  conditions that do not depend on the thread index, a ``T.Parallel`` variable or a per-thread (local or
  fragment) value, and refuses the others naming the dependence (the scheduler's own uniformity analysis and
  the verifier check the hoisted branch again, :mod:`egtile.analysis.uniform`). A barrier over part of the
  block (``T.sync_threads(id, count)`` under ``if tx < count``, PTX ``bar.sync id, count``) is such a refusal. Shuffles and warp reductions are refused (:mod:`egtile.language.missing`
  names the tile-level alternative, ``T.reduce_*`` over a fragment).
* Outside a region ``T.sync_threads()`` has nothing to order: block-level statements already run in program
  order with the barriers egtile derives.
* ``for tx in T.thread_binding(begin, end, thread="threadIdx.x")`` is a ``T.Parallel`` loop over those threads;
  ``T.vectorized(n)`` is a serial loop run by one thread (egtile picks vector widths itself).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from egtile.errors import DSLError, SourceLoc, UnsupportedError
from egtile.analysis.access import reads, writes
from egtile.ir.kernel import Const, Expr, For, If, Load, Stmt, Store, Var
from egtile.language import tracer
from egtile.language.expr import Value


@dataclass
class ThreadRegion:
    """An open thread region: its loop variable and the frame its statements go to."""

    var: Var
    frame: tracer.Frame
    parent: tracer.Frame
    sid: int
    loc: Any


def _open(trace: tracer.Trace, var: Var | None, loc: Any) -> ThreadRegion:
    if var is None:
        wanted = tracer.assign_target_name(loc) if len(trace.thread_dims) == 1 else None
        var = Var(trace.fresh_var_name(wanted or "tid", "tid"))
    trace.var_ranges[var.name] = (0, trace.threads)
    trace.thread_vars.add(var.name)
    parent = trace.frames[-1]
    sid = trace.sid()
    frame = trace.open("thread region", loc)
    region = ThreadRegion(var, frame, parent, sid, loc)
    trace.region = region
    return region


@dataclass(frozen=True)
class SyncMark:
    """Where a ``T.sync_threads()`` stands inside a serial loop or a branch of a thread region: a placeholder in
    the region's statements while it is traced, replaced by the split when the region closes (:func:`_split`);
    never part of the IR."""

    loc: SourceLoc | None
    barrier: tuple[Any, Any] = (None, None)  # the call's (barrier_id, arrive_count), for the refusal's message
    tile_op: Any = None  # a tile op standing here: block-level work between the two regions (split_at_tile_op)


def _has_mark(stmts: tuple[Any, ...]) -> bool:
    for st in stmts:
        if isinstance(st, SyncMark):
            return True
        if isinstance(st, For) and _has_mark(st.body):
            return True
        if isinstance(st, If) and (_has_mark(st.then_body) or _has_mark(st.else_body)):
            return True
    return False


def _first_mark(stmts: tuple[Any, ...]) -> SyncMark | None:
    for st in stmts:
        if isinstance(st, SyncMark):
            return st
        inner = (st.body,) if isinstance(st, For) else (st.then_body, st.else_body) if isinstance(st, If) else ()
        for body in inner:
            m = _first_mark(body)
            if m is not None:
                return m
    return None


def _per_thread(e: Expr, var: Var, parallel: frozenset[str], per_thread: frozenset[str]) -> str | None:
    """Why ``e`` (a hoisted loop bound or branch condition) may differ between the block's threads, or ``None``."""
    from egtile.analysis.access import walk_expr

    for x in walk_expr(e):
        if isinstance(x, Var) and x.name == var.name:
            return f"it depends on the thread index `{var.name}`"
        if isinstance(x, Var) and x.name in parallel:
            return f"it depends on the T.Parallel variable `{x.name}`"
        if isinstance(x, Load) and (x.buffer.scope in ("local", "fragment") and x.buffer.name in per_thread):
            name, at = x.buffer.name.partition("@")[::2]
            what = ("the value the loop starts from" if name == "loop_start" else f"`{name}`") if at else \
                f"{x.buffer.scope} buffer `{name}`"
            return (f"it reads {what}, which each thread holds its own copy of and sets in per-thread code (egtile "
                    "does not prove that every thread sets the same value)")
    return None


def _written_locals(stmts: tuple[Any, ...]) -> frozenset[str]:
    from egtile.analysis.access import writes

    out: set[str] = set()
    for st in stmts:
        if isinstance(st, SyncMark):
            continue
        if isinstance(st, For):
            out |= _written_locals(st.body)
        elif isinstance(st, If):
            out |= _written_locals(st.then_body) | _written_locals(st.else_body)
        else:
            out |= {a.buffer for a in writes(st) if isinstance(getattr(a, "buffer", None), str)}
    return frozenset(out)


def _split(stmts: tuple[Any, ...], region: ThreadRegion, trace: tracer.Trace, per_thread: frozenset[str],
           parallel: frozenset[str] = frozenset()) -> list[Stmt]:
    """The region's statements as block-level ones: the runs between barriers as thread-region ``T.Parallel``
    loops, and each serial loop or branch that holds a barrier as block-level, split inside (module docstring).

    Raises:
        UnsupportedError: a barrier under a ``T.Parallel`` loop, or under a loop or branch whose bounds or
            condition may differ between threads (at the barrier's line, naming the dependence).
    """
    out: list[Stmt] = []
    run: list[Stmt] = []

    def flush() -> None:
        if run:
            out.append(For(trace.sid(), region.var, Const(0, "int32"), Const(trace.threads, "int32"), "parallel",
                           tuple(run), 0, region.loc))
            run.clear()

    for st in stmts:
        if isinstance(st, SyncMark):
            flush()
            if st.tile_op is not None:
                out.append(st.tile_op)
            continue
        if not _has_mark((st,)):
            run.append(st)
            continue
        flush()
        mark = _first_mark((st,))
        what = "a tile op" if mark.tile_op is not None else "T.sync_threads()" if mark.barrier == (None, None) else \
            f"T.sync_threads({', '.join(repr(a) for a in mark.barrier if a is not None)})"
        if isinstance(st, For) and st.kind == "parallel":
            raise UnsupportedError(f"{what} inside a T.Parallel loop of per-thread code: a CTA barrier orders whole "
                                   "threads, not the iterations of a parallel loop; end the loop before the barrier",
                                   mark.loc)
        if isinstance(st, For):
            exprs, construct = (st.start, st.stop), f"the loop over `{st.var.name}`"
        else:
            exprs, construct = (st.cond,), "the `if`"
        for e in exprs:
            why = _per_thread(e, region.var, parallel, per_thread)
            if why is not None:
                partial = (" (a barrier over part of the block, PTX `bar.sync id, count`, is not supported: egtile "
                           "places full CTA barriers from the dataflow)") if mark.barrier[1] is not None else ""
                rule = ("A tile op is block-level work that every thread of the block takes part in, so egtile runs "
                        "one only under a block-uniform loop or branch" if mark.tile_op is not None else
                        "A CTA barrier must be reached by every thread of the block (PTX ISA, bar.sync), so TileLang "
                        f"allows it only under a block-uniform loop or branch{partial}")
                raise UnsupportedError(
                    f"{what} inside {construct} of per-thread code, whose {'bounds' if isinstance(st, For) else 'condition'} "
                    f"may differ between the block's threads: {why}. {rule}. Compute the "
                    f"{'bounds' if isinstance(st, For) else 'condition'} from block indices, constants or shared memory, "
                    f"or move the {'tile op' if mark.tile_op is not None else 'barrier'} out of it", mark.loc)
        if isinstance(st, For):
            out.append(replace(st, body=tuple(_split(st.body, region, trace, per_thread, parallel))))
        else:
            out.append(replace(st, then_body=tuple(_split(st.then_body, region, trace, per_thread, parallel)),
                               else_body=tuple(_split(st.else_body, region, trace, per_thread, parallel))))
    flush()
    return out


def close_region(trace: tracer.Trace) -> None:
    """Close the open thread region into its ``T.Parallel`` loop (the region frame must be innermost); a region
    with a ``T.sync_threads()`` in a loop or branch is split there (:func:`_split`). The per-thread buffers its
    loops write join ``trace.region_writes``, what later regions' reads are checked against.

    Raises:
        UnsupportedError: a per-thread value would cross a barrier inside a protocol kernel's roles.
    """
    region = trace.region
    assert region is not None and trace.frames[-1] is region.frame
    # a region inside a loop of the block runs once per iteration: its own writes reach its next run's reads
    repeated = any(f.kind not in tracer.RUN_ONCE_FRAMES for f in trace.frames[:-1])
    trace.region = None
    body = trace.close(region.frame)
    trace.var_ranges.pop(region.var.name, None)
    if _has_mark(body):
        out = _split(body, region, trace, _written_locals(body))
    elif not body:
        out = []  # a region with no statement (a tile op or a lifted branch right after the binding) runs nothing
    else:
        out = [For(region.sid, region.var, Const(0, "int32"), Const(trace.threads, "int32"), "parallel", body, 0,
                   region.loc)]
    regions = _regions(out, region.var.name)
    from egtile.language.roles import is_protocol_kernel

    protocol = trace.role_tid is not None or is_protocol_kernel(trace)
    for name, carry in _values_across_sync(regions, trace.region_writes, repeated, within=not protocol).items():
        if protocol:
            raise UnsupportedError(
                carry.message() + ": in a kernel with its own barrier protocol (T.alloc_barrier) egtile does not keep "
                "a per-thread copy of a variable across a barrier. Pass the value through shared memory indexed by "
                f"the thread (S[tx] = {carry.user_name} before the barrier, {carry.user_name} = S[tx] after it)",
                carry.read_loc)
        trace.carried.setdefault(name, carry)
    region.parent.stmts.extend(out)
    for r in regions:
        for s in r.loop.body:
            for name in _local_names(writes(s)):
                trace.region_writes.setdefault(name, []).extend(_leaf_lines(s, name, writes))



@dataclass(frozen=True)
class _Region:
    """One thread-region loop of a closed region, in program order, with the serial loops around it."""

    loop: For
    order: int
    loops: frozenset[int]  # ids of the enclosing serial loops (split at a barrier inside them)


def _regions(stmts: list[Stmt] | tuple[Stmt, ...], var: str, loops: frozenset[int] = frozenset(),
             acc: list[_Region] | None = None) -> list[_Region]:
    acc = [] if acc is None else acc
    for s in stmts:
        if isinstance(s, For) and s.kind == "parallel" and s.var.name == var:
            acc.append(_Region(s, len(acc), loops))
        elif isinstance(s, For):
            _regions(s.body, var, loops | {id(s)}, acc)
        elif isinstance(s, If):
            _regions(s.then_body, var, loops, acc)
            _regions(s.else_body, var, loops, acc)
    return acc


def _local_names(accesses) -> list[str]:
    return sorted({a.buffer for a in accesses if a.scope == "local"})


def _children(s: Stmt) -> tuple[Stmt, ...]:
    return s.body if isinstance(s, For) else s.then_body + s.else_body if isinstance(s, If) else ()


def _leaf_lines(s: Stmt, name: str, which) -> list[int]:
    """The lines of the leaf statements in ``s`` whose accesses (``which``) touch ``name``."""
    kids = [c for c in _children(s) if any(a.buffer == name for a in which(c))]
    if not kids:
        return [s.loc.line] if s.loc is not None else []
    return [line for c in kids for line in _leaf_lines(c, name, which)]


def _first_access(s: Stmt, name: str, which) -> Any:
    """The line of the first leaf statement in ``s`` whose own accesses (``which``: reads or writes) touch
    ``name``."""
    for child in _children(s):
        if any(a.buffer == name for a in which(child)):
            return _first_access(child, name, which)
    return s.loc


def _lines(lines: list[int]) -> str:
    u = sorted(set(lines))
    return f"line {u[0]}" if len(u) == 1 else "lines " + ", ".join(map(str, u)) if u else "an earlier region"


@dataclass(frozen=True)
class Carried:
    """A per-thread variable whose value crosses a ``T.sync_threads()``: the first such read and the lines that write
    the variable in another region. :mod:`egtile.language.carried` keeps one copy of it per thread."""

    name: str
    read_loc: Any
    writer_lines: tuple[int, ...]

    @property
    def user_name(self) -> str:
        return self.name.split("@")[0]  # a let-binding's buffer is named `v@k`: the user wrote `v`

    def message(self) -> str:
        return (f"per-thread variable {self.user_name!r} is read here where one value shared by the threads would hold "
                f"another thread's write ({_lines(list(self.writer_lines))}: before a T.sync_threads(), in an earlier "
                "pass, or later in the same stretch of per-thread code)")


def _values_across_sync(regions: list[_Region], earlier: dict[str, list[int]], repeated: bool = False,
                        within: bool = True) -> dict[str, Carried]:
    """Each thread region is one ``T.Parallel`` loop over the threads, and in the tile model a ``local`` buffer in it
    is one value shared by the iterations, where per-thread code means one copy per thread. They differ when a read
    can see another thread's write. The variables read so, each with its first such read (a read that a store of
    the whole variable before it in its region covers sees this thread's value):

    * written in another region that may run before: an earlier one (``earlier``: every region closed before in the
      kernel, ``trace.region_writes``), any region of a serial loop holding both (its previous
      iteration), or this region itself when a loop around it runs it again (``repeated``);
    * (``within``) written in this same region, and read before any write of it there (``acc += A[tx]`` after a
      block-level ``acc = 1.0``: every thread starts from its copy of 1.0, where one shared value would sum every
      thread's element).

    :mod:`egtile.language.carried` gives each of them a copy per thread."""
    out: dict[str, Carried] = {}
    for r in regions:
        writers: dict[str, list[int]] = {n: list(v) for n, v in earlier.items()}
        own: dict[str, list[int]] = {}
        for q in regions:
            if q.order < r.order or (q.loops & r.loops) or (repeated and q is r):
                target = writers
            elif q is r and within:
                target = own
            else:
                continue
            for s in q.loop.body:
                for name in _local_names(writes(s)):
                    target.setdefault(name, []).extend(_leaf_lines(s, name, writes))
        if not writers and not own:
            continue
        covered: set[str] = set()
        for s in r.loop.body:
            for name in _local_names(reads(s)):
                if name not in out and name in writers and name not in covered:
                    out[name] = Carried(name, _first_access(s, name, reads), tuple(sorted(set(writers[name]))))
            if isinstance(s, Store) and s.buffer.scope == "local" and s.buffer.numel == 1:
                covered.add(s.buffer.name)
        if own:
            for name, read in _read_before_written(r.loop.body, set()).items():
                if name in own and name not in out:
                    out[name] = Carried(name, read, tuple(sorted(set(own[name]))))
    return out


def _read_before_written(stmts: tuple[Stmt, ...], written: set[str]) -> dict[str, Any]:
    """The locals that ``stmts``, in program order (into loops and branches), read before any write of them, each
    with its first such read's line; ``written`` grows with what they write (a read and a write of one statement,
    ``acc = acc + x``, count as the read first)."""
    out: dict[str, Any] = {}
    for s in stmts:
        if isinstance(s, For):
            for name, loc in _read_before_written(s.body, written).items():
                out.setdefault(name, loc)
        elif isinstance(s, If):
            before = set(written)
            for side in (s.then_body, s.else_body):
                mine = set(before)
                for name, loc in _read_before_written(side, mine).items():
                    out.setdefault(name, loc)
                written |= mine
        else:
            # a pointer handed to an extern reads what it declares readable (T.rng_init's state is write-only, a
            # draw's is read and written: egtile.ir.kernel.AddressOf)
            for name in _local_names(reads(s)):
                if name not in written:
                    out.setdefault(name, s.loc)
            written |= set(_local_names(writes(s)))
    return out


def split_at_tile_op(trace: tracer.Trace, stmt: Stmt) -> bool:
    """A tile op (``T.copy``, ``T.fill``, ``T.gemm``, ``T.reduce_*`` of shared, fragment or global tiles; those into
    per-thread buffers are already per-thread stores), or a ``T.Parallel`` that names neither the thread index nor a
    per-thread buffer, in per-thread code is block-level work that every thread
    takes part in, as in TileLang: at the region's own level it ends the region and the next statement opens
    another over the same thread index, as ``T.sync_threads()`` does (egtile derives the barriers around it).
    Returns whether it emitted ``stmt`` (between the two regions).

    Inside a serial loop or a branch of the per-thread code it stands where it is, and the loop or branch is split
    around it when the region closes, as around a ``T.sync_threads()`` there (:func:`_split`).

    Raises:
        UnsupportedError: its tile is indexed by the thread (one tile per thread).
    """
    from egtile.ir.kernel import Copy, Fill, Gemm, Reduce
    from egtile.language.roles import _mentions

    region = trace.region
    if region is None or region.frame not in trace.frames:
        return False
    if isinstance(stmt, For) and stmt.kind == "parallel":
        # TileLang's T.Parallel is block-level, split over the threads, wherever it stands; one that names the
        # thread index or a per-thread buffer is that thread's own loop (it stays in the region)
        if _mentions(stmt, region.var.name) or any(a.scope == "local" for a in reads(stmt) | writes(stmt)):
            return False
    elif not isinstance(stmt, (Copy, Fill, Gemm, Reduce)):
        return False
    loc = getattr(stmt, "loc", None) or tracer.user_loc()
    if _mentions(stmt, region.var.name):
        raise UnsupportedError(f"a tile op whose tile is indexed by the thread index `{region.var.name}`: a tile op is "
                               "block-level work shared by every thread, not one tile per thread; write the per-thread "
                               "part as element statements (a T.serial loop over the elements), or index the tile by "
                               "block-level values", loc)
    if trace.frames[-1] is not region.frame:
        # inside a loop or branch of the region: split there when it closes, as at a T.sync_threads() (the loop or
        # branch becomes block-level, which needs bounds or a condition every thread agrees on: _split checks)
        trace.frames[-1].stmts.append(SyncMark(loc, tile_op=stmt))
        return True
    var = region.var
    close_region(trace)
    trace.frames[-1].stmts.append(stmt)
    _open(trace, var, loc)
    return True


def get_thread_binding(dim: int = 0) -> Value:
    """``tx = T.get_thread_binding(dim)``: this thread's index in dimension ``dim`` of ``T.Kernel(threads=)``
    (module docstring: the rest of the statement list becomes per-thread code).

    Raises:
        DSLError: outside ``T.Kernel``, or ``dim`` outside the kernel's thread dimensions.
    """
    loc = tracer.user_loc()
    trace = tracer.current("T.get_thread_binding")
    trace.require_kernel("T.get_thread_binding")
    dims = trace.thread_dims
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < 3:
        raise DSLError(f"T.get_thread_binding: dim must be 0, 1 or 2, got {dim!r}", loc)
    region = trace.region
    if trace.role_tid is not None and (region is None or region.frame not in trace.frames):
        t = Value(Var(trace.role_tid))  # the region was suspended for warpgroup roles (egtile.language.roles)
    else:
        if region is None or region.frame not in trace.frames:
            region = _open(trace, None, loc)
        t = Value(region.var)
    if dim >= len(dims):
        return Value(Const(0, "int32"))
    stride = 1
    for d in dims[:dim]:
        stride *= d
    v = t if stride == 1 else t // stride
    return v if dim == len(dims) - 1 else v % dims[dim]


def get_thread_bindings() -> tuple[Value, ...]:
    """``T.get_thread_bindings()``: threadIdx.x, .y and .z, as TileLang's (always three; a dimension ``threads=``
    does not name is 0)."""
    tracer.current("T.get_thread_bindings")
    return tuple(get_thread_binding(d) for d in range(3))


def get_thread_extent(dim: int = 0) -> int:
    """``T.get_thread_extent(dim)``: the number of threads in dimension ``dim``."""
    trace = tracer.current("T.get_thread_extent")
    return trace.thread_dims[dim] if dim < len(trace.thread_dims) else 1


def get_block_binding(dim: int = 0) -> Value:
    """``T.get_block_binding(dim)``: the block index in grid dimension ``dim`` (what ``T.Kernel`` yields)."""
    loc = tracer.user_loc()
    trace = tracer.current("T.get_block_binding")
    trace.require_kernel("T.get_block_binding")
    if not 0 <= dim < len(trace.block_vars):
        if 0 <= dim < 3:
            return Value(Const(0, "int32"))
        raise DSLError(f"T.get_block_binding: dim must be 0, 1 or 2, got {dim!r}", loc)
    return Value(trace.block_vars[dim])


def get_block_extent(dim: int = 0) -> int:
    """``T.get_block_extent(dim)``: the grid's extent in dimension ``dim``."""
    trace = tracer.current("T.get_block_extent")
    grid = trace.grid or (1,)
    return grid[dim] if dim < len(grid) else 1


def sync_threads(barrier_id: Any = None, arrive_count: Any = None) -> None:
    """``T.sync_threads()``: inside a thread region, end it and open another over the same thread index;
    elsewhere nothing to do (module docstring)."""
    loc = tracer.user_loc()
    trace = tracer.current("T.sync_threads")
    lifted = trace.lifted_branch
    if lifted is not None:
        raise UnsupportedError(
            f"T.sync_threads() inside the `if` on the thread index at line {lifted.line}, which only some threads "
            "take: a block barrier there is reached by part of the block (undefined in CUDA); egtile runs that "
            "branch's tile code on the whole block and places the barriers it needs itself, so leave this one out "
            "or move it out of the branch", loc)
    region = trace.region
    if region is None or region.frame not in trace.frames:
        return
    if trace.frames[-1] is not region.frame:  # in a loop or branch of the region: split when it closes
        trace.frames[-1].stmts.append(SyncMark(loc, (barrier_id, arrive_count)))
        return
    var = region.var
    close_region(trace)
    _open(trace, var, loc)


class ThreadBinding:
    """What ``T.thread_binding(begin, end, thread=...)`` returns: iterated (``for tx in ...``) it is a
    ``T.Parallel`` loop over those threads; used as a value (``tx = T.thread_binding(0, 128, "threadIdx.x")``,
    TVMScript's launch-thread form) it is this thread's index, as :func:`get_thread_binding` (the thread
    region opens at its first use)."""

    def __init__(self, end: Any, dim: int, loc: Any) -> None:
        self.end, self.dim, self.loc = end, dim, loc

    def __iter__(self) -> Any:
        from egtile.language.loop import Parallel

        return iter(Parallel(self.end))

    def _egtile_value(self) -> Value:
        trace = tracer.current("T.thread_binding")
        dims = trace.thread_dims
        extent = dims[self.dim] if self.dim < len(dims) else 1
        if self.end != extent:
            raise UnsupportedError(f"T.thread_binding(0, {self.end!r}) used as a value in a kernel with threads="
                                   f"{dims}: as a value it names a whole thread dimension (extent {extent}); iterate "
                                   "it in a for loop for fewer threads", tracer.user_loc() or self.loc)
        return get_thread_binding(self.dim)


def _forward(op: str):
    def method(self: ThreadBinding, *args: Any) -> Any:
        return getattr(self._egtile_value(), op)(*args)

    method.__name__ = op
    return method


for _op in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__", "__rfloordiv__",
            "__mod__", "__rmod__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__neg__",
            "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__lshift__", "__rshift__"):
    setattr(ThreadBinding, _op, _forward(_op))
ThreadBinding.__hash__ = object.__hash__  # type: ignore[method-assign]


def thread_binding(begin: Any, end: Any = None, thread: str = "threadIdx.x", annotations: Any = None) -> ThreadBinding:
    """``T.thread_binding(begin, end, thread="threadIdx.x")``: a loop over those threads (a ``T.Parallel``
    loop) or, used as a value, the thread index (:class:`ThreadBinding`).

    Raises:
        UnsupportedError: a range not starting at 0, or a thread tag other than threadIdx.x/y/z.
    """
    loc = tracer.user_loc()
    if end is None:
        begin, end = 0, begin
    if not (isinstance(begin, int) and begin == 0):
        raise UnsupportedError(f"T.thread_binding({begin!r}, {end!r}): only ranges starting at 0", loc)
    dims = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}
    if thread not in dims:
        raise UnsupportedError(f"T.thread_binding(thread={thread!r}): only threadIdx.x, threadIdx.y, threadIdx.z "
                               "(use the block indices T.Kernel yields for blockIdx)", loc)
    return ThreadBinding(end, dims[thread], loc)


def vectorized(start: Any, stop: Any = None, step: Any = None, annotations: Any = None) -> Any:
    """``for k in T.vectorized(n)``: a loop one thread runs (egtile chooses vector widths itself)."""
    from egtile.language.loop import unroll

    return unroll(start, stop, step)


def get_thread_extents() -> tuple[int, ...]:
    """``T.get_thread_extents()``: the extents of threadIdx.x, .y and .z, as TileLang's (always three; 1 where
    ``threads=`` names no such dimension)."""
    dims = tuple(tracer.current("T.get_thread_extents").thread_dims)
    return dims + (1,) * (3 - len(dims))


def get_block_bindings() -> tuple[Value, ...]:
    """``T.get_block_bindings()``: the block index in each grid dimension."""
    trace = tracer.current("T.get_block_bindings")
    trace.require_kernel("T.get_block_bindings")
    return tuple(Value(v) for v in trace.block_vars)


def get_block_extents() -> tuple[int, ...]:
    """``T.get_block_extents()``: the grid's extent in each dimension."""
    return tuple(tracer.current("T.get_block_extents").grid or (1,))
