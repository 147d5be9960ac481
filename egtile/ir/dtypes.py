"""Element types of the tile IR.

A dtype is named by its TileLang string (``"float16"``, ``"int32"``, ...). Each name maps to one
:class:`DType` record that every layer reads (tracer, interpreter, simulator, codegen, runtime), so no
layer keeps its own table.
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.errors import DTypeError


@dataclass(frozen=True)
class DType:
    """One element type.

    Attributes:
        name: TileLang name, e.g. ``"float16"``.
        bits: storage width in bits.
        kind: ``"float"``, ``"int"``, ``"uint"`` or ``"bool"``.
        numpy: numpy dtype name used by the interpreter and simulator.
        torch: attribute name of the matching ``torch`` dtype.
        ctype: CUDA C++ spelling used by codegen.
        tma: CUtensorMapDataType enumerator name, or ``None`` when TMA cannot move this type
            (CUDA driver API, ``cuTensorMapEncodeTiled``).
    """

    name: str
    bits: int
    kind: str
    numpy: str
    torch: str
    ctype: str
    tma: str | None

    @property
    def widened(self) -> bool:
        """True when the interpreter and simulator hold this type in a wider numpy type (``numpy`` names
        float32 for bfloat16 and the float8 formats, which numpy lacks): torch tensors of it are widened
        with ``.float()`` before ``.numpy()``."""
        return self.numpy != self.torch

    @property
    def bytes(self) -> int:
        """Storage size of one element in bytes."""
        return max(1, self.bits // 8)


_TABLE = (
    DType("float16", 16, "float", "float16", "float16", "half", "CU_TENSOR_MAP_DATA_TYPE_FLOAT16"),
    DType("bfloat16", 16, "float", "float32", "bfloat16", "__nv_bfloat16", "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"),
    DType("float32", 32, "float", "float32", "float32", "float", "CU_TENSOR_MAP_DATA_TYPE_FLOAT32"),
    DType("float64", 64, "float", "float64", "float64", "double", "CU_TENSOR_MAP_DATA_TYPE_FLOAT64"),
    DType("int8", 8, "int", "int8", "int8", "signed char", "CU_TENSOR_MAP_DATA_TYPE_UINT8"),
    DType("int16", 16, "int", "int16", "int16", "short", "CU_TENSOR_MAP_DATA_TYPE_UINT16"),
    DType("int32", 32, "int", "int32", "int32", "int", "CU_TENSOR_MAP_DATA_TYPE_INT32"),
    DType("int64", 64, "int", "int64", "int64", "long long", "CU_TENSOR_MAP_DATA_TYPE_INT64"),
    DType("uint8", 8, "uint", "uint8", "uint8", "unsigned char", "CU_TENSOR_MAP_DATA_TYPE_UINT8"),
    DType("uint16", 16, "uint", "uint16", "uint16", "unsigned short", "CU_TENSOR_MAP_DATA_TYPE_UINT16"),
    DType("uint32", 32, "uint", "uint32", "uint32", "unsigned int", "CU_TENSOR_MAP_DATA_TYPE_UINT32"),
    DType("uint64", 64, "uint", "uint64", "uint64", "unsigned long long", "CU_TENSOR_MAP_DATA_TYPE_UINT64"),
    DType("bool", 8, "bool", "bool", "bool", "bool", None),
    # 8-bit floats (OCP FP8, PTX ISA 5.2.5 "Alternate Floating Point Data Formats"): e4m3 (finite only, NaN
    # 0x7f/0xff, largest 448) and e5m2 (IEEE-like with infinities, largest 57344). Stored in float32 arrays
    # holding representable values, as bfloat16; TMA moves them as bytes.
    DType("float8_e4m3fn", 8, "float", "float32", "float8_e4m3fn", "__nv_fp8_e4m3", "CU_TENSOR_MAP_DATA_TYPE_UINT8"),
    DType("float8_e5m2", 8, "float", "float32", "float8_e5m2", "__nv_fp8_e5m2", "CU_TENSOR_MAP_DATA_TYPE_UINT8"),
)

DTYPES: dict[str, DType] = {d.name: d for d in _TABLE}

# TileLang accepts these short spellings too.
_ALIASES = {"float": "float32", "half": "float16", "int": "int32", "double": "float64", "bf16": "bfloat16",
            "fp16": "float16", "fp32": "float32", "short": "int16", "uint": "uint32", "ulong": "uint64",
            # TileLang's fp8 spellings (its CUDA e4m3 is the finite-only "fn" format)
            "float8_e4m3": "float8_e4m3fn", "e4m3": "float8_e4m3fn", "e4m3_float8": "float8_e4m3fn",
            "e5m2": "float8_e5m2", "e5m2_float8": "float8_e5m2",
            # TF32 is float32 storage read by the tensor cores with a 10-bit mantissa; egtile has no TF32 gemm and
            # computes these operands in float32 (exact products: at least as accurate as TileLang's TF32)
            "tfloat32": "float32"}


#: TileLang's 4-bit integers: names egtile knows (``T.int4``, ``T.uint4``: annotations and helpers name them) but
#: does not store. TileLang packs two per byte (a torch int8 tensor of half the last extent) and its T.gemm on them
#: is ``mma.sync`` ``.s4``: Hopper's tensor cores have no 4-bit integer path (removed in the 4th generation, RTX 40
#: and Hopper; no wgmma form takes 4-bit operands, PTX ISA "wgmma.mma_async"), so on sm_90 it is not a tensor-core
#: gemm at all, and the int8 gemm on the unpacked values is the alternative.
PACKED_4BIT: dict[str, str] = {
    name: (f"{name} (two 4-bit integers packed per byte) is not an egtile storage type: pass the packed bytes as a "
           f"uint8 (or int8) tensor of half the last extent and unpack each element with uint8 shifts and "
           f"masks, sign-extended through T.reinterpret to int8 and an int8 shift right, as TileLang's dequantize "
           f"examples do; a gemm on 4-bit operands is then T.gemm on the int8 values "
           f"(Hopper's tensor cores have no 4-bit integer path: no wgmma form takes 4-bit operands)")
    for name in ("int4", "uint4")}


def dtype(name: str) -> DType:
    """Return the :class:`DType` named ``name``.

    Raises:
        DTypeError: ``name`` is not a known dtype; the message lists the known names.
    """
    if isinstance(name, DType):
        return name
    if not isinstance(name, str):
        raise DTypeError(f"dtype must be a string such as 'float16', got {type(name).__name__} {name!r}")
    canonical = _ALIASES.get(name, name)
    try:
        return DTYPES[canonical]
    except KeyError:
        if canonical in PACKED_4BIT:
            raise DTypeError(PACKED_4BIT[canonical]) from None
        known = ", ".join(sorted(DTYPES))
        aliases = ", ".join(f"{a} ({c})" for a, c in sorted(_ALIASES.items()))
        raise DTypeError(f"unknown dtype {name!r}; expected one of: {known}; or an alias: {aliases}") from None


def canonical(name: str) -> str:
    """Canonical TileLang name of ``name`` (resolves aliases such as ``"float"``)."""
    return dtype(name).name
