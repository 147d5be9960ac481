"""TMA tile copies (PTX ISA 9.7.9.27, ``cp.async.bulk.tensor``).

* ``TmaLoad``: the issuing thread reads the global source now (the values the copy will deliver) and
  queues the shared writes; when the policy completes the copy they land as an agent of the barrier
  stage's current phase and complete ``dst.numel * elem_bytes`` transaction bytes.
* Both check that their tensor map's swizzle is the shared buffer's layout.
* ``TmaStore``: the shared source is read through the async proxy (so an unfenced generic write of it is
  a ``proxy`` race) and written to global memory, synchronously: the issuing thread waits for the copy
  (``wait_group.read 0``, 9.7.9.28).
* Past the tensor's edge (a ``Region.clip`` global side): the load delivers zeros for the box elements
  outside the tensor and still completes the whole box's bytes; the store skips them (CUDA driver API,
  ``cuTensorMapEncodeTiled``: out-of-bound box elements are zero-filled with ``CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE``,
  and a store does not write them; PTX ISA 9.7.9.27 "bounding box").
"""

from __future__ import annotations

from egtile.errors import ShapeError, SimulationError
from egtile.ir.dtypes import dtype
from egtile.ir.scheduled import TmaLoad, TmaStore
from egtile.sim.semantics import register_semantics
from egtile.sim.tileops import OUTSIDE, region_flats


def _agrees(m, swizzle: str, shared, what: str) -> None:
    """The tensor map's swizzle is the shared buffer's layout: TMA would otherwise place (or read) every 16-byte
    chunk where no other reader of the buffer looks for it."""
    layout = m.prog.buffers[shared.buffer.name].layout
    if swizzle != layout:
        raise SimulationError(f"{what}: the tensor map is {swizzle} but {shared.buffer.name} is laid out {layout}")


@register_semantics(TmaLoad)
def tma_load(m, s: TmaLoad, th):
    what = f"TmaLoad (sid {s.sid}) in block {m.coords}"
    th.sid = s.sid
    if m.mem(s.src.buffer.name, th).scope != "global" or \
            m.mem(s.dst.buffer.name, th).scope not in ("shared", "fragment"):
        raise SimulationError(f"{what}: a TMA load copies a global region into shared memory")
    _agrees(m, s.swizzle, s.dst, what)
    bar = m.barrier(s.barrier)
    stage = m.stage_of(bar, s.stage, th, "TmaLoad")
    writes = m.gather(s.src, s.dst, th, s.sid or -1, what, op="tma-load")
    nbytes = s.dst.numel * dtype(s.dst.buffer.dtype).bytes
    m.issue_async(th, s.sid, writes, op="tma-load", barrier=bar, stage=stage, tx_bytes=nbytes)
    return m.PREEMPT


@register_semantics(TmaStore, writes=lambda s: [s.dst.buffer.name])
def tma_store(m, s: TmaStore, th):
    what = f"TmaStore (sid {s.sid}) in block {m.coords}"
    th.sid = s.sid
    if s.src.squeezed != s.dst.squeezed:
        raise ShapeError(f"{what}: extents {s.src.extents} -> {s.dst.extents} differ")
    _agrees(m, s.swizzle, s.src, what)
    sm, sf = m.region(s.src, th, what)
    dm, df = region_flats(m, s.dst, th, what, clipped=True)
    for a, b in zip(sf, df):
        if b == OUTSIDE:
            continue  # a box element past the tensor's edge: TMA does not write it (nor needs its value)
        m.write(dm, int(b), m.proxy_read(sm, int(a), th, s.sid), th, s.sid, "tma-store")
    th.tick()
    return m.PREEMPT
