"""Reading a table of primitive-valued rows (``diag``) out of the e-graph quickly.

``EGraph.function_values`` rebuilds a Python egglog expression per row (about a millisecond each); the
``diag`` table of a 50-statement kernel has hundreds of rows. egglog's ``print-function`` command can
write a table as CSV instead, which egtile parses directly. That command is reached through
egglog-python's low-level bindings (``egglog.bindings.PrintFunction``) and two private helpers of
``EGraph``; if they change, :func:`rows` falls back to ``function_values``.
"""

from __future__ import annotations

import csv
import os
from typing import Any

from egglog import EGraph, bindings, get_callable_args, get_literal_value


def _cell(text: str) -> int | str:
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return text[1:-1]
    try:
        return int(text)
    except ValueError:
        return text


def _rows_csv(egraph: EGraph, fn: Any, arity: int) -> list[tuple]:
    _, name = egraph._callable_to_egg(fn)
    span = bindings.PanicSpan()
    from egtile.schedule.encode import scratch_dir

    path = os.path.join(scratch_dir(), f"rows-{name}.csv")
    try:
        egraph._run_program(bindings.PrintFunction(span, name, None, path, bindings.CSVPrintFunctionMode()))
        if not os.path.exists(path):
            return []
        with open(path, newline="", encoding="utf-8") as f:
            return [tuple(_cell(c) for c in row[1:1 + arity]) for row in csv.reader(f) if row]
    finally:
        if os.path.exists(path):
            os.unlink(path)


def _rows_slow(egraph: EGraph, fn: Any) -> list[tuple]:
    return [tuple(get_literal_value(a) for a in get_callable_args(k)) for k in egraph.function_values(fn)]


def rows(egraph: EGraph, fn: Any, arity: int) -> list[tuple]:
    """Every row of relation ``fn`` (``arity`` primitive columns) as a tuple of ``int`` / ``str``."""
    try:
        return _rows_csv(egraph, fn, arity)
    except (AttributeError, TypeError):
        return _rows_slow(egraph, fn)
