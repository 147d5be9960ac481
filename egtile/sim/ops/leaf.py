"""Scalar statements (:class:`~egtile.ir.scheduled.Leaf`): a store, an atomic add or an extern call, run once
by every thread that reaches it.

Repeated-iteration tracking (``docs/soundness.md``): a leaf outside any ``ThreadLoop`` whose execution had a
nonlocal effect is recorded with the thread's environment; the same entry recorded by two threads is a
repeated nonlocal iteration.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from egtile import externs
from egtile.ir.kernel import AddressOf, AtomicAdd, Extern, Store
from egtile.ir.scheduled import Leaf
from egtile.errors import ShapeError
from egtile.sim.semantics import register_semantics


def _writes(s: Leaf) -> list[str]:
    match s.stmt:
        case Store(buffer=b) | AtomicAdd(buffer=b):
            return [b.name]
        case Extern(args=args):
            return [a.load.buffer.name for a in args if isinstance(a, AddressOf)]
    return []


@register_semantics(Leaf, writes=_writes)
def leaf(m, s: Leaf, th) -> None:
    st = s.stmt
    if th.loop_depth == 0:
        th.effect = False
        _run(m, st, th)
        if th.effect:
            key = (("leaf", st.sid), tuple(th.env.items()), ())
            m.iters.setdefault(key, []).append(th.tid)
    else:
        _run(m, st, th)


def _run(m, s: Store | AtomicAdd | Extern, th) -> None:
    th.sid = s.sid
    if type(s) is Store:  # the hot path: compiled once per statement
        fv, fis, name, what = m.prog.store_parts(s)
        env, load = th.env, th.load
        val = fv(env, load)
        mem = m.mems.get(name) or m.mem(name, th)
        f = mem.flat(tuple(int(g(env, load)) for g in fis), what)
        if mem.owner is not None and mem.owner[f] != th.tid:
            raise m._not_owner(mem, f, th, "writes")
        if mem.shadowed:
            m.shadow.write(mem, f, th.agent, s.sid, "write")
        if mem.scope != "local":
            th.effect = True
        mem.data[f] = mem.rnd(val)
        return
    match s:
        case Store(buffer=b, indices=idx, value=v):
            val = m.ev(v, th)
            mem = m.mem(b.name, th)
            m.write(mem, mem.flat(tuple(int(m.ev(i, th)) for i in idx), f"statement {s.sid}"), val, th, s.sid)
        case AtomicAdd(buffer=b, indices=idx, value=v):
            val = m.ev(v, th)
            mem = m.mem(b.name, th)
            f = mem.flat(tuple(int(m.ev(i, th)) for i in idx), f"statement {s.sid}")
            m.atomic_add(mem, f, val, th, s.sid)
        case Extern(name=name, args=args, pure=pure):
            model = externs.lookup(name, s.loc)
            values = []
            pointers = 0
            for a in args:
                if isinstance(a, AddressOf):
                    values.append(_pointer(m, a, name, th, s.sid))
                    pointers += 1
                    if m.mem(a.load.buffer.name, th).scope != "local":
                        th.effect = True
                else:
                    values.append(m.ev(a, th))
            if pointers == 0 and not (pure or model.pure):
                th.effect = True  # an opaque call whose count matters (see the module docstring)
            model.call(*values)
        case _:
            raise TypeError(f"not a leaf statement: {s!r}")


def _pointer(m, arg: AddressOf, extern: str, th, sid: int | None) -> Any:
    """The pointer an extern model gets for ``arg``, bounded to the call's contract."""
    ld = arg.load
    mem = m.mem(ld.buffer.name, th)
    idx = tuple(int(m.ev(i, th)) for i in ld.indices)
    ptr = _flat_pointer(m, mem, mem.flat(idx, f"statement {sid}"), idx, th, sid)
    return externs.bind_pointer(ptr, arg, idx, extern)


def _flat_pointer(m, mem, f: int, idx: tuple[int, ...], th, sid: int | None) -> Any:
    def at(k: int) -> Any:
        g = f + k  # pointer arithmetic: the element k places on in row-major order, inside the buffer
        size = int(np.prod(mem.shape))
        if not 0 <= g < size:
            raise ShapeError(f"statement {sid}: an extern's pointer into {mem.name} moved to flat element {g}, outside "
                             f"its {size} elements (buffer shape {tuple(mem.shape)})")
        return _flat_pointer(m, mem, g, mem.unflat(g), th, sid)

    return externs.Pointer(
        mem.name, idx, dtype=mem.dtype,
        load=lambda: m.read(mem, f, th, sid),
        store=lambda v: m.write(mem, f, v, th, sid),
        atomic_add=lambda v: m.atomic_add(mem, f, v, th, sid), at=at)
