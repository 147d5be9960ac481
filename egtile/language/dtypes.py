"""Dtype constants ``T.float16``, ``T.int32``, ...: the TileLang names as strings (usable wherever a dtype
string is), callable as constructors (``T.float16(0)``). The table itself is :mod:`egtile.ir.dtypes`."""

from egtile.language.expr import DTypeName, PackedDTypeName

float16 = DTypeName("float16")
bfloat16 = DTypeName("bfloat16")
float32 = DTypeName("float32")
float64 = DTypeName("float64")
int8 = DTypeName("int8")
int16 = DTypeName("int16")
int32 = DTypeName("int32")
int64 = DTypeName("int64")
uint8 = DTypeName("uint8")
uint16 = DTypeName("uint16")
uint32 = DTypeName("uint32")
uint64 = DTypeName("uint64")
bool = DTypeName("bool")  # noqa: A001 - TileLang's name
float8_e4m3fn = DTypeName("float8_e4m3fn")
float8_e5m2 = DTypeName("float8_e5m2")
int4 = PackedDTypeName("int4")  # named, not stored (egtile.ir.dtypes.PACKED_4BIT says why and what instead)
uint4 = PackedDTypeName("uint4")

float = float32  # noqa: A001 - TileLang's aliases
half = float16
double = float64
int = int32  # noqa: A001
long = int64
short = int16  # TileLang's C spellings (tilelang/language/dtypes.py _CANONICAL_TO_DISPLAY_STR)
uint = uint32
ulong = uint64
bf16 = bfloat16
f16, f32, f64 = float16, float32, float64
i8, i16, i32, i64 = int8, int16, int32, int64
u8, u16, u32, u64 = uint8, uint16, uint32, uint64
float8_e4m3 = float8_e4m3fn  # TileLang's CUDA e4m3 is the finite-only ("fn") format
tfloat32 = float32  # float32 storage; egtile's T.gemm computes it in float32, not TF32 (egtile.ir.dtypes)


def __getattr__(name: str):
    """``_TORCH_DTYPE_TO_STR`` (TileLang's ``tilelang.language.dtypes``: torch dtype -> dtype name, for every egtile
    dtype; helpers next to TileLang's examples import it), built on first use so that importing egtile does not
    import torch."""
    if name != "_TORCH_DTYPE_TO_STR":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import torch

    from egtile.ir.dtypes import DTYPES

    table = {}
    for d in DTYPES.values():
        t = getattr(torch, d.torch, None)
        if isinstance(t, torch.dtype):
            table.setdefault(t, d.name)
    globals()[name] = table
    return table


dtype = DTypeName
"""``T.dtype``: the type of the dtype constants, for annotations (``dtype: T.dtype = T.float16``) and as a
constructor (``T.dtype("float16")``)."""
