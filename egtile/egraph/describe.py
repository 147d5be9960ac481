"""One-line descriptions of tile-IR statements for messages and ``explain()``."""

from __future__ import annotations

import os

from egtile.ir import For, If, Stmt
from egtile.ir.printer import format_stmt


def describe(stmt: Stmt) -> str:
    """``"`T.copy(A[...], A_shared)` (sid 3, seed.py:57)"``; loop heads without their trailing colon,
    with a hint of the body for ``T.Parallel`` loops."""
    head = format_stmt(stmt).rstrip(":")
    if isinstance(stmt, For) and stmt.body and len(stmt.body) == 1 and not isinstance(stmt.body[0], (For, If)):
        head = f"{head}: {format_stmt(stmt.body[0])}"
    where = f"sid {stmt.sid}"
    if stmt.loc is not None:
        where += f", {os.path.basename(stmt.loc.file)}:{stmt.loc.line}"
    return f"`{head}` ({where})"
