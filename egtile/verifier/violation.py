"""What the verifier reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

Property: TypeAlias = Literal["L1", "L2", "L3", "L4", "L5", "L6", "L7", "L8", "L9", "L10", "L11"]

PROPERTIES: dict[str, str] = {
    "L1": "read after write",
    "L2": "write after read or write",
    "L3": "barrier counts",
    "L4": "barrier phase",
    "L5": "effects of replicated code",
    "L6": "proxy fences",
    "L7": "divergence",
    "L8": "resources",
    "L9": "versioned statements",
    "L10": "dispatch order",
    "L11": "statement coverage",
}


@dataclass(frozen=True)
class Violation:
    """One failed legality property of a schedule.

    Attributes:
        property: ``"L1"`` .. ``"L11"`` (see :data:`PROPERTIES` and ``docs/soundness.md``).
        message: what is wrong, with expected and actual values, in words.
        sids: the statements involved (tile-IR sids, or the scheduled construct's sid).
        buffer: the buffer concerned, if any.
        barrier: the mbarrier (or ``"bar.sync <id>"``) concerned, if any.
        stage: the stage (barrier index / buffer version) concerned, if any.
        block: the grid index of the block where it was found, if it depends on the block.
    """

    property: Property
    message: str
    sids: tuple[int, ...] = ()
    buffer: str | None = None
    barrier: str | None = None
    stage: int | None = None
    block: tuple[int, ...] | None = None

    def key(self) -> tuple:
        """Identity for de-duplication: one report per property, statements, buffer and barrier."""
        return (self.property, self.sids, self.buffer, self.barrier)

    def __str__(self) -> str:
        bits = []
        if self.sids:
            bits.append("sid " + ", ".join(map(str, self.sids)))
        if self.buffer:
            bits.append(f"buffer {self.buffer}")
        if self.barrier:
            bits.append(f"barrier {self.barrier}" + (f"[{self.stage}]" if self.stage is not None else ""))
        elif self.stage is not None:
            bits.append(f"stage {self.stage}")
        where = f" ({'; '.join(bits)})" if bits else ""
        return f"{self.property} {PROPERTIES[self.property]}{where}: {self.message}"
