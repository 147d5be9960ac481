"""Scheduling by equality saturation: egglog sorts and fact tables (:mod:`.schema`), encoding of
``ir.Kernel`` (:mod:`.encode`), staged saturation with limits (:mod:`.saturate`), decoding of extracted
terms (:mod:`.decode`), the cost model (:mod:`.cost`), the explanation of what was chosen and rejected
(:mod:`.explain`) and the driver that runs them (:mod:`.driver`, ``egtile.optimize``). The extracted tree
is lowered to ``ir.Scheduled`` by :mod:`egtile.lower`.

Names are re-exported lazily: the rule modules import :mod:`.schema` while :mod:`.encode` imports the
rule API, and a lazy package keeps that cycle-free.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Block": "schema", "Stmt": "schema",
    "Encoding": "encode", "build_terms": "encode", "encode": "encode",
    "Limits": "saturate", "StageReport": "saturate", "run_stage": "saturate",
    "Node": "decode", "decode_kernel": "decode", "to_list": "decode", "to_node": "decode",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"egtile.schedule.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'egtile.schedule' has no attribute {name!r}")


__all__ = [
    "Block", "Encoding", "Limits", "Node", "StageReport", "Stmt", "build_terms", "decode_kernel", "encode",
    "run_stage", "to_list", "to_node",
]
