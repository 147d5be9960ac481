"""Layouts that follow from a register fragment's: row projections, cast copies, shared loop nests.

A wgmma decision fixes its accumulator's register layout (``Decision.layouts``). The fragments that are
used *with* it inherit theirs, mechanically, from the statements that tie them (the *links*):

* ``row``: ``T.reduce_*(X, r, dim=1)`` over 2-D fragment ``X`` into 1-D fragment ``r``, or a ``T.Parallel(M, N)``
  nest that accesses ``X[i, j]`` and ``r[i]``: ``r`` takes the row projection of ``X``'s layout
  (:func:`egtile.layout.row_projection`);
* ``same``: ``T.copy`` of a whole fragment into another of its shape (a cast keeps the layout with the
  destination's element width), two fragments of one shape accessed at ``[i, j]`` by one nest, or 1-D
  fragments accessed at ``[i]`` by one nest;
* a 1-D fragment that a nest indexes by its column variable (a *column vector*, :func:`column_vectors`) is tied to
  nothing: it stays in shared memory;
* so is a fragment of two or more dimensions that a nest reads at another element than the iteration's own and that
  nothing else ties (a *gathered* fragment, :func:`gathered`: a packed operand unpacked at ``B_local[i, j // 2]``):
  every thread reads it like a shared buffer;
* a 2-D fragment tied only through rows to a laid-out one (``acc_o[i, j] *= scale[i]`` with ``scale`` the rows
  of the wgmma accumulator ``S``) takes the accumulator layout of the same tiling at its own width.

:func:`links` lists them from the tile IR (the e-graph's ``frag-link`` relation states the same ties, so
that ``fragment-users-admit-registers`` judges every user of the whole group, :mod:`egtile.rules.fragment`);
:func:`derive` extends fixed layouts over them. Two ties that ask different layouts of one buffer are a
:class:`~egtile.errors.ScheduleError` naming both statements.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from egtile.errors import ScheduleError
from egtile.ir import Copy, For, Gemm, Reduce, Var, walk
from egtile.ir.dtypes import dtype
from egtile.layout import LayoutError
from egtile.layout.fragment import Fragment, RowFragment, row_projection
from egtile.layout.tiling import SPLITS, AccumulatorTiling


@dataclass(frozen=True)
class Link:
    """``kind`` ``"row"`` (``a`` 2-D, ``b`` its rows) or ``"same"`` (one layout), stated by statement ``sid``."""

    kind: str
    a: str
    b: str
    sid: int


def _is_frag(kernel, name: str) -> bool:
    try:
        return kernel.buffer(name).scope == "fragment"
    except KeyError:
        return False


def _nest_fragments(loop: For) -> set[str]:
    from egtile.analysis import own_reads, own_writes

    out: set[str] = set()
    for st in walk(loop.body):
        if isinstance(st, For):
            continue
        out |= {a.buffer for a in (*own_reads(st), *own_writes(st)) if a.scope == "fragment"}
    return out


def column_vectors(kernel) -> frozenset[str]:
    """1-D fragments that a ``T.Parallel`` nest of two or more variables indexes by a variable other than its first
    (``acc_s[i, j] = T.if_then_else(mask[j], ...)``: a vector along the columns of the nest's 2-D fragments). A row
    fragment is the row projection of a 2-D layout, which holds row ``i`` where the iteration ``(i, j)`` runs; a
    column vector has no such layout, so it is tied to no fragment (:func:`links`) and stays in shared memory, where
    every thread reads it (the register layout of the 2-D fragments it is read with is unaffected)."""
    from egtile.analysis import own_reads, own_writes
    from egtile.analysis.vector import nest

    out: set[str] = set()
    for loop in walk(kernel.body):
        if not (isinstance(loop, For) and loop.kind == "parallel"):
            continue
        names = tuple(x.var.name for x in nest(loop, static=False)[0])
        if len(names) < 2:
            continue
        for st in walk(loop.body):
            if isinstance(st, For):
                continue
            for a in (*own_reads(st), *own_writes(st)):
                if a.scope != "fragment" or a.region is None or len(a.region.offsets) != 1:
                    continue
                if len(kernel.buffer(a.buffer).shape) != 1:
                    continue
                o = a.region.offsets[0]
                if not (isinstance(o, Var) and o.name == names[0]):
                    out.add(a.buffer)
    return frozenset(out)


def gathered(kernel) -> frozenset[str]:
    """Fragments of two or more dimensions that a ``T.Parallel`` nest *reads* at another element than the iteration's
    own (``B_local[i, j // 2]``, or a shape other than the nest's) and that no statement ties to another fragment:
    never a ``T.gemm`` operand or accumulator, a reduction's source or destination, one side of a fragment-to-fragment
    ``T.copy``, a pointer handed to an extern call, nor written inside a ``T.Parallel`` nest (its writers are whole
    ``T.copy`` / ``T.fill`` statements from memory). No register layout serves such a read (the element is another
    thread's), and nothing asks the fragment for one, so it stays in shared memory, read there like any shared buffer
    by whichever thread runs the iteration, and the register layout of the fragments it is read with is unaffected.
    Before, the read kept every fragment of the nest's group in shared memory (a dequantized operand's
    accumulator with it)."""
    from egtile.analysis import own_reads, own_writes
    from egtile.analysis.vector import nest
    from egtile.ir import Fill

    reads: set[str] = set()
    barred: set[str] = set()
    inner: set[int] = set()  # loops of a nest, and loops inside a nest's body: judged with their outermost loop
    for st in walk(kernel.body):
        if isinstance(st, For) and st.kind == "parallel" and id(st) not in inner:
            loops = nest(st, static=False)[0]
            names = tuple(x.var.name for x in loops)
            extents = tuple(_extent(x) for x in loops)
            for leaf in walk(st.body):
                inner.add(id(leaf))
                if isinstance(leaf, For):
                    continue
                for a in own_writes(leaf):
                    if a.scope == "fragment":
                        barred.add(a.buffer)
                for a in own_reads(leaf):
                    if a.scope != "fragment" or a.region is None or len(kernel.buffer(a.buffer).shape) < 2:
                        continue
                    own = len(a.region.offsets) == len(names) and all(
                        isinstance(o, Var) and o.name == v for o, v in zip(a.region.offsets, names))
                    if not own or tuple(kernel.buffer(a.buffer).shape) != extents:
                        reads.add(a.buffer)
            continue
        if isinstance(st, For) or id(st) in inner:
            continue
        frag = [a for a in (*own_reads(st), *own_writes(st)) if a.scope == "fragment"]
        barred |= {a.buffer for a in frag if a.via_pointer}
        match st:
            case Gemm() | Reduce():
                barred |= {a.buffer for a in frag}
            case Copy(src=a, dst=b) if a.buffer.scope == "fragment" and b.buffer.scope == "fragment":
                barred |= {a.buffer.name, b.buffer.name}
            case Copy() | Fill():
                pass
            case _:
                barred |= {a.buffer for a in frag}
    return frozenset(reads - barred)


def _extent(loop: For) -> int | None:
    from egtile.ir import Const

    if isinstance(loop.start, Const) and isinstance(loop.stop, Const) and int(loop.start.value) == 0:
        return int(loop.stop.value)
    return None


def shared_resident(kernel) -> frozenset[str]:
    """The fragments that stay in shared memory whatever the decisions: column vectors (:func:`column_vectors`) and
    gathered fragments (:func:`gathered`). They tie to no fragment (:func:`links`)."""
    return column_vectors(kernel) | gathered(kernel)


def links(kernel) -> tuple[Link, ...]:
    """Every tie between fragments in ``kernel`` (module docstring), in program order; a column vector
    (:func:`column_vectors`) or gathered fragment (:func:`gathered`) is tied to none."""
    out: list[Link] = []
    seen_nests: set[int] = set()
    columns = shared_resident(kernel)

    def visit(stmts, in_par: bool) -> None:
        for s in stmts:
            if isinstance(s, For) and s.kind == "parallel" and not in_par:
                if s.sid not in seen_nests:
                    seen_nests.add(s.sid)
                    names = sorted(_nest_fragments(s) - columns)
                    two = [n for n in names if len(kernel.buffer(n).shape) == 2]
                    one = [n for n in names if len(kernel.buffer(n).shape) == 1]
                    for x in two[1:]:
                        out.append(Link("same", two[0], x, s.sid))
                    if two:
                        for r in one:
                            out.append(Link("row", two[0], r, s.sid))
                    else:
                        for r in one[1:]:
                            out.append(Link("same", one[0], r, s.sid))
                visit(s.body, True)
                continue
            match s:
                case Reduce(src=a, dst=b, dim=d) if a.scope == "fragment" and b.scope == "fragment" and \
                        b.name not in columns:
                    if len(a.shape) == 2 and d in (1, -1) and tuple(b.shape) == (a.shape[0],):
                        out.append(Link("row", a.name, b.name, s.sid))
                case Gemm(a=a, c=c) if a.buffer.scope == "fragment" and c.buffer.scope == "fragment":
                    out.append(Link("rows", a.buffer.name, c.buffer.name, s.sid))
                case Copy(src=a, dst=b) if a.buffer.scope == "fragment" and b.buffer.scope == "fragment" and \
                        not {a.buffer.name, b.buffer.name} & columns:
                    if tuple(a.buffer.shape) == tuple(b.buffer.shape) and a.buffer.name != b.buffer.name:
                        out.append(Link("same", a.buffer.name, b.buffer.name, s.sid))
                case _:
                    pass
            for attr in ("body", "then_body", "else_body"):
                sub = getattr(s, attr, None)
                if sub:
                    visit(sub, in_par)

    visit(kernel.body, False)
    return tuple(out)


def group_of(kernel, name: str) -> frozenset[str]:
    """The fragments tied to fragment ``name`` (itself included), transitively."""
    ls = links(kernel)
    group = {name}
    changed = True
    while changed:
        changed = False
        for ln in ls:
            if (ln.a in group) != (ln.b in group):
                group |= {ln.a, ln.b}
                changed = True
    return frozenset(group)


def has_rows(kernel, name: str) -> bool:
    """Whether fragment ``name``'s group holds a row fragment (its layout's rows must then be shuffle-reducible)."""
    return any(len(kernel.buffer(n).shape) == 1 for n in group_of(kernel, name))


def _bits(kernel, name: str) -> int:
    return dtype(kernel.buffer(name).dtype).bytes * 8


def widen(parent: Fragment, rows: int, cols: int) -> Fragment | None:
    """The accumulator layout of ``parent``'s tiling at width ``cols`` (``None``: ``parent`` is no tiling's)."""
    for w in (1, 2, 3, 4):
        for split in SPLITS:
            t = AccumulatorTiling.of(parent.rows, parent.cols, w, split)
            if t.problems() or t.fragment() != parent:
                continue
            t2 = AccumulatorTiling.of(rows, cols, w, split)
            return None if t2.problems() else t2.fragment()
    return None


def derive(kernel, fixed: dict[str, Any], who: dict[str, int | None], describe) -> dict[str, Any]:
    """``fixed`` (buffer -> layout, as ``Decision.layouts`` gave them) extended over :func:`links`.

    Raises:
        ScheduleError: a tie asks a layout that differs from one already fixed (naming both statements), or
            a row projection or widening does not exist.
    """
    out = dict(fixed)
    ls = links(kernel)
    parents: dict[RowFragment, Fragment] = {}  # a row projection -> a 2-D layout it is the projection of

    def put(name: str, layout: Any, sid: int) -> bool:
        if name in out:
            old = out[name]
            if not _eq_bits(old, layout) or _bits_of(old) != _bits_of(layout):
                a = who.get(name)
                raise ScheduleError(
                    f"fragment {name!r} needs two layouts: {describe(a)} gives it {getattr(old, 'name', old)} and "
                    f"{describe(sid)} {getattr(layout, 'name', layout)}; a buffer has one layout",
                    kernel_loc(kernel, sid))
            return False
        out[name] = layout
        who[name] = sid
        return True

    changed = True
    while changed:
        changed = False
        for ln in ls:
            la, lb = out.get(ln.a), out.get(ln.b)
            try:
                if ln.kind == "rows":
                    # a register-A gemm: A's rows are C's (both fixed by its decision; a mismatch is a conflict)
                    if isinstance(la, Fragment) and isinstance(lb, Fragment) and \
                            row_projection(la, 32) != row_projection(lb, 32):
                        raise ScheduleError(f"{describe(ln.sid)} reads A ({ln.a}) in rows laid out unlike its accumulator "
                                            f"{ln.b}'s", kernel_loc(kernel, ln.sid))
                    continue
                if ln.kind == "same":
                    if la is not None and lb is None:
                        changed |= put(ln.b, _with_bits(la, _bits(kernel, ln.b)), ln.sid)
                    elif lb is not None and la is None:
                        changed |= put(ln.a, _with_bits(lb, _bits(kernel, ln.a)), ln.sid)
                    elif la is not None and not _eq_bits(la, lb):
                        put(ln.b, _with_bits(la, _bits(kernel, ln.b)), ln.sid)
                elif isinstance(la, Fragment):
                    rp = row_projection(la, _bits(kernel, ln.b))
                    parents.setdefault(rp.with_bits(32), la)
                    changed |= put(ln.b, rp, ln.sid)
                elif isinstance(lb, RowFragment) and la is None:
                    a = kernel.buffer(ln.a)
                    parent = parents.get(lb.with_bits(32))
                    wide = widen(parent, *a.shape) if parent is not None else None
                    if wide is None:
                        raise ScheduleError(f"fragment {ln.a!r} is tied by rows to {ln.b!r} ({describe(ln.sid)}) but "
                                            f"no register layout of its shape {tuple(a.shape)} has those rows",
                                            kernel_loc(kernel, ln.sid))
                    changed |= put(ln.a, _with_bits(wide, _bits(kernel, ln.a)), ln.sid)
            except LayoutError as e:
                raise ScheduleError(f"{describe(ln.sid)}: {e}", kernel_loc(kernel, ln.sid)) from None
    return out


def _bits_of(f) -> int | None:
    return getattr(f, "value_bits", None)


def _with_bits(f, bits: int):
    if isinstance(f, RowFragment):
        return f.with_bits(bits)
    return replace(f, value_bits=bits) if isinstance(f, Fragment) else f


def _eq_bits(a, b) -> bool:
    """Same layout up to the element width (a cast copy keeps the distribution)."""
    if a is None or b is None:
        return a is b
    if type(a) is not type(b):
        return False
    if isinstance(a, Fragment):  # the distribution, not the name
        return (a.rows, a.cols, a.thread_modes, a.value_modes) == (b.rows, b.cols, b.thread_modes, b.value_modes)
    return _with_bits(a, 32) == _with_bits(b, 32)


def kernel_loc(kernel, sid: int | None):
    if sid is None:
        return None
    for st in walk(kernel.body):
        if getattr(st, "sid", None) == sid:
            return st.loc
    return None


__all__ = ["Link", "column_vectors", "derive", "gathered", "group_of", "has_rows", "links", "shared_resident", "widen"]
