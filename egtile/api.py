"""Entry points for kernel authors: ``egtile.jit``, ``egtile.compile`` and the callable :class:`JITKernel`.

TileLang's calling convention::

    @egtile.jit(out_idx=[2])          # or bare @egtile.jit
    def matmul(M=1024, N=1024, ...):  # Python parameters build the kernel
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), ...): ...
        return main

    kernel = matmul(1024, 1024)       # traced and compiled once per distinct arguments (cached)
    C = kernel(A, B)                  # run on torch tensors; out_idx outputs are allocated and returned

Targets (``target=``):

* ``"interp"``: the reference interpreter of the unscheduled kernel (:mod:`egtile.interp`), CPU tensors;
* ``"sim"``: schedule with :func:`egtile.optimize.optimize`, run the schedule in the CPU simulator
  (:mod:`egtile.sim`), raise :class:`SimulationError` on a race, deadlock or repeated iteration;
* ``"cuda"``: schedule, emit CUDA C++ and run on a Hopper GPU (:mod:`egtile.codegen`, :mod:`egtile.runtime`);
* ``"auto"``: ``"cuda"`` when torch sees a GPU of compute capability 9.0, else ``"sim"``.

Arguments are checked (:mod:`egtile.validate`) and never converted.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from egtile.errors import (
    ArgumentError, DSLError, EgtileError, LaunchError, ResourceError, ScheduleError, SimulationError, UnsupportedError,
    public, trimmed,
)
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import Kernel
from egtile.language.kernel import PrimFunc
from egtile.options import fast_math
from egtile.validate import REJECT, Checker, check_args, written_params

TARGETS = ("auto", "interp", "sim", "cuda")

# written_params of the kernels compiled in this process, by schedule-cache key (bounded)
_WRITTEN: dict[str, frozenset[str]] = {}

# TileLang options accepted for source compatibility. Of them only pass_configs' TL_ENABLE_FAST_MATH has a
# meaning for egtile (egtile.options.fast_math); the others have none.
_IGNORED_OPTIONS = {"pass_configs", "execution_backend", "verbose", "compile_flags", "debug_root_path"}


ARCH = "sm_90a"
"""The architecture ``"cuda"`` kernels are compiled for (NVRTC ``--gpu-architecture``)."""


def hopper_available() -> bool:
    """Whether torch sees a CUDA GPU of compute capability 9.0 (H100/H200)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
    return bool(torch.cuda.is_available()) and tuple(torch.cuda.get_device_capability()) == (9, 0)


def resolve_target(target: str) -> str:
    """The concrete target ``target`` names (``"auto"`` resolved).

    Raises:
        ArgumentError: unknown target.
    """
    if target not in TARGETS:
        raise ArgumentError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    if target != "auto":
        return target
    if hopper_available():
        return "cuda"
    return "sim"


def _normalize_out_idx(out_idx: Any, kernel: Any) -> tuple[int, ...]:
    """``out_idx`` as sorted positions in ``kernel.params`` (an ``ir.Kernel``, or any prim_func with ``params`` and
    ``name``); negative entries count from the end."""
    if out_idx is None:
        return ()
    items = [out_idx] if isinstance(out_idx, int) else list(out_idx)
    n = len(kernel.params)
    out = []
    for i in items:
        if isinstance(i, bool) or not isinstance(i, int) or not -n <= i < n:
            raise ArgumentError(f"out_idx entry {i!r} is not a parameter position of kernel {kernel.name!r} "
                                f"(expected an int in [{-n}, {n}))")
        out.append(i % n)
    if len(set(out)) != len(out):
        raise ArgumentError(f"out_idx {list(items)} names a parameter twice")
    return tuple(sorted(out))


_UNENUMERABLE = "cannot enumerate the schedule: "


def _refuse_interp_of_concurrent_roles(kernel: Kernel) -> None:
    """The interpreter runs a hand-written protocol's sequential reading (each role once, in program order); roles
    that each run their own barrier loop (:func:`egtile.ir.protocol.concurrent_roles`) have none, so its values
    would not be the program's.

    Raises:
        UnsupportedError: such roles, naming their lines and ``target="sim"``.
    """
    from egtile.ir.protocol import concurrent_roles, uses_protocol

    roles = concurrent_roles(kernel.body) if uses_protocol(kernel.body) else ()
    if roles:
        at = ", ".join(str(r.loc.line) for r in roles if r.loc is not None)
        raise UnsupportedError(f"kernel {kernel.name!r}: the roles at lines {at} each run their own loop of barrier "
                               "rounds, concurrently; target=\"interp\" runs a protocol's sequential reading (each role "
                               "once, in program order), which such roles do not have: use target=\"sim\", which runs "
                               "the threads and mbarriers and checks the protocol", roles[0].loc)


def _refuse_interp_of_a_wrong_protocol(kernel: Kernel) -> None:
    """A hand-written protocol means its sequential reading only if its roles, run concurrently, compute it: the
    interpreter runs that reading, so a protocol the verifier finds wrong (a producer that loads the next round into
    the one stage the consumer still reads, a missing wait, a wrong parity) is refused here as on "sim" and "cuda",
    instead of computing values the GPU would not. Where the verifier cannot decide (a limit of the analysis), or
    the kernel exceeds a per-block limit, the interpreter runs the reading as before.

    Raises:
        ScheduleError: the verifier's report, at the culprit's line.
    """
    from egtile.ir.protocol import uses_protocol

    if not uses_protocol(kernel.body):
        return
    from egtile.lower.protocol import schedule_protocol
    from egtile.verifier.protocol import check_protocol

    try:
        check_protocol(schedule_protocol(kernel).scheduled, unchecked_ok=True)
    except (ResourceError, UnsupportedError):  # a per-block limit, or a construct the lowering does not take yet
        return


def _why_accumulators_in_shared(kernel: Kernel) -> list[str]:
    """For a shared-memory overflow: each ``T.gemm`` whose fragment accumulator cannot be a wgmma's (so the SIMT
    path keeps it, and its fragment group, in shared memory), with the first reasons the wgmma oracle gives
    (egtile.rules.mma.wgmma_options). Gemms that are wgmma-eligible are left to ``explain()``."""
    from egtile.ir import Gemm, walk
    from egtile.rules import mma
    from egtile.schedule.facts import FactContext

    ctx = FactContext.of(kernel)
    out = []
    for g in walk(kernel.body):
        if not isinstance(g, Gemm) or kernel.buffer(g.c.buffer.name).scope != "fragment":
            continue
        a_in_registers = kernel.buffer(g.a.buffer.name).scope == "fragment"
        # A in registers: the register-A form is the one that could take it (the shared-A form's reasons would
        # only say that A is not shared)
        mask, why = (mma.wgmma_rs_options if a_in_registers else mma.wgmma_options)(ctx, g)
        if mask == 0 and why:
            line = f" (line {g.loc.line})" if g.loc is not None else ""
            out.append(f"T.gemm into {g.c.buffer.name}{line} runs on the SIMT cores, its accumulator in shared "
                       f"memory: no {'register-A ' if a_in_registers else ''}wgmma form fits: "
                       f"{'; '.join(dict.fromkeys(why[:3]))}")
    return out


def _value_indexed(kernel: Kernel) -> dict[int, Any]:
    """The statements of ``kernel`` that index memory by a value known only at run time (an index that reads
    memory: a tensor's data, a shared element, a per-thread ``T.alloc_var``), each with the access it makes."""
    from egtile.analysis.access import reads, walk_expr, writes
    from egtile.ir.kernel import For, If, Load, walk

    out: dict[int, Any] = {}
    for st in walk(kernel.body):
        if isinstance(st, (For, If)):
            continue
        for a in (*writes(st), *reads(st)):
            if a.region is not None and any(isinstance(x, Load) for o in a.region.offsets for x in walk_expr(o)):
                out[st.sid] = a
                break
    return out


def _check_schedule(kernel: Kernel, scheduled: Any, target: str = "cuda") -> bool:
    """Run the independent verifier on a fresh schedule, so that every target (the simulator too) refuses
    what the hardware would: L8 (shared memory, threads, registers) raises ResourceError; any other
    property means the scheduler produced an illegal schedule, which is egtile's bug, never the user's,
    and raises ScheduleError rather than running it.

    Except an ordering report (L1/L2) between statements one of which indexes memory by a value known only at
    run time (``S[I[tx]]``, ``S[tx + s]`` with ``s`` a ``T.alloc_var``): the verifier takes such an index as any
    element, so the report is not proven: it may be the kernel's own race or the verifier's limit. On
    ``target="sim"`` the simulator decides on the data (returns True: the schedule is not stored as verified); on
    ``"cuda"`` it is refused as what egtile cannot prove, at that statement's line (UnsupportedError)."""
    from egtile.analysis import shared_reuse
    from egtile.verifier import verify
    from egtile.verifier.resources import resource_loc

    violations = verify(scheduled)
    if not violations:
        return
    listing = "\n  ".join(str(v) for v in violations)
    if all(v.property == "L8" for v in violations):
        why = [*_why_accumulators_in_shared(kernel), *shared_reuse.why_not(kernel)] if "shared memory" in listing else []
        raise ResourceError(f"kernel {kernel.name!r} exceeds a per-block limit of sm_90:\n  {listing}" +
                            "".join(f"\n  {w}" for w in why), resource_loc(kernel, violations))
    from egtile.ir.kernel import walk
    from egtile.verifier.tripcount import PREFIX

    locs = {st.sid: st.loc for st in walk(kernel.body) if st.loc is not None}
    runtime = [v for v in violations if v.message.startswith(PREFIX)]
    if runtime:
        # a loop whose trip count is read from tensor data in a way egtile cannot run (egtile.verifier.tripcount)
        v = runtime[0]
        loc = next((locs[s] for s in v.sids if s in locs), kernel.loc)
        raise UnsupportedError(f"kernel {kernel.name!r}: {v.message[len(PREFIX):]}", loc)
    unenumerable = [v for v in violations if v.property == "L3" and v.message.startswith(_UNENUMERABLE)]
    if unenumerable:
        # not an illegal schedule: no schedule of this kernel can be verified (the verifier walks every iteration of
        # the block's loops), so it is the construct egtile does not support, at the user's loop
        v = unenumerable[0]
        loc = next((locs[s] for s in v.sids if s in locs), kernel.loc)
        raise UnsupportedError(f"kernel {kernel.name!r}: {v.message[len(_UNENUMERABLE):]}: a loop outside T.Parallel "
                               "whose bound the verifier cannot evaluate is not supported (a runtime trip count read "
                               "from tensor data is supported as the loop's stop, with a start known when the block "
                               "runs, outside per-thread code: docs/language.md)", loc)
    valued = _value_indexed(kernel)
    unproven = [v for v in violations if v.property in ("L1", "L2") and any(s in valued for s in v.sids)]
    if unproven and len(unproven) == len(violations):
        if target == "sim":
            return True
        from egtile.ir.printer import format_expr
        from egtile.ir.kernel import Load

        sid = next(s for v in unproven for s in v.sids if s in valued)
        a = valued[sid]
        shown = format_expr(Load(a.region.buffer, a.region.offsets))
        raise UnsupportedError(
            f"egtile cannot prove kernel {kernel.name!r} free of races:\n  {listing}\n{shown} is indexed by a value "
            "known only at run time (read from memory or a per-thread variable), which egtile's verifier takes as any "
            "element of the buffer. Either the kernel races there (threads reach one element with no T.sync_threads()"
            " or other order between them: add one) or it does not and the verifier cannot tell. target='sim' runs "
            "the kernel on your data and reports a race if one happens; target='cuda' runs only what egtile proves "
            "(index by block and thread indices, loop variables and constants there)",
            locs.get(sid, kernel.loc))
    raise ScheduleError(f"egtile scheduled kernel {kernel.name!r} illegally (a bug in egtile's rules; please "
                        f"report it with this kernel):\n  {listing}", kernel.loc)


class JITKernel:
    """A compiled kernel, called with torch tensors.

    Attributes:
        kernel: the ``ir.Kernel``.
        target: the concrete target it runs on (``"interp"``, ``"sim"`` or ``"cuda"``).
        out_idx: positions of the parameters allocated and returned by each call.
        scheduled: the ``ir.Scheduled`` (``None`` for ``"interp"``).
        fast_math: the CUDA kernel is compiled with NVRTC's ``--use_fast_math`` (TileLang's
            ``TL_ENABLE_FAST_MATH``); the CPU targets always compute egtile's default arithmetic.
    """

    def __init__(self, func: PrimFunc | Kernel, out_idx: Any = None, target: str = "auto", rules: Any = None,
                 fast_math: bool = False) -> None:
        if isinstance(func, PrimFunc):
            if func.more or func.hidden:
                raise ArgumentError(f"prim_func {func.name!r} has {len(func.kernels)} T.Kernel block(s) and "
                                    f"{func.hidden} T.alloc_global scratch tensor(s); compile it with egtile.compile "
                                    "(or @egtile.jit), which allocates the scratch and launches the kernels in order")
            kernel = func.kernel
        elif isinstance(func, Kernel):
            kernel = func
        else:
            raise ArgumentError(f"expected a @T.prim_func (or ir.Kernel), got {type(func).__name__}")
        self.kernel = kernel
        self.out_idx = _normalize_out_idx(out_idx, kernel)
        self.target = resolve_target(target)
        if self.target == "interp":
            _refuse_interp_of_concurrent_roles(kernel)
            _refuse_interp_of_a_wrong_protocol(kernel)
            # the reference target runs T.Parallel iterations in order, which would make the user's race look
            # correct: refuse it as the scheduling targets do, before anything runs
            importlib.import_module("egtile.analysis.parallel_races").refuse(kernel)
            importlib.import_module("egtile.analysis.overlay").refuse(kernel)
        self.schedule_result: Any = None
        self.scheduled: Any = None
        self._built: Any = None
        self._runtime: Any = None
        self.rules = rules
        self.fast_math = bool(fast_math)
        self._key: Any = None
        self._written: frozenset[str] | None = None
        if self.target in ("sim", "cuda"):
            self._schedule_and_build()
        self._prepare_calls()

    def _schedule_and_build(self) -> None:
        """Schedule (e-graph) and, for ``"cuda"``, build the cubin, or take both from the on-disk cache."""
        from egtile import schedule_cache
        from egtile.ir.protocol import concurrent_roles, uses_protocol

        protocol = uses_protocol(self.kernel.body)
        # Roles that each run their own barrier loop have no sequential reading for the static check: on "sim"
        # the simulator checks their protocol on every run instead, and such an unverified schedule is never
        # cached (a later "cuda" compile must not find it). egtile.ir.protocol.concurrent_roles.
        self._dynamic_check = protocol and self.target == "sim" and bool(concurrent_roles(self.kernel.body))
        cacheable = self.rules is None and schedule_cache.enabled() and not self._dynamic_check
        key = schedule_cache.key(self.kernel, ARCH, self.fast_math) if cacheable else None
        self._key = key
        hit = schedule_cache.load(key) if key is not None else None
        if hit is not None and (self.target != "cuda" or hit[1] is not None):
            self.schedule_result, self._built = hit
        elif hit is not None:
            # the schedule is cached (and was verified when stored) but its cubin is not, e.g. under another
            # NVRTC version: build the cubin only, not the e-graph again
            self.schedule_result = hit[0]
            self._built = importlib.import_module("egtile.codegen").build(self.schedule_result.scheduled,
                                                                           fast_math=self.fast_math)
            schedule_cache.store(key, self.schedule_result, self._built)
        else:
            unproven = False  # a schedule the verifier could not prove, run on the simulator only: not cached
            if protocol:
                self.schedule_result = self._schedule_protocol()
            else:
                optimize = importlib.import_module("egtile.schedule.driver").optimize
                self.schedule_result = optimize(self.kernel, rules=self.rules)
                unproven = _check_schedule(self.kernel, self.schedule_result.scheduled, self.target)
            if self.target == "cuda":
                self._built = importlib.import_module("egtile.codegen").build(self.schedule_result.scheduled,
                                                                           fast_math=self.fast_math)
            if key is not None and not unproven:
                schedule_cache.store(key, self.schedule_result, self._built)
        self.scheduled = self.schedule_result.scheduled
        if self.target == "cuda":
            self._runtime = importlib.import_module("egtile.runtime").CudaKernel(self._built, self.scheduled)
            # Whether a GPU is present does not change while the process runs: ask once, not per launch.
            self._launchable = hopper_available()

    def _written_params(self) -> frozenset[str]:
        """``written_params(self.kernel)``, computed once per process for each schedule-cache key (the key's
        digest covers the kernel's encoding, so an equal key means the same kernel)."""
        if self._written is not None:
            return self._written
        key = self._key
        written = _WRITTEN.get(str(key)) if key is not None else None
        if written is None:
            written = written_params(self.kernel)
            if key is not None:
                if len(_WRITTEN) >= 1024:
                    _WRITTEN.pop(next(iter(_WRITTEN)), None)
                _WRITTEN[str(key)] = written
        self._written = written
        return written

    def _schedule_protocol(self) -> Any:
        """A hand-specialized kernel's schedule: its protocol lowered as written and checked as the user's
        (:mod:`egtile.lower.protocol`, :mod:`egtile.verifier.protocol`); it skips the e-graph, and is cached
        like the e-graph's schedules (the key covers the lowering's and the checker's source)."""
        from egtile.analysis import overlay
        from egtile.lower.protocol import schedule_protocol
        from egtile.verifier.protocol import check_protocol

        overlay.refuse(self.kernel)  # T.view scratch: proved before any schedule, as the e-graph's path does
        result = schedule_protocol(self.kernel)
        if getattr(self, "_dynamic_check", False):
            from egtile.ir.scheduled import Decision

            note = Decision("hand-written-protocol", None, "checked on each simulated run",
                            "the roles each run their own loop of barrier rounds, concurrently, so the protocol has no "
                            "sequential reading for the static check; the simulator checks it on every run (races, "
                            "deadlocks, barrier counts) and target=\"cuda\" still requires the static check")
            sched = dataclasses.replace(result.scheduled, decisions=result.scheduled.decisions + (note,))
            return dataclasses.replace(result, scheduled=sched)
        check_protocol(result.scheduled)
        return result

    # -- calling -----------------------------------------------------------------------------------

    @property
    def device(self) -> str:
        """Device type the tensors must live on."""
        return "cuda" if self.target == "cuda" else "cpu"

    def _prepare_calls(self) -> None:
        """Everything a call needs that does not depend on its tensors, computed once: which parameters the
        kernel writes, the compiled argument checks, each output's shape and dtype, the per-target call."""
        import torch

        kernel = self.kernel
        self._written = self._written_params()
        inputs = [p for i, p in enumerate(kernel.params) if i not in self.out_idx]
        device, out_idx, written = self.device, self.out_idx, self._written
        self._check = Checker(inputs, device=device, written=written, name=kernel.name,
                              explain=lambda ts: check_args(kernel, ts, device=device, out_idx=out_idx,
                                                            written=written))
        self._accept = self._check.accept
        # (position, shape, dtype) per output, in increasing position: inserting them in this order into the
        # caller's tensors puts every tensor at its parameter position.
        self._outputs = tuple((i, kernel.params[i].shape, getattr(torch, lookup_dtype(kernel.params[i].dtype).torch))
                              for i in self.out_idx)
        self._empty = torch.empty
        self._devices: dict[int, Any] = {}
        self._call = self._call_cuda if self.target == "cuda" else self._call_cpu
        self._accept_launch = self._check.accept_launch
        # __call__'s fast path: the checks and the runtime's launch in one generated function; only
        # for a launchable "cuda" kernel without outputs (every other call goes through self._call)
        self._fast: Any = None
        if self.target == "cuda" and not self._outputs and self._accept_launch is not None:
            self._call = self._call_cuda_accepted
            self._launch_accepted = getattr(self._runtime, "launch_accepted", None)
            if self._launchable and self._launch_accepted is not None:
                # checks and launch in one function, generated at the first call (then called directly)
                self._fast = self._runtime.fused_launch(inputs, written, install=self._install_fast)

    def _install_fast(self, fn: Any) -> None:
        self._fast = fn

    def __call__(self, *tensors: Any, **kwargs: Any) -> Any:
        """Run the kernel.

        Args:
            tensors: one torch tensor per parameter, or without the ``out_idx`` parameters, which are then
                allocated (``torch.empty``) and returned.

        Returns:
            ``None`` without ``out_idx``; the output tensor, or a list of them when several.

        Raises:
            ArgumentError, DTypeError, ShapeError, DeviceError: bad arguments (see :mod:`egtile.validate`).
            SimulationError: target ``"sim"`` found a race, a deadlock or a repeated iteration.
            LaunchError: target ``"cuda"`` without a GPU of compute capability 9.0, or a failed driver call.
        """
        fast = self._fast
        if fast is not None and not kwargs:
            # the argument checks and the launch in one generated function (CudaKernel.fused_launch)
            if fast(tensors) is None:
                return self._call_cuda(tensors)  # the complete check raises the message (or accepts)
            return None
        if kwargs:
            raise ArgumentError(f"kernel {self.kernel.name!r} takes its tensors positionally, in parameter order "
                                f"({', '.join(p.name for p in self.kernel.params)}); got keyword argument(s) "
                                f"{', '.join(sorted(kwargs))}")
        try:
            return self._call(tensors)
        except EgtileError as err:  # the user's error ends at the user's call (egtile.errors.trimmed)
            raise trimmed(err)  # noqa: B904 - egtile's frames are cut here; EGTILE_DEBUG=1 keeps them

    def _call_cuda_accepted(self, tensors: tuple[Any, ...]) -> None:
        # _call_cuda without outputs, through the checks that also return the pointers the launch writes
        if not self._launchable:
            return self._call_cuda(tensors)
        accepted = self._accept_launch(tensors)
        if accepted is None:
            return self._call_cuda(tensors)  # the complete check raises the message (or accepts)
        self._runtime.launch_accepted(tensors, accepted)
        return None

    def _call_cuda(self, tensors: tuple[Any, ...]) -> Any:
        if not self._launchable:
            raise LaunchError(f"kernel {self.kernel.name!r} was compiled for target 'cuda' (sm_90a), but no CUDA "
                              "GPU of compute capability 9.0 is available to launch it; its source and cubin are "
                              "still available (get_kernel_source()); use target='sim' to run it on the CPU")
        device = self._accept(tensors)
        if device == REJECT:
            device = self._check(tensors)  # raises the message, unless the complete check accepts them
        if not self._outputs:
            self._runtime.launch(tensors, device)
            return None
        if device < 0:  # every parameter is an output: torch's current device
            import torch

            device = torch.cuda.current_device()
        where = self._devices.get(device)
        if where is None:
            import torch

            where = self._devices[device] = torch.device("cuda", device)
        args = list(tensors)
        outputs = []
        for pos, shape, dt in self._outputs:
            t = self._empty(shape, dtype=dt, device=where)
            args.insert(pos, t)
            outputs.append(t)
        self._runtime.launch(args, device)
        return outputs[0] if len(outputs) == 1 else outputs

    def _call_cpu(self, tensors: tuple[Any, ...]) -> Any:
        from egtile.poison import poisoned

        self._check(tensors)
        args = list(tensors)
        outputs = []
        for pos, shape, dt in self._outputs:  # poisoned: an element the kernel never writes must show (egtile.poison)
            t = poisoned(shape, dt, "cpu")
            args.insert(pos, t)
            outputs.append(t)
        self._run(args)
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else outputs

    def _run(self, args: list[Any]) -> None:
        """Run on the CPU targets (``"cuda"`` calls go through :meth:`_call_cuda`)."""
        match self.target:
            case "interp":
                from egtile.interp import interpret

                interpret(self.kernel, *args)
            case "sim":
                self._run_sim(args)
            case _:
                raise AssertionError(self.target)

    def _run_sim(self, args: list[Any]) -> None:
        import torch

        simulate = importlib.import_module("egtile.sim").simulate
        result = simulate(self.scheduled, *args)
        if not result.ok:  # races, deadlock, repeated nonlocal iterations, barrier count errors
            if result.kernel is None:  # a result made elsewhere: name the statements of this kernel
                result = dataclasses.replace(result, kernel=self.kernel)
            result.raise_for_errors()
        # Only what the kernel writes is copied back: a parameter it only reads may be an inference tensor,
        # which torch would refuse to update in place outside inference mode.
        for p, t, o in zip(self.kernel.params, args, result.outputs):
            if o is t or p.name not in self._written:
                continue
            t.copy_(torch.as_tensor(o).reshape(t.shape).to(t.dtype))

    # -- inspection --------------------------------------------------------------------------------

    def get_kernel_source(self) -> str:
        """The CUDA C++ source: the one compiled (target ``"cuda"``), or the one ``"cuda"`` would compile for the
        simulated schedule (``"sim"``: generated, not compiled; where the backend refuses the schedule, the
        scheduled listing after a comment that says why); the tile-IR listing (``"interp"``)."""
        if self._built is not None:
            for attr in ("source", "cuda_source", "code"):
                src = getattr(self._built, attr, None)
                if isinstance(src, str):
                    return src
        if self.scheduled is not None:
            from egtile.engine.callback import apply_cuda_postproc

            codegen = importlib.import_module("egtile.codegen")
            try:
                return apply_cuda_postproc(codegen.generate(self.scheduled).source, codegen.nvrtc.DEFAULT_ARCH)
            except EgtileError as err:  # e.g. a ResourceError: the simulator has no sm_90 limits
                why = str(err).splitlines()[0]
                return f"// egtile: no CUDA source for this schedule ({why})\n{self.scheduled}"
        return str(self.kernel)

    def get_profiler(self, tensor_supply_type: Any = None) -> Any:
        """A :class:`egtile.profiler.Profiler` for this kernel (TileLang's ``kernel.get_profiler()``): fresh
        inputs (``tensor_supply_type``, default ``TensorSupplyType.Auto``), ``assert_allclose(reference)``,
        ``do_bench()``."""
        from egtile.profiler import Profiler, TensorSupplyType

        return Profiler(self, tensor_supply_type or TensorSupplyType.Auto)

    @public
    def explain(self, timeline: Any = None, format: str | None = None) -> str:  # noqa: A002
        """The schedule and why it is the way it is: the optimizer's explanation (decisions with the side
        conditions that held or failed, rejected alternatives, costs, stage reports) followed by the
        scheduled listing (roles, waits and arrives with their stage/parity, thread mappings). For
        ``"interp"``, the listing of the unscheduled kernel.

        ``timeline``: a path (``.png`` or ``.svg``, or ``format=``) to which the schedule's picture is also
        written (:mod:`egtile.timeline`: one lane per role, one pipelined iteration per stage, the mbarrier
        waits and arrivals with their phases; needs ``egtile[plot]``)."""
        if timeline is not None:
            if self.scheduled is None:
                raise ArgumentError(f"kernel {self.kernel.name!r} (target 'interp') has no schedule to draw; "
                                    f"compile it for 'sim' or 'cuda'")
            from egtile.timeline import render

            render(self.scheduled, timeline, format=format)
        if self.schedule_result is not None and hasattr(self.schedule_result, "explain"):
            from egtile.ir.printer import format_scheduled

            listing = format_scheduled(self.scheduled, decisions=False)
            n = len(self.scheduled.decisions)
            if n:  # the listing's one-line summary would send the reader to explain(), which they are reading
                head, _, last = listing.rpartition("\n")
                if last.startswith("decisions:"):
                    listing = f"{head}\ndecisions: {n}, listed above with their reasons"
            launch = _launch_note(self.kernel, self.scheduled) + _math_note(self.fast_math, self.target)
            return f"{_front_end_note(self.kernel)}{launch}{self.schedule_result.explain()}\n\nSchedule:\n{listing}"
        return (f"{_front_end_note(self.kernel)}target 'interp': the unscheduled kernel runs on the reference "
                f"interpreter, one block after another, statements in program order.\n{self.kernel}")

    def __repr__(self) -> str:
        return f"JITKernel({self.kernel.name!r}, target={self.target!r}, out_idx={list(self.out_idx)})"


def _math_note(fast: bool, target: str) -> str:
    """What explain() says about the arithmetic when the user asked for fast math (nothing otherwise: the
    default contract is docs/language.md's)."""
    if not fast:
        return ""
    where = ("this CUDA kernel was compiled" if target == "cuda" else
             f"target {target!r} computes egtile's default arithmetic; a 'cuda' compile of it is")
    return (f"Arithmetic: fast math (pass_configs TL_ENABLE_FAST_MATH): {where} with NVRTC --use_fast_math: "
            "a * b + c may fuse into one FMA, subnormals flush to zero, division, square root and the math "
            "functions (T.exp2, T.exp, ...) are their approximate hardware forms (docs/language.md, \"Fast math\").\n\n")


def _front_end_note(kernel: Kernel) -> str:
    """What the front end made of the source that the listing does not show (``ir.Kernel.notes``), one line each."""
    return "".join(f"front end: {n}\n" for n in kernel.notes)


def _launch_note(kernel: Kernel, scheduled: Any) -> str:
    """Why a schedule launches more threads than the kernel's ``threads=`` (``""`` when it does not): warp
    specialization adds a producer warpgroup after the threads the kernel asked for."""
    from egtile.ir.scheduled import RoleSplit, swalk

    extra = scheduled.threads - kernel.threads
    if extra <= 0:
        return ""
    added = sorted({f"{r.name} (threads {r.threads.begin}..{r.threads.end - 1})" for x in swalk(scheduled.body)
                    if isinstance(x, RoleSplit) for r in x.roles if r.threads.begin >= kernel.threads})
    who = f" (role {', '.join(added)})" if added else ""
    return (f"launch: {scheduled.threads} threads per block although the kernel says threads={kernel.threads}: "
            f"warp specialization added a producer warpgroup of {extra} threads{who} that only issues the "
            f"pipelined loads and waits for free stages; the kernel's own {kernel.threads} threads "
            f"(0..{kernel.threads - 1}) are the consumer warpgroup(s) and run its compute as written. "
            "(compiling with rules=egtile.rules.default().without(\"pipeline-warp-specialize\") keeps the launch at "
            "threads=.)\n\n")


@public
def compile(func: PrimFunc | Kernel, out_idx: Any = None, target: str = "auto", rules: Any = None,  # noqa: A001
            **options: Any) -> JITKernel:
    """Compile a traced prim_func for ``target`` (see module docstring).

    Args:
        rules: an ``egtile.rules.RuleSet`` to schedule with instead of the registered catalog (e.g.
            ``egtile.rules.default().without("pipeline-warp-specialize")``); such compiles bypass the
            schedule cache. The schedule is verified like any other before it runs.

    Raises:
        ArgumentError: unknown target, bad ``out_idx``, unknown option.
    """
    _check_options(options)
    fast = fast_math(options.get("pass_configs"))
    from egtile.language.calltime import DeferredPrimFunc

    if isinstance(func, DeferredPrimFunc):  # scalar parameters: bound per call (egtile.callbind)
        from egtile.callbind import CallBoundKernel

        return CallBoundKernel(func, out_idx, target, rules=rules, fast_math=fast)  # type: ignore[return-value]
    from egtile.kernelseq import build

    return build(func, out_idx=out_idx, target=target, rules=rules, fast_math=fast)


def _check_options(options: dict[str, Any]) -> None:
    unknown = set(options) - _IGNORED_OPTIONS
    if unknown:
        raise ArgumentError(f"unknown option(s) {', '.join(sorted(unknown))}")


def _typed_key(v: Any) -> Any:
    """A hashable key of factory argument ``v`` that equals another's only when both would trace the same
    kernel: the exact type is part of it (``1``, ``1.0`` and ``True`` differ), floats are keyed by their
    IEEE bits (``-0.0`` differs from ``0.0``; every NaN payload is its own key), and tuples, lists, dicts,
    sets and frozensets are keyed element by element with their own type. Other values are keyed as
    ``(type, value)``.

    Raises:
        TypeError: ``v`` (or an element) is unhashable and not one of the containers above.
    """
    t = type(v)
    if isinstance(v, float):
        import struct

        return (t, struct.pack("<d", v))
    if isinstance(v, complex):
        return (t, _typed_key(v.real), _typed_key(v.imag))
    if t.__module__ == "numpy" and hasattr(v, "tobytes") and getattr(v, "ndim", None) == 0:
        return (t, v.tobytes())  # a numpy scalar: np.float32(-0.0) == 0.0 too
    if isinstance(v, (tuple, list)):
        return (t, tuple(_typed_key(x) for x in v))
    if isinstance(v, dict):
        return (t, frozenset((_typed_key(k), _typed_key(x)) for k, x in v.items()))
    if isinstance(v, (set, frozenset)):
        return (t, frozenset(_typed_key(x) for x in v))
    hash(v)
    return (t, v)


class JITFactory:
    """``@egtile.jit`` applied to a kernel factory: calling it with the factory's Python arguments returns a
    :class:`JITKernel`, compiled once per distinct argument values; a :class:`egtile.kernelseq.KernelSequence`
    when the prim_func has several ``T.Kernel`` blocks or ``T.alloc_global`` scratch; a
    :class:`egtile.callbind.CallBoundKernel` when it has ``T.dynamic`` sizes or scalar parameters, bound and
    compiled at each call (the factory runs under :mod:`egtile.language.calltime`'s passes)."""

    def __init__(self, fn: Callable[..., Any], out_idx: Any, target: str, fast_math: bool = False) -> None:
        self.fn = fn
        self.out_idx = out_idx
        self.target = target
        self.fast_math = fast_math
        self._signature = inspect.signature(fn)
        self._cache: dict[Any, JITKernel] = {}
        functools.update_wrapper(self, fn)

    def _key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The cache key of one call: every bound argument as ``(name, typed key)``, or ``None`` (not
        cached) when an argument cannot be keyed. Values are keyed with their type, because Python's
        ``2 == 2.0 == True`` and ``0.0 == -0.0`` (with equal hashes) would otherwise share one kernel
        between factory calls that trace different programs (an int or float literal, the sign of a
        zero constant)."""
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as err:
            raise ArgumentError(f"kernel factory {self.fn.__name__!r}: {err}") from None
        bound.apply_defaults()
        try:
            key = tuple((name, _typed_key(v)) for name, v in bound.arguments.items())
            hash(key)
        except TypeError:
            return None
        return key

    @public
    def __call__(self, *args: Any, **kwargs: Any) -> JITKernel:
        key = self._key(args, kwargs)
        if key is not None and key in self._cache:
            return self._cache[key]
        from egtile.language import calltime as dynamic

        func = self._run_factory(dynamic.FactoryPass("collect"), args, kwargs)
        if isinstance(func, dynamic.DeferredPrimFunc):
            # T.dynamic sizes or scalar parameters: bound at each call, one kernel per binding (egtile.callbind)
            from egtile.callbind import CallBoundKernel

            def rebuild(values: dict[str, int], scalars: dict[str, Any]) -> Any:
                return self._run_factory(dynamic.FactoryPass("bind", values=values, scalars=scalars), args, kwargs)

            bound = CallBoundKernel(func, self.out_idx, self.target, rebuild=rebuild if func.symbols else None,
                                    fast_math=self.fast_math)
            if key is not None:
                self._cache[key] = bound
            return bound  # type: ignore[return-value]
        if not isinstance(func, PrimFunc):
            raise DSLError(f"@egtile.jit function {self.fn.__name__!r} must return a @T.prim_func, got "
                           f"{type(func).__name__}")
        from egtile.kernelseq import build

        kernel = build(func, out_idx=self.out_idx, target=self.target, fast_math=self.fast_math)
        if key is not None:
            self._cache[key] = kernel
        return kernel

    def _run_factory(self, p: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The factory's result, run under factory pass ``p`` (:mod:`egtile.language.calltime`)."""
        from egtile.language import calltime as dynamic
        from egtile.language.eager import _StopBinding

        try:
            with dynamic.factory_pass(p):
                return self.fn(*args, **kwargs)
        except _StopBinding as stop:
            raise UnsupportedError(f"kernel factory {self.fn.__name__!r} uses T.dynamic size {stop.args[0]!r} as a "
                                   "number (a comparison, range(), int()) before its prim_func is called, when its "
                                   "value is not known yet; use it inside the prim_func, or in arithmetic "
                                   "(+, -, *, //, %, T.ceildiv), which is evaluated once it is bound") from None

    def compile(self, *args: Any, **kwargs: Any) -> JITKernel:
        """Same as calling the factory."""
        return self(*args, **kwargs)


@public
def jit(func: Callable[..., Any] | PrimFunc | None = None, *, out_idx: Any = None, target: str = "auto",
        **options: Any) -> Any:
    """``@egtile.jit`` / ``@egtile.jit(out_idx=[...], target=...)`` on a kernel factory (a function returning a
    ``@T.prim_func``); applied to a prim_func directly it compiles it.

    TileLang's ``pass_configs``, ``execution_backend``, ``verbose``, ``compile_flags`` and
    ``debug_root_path`` are accepted; of them only ``pass_configs={PassConfigKey.TL_ENABLE_FAST_MATH: True}``
    has an effect (:func:`egtile.options.fast_math`: the CUDA kernel is compiled with ``--use_fast_math``).

    Raises:
        ArgumentError: unknown target or option.
    """
    _check_options(options)
    fast = fast_math(options.get("pass_configs"))
    if target not in TARGETS:
        raise ArgumentError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    if func is None:
        return lambda f: jit(f, out_idx=out_idx, target=target, **options)
    from egtile.language.calltime import DeferredPrimFunc

    if isinstance(func, (PrimFunc, Kernel, DeferredPrimFunc)):  # a kernel itself, not a factory: compile it
        return compile(func, out_idx=out_idx, target=target, pass_configs=options.get("pass_configs"))
    if not callable(func):
        raise ArgumentError(f"@egtile.jit expects a function, got {type(func).__name__}")
    from egtile.language import eager

    if eager.style(func) == "eager":  # TileLang's eager style: a function of tensors (egtile.language.eager)
        if out_idx is not None:
            raise ArgumentError(f"@egtile.jit(out_idx=...) on eager function {func.__name__!r}: out_idx is for kernel "
                                "factories; an eager function declares its outputs with T.empty and returns them")
        return eager.EagerJIT(func, target, options)
    return JITFactory(func, out_idx, target, fast)


__all__ = ["JITFactory", "JITKernel", "TARGETS", "compile", "hopper_available", "jit", "resolve_target"]
