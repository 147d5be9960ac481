"""``T.sync_grid()``: a barrier across every block of the grid, as a kernel boundary.

TileLang lowers ``T.sync_grid()`` to a cooperative-groups grid barrier (``cg::this_grid().sync()``): every block
of the grid reaches it before any goes on, so what one block wrote to global memory before it, every block reads
after it (a persistent split-KV decode writes its partial results, then combines them). egtile has no grid
barrier inside a kernel. It gives the same order by ending the kernel there: the statements after a top-level
``T.sync_grid()`` are a second kernel with the same grid, threads and parameters, launched after the first has
finished (:mod:`egtile.kernelseq`), which orders global memory at least as strongly as the barrier and needs
no co-resident blocks (a cooperative launch requires every block to fit the GPU at once; two launches do not).

What a kernel boundary does not keep is the block's own state: registers, local variables and shared memory
start over in the second kernel. A program whose code after the barrier reads such a buffer that the code
before it wrote would read nothing there, so it is refused at the trace, naming both lines
(:func:`check_state_not_carried`); a global tensor carries the value (``T.alloc_global`` scratch or a parameter).
A barrier inside a loop or branch (a grid barrier per iteration) would need a kernel per iteration and is
refused, as is one in per-thread code or in a kernel with its own mbarrier protocol.
"""

from __future__ import annotations

from egtile.errors import SourceLoc, UnsupportedError
from egtile.ir.kernel import Kernel, Stmt, walk
from egtile.language import tracer


def sync_grid() -> None:
    """``T.sync_grid()``: every block of the grid finishes what comes before before any block starts what comes
    after (module docstring: the kernel is split here).

    Raises:
        UnsupportedError: inside a loop or branch, in per-thread code, or in a kernel with ``T.alloc_barrier``.
        DSLError: outside ``with T.Kernel(...)``.
    """
    from egtile.language import roles

    loc = tracer.user_loc()
    trace = tracer.current("T.sync_grid")
    trace.require_kernel("T.sync_grid")
    if trace.region is not None or trace.role_tid is not None:
        raise UnsupportedError(
            "T.sync_grid() in per-thread code (after T.get_thread_binding()): the kernel split at the barrier "
            "would end the thread region's values; call T.sync_grid() before taking the thread index", loc)
    if len(trace.frames) != 1:
        raise UnsupportedError(
            f"T.sync_grid() inside {trace.frames[-1].kind}: egtile orders the grid by ending the kernel at the "
            "barrier and launching the rest as a second kernel, which it can do only at the T.Kernel body's top "
            "level; move the barrier out of the loop or branch (or split the loop into two kernels)", loc)
    if roles.is_protocol_kernel(trace):
        raise UnsupportedError(
            "T.sync_grid() in a kernel with its own mbarriers (T.alloc_barrier): the kernel split at the barrier "
            "would restart the barriers' phases; split the kernel into two `with T.Kernel` blocks", loc)
    frame = trace.frames[0]
    before = tuple(frame.stmts)
    frame.stmts.clear()
    grid, block_vars, threads, dims = trace.grid, trace.block_vars, trace.threads, trace.thread_dims
    allocs, hints, overlays = list(trace.allocs), list(trace.hints), list(trace.overlays)
    trace.body = before
    trace.notes.append(f"T.sync_grid() at line {loc.line if loc else '?'} ends this kernel: the code after it is the "
                       "next kernel, launched after this one has finished on every block")
    trace.next_kernel()
    # The rest of the T.Kernel block keeps its frame, block indices and buffers: the same block, launched again.
    trace.grid, trace.block_vars, trace.threads, trace.thread_dims = grid, block_vars, threads, dims
    trace.allocs, trace.hints, trace.overlays = allocs, hints, overlays
    trace.after_grid_sync = loc
    trace.notes.append(f"this kernel is the code after T.sync_grid() at line {loc.line if loc else '?'}: the same "
                       "grid and threads, launched after the previous kernel; registers, locals and shared memory "
                       "start over")


def _accessed(body: tuple[Stmt, ...]) -> set[str]:
    from egtile.analysis import own_reads, own_writes

    out: set[str] = set()
    for st in walk(body):
        out |= {a.buffer for a in (*own_reads(st), *own_writes(st))}
    return out


def prune(kernel: Kernel) -> Kernel:
    """``kernel`` without the allocations its body never names: a block split at ``T.sync_grid()`` declares every
    buffer of the ``T.Kernel`` block in both kernels, and only those a kernel uses take its shared memory."""
    import dataclasses

    used = _accessed(kernel.body)
    allocs = tuple(b for b in kernel.allocs if b.name in used)
    kept = {b.name for b in allocs}
    overlays = tuple(o for o in kernel.overlays if o.view in kept and o.base in kept)
    return dataclasses.replace(kernel, allocs=allocs, overlays=overlays)


def _first(body: tuple[Stmt, ...], name: str, which) -> Stmt | None:
    for st in walk(body):
        if any(a.buffer == name for a in which(st)):
            return st
    return None


def _whole_write(st: Stmt, buf) -> bool:
    """Does top-level statement ``st`` write every element of ``buf``: a whole copy, fill, gemm or reduction into
    it, a ``T.Parallel`` whose stores name every element (:func:`egtile.analysis.overlay.whole_write`), or a store
    into a one-element buffer (``acc = 0.0`` on a ``T.alloc_var``)?"""
    from egtile.analysis.overlay import whole_write
    from egtile.ir.kernel import Store

    if isinstance(st, Store) and st.buffer.name == buf.name and buf.numel == 1:
        return True
    return whole_write(st, buf)


def check_state_not_carried(before: list[Kernel], after: Kernel, lets_before: list, loc: SourceLoc | None) -> None:
    """Refuse a buffer of the block (registers, locals, shared memory) that a kernel before a ``T.sync_grid()`` of the
    same ``T.Kernel`` block (``before``: all of them, since block state survives none of the splits) writes and the
    kernel after it reads without first writing all of it at its top level, and a let-binding made before the barrier
    (``v = A[i]``, the value read there: :mod:`egtile.language.letbind`) read after it.

    Raises:
        UnsupportedError: names the buffer or variable, the line that writes or binds it before the barrier and
            the line that reads it after.
    """
    from egtile.analysis import own_reads, own_writes

    for r in lets_before:
        reader = _first(after.body, r.buffer.name, own_reads)
        if reader is not None:
            line = r.loc.line if r.loc is not None else "?"
            raise UnsupportedError(
                f"{r.name!r} is bound before T.sync_grid() (line {line}, the value read there) and read after it: "
                "egtile runs the code after a grid barrier as a second launch of the kernel, where the block's "
                "variables start over. Read the value again after the barrier, or pass it through global memory",
                reader.loc or loc)
    local = {b.name: b for b in after.allocs if b.scope != "global"}
    writers: dict[str, Stmt] = {}
    for k in before:
        for st in walk(k.body):
            for a in own_writes(st):
                if a.buffer in local:
                    writers.setdefault(a.buffer, st)
    renewed: set[str] = set()
    for st in after.body:
        for name in sorted(set(writers) - renewed):
            reader = _first((st,), name, own_reads)
            if reader is None:
                continue
            writer = writers[name]
            wline = writer.loc.line if writer.loc is not None else "?"
            raise UnsupportedError(
                f"{name} ({local[name].scope}) is written before T.sync_grid() (line {wline}) and read after it "
                "without being written whole first: egtile runs the code after a grid barrier as a second launch of "
                "the kernel, where registers, local variables and shared memory start over. Pass the value through "
                "global memory (a T.alloc_global scratch tensor or a parameter), or write all of it again after the "
                "barrier before reading it", reader.loc or loc)
        renewed |= {name for name in writers if _whole_write(st, local[name])}
