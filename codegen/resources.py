"""What a kernel needs from its statements' emitters, gathered before any code is generated.

:func:`kernel_needs` walks the schedule (:func:`egtile.ir.scheduled.swalk`) and joins, over every
statement, what its :class:`~egtile.codegen.registry.Emitter` declares: headers and device helper code
(first-use order, each once), TMA tensor maps (one per distinct ``(global buffer, box)``, first-use
order), shared-buffer alignment (the largest asked for) and scratch areas (one per name, the largest
size and alignment). :mod:`egtile.codegen.layout` places memory from it; :mod:`egtile.codegen.emit`
writes the includes, helpers and tensor-map parameters from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.errors import CodegenError
from egtile.ir.kernel import walk
from egtile.ir.scheduled import Scheduled, swalk

from egtile.codegen.registry import EMITTERS, Scratch, sid_of


@dataclass(frozen=True)
class KernelNeeds:
    """The union of the statements' needs (see the module docstring)."""

    headers: tuple[str, ...] = ()
    device_code: tuple[str, ...] = ()
    tensor_maps: tuple[tuple[str, tuple[int, ...]], ...] = ()
    shared_align: tuple[tuple[str, int], ...] = ()
    scratch: tuple[Scratch, ...] = ()

    def alignment(self, buffer: str) -> int | None:
        """The byte alignment statements ask of shared buffer ``buffer`` (``None``: none asked)."""
        for name, a in self.shared_align:
            if name == buffer:
                return a
        return None


def _missing(s: Scheduled, node: object) -> CodegenError:
    sid = sid_of(node)
    loc = next((st.loc for st in walk(s.kernel.body) if sid is not None and st.sid == sid), None)
    return CodegenError(f"kernel {s.kernel.name!r}: {EMITTERS.missing(type(node))}", loc or s.kernel.loc)


def kernel_needs(s: Scheduled) -> KernelNeeds:
    """The needs of every statement of ``s``.

    Raises:
        CodegenError: a statement whose class has no registered emitter (names the class and the registry).
    """
    headers: list[str] = []
    code: list[str] = []
    tmaps: list[tuple[str, tuple[int, ...]]] = []
    align: dict[str, int] = {}
    scratch: dict[str, Scratch] = {}
    for node in swalk(s.body):
        em = EMITTERS.get(type(node))
        if em is None:
            raise _missing(s, node)
        headers += [h for h in em.headers if h not in headers]
        code += [c for c in em.device_code if c not in code]
        if em.needs is None:
            continue
        n = em.needs(node, s)
        for name, box, *swizzle in n.tensor_maps:
            key = (name, tuple(box), *swizzle) if swizzle and swizzle[0] != "linear" else (name, tuple(box))
            if key not in tmaps:
                tmaps.append(key)
        for name, a in n.shared_align:
            align[name] = max(align.get(name, 1), a)
        for sc in n.scratch:
            old = scratch.get(sc.name)
            scratch[sc.name] = sc if old is None else Scratch(sc.name, max(old.bytes, sc.bytes), max(old.align, sc.align))
    return KernelNeeds(tuple(headers), tuple(code), tuple(tmaps), tuple(align.items()), tuple(scratch.values()))
