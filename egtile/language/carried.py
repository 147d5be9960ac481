"""Per-thread variables whose values cross a ``T.sync_threads()``: one copy per thread, as a block array.

In CUDA (and TileLang) a ``T.alloc_var`` / ``T.alloc_local`` variable of per-thread code is a local variable of
the thread: it keeps its value across ``__syncthreads()``, so the classic SIMT loop ``acc += A_s[k] * B[..]`` with
a barrier before and after each tile's load just works. egtile's per-thread code is a ``T.Parallel`` loop over the
threads per stretch between barriers (:mod:`egtile.language.threads`), and in the tile model a ``local`` buffer
inside such a loop is one value per *iteration*: it does not outlive the loop. So a variable read in one thread
region after another region wrote it (:func:`egtile.language.threads._values_across_sync`) is rewritten into what
it means, a block array ``x[threads, *shape]`` whose row ``t`` is thread ``t``'s copy: every access ``x[i]`` in a
thread region over index ``t`` becomes ``x[t, i]``, and a block-level store to it (which sets every thread's copy,
:mod:`egtile.language.per_thread`) becomes a ``T.Parallel`` over the threads storing each row. That is an ordinary
tile program, so every schedule the e-graph finds for it, the verifier and the simulator keep their meaning; the
array is a ``fragment`` (egtile places it in shared memory: ``threads x numel x bytes``, which ``explain()`` says).

Refused, at the line that needs it: any other block-level access of such a variable (a loop bound or a branch
condition reading it outside per-thread code; the value there is every thread's at once).
"""

from __future__ import annotations

from dataclasses import replace

from egtile.analysis.access import reads, writes
from egtile.errors import UnsupportedError
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import Buffer, Const, For, If, Stmt, Store, Var
from egtile.lower.irmap import restage


def promote(trace, body: tuple[Stmt, ...], allocs: list[Buffer]) -> tuple[tuple[Stmt, ...], list[Buffer]]:
    """``body`` and ``allocs`` with each per-thread variable in ``trace.carried`` kept per thread (module
    docstring); unchanged when there is none.

    Raises:
        UnsupportedError: a block-level access of such a variable other than a store.
    """
    # a kept let-binding read across a barrier is a local buffer renamed by egtile.language.letbind.finish
    carried = {trace.let_names.get(n, n): c for n, c in trace.carried.items()}
    if not carried:
        return body, allocs
    old = {b.name: b for b in allocs if b.name in carried and b.scope == "local"}
    if not old:
        return body, allocs
    new = {n: Buffer(n, (trace.threads, *b.shape), b.dtype, "fragment", b.layout, b.loc) for n, b in old.items()}

    def rows(var: Var) -> dict[str, tuple[Buffer, Var]]:
        return {n: (b, var) for n, b in new.items()}

    def block_level(s: Stmt) -> Stmt:
        if isinstance(s, For) and s.kind == "parallel" and s.var.name in trace.thread_vars:
            return restage(s, rows(s.var))
        if isinstance(s, For):
            _refuse_in(s, (s.start, s.stop), old, carried, "the bounds of the loop")
            return replace(s, body=tuple(block_level(c) for c in s.body))
        if isinstance(s, If):
            _refuse_in(s, (s.cond,), old, carried, "the condition of the `if`")
            return replace(s, then_body=tuple(block_level(c) for c in s.then_body),
                           else_body=tuple(block_level(c) for c in s.else_body))
        touched = {a.buffer for a in reads(s) | writes(s)} & old.keys()
        if not touched:
            return s
        if isinstance(s, Store) and s.buffer.name in old:
            # a block-level store to a per-thread variable sets every thread's copy (from its own copies)
            var = Var(trace.fresh_var_name("tid", "tid"))
            trace.thread_vars.add(var.name)
            loop = For(trace.sid(), var, Const(0, "int32"), Const(trace.threads, "int32"), "parallel", (s,), 0, s.loc)
            return restage(loop, rows(var))
        name = sorted(touched)[0]
        raise UnsupportedError(
            f"{carried[name].message()}, so egtile keeps a copy of it per thread; this block-level statement reads it "
            "outside per-thread code, where there is no one thread's copy to read: read it inside the code after "
            "T.get_thread_binding()", s.loc)

    out = tuple(block_level(s) for s in body)
    _check_rewritten(out, old)
    for n, b in new.items():
        size = b.numel * lookup_dtype(b.dtype).bits // 8
        c = carried[n]
        read = c.read_loc.line if c.read_loc is not None else "?"
        trace.notes.append(f"per-thread variable {c.user_name!r} is kept per thread (written at "
                           f"{', '.join(map(str, c.writer_lines)) or '?'}, read at {read}, where one shared value could "
                           f"hold another thread's write): each thread's copy is row t of the block array "
                           f"{n}[{', '.join(map(str, b.shape))}] ({size} bytes)")
    return out, [new.get(b.name, b) for b in allocs]


def _refuse_in(s: Stmt, exprs, old: dict[str, Buffer], carried, what: str) -> None:
    from egtile.analysis.access import walk_expr
    from egtile.ir.kernel import Load

    for e in exprs:
        for x in walk_expr(e):
            if isinstance(x, Load) and x.buffer.name in old:
                raise UnsupportedError(
                    f"{carried[x.buffer.name].message()}, so egtile keeps a copy of it per thread; {what} reads it "
                    "outside per-thread code, where every thread's copy would have to agree: compute it from "
                    "block indices, constants or shared memory", s.loc)


def _check_rewritten(body: tuple[Stmt, ...], old: dict[str, Buffer]) -> None:
    """Every access of a promoted variable now names its block array, except a ``T.reduce_*`` operand, which
    ``restage`` leaves as it is: refused at its line."""
    from egtile.ir.kernel import Reduce, walk

    for s in walk(body):
        if isinstance(s, Reduce) and (s.src.name in old or s.dst.name in old):
            name = s.src.name if s.src.name in old else s.dst.name
            raise UnsupportedError(f"T.reduce_{s.kind} of per-thread variable {name!r}, whose value crosses a "
                                   "T.sync_threads() (egtile keeps a copy of it per thread): reduce a copy made "
                                   "after the barrier", s.loc)


def refuse_carried_across_iterations(trace, body: tuple[Stmt, ...]) -> None:
    """A per-thread (``local``) variable that the body of a ``T.Parallel`` (not a thread region: its iterations are
    the block's work, spread over the threads) reads before writing and also writes carries a value from one
    iteration to the next: ``L[0] = 1.0`` then ``for i in T.Parallel(n): L[0] = L[0] + X[i]``. The iterations run
    in any order on any threads, each thread with its own copy of ``L``, so what an iteration reads depends on the
    schedule (the interpreter ran one copy through every iteration, the simulator one per thread, silently apart).
    A block of one thread runs them in order, so there it is well defined.

    Raises:
        KernelRaceError: at the read, naming the loop.
    """
    from egtile.errors import KernelRaceError
    from egtile.ir.kernel import walk
    from egtile.language.threads import _local_names, _read_before_written

    if trace.threads == 1:
        return  # one thread runs every iteration, in order (TileLang's rand_uint draws a stream so: egtile.rng)
    for loop in walk(body):
        if not (isinstance(loop, For) and loop.kind == "parallel") or loop.var.name in trace.thread_vars:
            continue
        written = {n for s in walk(loop.body) for n in _local_names(writes(s))}
        for name, loc in _read_before_written(loop.body, set()).items():
            if name in written and _one_element_for_all(loop, name):
                user = trace.let_names.get(name, name).split("@")[0]
                line = loop.loc.line if loop.loc is not None else "?"
                raise KernelRaceError(
                    f"per-thread variable {user!r} is read before it is written in the body of `for {loop.var.name} "
                    f"in T.Parallel(...)` (line {line}) and written there too, so each iteration would start from "
                    "another iteration's value; T.Parallel runs its iterations in any order on any threads, each "
                    f"thread with its own copy of {user!r}, so that value depends on the schedule. This is a race in "
                    f"the kernel, not a schedule egtile chose: set {user!r} in the body before reading it, or "
                    "accumulate with T.reduce_* / T.atomic_add, or write per-thread code after T.get_thread_binding()",
                    loc or loop.loc)


def _one_element_for_all(loop: For, name: str) -> bool:
    """Whether some access of local ``name`` in ``loop``'s body names an element whatever the iteration (its indices
    do not mention the loop's variable): ``L[0]``. An access at ``acc[i]`` gives each iteration its own element, so
    no value passes between iterations through it (a read of it before any write is the element's own, unset value,
    which the executors report)."""
    from egtile.analysis.access import mentions, own_reads, own_writes, walk_expr
    from egtile.ir.kernel import AddressOf, Extern, walk

    def index_tuples(st):
        # an element access names its indices (its region's offsets); a pointer only the element it is taken at
        for a in own_reads(st) | own_writes(st):
            if a.buffer == name and a.region is not None:
                yield a.region.offsets
        if isinstance(st, Extern):
            for x in (x for arg in st.args for x in walk_expr(arg)):
                if isinstance(x, AddressOf) and x.load.buffer.name == name:
                    yield x.load.indices

    return any(not mentions(idx, loop.var) for st in walk(loop.body) for idx in index_tuples(st))

