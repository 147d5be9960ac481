"""The interpreter's check of views of another dtype (``ir.Overlay``): which buffer last wrote each byte.

TileLang's ``T.view(base, shape, dtype=other)`` shares ``base``'s bytes; egtile gives the view a storage of its own,
which is the same program exactly when no read observes the other buffer's bits (``egtile.analysis.overlay``
proves it before scheduling). The interpreter runs the program in its sequential order and checks that fact on
every access, independently of that proof: per block, each unit of a storage (the greatest common divisor of its
buffers' element widths, in bits) records which of its buffers (*faces*: the base and its views) wrote it last. A
read of a face's element any of whose units another face wrote last raises :class:`UnsupportedError`, naming both
buffers and the element; a read of units no face wrote is an uninitialized read (the poison shows it), as for any
buffer. A view's element ``v`` lies at units ``[v * k, (v + 1) * k)`` of the storage (``k``: its width in units),
TileLang's row-major layout over the storage's first byte.
"""

from __future__ import annotations

import math

import numpy as np

from egtile.errors import UnsupportedError
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import Buffer, Kernel


class _Face:
    __slots__ = ("buffer", "code", "group", "k", "owner")

    def __init__(self, buffer: Buffer, code: int, k: int, owner: np.ndarray, group: list[_Face]) -> None:
        self.buffer, self.code, self.k, self.owner, self.group = buffer, code, k, owner, group


class Owners:
    """The last writer of every unit of each storage that has views of another dtype, for one block."""

    def __init__(self, kernel: Kernel) -> None:
        bufs = {b.name: b for b in kernel.allocs}
        groups: dict[str, list[str]] = {}
        for o in kernel.overlays:
            groups.setdefault(o.base, [o.base]).append(o.view)
        self.faces: dict[str, _Face] = {}
        for base, names in groups.items():
            bits = [lookup_dtype(bufs[n].dtype).bits for n in names]
            unit = math.gcd(*bits)
            owner = np.zeros(bufs[base].numel * bits[0] // unit, dtype=np.int16)
            group: list[_Face] = []
            for code, (n, b) in enumerate(zip(names, bits), start=1):
                face = _Face(bufs[n], code, b // unit, owner, group)
                group.append(face)
                self.faces[n] = face

    def _units(self, face: _Face, flats: np.ndarray) -> np.ndarray:
        return (flats[:, None] * face.k + np.arange(face.k)).reshape(-1)

    def flats(self, name: str, index: tuple[slice, ...] | tuple[int, ...]) -> np.ndarray | None:
        """The flat elements of ``name`` at ``index`` (an element or a box of slices); ``None``: not a face."""
        face = self.faces.get(name)
        if face is None:
            return None
        return np.arange(face.buffer.numel).reshape(face.buffer.shape)[index].reshape(-1)

    def read(self, name: str, index: tuple[slice, ...] | tuple[int, ...]) -> None:
        """Check a read of ``name`` at ``index``.

        Raises:
            UnsupportedError: some byte read was last written through another buffer.
        """
        flats = self.flats(name, index)
        if flats is None or not len(flats):
            return
        face = self.faces[name]
        last = face.owner[self._units(face, flats)].reshape(len(flats), face.k)
        bad = ((last != 0) & (last != face.code)).any(axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            code = int(last[i][(last[i] != 0) & (last[i] != face.code)][0])
            other = face.group[code - 1].buffer
            elem = tuple(int(x) for x in np.unravel_index(int(flats[i]), face.buffer.shape))
            raise UnsupportedError(
                f"reads {name}{list(elem)} ({face.buffer.dtype}) whose bytes were last written through {other.name} "
                f"({other.dtype}), laid over the same storage by T.view: the program observes a reinterpretation of "
                "the bits, which egtile does not model")

    def write(self, name: str, index: tuple[slice, ...] | tuple[int, ...]) -> None:
        """Record a write of ``name`` at ``index``."""
        flats = self.flats(name, index)
        if flats is not None and len(flats):
            face = self.faces[name]
            face.owner[self._units(face, flats)] = face.code
