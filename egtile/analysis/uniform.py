"""Which expressions every thread of a block evaluates to the same value (block-uniform).

Definition. Let ``K`` be a kernel. An expression ``e`` evaluated at block level (outside every
``T.Parallel``) is *block-uniform* when all threads that evaluate it at the same point of the sequential
program get the same value. It holds when

1. every variable of ``e`` is a block index, a serial/pipelined/unrolled loop variable of a block-level
   loop or a constant (``T.Parallel`` variables differ per thread);
2. every ``Load`` in ``e`` has block-uniform indices and reads a buffer that is
   * a global buffer ``K`` never writes (a read-only input: no other thread or block can change it while
     the kernel runs; a global buffer the kernel writes, another block may write between two threads'
     reads, and CTA barriers do not order other blocks), or
   * a shared buffer (one copy per block; whether the read is ordered after the write it must see is
     property L1 of the verifier, so when the schedule is legal all threads read the same element after
     the same write), or a fragment the schedule stores in shared memory (``shared_fragments``: every
     fragment it does not place in registers, :attr:`egtile.ir.Scheduled.fragments`; then it is one copy
     per block like any shared buffer, e.g. TileLang's block-sparse attention ``block_mask``, a fragment
     filled by ``T.copy(BlockSparseMask[bz, by, bx, :], block_mask)`` and read as ``T.If(block_mask[k])``;
     memory-model facts: the ``.shared`` state space has one instance per CTA, shared by all its threads,
     PTX ISA 5.1.3, and a read ordered after a write by ``bar.sync``, which orders the memory accesses of
     the threads that take part, PTX ISA 9.7.13.4 and 8 "Memory Consistency Model", observes that write;
     a register fragment is not uniform: each thread holds only its own slots), or
   * a *uniform local* buffer: every store to it is at block level (replicated on every thread, which the
     partition rules allow only for thread-local effects) with block-uniform indices and value; so each
     thread's private copy holds the same values (by induction over the sequential program: every thread
     runs the same stores on the same inputs);
3. ``e`` contains no call of an extern (it may read anything) and is not the result of an atomic.

Uniform locals are the greatest fixed point of condition 2's third case: start from every local buffer and
drop those with a store that is not block-uniform under the current set until nothing changes (a buffer
whose stores only read uniform values stays uniform, also when it reads itself).

Why it matters: ``bar.sync`` must be reached by every thread it counts (PTX ISA 9.7.13.4 "bar"), so a CTA
barrier may sit inside a block-level ``T.If`` only when its condition is block-uniform (TileLang's
block-sparse GEMM ``T.If(Mask[by, k])`` pattern). The verifier applies the same definition to the
scheduled kernel (:mod:`egtile.verifier.uniform`), independently; the lowering seals a side on data that
needs a barrier (:func:`egtile.lower.sync.place_syncs`) so that the verifier can check it as a unit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from egtile.analysis.access import free_vars, walk_expr, writes
from egtile.ir import AtomicAdd, Expr, Extern, For, If, Kernel, Load, Stmt, Store
from egtile.verdict import Verdict


@dataclass(frozen=True)
class Uniformity:
    """What block-uniformity rests on in one kernel: the variables and buffers a uniform expression may use."""

    uniform_vars: frozenset[str]
    read_only_globals: frozenset[str]
    uniform_locals: frozenset[str]
    shared: frozenset[str]

    def of(self, e: Expr, thread_vars: Iterable[str] = ()) -> Verdict:
        """Whether ``e`` is block-uniform, with the reason when it is not. ``thread_vars``: variables of
        enclosing ``T.Parallel`` loops (thread-varying)."""
        tv = frozenset(thread_vars)
        reasons: list[str] = []
        for v in sorted(free_vars(e)):
            if v in tv or v not in self.uniform_vars:
                reasons.append(f"it uses {v}, which differs between threads")
        for x in walk_expr(e):
            if not isinstance(x, Load):
                continue
            b = x.buffer
            if b.scope == "global" and b.name not in self.read_only_globals:
                reasons.append(f"it reads global buffer {b.name}, which the kernel writes (another block may change "
                               "it between two threads' reads)")
            elif b.scope == "local" and b.name not in self.uniform_locals:
                reasons.append(f"it reads local buffer {b.name}, whose per-thread copies may differ")
            elif b.scope == "fragment" and b.name in self.shared:
                pass  # stored in shared memory by this schedule
            elif b.scope not in ("global", "shared", "local"):
                reasons.append(f"it reads {b.scope} buffer {b.name}, which threads hold different parts of")
        return Verdict.of(reasons)


def _block_level(stmts: tuple[Stmt, ...], vars_: set[str]):
    """``(stmt, block_level)`` for every statement, with the block-level loop variables collected."""
    for s in stmts:
        match s:
            case For(kind="parallel"):
                yield s, True
                for inner in _thread_level(s.body):
                    yield inner, False
            case For():
                vars_.add(s.var.name)
                yield s, True
                yield from _block_level(s.body, vars_)
            case If():
                yield s, True
                yield from _block_level(s.then_body + s.else_body, vars_)
            case _:
                yield s, True


def _thread_level(stmts: tuple[Stmt, ...]):
    for s in stmts:
        yield s
        match s:
            case For():
                yield from _thread_level(s.body)
            case If():
                yield from _thread_level(s.then_body + s.else_body)


def uniformity(kernel: Kernel, shared_fragments: Iterable[str] = ()) -> Uniformity:
    """The kernel's :class:`Uniformity` (see the module docstring); ``shared_fragments``: the fragments a
    schedule stores in shared memory (none when the placement is not known: a fragment is then not uniform)."""
    loop_vars: set[str] = set()
    placed = list(_block_level(kernel.body, loop_vars))
    written = {a.buffer for s, _ in placed for a in writes(s)}
    # An access of an unknown pointer target may write any buffer.
    any_write = "*" in written
    read_only = frozenset(b.name for b in kernel.params if not any_write and b.name not in written)
    uvars = frozenset(v.name for v in kernel.block_vars) | frozenset(loop_vars)
    frags = frozenset(shared_fragments)
    shared = frozenset(b.name for b in kernel.allocs if b.scope == "shared" or (b.scope == "fragment"
                                                                                and b.name in frags))
    locals_ = {b.name for b in kernel.allocs if b.scope == "local"}
    leaves = [(s, top) for s, top in placed if not isinstance(s, (For, If))]
    while True:
        u = Uniformity(uvars, read_only, frozenset(locals_), shared)
        drop = set()
        for s, top in leaves:
            for a in writes(s):
                if a.buffer not in locals_:
                    continue
                ok = top and isinstance(s, Store) and all(u.of(i).ok for i in s.indices) and u.of(s.value).ok
                if not ok or isinstance(s, (AtomicAdd, Extern)):
                    drop.add(a.buffer)
        if not drop:
            return u
        locals_ -= drop


def block_uniform(kernel: Kernel, e: Expr, shared_fragments: Iterable[str] = ()) -> Verdict:
    """Whether block-level expression ``e`` of ``kernel`` is block-uniform."""
    return uniformity(kernel, shared_fragments).of(e)


__all__ = ["Uniformity", "block_uniform", "uniformity"]
