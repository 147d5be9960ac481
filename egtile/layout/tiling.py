"""How a ``T.gemm`` accumulator tile is spread over consumer warpgroups and wgmma instructions.

One ``wgmma.mma_async.m64nNk16`` instruction computes a 64 x N block of D, held by the 128 threads of one
warpgroup in the layout of :func:`~egtile.layout.fragment.wgmma_accumulator` (PTX ISA 9.7.15.5.1.1.1,
"Matrix Fragments for wgmma.mma_async.m64nNk16"): M per warpgroup instruction is 64, N is a multiple of 8
in [8, 256] (9.7.15.5.1.1, "Matrix Shape"). A ``rows x cols`` accumulator over ``W`` consumer warpgroups is
tiled in one of two ways (an :class:`AccumulatorTiling`):

* ``split="M"``: warpgroup ``w`` owns rows ``[w * rows/W, (w+1) * rows/W)`` and every column; it holds
  ``rows / (64 W)`` blocks of 64 rows, each of ``cols / n`` instructions of width ``n``;
* ``split="N"``: warpgroup ``w`` owns columns ``[w * cols/W, (w+1) * cols/W)`` and every row; ``rows / 64``
  row blocks of ``cols / (W n)`` instructions.

``n`` is the widest multiple of 8 up to 256 that divides the warpgroup's columns (fewer, wider
instructions read A from shared memory fewer times). The whole tile is one :class:`Fragment` over
``128 W`` threads (thread ``t`` is lane ``t % 128`` of warpgroup ``t // 128``) whose value slots are, fastest
first, the ``n / 2`` registers of one instruction, then the instruction's column block, then its row
block: instruction ``(mi, ni)`` of a warpgroup owns slots ``[(mi * n_blocks + ni) * n/2, ... + n/2)``, so
the codegen hands each instruction a contiguous ``float[n/2]`` slice of the thread's register array.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from egtile.layout.errors import LayoutError
from egtile.layout.fragment import _WARPGROUP_THREADS, WARPGROUP_THREADS, Fragment, Mode
from egtile.layout.smem import M_PER_WARPGROUP, N_MAX

Split = Literal["M", "N"]
SPLITS: tuple[Split, ...] = ("M", "N")


def widest_n(cols: int) -> int:
    """The widest wgmma N (a multiple of 8 up to 256) dividing ``cols``; 0 if none (``cols % 8 != 0``)."""
    for n in range(min(N_MAX, cols) // 8 * 8, 0, -8):
        if cols % n == 0:
            return n
    return 0


@dataclass(frozen=True)
class AccumulatorTiling:
    """A ``rows x cols`` f32 accumulator over ``warpgroups`` consumer warpgroups (module docstring)."""

    rows: int
    cols: int
    warpgroups: int
    split: Split
    n: int

    @staticmethod
    def of(rows: int, cols: int, warpgroups: int, split: Split) -> "AccumulatorTiling":
        """The tiling with the widest instruction for this split (its :meth:`problems` may be non-empty)."""
        wg_cols = cols // warpgroups if split == "N" and warpgroups else cols
        return AccumulatorTiling(rows, cols, warpgroups, split, widest_n(wg_cols))

    # -- shape

    @property
    def threads(self) -> int:
        return WARPGROUP_THREADS * self.warpgroups

    @property
    def wg_rows(self) -> int:
        """Rows one warpgroup owns."""
        return self.rows // self.warpgroups if self.split == "M" else self.rows

    @property
    def wg_cols(self) -> int:
        """Columns one warpgroup owns."""
        return self.cols // self.warpgroups if self.split == "N" else self.cols

    @property
    def m_blocks(self) -> int:
        """64-row instruction blocks per warpgroup."""
        return self.wg_rows // M_PER_WARPGROUP

    @property
    def n_blocks(self) -> int:
        """Instruction column blocks per warpgroup."""
        return self.wg_cols // self.n if self.n else 0

    @property
    def instructions(self) -> int:
        """wgmma instructions per warpgroup per k16 step."""
        return self.m_blocks * self.n_blocks

    @property
    def registers_per_thread(self) -> int:
        """f32 accumulator registers each consumer thread holds."""
        return self.rows * self.cols // max(1, self.threads)

    @property
    def code(self) -> str:
        """Short name (``"M256"``: M split, n = 256), as the schedule and the e-graph spell it."""
        return f"{self.split}{self.n}"

    @staticmethod
    def from_code(code: str, rows: int, cols: int, warpgroups: int) -> "AccumulatorTiling":
        split, n = code[0], int(code[1:])
        if split not in SPLITS:
            raise LayoutError(f"accumulator tiling code {code!r}: expected M<n> or N<n>")
        return AccumulatorTiling(rows, cols, warpgroups, split, n)  # type: ignore[arg-type]

    def problems(self) -> list[str]:
        """Why this is not a tiling wgmma can compute ([] if it is)."""
        out: list[str] = []
        if self.warpgroups < 1:
            return [f"{self.warpgroups} consumer warpgroups"]
        if self.split not in SPLITS:
            return [f"split {self.split!r}: expected 'M' or 'N'"]
        if self.split == "M" and self.rows % (M_PER_WARPGROUP * self.warpgroups):
            out.append(f"{self.rows} rows do not split into {self.warpgroups} warpgroups of 64-row blocks "
                       f"(wgmma M is 64 per warpgroup)")
        if self.split == "N" and (self.rows % M_PER_WARPGROUP or self.cols % self.warpgroups):
            out.append(f"{self.rows}x{self.cols} does not split by columns over {self.warpgroups} warpgroups with "
                       f"64-row blocks")
        if not (8 <= self.n <= N_MAX and self.n % 8 == 0) or self.wg_cols % max(1, self.n):
            out.append(f"{self.wg_cols} columns per warpgroup: wgmma N must be a multiple of 8 in [8, {N_MAX}] "
                       f"dividing it (n = {self.n})")
        return out

    # -- instructions

    def slot0(self, mi: int, ni: int) -> int:
        """First value slot of instruction ``(mi, ni)`` (its ``n / 2`` registers follow)."""
        return (mi * self.n_blocks + ni) * (self.n // 2)

    def origin(self, wg: int, mi: int, ni: int) -> tuple[int, int]:
        """Tile coordinates of the first element of instruction ``(mi, ni)`` of warpgroup ``wg``."""
        r0 = (wg * self.wg_rows if self.split == "M" else 0) + mi * M_PER_WARPGROUP
        c0 = (wg * self.wg_cols if self.split == "N" else 0) + ni * self.n
        return r0, c0

    def fragment(self) -> Fragment:
        """The whole tile as one fragment over ``128 W`` threads (module docstring for the slot order).

        Raises:
            LayoutError: :meth:`problems` is not empty.
        """
        problems = self.problems()
        if problems:
            raise LayoutError(f"accumulator tiling {self}: " + "; ".join(problems))
        wg = Mode(self.warpgroups, self.wg_rows, 0) if self.split == "M" else Mode(self.warpgroups, 0, self.wg_cols)
        values = (Mode(2, 0, 1), Mode(2, 8, 0), Mode(self.n // 8, 0, 8), Mode(self.n_blocks, 0, self.n),
                  Mode(self.m_blocks, M_PER_WARPGROUP, 0))
        name = f"wgmma.acc({self.rows}x{self.cols}, {self.warpgroups} wg, {self.split} split, n{self.n})"
        threads = tuple(m for m in (*_WARPGROUP_THREADS, wg) if m.size > 1)
        return Fragment(name, self.rows, self.cols, threads, tuple(m for m in values if m.size > 1), value_bits=32)


__all__ = ["SPLITS", "AccumulatorTiling", "Split", "widest_n"]
