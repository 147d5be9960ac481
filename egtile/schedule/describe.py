"""One-line descriptions of tile-IR statements for messages and ``explain()``."""

from __future__ import annotations

import os

from egtile.ir import For, If, Stmt
from egtile.ir.printer import format_loop_head, format_stmt, parallel_nest


def describe(stmt: Stmt) -> str:
    """``"`T.copy(A[...], A_shared)` (sid 3, seed.py:57)"``; loop heads without their trailing colon
    (every dimension of a multi-dimensional ``T.Parallel``), with a hint of a one-statement body."""
    if isinstance(stmt, For):
        head = format_loop_head(stmt).rstrip(":")
        _, body = parallel_nest(stmt)
        if len(body) == 1 and not isinstance(body[0], (For, If)):
            head = f"{head}: {format_stmt(body[0])}"
    else:
        head = format_stmt(stmt).rstrip(":")
    where = f"sid {stmt.sid}"
    if stmt.loc is not None:
        where += f", {os.path.basename(stmt.loc.file)}:{stmt.loc.line}"
    return f"`{head}` ({where})"
