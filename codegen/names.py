"""C identifiers for the names a kernel author chose: an injective mapping per kernel.

Buffer, variable and parameter names come from the user's Python source, so they may be any Python
identifier (``rá``, ``expf``, ``half``, ``u_x``) and collide with C++ keywords, CUDA built-ins, the math
functions and types egtile's generated code and headers name, or egtile's own generated names. The
mapping :func:`ident` is

* **readable**: a plain ASCII identifier that collides with nothing is kept, so the source reads like the
  kernel;
* **injective**: every other name becomes ``u_`` followed by its *encoding*, which keeps ASCII letters and
  digits and writes every other code point ``c`` (``_`` included) as ``Z<hex(c)>_``, and ``Z`` itself as
  ``Z5a_``. The encoding is decodable (an escape starts at ``Z`` and ends at the first ``_``), kept
  names never start with ``u_``, and encoded names always do, so two different names never meet
  (``rá`` -> ``u_rZe1_``, ``ré`` -> ``u_rZe9_``);
* **collision-free**: kept names avoid C++ keywords, the CUDA built-in variables, types and every
  function of the CUDA Math API (a parameter called ``expf`` would shadow the ``expf`` that ``T.exp``
  emits), the names egtile's headers and generated code use (prefixes ``eg_``, ``EG_``), the macros of
  the CUDA headers egtile includes (``CUDART_*``, ``NV_*``), and, per kernel, every identifier of its
  ``T.import_source`` code and its ``T.call_extern`` names (:func:`kernel_scope`);
* **valid C++**: no result contains ``__`` or starts with ``_`` (C++ [lex.name]: such identifiers are
  reserved for the implementation).

:func:`kernel_scope` sets the per-kernel reserved names while one kernel is emitted and checks that the
mapping is injective over every name the kernel declares.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Iterable, Iterator

from egtile.ir.kernel import Extern, walk
from egtile.ir.scheduled import Leaf, Scheduled, SeqLoop, ThreadLoop, swalk

_CXX_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t char32_t char8_t class
compl concept const const_cast consteval constexpr constinit continue co_await co_return co_yield decltype
default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public
register reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch
template this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
wchar_t while xor xor_eq restrict final override import module
""".split())

# CUDA built-in variables, types and functions the generated code, egtile's headers or the CUDA headers
# they include (cuda_fp16.h, cuda_bf16.h, vector_types.h) declare at namespace scope.
_CUDA_BUILTINS = frozenset("""
threadIdx blockIdx blockDim gridDim warpSize clusterDim clusterIdx smem main dim3 half half2 nv_bfloat16
nv_bfloat162 CUtensorMap CUtensorMap_st cuuint64_t cuuint32_t size_t ptrdiff_t nullptr_t intptr_t uintptr_t
int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t uint ushort ulong uchar longlong ulonglong
printf malloc free memcpy memset memcmp assert clock clock64 std cuda nv
atomicAdd atomicSub atomicExch atomicMin atomicMax atomicInc atomicDec atomicCAS atomicAnd atomicOr atomicXor
abs labs llabs min max umin umax llmin llmax ullmin ullmax fabs fabsf isnan isinf isfinite signbit
""".split())

# The CUDA Math API (CUDA Math API reference: single and double precision mathematical functions, half and
# bfloat16 arithmetic and math functions). All are visible in every NVRTC translation unit.
_MATH_STEMS = """
acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh cospi cyl_bessel_i0 cyl_bessel_i1 erf erfc
erfcinv erfcx erfinv exp exp10 exp2 expm1 fabs fdim floor fma fmax fmin fmod frexp hypot ilogb j0 j1 jn ldexp
lgamma llrint llround log log10 log1p log2 logb lrint lround modf nan nearbyint nextafter norm norm3d norm4d
normcdf normcdfinv pow rcbrt remainder remquo rhypot rint rnorm rnorm3d rnorm4d round rsqrt scalbln scalbn sin
sincos sincospi sinh sinpi sqrt tan tanh tgamma trunc y0 y1 yn fdivide
""".split()
_HALF_MATH = """
hexp hexp2 hexp10 hlog hlog2 hlog10 hsqrt hrsqrt hrcp hsin hcos htanh htanh_approx hfloor hceil htrunc hrint
habs hmax hmin hmax_nan hmin_nan hfma hfma_relu hfma_sat hadd hadd_sat hadd_rn hsub hsub_sat hsub_rn hmul hmul_sat
hmul_rn hdiv hneg heq hne hlt hle hgt hge hequ hneu hltu hleu hgtu hgeu hisnan hisinf
""".split()
_MATH = frozenset(_MATH_STEMS) | {s + "f" for s in _MATH_STEMS} | frozenset(_HALF_MATH) \
    | {"h2" + s[1:] for s in _HALF_MATH}

_VECTOR_TYPES = frozenset(f"{base}{n}" for base in ("char", "uchar", "short", "ushort", "int", "uint", "long",
                                                    "ulong", "longlong", "ulonglong", "float", "double")
                          for n in (1, 2, 3, 4))

RESERVED = _CXX_KEYWORDS | _CUDA_BUILTINS | _MATH | _VECTOR_TYPES
"""Names a user identifier never keeps (it is encoded instead)."""

# eg_/EG_: egtile's generated names and header macros; u_: encoded names; CUDART_/NV_/CU/cuda/nv_/make_: the
# CUDA headers' macros, types and vector constructors; a leading underscore is reserved by C++.
RESERVED_PREFIXES = ("_", "eg_", "EG_", "u_", "CUDART_", "NV_", "CU", "cuda", "nv_", "make_")

_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_ALNUM = re.compile(r"[A-Za-z0-9]")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_KERNEL_RESERVED: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("egtile_kernel_reserved",
                                                                                  default=frozenset())


def encode(name: str) -> str:
    """The injective ASCII encoding of ``name``: letters and digits except ``Z`` kept, every other code
    point ``c`` written ``Z<lowercase hex of c>_``. Never contains ``__``, never starts with ``_``."""
    out = []
    for ch in name:
        if ch != "Z" and ch.isascii() and _ALNUM.match(ch):
            out.append(ch)
        else:
            out.append(f"Z{ord(ch):x}_")
    return "".join(out)


def decode(code: str) -> str:
    """The name :func:`encode` maps to ``code`` (its inverse; ``ValueError`` on a malformed encoding)."""
    out, i = [], 0
    while i < len(code):
        if code[i] == "Z":
            end = code.index("_", i)
            out.append(chr(int(code[i + 1:end], 16)))
            i = end + 1
        else:
            out.append(code[i])
            i += 1
    return "".join(out)


def _keeps(name: str, extra: frozenset[str]) -> bool:
    return (bool(_PLAIN.match(name)) and "__" not in name and name not in RESERVED and name not in extra
            and not name.startswith(RESERVED_PREFIXES))


def ident(name: str) -> str:
    """The C identifier for the user's name ``name``: ``name`` itself when it is a plain ASCII identifier
    that collides with nothing (see module docstring), else ``u_`` + :func:`encode` of it."""
    if _keeps(name, _KERNEL_RESERVED.get()):
        return name
    return "u_" + encode(name)


def kernel_symbol(kernel_name: str) -> str:
    """The ``extern "C"`` symbol of the generated kernel (``main`` would clash with C's ``main``):
    ``<name>_kernel`` for a plain name, ``eg_kernel_<encoding>`` otherwise."""
    if _PLAIN.match(kernel_name) and "__" not in kernel_name and not kernel_name.endswith("_"):
        return kernel_name + "_kernel"
    return "eg_kernel_" + encode(kernel_name)


def barrier_ident(name: str) -> str:
    """C name of the mbarrier array ``name`` (a pointer into shared memory): ``eg_bar_<name>`` for the plain
    names the scheduler gives (``full_0``), ``eg_barx_<encoding>`` otherwise (still injective)."""
    if _PLAIN.match(name) and "__" not in name:
        return "eg_bar_" + name
    return "eg_barx_" + encode(name)


def source_identifiers(sources: Iterable[str]) -> frozenset[str]:
    """Every identifier token of ``sources`` (``T.import_source`` code): a user name equal to one of them
    could shadow or be shadowed by what the code declares, so it is encoded."""
    return frozenset(t for src in sources for t in _TOKEN.findall(src))


def check_injective(names: Iterable[str], where: str) -> dict[str, str]:
    """``name -> ident(name)`` for ``names`` under the current kernel scope.

    Raises:
        AssertionError: two names map to one identifier (a bug in this module, never the user's).
    """
    mapping = {n: ident(n) for n in set(names)}
    seen: dict[str, str] = {}
    for n, c in sorted(mapping.items()):
        if c in seen:
            raise AssertionError(f"{where}: C names of {seen[c]!r} and {n!r} are both {c!r}")
        seen[c] = n
    return mapping


@contextlib.contextmanager
def kernel_scope(extra_reserved: Iterable[str], declared: Iterable[str], where: str) -> Iterator[dict[str, str]]:
    """While one kernel is emitted: reserve ``extra_reserved`` (its extern names and ``T.import_source``
    identifiers) and check that :func:`ident` is injective over ``declared`` (every parameter, buffer and
    variable name of the kernel). Yields the mapping."""
    token = _KERNEL_RESERVED.set(frozenset(extra_reserved))
    try:
        yield check_injective(declared, where)
    finally:
        _KERNEL_RESERVED.reset(token)


def declared_names(s: Scheduled) -> set[str]:
    """Every user-chosen name a schedule declares in C: parameters, buffers, block and loop variables.

    Raises:
        CodegenError: a variable has the name of a buffer (both would be one C identifier, and the inner
            declaration would shadow the outer); the tracer never produces this.
    """
    buffers = {p.name for p in s.kernel.params} | {b.name for b in s.buffers}
    variables = {v.name for v in s.kernel.block_vars}
    for st in swalk(s.body):
        if isinstance(st, SeqLoop):
            variables.add(st.var.name)
        elif isinstance(st, ThreadLoop):
            variables.update(v.name for v in st.vars)
    clash = sorted(buffers & variables)
    if clash:
        from egtile.errors import CodegenError

        raise CodegenError(f"kernel {s.kernel.name!r}: {', '.join(map(repr, clash))} names both a buffer and a "
                           "variable; names must be unique within a kernel", s.kernel.loc)
    return buffers | variables


def extern_names(s: Scheduled) -> set[str]:
    """The ``T.call_extern`` callee names of a schedule (and of its kernel)."""
    out = {st.name for st in walk(s.kernel.body) if isinstance(st, Extern)}
    out |= {st.stmt.name for st in swalk(s.body) if isinstance(st, Leaf) and isinstance(st.stmt, Extern)}
    return out


def schedule_scope(s: Scheduled) -> contextlib.AbstractContextManager[dict[str, str]]:
    """:func:`kernel_scope` for schedule ``s``."""
    return kernel_scope(extern_names(s) | source_identifiers(s.kernel.sources), declared_names(s),
                        f"kernel {s.kernel.name!r}")
