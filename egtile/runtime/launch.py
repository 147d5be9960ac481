""":class:`CudaKernel`: launch a :class:`~egtile.codegen.BuiltKernel` on torch tensors.

Computed once per kernel: the argument rules (:class:`egtile.validate.Checker`, generated code). Once per
kernel and device (a :class:`_Plan`, made at the first launch there): the compute-capability check, the
device's primary context, the loaded module and its ``CUfunction`` (``cuFuncSetAttribute
(MAX_DYNAMIC_SHARED_SIZE_BYTES)`` raised to the block's dynamic shared memory), each parameter's
required alignment, the static part of every TMA tensor map (:class:`~egtile.runtime.tensormap.TiledMap`)
and the tensor-map cache. Once per kernel, device and thread (a :class:`_Lane`, made at that thread's
first launch): the ``CUlaunchConfig`` (:class:`~egtile.runtime.args.LaunchConfig`: grid, block, shared
memory, stream), the argument block (:class:`~egtile.runtime.args.ArgBlock`), the launch call itself
(the driver's ``cuLaunchKernelEx`` through ``ctypes``, :func:`~egtile.runtime.driver.launch_entry`, bound
to the config, the function and the block, so that a launch is a call with no arguments that converts
nothing), and ``cuCtxSetCurrent`` of the primary context.

A launch (:meth:`CudaKernel.launch_accepted`; ``kernel(*tensors)`` of an ``egtile.jit`` kernel without
outputs runs it written out after the argument checks in one generated function,
:meth:`CudaKernel.fused_launch`): takes the tensors'
pointers from the argument checks (:attr:`egtile.validate.Checker.accept_launch`, which reads each
``data_ptr()`` once); finds this thread's lane of the kernel (one ``threading.local`` read); with more
than one GPU visible, checks that torch's current device is the tensors' device (with one, it can only
be); only if the pointers differ from the lane's previous launch, checks their alignment, writes them
into the block in one ``struct`` write and re-points the tensor-map slots whose operand moved (maps
encoded once per distinct address); reads torch's current stream of the device (a plain int,
:mod:`egtile.runtime.stream`) and, only if it differs, writes it into the config; and calls the driver.
A lane belongs to one thread, so launches from several threads never share an argument block or config
and need no lock (the driver copies both during the call). The launch goes on torch's current stream of
the tensors' device; when that is not torch's current device, it runs under ``torch.cuda.device(...)``,
so the caller's current device is left as it was.

The context is not set per launch. torch only ever makes primary contexts current (``cudaSetDevice``),
so when torch's current device is the tensors' device, that device's primary context is current, and the
lane made it current on this thread at its first launch. Only another library could have changed it
since (pushed its own context, or none); a launch that then fails, which enqueues nothing, is retried once
after ``cuCtxSetCurrent`` (:meth:`_Plan._relaunch`). Every driver call is checked, on failure only, so
the success path builds no message.

Watchdog: with ``watchdog_s`` (or ``$EGTILE_WATCHDOG_S``) set, the call waits for the kernel by polling
a CUDA event and raises :class:`~egtile.errors.LaunchError` when it has not finished in time, so a
deadlocked kernel (an mbarrier wait that no arrival satisfies) fails the caller instead of hanging it.
The kernel itself keeps running (a GPU kernel cannot be cancelled); the process should then exit.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from egtile.errors import LaunchError
from egtile.ir.scheduled import Scheduled
from egtile.validate import Checker, check_lines, written_params

from egtile.codegen import BuiltKernel
from egtile.runtime import stream as torch_stream
from egtile.runtime.args import ArgBlock, launch_config, misaligned, validate
from egtile.runtime.driver import check, driver, launch_entry, launch_failed, use_device
from egtile.runtime.tensormap import TensorMapCache, TiledMap, row_major

REQUIRED_CC = (9, 0)


def gpu_available() -> bool:
    """Whether torch sees a CUDA GPU of compute capability 9.0 (what ``target="auto"`` asks)."""
    try:
        import torch

        return torch.cuda.is_available() and any(
            torch.cuda.get_device_capability(i) == REQUIRED_CC for i in range(torch.cuda.device_count()))
    except Exception:  # noqa: BLE001 - a broken CUDA install means "no GPU"
        return False


class CudaKernel:
    """A compiled kernel bound to its schedule, callable on CUDA torch tensors.

    Args:
        built: from :func:`egtile.codegen.build`.
        scheduled: the schedule it was built from (for messages and ``explain``).
        watchdog_s: if set, wait at most this many seconds for each launch to finish (see module doc);
            default ``$EGTILE_WATCHDOG_S`` or no wait (the launch is asynchronous, like any CUDA launch).

    Calling it with the kernel's global tensors, in parameter order, writes the outputs in place and
    returns ``None``. Raises ArgumentError/DTypeError/ShapeError/DeviceError for bad tensors and
    LaunchError when no sm_90 GPU is present or a driver call fails. :meth:`launch` is the same launch for
    a caller that has already checked the tensors (``egtile.jit``'s kernels).
    """

    def __init__(self, built: BuiltKernel, scheduled: Scheduled, *, watchdog_s: float | None = None) -> None:
        self.built = built
        self.scheduled = scheduled
        env = os.environ.get("EGTILE_WATCHDOG_S")
        self.watchdog_s = watchdog_s if watchdog_s is not None else (float(env) if env else None)
        self._plans: dict[int, _Plan] = {}
        self._plan_lock = threading.Lock()
        self._gpu_seen = False
        self._written: frozenset[str] | None = None
        self._checks: Checker | None = None
        # this thread's lane of the device it last launched on, for launch_accepted (never set with a watchdog,
        # so that those launches take the path that waits)
        self._local = threading.local()
        self._many: bool | None = None  # more than one GPU visible (then the current device is read per launch)
        self._current_device: Any = None
        self._current_stream: Any = None

    # ``egtile.jit``'s kernels check their arguments themselves and call :meth:`launch`; what only a direct
    # call needs is made at the first one, so that a (warm) compile does not build it.
    @property
    def written(self) -> frozenset[str]:
        """The parameters the kernel writes (:func:`egtile.validate.written_params`)."""
        w = self._written
        if w is None:
            w = self._written = written_params(self.scheduled.kernel)
        return w

    @property
    def _checker(self) -> Checker:
        """The argument checks of a direct call."""
        c = self._checks
        if c is None:
            built, written = self.built, self.written
            c = self._checks = Checker(built.params, device="cuda", written=written, name=self.name,
                                       explain=lambda ts: validate(built, self.name, ts, written))
        return c

    @property
    def name(self) -> str:
        return self.scheduled.kernel.name

    def get_kernel_source(self) -> str:
        return self.built.source

    # ------------------------------------------------------------------------------------------------

    def _require_gpu(self) -> None:
        try:
            import torch
        except ImportError:  # pragma: no cover
            raise LaunchError(f"kernel {self.name!r}: torch is not installed; cannot launch on a GPU") from None
        if not torch.cuda.is_available():
            raise LaunchError(
                f"kernel {self.name!r}: no CUDA GPU is available (torch.cuda.is_available() is False). The kernel "
                f"was compiled for {self.built.arch} (source and cubin are available) but cannot be launched here; "
                f"use target='sim' to run it in the CPU simulator")
        self._gpu_seen = True  # a GPU does not go away while the process runs

    def plan(self, device: int) -> _Plan:
        """The launch plan of ``device`` (made on first use)."""
        p = self._plans.get(device)
        if p is None:
            with self._plan_lock:
                p = self._plans.get(device)
                if p is None:
                    p = self._plans[device] = _Plan(self, device)
        return p

    def __call__(self, *tensors: Any) -> None:
        if not self._gpu_seen:
            self._require_gpu()
        fast = self._checker.accept_launch
        accepted = fast(tensors) if fast is not None else None
        if accepted is None:
            self.launch(tensors, self._checker(tensors))
        else:
            self.launch_accepted(tensors, accepted)

    def fused_launch(self, params: Sequence[Any], written: frozenset[str], install: Any = None) -> Any:
        """``launch(ts) -> True | None``: the argument checks of ``params`` (:func:`egtile.validate.check_lines`,
        the rules of :class:`~egtile.validate.Checker`) and :meth:`launch_accepted` in one generated function,
        so a call costs one Python frame for both and builds the pointer tuple once. ``None``: a rule
        failed, nothing was launched (the caller runs the complete checks for the message); ``True``:
        launched. ``params`` are the kernel's parameters in launch order (``egtile.jit``'s kernels without
        outputs pass theirs). The generated code is compiled once per parameter list, written set and GPU
        count, and bound to this kernel's lane memo and torch's stream and device getters.

        ``install``: when given, what is returned is a stand-in that makes the function at its first call,
        hands it to ``install`` (which puts it where the caller calls from, so later calls reach it
        directly) and runs it: a compile that is never called, or a warm compile, pays nothing for it."""
        if install is not None:
            def first(ts: Sequence[Any]) -> Any:
                made = self.fused_launch(params, written)
                install(made)
                return made(ts)

            return first
        import torch

        many = torch.cuda.device_count() > 1
        key = (tuple((p.name, str(p.dtype), tuple(p.shape)) for p in params), frozenset(written), many)
        made = _FUSED.get(key)
        if made is None:
            body, env, device = check_lines(params, "cuda", written, refuse="return None", pointers=True)
            accepted = f"({''.join(f'p{i}, ' for i in range(len(params)))}{device})"
            lines = ["def launch(ts):", *body, *_fused_tail(accepted, device, many)]
            made = (compile("\n".join(lines) + "\n", f"<checks and launch of kernel {self.name!r}>", "exec"), env)
            if len(_FUSED) >= 1024:
                _FUSED.pop(next(iter(_FUSED)))
            _FUSED[key] = made
        code, env = made
        current_stream, current_device = torch_stream.functions()
        slow = self._launch_accepted_slow
        env = dict(env, local=self._local, current_stream=current_stream, current_device=current_device,
                   slow=lambda ts, accepted: slow(ts, accepted) or True)
        exec(code, env)  # noqa: S102 - generated from the parameters' names, dtypes and shapes only
        return env["launch"]

    def launch_accepted(self, tensors: Sequence[Any], accepted: tuple[int, ...]) -> None:
        """:meth:`launch` of tensors that :attr:`egtile.validate.Checker.accept_launch` accepted, with what it
        returned (their pointers, then their device), so the pointers are not read again.

        The common case (this thread launched this kernel on this device before, on torch's current device,
        no watchdog) is :meth:`_Plan.launch` written out here, on the lane itself: one Python frame and the
        fewest reads per launch."""
        try:
            lane = self._local.lane
        except AttributeError:  # this thread's first launch of this kernel, or a watchdog
            return self._launch_accepted_slow(tensors, accepted)
        # with one GPU visible, every tensor is on device 0 and so is torch's current device
        if self._many and (lane.device != accepted[-1] or self._current_device() != lane.device):
            return self._launch_accepted_slow(tensors, accepted)
        if accepted != lane.pointers:
            lane.plan._write_pointers(lane, accepted)
        stream = self._current_stream(lane.device)
        if stream != lane.stream:
            lane.config.hStream = lane.stream = stream
        if lane.go():
            lane.plan._relaunch(lane)

    def _launch_accepted_slow(self, tensors: Sequence[Any], accepted: tuple[int, ...]) -> None:
        device = accepted[-1]
        p = self._plans.get(device) or self.plan(device)
        if p.current_device() == device:
            p.launch(tensors, p.current_stream(device), accepted)
            if self.watchdog_s is None:  # the next launch from this thread takes the path above
                if self._many is None:
                    import torch

                    self._many = torch.cuda.device_count() > 1
                    self._current_device, self._current_stream = p.current_device, p.current_stream
                self._local.lane = p._local.lane
        else:
            import torch

            with torch.cuda.device(device):
                p.launch(tensors, p.current_stream(device), accepted)
        if self.watchdog_s is not None:
            self._wait(device, self.watchdog_s)

    def launch(self, tensors: Sequence[Any], device: int) -> None:
        """Launch on ``tensors`` (one per parameter, already checked: dtype, shape, contiguity, all on CUDA
        device ``device``; ``-1``: torch's current device). Alignment is checked here."""
        if device < 0:  # no tensor to say where: torch's current device (initializing torch's CUDA state)
            import torch

            device = torch.cuda.current_device()
        p = self._plans.get(device) or self.plan(device)
        if p.current_device() == device:
            p.launch(tensors, p.current_stream(device))
        else:
            import torch

            with torch.cuda.device(device):
                p.launch(tensors, p.current_stream(device))
        if self.watchdog_s is not None:
            self._wait(device, self.watchdog_s)

    def _wait(self, device: int, limit_s: float) -> None:
        import torch

        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device))
        deadline = time.monotonic() + limit_s
        pause = 1e-5
        while True:
            try:
                if event.query():
                    break
            except RuntimeError as e:
                raise LaunchError(f"kernel {self.name!r} ({self.built.symbol}) failed on the GPU: {e}") from None
            if time.monotonic() > deadline:
                raise LaunchError(
                    f"kernel {self.name!r} ({self.built.symbol}) did not finish within {limit_s:g} s (watchdog): "
                    f"likely a deadlock, e.g. an mbarrier wait whose phase never completes. The kernel cannot be "
                    f"cancelled; the CUDA context stays busy until the process exits")
            time.sleep(pause)
            pause = min(pause * 2, 1e-2)
        try:
            event.synchronize()
        except RuntimeError as e:
            raise LaunchError(f"kernel {self.name!r} ({self.built.symbol}) failed on the GPU: {e}") from None


class _Plan:
    """What every launch of one kernel on one CUDA device reuses (see the module docstring), shared by all
    threads; each thread launches through its own :class:`_Lane`."""

    __slots__ = ("name", "symbol", "device", "context", "function", "built", "params", "aligns", "map_params",
                 "map_specs", "map_names", "map_tables", "tensor_maps", "current_stream", "current_device", "_local",
                 "_set_current", "_launch", "_pointers", "_where")

    def __init__(self, k: CudaKernel, device: int) -> None:
        import torch

        built = self.built = k.built
        self.name, self.symbol, self.device = k.name, built.symbol, device
        cc = torch.cuda.get_device_capability(device)
        if tuple(cc) != REQUIRED_CC:
            raise LaunchError(f"kernel {self.name!r}: compiled for {built.arch}, which runs only on compute "
                              f"capability 9.0 (H100/H200); cuda:{device} is {cc[0]}.{cc[1]}")
        d = driver()
        sym = built.symbol
        with torch.cuda.device(device):
            self.context = use_device(device, sym)
            module = check(d.cuModuleLoadData(built.cubin), "cuModuleLoadData", sym)
            self.function = check(d.cuModuleGetFunction(module, sym.encode()), "cuModuleGetFunction", sym)
            check(d.cuFuncSetAttribute(self.function,
                                       d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       built.smem_bytes),
                  "cuFuncSetAttribute", sym, f"MAX_DYNAMIC_SHARED_SIZE_BYTES={built.smem_bytes}")
        self._where = f"grid {built.grid}, block {built.threads}, {built.smem_bytes} B shared memory"
        self.params = tuple(p.name for p in built.params)
        self.aligns = tuple(p.align for p in built.params)
        index = {p.name: i for i, p in enumerate(built.params)}
        self.map_params = tuple(index[t.buffer] for t in built.tma)
        self.map_specs = tuple(
            TiledMap(built.params[index[t.buffer]].dtype, built.params[index[t.buffer]].shape,
                     row_major(built.params[index[t.buffer]].shape), t.box, getattr(t, "swizzle", "linear"))
            for t in built.tma)
        self.map_names = tuple(t.param for t in built.tma)
        self.tensor_maps = TensorMapCache(sym)
        self.map_tables = tuple(self.tensor_maps.table(m) for m in self.map_specs)
        self.current_stream, self.current_device = torch_stream.functions()
        self._local = threading.local()
        self._set_current = d.cuCtxSetCurrent
        self._launch = launch_entry()  # the driver's cuLaunchKernelEx through ctypes
        self._pointers = _pointer_reader(len(built.params))

    def launch(self, tensors: Sequence[Any], stream: int, pointers: tuple[int, ...] | None = None) -> None:
        """Write the arguments into this thread's lane and launch on ``stream`` (a ``cudaStream_t``).

        ``pointers``: the tensors' ``data_ptr()`` values in order, possibly followed by more values (the
        device, from :attr:`~egtile.validate.Checker.accept_launch`); read here when not given. Only what
        changed since this thread's previous launch is rewritten: the pointer values (checked for
        alignment) when any differs, a tensor-map slot when its operand's address differs, the config's
        stream when torch's current stream differs."""
        try:
            lane = self._local.lane
        except AttributeError:
            lane = self._local.lane = _Lane(self)
        if pointers is None:
            pointers = self._pointers(tensors)
        if pointers != lane.pointers:
            self._write_pointers(lane, pointers)
        if stream != lane.stream:
            lane.config.hStream = lane.stream = stream
        if lane.go():
            self._relaunch(lane)

    def _write_pointers(self, lane: _Lane, pointers: tuple[int, ...]) -> None:
        for i, (ptr, align) in enumerate(zip(pointers, self.aligns)):
            if ptr % align:
                raise misaligned(self.name, self.params[i], ptr, align)
        lane.block.write_pointers(pointers[:len(self.aligns)])
        for k, i in enumerate(self.map_params):
            ptr = pointers[i]
            if ptr != lane.map_addresses[k]:
                tensor_map = self.map_tables[k].get(ptr) or self.tensor_maps.get(ptr, self.map_specs[k],
                                                                                 self.map_names[k])
                lane.block.set_map(k, tensor_map)
                lane.map_addresses[k] = ptr
        lane.pointers = pointers

    def _relaunch(self, lane: _Lane) -> None:
        """A launch failed. The one failure a launch can fix is a thread whose current context is no longer
        the device's primary context (another library switched it): make it current and launch once more.
        A failed launch enqueues nothing, so this never runs the kernel twice; a second failure is raised."""
        check(self._set_current(self.context), "cuCtxSetCurrent", self.symbol, f"device {self.device}")
        code = lane.go()
        if code:
            raise launch_failed(code, "cuLaunchKernelEx", self.symbol, self._where)


# compiled fused checks-and-launch code by what it is generated from (CudaKernel.fused_launch); bounded
_FUSED: dict[Any, tuple[Any, dict[str, Any]]] = {}


def _fused_tail(accepted: str, device: str, many: bool) -> list[str]:
    """The statements after the checks in :meth:`CudaKernel.fused_launch`: :meth:`CudaKernel.launch_accepted`
    written out on the checks' pointer variables (``accepted``: their tuple and the device)."""
    lines = ["    try:",
             "        lane = local.lane",
             "    except AttributeError:  # this thread's first launch, or a watchdog: the general path",
             f"        return slow(ts, {accepted})"]
    if many:
        lines.append(f"    if lane.device != {device} or current_device() != {device}: return slow(ts, {accepted})")
    return lines + [
        f"    ptrs = {accepted}",
        "    if ptrs != lane.pointers:",
        "        lane.plan._write_pointers(lane, ptrs)",
        f"    stream = current_stream({device})",
        "    if stream != lane.stream:",
        "        lane.config.hStream = lane.stream = stream",
        "    if lane.go():",
        "        lane.plan._relaunch(lane)",
        "    return True"]


def _pointer_reader(n: int) -> Any:
    """``read(tensors) -> (tensors[0].data_ptr(), ..., tensors[n-1].data_ptr())``, unrolled: a third cheaper
    than ``tuple(map(Tensor.data_ptr, tensors))``."""
    body = "".join(f"ts[{i}].data_ptr(), " for i in range(n))
    return eval(f"lambda ts: ({body})")  # noqa: S307 - built from an int only


class _Lane:
    """One thread's launch state for one :class:`_Plan`: its own ``CUlaunchConfig``
    (:class:`~egtile.runtime.args.LaunchConfig`, whose stream is that thread's current stream),
    :class:`~egtile.runtime.args.ArgBlock`, the launch call bound to both, and the memo of what they hold.
    A lane is used by one thread only, so no launch waits on a lock, and no launch can see another
    thread's pointers. Making one also makes the primary context current on its thread (the thread's
    first launch of this kernel on this device).

    Attributes:
        go: ``go() -> int``: ``cuLaunchKernelEx(&config, function, block, NULL)``, its ``CUresult`` (0:
            success); a ``functools.partial`` of the ``ctypes`` entry point over four ctypes objects made here.
    """

    __slots__ = ("plan", "device", "config", "block", "address", "stream", "pointers", "map_addresses", "go",
                 "_function")

    def __init__(self, plan: _Plan) -> None:
        built = plan.built
        check(driver().cuCtxSetCurrent(plan.context), "cuCtxSetCurrent", plan.symbol, f"device {plan.device}")
        self.plan, self.device = plan, plan.device
        self.config = launch_config(built.grid, built.threads, built.smem_bytes)
        self.stream: int = 0  # the config's hStream: NULL, the default stream
        self.block = ArgBlock(len(built.params), len(built.tma))
        self.address = self.block.address
        self.pointers: tuple[int, ...] | None = None
        self.map_addresses: list[int | None] = [None] * len(built.tma)
        self._function = ctypes.c_void_p(int(plan.function))  # the CUfunction handle
        self.go = functools.partial(plan._launch, ctypes.byref(self.config), self._function, self.block.slots, None)
