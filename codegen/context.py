"""What every emission function needs to know besides the statement it lowers.

:class:`Ctx` is immutable; nested constructs derive a new one with :meth:`Ctx.within` (a narrower set of
threads) or :meth:`Ctx.deeper` (one more nesting level, for fresh loop-variable names).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from egtile.errors import SourceLoc
from egtile.ir.kernel import Buffer, walk
from egtile.ir.scheduled import Scheduled, ThreadRange

from egtile.codegen.errors import codegen_error
from egtile.codegen.layout import SmemLayout, TmaOperand, scratch_ident


@dataclass(frozen=True)
class Ctx:
    """Emission context.

    Attributes:
        sched: the schedule being lowered.
        smem: shared-memory placement of buffers and mbarriers.
        tma: the TMA operands (one tensor-map parameter each).
        threads: the threads that may reach the statement being emitted (a contiguous range: the whole
            block, a role's warpgroups or one elected thread).
        depth: nesting depth of generated loops, for unique ``eg_`` loop-variable names.
        vars, loads: C spellings that replace variables and loads (:meth:`substituted`).
        ranges: ``(name, lo, hi)``: the generated C variable of IR variable ``name`` is in ``[lo, hi)`` here
            (an enclosing loop's constant bounds); :func:`egtile.analysis.decide.decide` reads them. A name
            that :meth:`substituted` binds to other C text loses its range unless the binder restates it.
    """

    sched: Scheduled
    smem: SmemLayout
    tma: tuple[TmaOperand, ...]
    threads: ThreadRange
    depth: int = 0
    vars: tuple[tuple[str, str], ...] = ()
    loads: tuple[tuple[object, str], ...] = ()
    ranges: tuple[tuple[str, int, int], ...] = ()

    def substituted(self, *, vars: tuple[tuple[str, str], ...] = (), loads: tuple[tuple[object, str], ...] = ()) -> Ctx:
        """Emission with variable ``name`` spelled as C ``text`` (``vars``) and the load expressions ``loads``
        read from C lvalues (a vectorized loop's lanes: ``v + l`` and an element of a vector register)."""
        return replace(self.unranged(*(n for n, _ in vars)), vars=vars, loads=loads)

    def ranged(self, *items: tuple[str, int, int]) -> Ctx:
        """This context with IR variables ``name`` known to be in ``[lo, hi)`` (replacing earlier facts)."""
        u = self.unranged(*(n for n, _, _ in items))
        return replace(u, ranges=u.ranges + tuple(items))

    def unranged(self, *names: str) -> Ctx:
        """This context without range facts for ``names`` (C variables of those names are declared anew)."""
        return replace(self, ranges=tuple(r for r in self.ranges if r[0] not in names))

    def range_map(self) -> dict[str, tuple[int, int]]:
        return {n: (lo, hi) for n, lo, hi in self.ranges}

    def within(self, threads: ThreadRange) -> Ctx:
        return replace(self, threads=threads)

    def deeper(self) -> Ctx:
        return replace(self, depth=self.depth + 1)

    def buffer(self, name: str) -> Buffer:
        """The scheduled buffer or parameter ``name``; raises CodegenError when the schedule lacks it."""
        try:
            return self.sched.buffer(name)
        except KeyError:
            raise codegen_error(self, f"buffer {name!r} is used but is neither a kernel parameter nor a "
                                      f"scheduled buffer") from None

    def strides(self, buf: Buffer) -> tuple[int, ...]:
        """Element strides of ``buf`` as the kernel lays it out (global buffers are row-major)."""
        return self.smem.strides_of(buf)

    def tmap_for(self, buffer: str, box: tuple[int, ...], swizzle: str = "linear") -> TmaOperand:
        """The tensor-map parameter of ``(buffer, box, swizzle)`` (a statement declared it in
        ``Needs.tensor_maps``)."""
        for t in self.tma:
            if t.buffer == buffer and t.box == box and t.swizzle == swizzle:
                return t
        raise KeyError((buffer, box, swizzle))

    def scratch(self, name: str) -> str:
        """C name of the ``unsigned char*`` to the scratch area ``name`` (declared in ``Needs.scratch``).

        Raises:
            CodegenError: no statement declared it.
        """
        if not any(n == name for n, _ in self.smem.scratch):
            raise codegen_error(self, f"scratch area {name!r} is used but no statement declared it (Needs.scratch)")
        return scratch_ident(name)

    def loc_of(self, sid: int | None) -> SourceLoc | None:
        """The user's source line of tile-IR statement ``sid`` (``None`` if unknown)."""
        if sid is None:
            return None
        for s in walk(self.sched.kernel.body):
            if s.sid == sid:
                return s.loc
        return None
