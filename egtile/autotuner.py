"""``egtile.autotune``: pick a kernel's best configuration by measuring each (TileLang's autotuner API).

::

    @egtile.autotune(configs=[{"block_M": 64, "num_stages": 2}, {"block_M": 128, "num_stages": 3}], warmup=3, rep=20)
    @egtile.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=None, num_stages=None): ...

    kernel = matmul(1024, 1024, 1024)   # tunes (a progress bar per configuration), then returns the winner

What a call does, with the arguments it is given:

1. When every key of the configurations is given explicitly, no tuning: the kernel for those values.
2. Otherwise, the winner recorded on disk for this function (its source), these arguments, the
   configuration list and this GPU, if there is one (``$EGTILE_CACHE_DIR/autotune``; ``cache_results=False``
   or ``EGTILE_DISABLE_CACHE=1`` turn it off).
3. Otherwise each configuration is compiled (one that does not compile, or is refused by the verifier, is
   skipped and counted), run on fresh inputs (``supply_type``, ``supply_prog`` or
   :func:`set_autotune_inputs`), checked against ``ref_prog`` when given (``rtol``/``atol``/
   ``max_mismatched_ratio``; ``skip_check`` and ``manual_check_prog`` as in TileLang), and timed with
   :func:`egtile.profiler.do_bench` (``warmup``/``rep`` are its time budgets in ms). The fastest wins and is
   written to the disk cache. ``early_stop`` stops once a configuration is ``early_stop_factor`` times slower
   than the best after at least a third of them ran.

On a CPU target (``interp``/``sim``) nothing is timed (the simulator is no performance model): the first
configuration that compiles and passes the check wins, ``latency`` is NaN (not measured; a float, so that a
port's ``f"{latency:.3f}"`` or ``flops / latency`` still runs) and nothing is cached.
An eager function (:mod:`egtile.language.eager`) is tuned on the tensors of the call and returns the
outputs of the winner (``compile(M=...)`` without tensors tunes on fresh inputs of ``supply_type``, or inside
``with set_autotune_inputs(...)`` on those tensors, whose shapes then bind its sizes), a kernel
factory returns the winner's kernel. The winning kernel carries ``kernel.config`` and ``kernel.latency``, as
TileLang's does. A configuration's ``pass_configs`` entry is a compile option, not an argument of the factory:
accepted and without effect, as in ``@egtile.jit(pass_configs=...)``, except ``TL_ENABLE_FAST_MATH``, which must
agree with the ``@egtile.jit``'s (egtile does not tune the arithmetic; a configuration that asks for another is
an error naming it, not a silently different kernel).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from egtile.errors import ArgumentError, EgtileError, UnsupportedError
from egtile.profiler import Profiler, TensorSupplyType, do_bench

_INPUTS: list[Any] | None = None
_COMPILE_OPTIONS = frozenset({"pass_configs", "execution_backend", "verbose", "compile_flags", "target"})


@contextlib.contextmanager
def set_autotune_inputs(*tensors: Any):
    """``with set_autotune_inputs(a, b):``: tune on these tensors instead of generated ones."""
    global _INPUTS
    old = _INPUTS
    _INPUTS = list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else list(tensors)
    try:
        yield
    finally:
        _INPUTS = old


def get_autotune_inputs() -> list[Any] | None:
    return _INPUTS


@dataclass(frozen=True)
class AutotuneResult:
    """The outcome of tuning: the winning ``config`` and its ``kernel``, its ``latency`` in ms (NaN when not
    measured: a CPU target), and how many configurations were ``tried`` and ``failed``."""

    config: dict[str, Any]
    kernel: Any
    latency: float | None
    tried: int
    failed: int
    ref_latency: float | None = None
    from_cache: bool = False

    @property
    def func(self) -> Any:
        return getattr(self.kernel, "prim_func", None)


def _cache_dir() -> Path | None:
    if os.environ.get("EGTILE_DISABLE_CACHE", "").strip() in ("1", "true", "yes"):
        return None
    base = os.environ.get("EGTILE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "egtile")
    return Path(base) / "autotune"


def _device_name() -> str | None:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return None
    if not torch.cuda.is_available():
        return None
    return f"{torch.cuda.get_device_name()} sm_{''.join(map(str, torch.cuda.get_device_capability()))}"


def _source_of(fn: Callable[..., Any]) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return fn.__qualname__


def _arg_key(v: Any) -> Any:
    """A description of one argument for the cache key: tensors by shape and dtype, other values by repr."""
    try:
        import torch

        if isinstance(v, torch.Tensor):
            return ("tensor", tuple(v.shape), str(v.dtype))
    except ImportError:  # pragma: no cover
        pass
    return repr(v)


class _Tuned:
    """What ``@autotune(...)`` makes of a ``@jit`` object (module docstring)."""

    def __init__(self, impl: Any, configs: Any, options: dict[str, Any]) -> None:
        import functools

        self.impl = impl
        self.configs = configs
        self.options = options
        self._memo: dict[Any, AutotuneResult] = {}
        self.fn = impl.fn
        functools.update_wrapper(self, impl.fn)

    # -- configurations ------------------------------------------------------------------------

    def _config_list(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[dict[str, Any]]:
        configs = self.configs
        if callable(configs):
            try:
                sig = inspect.signature(configs)
                n_params = len(sig.parameters)
            except (TypeError, ValueError):
                n_params = 0
            configs = configs(*args, **kwargs) if n_params else configs()
        out = [dict(c) for c in configs]
        if not out:
            raise ArgumentError(f"autotune of {self.fn.__name__!r}: the configuration list is empty")
        params = inspect.signature(self.fn).parameters
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            for cfg in out:
                unknown = sorted(k for k in cfg if k not in params and k not in _COMPILE_OPTIONS)
                if unknown:
                    # it would fail to compile like a bad configuration and be skipped, silently
                    raise ArgumentError(f"autotune of {self.fn.__name__!r}: configuration {cfg} names {unknown[0]!r}, "
                                        f"which is not a parameter of {self.fn.__name__} (its parameters: "
                                        f"{', '.join(params) or 'none'})")
        return out

    def _eager(self) -> bool:
        from egtile.language.eager import EagerJIT

        return isinstance(self.impl, EagerJIT)

    def _compile(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        params = inspect.signature(self.fn).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        # TileLang's per-configuration compile options (a config's "pass_configs"): not factory arguments; their
        # arithmetic was checked against the @egtile.jit's before tuning (tune)
        kwargs = {k: v for k, v in kwargs.items() if k not in _COMPILE_OPTIONS or k in params or takes_any}
        if self._eager() and _INPUTS is not None and not any(_is_tensor(x) for x in (*args, *kwargs.values())):
            # an eager compile(...) without tensors inside `with set_autotune_inputs(...)`: the tuning tensors are
            # the kernel's tensor parameters in order, as TileLang uses them, so their shapes bind the T.dynamic /
            # T.const sizes (egtile specializes on them; TileLang keeps a dynamic size symbolic)
            args = (*_INPUTS, *args)
        return self.impl.compile(*args, **kwargs)

    def _check_arithmetic(self, cfg: dict[str, Any]) -> None:
        """Raise when ``cfg`` (a configuration with the call's keywords) has ``pass_configs`` asking for other
        arithmetic than the ``@egtile.jit``'s (checked for every configuration before any is compiled: a failing
        configuration is skipped, and this one must not be)."""
        params = inspect.signature(self.fn).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        if "pass_configs" not in cfg or "pass_configs" in params or takes_any:
            return
        from egtile.options import fast_math

        want, have = fast_math(cfg["pass_configs"]), bool(getattr(self.impl, "fast_math", False))
        if want != have:
            raise UnsupportedError(
                f"autotune of {self.fn.__name__!r}: a configuration's pass_configs {cfg['pass_configs']!r} sets "
                f"TL_ENABLE_FAST_MATH={want} but the "
                f"@egtile.jit compiles with fast math {'on' if have else 'off'}; egtile does not tune the "
                "arithmetic: set it once in @egtile.jit(pass_configs=...)")

    # -- tuning ----------------------------------------------------------------------------------

    def tune(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> AutotuneResult:
        """Tune for these arguments (module docstring) and return the result."""
        configs = self._config_list(args, kwargs)
        for cfg in configs:
            self._check_arithmetic({**kwargs, **cfg})  # what _compile will be given
        device = _device_name()
        key_text = json.dumps([self.fn.__module__, self.fn.__qualname__, _source_of(self.fn),
                               [_arg_key(a) for a in args], sorted((k, _arg_key(v)) for k, v in kwargs.items()),
                               [repr(sorted(c.items())) for c in configs], device], sort_keys=True, default=repr)
        digest = hashlib.sha256(key_text.encode()).hexdigest()
        if digest in self._memo:
            return self._memo[digest]
        cached = self._load(digest, configs) if device is not None and self.options["cache_results"] else None
        if cached is not None:
            idx, latency = cached
            kernel = self._compile(args, {**kwargs, **configs[idx]})
            result = AutotuneResult(configs[idx], kernel, latency, 0, 0, from_cache=True)
        else:
            result = self._search(args, kwargs, configs)
            if device is not None and not math.isnan(result.latency) and self.options["cache_results"]:
                self._store(digest, configs.index(result.config), result.config, result.latency, key_text)
        self._memo[digest] = result
        for attr, value in (("config", result.config), ("latency", result.latency)):
            try:  # TileLang's tuned kernel answers kernel.config and kernel.latency
                setattr(result.kernel, attr, value)
            except AttributeError:  # pragma: no cover - a kernel object without a __dict__
                pass
        return result

    def _inputs(self, kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any] | None:
        if self._eager():
            return None  # an eager kernel runs on the call's own tensors
        if _INPUTS is not None:
            return list(_INPUTS)
        supply_prog = self.options["supply_prog"]
        jk = kernel
        ins_params = [p for i, p in enumerate(jk.kernel.params) if i not in jk.out_idx]
        if supply_prog is not None:
            return list(supply_prog([_supply_param(p) for p in ins_params]))
        return Profiler(jk, self.options["supply_type"])._inputs(with_output=False)

    def _search(self, args: tuple[Any, ...], kwargs: dict[str, Any], configs: list[dict[str, Any]]) -> AutotuneResult:
        from tqdm.auto import tqdm

        opts = self.options
        best: tuple[float, int, Any] | None = None
        first_ok: tuple[int, Any] | None = None
        failed, tried = 0, 0
        errors: list[_Failure] = []
        bar = tqdm(configs, desc=f"autotune {self.fn.__name__}", unit="config", file=sys.stderr)
        for i, cfg in enumerate(bar):
            tried += 1
            try:
                kernel = self._compile(args, {**kwargs, **cfg})
            except EgtileError as err:
                failed += 1
                errors.append(_Failure(cfg, err))
                continue
            run, ins = self._runner(kernel, args, kwargs)
            if not opts["skip_check"] and not self._check(kernel, run, ins, cfg, errors):
                failed += 1
                continue
            if getattr(kernel, "target", None) != "cuda":
                # a CPU target has no time to compare: the first configuration that passes is taken, and the bar
                # says so (it counts this configuration, tried; before, it closed at 0 of n, printed twice)
                first_ok = (i, kernel)
                bar.set_postfix_str(f"{kernel.target}: no timing, the first passing configuration is taken")
                bar.update(1)
                bar.close()
                break
            latency = do_bench(run, warmup=opts["warmup"], rep=opts["rep"], device="cuda")
            bar.set_postfix(best=f"{min(latency, best[0]) if best else latency:.4f} ms")
            if best is None or latency < best[0]:
                best = (latency, i, kernel)
            elif opts["early_stop"] and tried >= max(1, len(configs) // 3) and \
                    latency > opts["early_stop_factor"] * best[0]:
                bar.update(1)  # this configuration was timed: count it before closing
                bar.close()
                break
        if best is not None:
            return AutotuneResult(configs[best[1]], best[2], best[0], tried, failed)
        if first_ok is not None:
            return AutotuneResult(configs[first_ok[0]], first_ok[1], math.nan, tried, failed)
        raise _none_passed(self.fn.__name__, len(configs), errors)

    def _runner(self, kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Callable[[], Any], Any]:
        if self._eager():
            tensors = self.impl._split(args, kwargs)[0]
            names = [n for n in self.impl.signature.parameters if n in tensors and _is_tensor(tensors[n])]
            ins = [tensors[n] for n in names]
            if not ins and _INPUTS is not None:
                ins = list(_INPUTS)
            elif not ins:  # compile(M=...) without tensors: tune on fresh inputs, as for a kernel factory
                jk = kernel.jit_kernel
                ins = Profiler(jk, self.options["supply_type"])._inputs(with_output=False)
        else:
            ins = self._inputs(kernel, args, kwargs)
        return (lambda: kernel(*ins)), ins

    def _check(self, kernel: Any, run: Callable[[], Any], ins: list[Any], cfg: dict[str, Any],
               errors: list[_Failure]) -> bool:
        opts = self.options
        try:
            if opts["manual_check_prog"] is not None and opts["ref_prog"] is not None:
                # TileLang's Profiler.manual_assert_close: the check gets the kernel's outputs and the reference's,
                # each as a list (a single tensor wrapped); without ref_prog TileLang checks nothing
                outs, refs = run(), opts["ref_prog"](*ins)
                outs, refs = ([x] if _is_tensor(x) else [] if x is None else list(x) for x in (outs, refs))
                if len(outs) != len(refs):
                    raise AssertionError(f"the kernel returns {len(outs)} outputs, ref_prog {len(refs)}")
                opts["manual_check_prog"](outs, refs)
            elif opts["ref_prog"] is not None:
                if self._eager():
                    out = run()
                    ref = opts["ref_prog"](*ins)
                    from egtile.profiler import _assert_close

                    for n, (o, r) in enumerate(zip(*[x if isinstance(x, (list, tuple)) else [x] for x in (out, ref)])):
                        _assert_close(o.double(), r.double().to(o.device), opts["atol"], opts["rtol"],
                                      opts["max_mismatched_ratio"], f"output {n}")
                else:
                    Profiler(kernel.jit_kernel if hasattr(kernel, "jit_kernel") else kernel).assert_allclose(
                        opts["ref_prog"], input_tensors=ins, atol=opts["atol"], rtol=opts["rtol"],
                        max_mismatched_ratio=opts["max_mismatched_ratio"])
            else:
                run()
        except (AssertionError, EgtileError) as err:
            errors.append(_Failure(cfg, err))
            return False
        return True

    # -- the disk cache -------------------------------------------------------------------------

    def _load(self, digest: str, configs: list[dict[str, Any]]) -> tuple[int, float] | None:
        d = _cache_dir()
        if d is None:
            return None
        try:
            rec = json.loads((d / f"{digest}.json").read_text())
            idx, latency = int(rec["index"]), float(rec["latency_ms"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not 0 <= idx < len(configs) or rec.get("config") != repr(sorted(configs[idx].items())):
            return None
        return idx, latency

    def _store(self, digest: str, idx: int, config: dict[str, Any], latency: float, key_text: str) -> None:
        """Record the winner: its index in the list, its configuration's repr (checked on load) and latency."""
        d = _cache_dir()
        if d is None:
            return
        try:
            d.mkdir(parents=True, exist_ok=True)
            tmp = d / f".{digest}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps({"index": idx, "config": repr(sorted(config.items())), "latency_ms": latency,
                                       "key": key_text}))
            os.replace(tmp, d / f"{digest}.json")  # atomic: a reader sees the old record or the new one
        except OSError:
            pass

    # -- calling ----------------------------------------------------------------------------------

    def _given(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> set[str]:
        names = list(inspect.signature(self.fn).parameters)
        return set(kwargs) | set(names[:len(args)])

    def _all_given(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether the call gives every key of the configurations itself (TileLang's override: no tuning)."""
        configs = self.configs if not callable(self.configs) else None
        keys = {k for c in configs for k in c} - _COMPILE_OPTIONS if configs is not None else None
        return keys is not None and keys <= self._given(args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._all_given(args, kwargs):
            return self.impl(*args, **kwargs)  # every tunable given: no tuning (TileLang's override)
        result = self.tune(args, kwargs)
        if self._eager():
            run, _ = self._runner(result.kernel, args, kwargs)
            return run()
        return result.kernel

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        """The winning kernel for these arguments (tuning if needed; none when every key is given)."""
        if self._all_given(args, kwargs):
            return self.impl.compile(*args, **kwargs)
        return self.tune(args, kwargs).kernel


@dataclass(frozen=True)
class _Failure:
    """Why one configuration was skipped: the error its compile or its check raised."""

    config: dict[str, Any]
    error: BaseException

    @property
    def text(self) -> str:
        """The error's kind and first line, the same for every configuration that failed the same way."""
        msg = getattr(self.error, "message", None)
        msg = str(self.error) if msg is None else str(msg)
        first = msg.strip().splitlines()[0] if msg.strip() else "(no message)"
        if isinstance(self.error, AssertionError):
            return f"its check against the reference failed: {first}"
        return f"{type(self.error).__name__}: {first}"


def _none_passed(name: str, n: int, failures: list[_Failure]) -> ArgumentError:
    """The error of a tuning in which no configuration compiled and passed its check: each distinct failure (the
    same text but for its numbers) once, with how many configurations hit it and the first of them; the first
    configuration's failure first and at its error's line (the user's), then the others, most frequent first."""
    import re

    number = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?|[-+]?\b(inf|nan)\b")
    groups: dict[str, list[_Failure]] = {}
    for f in failures:  # one failure whatever its numbers (a block size, an extent, a mismatch count, a value)
        groups.setdefault(number.sub("#", f.text), []).append(f)
    # the first configuration's failure first (the error's line is its), then the others, most frequent first
    ordered = sorted(groups.values(), key=lambda fs: (fs[0] is not failures[0], -len(fs)))
    shown = [f"{fs[0].text} ({len(fs)} of {n} configurations, first {fs[0].config})" for fs in ordered[:8]]
    if len(ordered) > 8:
        shown.append(f"... and {len(ordered) - 8} other distinct failure(s)")
    if not shown:
        shown = ["(no configuration reported an error)"]
    distinct = f"{len(ordered)} distinct failure(s)" if len(ordered) != 1 else "1 failure"
    loc = getattr(failures[0].error, "loc", None) if failures else None
    return ArgumentError(f"autotune of {name!r}: none of the {n} configurations compiled and passed its check "
                         f"({distinct}): {shown[0]}" + "".join(f"\n  {s}" for s in shown[1:]), loc)


def _is_tensor(v: Any) -> bool:
    import torch

    return isinstance(v, torch.Tensor)


def autotune(func: Any = None, *, configs: Any, warmup: float = 25, rep: float = 100, timeout: float = 100,
             supply_type: TensorSupplyType = TensorSupplyType.Auto, ref_prog: Callable[..., Any] | None = None,
             supply_prog: Callable[..., Any] | None = None, rtol: float = 1e-2, atol: float = 1e-2,
             max_mismatched_ratio: float = 0.01, skip_check: bool = False,
             manual_check_prog: Callable[..., Any] | None = None, cache_input_tensors: bool = False,
             do_not_specialize: Iterable[str] | None = None, early_stop: bool = False, early_stop_factor: float = 2.0,
             cache_results: bool = True) -> Any:
    """``@egtile.autotune(configs=..., warmup=25, rep=100, ...)`` above ``@egtile.jit`` (module docstring).

    ``timeout``, ``cache_input_tensors`` and ``do_not_specialize`` are accepted for TileLang compatibility.

    Raises:
        ArgumentError: applied to something other than an ``@egtile.jit`` object, or used without arguments.
    """
    if func is not None:
        raise ArgumentError("@egtile.autotune needs its configs: write @egtile.autotune(configs=[...]) above @egtile.jit")
    options = dict(warmup=warmup, rep=rep, timeout=timeout, supply_type=supply_type, ref_prog=ref_prog,
                   supply_prog=supply_prog, rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio,
                   skip_check=skip_check, manual_check_prog=manual_check_prog, early_stop=early_stop,
                   early_stop_factor=early_stop_factor, cache_results=cache_results)

    def decorator(impl: Any) -> _Tuned:
        from egtile.api import JITFactory
        from egtile.language.eager import EagerJIT

        if not isinstance(impl, (JITFactory, EagerJIT)):
            raise ArgumentError(f"@egtile.autotune applies to an @egtile.jit function (put it above @egtile.jit), got "
                                f"{type(impl).__name__}")
        return _Tuned(impl, configs, options)

    return decorator


class AutoTuner:
    """TileLang's builder form: ``AutoTuner.from_kernel(kernel=fn, configs=...).set_compile_args(out_idx=...)
    .set_profile_args(...).run(warmup, rep)``, with ``fn`` a kernel factory (not jitted)."""

    def __init__(self, fn: Callable[..., Any], configs: Any) -> None:
        self.fn = fn
        self.configs = configs
        self.compile_args: dict[str, Any] = {}
        self.profile_args: dict[str, Any] = {}

    @classmethod
    def from_kernel(cls, kernel: Callable[..., Any], configs: Any) -> AutoTuner:
        return cls(kernel, configs)

    def set_compile_args(self, out_idx: Any = None, target: str = "auto", execution_backend: Any = None,
                         target_host: Any = None, verbose: Any = None, pass_configs: Any = None) -> AutoTuner:
        self.compile_args = {"out_idx": out_idx, "target": target or "auto", "pass_configs": pass_configs}
        return self

    def set_profile_args(self, warmup: float = 25, rep: float = 100, timeout: float = 30,
                         supply_type: TensorSupplyType = TensorSupplyType.Auto, ref_prog: Any = None,
                         supply_prog: Any = None, rtol: float = 1e-2, atol: float = 1e-2,
                         max_mismatched_ratio: float = 0.01, skip_check: bool = False, manual_check_prog: Any = None,
                         cache_input_tensors: bool = False, backend: str = "event") -> AutoTuner:
        self.profile_args = dict(warmup=warmup, rep=rep, supply_type=supply_type, ref_prog=ref_prog,
                                 supply_prog=supply_prog, rtol=rtol, atol=atol,
                                 max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check,
                                 manual_check_prog=manual_check_prog)
        return self

    def run(self, warmup: float = 25, rep: float = 100, timeout: float = 180, use_pipeline: bool = False,
            enable_grouped_compile: bool = False, group_compile_size: int = 2, benchmark_devices: Any = None,
            benchmark_multi_gpu: bool = False, early_stop: bool = False, early_stop_factor: float = 2.0) -> AutotuneResult:
        """Tune ``fn`` over the configurations (each is the factory's keyword arguments), with TileLang's
        signature; ``timeout`` and the pipelining/grouping/multi-GPU options are accepted and have no effect
        (configurations are compiled and measured one after another on the current GPU).

        Raises:
            ArgumentError: ``early_stop_factor`` below 1.
        """
        from egtile.api import jit

        if early_stop and early_stop_factor < 1.0:
            raise ArgumentError(f"AutoTuner.run: early_stop_factor must be >= 1.0, got {early_stop_factor}")
        impl = jit(self.fn, out_idx=self.compile_args.get("out_idx"), target=self.compile_args.get("target", "auto"),
                   pass_configs=self.compile_args.get("pass_configs"))
        opts = dict(warmup=25, rep=100, timeout=timeout, supply_type=TensorSupplyType.Auto, ref_prog=None,
                    supply_prog=None, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.01, skip_check=False,
                    manual_check_prog=None, cache_results=True)
        opts.update(self.profile_args)
        opts.update(warmup=warmup, rep=rep, early_stop=early_stop, early_stop_factor=early_stop_factor)
        return _Tuned(impl, self.configs, opts).tune((), {})


__all__ = ["AutoTuner", "AutotuneResult", "autotune", "get_autotune_inputs", "set_autotune_inputs"]


def _supply_param(p: Any) -> Any:
    """A kernel parameter as a ``supply_prog`` sees it: its ``dtype`` a dtype constant (``T.float16``: a string with
    TileLang's ``.as_torch()``, which supply functions call), everything else the parameter's own."""
    import dataclasses

    from egtile.language.expr import DTypeName

    if dataclasses.is_dataclass(p) and isinstance(getattr(p, "dtype", None), str):
        return dataclasses.replace(p, dtype=DTypeName(p.dtype))
    return p
