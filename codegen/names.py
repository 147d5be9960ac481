"""C identifiers for the names a kernel author chose.

Buffer, variable and parameter names come from the user's Python source, so they may collide with C++
keywords, CUDA built-ins or egtile's own generated names (everything egtile generates starts with
``eg_``). :func:`ident` maps a name to a C identifier deterministically: a name that is already a
valid, unreserved identifier is kept (so the generated source reads like the kernel), anything else
gets the prefix ``u_`` and its invalid characters replaced by ``_``.
"""

from __future__ import annotations

import re

_CXX_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t char32_t char8_t class
compl concept const const_cast consteval constexpr constinit continue co_await co_return co_yield decltype
default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public
register reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch
template this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
wchar_t while xor xor_eq
""".split())

# CUDA built-ins and types the generated code names; a user buffer called ``half`` must not shadow them.
_CUDA_RESERVED = frozenset("""
threadIdx blockIdx blockDim gridDim warpSize smem main half half2 nv_bfloat16 CUtensorMap
atomicAdd min max abs exp log sqrt floor ceil
""".split())

_VALID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def ident(name: str) -> str:
    """The C identifier for the user's name ``name`` (pure: the same name always maps the same way)."""
    if _VALID.match(name) and name not in _CXX_KEYWORDS and name not in _CUDA_RESERVED \
            and not name.startswith(("eg_", "__", "u_")):
        return name
    return "u_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def kernel_symbol(kernel_name: str) -> str:
    """The ``extern "C"`` symbol of the generated kernel (``main`` would clash with C's ``main``)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", kernel_name) + "_kernel"


def barrier_ident(name: str) -> str:
    """C name of the mbarrier array ``name`` (a pointer into shared memory)."""
    return "eg_bar_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
