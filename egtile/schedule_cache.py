"""On-disk cache of compiled kernels: tile IR -> (schedule, explanation, launch metadata); data only.

A warm compile (the same kernel traced again, in this or a later process) skips the e-graph and NVRTC:
it costs the trace, one encoding of the IR, one file read, and for ``"cuda"`` the cubin read from the
cubin cache (:mod:`egtile.codegen.cache`).

Key (:func:`key`): SHA-256 over the kernel's canonical encoding (:mod:`egtile.codec`; statement locations
included, so error messages never point at stale lines), the target architecture, egtile's version, the
names of the builtin rules, the optional lowering passes switched on (:mod:`egtile.lower.switches`), and the text of every source file of the scheduler and the backend
(``egtile/``, ``rules/``, ``codegen/``), so that any change to what would decide or emit the schedule
misses. Only egtile's own rules are cached: while a user rule is registered (``egtile.rules.register``),
whose code lives outside egtile and cannot be fingerprinted, :func:`enabled` is false and every compile
runs the e-graph; ``optimize(..., rules=...)`` always runs it.

Entry: ``schedules/<key>.json``, a JSON record holding the entry's whole key (the fields above, each as
itself or as a digest), the SHA-256 of its payload, and the payload: the schedule, its cost and
explanation, and for ``"cuda"`` the launch metadata and generated source (never the cubin, which stays
in the cubin cache with its own checks). Nothing in it is executable: it is decoded by
:class:`egtile.codec.Codec`, which builds only IR dataclasses, each checked against its field types.
:func:`load` returns an entry only if the record parses, is this key's, repeats these fields, its payload
digest matches, the payload decodes, and the decoded schedule is of this very kernel; anything else (a
corrupted, truncated, swapped or crafted file, an old pickle, a huge file, any exception, ``MemoryError``
included) is a miss, and the compile that follows overwrites the entry. Writes are atomic (temporary file
+ ``os.replace``). ``docs/caching.md`` says what a shared cache directory may be trusted with.

Location and switches are the cubin cache's: ``$EGTILE_CACHE_DIR`` (default ``~/.cache/egtile``),
``EGTILE_DISABLE_CACHE=1``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from egtile import __version__
from egtile.codec import Codec, CodecError
from egtile.ir.kernel import Kernel
from egtile.ir.scheduled import Scheduled

_PACKAGE_ROOT = Path(__file__).resolve().parent
_LOG = logging.getLogger("egtile.cache")

FORMAT = "egtile-schedule/1"
MAX_ENTRY_BYTES = 64 << 20
"""Larger entry files are not read (a miss)."""


@dataclass(frozen=True)
class CachedSchedule:
    """A schedule read back from the cache; quacks like :class:`egtile.optimize.ScheduleResult` for
    what a compiled kernel needs (``scheduled``, ``cost``, ``explain()``)."""

    scheduled: Scheduled
    cost: int
    explanation: str

    def explain(self) -> str:
        return self.explanation


@functools.lru_cache(maxsize=1)
def _codec() -> Codec:
    from egtile.codec import ir_classes
    from egtile.codegen.emit import ParamSpec
    from egtile.codegen.layout import TmaOperand

    return Codec((*ir_classes(), CachedSchedule, ParamSpec, TmaOperand))


def _launch_hints() -> dict[str, Any]:
    from egtile.codegen.emit import ParamSpec
    from egtile.codegen.layout import TmaOperand

    return {"params": tuple[ParamSpec, ...], "tma": tuple[TmaOperand, ...]}


@functools.lru_cache(maxsize=1)
def _compiler_fingerprint() -> str:
    """SHA-256 over the scheduler's and backend's source files (computed once per process)."""
    import egtile.codegen
    import egtile.rules

    roots = {_PACKAGE_ROOT, Path(egtile.rules.__file__).resolve().parent, Path(egtile.codegen.__file__).resolve().parent}
    h = hashlib.sha256(__version__.encode())
    for root in sorted(roots):
        for f in sorted(root.rglob("*")):
            if f.suffix in (".py", ".cuh", ".h") and "__pycache__" not in f.parts:
                h.update(str(f.relative_to(root)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def enabled() -> bool:
    """Whether compiles may use the cache: only with egtile's builtin rules (no user rule registered)."""
    from egtile import rules

    return len(rules.catalog()) == len(rules.BUILTIN)


class ScheduleKey(str):
    """The hex key of an entry (a ``str``) with the fields it was computed from and the kernel it is for,
    which :func:`load` checks an entry against."""

    fields: dict[str, Any]
    kernel: Kernel

    def __new__(cls, digest: str, fields: dict[str, Any], kernel: Kernel) -> ScheduleKey:
        self = super().__new__(cls, digest)
        self.fields = fields
        self.kernel = kernel
        return self


_SHA: dict[int, tuple[Kernel, str]] = {}  # id(kernel) -> (kernel, SHA-256 of its encoding)


def _kernel_sha256(kernel: Kernel) -> str:
    """SHA-256 of ``kernel``'s canonical encoding, memoized by identity: a kernel is immutable, and a prim_func
    traced again from the trace memo (:mod:`egtile.language.trace_memo`) is the same object."""
    hit = _SHA.get(id(kernel))
    if hit is not None and hit[0] is kernel:
        return hit[1]
    digest = hashlib.sha256(_codec().dumps(kernel).encode()).hexdigest()
    with _DECODED_LOCK:
        if len(_SHA) >= 256:
            _SHA.pop(next(iter(_SHA)), None)
        _SHA[id(kernel)] = (kernel, digest)  # holds the kernel, so its id is not reused while the entry lives
    return digest


def key(kernel: Kernel, arch: str, fast_math: bool = False) -> ScheduleKey:
    """Cache key of ``kernel`` compiled for ``arch`` with the builtin rules (and NVRTC's fast math or not:
    the schedule is the same, the cubin is not)."""
    from egtile import rules
    from egtile.lower.switches import current as lowering_switches

    fields = {"kernel_sha256": _kernel_sha256(kernel), "arch": arch, "fast_math": bool(fast_math),
              "egtile": __version__, "rules": [r.name for r in rules.BUILTIN], "compiler": _compiler_fingerprint(),
              "lowering": sorted(lowering_switches().on)}
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    return ScheduleKey(digest, fields, kernel)


def _path(k: str) -> Path | None:
    from egtile.codegen.cache import cache_dir

    d = cache_dir()
    return None if d is None else d / "schedules" / f"{k}.json"


def _miss(k: str, why: str) -> None:
    _LOG.info("schedule cache entry %s ignored: %s", k, why)
    return None


def load(k: str) -> tuple[CachedSchedule, Any] | None:
    """``(schedule, built kernel or None)`` stored under ``k``, or ``None`` (a miss: see module docstring).

    The built kernel is ``None`` when the entry has no launch metadata (stored by a ``"sim"`` compile) or
    its cubin is not in the cubin cache (or fails the cubin cache's checks)."""
    path = _path(k)
    if path is None:
        return None
    try:
        if path.stat().st_size > MAX_ENTRY_BYTES:
            return _miss(k, f"file larger than {MAX_ENTRY_BYTES} bytes")
        with path.open("rb") as f:
            data = f.read(MAX_ENTRY_BYTES + 1)
    except FileNotFoundError:
        return None
    except Exception as err:  # noqa: BLE001 - any I/O failure is a miss
        return _miss(k, f"{type(err).__name__}: {err}")
    return parse_entry(k, data)


# Decoded entries of this process, keyed by (key, SHA-256 of the file's bytes): a warm compile re-reads
# and re-hashes the file (so a changed, swapped or corrupted file is checked afresh) but does not decode
# the same bytes twice; decoding the IR is most of a warm compile. The key's digest covers the kernel's
# encoding, so an equal key means the same kernel. Bounded: oldest entries go first.
_DECODED: dict[tuple[str, str], tuple[CachedSchedule, Any]] = {}
_DECODED_MAX = 256
_DECODED_LOCK = threading.Lock()  # compiles may run on several threads: eviction iterates the dict


def parse_entry(k: str, data: bytes) -> tuple[CachedSchedule, Any] | None:
    """The entry of key ``k`` that the file contents ``data`` hold, or ``None`` (every check of the
    module docstring; never raises)."""
    try:
        if len(data) > MAX_ENTRY_BYTES:
            return _miss(k, f"file larger than {MAX_ENTRY_BYTES} bytes")
        memo = (str(k), hashlib.sha256(data).hexdigest())
        hit = _DECODED.get(memo)
        if hit is not None:
            schedule, launch = hit
            return schedule, None if launch is None else _with_cubin(*launch)
        record = json.loads(data)
        if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("key") != str(k):
            return _miss(k, "record of another format or key")
        fields = getattr(k, "fields", None)
        if fields is not None and record.get("fields") != fields:
            return _miss(k, "record fields differ from the key's")
        payload = record.get("payload")
        if not isinstance(payload, str) or hashlib.sha256(payload.encode()).hexdigest() != record.get("payload_sha256"):
            return _miss(k, "payload SHA-256 differs from the record")
        data = json.loads(payload)
        if not isinstance(data, dict) or set(data) != {"schedule", "launch"}:
            return _miss(k, "payload is not a schedule entry")
        codec = _codec()
        schedule = codec.decode(data["schedule"], CachedSchedule, "schedule")
        kernel = getattr(k, "kernel", None)
        if kernel is not None and codec.dumps(schedule.scheduled.kernel) != codec.dumps(kernel):
            return _miss(k, "the entry schedules another kernel")
        launch = None if data["launch"] is None else _launch(data["launch"], codec)
        with _DECODED_LOCK:
            if len(_DECODED) >= _DECODED_MAX:
                _DECODED.pop(next(iter(_DECODED)))
            _DECODED[memo] = (schedule, launch)
        return schedule, None if launch is None else _with_cubin(*launch)
    except Exception as err:  # noqa: BLE001 - MemoryError, RecursionError, CodecError, OSError...: a miss
        return _miss(k, f"{type(err).__name__}: {err}")


def _launch(data: Any, codec: Codec) -> tuple[dict[str, Any], Any]:
    """The decoded launch metadata of an entry and the cubin cache key of its source (computed once per
    entry: the key hashes the source and egtile's headers)."""
    from egtile.codegen import cache, nvrtc

    if not isinstance(data, dict):
        raise CodecError("launch metadata is not an object")
    hints = _launch_hints()
    fields = {"symbol": str, "source": str, "arch": str, "threads": int, "grid": tuple[int, ...], "smem_bytes": int,
              "log": str, "fast_math": bool, **hints}
    if set(data) != set(fields):
        raise CodecError("launch metadata has the wrong fields")
    v = {n: codec.decode(data[n], t, f"launch.{n}") for n, t in fields.items()}
    ck = cache.cache_key(v["source"], nvrtc.header_texts(), nvrtc.options(v["arch"], v["fast_math"]), nvrtc.nvrtc_version(), __version__)
    return v, ck


def _with_cubin(v: dict[str, Any], ck: Any) -> Any:
    """The BuiltKernel of decoded launch metadata ``v`` with its cubin from the cubin cache, read and checked
    afresh (``None``: no valid cubin there)."""
    from egtile.codegen import builder, cache

    hit = cache.load(ck, v["symbol"])
    if hit is None:
        return None
    cubin, log = hit
    return builder.BuiltKernel(v["symbol"], v["source"], cubin, v["arch"], v["threads"], v["grid"], v["smem_bytes"],
                               v["params"], v["tma"], log, True, 0.0, v["fast_math"])


def store(k: str, result: Any, built: Any = None) -> None:
    """Save ``result`` (a ScheduleResult) and the ``built`` kernel's launch metadata (or None) under ``k``;
    no-op when the cache is disabled or not writable."""
    from egtile.codegen.cache import atomic_write

    path = _path(k)
    if path is None:
        return
    try:
        codec = _codec()
        entry = CachedSchedule(result.scheduled, int(result.cost), result.explain())
        launch = None
        if built is not None:
            launch = {"symbol": built.symbol, "source": built.source, "arch": built.arch, "threads": built.threads,
                      "grid": codec.encode(tuple(built.grid)), "smem_bytes": built.smem_bytes,
                      "params": codec.encode(tuple(built.params)), "tma": codec.encode(tuple(built.tma)),
                      "log": built.log, "fast_math": built.fast_math}
        payload = json.dumps({"schedule": codec.encode(entry), "launch": launch}, sort_keys=True,
                             separators=(",", ":"), allow_nan=True)
        record = {"format": FORMAT, "key": str(k), "fields": getattr(k, "fields", None),
                  "payload_sha256": hashlib.sha256(payload.encode()).hexdigest(), "payload": payload}
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(record, sort_keys=True).encode())
    except CodecError as err:  # an IR class the codec cannot encode: every compile of this kernel will miss
        _LOG.warning("schedule of %s not cached: %s", getattr(result.scheduled.kernel, "name", "?"), err)
    except (OSError, TypeError, ValueError, RecursionError):
        pass
