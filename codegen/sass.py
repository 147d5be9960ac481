"""Inspecting a cubin: SASS disassembly and resource usage through ``cuobjdump``.

``cuobjdump -sass`` runs ``nvdisasm``; both come from the pip packages ``nvidia-cuda-cuobjdump`` and
``nvidia-cuda-nvdisasm`` (the ``test`` extra), located with ``cuda.pathfinder`` or on ``PATH``. The
tests use this to confirm that the hardware instructions the schedule asked for are in the machine
code: ``UTMALDG``/``UTMASTG`` (TMA), ``SYNCS.*`` (mbarrier), ``USETMAXREG`` (setmaxnreg),
``LDGSTS`` (cp.async).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path


def tool_path(name: str) -> str | None:
    """Path of CUDA binary utility ``name`` (``cuobjdump``, ``nvdisasm``), or ``None``."""
    try:
        import cuda.pathfinder as pf

        p = pf.find_nvidia_binary_utility(name)
        if p:
            return str(p)
    except Exception:  # noqa: BLE001 - fall back to PATH
        pass
    return shutil.which(name)


def available() -> bool:
    """Whether both ``cuobjdump`` and ``nvdisasm`` are installed."""
    return tool_path("cuobjdump") is not None and tool_path("nvdisasm") is not None


def _run(args: list[str], cubin: bytes) -> str:
    exe = tool_path("cuobjdump")
    if exe is None:
        raise FileNotFoundError("cuobjdump not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")
    env = dict(os.environ)
    dis = tool_path("nvdisasm")
    if dis is not None:
        env["PATH"] = str(Path(dis).parent) + os.pathsep + env.get("PATH", "")
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "kernel.cubin"
        f.write_bytes(cubin)
        out = subprocess.run([exe, *args, str(f)], capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"cuobjdump {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout


def disassemble(cubin: bytes) -> str:
    """``cuobjdump -sass`` of ``cubin``."""
    return _run(["-sass"], cubin)


def resource_usage(cubin: bytes) -> dict[str, int]:
    """``cuobjdump -res-usage`` fields of the (single) kernel: ``REG``, ``STACK``, ``SHARED``, ``LOCAL``, ..."""
    text = _run(["-res-usage"], cubin)
    return {k: int(v) for k, v in re.findall(r"(\w+(?:\[\d+\])?):(\d+)", text)}


_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)")
"""One instruction of a disassembly: its address, then (past a predicate) its opcode with modifiers."""


def instructions(sass: str) -> list[tuple[int, str]]:
    """``(address, opcode)`` of every instruction of a disassembly, the opcode with its modifiers."""
    return [(int(m.group(1), 16), m.group(2)) for m in _INSTRUCTION.finditer(sass)]


def opcodes(sass: str) -> set[str]:
    """The opcodes (with modifiers, e.g. ``SYNCS.ARRIVE.TRANS64``) appearing in a disassembly."""
    return {op for _, op in instructions(sass)}


def addresses(sass: str, opcode: str) -> list[int]:
    """Addresses of the instructions whose opcode is ``opcode``, with or without further modifiers (``HGMMA``
    finds ``HGMMA.64x128x16.F32``)."""
    return [a for a, op in instructions(sass) if op == opcode or op.startswith(opcode + ".")]
