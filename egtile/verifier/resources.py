"""L8: resources of one block on sm_90.

Limits (CUDA C++ Programming Guide, "Technical Specifications per Compute Capability", compute
capability 9.0): at most 1024 threads per block; at most 227 KB (232448 bytes) of shared memory per
block (opt-in dynamic shared memory); 64K 32-bit registers per block.

Local memory: at most 512 KB per thread (the same table, "Maximum amount of local memory per thread");
every ``local`` buffer is a per-thread array, so their sizes add up (the backend declares them as
arrays in the kernel: registers, or stack when indexed dynamically or too large).

Shared memory is counted as the backend lays it out: every ``shared`` and ``fragment`` buffer (fragments
live in shared memory, ``docs/architecture.md``), each aligned to 128 bytes (TMA destinations need
128-byte alignment, PTX ISA 9.7.9.27), plus 8 bytes per mbarrier.

``setmaxnreg`` (PTX ISA, "setmaxnreg"): the register count is in [24, 256] and a multiple of 8; it is
executed by whole warpgroups (roles of multiples of 128 threads starting at a multiple of 128); the
roles' ``threads x registers`` must fit the 65536 registers of the CTA's pool.

Registers a wgmma holds in flight: its accumulator registers (and, for a register-A wgmma, A's) may not be
touched until its ``wgmma.wait_group`` (PTX ISA 9.7.15.7), so ptxas cannot spill them: with the
instruction's descriptors they must fit one thread's registers, at most 255 (the same CUDA table, "Maximum
number of 32-bit registers per thread") and at most the ``setmaxnreg`` count of the role that issues it,
less :data:`INFLIGHT_RESERVE`. Fragments beyond that, live elsewhere in the loop, may spill to local memory
(legal, slower: egtile.rules.fragment's estimate).
"""

from __future__ import annotations

from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.scheduled import RoleSplit, Scheduled, swalk
from egtile.ir.wgmma import WgmmaMma
from egtile.verifier.violation import Violation

MAX_THREADS = 1024
MAX_SHARED_BYTES = 227 * 1024
MAX_LOCAL_BYTES_PER_THREAD = 512 * 1024
REGISTERS_PER_BLOCK = 65536
SMEM_ALIGN = 128
WARPGROUP = 128
MAX_REGISTERS_PER_THREAD = 255
INFLIGHT_RESERVE = 16
"""Registers beside a wgmma's in-flight accumulator and A: its two 64-bit descriptors, a stage address, a counter."""


def shared_bytes(sched: Scheduled) -> int:
    """Bytes of shared memory the schedule needs per block."""
    total = 0
    for b in sched.buffers:
        if b.scope in ("shared", "fragment") and sched.fragment(b.name) is None:  # register fragments: per thread
            size = b.numel * lookup_dtype(b.dtype).bytes
            total += -(-size // SMEM_ALIGN) * SMEM_ALIGN
    return total + 8 * sum(b.stages for b in sched.barriers)


def resource_loc(kernel, violations: list[Violation]):
    """Where a per-block limit is exceeded, for the error: the user's allocation of the buffer the first L8
    violation names (the largest shared buffer, or local buffer), else the kernel's line."""
    for v in violations:
        if v.property != "L8" or v.buffer is None:
            continue
        loc = next((b.loc for b in kernel.params + kernel.allocs if b.name == v.buffer), None)
        if loc is not None:
            return loc
    return kernel.loc


def check_resources(sched: Scheduled) -> list[Violation]:
    out: list[Violation] = []
    if not 1 <= sched.threads <= MAX_THREADS:
        out.append(Violation("L8", f"the block has {sched.threads} threads; sm_90 allows 1..{MAX_THREADS}"))
    used = shared_bytes(sched)
    if used > MAX_SHARED_BYTES:
        # the buffers counted above (a register fragment takes no shared memory, so naming it misleads)
        big = sorted((b for b in sched.buffers if b.scope in ("shared", "fragment") and sched.fragment(b.name) is None),
                     key=lambda b: -b.numel * lookup_dtype(b.dtype).bytes)[:3]
        desc = ", ".join(f"{b.name} {b.shape} {b.dtype} ({b.numel * lookup_dtype(b.dtype).bytes} B)" for b in big)
        out.append(Violation("L8", f"the block needs {used} bytes of shared memory; sm_90 allows {MAX_SHARED_BYTES} "
                                   f"(227 KB) per block. Largest buffers: {desc}",
                             buffer=big[0].name if big else None))
    local = sorted((b for b in sched.buffers if b.scope == "local"), key=lambda b: -b.numel * lookup_dtype(b.dtype).bytes)
    local_bytes = sum(b.numel * lookup_dtype(b.dtype).bytes for b in local)
    if local_bytes > MAX_LOCAL_BYTES_PER_THREAD:
        desc = ", ".join(f"{b.name} {b.shape} {b.dtype} ({b.numel * lookup_dtype(b.dtype).bytes} B)" for b in local[:3])
        out.append(Violation("L8", f"the kernel needs {local_bytes} bytes of local memory per thread (T.alloc_local "
                                   f"buffers: {desc}); sm_90 allows {MAX_LOCAL_BYTES_PER_THREAD} (512 KB) per thread",
                             buffer=local[0].name))
    out += _inflight_registers(sched)
    for s in swalk(sched.body):
        if not isinstance(s, RoleSplit):
            continue
        budget = 0
        for r in s.roles:
            if r.setmaxnreg is None:
                continue
            action, n = r.setmaxnreg
            sid = (s.sid,) if s.sid is not None else ()
            if not (24 <= n <= 256 and n % 8 == 0):
                out.append(Violation("L8", f"role {r.name!r}: setmaxnreg.{action} {n}; the count must be a multiple "
                                           "of 8 in [24, 256]", sid))
            if r.threads.begin % WARPGROUP or r.threads.count % WARPGROUP:
                out.append(Violation("L8", f"role {r.name!r} [{r.threads.begin}, {r.threads.end}) uses setmaxnreg "
                                           f"but is not made of whole warpgroups ({WARPGROUP}-thread aligned)", sid))
            budget += r.threads.count * n
        if budget > REGISTERS_PER_BLOCK:
            desc = ", ".join(f"{r.name} {r.threads.count}x{r.setmaxnreg[1]}" for r in s.roles if r.setmaxnreg)
            out.append(Violation("L8", f"the roles ask for {budget} registers ({desc}); the CTA has "
                                       f"{REGISTERS_PER_BLOCK}", (s.sid,) if s.sid is not None else ()))
    return out


def _wgmma_registers(m: WgmmaMma) -> int:
    """Registers per thread wgmma ``m`` keeps in flight: its accumulator's, plus A's when A is in registers (16-bit
    values, two per register, spread over the tiling's threads)."""
    regs = m.tiling.registers_per_thread
    if m.a_registers:
        a = m.gemm.a.buffer
        regs += -(-a.numel * lookup_dtype(a.dtype).bytes // (4 * m.tiling.threads))
    return regs


def _inflight_registers(sched: Scheduled) -> list[Violation]:
    out: list[Violation] = []
    seen: set[int] = set()

    def check(m: WgmmaMma, limit: int, where: str) -> None:
        need = _wgmma_registers(m) + INFLIGHT_RESERVE
        if need > limit:
            out.append(Violation("L8", f"wgmma T.gemm (sid {m.sid}) holds {need - INFLIGHT_RESERVE} accumulator and A "
                                       f"registers per thread until its wait_group, plus {INFLIGHT_RESERVE} beside them; "
                                       f"{where} allows {limit} (registers in flight cannot spill)", (m.sid,)))

    for s in swalk(sched.body):
        if isinstance(s, RoleSplit):
            for r in s.roles:
                limit = min(MAX_REGISTERS_PER_THREAD, r.setmaxnreg[1]) if r.setmaxnreg else MAX_REGISTERS_PER_THREAD
                where = f"role {r.name!r} (setmaxnreg {r.setmaxnreg[1]})" if r.setmaxnreg else "a thread"
                for x in swalk(r.body):
                    if isinstance(x, WgmmaMma) and id(x) not in seen:
                        seen.add(id(x))
                        check(x, limit, where)
    for x in swalk(sched.body):
        if isinstance(x, WgmmaMma) and id(x) not in seen:
            seen.add(id(x))
            check(x, MAX_REGISTERS_PER_THREAD, "a thread")
    return out
