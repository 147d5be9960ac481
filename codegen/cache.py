"""On-disk cubin cache: data only, integrity-checked, atomic.

Key: SHA-256 over the generated source, egtile's device headers, the NVRTC options (arch included),
the NVRTC version and the egtile version (:func:`cache_key`), so that any change to what NVRTC would see,
or to the compiler itself, misses. Location: ``$EGTILE_CACHE_DIR``, else ``$XDG_CACHE_HOME/egtile``, else
``~/.cache/egtile``. ``EGTILE_DISABLE_CACHE=1`` turns it off.

An entry is two files: ``<key>.cubin`` (the ELF image, never anything else) and ``<key>.json``, written
after it, which records the entry's whole key (the digests of the source and headers, the options, the
NVRTC and egtile versions), the kernel symbol, the cubin's size and SHA-256, and NVRTC's log (with its
SHA-256). A cubin is
returned only when the record parses, names this key with these fields, and the cubin's size and digest
match, it is an ELF image for the CUDA machine and its symbol table defines the kernel's symbol
(:func:`check_cubin`). Anything else (a missing, truncated, bit-flipped, swapped or foreign file, an I/O
or parse error, any exception) is a miss: the caller compiles again and overwrites the entry. Writes go
to a temporary file renamed over the entry (``os.replace``), so concurrent builds never read a partial
file. A cache that cannot be written is skipped silently: it only saves time. ``docs/caching.md`` says
what a shared cache directory may be trusted with.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import tempfile
from pathlib import Path

_LOG = logging.getLogger("egtile.cache")

FORMAT = "egtile-cubin/1"
MAX_CUBIN_BYTES = 256 << 20
"""Larger files are not read (a cubin of egtile's is tens of kilobytes)."""
MAX_RECORD_BYTES = 16 << 20

EM_CUDA = 190  # ELF e_machine of NVIDIA CUDA images (elf.h: EM_CUDA)


def cache_dir() -> Path | None:
    """The cache directory, or ``None`` when ``EGTILE_DISABLE_CACHE`` is set to a true value."""
    if os.environ.get("EGTILE_DISABLE_CACHE", "").strip().lower() in ("1", "true", "yes", "on"):
        return None
    if os.environ.get("EGTILE_CACHE_DIR"):
        return Path(os.environ["EGTILE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "egtile"


class CubinKey(str):
    """The hex key of a cubin entry (a ``str``), carrying the fields it was computed from (:attr:`fields`),
    which the entry's record must repeat."""

    fields: dict[str, object]

    def __new__(cls, digest: str, fields: dict[str, object]) -> CubinKey:
        self = super().__new__(cls, digest)
        self.fields = fields
        return self


def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def cache_key(source: str, headers: str, options: tuple[str, ...], nvrtc_version: tuple[int, int],
              egtile_version: str) -> CubinKey:
    """Hex SHA-256 of everything that determines the cubin (with those fields attached)."""
    fields: dict[str, object] = {"source_sha256": _sha(source), "headers_sha256": _sha(headers),
                                 "options": list(options), "nvrtc": "%d.%d" % tuple(nvrtc_version),
                                 "egtile": egtile_version}
    return CubinKey(_sha(json.dumps(fields, sort_keys=True)), fields)


def check_cubin(cubin: bytes, symbol: str) -> str | None:
    """Why ``cubin`` is not a loadable image defining ``symbol`` (``None``: it is). Checks the ELF header
    (64-bit, little-endian, machine EM_CUDA) and that the symbol table (``SHT_SYMTAB`` with its string
    table) names ``symbol``; every offset is bounds-checked (ELF-64 Object File Format, System V gABI)."""
    try:
        if len(cubin) < 64 or cubin[:4] != b"\x7fELF":
            return "not an ELF image"
        if cubin[4] != 2 or cubin[5] != 1:
            return "not a 64-bit little-endian ELF image"
        (machine,) = struct.unpack_from("<H", cubin, 18)
        if machine != EM_CUDA:
            return f"ELF machine {machine}, not CUDA ({EM_CUDA})"
        (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", cubin, 0x3A)
        if shentsize != 64 or shnum == 0 or shoff + shnum * 64 > len(cubin):
            return "section header table out of bounds"
        sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * 64) for i in range(shnum)]
        want = symbol.encode()
        for sh in sections:
            if sh[1] != 2:  # SHT_SYMTAB
                continue
            off, size, link, entsize = sh[4], sh[5], sh[6], sh[9]
            if entsize != 24 or off + size > len(cubin) or link >= shnum:
                return "symbol table out of bounds"
            str_off, str_size = sections[link][4], sections[link][5]
            if str_off + str_size > len(cubin):
                return "string table out of bounds"
            strtab = cubin[str_off:str_off + str_size]
            for k in range(size // 24):
                (name,) = struct.unpack_from("<I", cubin, off + k * 24)
                end = strtab.find(b"\0", name)
                if name < len(strtab) and end >= 0 and strtab[name:end] == want:
                    return None
        return f"the symbol table does not define {symbol!r}"
    except (struct.error, IndexError, ValueError) as err:
        return f"malformed ELF image ({err})"


def _read(path: Path, limit: int) -> bytes:
    if path.stat().st_size > limit:
        raise ValueError(f"{path.name} is larger than {limit} bytes")
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path.name} is larger than {limit} bytes")
    return data


def load(key: str, symbol: str) -> tuple[bytes, str] | None:
    """``(cubin, log)`` cached under ``key`` for the kernel ``symbol``, or ``None`` (a miss) unless every
    check of the module docstring holds."""
    d = cache_dir()
    if d is None:
        return None
    try:
        record = _read(d / f"{key}.json", MAX_RECORD_BYTES)
        cubin = _read(d / f"{key}.cubin", MAX_CUBIN_BYTES)
    except FileNotFoundError:
        return None
    except Exception as err:  # noqa: BLE001 - any I/O failure is a miss
        return _miss(key, f"{type(err).__name__}: {err}")
    return check_entry(key, symbol, record, cubin)


def check_entry(key: str, symbol: str, record_bytes: bytes, cubin: bytes) -> tuple[bytes, str] | None:
    """``(cubin, log)`` if the record file contents ``record_bytes`` and the cubin file contents ``cubin``
    form a valid entry of ``key`` for ``symbol``, else ``None`` (never raises)."""
    try:
        record = json.loads(record_bytes)
        fields = getattr(key, "fields", None)
        if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("key") != str(key):
            return _miss(key, "record of another format or key")
        if fields is not None and record.get("fields") != fields:
            return _miss(key, "record fields differ from the key's")
        if record.get("symbol") != symbol:
            return _miss(key, f"record is for symbol {record.get('symbol')!r}, not {symbol!r}")
        if len(cubin) != record.get("cubin_size") or _sha(cubin) != record.get("cubin_sha256"):
            return _miss(key, "cubin size or SHA-256 differs from the record")
        why = check_cubin(cubin, symbol)
        if why is not None:
            return _miss(key, why)
        log = record.get("log")
        if not isinstance(log, str) or _sha(log) != record.get("log_sha256"):
            return _miss(key, "log SHA-256 differs from the record")
        return cubin, log
    except Exception as err:  # noqa: BLE001 - MemoryError, RecursionError, ...: every failure is a miss
        return _miss(key, f"{type(err).__name__}: {err}")


def _miss(key: str, why: str) -> None:
    _LOG.info("cubin cache entry %s ignored: %s", key, why)
    return None


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and ``os.replace``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def store(key: str, cubin: bytes, log: str, symbol: str) -> None:
    """Save ``cubin`` (for kernel ``symbol``) and ``log`` under ``key`` (no-op when disabled or not
    writable). The cubin goes first and the record last, so a record always describes a complete cubin."""
    d = cache_dir()
    if d is None:
        return
    record = {"format": FORMAT, "key": str(key), "fields": getattr(key, "fields", None), "symbol": symbol,
              "cubin_size": len(cubin), "cubin_sha256": _sha(cubin), "log": log, "log_sha256": _sha(log)}
    try:
        d.mkdir(parents=True, exist_ok=True)
        atomic_write(d / f"{key}.cubin", cubin)
        atomic_write(d / f"{key}.json", json.dumps(record, sort_keys=True).encode())
    except OSError:
        pass
