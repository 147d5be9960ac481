"""Structural rewriting of tile-IR statements: buffer accesses (for multi-versioned buffers) and variables.

Used by the lowering and by ``egtile.analysis.shared_reuse``; every function returns new frozen IR and leaves
its input untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import assert_never

from egtile.ir import (
    AddressOf,
    AtomicAdd,
    BinOp,
    Buffer,
    Cast,
    Const,
    Copy,
    Expr,
    Extern,
    Fill,
    For,
    Gemm,
    If,
    Load,
    Reduce,
    Region,
    Select,
    Stmt,
    Store,
    UnOp,
    Var,
)

Access = Callable[[Buffer, tuple[Expr, ...]], tuple[Buffer, tuple[Expr, ...]]]


class _Mapper:
    def __init__(self, access: Access | None = None, var: Callable[[Var], Expr] | None = None) -> None:
        self.access = access or (lambda b, idx: (b, idx))
        self.var = var or (lambda v: v)

    def expr(self, e: Expr) -> Expr:
        match e:
            case Const():
                return e
            case Var():
                return self.var(e)
            case BinOp(op=op, a=a, b=b):
                return BinOp(op, self.expr(a), self.expr(b))
            case UnOp(op=op, a=a):
                return UnOp(op, self.expr(a))
            case Cast(dtype=d, value=v, bitcast=bc):
                return Cast(d, self.expr(v), bc)
            case Select(cond=c, a=a, b=b):
                return Select(self.expr(c), self.expr(a), self.expr(b))
            case Load(buffer=b, indices=idx):
                nb, nidx = self.access(b, tuple(self.expr(i) for i in idx))
                return Load(nb, nidx)
            case AddressOf(load=ld):
                out = self.expr(ld)
                assert isinstance(out, Load)
                return replace(e, load=out)
            case _:
                assert_never(e)

    def region(self, r: Region) -> Region:
        offs = tuple(self.expr(o) for o in r.offsets)
        nb, noffs = self.access(r.buffer, offs)
        if nb is r.buffer and noffs == offs:
            return Region(r.buffer, offs, r.extents, r.clip)
        extra = len(noffs) - len(offs)
        return Region(nb, noffs, (1,) * extra + r.extents, r.clip)

    def body(self, stmts: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        return tuple(self.stmt(s) for s in stmts)

    def stmt(self, s: Stmt) -> Stmt:
        match s:
            case Store(buffer=b, indices=idx, value=v):
                nb, nidx = self.access(b, tuple(self.expr(i) for i in idx))
                return replace(s, buffer=nb, indices=nidx, value=self.expr(v))
            case AtomicAdd(buffer=b, indices=idx, value=v):
                nb, nidx = self.access(b, tuple(self.expr(i) for i in idx))
                return replace(s, buffer=nb, indices=nidx, value=self.expr(v))
            case Extern(args=args):
                return replace(s, args=tuple(self.expr(a) for a in args))
            case Copy(src=src, dst=dst):
                return replace(s, src=self.region(src), dst=self.region(dst))
            case Fill(dst=dst, value=v):
                return replace(s, dst=self.region(dst), value=self.expr(v))
            case Gemm(a=a, b=b, c=c):
                return replace(s, a=self.region(a), b=self.region(b), c=self.region(c))
            case Reduce():
                return s
            case For(start=lo, stop=hi, body=body):
                return replace(s, start=self.expr(lo), stop=self.expr(hi), body=self.body(body))
            case If(cond=c, then_body=t, else_body=e):
                return replace(s, cond=self.expr(c), then_body=self.body(t), else_body=self.body(e))
            case _:
                assert_never(s)


def restage(stmt: Stmt, staged: Mapping[str, tuple[Buffer, Expr]]) -> Stmt:
    """``stmt`` with every access of a multi-versioned buffer ``X`` redirected to the staged buffer and
    prefixed with the stage index: ``X[i]`` -> ``X_staged[stage, i]``; a region gains a leading extent-1
    dimension at offset ``stage``.

    Args:
        staged: ``name -> (staged buffer, stage expression)``.
    """
    if not staged:
        return stmt

    def access(b: Buffer, idx: tuple[Expr, ...]) -> tuple[Buffer, tuple[Expr, ...]]:
        hit = staged.get(b.name)
        if hit is None or len(idx) != len(b.shape):
            return b, idx
        nb, stage = hit
        return nb, (stage, *idx)

    return _Mapper(access=access).stmt(stmt)


def rename_buffers(stmt: Stmt, to: Mapping[str, Buffer]) -> Stmt:
    """``stmt`` with every access of a buffer named in ``to`` made to that buffer instead, at the same indices
    (``egtile.analysis.shared_reuse``; a ``T.reduce_*`` operand is left as it is)."""
    if not to:
        return stmt
    return _Mapper(access=lambda b, idx: (to.get(b.name, b), idx)).stmt(stmt)


def substitute(stmt: Stmt, mapping: Mapping[str, Expr]) -> Stmt:
    """``stmt`` with every ``Var`` named in ``mapping`` replaced (simultaneously) by its expression."""
    if not mapping:
        return stmt
    return _Mapper(var=lambda v: mapping.get(v.name, v)).stmt(stmt)


def substitute_expr(e: Expr, mapping: Mapping[str, Expr]) -> Expr:
    """``e`` with the variables named in ``mapping`` replaced."""
    return _Mapper(var=lambda v: mapping.get(v.name, v)).expr(e)
