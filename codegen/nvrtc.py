"""CUDA C++ -> cubin with NVRTC (``cuda.bindings.nvrtc``).

Options: ``--gpu-architecture=sm_90a`` (``setmaxnreg`` and the other arch-specific instructions need the
``a`` target), ``-std=c++17``, ``-lineinfo`` (compute-sanitizer and cuobjdump map SASS back to lines),
``--fmad=false --ftz=false --prec-div=true --prec-sqrt=true`` (one arithmetic with the simulator, see
:data:`BASE_OPTIONS`),
and two include directories: egtile's own headers (``codegen/include``) and the CUDA headers of the
``nvidia-cuda-runtime`` pip package (``cuda_fp16.h``, ``cuda_bf16.h``), located with ``cuda.pathfinder``
(the locator that ``cuda-bindings`` itself uses) and, failing that, from the installed distribution's
file list or ``CUDA_HOME``/``CUDA_PATH``.

A rejected program raises :class:`~egtile.errors.CompileError` holding the NVRTC log and, for every
error line, the generated lines around it (and the user's line when a ``locate`` callback knows it).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from egtile.errors import CompileError, SourceLoc

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
DEFAULT_ARCH = "sm_90a"
_COMMON_OPTIONS = ("-std=c++17", "-lineinfo")
BASE_OPTIONS = (*_COMMON_OPTIONS, "--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true")
"""``--fmad=false``: no contraction of ``a * b + c`` into one FFMA, which rounds once where the tile IR (and
the simulator) round the product and the sum separately; the other three are NVRTC's defaults, spelled out
because the oracle relies on them (subnormals kept, IEEE division and square root)."""
FAST_MATH_OPTIONS = (*_COMMON_OPTIONS, "--use_fast_math", "-DEGTILE_FAST_MATH")
"""What TileLang's ``TL_ENABLE_FAST_MATH`` asks for (``egtile.options.fast_math``): NVRTC's ``--use_fast_math``,
i.e. ``--ftz=true --prec-div=false --prec-sqrt=false --fmad=true`` and the math functions mapped to their
approximate hardware forms (``exp2f`` to ``ex2.approx.ftz.f32``: one MUFU.EX2, where the default contract's
``exp2f`` adds the subnormal range handling around it); ``EGTILE_FAST_MATH`` also leaves the sign of a zero
result of float ``T.max``/``T.min`` unspecified (one FMNMX instead of the contract's signed-zero handling). The
CPU targets keep the default contract, so
results on the GPU then differ from them within these functions' documented bounds (docs/language.md)."""
_LOG_LINE = re.compile(r"^(?P<file>[^\n()]*)\((?P<line>\d+)\): (?P<kind>catastrophic error|error|warning)", re.M)


@dataclass(frozen=True)
class NvrtcOutput:
    """A compiled program: ``cubin`` (ELF bytes for ``cuModuleLoadData``) and NVRTC's ``log``
    (warnings, e.g. ptxas C7508 when ``setmaxnreg`` is ignored; empty when clean)."""

    cubin: bytes
    log: str


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise CompileError(f"cuda-bindings is not installed ({e}); install egtile's dependencies "
                           f"(pip install cuda-bindings nvidia-cuda-nvrtc)") from None
    return nvrtc


def _check(result, call: str, what: str) -> None:
    nvrtc = _nvrtc()
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, msg = nvrtc.nvrtcGetErrorString(result)
        raise CompileError(f"{call} failed for {what}: {msg.decode() if isinstance(msg, bytes) else msg}")


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the loaded NVRTC library."""
    err, major, minor = _nvrtc().nvrtcVersion()
    _check(err, "nvrtcVersion", "the NVRTC library")
    return int(major), int(minor)


def _has_fp16(d: Path) -> bool:
    return (d / "cuda_fp16.h").is_file()


@functools.lru_cache(maxsize=1)
def cuda_include_dir() -> Path | None:
    """Directory holding ``cuda_fp16.h`` from the CUDA pip packages (``None`` if none is found)."""
    try:
        import cuda.pathfinder as pf

        d = pf.find_nvidia_header_directory("cudart")
        if d and _has_fp16(Path(d)):
            return Path(d)
    except Exception:  # noqa: BLE001 - any locator failure falls through to the next method
        pass
    try:
        from importlib import metadata

        for dist in metadata.distributions():
            name = (dist.metadata["Name"] or "").lower()
            if name.startswith("nvidia-cuda-runtime"):
                for f in dist.files or ():
                    if str(f).endswith("cuda_fp16.h"):
                        return Path(dist.locate_file(f)).parent
    except Exception:  # noqa: BLE001
        pass
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and _has_fp16(Path(root) / "include"):
            return Path(root) / "include"
    if _has_fp16(Path("/usr/local/cuda/include")):
        return Path("/usr/local/cuda/include")
    return None


def options(arch: str = DEFAULT_ARCH, fast_math: bool = False) -> tuple[str, ...]:
    """The NVRTC options without include paths (what the cubin cache key hashes)."""
    return (f"--gpu-architecture={arch}", *(FAST_MATH_OPTIONS if fast_math else BASE_OPTIONS))


@functools.lru_cache(maxsize=1)
def header_texts() -> str:
    """egtile's device headers, concatenated (part of the cache key: editing a header rebuilds)."""
    return "".join(f"// {p.name}\n{p.read_text()}" for p in sorted(INCLUDE_DIR.glob("*.cuh")))


def _quote(source: str, name: str, log: str, locate: Callable[[int], SourceLoc | None] | None) -> str:
    lines = source.split("\n")
    out: list[str] = []
    for m in _LOG_LINE.finditer(log):
        if m["kind"] == "warning":
            continue
        n = int(m["line"])
        if Path(m["file"]).name != name:
            out.append(f"  in egtile header {m['file']}, line {n}")
            continue
        out.append(f"  generated line {n}:")
        for k in range(max(1, n - 1), min(len(lines), n + 1) + 1):
            out.append(f"  {'>' if k == n else ' '} {k:5d} | {lines[k - 1]}")
        loc = locate(n) if locate is not None else None
        if loc is not None:
            out.append(f"    generated from {loc}")
    return "\n".join(out)


def compile_cuda(source: str, name: str, arch: str = DEFAULT_ARCH,
                 locate: Callable[[int], SourceLoc | None] | None = None, fast_math: bool = False) -> NvrtcOutput:
    """Compile one translation unit to a cubin.

    Args:
        source: CUDA C++ (may include egtile's headers).
        name: program name, used in NVRTC's messages (``<name>``, e.g. ``main_kernel.cu``).
        arch: ``--gpu-architecture`` value.
        locate: maps a generated line number to the user's source line, for error messages.
        fast_math: compile with :data:`FAST_MATH_OPTIONS` instead of :data:`BASE_OPTIONS`.

    Raises:
        CompileError: NVRTC rejected the program; the message holds the log and the offending lines.
    """
    nvrtc = _nvrtc()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _check(err, "nvrtcCreateProgram", name)
    try:
        inc = [f"-I{INCLUDE_DIR}"]
        cuda_inc = cuda_include_dir()
        if cuda_inc is not None:
            inc.append(f"-I{cuda_inc}")
        opts = [o.encode() for o in (*options(arch, fast_math), *inc)]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        err, size = nvrtc.nvrtcGetProgramLogSize(prog)
        _check(err, "nvrtcGetProgramLogSize", name)
        # NVRTC writes into the buffer it is given: a fresh bytearray, never a bytes object (``b" " * 1`` is
        # CPython's shared one-byte b" ", which an empty log would overwrite with NUL for the whole process)
        buf = bytearray(size)
        (err,) = nvrtc.nvrtcGetProgramLog(prog, buf)
        log = bytes(buf).rstrip(b"\x00 ").decode(errors="replace").strip()
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            hint = "" if cuda_inc is not None else (
                "\n  (no CUDA include directory was found: install nvidia-cuda-runtime or set CUDA_HOME)")
            raise CompileError(f"NVRTC could not compile {name} for {arch}:\n{_quote(source, name, log, locate)}"
                               f"\nNVRTC log:\n{log}{hint}")
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _check(err, "nvrtcGetCUBINSize", name)
        cubin = bytearray(size)
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        _check(err, "nvrtcGetCUBIN", name)
        return NvrtcOutput(bytes(cubin), log)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
