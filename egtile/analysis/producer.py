"""Producer kind of a statement in a pipelined loop body, and the copy instructions' legality.

Definition. For a statement ``s`` of a ``T.Pipelined`` loop body, ``producer_kind(s, loop_var)`` is:

1. ``"tma"``: ``s`` is a ``Copy`` from ``global`` to ``shared`` that meets every TMA rule of
   :func:`tma_eligibility` and whose ``prefer`` is ``auto`` or ``tma``;
2. ``"cp_async"``: a ``Copy`` from ``global`` to ``shared`` with ``prefer="cp_async"`` (the user's
   explicit async copy), or one TMA cannot do but whose innermost contiguous run is 4, 8 or 16 bytes
   aligned (:func:`cp_async_eligibility`);
3. ``"simt"``: any other data-movement statement (``Store``, ``Copy``, ``Fill``, or a ``For``/``If``
   made of them) that writes only ``shared`` memory and reads only ``global`` memory, e.g.
   ``for i in T.Parallel(n): B_shared[i] = B_in[ko, i]`` or a ``Copy`` with ``prefer="simt"``;
4. ``"none"`` otherwise: a consumer statement.

Conservative choices (each moves a statement to ``none``, i.e. it stays with the consumers, which is
always legal):

* a producer must read only ``global`` memory, index loads included (``A[idx_shared[0], 0]`` is not);
* a statement containing an extern call or an atomic is never a producer (its effect count and its
  threads would change);
* compute tile ops (``Gemm``, ``Reduce``) are never producers: the producer warpgroup runs with a
  reduced register budget (``setmaxnreg.dec``);
* with ``loop_var`` given, a statement whose ``shared`` destination offsets mention the pipelined loop
  variable (at any leaf statement, before the regions of enclosing loops are widened) is not a producer:
  the pipeline gives each stage its own copy of the destination, which presumes the destination does not
  already move with the iteration.

Hardware sources: CUDA driver API ``cuTensorMapEncodeTiled`` (tensor map requirements); PTX ISA
"cp.async.bulk.tensor" (TMA loads: ``.global`` to ``.shared::cluster``/``.shared::cta``); CUDA C++
Programming Guide, "Using TMA to transfer multi-dimensional arrays" (alignment table: global address
16 B, global strides multiples of 16 B, shared destination 128 B); PTX ISA "cp.async" (cp-size 4, 8,
16 bytes, both addresses aligned to cp-size). The 16-byte alignment of a global base address is a run
time fact checked by ``egtile.validate``, not here.

Derived in the e-graph too (:mod:`egtile.schedule.dataflow`: ``producer`` / ``consumer`` per body form; the
TMA / cp.async legality stays here as the hardware oracles ``tma-eligible`` / ``cp-async-eligible``).
"""

from __future__ import annotations

from math import gcd
from typing import Literal, assert_never

from egtile.analysis.access import mentions, reads, writes
from egtile.errors import ShapeError
from egtile.verdict import Verdict
from egtile.ir import (
    AtomicAdd, BinOp, Buffer, Const, Copy, Expr, Extern, Fill, For, Gemm, If, Reduce, Region, Stmt, Store, Var,
    dtype, walk,
)

ProducerKind = Literal["tma", "cp_async", "simt", "none"]

TMA_MAX_RANK = 5              # cuTensorMapEncodeTiled: tensorRank in [1, 5] (no interleave)
TMA_MAX_BOX = 256             # cuTensorMapEncodeTiled: boxDim[i] in [1, 256]
TMA_INNER_BYTES = 16          # cuTensorMapEncodeTiled: boxDim[0] * elementSize multiple of 16 B
TMA_STRIDE_ALIGN = 16         # cuTensorMapEncodeTiled: globalStrides[i] multiple of 16 B
TMA_STRIDE_LIMIT = 1 << 40    # cuTensorMapEncodeTiled: globalStrides[i] < 2^40
TMA_DIM_LIMIT = 1 << 32       # cuTensorMapEncodeTiled: globalDim[i] in [1, 2^32]
TMA_SMEM_ALIGN = 128          # CUDA C++ Programming Guide, TMA alignment table: shared address 128 B
SWIZZLE_SPAN = {"swizzle32": 32, "swizzle64": 64, "swizzle128": 128}  # CUtensorMapSwizzle: inner box <= span
CP_ASYNC_SIZES = (16, 8, 4)   # PTX ISA cp.async: cp-size in {4, 8, 16}


Eligibility = Verdict
"""Whether an instruction can implement a copy: :class:`egtile.verdict.Verdict` with one sentence per rule
that fails."""


def _divisor(e: Expr) -> int:
    """A ``g >= 0`` such that ``e`` is always a multiple of ``g`` (``0``: ``e`` is always zero)."""
    match e:
        case Const(value=v) if type(v) is int:
            return abs(v)
        case BinOp(op="+" | "-", a=a, b=b):
            return gcd(_divisor(a), _divisor(b))
        case BinOp(op="*", a=a, b=b):
            return _divisor(a) * _divisor(b)
        case _:
            return 1


def _row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a contiguous row-major array of ``shape``."""
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    return tuple(strides)


def _offset_divisor(r: Region) -> int:
    """Divisor (elements) of the linear start offset of ``r`` in its contiguous buffer."""
    g = 0
    for off, st in zip(r.offsets, _row_major_strides(r.buffer.shape)):
        g = gcd(g, _divisor(off) * st)
    return g


def _is_dense(r: Region) -> bool:
    """``r`` occupies one contiguous run of its row-major buffer (unit dims, then full dims)."""
    dims = [d for d, e in enumerate(r.extents) if e != 1]
    if not dims:
        return True
    return all(r.extents[d] == r.buffer.shape[d] for d in range(dims[0] + 1, len(r.extents)))


def _loc(copy: Copy) -> str:
    return f"T.copy (sid {copy.sid})"


def _global_strides_bytes(src: Buffer, given: tuple[int, ...] | None, elem: int, reasons: list[str]) -> tuple[int, ...]:
    rank = len(src.shape)
    if given is None:
        return tuple(s * elem for s in _row_major_strides(src.shape)[:-1])
    given = tuple(given)
    if len(given) == rank:
        if rank and given[-1] != elem:
            reasons.append(f"innermost dimension of {src.name} has stride {given[-1]} B, not the element size "
                           f"{elem} B; TMA needs a contiguous innermost dimension (cuTensorMapEncodeTiled has no "
                           "innermost stride)")
        return given[:-1]
    if len(given) == rank - 1:
        return given
    raise ShapeError(f"tma_eligibility: global_strides for {src.name} (rank {rank}) must have {rank - 1} or {rank} "
                     f"entries in bytes, outermost first; got {len(given)}: {given}")


def tma_eligibility(copy: Copy, global_strides: tuple[int, ...] | None = None) -> Eligibility:
    """Whether a TMA tiled load (``cp.async.bulk.tensor``) can implement ``copy``.

    Rules (CUDA driver API ``cuTensorMapEncodeTiled``; PTX ISA ``cp.async.bulk.tensor``; CUDA C++
    Programming Guide TMA alignment table):

    * the source is ``global`` (a kernel parameter, so its base address is known on the host when the
      TMA tensor map is encoded) and the destination ``shared``;
    * the element type has a ``CUtensorMapDataType`` (``DType.tma`` not ``None``) and both sides have it
      (TMA moves bytes, it does not convert);
    * tensor rank 1..5, every box dimension 1..256 elements, every global dimension <= 2^32;
    * innermost box extent x element size is a multiple of 16 bytes;
    * global strides (bytes, every dimension but the innermost) are multiples of 16 and < 2^40, and the
      innermost dimension is contiguous;
    * the shared destination is one dense row-major run starting at a 128-byte aligned offset, and for a
      swizzled destination layout the innermost box is at most the swizzle span (32/64/128 B).

    A source past the tensor's edge (``Region.clip``) stays eligible, with no further condition: the tensor
    map describes the whole tensor (``globalDim`` = its shape, ``egtile.runtime.tensormap``) with
    ``CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE``, so box elements outside it are filled with zeros (CUDA driver API
    ``cuTensorMapEncodeTiled``, ``oobFill``), the box's coordinates are signed 32-bit (PTX ISA
    ``cp.async.bulk.tensor``: ``tensorCoords`` are ``.s32``, a box may start before the tensor), ``boxDim`` is
    bounded by 256 only, not by ``globalDim``, and the transaction bytes counted on the mbarrier are the whole
    box's, filled elements included (the ``expect_tx`` the rule issues is unchanged). That is TileLang's
    semantics for the copy.

    Args:
        copy: the copy; its ``prefer`` is ignored here.
        global_strides: strides of the source tensor in bytes, outermost first, either for every
            dimension but the innermost (``rank - 1`` entries, as ``cuTensorMapEncodeTiled`` takes them)
            or for every dimension (``rank`` entries; the last must equal the element size). ``None``:
            the parameter is contiguous and the strides follow from its shape.

    Returns:
        :class:`Eligibility` with one sentence per violated rule.

    Raises:
        ShapeError: ``global_strides`` has the wrong number of entries.
    """
    src, dst = copy.src, copy.dst
    reasons: list[str] = []
    if src.buffer.scope != "global":
        reasons.append(f"source {src.buffer.name} is in {src.buffer.scope} memory; a TMA load reads a global "
                       "kernel parameter through a tensor map encoded on the host")
    if dst.buffer.scope != "shared":
        reasons.append(f"destination {dst.buffer.name} is in {dst.buffer.scope} memory; a TMA load writes shared "
                       "memory (PTX ISA cp.async.bulk.tensor, .dst = .shared::cta)")
    sd = dtype(src.buffer.dtype)
    if sd.tma is None:
        reasons.append(f"element type {sd.name} of {src.buffer.name} has no CUtensorMapDataType")
    if dtype(dst.buffer.dtype).name != sd.name:
        reasons.append(f"TMA copies bytes and cannot convert {sd.name} ({src.buffer.name}) to "
                       f"{dtype(dst.buffer.dtype).name} ({dst.buffer.name})")
    rank = len(src.buffer.shape)
    if not 1 <= rank <= TMA_MAX_RANK:
        reasons.append(f"{src.buffer.name} has rank {rank}; cuTensorMapEncodeTiled supports rank 1..{TMA_MAX_RANK}")
    for d, n in enumerate(src.buffer.shape):
        if not 1 <= n <= TMA_DIM_LIMIT:
            reasons.append(f"dimension {d} of {src.buffer.name} has {n} elements; a tensor map allows 1..2^32")
    for d, e in enumerate(src.extents):
        if not 1 <= e <= TMA_MAX_BOX:
            reasons.append(f"box dim {d} of {src.buffer.name} is {e} elements; cuTensorMapEncodeTiled allows "
                           f"1..{TMA_MAX_BOX}")
    elem = sd.bytes
    if src.extents:
        inner = src.extents[-1]
        if (inner * elem) % TMA_INNER_BYTES:
            reasons.append(f"innermost box {inner} x {elem} B = {inner * elem} B is not a multiple of "
                           f"{TMA_INNER_BYTES} B")
        span = SWIZZLE_SPAN.get(dst.buffer.layout)
        if span is not None and inner * elem > span:
            reasons.append(f"innermost box {inner * elem} B exceeds the {span} B span of {dst.buffer.name}'s "
                           f"{dst.buffer.layout} layout")
    strides = _global_strides_bytes(src.buffer, global_strides, elem, reasons)
    for d, st in enumerate(strides):
        if st % TMA_STRIDE_ALIGN:
            reasons.append(f"global stride of dim {d} of {src.buffer.name} is {st} B, not a multiple of "
                           f"{TMA_STRIDE_ALIGN} B")
        if not 0 <= st < TMA_STRIDE_LIMIT:
            reasons.append(f"global stride of dim {d} of {src.buffer.name} is {st} B; it must be below 2^40 B")
    if not _is_dense(dst):
        reasons.append(f"destination region of {dst.buffer.name} with extents {dst.extents} in shape "
                       f"{dst.buffer.shape} is not one contiguous run; TMA writes the box densely")
    dst_elem = dtype(dst.buffer.dtype).bytes
    off = _offset_divisor(dst) * dst_elem
    if off % TMA_SMEM_ALIGN:
        reasons.append(f"destination offset in {dst.buffer.name} is not provably a multiple of {TMA_SMEM_ALIGN} B "
                       f"(known multiple: {off} B); the TMA shared address must be {TMA_SMEM_ALIGN}-byte aligned")
    return Eligibility.of(reasons)


def cp_async_bytes(copy: Copy) -> int:
    """Widest ``cp.async`` size (16, 8 or 4 bytes) that divides every contiguous run of ``copy`` and
    its start addresses on both sides; ``0`` when even 4 bytes does not (PTX ISA ``cp.async``).

    Buffer base addresses are assumed 16-byte aligned (kernel parameters: checked by ``egtile.validate``;
    shared allocations: aligned by codegen)."""
    g = 0
    for r in (copy.src, copy.dst):
        elem = dtype(r.buffer.dtype).bytes
        strides = _row_major_strides(r.buffer.shape)
        g = gcd(g, _offset_divisor(r) * elem)
        if r.extents:
            g = gcd(g, r.extents[-1] * elem)  # the innermost run
        for d, e in enumerate(r.extents[:-1]):
            if e > 1:
                g = gcd(g, strides[d] * elem)  # each new row starts one stride further
    for size in CP_ASYNC_SIZES:
        if g % size == 0:
            return size
    return 0


def cp_async_eligibility(copy: Copy) -> Eligibility:
    """Whether ``cp.async`` (PTX ISA, sm_80+) can implement ``copy``: global to shared, same element type,
    and every contiguous run 4, 8 or 16 bytes aligned on both sides (see :func:`cp_async_bytes`)."""
    src, dst = copy.src, copy.dst
    reasons: list[str] = []
    if src.buffer.scope != "global" or dst.buffer.scope != "shared":
        reasons.append(f"cp.async copies global to shared; this copy is {src.buffer.scope} ({src.buffer.name}) "
                       f"to {dst.buffer.scope} ({dst.buffer.name})")
    if dtype(src.buffer.dtype).name != dtype(dst.buffer.dtype).name:
        reasons.append(f"cp.async copies bytes and cannot convert {src.buffer.dtype} to {dst.buffer.dtype}")
    if src.clip or dst.clip:
        # cp.async's src-size operand could zero-fill a chunk (PTX ISA cp.async), but egtile does not emit it yet
        reasons.append(f"the copy runs past the edge of {(src if src.clip else dst).buffer.name} (elements outside "
                       "read as zero / are not written), which egtile's cp.async does not predicate; TMA or SIMT can")
    if cp_async_bytes(copy) == 0:
        elem = dtype(src.buffer.dtype).bytes
        inner = src.extents[-1] if src.extents else 1
        reasons.append(f"innermost contiguous run {inner} x {elem} B = {inner * elem} B (or its start) is not "
                       "4, 8 or 16 B aligned; cp.async moves 4, 8 or 16 B")
    return Eligibility.of(reasons)


def _data_movement_only(s: Stmt) -> bool:
    match s:
        case Store() | Copy() | Fill():
            return True
        case For(body=body):
            return all(_data_movement_only(b) for b in body)
        case If(then_body=t, else_body=e):
            return all(_data_movement_only(b) for b in t + e)
        case Extern() | AtomicAdd() | Gemm() | Reduce():
            return False
        case _:
            assert_never(s)


def _moves_with(stmt: Stmt, loop_var: Var | None) -> bool:
    # Judged at each leaf statement, before the regions of enclosing loops are widened: a store loop
    # ``S[k * 4 + i] = ...`` moves with ``k`` even though its widened region (all of ``S``) does not mention it.
    if loop_var is None:
        return False
    for leaf in walk((stmt,)):
        if isinstance(leaf, (For, If)):
            continue
        if any(w.region is not None and mentions(w.region.offsets, loop_var)
               for w in writes(leaf) if w.scope == "shared"):
            return True
    return False


def producer_kind(stmt: Stmt, loop_var: Var | None = None) -> ProducerKind:
    """The producer kind of ``stmt`` in a pipelined loop body (see the module docstring).

    Args:
        stmt: a statement of the loop body.
        loop_var: the pipelined loop's variable; when given, a statement whose shared destination moves
            with it is not a producer.
    """
    w, r = writes(stmt), reads(stmt)
    if not w or not r:
        return "none"
    if any(a.scope != "shared" or a.via_pointer for a in w) or any(a.scope != "global" or a.via_pointer for a in r):
        return "none"
    if not _data_movement_only(stmt) or _moves_with(stmt, loop_var):
        return "none"
    if isinstance(stmt, Copy):
        if stmt.prefer == "simt":
            return "simt"
        if stmt.prefer == "cp_async":
            return "cp_async"
        if tma_eligibility(stmt).ok:
            return "tma"
        if cp_async_eligibility(stmt).ok:
            return "cp_async"
    return "simt"
