"""On-disk cubin cache.

Key: SHA-256 over the generated source, egtile's device headers, the NVRTC options (arch included),
the NVRTC version and the egtile version, so that any change to what NVRTC would see, or to the
compiler itself, misses. Location: ``$EGTILE_CACHE_DIR``, else ``$XDG_CACHE_HOME/egtile``, else
``~/.cache/egtile``. ``EGTILE_DISABLE_CACHE=1`` turns it off. Entries are ``<key>.cubin`` plus
``<key>.log`` (NVRTC's warnings), written atomically (temporary file + rename) so that concurrent
builds never read a partial cubin. A cache that cannot be written is skipped silently: it only saves time.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def cache_dir() -> Path | None:
    """The cache directory, or ``None`` when ``EGTILE_DISABLE_CACHE`` is set to a true value."""
    if os.environ.get("EGTILE_DISABLE_CACHE", "").strip().lower() in ("1", "true", "yes", "on"):
        return None
    if os.environ.get("EGTILE_CACHE_DIR"):
        return Path(os.environ["EGTILE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "egtile"


def cache_key(source: str, headers: str, options: tuple[str, ...], nvrtc_version: tuple[int, int],
              egtile_version: str) -> str:
    """Hex SHA-256 of everything that determines the cubin."""
    h = hashlib.sha256()
    for part in (source, headers, "\0".join(options), "%d.%d" % nvrtc_version, egtile_version):
        h.update(part.encode())
        h.update(b"\0\1")
    return h.hexdigest()


def load(key: str) -> tuple[bytes, str] | None:
    """``(cubin, log)`` cached under ``key``, or ``None``."""
    d = cache_dir()
    if d is None:
        return None
    try:
        cubin = (d / f"{key}.cubin").read_bytes()
    except OSError:
        return None
    try:
        log = (d / f"{key}.log").read_text()
    except OSError:
        log = ""
    return cubin, log


def atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def store(key: str, cubin: bytes, log: str) -> None:
    """Save ``cubin`` and ``log`` under ``key`` (no-op when disabled or not writable)."""
    d = cache_dir()
    if d is None:
        return
    try:
        d.mkdir(parents=True, exist_ok=True)
        atomic_write(d / f"{key}.log", log.encode())
        atomic_write(d / f"{key}.cubin", cubin)
    except OSError:
        pass
