"""Which shared buffers may share one allocation: TileLang's ``MergeSharedMemoryAllocations``, restricted to what a
renaming proves.

A block's shared buffers are laid out side by side (``egtile.verifier.resources``). TileLang lays a buffer in the
space of one that is dead by then; its flash-attention decodes depend on it (``O_shared``, written after the key
loop, in the space of ``Q_shared``, last read in it). egtile does the same by *renaming*: buffer ``B`` becomes
buffer ``A`` in the tile program, so every later stage (the e-graph's conditions, barrier placement, the verifier,
the simulator) sees one buffer with both lives and orders them as it orders any two accesses of one buffer: the
wgmma reads of ``Q_shared`` in the last iteration complete before a thread writes ``O`` into that space, because
that is a write after read of one buffer. What this module must prove is only that the renaming keeps the program's
meaning. ``B`` may take ``A``'s place when (each a named condition of :func:`candidates`):

* ``same-type``: both are ``shared`` buffers of one shape and dtype (a renaming, not a reinterpretation of bytes);
* ``lives-apart``: in the block's top-level statement order, every statement that touches ``A`` comes before the
  first statement that touches ``B`` (a loop or ``if`` touches what its body touches), so no value of ``A`` is read
  after ``B``'s first write and no value of ``B`` before it;
* ``first-write-whole``: the first statement touching ``B`` is a top-level ``T.copy`` or ``T.fill`` that writes all
  of ``B`` and reads nothing of it or ``A`` (a read of ``B`` before any write would see ``A``'s stale values
  instead of an uninitialized buffer, which the simulator reports);
* ``written-outside-pipelines``: neither is written inside a ``T.Pipelined`` loop (the software pipeline
  multi-versions what its loop writes; a renamed buffer would be staged for both lives); a ``T.Parallel`` or serial
  loop keeps one version;
* ``named-accesses``: no statement between them touches memory through a pointer of unknown target, neither is
  an operand of ``T.reduce_*`` (whose buffers the IR mapping leaves as they are), and neither is a view of another
  dtype or the base of one (``ir.Overlay``: the record names both buffers, which a renaming would have to follow).

The schedule driver applies a plan only to a kernel whose extracted schedule does not fit a block's shared memory
(``egtile.schedule.driver.optimize``), so kernels that fit keep their schedules, and says so in ``explain()``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from egtile.analysis.access import ANY_BUFFER, names, reads, writes
from egtile.ir import Buffer, Copy, Fill, For, Kernel, Reduce, Stmt, walk
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.lower.irmap import rename_buffers

RULE = "shared-reuse"


@dataclass(frozen=True)
class Reuse:
    """Buffer ``buffer`` is stored in ``space``'s allocation.

    Attributes:
        buffer: the buffer renamed away (its first write is statement ``first``).
        space: the buffer whose allocation it takes (its last top-level statement is ``last``).
        first: sid of ``buffer``'s first write.
        last: sid of the last top-level statement that touches ``space``.
        bytes: the shared memory saved.
    """

    buffer: str
    space: str
    first: int
    last: int
    bytes: int


def _touched(s: Stmt) -> frozenset[str]:
    return names(reads(s)) | names(writes(s))


def _written_in_pipelines(body: tuple[Stmt, ...]) -> frozenset[str]:
    out: set[str] = set()
    for s in walk(body):
        if isinstance(s, For) and s.kind == "pipelined":
            out |= names(writes(s))
    return frozenset(out)


def _reduce_operands(body: tuple[Stmt, ...]) -> frozenset[str]:
    return frozenset(n for s in walk(body) if isinstance(s, Reduce) for n in (s.src.name, s.dst.name))


def _first_write_whole(s: Stmt, b: Buffer) -> bool:
    # the space's earlier buffers are dead here by lives-apart: only a read of b itself can see a stale value
    return isinstance(s, (Copy, Fill)) and s.dst.buffer.name == b.name and s.dst.whole and b.name not in names(reads(s))


@dataclass(frozen=True)
class _Lives:
    """The facts both :func:`candidates` and :func:`why_not` read: each shared buffer's first and last top-level
    statement, and the buffers a condition excludes whatever their partner."""

    body: tuple[Stmt, ...]
    span: dict[str, tuple[int, int]]
    shared: tuple[Buffer, ...]
    excluded: dict[str, str]
    pointer: Stmt | None


def _lives(kernel: Kernel) -> _Lives:
    body = kernel.body
    touched = [_touched(s) for s in body]
    pointer = next((s for s, t in zip(body, touched) if ANY_BUFFER in t), None)
    span: dict[str, tuple[int, int]] = {}
    for i, t in enumerate(touched):
        for n in t:
            lo, _ = span.get(n, (i, i))
            span[n] = (lo, i)
    excluded = {n: "named-accesses: it is an operand of a T.reduce_*" for n in _reduce_operands(body)}
    excluded.update({n: "named-accesses: a T.view of another dtype is laid over its storage (or it is one)"
                     for o in kernel.overlays for n in (o.view, o.base)})
    excluded.update({n: "written-outside-pipelines: a T.Pipelined loop writes it" for n in _written_in_pipelines(body)})
    shared = sorted((b for b in kernel.allocs if b.scope == "shared" and b.name in span), key=lambda b: span[b.name][0])
    return _Lives(body, span, tuple(shared), excluded, pointer)


def candidates(kernel: Kernel) -> tuple[Reuse, ...]:
    """The renamings that keep ``kernel``'s meaning (module docstring), chosen greedily: each buffer, in the order of
    its first statement, takes the space of the earliest-dead buffer of its type whose life ended before it starts
    (an interval colouring: a space serves a chain of buffers one after another)."""
    lv = _lives(kernel)
    if lv.pointer is not None:
        return ()
    # space name -> (its type, the top-level index after which it is free)
    spaces: dict[str, tuple[tuple, int]] = {}
    out: list[Reuse] = []
    for b in (b for b in lv.shared if b.name not in lv.excluded):
        key = (tuple(b.shape), b.dtype)
        first, last = lv.span[b.name]
        free = [(end, name) for name, (k, end) in spaces.items() if k == key and end < first]
        if free and _first_write_whole(lv.body[first], b):
            end, name = min(free)
            out.append(Reuse(b.name, name, lv.body[first].sid, lv.body[end].sid,
                             b.numel * lookup_dtype(b.dtype).bytes))
            spaces[name] = (key, last)
        else:
            spaces[b.name] = (key, last)
    return tuple(out)


def why_not(kernel: Kernel, most: int = 3) -> list[str]:
    """For a kernel over the shared-memory limit: why no (further) buffer takes a dead one's space, as lines for the
    error: the first failed condition of up to ``most`` pairs of one shape and dtype whose lives are apart, or that no
    such pair exists."""
    lv = _lives(kernel)
    if lv.pointer is not None:
        line = f" (line {lv.pointer.loc.line})" if lv.pointer.loc is not None else ""
        return [f"{RULE}: not tried: a statement{line} touches memory through a pointer of unknown target "
                "(named-accesses)"]
    out: list[str] = []
    for a in lv.shared:
        for b in lv.shared:
            if a is b or (tuple(a.shape), a.dtype) != (tuple(b.shape), b.dtype) or \
                    lv.span[a.name][1] >= lv.span[b.name][0]:
                continue
            first = lv.body[lv.span[b.name][0]]
            why = next((f"{n} {lv.excluded[n]}" for n in (a.name, b.name) if n in lv.excluded), None)
            if why is None and not _first_write_whole(first, b):
                line = f" (line {first.loc.line})" if first.loc is not None else ""
                why = f"first-write-whole: its first statement{line} is not a T.copy or T.fill that writes all of it"
            if why is not None:
                out.append(f"{RULE}: {b.name} cannot take {a.name}'s space: {why}")
    if not out:
        return [f"{RULE}: no two shared buffers of one shape and dtype have lives apart in the block's top-level "
                "statements, so none can take another's space"]
    return out[:most]


def apply(kernel: Kernel, plan: tuple[Reuse, ...]) -> Kernel:
    """``kernel`` with each planned buffer renamed to the buffer whose space it takes (and no longer allocated)."""
    if not plan:
        return kernel
    into = {r.buffer: r.space for r in plan}
    bufs = {b.name: b for b in kernel.allocs}
    to = {name: bufs[space] for name, space in into.items()}
    return replace(kernel, allocs=tuple(b for b in kernel.allocs if b.name not in into),
                   body=tuple(rename_buffers(s, to) for s in kernel.body))


def describe(r: Reuse) -> str:
    """The explain() line of one renaming."""
    return (f"{r.buffer} is stored in {r.space}'s space ({r.bytes} bytes saved): the extracted schedule did not fit a "
            f"block's shared memory, and {r.space}'s last statement (id {r.last}) comes before {r.buffer}'s first "
            f"write (id {r.first}), which writes all of it")
