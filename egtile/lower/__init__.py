"""Lowering of an extracted schedule tree to ``ir.Scheduled``: mechanical, no choices.

* :mod:`.driver`: the tree walk (each decision constructor has one lowering);
* :mod:`.sync`: CTA-barrier placement between dependent cross-thread accesses;
* :mod:`.irmap`: structural rewriting of statements (stage indices, variable substitution);
* :mod:`.phase`: the stage/parity convention of pipelined loops.
"""
