"""Register fragments: which thread holds which element of a tile, in which register.

A :class:`Fragment` describes a ``rows x cols`` tile spread over the threads of a group (a warpgroup
for wgmma). Thread ``t`` holds ``values_per_thread`` elements in *value slots* ``v``; the element in
slot ``v`` of thread ``t`` is::

    (row, col) = sum_i digit_i(t) * (thread_modes[i].row, thread_modes[i].col)
               + sum_j digit_j(v) * (value_modes[j].row, value_modes[j].col)

where ``digit_i(x)`` is the i-th digit of ``x`` in the mixed radix given by the modes' sizes, first mode
fastest (CuTe's thread-value layouts use the same idea). A fragment must be a bijection between
(thread, slot) pairs and tile elements; :meth:`Fragment.check` proves it by enumeration.

Slots pack into 32-bit registers: ``32 // value_bits`` consecutive slots share one register, low half
first (PTX ISA 9.7.15.5.1.1.1: ".f16x2 registers, with each register containing two .f16/.bf16
elements", elements listed low to high).

The layouts wgmma fixes (PTX ISA 9.7.15.5.1.1.1, "Matrix Fragments for wgmma.mma_async.m64nNk16",
Figures 148 and 149), for warp ``w = t / 32`` of the warpgroup, ``lane = t % 32``,
``groupID = lane / 4``, ``threadID_in_group = lane % 4``:

* accumulator D (f32, N/2 registers): register ``i`` holds row ``16 w + groupID + 8 ((i >> 1) & 1)``,
  column ``2 threadID_in_group + (i & 1) + 8 (i >> 2)``  -- :func:`wgmma_accumulator`;
* A in registers (f16/bf16, four .f16x2 registers, elements a0..a7): element ``a_i`` at row
  ``16 w + groupID + 8 ((i >> 1) & 1)``, column ``2 threadID_in_group + (i & 1) + 8 (i >> 2)``
  -- :func:`wgmma_a_registers`. The same formula as D's first 16 columns, which is why an f32
  accumulator converted to f16 pairs can feed the next wgmma as A (attention's P @ V).

:func:`row_major_by_thread` is the plain layout of SIMT code (consecutive elements to consecutive
threads, ``vector`` at a time).

A :class:`RowFragment` is the *row projection* of a 2-D fragment (:func:`row_projection`): the layout of a
1-D buffer whose element ``i`` belongs to row ``i`` of the 2-D tile (a softmax's running max or sum). Element
``i`` is held, *replicated*, by every thread that holds some element of row ``i``: for the wgmma accumulator
the four lanes of a quad (``threadID_in_group`` moves only the column), each holding rows ``groupID`` and
``groupID + 8`` of its warp's 16 rows per m64 instruction block. It is not a bijection: it is its own type,
with :meth:`RowFragment.owners` and per-thread slots. Its replicas differ only in the thread digits that move
the parent's column, so a reduction over a row combines the replicas by ``shfl.sync.bfly`` over exactly those
lane bits (PTX ISA 9.7.9.6 "shfl.sync": ``bfly`` mode, lane ``laneid ^ b``; a shuffle stays within a warp):
:meth:`RowFragment.shuffle_lanes`. An N split over warpgroups also replicates each row across warpgroups
(warps apart): :meth:`RowFragment.warp_lanes` gives the lanes within a warp and
:attr:`RowFragment.cross_warp_groups` the warp groups whose partials a reduction combines through shared memory.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from egtile.layout.errors import LayoutError

WARPGROUP_THREADS = 128


@dataclass(frozen=True)
class Mode:
    """One digit of a thread or slot index: ``size`` values, each step moving ``(row, col)`` by
    ``(row, col)`` elements."""

    size: int
    row: int
    col: int


@dataclass(frozen=True)
class Fragment:
    """A thread-value layout of a ``rows x cols`` tile (module docstring).

    Attributes:
        name: for messages (``"wgmma.m64n256.f32"``).
        rows, cols: tile extent.
        thread_modes: digits of the thread index, fastest first.
        value_modes: digits of the value-slot index, fastest first.
        value_bits: bits of one element (32 for f32, 16 for f16/bf16).
    """

    name: str
    rows: int
    cols: int
    thread_modes: tuple[Mode, ...]
    value_modes: tuple[Mode, ...]
    value_bits: int = 32

    @property
    def num_threads(self) -> int:
        return math.prod(m.size for m in self.thread_modes)

    @property
    def values_per_thread(self) -> int:
        return math.prod(m.size for m in self.value_modes)

    @property
    def values_per_register(self) -> int:
        return max(1, 32 // self.value_bits)

    @property
    def registers_per_thread(self) -> int:
        """32-bit registers each thread spends on the fragment."""
        return -(-self.values_per_thread // self.values_per_register)

    def register(self, value: int) -> tuple[int, int]:
        """``(register, part)`` of slot ``value``: part 0 is the low half of a packed register."""
        return divmod(value, self.values_per_register)

    @staticmethod
    def _digits(x: int, modes: tuple[Mode, ...]) -> tuple[int, int]:
        row = col = 0
        for m in modes:
            x, d = divmod(x, m.size)
            row += d * m.row
            col += d * m.col
        return row, col

    def coord(self, thread: int, value: int) -> tuple[int, int]:
        """``(row, col)`` of slot ``value`` of thread ``thread``."""
        if not (0 <= thread < self.num_threads and 0 <= value < self.values_per_thread):
            raise IndexError(f"{self.name}: (thread {thread}, slot {value}) outside {self.num_threads} threads x "
                             f"{self.values_per_thread} slots")
        r1, c1 = self._digits(thread, self.thread_modes)
        r2, c2 = self._digits(value, self.value_modes)
        return r1 + r2, c1 + c2

    def elements(self, thread: int) -> list[tuple[int, int, int]]:
        """``[(slot, row, col)]`` of every element ``thread`` holds, slot order."""
        return list(_elements(self, thread))

    def owner(self, row: int, col: int) -> tuple[int, int]:
        """``(thread, slot)`` holding element ``(row, col)`` (inverse of :meth:`coord`)."""
        table = _inverse(self)
        if not (0 <= row < self.rows and 0 <= col < self.cols):
            raise IndexError(f"{self.name}: element ({row}, {col}) outside {self.rows}x{self.cols}")
        return table[row * self.cols + col]

    def problems(self) -> list[str]:
        """Why this is not a bijection onto the tile ([] if it is)."""
        n = self.num_threads * self.values_per_thread
        if n != self.rows * self.cols:
            return [f"{self.num_threads} threads x {self.values_per_thread} slots = {n} elements, the tile has "
                    f"{self.rows * self.cols}"]
        seen: dict[tuple[int, int], tuple[int, int]] = {}
        for t in range(self.num_threads):
            for v in range(self.values_per_thread):
                rc = self.coord(t, v)
                if not (0 <= rc[0] < self.rows and 0 <= rc[1] < self.cols):
                    return [f"(thread {t}, slot {v}) maps to {rc}, outside the tile"]
                if rc in seen:
                    return [f"(thread {t}, slot {v}) and {seen[rc]} both map to {rc}"]
                seen[rc] = (t, v)
        return []

    def check(self) -> "Fragment":
        """Return ``self`` if it is a bijection, else raise :class:`LayoutError`."""
        problems = self.problems()
        if problems:
            raise LayoutError(f"fragment {self.name}: " + "; ".join(problems))
        return self

    def coord_expr(self, thread: str, value: int) -> tuple[str, str]:
        """C expressions for ``(row, col)`` of compile-time slot ``value`` of the thread whose index
        (inside the group) is the C expression ``thread``: what codegen emits for an unrolled loop over
        a fragment's registers."""
        r0, c0 = self._digits(value, self.value_modes)
        rows, cols = [str(r0)] if r0 else [], [str(c0)] if c0 else []
        div = 1
        for m in self.thread_modes:
            digit = f"(({thread}) / {div} % {m.size})" if div > 1 else f"(({thread}) % {m.size})"
            if div * m.size == self.num_threads and div > 1:
                digit = f"(({thread}) / {div})"
            if m.row:
                rows.append(f"{digit} * {m.row}" if m.row != 1 else digit)
            if m.col:
                cols.append(f"{digit} * {m.col}" if m.col != 1 else digit)
            div *= m.size
        return " + ".join(rows) or "0", " + ".join(cols) or "0"


def _elements(frag, thread: int) -> tuple[tuple[int, int, int], ...]:
    if not 0 <= thread < frag.num_threads:
        frag.coord(thread, 0)  # raises the IndexError that names the layout
    return _element_table(frag)[thread]


@functools.lru_cache(maxsize=512)
def _element_table(frag) -> tuple[tuple[tuple[int, int, int], ...], ...]:
    # The verifier, the simulator and the codegen ask each thread's elements many times. One table per
    # layout (not one cache entry per (layout, thread)): a kernel's few dozen layouts over 256-384 threads
    # overflowed a per-thread cache and recomputed every element on each pass.
    # coord(t, v) is the thread's digits plus the slot's (two independent mixed-radix sums): one table of each,
    # then their sums, instead of both digit loops per element (16k Python calls for a 128-thread 128x128 tile)
    digits = Fragment._digits
    col = 0 if isinstance(frag, RowFragment) else 1  # a row fragment's element i is at (i, 0)
    threads = [digits(t, frag.thread_modes) for t in range(frag.num_threads)]
    slots = [(v, *digits(v, frag.value_modes)) for v in range(frag.values_per_thread)]
    return tuple(tuple((v, tr + r, (tc + c) * col) for v, r, c in slots) for tr, tc in threads)


@functools.lru_cache(maxsize=64)
def _inverse(frag: Fragment) -> tuple[tuple[int, int], ...]:
    frag.check()
    table: list[tuple[int, int]] = [(-1, -1)] * (frag.rows * frag.cols)
    for t, elems in enumerate(_element_table(frag)):
        for v, r, c in elems:
            table[r * frag.cols + c] = (t, v)
    return tuple(table)


# The warpgroup's thread digits shared by D and A: threadID_in_group -> 2 columns, groupID -> 1 row,
# warp -> 16 rows.
_WARPGROUP_THREADS = (Mode(4, 0, 2), Mode(8, 1, 0), Mode(4, 16, 0))


def wgmma_accumulator(n: int) -> Fragment:
    """The f32 accumulator of ``wgmma.mma_async.m64nNk16.f32``: 64 x n over 128 threads, n/2 registers."""
    if not (8 <= n <= 256 and n % 8 == 0):
        raise LayoutError(f"wgmma N = {n}: must be a multiple of 8 in [8, 256]")
    return Fragment(f"wgmma.m64n{n}.f32", 64, n, _WARPGROUP_THREADS,
                    (Mode(2, 0, 1), Mode(2, 8, 0), Mode(n // 8, 0, 8)), value_bits=32)


def wgmma_a_registers(bits: int = 16) -> Fragment:
    """The A operand of ``wgmma.mma_async.m64nNk16`` from registers (.f16/.bf16): 64 x 16 over 128
    threads, 8 elements in 4 packed registers per thread."""
    if bits != 16:
        raise LayoutError(f"register A fragments are modeled for 16-bit types only, not {bits}-bit")
    return Fragment("wgmma.m64k16.A.f16", 64, 16, _WARPGROUP_THREADS,
                    (Mode(2, 0, 1), Mode(2, 8, 0), Mode(2, 0, 8)), value_bits=16)


def _split_linear(size: int, stride: int, cols: int) -> list[Mode]:
    """Modes for a digit of ``size`` values at linear (row-major) element stride ``stride``."""
    if size == 1:
        return []
    if stride % cols == 0:
        return [Mode(size, stride // cols, 0)]
    if cols % (stride * size) == 0:
        return [Mode(size, 0, stride)]
    if cols % stride == 0 and size % (cols // stride) == 0:
        inner = cols // stride
        return [Mode(inner, 0, stride), *_split_linear(size // inner, stride * inner, cols)]
    raise LayoutError(f"a digit of {size} values at linear stride {stride} does not fit rows of {cols} elements")


def row_major_by_thread(rows: int, cols: int, threads: int, vector: int = 1, value_bits: int = 32) -> Fragment:
    """Consecutive row-major elements go to consecutive threads, ``vector`` at a time: element
    ``e = row * cols + col`` is held by thread ``(e // vector) % threads`` in slot
    ``(e // (vector * threads)) * vector + e % vector``."""
    total = rows * cols
    if total % (threads * vector):
        raise LayoutError(f"{rows}x{cols} elements do not split into {threads} threads x {vector}-vectors")
    outer = total // (threads * vector)
    tmodes = tuple(_split_linear(threads, vector, cols))
    vmodes = tuple(_split_linear(vector, 1, cols) + _split_linear(outer, vector * threads, cols))
    return Fragment(f"row_major({rows}x{cols}, {threads} threads, vector {vector})", rows, cols,
                    tmodes or (Mode(1, 0, 0),), vmodes or (Mode(1, 0, 0),), value_bits=value_bits).check()


@dataclass(frozen=True)
class RowFragment:
    """A replicated 1-D layout: the row projection of a 2-D :class:`Fragment` (module docstring).

    Thread ``t`` holds ``values_per_thread`` rows in slots ``v``; the row of slot ``v`` of thread ``t`` is
    ``sum_i digit_i(t) * thread_modes[i].row + sum_j digit_j(v) * value_modes[j].row`` (the parent's digits
    with their column steps dropped, and only the value digits that move the row). Thread digits with
    ``row == 0`` are replication digits: the threads that differ only in them hold the same rows.

    Attributes:
        rows: the extent (the parent's rows).
        thread_modes: the parent's thread digits, column steps dropped (``col == 0``).
        value_modes: the parent's value digits that move the row.
        parent_values: the parent's value modes (to map a parent slot to its row slot, :meth:`slot_of`).
        value_bits: bits of one element.
        name: for messages (not part of the layout's identity).
    """

    rows: int
    thread_modes: tuple[Mode, ...]
    value_modes: tuple[Mode, ...]
    value_bits: int = 32
    name: str = field(default="", compare=False)

    cols = 1
    """A row fragment is a ``rows x 1`` tile: element ``i`` is at ``(i, 0)``, row-major position ``i``."""

    @property
    def num_threads(self) -> int:
        return math.prod(m.size for m in self.thread_modes)

    @property
    def values_per_thread(self) -> int:
        return math.prod(m.size for m in self.value_modes)

    @property
    def values_per_register(self) -> int:
        return 1

    @property
    def registers_per_thread(self) -> int:
        return -(-self.values_per_thread * self.value_bits // 32)

    def coord(self, thread: int, value: int) -> tuple[int, int]:
        """``(row, 0)`` of slot ``value`` of thread ``thread``."""
        if not (0 <= thread < self.num_threads and 0 <= value < self.values_per_thread):
            raise IndexError(f"{self.name}: (thread {thread}, slot {value}) outside {self.num_threads} threads x "
                             f"{self.values_per_thread} slots")
        return Fragment._digits(thread, self.thread_modes)[0] + Fragment._digits(value, self.value_modes)[0], 0

    def elements(self, thread: int) -> list[tuple[int, int, int]]:
        """``[(slot, row, 0)]`` of every row ``thread`` holds, slot order."""
        return list(_elements(self, thread))

    def owners(self, row: int) -> tuple[int, ...]:
        """Every thread holding element ``row`` (its replicas), ascending."""
        if not 0 <= row < self.rows:
            raise IndexError(f"{self.name}: row {row} outside {self.rows}")
        return _row_owners(self)[row]

    def slot(self, thread: int, row: int) -> int | None:
        """The slot in which ``thread`` holds ``row`` (``None``: it holds no replica)."""
        for v, r, _c in self.elements(thread):
            if r == row:
                return v
        return None

    def _replication(self) -> tuple[tuple[int, int], ...]:
        """``(divisor, size)`` of each replication digit of the thread index (a digit that moves no row)."""
        out, div = [], 1
        for m in self.thread_modes:
            if m.size > 1 and not m.row:
                out.append((div, m.size))
            div *= m.size
        return tuple(out)

    def first_replica(self, thread: int) -> bool:
        """Whether ``thread`` is the first (lowest-numbered) replica of every row it holds: each replication digit
        of its index is 0 (a digit's steps are positive, so zeroing it lowers the index)."""
        return all((thread // div) % size == 0 for div, size in self._replication())

    def first_replica_expr(self, thread: str) -> str:
        """C condition: the thread whose index in the layout is the C expression ``thread`` is the first replica
        of its rows (:meth:`first_replica`)."""
        terms = [f"((({thread}) / {div}) % {size} == 0)" if div > 1 else f"(({thread}) % {size} == 0)"
                 for div, size in self._replication()]
        return " && ".join(terms) or "true"

    def slot_of(self, parent_value: int, parent_modes: tuple[Mode, ...]) -> int:
        """The row slot holding the row of parent slot ``parent_value`` (a literal for every thread: the row
        slot is the parent slot's row-moving value digits)."""
        x, out, mul = parent_value, 0, 1
        for m in parent_modes:
            x, d = divmod(x, m.size)
            if m.row:
                out += d * mul
                mul *= m.size
        return out

    def shuffle_lanes(self) -> tuple[int, ...]:
        """The ``shfl.sync.bfly`` lane masks that combine the replicas of every row (module docstring):
        one mask per bit of each replication digit, lowest first.

        Raises:
            LayoutError: a replication digit is not a power of two, or its lanes are not in one warp.
        """
        out: list[int] = []
        div = 1
        for m in self.thread_modes:
            if m.row == 0 and m.size > 1:
                if m.size & (m.size - 1):
                    raise LayoutError(f"{self.name}: {m.size} replicas of a row (not a power of two) cannot be combined "
                                      "by butterfly shuffles")
                if div * m.size > 32:
                    raise LayoutError(f"{self.name}: the replicas of a row differ in thread-index steps of {div} up to "
                                      f"{div * m.size}, beyond one warp (shfl.sync exchanges values within a warp "
                                      "only)")
                b = 1
                while b < m.size:
                    out.append(div * b)
                    b *= 2
            div *= m.size
        return tuple(out)

    def warp_lanes(self) -> tuple[int, ...]:
        """The ``shfl.sync.bfly`` lane masks that combine the replicas of a row *within a warp* (the
        replication digits below 32 threads, lowest first); the digits at or above 32 threads are the
        :meth:`cross_warp_groups` (an N split over warpgroups: a row's replicas in several warpgroups).

        Raises:
            LayoutError: a replication digit is not a power of two, or straddles the warp's boundary.
        """
        out: list[int] = []
        for div, size in self._replication_digits():
            if div >= 32:
                continue
            if size & (size - 1):
                raise LayoutError(f"{self.name}: {size} replicas of a row (not a power of two) cannot be combined "
                                  "by butterfly shuffles")
            if div * size > 32:
                raise LayoutError(f"{self.name}: a replication digit of thread-index steps {div} up to {div * size} "
                                  "straddles a warp's boundary (shfl.sync exchanges values within a warp only)")
            b = 1
            while b < size:
                out.append(div * b)
                b *= 2
        return tuple(out)

    def cross_warp_digits(self) -> tuple[tuple[int, int], ...]:
        """``(thread-index step, size)`` of each replication digit at or above one warp (32 threads)."""
        return tuple((div, size) for div, size in self._replication_digits() if div >= 32)

    @property
    def cross_warp_groups(self) -> int:
        """How many warp-level replica groups each row has (1: every replica of a row is in one warp)."""
        return math.prod(size for _div, size in self.cross_warp_digits())

    def cross_warp_group(self, thread: int) -> int:
        """The index of ``thread``'s replica group among :attr:`cross_warp_groups` (mixed radix of its
        cross-warp replication digits, the lowest first)."""
        out, mul = 0, 1
        for div, size in self.cross_warp_digits():
            out += (thread // div % size) * mul
            mul *= size
        return out

    def _replication_digits(self) -> tuple[tuple[int, int], ...]:
        out, div = [], 1
        for m in self.thread_modes:
            if m.row == 0 and m.size > 1:
                out.append((div, m.size))
            div *= m.size
        return tuple(out)

    def problems(self) -> list[str]:
        """Why this is not a row projection ([] if it is): every row held, a thread's slots hold distinct
        rows, and every row has the same number of replicas (the replication digits' product)."""
        return list(_row_problems(self))

    def _problems(self) -> list[str]:
        reps = math.prod(m.size for m in self.thread_modes if m.row == 0)
        table = _row_owners(self)
        for t in range(self.num_threads):
            rs = [r for _v, r, _c in self.elements(t)]
            if len(set(rs)) != len(rs):
                return [f"thread {t} holds a row twice"]
            if any(not 0 <= r < self.rows for r in rs):
                return [f"thread {t} holds a row outside [0, {self.rows})"]
        for r, own in enumerate(table):
            if len(own) != reps:
                return [f"row {r} has {len(own)} replicas, expected {reps}"]
        return []

    def check(self) -> "RowFragment":
        problems = self.problems()
        if problems:
            raise LayoutError(f"row fragment {self.name}: " + "; ".join(problems))
        return self

    def with_bits(self, bits: int) -> "RowFragment":
        return RowFragment(self.rows, self.thread_modes, self.value_modes, bits, self.name)

    def coord_expr(self, thread: str, value: int) -> tuple[str, str]:
        """C expressions for ``(row, col)`` of slot ``value`` of the thread ``thread`` (as
        :meth:`Fragment.coord_expr`; the column is ``0``)."""
        tv = Fragment(self.name, self.rows, 1, self.thread_modes, self.value_modes or (Mode(1, 0, 0),),
                      self.value_bits)
        return tv.coord_expr(thread, value)[0], "0"


@functools.lru_cache(maxsize=256)
def _row_problems(f: RowFragment) -> tuple[str, ...]:
    # a function of the layout alone (the name is not part of a RowFragment's identity, nor of its problems)
    return tuple(f._problems())


@functools.lru_cache(maxsize=64)
def _row_owners(f: RowFragment) -> tuple[tuple[int, ...], ...]:
    table: list[list[int]] = [[] for _ in range(f.rows)]
    for t in range(f.num_threads):
        for _v, r, _c in f.elements(t):
            if 0 <= r < f.rows:
                table[r].append(t)
    return tuple(tuple(x) for x in table)


def row_projection(f: Fragment, value_bits: int | None = None) -> RowFragment:
    """The row projection of 2-D fragment ``f`` (module docstring): element ``i`` on every thread holding
    an element of row ``i``.

    Raises:
        LayoutError: a digit of ``f`` moves both the row and the column (rows are not independent of the
            column), or the result is not a row projection.
    """
    for m in (*f.thread_modes, *f.value_modes):
        if m.size > 1 and m.row and m.col:
            raise LayoutError(f"{f.name}: digit {m} moves both row and column; its rows have no projection")
    tmodes = tuple(Mode(m.size, m.row, 0) for m in f.thread_modes)
    vmodes = tuple(Mode(m.size, m.row, 0) for m in f.value_modes if m.row and m.size > 1)
    bits = f.value_bits if value_bits is None else value_bits
    return RowFragment(f.rows, tmodes, vmodes, bits, f"rows of {f.name}").check()


def row_slot_map(f: Fragment) -> tuple[int, ...]:
    """For each slot of ``f``, the slot of its row in :func:`row_projection` ``(f)``."""
    rp = row_projection(f)
    return tuple(rp.slot_of(v, f.value_modes) for v in range(f.values_per_thread))
