"""``simulate``: run a scheduled kernel on CPU tensors, block after block, and collect the reports."""

from __future__ import annotations

import itertools
from math import prod
from typing import Any

import numpy as np

from egtile import limits
from egtile.errors import ArgumentError, DTypeError, ShapeError
from egtile.evaluate import evaluate
from egtile.ir.dispatch import LAUNCH
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import Kernel
from egtile.ir.scheduled import Scheduled
from egtile.sim.machine import Block, Program
from egtile.sim.memory import InterBlock, Mem, RaceLog
from egtile.sim.policy import make_policy
from egtile.sim.report import SimResult

MAX_STEPS = limits.DEFAULTS["EGTILE_MAX_CPU_STEPS"]  # default of the knob (egtile.limits)


def block_coords(sched: Scheduled):
    """The block indices of each block, in the order the blocks run here: the launch order of the schedule's
    dispatch (:mod:`egtile.ir.dispatch`: its expressions evaluated at each launch position, the map the CUDA kernel
    computes, so a map that misses a block leaves its output poisoned here too), else every index tuple."""
    grid = tuple(int(g) for g in sched.kernel.grid)
    if sched.dispatch is None:
        yield from itertools.product(*(range(g) for g in grid))
        return
    exprs = sched.dispatch.indices()

    def no_load(*_):
        raise KeyError("a dispatch order reads no memory")

    for lin in range(prod(grid)):
        yield tuple(int(evaluate(e, {LAUNCH: lin}, no_load)) for e in exprs)

def _schedule_of(obj: Any) -> Scheduled:
    if isinstance(obj, Scheduled):
        return obj
    kernel = getattr(obj, "kernel", obj)  # a PrimFunc carries its kernel
    if isinstance(kernel, Kernel):
        from egtile.schedule.driver import (
            optimize,  # lazily: the scheduler is heavy and optional here
        )

        return optimize(kernel).scheduled
    raise ArgumentError(f"simulate expects an ir.Scheduled, an ir.Kernel or a PrimFunc, got {type(obj).__name__}")


def _to_array(kernel: Kernel, i: int, t: Any) -> np.ndarray:
    p = kernel.params[i]
    what = f"argument {p.name!r} (parameter {i} of kernel {kernel.name!r})"
    want = np.dtype(lookup_dtype(p.dtype).numpy)
    if isinstance(t, np.ndarray):
        if t.dtype != want:
            raise DTypeError(f"{what}: expected numpy dtype {want}, got {t.dtype}")
        if t.shape != p.shape:
            raise ShapeError(f"{what}: expected shape {p.shape}, got {t.shape}")
        return np.array(t, dtype=want).reshape(-1)
    import torch

    if not isinstance(t, torch.Tensor):
        raise ArgumentError(f"{what}: expected a torch.Tensor or numpy array, got {type(t).__name__}")
    from egtile.validate import check_tensor

    check_tensor(kernel, i, p, t, device=None)
    cpu = t.detach().cpu()
    if lookup_dtype(p.dtype).widened:  # bfloat16, float8: numpy has no such type
        cpu = cpu.float()
    return cpu.contiguous().numpy().astype(want, copy=True).reshape(-1)


def _to_tensor(kernel: Kernel, i: int, a: np.ndarray) -> Any:
    import torch

    p = kernel.params[i]
    t = torch.from_numpy(a.reshape(p.shape).copy())
    return t.to(getattr(torch, lookup_dtype(p.dtype).torch))


def simulate(kernel_or_schedule: Any, *tensors: Any, policy: str = "round_robin", seed: int = 0) -> SimResult:
    """Execute a scheduled kernel on the CPU with explicit threads and report races and deadlocks.

    Args:
        kernel_or_schedule: an ``ir.Scheduled``; or an ``ir.Kernel`` / ``PrimFunc``, scheduled first with
            ``egtile.optimize.optimize(kernel).scheduled``.
        tensors: one per kernel parameter: CPU or CUDA torch tensors of the parameter's dtype and shape,
            or numpy arrays of its storage dtype. They are copied and never written.
        policy: ``"round_robin"``, ``"random"`` or ``"adversarial"`` (:mod:`egtile.sim.policy`).
        seed: seed of the ``random`` policy.

    Returns:
        :class:`SimResult`: ``outputs`` (every parameter after the run, as new CPU torch tensors),
        ``races``, ``deadlock``, ``repeated_iterations``, ``barrier_errors``. Blocks run one after
        another; a deadlock stops the simulation at that block.

    Raises:
        ArgumentError, DTypeError, ShapeError, DeviceError: arguments that do not match the parameters.
        ShapeError: an access outside a buffer while running.
        ExternModelError: an extern without a registered model.
        SimulationError: a malformed schedule (unknown buffer, barrier stage out of range, more than 1024
            threads per block, ...).
        LimitError: more than ``EGTILE_MAX_CPU_BLOCKS`` blocks (refused before running) or
            ``EGTILE_MAX_CPU_STEPS`` scheduling steps (:mod:`egtile.limits`).
        Errors raised while running a statement name its sid, thread and block and carry the user's line
        (``err.loc``) of the innermost enclosing tile-IR statement; the thread limit carries the kernel's.
    """
    sched = _schedule_of(kernel_or_schedule)
    kernel = sched.kernel
    limits.check_blocks(kernel.name, kernel.grid, "simulator")
    max_steps = limits.limit("EGTILE_MAX_CPU_STEPS")
    if len(tensors) != len(kernel.params):
        names = ", ".join(p.name for p in kernel.params)
        raise ArgumentError(f"kernel {kernel.name!r} expects {len(kernel.params)} tensor argument(s) ({names}), "
                            f"got {len(tensors)}")
    arrays = [_to_array(kernel, i, t) for i, t in enumerate(tensors)]
    prog = Program(sched)
    globals_ = {p.name: Mem(p, a, shadowed=p.name in prog.written_globals) for p, a in zip(kernel.params, arrays)}
    log = RaceLog()
    inter = InterBlock(log)
    pol = make_policy(policy, seed)
    deadlock = None
    repeated: list = []
    barrier_errors: list = []
    steps = 0
    budget = [max_steps]  # statements of all threads of all blocks (Block.run), the same knob
    with np.errstate(all="ignore"):
        for coords in block_coords(sched):
            block = Block(prog, coords, globals_, log, budget)
            while True:
                choice = pol.pick(block)
                if choice is None:
                    break
                kind, x = choice
                if kind == "thread":
                    block.step(x)
                else:
                    block.complete(x)
                steps += 1
                if steps > max_steps:
                    raise limits.step_error(kernel.name, max_steps, "simulator")
            stuck = any(not th.done for th in block.threads)
            out = block.finish(stuck)
            repeated += out.repeated
            barrier_errors += out.barrier_errors
            inter.end_block([m for m in globals_.values() if m.shadowed], coords)
            if out.deadlock is not None:
                deadlock = out.deadlock
                break
    outputs = tuple(_to_tensor(kernel, i, globals_[p.name].data) for i, p in enumerate(kernel.params))
    return SimResult(outputs, log.races(), deadlock, tuple(repeated), tuple(barrier_errors), policy, seed,
                     {"steps": steps}, kernel)
