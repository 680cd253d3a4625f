"""What a file kept beside `windows.toml` to save work (the compiled schedule) must prove before
it is read, and what it was computed with.

A kept file is an accelerator, never an authority (docs/design.md, "An edit acts as what it is;
a cache is never an authority"): whoever can write it chooses what `hermes serve` arms and runs.
So, as ssh's StrictModes, it is read only when it (the very file read, by `fstat`) and its
directory are owned by the running user or root and writable by neither group nor others, and
nothing is written into a directory that is not; otherwise it is ignored with one WARNING line
per (path, problem) per process. A FIFO or a directory planted in its place is refused, never
waited on.

`code_stamp` and `zone_digest` say what a kept file was computed with besides the windows file:
our code, the libraries that read it, the TZif data of a zone; `HORIZON` how far past its build
a kept schedule (the windows file's, a calendar feed's) answers.
"""

from __future__ import annotations

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

__all__ = ["HORIZON", "basis", "cache_dir", "code_stamp", "directory_problem", "in_cache", "kept_path", "seal",
           "seal_key", "trusted_bytes", "write_trusted", "zone_digest"]

log = logging.getLogger(__name__)

#: how far past its build a kept schedule answers (a week: the questions are about now and the
#: next few days), the windows schedule's and the compiled feeds' (which cannot import it)
HORIZON = timedelta(days=7)

#: a kept file larger than this is not read (100,000 windows' schedule takes about 30 MiB)
_MAX_BYTES = 256 * 1024 * 1024

_STAMP: str | None = None


def code_stamp() -> str:
    """What a kept file depends on besides the windows file: our code (an editable checkout
    changes without a new version, hence the modules' newest mtime) and the libraries that read it."""
    global _STAMP
    if _STAMP is None:
        package = Path(__file__).resolve().parent.parent
        newest = max((entry.stat().st_mtime_ns for entry in _modules(package)), default=0)
        _STAMP = "|".join([__version__, str(newest), pydantic.VERSION, _module_stamp("croniter"),
                           _module_stamp("tomli"), sys.version.split()[0]])
    return _STAMP


def _modules(package: Path) -> Iterable[os.DirEntry[str]]:
    stack = [package]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                    stack.append(Path(entry.path))
                elif entry.name.endswith(".py"):
                    yield entry


def _module_stamp(name: str) -> str:
    """The installed module `name` by its file's path, size and mtime (croniter has no
    `__version__`, and `importlib.metadata` would cost a command more than it saves)."""
    try:
        spec = find_spec(name)
        origin = spec.origin if spec is not None else None
        st = os.stat(origin) if origin else None
    except (ImportError, ValueError, OSError):
        return "unknown"
    return f"{origin}:{st.st_size}:{st.st_mtime_ns}" if st is not None else "unknown"


def basis(zones: Iterable[str]) -> str:
    """What a kept file was computed with besides its source: the code (`code_stamp`) and the
    TZif data of each zone in `zones` (`zone_digest`)."""
    parts = [code_stamp(), *(f"{z}={zone_digest(z)}" for z in sorted(set(zones)))]
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def zone_digest(name: str) -> str | None:
    """The SHA-256 of the TZif data `zoneinfo` reads for `name` (the first of its search path,
    then the tzdata package), or None when it cannot be found."""
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


#: (path, problem) already warned about: a long-running process says it once
_WARNED: set[tuple[str, str]] = set()


def _unsafe(st: os.stat_result) -> str | None:
    """Why a file or directory with this `stat` is not to be trusted (None: it is)."""
    if st.st_uid not in (os.geteuid(), 0):
        return f"owned by uid {st.st_uid}, not by this user (uid {os.geteuid()}) or root"
    if st.st_mode & 0o022:
        return f"writable by group or others (mode {st.st_mode & 0o7777:04o})"
    return None


def _distrusted(path: Path, problem: str) -> None:
    """One WARNING per (path, problem) per process; never a failure."""
    if (str(path), problem) in _WARNED:
        return
    _WARNED.add((str(path), problem))
    log.warning("windows schedule %s not used: %s (a kept schedule is never an authority: make it this "
                "user's and writable by nobody else)", printable(path), printable(problem))


def directory_problem(where: Path) -> str | None:
    """Why nothing kept in the directory `where` may be trusted (None: it may, or it is absent)."""
    try:
        return _unsafe(os.stat(where))
    except OSError as exc:
        return None if isinstance(exc, FileNotFoundError) else f"cannot be checked: {exc.strerror or exc}"


def trusted_bytes(path: Path) -> bytes:
    """The bytes of the kept file `path`; b"" when there is none, it cannot be read, it is not a
    regular file, or it or its directory could be written by someone else than this user or root."""
    problem = directory_problem(path.parent)
    if problem is not None:
        _distrusted(path.parent, problem)
        return b""
    try:
        data, st = read_regular_with_stat(path, _MAX_BYTES)  # a FIFO or a symlink planted there is refused
    except OSError:
        return b""
    except StoreError as exc:  # not a regular file, too large
        _distrusted(path, str(exc))
        return b""
    problem = _unsafe(st)  # the very file read, not the name looked up again
    if problem is not None:
        _distrusted(path, problem)
        return b""
    return data


#: the key kept files of a directory are sealed with (`seal`), in that directory, this user's alone
SEAL_KEY = ".hermes-estop.key"


def seal_key(where: Path, *, create: bool) -> bytes | None:
    """The key of the kept files of the directory `where` (`SEAL_KEY`: 32 random bytes, made
    on the first write, `create`, mode 0600); None when there is none, or it is not a regular
    file of this user's (or root's) that nobody else can read or write: nothing kept there is
    then believed (issue 45: a kept file is keyed so that one built for other bytes, its header
    edited, or copied from elsewhere, is never mistaken for the current file's)."""
    path = where / SEAL_KEY
    for _ in range(2):
        try:
            data, st = read_regular_with_stat(path, 4096)
        except FileNotFoundError:
            if not create:
                return None
            try:
                where.mkdir(mode=0o700, parents=True, exist_ok=True)  # the cache directory, made private
                problem = directory_problem(where)
                if problem is not None:
                    _distrusted(where, problem)
                    return None
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                continue  # another process made it first: read theirs
            except OSError:
                return None
            try:
                key = os.urandom(32)
                os.write(fd, key)
                os.fsync(fd)
            finally:
                os.close(fd)
            return key
        except (OSError, StoreError):
            return None
        if _unsafe(st) is not None or st.st_mode & 0o077 or len(data) < 32:
            _distrusted(path, "a seal key others could read or write, or not one this code made")
            return None
        return data
    return None


def seal(key: bytes, header: bytes, body: bytes | bytearray | memoryview) -> str:
    """The seal of a kept file: HMAC-SHA256 under `key` of its `header` (without the seal) and
    its `body` (what follows the header's line)."""
    mac = hmac.new(key, header, "sha256")
    mac.update(b"\n")
    mac.update(body)
    return mac.hexdigest()


def cache_dir() -> Path | None:
    """The per-user directory for a file that cannot be kept beside the windows file:
    `$HERMES_ESTOP_CACHE` (`off`: none), else `$XDG_CACHE_HOME/hermes-estop`, else
    `~/.cache/hermes-estop`; None when turned off or there is no home."""
    chosen = os.environ.get("HERMES_ESTOP_CACHE")
    if chosen:
        return None if chosen.strip().lower() == "off" else Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME")
    if base:
        return Path(base) / "hermes-estop"
    try:
        return Path.home() / ".cache" / "hermes-estop"
    except (RuntimeError, KeyError):  # no $HOME and no password entry
        return None


def kept_path(beside: Path, suffix: str) -> Path | None:
    """Where to keep a file about the file `beside`: next to it (`.<name><suffix>`, where every
    operator of the fleet finds it) when its directory is this user's or root's and writable by
    nobody else; else in this user's `cache_dir()` (a fleet root its group can write: each
    operator keeps their own), named by the hash of `beside`'s path; None when there is none."""
    if directory_problem(beside.parent) is None:
        return beside.with_name(f".{beside.name}{suffix}")
    where = cache_dir()
    if where is None:
        return None
    name = hashlib.sha256(str(beside.absolute()).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return where / f"{name}{suffix}"


def in_cache(path: Path, beside: Path) -> bool:
    """Whether `path`, from `kept_path(beside)`, is in this user's cache: `write_trusted`'s `private`."""
    return path.parent != beside.parent


def write_trusted(path: Path, data: bytes | bytearray, *, private: bool) -> None:
    """Write `data` to `path` atomically, unless its directory could be written by someone else
    (then one WARNING line) or cannot be written (then nothing: a kept file is optional).
    `private`: the directory is this user's cache, made with its parents for this user alone;
    else a directory of the fleet (the fleet root, `calendars/`) every operator reads: made
    when absent with the umask's mode, its parent never."""
    try:
        if private:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        else:
            path.parent.mkdir(exist_ok=True)
    except OSError as exc:
        log.debug("windows schedule %s not written: %s", path, exc)
        return
    problem = directory_problem(path.parent)
    if problem is not None:
        _distrusted(path.parent, problem)
        return
    try:
        atomic_write(path, data, durable=False)  # type: ignore[arg-type]  # a bytearray is written as bytes are
    except (OSError, StoreError) as exc:
        log.debug("windows schedule %s not written: %s", path, exc)
