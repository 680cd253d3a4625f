"""What the compiled schedule kept beside `windows.toml` must prove before it is read, and what
it was computed with (`code_stamp`, `zone_digest`).

A kept file is an accelerator, never an authority (docs/design.md): whoever can write it chooses
what `hermes serve` arms. So, as ssh's StrictModes, it is read only when it (the very file read,
by `fstat`) and its directory are owned by the running user or root and writable by nobody else,
and sealed with its directory's key; otherwise it is ignored with one WARNING line per (path,
problem) per process. A FIFO or a directory planted in its place is refused, never waited on.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import os
import sys
import zoneinfo
from collections.abc import Iterable
from datetime import timedelta
from importlib.resources import files as package_files
from importlib.util import find_spec
from pathlib import Path

import pydantic

from hermes_estop import __version__
from hermes_estop.model.errors import StoreError
from hermes_estop.model.text import printable
from hermes_estop.system.fsread import read_regular_with_stat
from hermes_estop.system.fsutil import atomic_write

__all__ = ["HORIZON", "basis", "cache_dir", "code_stamp", "directory_problem", "kept_path", "seal", "seal_key",
           "trusted_bytes", "write_trusted", "zone_digest"]

log = logging.getLogger(__name__)

#: how far past its build a kept schedule answers (the questions are about the next few days)
HORIZON = timedelta(days=7)

#: a kept file larger than this is not read (100,000 windows' schedule takes about 30 MiB)
_MAX_BYTES = 256 * 1024 * 1024

@functools.cache
def code_stamp() -> str:
    """Our code (an editable checkout changes without a new version: the modules' newest mtime)
    and the libraries that read the windows file."""
    newest = max((os.stat(os.path.join(where, name)).st_mtime_ns
                  for where, _, names in os.walk(Path(__file__).resolve().parent.parent)
                  for name in names if name.endswith(".py")), default=0)
    return "|".join([__version__, str(newest), pydantic.VERSION, _module_stamp("croniter"), _module_stamp("tomli"),
                     sys.version.split()[0]])


def _module_stamp(name: str) -> str:
    """The installed module `name` by its file's path, size and mtime (`importlib.metadata`
    would cost a command more than it saves)."""
    try:
        origin = getattr(find_spec(name), "origin", None) or ""  # none: os.stat("") refuses it
        st = os.stat(origin)
    except (ImportError, ValueError, OSError):
        return "unknown"
    return f"{origin}:{st.st_size}:{st.st_mtime_ns}"


def basis(zones: Iterable[str]) -> str:
    """What a kept file was computed with besides its source: `code_stamp`, each zone's `zone_digest`."""
    parts = [code_stamp(), *(f"{z}={zone_digest(z)}" for z in sorted(set(zones)))]
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def zone_digest(name: str) -> str | None:
    """The SHA-256 of the TZif data `zoneinfo` reads for `name`, or None when there is none."""
    parts = name.split("/")
    if not name or any(part in ("", ".", "..") for part in parts):
        return None
    for base in zoneinfo.TZPATH:
        try:
            return hashlib.sha256(Path(base, *parts).read_bytes()).hexdigest()
        except OSError:
            continue
    try:
        return hashlib.sha256(package_files("tzdata.zoneinfo").joinpath(*parts).read_bytes()).hexdigest()
    except (ImportError, OSError, ValueError):
        return None


_WARNED: set[tuple[str, str]] = set()


def _unsafe(st: os.stat_result) -> str | None:
    """Why a file or directory with this `stat` is not to be trusted (None: it is)."""
    if st.st_uid not in (os.geteuid(), 0):
        return f"owned by uid {st.st_uid}, not by this user (uid {os.geteuid()}) or root"
    if st.st_mode & 0o022:
        return f"writable by group or others (mode {st.st_mode & 0o7777:04o})"
    return None


def _trusted(path: Path, problem: str | None) -> bool:
    """Whether there is no `problem` with `path` (else one WARNING per (path, problem) per process)."""
    if problem is not None and (str(path), problem) not in _WARNED:
        _WARNED.add((str(path), problem))
        log.warning("windows schedule %s not used: %s (a kept schedule is never an authority: make it this "
                    "user's and writable by nobody else)", printable(path), printable(problem))
    return problem is None


def directory_problem(where: Path) -> str | None:
    """Why nothing kept in the directory `where` may be trusted (None: it may, or it is absent)."""
    try:
        return _unsafe(os.stat(where))
    except OSError as exc:
        return None if isinstance(exc, FileNotFoundError) else f"cannot be checked: {exc.strerror or exc}"


def trusted_bytes(path: Path) -> bytes:
    """The bytes of the kept file `path`; b"" unless it is a regular file it and its directory
    could be written by no one but this user or root."""
    if not _trusted(path.parent, directory_problem(path.parent)):
        return b""
    try:
        data, st = read_regular_with_stat(path, _MAX_BYTES)  # a FIFO or a symlink planted there is refused
    except OSError:
        return b""
    except StoreError as exc:  # not a regular file, too large
        _trusted(path, str(exc))
        return b""
    return data if _trusted(path, _unsafe(st)) else b""  # the very file read, not the name looked up again


#: the key kept files of a directory are sealed with (`seal`), in that directory, this user's alone
SEAL_KEY = ".hermes-estop.key"


def seal_key(where: Path, *, create: bool) -> bytes | None:
    """The key of the kept files of the directory `where` (`SEAL_KEY`: 32 random bytes, mode
    0600, made on the first write, `create`); None when there is none or others could read or
    write it: a kept file built for other bytes, edited or copied from elsewhere is then never
    mistaken for the current file's (issue 45)."""
    path = where / SEAL_KEY
    if create:
        try:
            where.mkdir(mode=0o700, parents=True, exist_ok=True)  # the cache directory, made private
            if not _trusted(where, directory_problem(where)):
                return None  # no key made or taken where others could write
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, os.urandom(32))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:  # FileExistsError: made before, or by another process just now: read it
            pass
    try:
        data, st = read_regular_with_stat(path, 4096)
    except (OSError, StoreError):
        return None
    odd = st.st_mode & 0o077 or len(data) < 32
    return data if _trusted(path, "a seal key others could read or write, or not one this code made"
                            if odd or _unsafe(st) else None) else None


def seal(key: bytes, header: bytes, body: bytes | bytearray | memoryview) -> str:
    """HMAC-SHA256 under `key` of a kept file's `header` (without the seal) and `body`."""
    mac = hmac.new(key, header, "sha256")
    mac.update(b"\n")
    mac.update(body)
    return mac.hexdigest()


def cache_dir() -> Path | None:
    """The per-user directory for a file that cannot be kept beside the windows file:
    `$HERMES_ESTOP_CACHE` (`off`: none), `$XDG_CACHE_HOME/hermes-estop` or `~/.cache/hermes-estop`."""
    chosen = os.environ.get("HERMES_ESTOP_CACHE")
    if chosen:
        return None if chosen.strip().lower() == "off" else Path(chosen)
    try:
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hermes-estop"
    except (RuntimeError, KeyError):  # no $HOME and no password entry
        return None


def kept_path(beside: Path, suffix: str) -> Path | None:
    """Where to keep a file about `beside`: next to it (`.<name><suffix>`, where every operator
    finds it) when its directory is trusted (`directory_problem`); else in this user's
    `cache_dir()`, named by the hash of `beside`'s path (each operator keeps their own)."""
    if directory_problem(beside.parent) is None:
        return beside.with_name(f".{beside.name}{suffix}")
    where = cache_dir()
    if where is None:
        return None
    name = hashlib.sha256(str(beside.absolute()).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return where / f"{name}{suffix}"


def write_trusted(path: Path, data: bytes | bytearray) -> None:
    """Write `data` to `path` atomically (its directory made by `seal_key`), unless the directory
    could be written by someone else (one WARNING line) or cannot be written."""
    if not _trusted(path.parent, directory_problem(path.parent)):
        return
    try:
        atomic_write(path, data, durable=False)  # type: ignore[arg-type]  # a bytearray is written as bytes are
    except (OSError, StoreError) as exc:
        log.debug("windows schedule %s not written: %s", path, exc)
