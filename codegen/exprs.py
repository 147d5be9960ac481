"""Scalar expressions of the tile IR as C expressions.

Typing is :func:`egtile.evaluate.dtype_of` / :func:`egtile.evaluate.promote`, the element-wise semantics
the interpreter and the simulator share, so that the GPU computes what the oracle computes, bit for bit
(``docs/language.md``, "Arithmetic"): C's usual arithmetic conversions (any float beats any integer, the
wider float wins, ``float16`` with ``bfloat16`` gives ``float32``, two integers give the wider one's width
without C's promotion to ``int``: TVM's rule, so a result narrower than 32 bits is wrapped back to its type);
comparisons and logic give ``bool``; math intrinsics of integers give ``float32``.

Arithmetic follows C: integer ``/`` truncates toward zero and ``%`` takes the dividend's sign; ``//``
floors (``eg_floordiv``: ``floorf`` of the float32 quotient for floats); float ``%`` is ``fmod``; float
``min``/``max`` are IEEE 754-2019 minimumNumber/maximumNumber (``eg_min``/``eg_max``: a NaN operand is
ignored, ``-0 < +0``); shifts by a count outside ``[0, width)`` clamp as PTX ``shl``/``shr`` do
(``eg_shl``/``eg_shr``). ``float16``/``bfloat16``/float8 arithmetic is done in float32 and rounded once to the
result type, which equals correctly rounded binary16/bfloat16 arithmetic for ``+ - * /`` and ``sqrt``
(binary32 has more than 2p+2 significand bits). NVRTC runs with ``--fmad=false`` so ``a * b + c`` rounds
twice, as the oracle does. Math intrinsics below float64 are CUDA's float32 functions
(``eg_exp`` ...: each declared in :mod:`egtile.mathfns` with its helper and its ulp bound against the correctly
rounded value the oracle computes).
"""

from __future__ import annotations

import math
from functools import reduce

import numpy as np

from egtile.analysis.decide import decide
from egtile.evaluate import dtype_of, promote, round_to
from egtile.ir.dtypes import dtype
from egtile.ir.kernel import AddressOf, BinOp, Buffer, Cast, Const, Expr, Load, Select, UnOp, Var
from egtile.mathfns import binary, unary

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.names import ident

PTR = "pointer"
_CMP = {"==", "!=", "<", "<=", ">", ">="}
_LOGIC = {"and": "&&", "or": "||"}
_PLAIN = {"+", "-", "*", "&", "|", "^", "<<", ">>"}
_LOWP = {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"}


def ctype(name: str) -> str:
    """CUDA C++ spelling of dtype ``name``."""
    return dtype(name).ctype


def type_of(e: Expr, ctx: Ctx) -> str:
    """The canonical dtype name of ``e`` (``"pointer"`` for ``AddressOf``)."""
    if isinstance(e, AddressOf):
        return PTR
    try:
        return dtype(dtype_of(e)).name
    except TypeError:
        raise codegen_error(ctx, f"unknown expression node {type(e).__name__}") from None


def _promoted(a: Expr, b: Expr, ctx: Ctx) -> str:
    return dtype(promote(type_of(a, ctx), type_of(b, ctx))).name


# ----------------------------------------------------------------------------------------------------
# literals and indices


def literal(value: int | float | bool, dt: str) -> str:
    """C literal of ``value`` as dtype ``dt`` (infinities and NaN through bit patterns)."""
    d = dtype(dt)
    if d.kind == "bool":
        return "true" if value else "false"
    if d.kind in ("int", "uint"):
        v = int(value)
        suffix = {(32, "int"): "", (64, "int"): "LL", (32, "uint"): "u", (64, "uint"): "ull"}.get((d.bits, d.kind))
        if suffix is None:
            return f"(({d.ctype}){v})"
        if d.kind == "int" and v == -(2 ** (d.bits - 1)):
            return f"({v + 1}{suffix} - 1{suffix})"
        return f"({v}{suffix})" if v < 0 else f"{v}{suffix}"
    x = float(value)
    # a negative literal, -0.0 included, is parenthesized: `-(-0.0f)` must not become `--0.0f`
    if d.name == "float64":
        if math.isfinite(x):
            return f"({x!r})" if math.copysign(1.0, x) < 0 else repr(x)
        bits = int(np.array(x, dtype=np.float64).view(np.uint64))
        return f"__longlong_as_double({bits:#x}LL)"
    f32 = float(np.float32(x))
    if math.isfinite(f32):
        text = repr(f32) + "f"
        text = f"({text})" if math.copysign(1.0, f32) < 0 else text
    else:
        bits = int(np.array(f32, dtype=np.float32).view(np.uint32))
        text = f"__int_as_float({bits:#x})"
    return text if d.name == "float32" else f"eg_cast<{d.ctype}>({text})"


def known_multiple(e: Expr) -> int:
    """A positive integer known to divide every value of integer expression ``e`` (``0``: ``e`` is 0).

    Used for alignment proofs (TMA and cp.async addresses); conservative: 1 when nothing is known.
    """
    match e:
        case Const(value=v) if isinstance(v, (int, bool)) and not isinstance(v, float):
            return abs(int(v))
        case BinOp(op="+" | "-", a=a, b=b):
            return math.gcd(known_multiple(a), known_multiple(b))
        case BinOp(op="*", a=a, b=b):
            return known_multiple(a) * known_multiple(b)
        case BinOp(op="<<", a=a, b=Const(value=v)) if isinstance(v, int) and 0 <= v < 31:
            return known_multiple(a) << v
        case Cast(value=v, bitcast=False) if dtype(e.dtype).kind in ("int", "uint"):
            return known_multiple(v)
        case _:
            return 1


def _term(code: str, stride: int) -> str:
    if code == "0" or stride == 0:
        return ""
    return code if stride == 1 else f"({code}) * {stride}"


def flat_index(buf: Buffer, indices: tuple[str, ...], ctx: Ctx) -> str:
    """Flat element index of ``buf[indices]`` (indices already emitted as C) in the kernel's layout (a
    swizzled shared buffer through its swizzle, :func:`egtile.codegen.layout.swizzle_index`)."""
    if buf.scope == "shared" and buf.layout != "linear":
        from egtile.codegen.layout import swizzle_index

        return swizzle_index(buf, indices, ctx.strides(buf)[0] if len(buf.shape) == 3 else None)
    terms = [t for t in (_term(c, s) for c, s in zip(indices, ctx.strides(buf))) if t]
    return " + ".join(terms) if terms else "0"


def element(buf_name: str, indices: tuple[Expr, ...], ctx: Ctx) -> str:
    """C lvalue of one element ``buf_name[indices]`` of a scheduled buffer or parameter (an element a
    substitution of ``ctx.loads`` names is that C lvalue: a register fragment's slot in a by-layout loop).

    Raises:
        CodegenError: a register fragment accessed where no layout names the element's slot.
    """
    for ld, text in ctx.loads:
        if isinstance(ld, Load) and ld.buffer.name == buf_name and tuple(ld.indices) == tuple(indices):
            return text
    if ctx.sched.fragment(buf_name) is not None:
        raise codegen_error(ctx, f"register fragment {buf_name!r} is accessed at {tuple(indices)} outside a statement "
                                 "that runs by its layout (only its element's owner holds it)")
    buf = ctx.buffer(buf_name)
    if len(indices) != len(buf.shape):
        raise codegen_error(ctx, f"buffer {buf_name!r} of shape {buf.shape} indexed with {len(indices)} indices; "
                                 f"expected {len(buf.shape)} (staged buffers take the stage index first)")
    return f"{ident(buf_name)}[{flat_index(buf, tuple(emit(i, ctx) for i in indices), ctx)}]"


# ----------------------------------------------------------------------------------------------------
# emission


def emit_as(e: Expr, want: str, ctx: Ctx) -> str:
    """``e`` converted to dtype ``want`` (C code)."""
    have = type_of(e, ctx)
    if isinstance(e, Const) and have != PTR:
        # the constant's value is its own dtype's (a float16 0.1 is 0.0999755859375, as the oracle has
        # it), then converted to ``want`` as a runtime cast would
        return literal(round_to(e.dtype, e.value), want)
    code = emit(e, ctx)
    return code if have == want else f"eg_cast<{ctype(want)}>({code})"


def _compute_type(t: str) -> str:
    return "float32" if t in _LOWP else t


def _wrapped(code: str, res: str) -> str:
    """``code`` (C arithmetic on operands of dtype ``res``) as a value of ``res``. C computes an integer
    narrower than ``int`` in ``int``; the IR's result keeps the operands' width (TVM's rule,
    :func:`egtile.evaluate.promote`), so the result is wrapped back to it (``uint8 << uint8`` is a uint8)."""
    d = dtype(res)
    return f"(({d.ctype})({code}))" if d.kind in ("int", "uint") and d.bits < 32 else code


def _emit_binop(e: BinOp, ctx: Ctx) -> str:
    if e.op in _LOGIC:
        return f"({emit_as(e.a, 'bool', ctx)} {_LOGIC[e.op]} {emit_as(e.b, 'bool', ctx)})"
    if e.op in _CMP:
        t = _compute_type(_promoted(e.a, e.b, ctx))
        return f"({emit_as(e.a, t, ctx)} {e.op} {emit_as(e.b, t, ctx)})"
    if e.op in ("<<", ">>"):
        res = type_of(e, ctx)
        a = emit_as(e.a, res, ctx)
        count = e.b.value if isinstance(e.b, Const) and not isinstance(e.b.value, (bool, float)) else None
        if count is not None and 0 <= count < dtype(res).bits:
            return _wrapped(f"({a} {e.op} {emit(e.b, ctx)})", res)
        # counts outside [0, width) (or unknown) clamp as PTX shl/shr do (egtile.evaluate._shift_count)
        return f"eg_{'shl' if e.op == '<<' else 'shr'}({a}, (long long)({emit(e.b, ctx)}))"
    res = type_of(e, ctx)
    t = _compute_type(res)
    a, b = emit_as(e.a, t, ctx), emit_as(e.b, t, ctx)
    is_float = dtype(t).kind == "float"
    match e.op:
        case "min" | "max":
            code = f"eg_{e.op}<{ctype(t)}>({a}, {b})"
        case op if (fn := binary(op)) is not None:
            code = f"{fn.cuda}({a}, {b})"
        case "//":
            code = f"eg_floordiv({a}, {b})" if is_float else f"eg_floordiv<{ctype(t)}>({a}, {b})"
        case "%" if is_float:
            code = f"eg_rem({a}, {b})"
        case "floormod":
            code = f"eg_floormod({a}, {b})" if is_float else f"eg_floormod<{ctype(t)}>({a}, {b})"
        case "/" | "%":
            code = f"({a} {e.op} {b})"
        case op if op in _PLAIN:
            code = f"({a} {op} {b})"
        case _:
            raise codegen_error(ctx, f"unknown binary operator {e.op!r}")
    return _wrapped(code, res) if t == res else f"eg_cast<{ctype(res)}>({code})"


def _emit_unop(e: UnOp, ctx: Ctx) -> str:
    if e.op == "not":
        return f"(!{emit_as(e.a, 'bool', ctx)})"
    res = type_of(e, ctx)
    fn = unary(e.op)
    if fn is not None and fn.predicate:  # T.isnan / T.isinf: the operand as a float of its precision
        have = type_of(e.a, ctx)
        arg = _compute_type(have) if dtype(have).kind == "float" else "float32"
        return f"{fn.cuda}({emit_as(e.a, arg, ctx)})"
    t = _compute_type(res)
    a = emit_as(e.a, t, ctx)
    match e.op:
        case "-" | "~":
            code = f"({e.op}{a})"
        case "abs":
            code = f"eg_abs({a})"
        case _ if fn is not None:
            code = f"{fn.cuda}({a})"
        case _:
            raise codegen_error(ctx, f"unknown unary operator {e.op!r}")
    return _wrapped(code, res) if t == res else f"eg_cast<{ctype(res)}>({code})"


def emit(e: Expr, ctx: Ctx) -> str:
    """C code of expression ``e`` with the type :func:`type_of` gives."""
    match e:
        case Const(value=v, dtype=t):
            return literal(v, t)
        case Var(name=n):
            for name, text in ctx.vars:
                if name == n:
                    return text
            return ident(n)
        case Load(buffer=b, indices=idx):
            for ld, text in ctx.loads:
                if ld == e:
                    return text
            return element(b.name, idx, ctx)
        case AddressOf(load=Load(buffer=b, indices=idx)):
            return f"(&{element(b.name, idx, ctx)})"
        case Cast(dtype=t, value=v, bitcast=True):  # T.reinterpret: the bits, same width (egtile_common.cuh)
            return f"eg_bitcast<{dtype(t).ctype}>({emit_as(v, dtype(dtype_of(v)).name, ctx)})"
        case Cast(dtype=t, value=v):
            return emit_as(v, dtype(t).name, ctx)
        case Select(cond=c, a=a, b=b):
            t = type_of(e, ctx)
            known = decide(c, ctx.range_map()) if ctx.ranges else None
            if known is not None:  # the enclosing loops' bounds fix the condition: only that branch can run
                return emit_as(a if known else b, t, ctx)
            return f"({emit_as(c, 'bool', ctx)} ? {emit_as(a, t, ctx)} : {emit_as(b, t, ctx)})"
        case BinOp() as b:
            return _emit_binop(b, ctx)
        case UnOp() as u:
            return _emit_unop(u, ctx)
    raise codegen_error(ctx, f"unknown expression node {type(e).__name__}")


def product(xs) -> int:
    return reduce(lambda a, b: a * b, xs, 1)
