"""A per-user cache of validated windows files and of the cron starts computed for them.

Why: with 10,000 windows of distinct schedules, most of a `hermes windows ...` command is work an
earlier command already did: TOML and pydantic (about 60 us a window) and croniter, which
parses each distinct expression (about 100 us) before it can step it (40 us a start). This
cache keeps the outcome of that work between processes (issue 24):

- **windows**: the windows of a file that validated whole (no failing table, no calendar), kept
  under the SHA-256 of the file's bytes and the stamp of the code that validated them
  (hermes-estop's version and the newest mtime of its modules; pydantic's, croniter's and
  tomli's versions). A file changed by one byte, or any upgrade, is validated again.
- **starts**: the runs of `cronspec.RUNS` (the starts each schedule was asked for), kept with
  croniter's version and the SHA-256 of each zone's TZif data: an updated tz database, or
  another croniter, computes them again. Saved when the process exits, if it computed any.

Both live in `$HERMES_ESTOP_CACHE` (a directory; `off` turns the cache off), else
`$XDG_CACHE_HOME/hermes-estop`, else `~/.cache/hermes-estop`, one pair of files per windows file
(named by the hash of its path), the directory made private (0700). Nothing here ever fails a
command: a cache that is missing, unreadable, malformed or of another stamp is ignored (the file
is read as if there were none), and one that cannot be written is not written.

A cache is an accelerator, never an authority (issue 32 item 10): whoever can write it chooses
what `hermes serve` arms and runs. So, as ssh's StrictModes, a cache file is read only when it
and its directory are owned by the running user (or root) and writable by nobody else, and
nothing is written into a directory that is not; otherwise the cache is ignored with one
WARNING line (once per process) and the windows file validated as if there were none. What a
cached window does when it runs is checked again on the way in (`run`, `scope`, `only`,
`jobs`), so a cache that passes the ownership rule still never yields what validation refuses.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable
from datetime import date, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hermes_estop.model import cronspec
from hermes_estop.model.errors import EstopError, StoreError
from hermes_estop.system.fsread import read_regular_with_stat
from hermes_estop.system.fsutil import atomic_write
from hermes_estop.model.selector import Selector
from hermes_estop.model.text import printable
from hermes_estop.windows.fields import WindowAllow
from hermes_estop.windows.model import Window, parse_run, validate_scope
from hermes_estop import __version__
from importlib.util import find_spec
import pydantic
import zoneinfo

__all__ = ["cache_dir", "cached_windows", "follow_starts", "remember_windows", "save_starts"]

log = logging.getLogger(__name__)

_FORMAT = 1
#: a cache file larger than this is not read (100,000 windows take about 10 MiB)
_MAX_BYTES = 256 * 1024 * 1024
_OFF = "off"


def cache_dir() -> Path | None:
    """Where the cache lives, or None when `$HERMES_ESTOP_CACHE` is `off` (or there is no home)."""
    chosen = os.environ.get("HERMES_ESTOP_CACHE")
    if chosen:
        return None if chosen.strip().lower() == _OFF else Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME")
    if base:
        return Path(base) / "hermes-estop"
    try:
        return Path.home() / ".cache" / "hermes-estop"
    except (RuntimeError, KeyError):  # no $HOME and no password entry: no cache
        return None


def _files(path: Path) -> tuple[Path, Path] | None:
    where = cache_dir()
    if where is None:
        return None
    name = hashlib.sha256(str(path.absolute()).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return where / f"{name}.windows.json", where / f"{name}.starts.json"


# -- the stamp of the code that validated a file -----------------------------------------------

_STAMP: str | None = None


def _code_stamp() -> str:
    """What the validation depends on besides the file: our code (an editable checkout changes
    without a new version, hence the modules' newest mtime) and the libraries that read it."""
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
    """The installed module `name` by its file's path, size and mtime: croniter has no
    `__version__`, `importlib.metadata` would cost a command more than the cache saves it, and a
    warm command never imports croniter at all."""
    try:
        spec = find_spec(name)
        origin = spec.origin if spec is not None else None
        st = os.stat(origin) if origin else None
    except (ImportError, ValueError, OSError):
        return "unknown"
    return f"{origin}:{st.st_size}:{st.st_mtime_ns}" if st is not None else "unknown"


# -- windows ----------------------------------------------------------------------------------

def _same(value: Any) -> Any:
    return value


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def _delta(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _instant(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _allow_out(value: WindowAllow) -> list[list[str]]:
    return [list(value.user_ids), list(value.profiles)]


def _allow_in(value: list[list[str]]) -> WindowAllow:
    return WindowAllow.model_validate({"user_ids": value[0], "profiles": value[1]})


def _dates_out(value: list[date]) -> list[str]:
    return [day.isoformat() for day in value]


def _dates_in(value: list[str]) -> list[date]:
    return [date.fromisoformat(day) for day in value]


def _run_in(value: Any) -> list[str] | None:
    return parse_run(value)


def _scope_in(value: Any) -> str:
    return sys.intern(validate_scope(value))


def _only_in(value: Any) -> list[str]:
    return _selector_part(value, "only")


def _jobs_in(value: Any) -> list[str]:
    return _selector_part(value, "jobs")


def _selector_part(value: Any, field: str) -> list[str]:
    """A cached `only` or `jobs`, refused (`ValueError`: the cache is ignored) unless it is what
    the window's validation accepts."""
    if type(value) is not list:
        raise ValueError(f"{field} is not a list")
    try:
        Selector.of(value if field == "only" else (), value if field == "jobs" else ())
    except EstopError as exc:
        raise ValueError(str(exc)) from None
    return list(value)


def _interned(value: Any) -> Any:
    return sys.intern(value) if type(value) is str else value


Codec = tuple[Callable[[Any], Any], Callable[[Any], Any]]
_PLAIN: Codec = (_same, _same)
#: a string many windows (or the starts of `cronspec.RUNS`) repeat: one object for them all
_SHARED: Codec = (_same, _interned)
#: how each field of `Window` is written to the cache and read back; a field missing here turns
#: the cache off (`_codecs`), so a new field can never be read back as its default
_CODECS: dict[str, Codec] = {
    "name": _PLAIN, "cron": _SHARED, "timezone": _SHARED, "at": (_iso, _instant), "duration": (_seconds, _delta),
    "drain": (_seconds, _delta), "reason": _PLAIN, "allow": (_allow_out, _allow_in), "scope": (_same, _scope_in),
    "only": (list, _only_in), "jobs": (list, _jobs_in), "enabled": _PLAIN, "not_before": (_iso, _instant),
    "not_after": (_iso, _instant), "exclude": (_dates_out, _dates_in), "exclude_cron": _SHARED,
    "run": (_same, _run_in), "on_failure_ttl": (_seconds, _delta), "exclude_calendar": _PLAIN,
}


def _codecs() -> dict[str, Codec] | None:
    return _CODECS if list(_CODECS) == list(Window.model_fields) else None


def _fields_mask(window: Window, names: list[str]) -> int:
    mask = 0
    for bit, name in enumerate(names):
        if name in window.model_fields_set:
            mask |= 1 << bit
    return mask


def remember_windows(path: Path, digest: str, windows: list[Window]) -> None:
    """Keep `windows`, the validated content of the windows file `path` whose bytes have the
    SHA-256 `digest` (hex).

    The file is JSON lines: a header, the fields set per window, then one line per field (its
    values in window order, or `{"all": value}` when every window has the same), so a reader
    decodes one field at a time and never holds the whole document decoded beside the windows."""
    files, codecs = _files(path), _codecs()
    if files is None or codecs is None or any(w.exclude_calendar is not None for w in windows):
        return
    names = list(codecs)
    header = {"format": _FORMAT, "stamp": _code_stamp(), "digest": digest,
              "fields": names, "count": len(windows)}
    lines = [_line(header), _line([_fields_mask(w, names) for w in windows])]
    for name in names:
        column = [codecs[name][0](getattr(w, name)) for w in windows]
        lines.append(_line({"all": column[0]} if column and all(v == column[0] for v in column) else column))
    _write(files[0], b"\n".join(lines))


def _line(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def cached_windows(path: Path, digest: str) -> list[Window] | None:
    """The windows kept for the windows file `path` whose bytes have the SHA-256 `digest` (hex),
    or None when the cache has none for exactly these bytes and this code."""
    files, codecs = _files(path), _codecs()
    if files is None or codecs is None:
        return None
    lines = _lines(files[0])
    try:
        header = json.loads(lines[0] or b"null") if lines else None
        if not isinstance(header, dict) or header.get("format") != _FORMAT or header.get("stamp") != _code_stamp() \
                or header.get("digest") != digest or header.get("fields") != list(codecs) \
                or len(lines) != 2 + len(codecs):
            return None
        return _built(list(codecs), lines, header["count"], codecs)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError) as exc:
        log.debug("windows cache %s ignored: %s", files[0], exc)
        return None


def _built(names: list[str], lines: list[bytes | None], count: int, codecs: dict[str, Codec]) -> list[Window]:
    """Windows from the cache's lines, built as `Window.model_construct` builds them (these values
    were validated by the code whose stamp the cache carries), without its per-field
    bookkeeping: equal values are decoded once and shared (a frozen window never changes them).
    Each line is dropped once decoded."""
    masks = _column(lines, 1, count)
    decoded: list[Iterable[Any]] = []
    for index, name in enumerate(names, start=2):
        decode = codecs[name][1]
        column = _column(lines, index, count)
        if isinstance(column, dict):
            decoded.append(itertools.repeat(decode(column["all"]), count))
            continue
        if decode is _same:
            decoded.append(column)
            continue
        if decode is _interned:  # sys.intern is the memo
            decoded.append([sys.intern(value) if type(value) is str else value for value in column])
            continue
        memo: dict[Any, Any] = {}
        for i, value in enumerate(column):
            key = _hashable(value)
            found = memo.get(key, memo)
            if found is memo:
                found = decode(value)
                if len(memo) < _MEMO:
                    memo[key] = found
            column[i] = found
        decoded.append(column)
    fields_sets: dict[int, set[str]] = {}
    # One read-only mapping of the private defaults for every window (a dict each is a sixth of
    # a window's memory): setting a private attribute on a cached window raises rather than
    # reaching them all; `model_copy` (what binds a calendar) gives the copy a dict of its own.
    private = MappingProxyType({name: attr.get_default() for name, attr in Window.__private_attributes__.items()})
    windows = []
    new, setattr_ = Window.__new__, object.__setattr__
    for mask, row in zip(masks, zip(*decoded, strict=False), strict=False):
        fields_set = fields_sets.get(mask)
        if fields_set is None:
            if type(mask) is not int:
                raise ValueError(f"fields set {mask!r} is not a number")
            fields_set = fields_sets[mask] = {name for bit, name in enumerate(names) if mask >> bit & 1}
        window = new(Window)
        # filled in place, not replaced: an instance's own dict shares its keys with every other
        # window's (half the memory of a dict of its own, which `model_construct` makes)
        window.__dict__.update(zip(names, row, strict=False))
        setattr_(window, "__pydantic_fields_set__", fields_set)
        setattr_(window, "__pydantic_extra__", None)
        setattr_(window, "__pydantic_private__", private)
        windows.append(window)
    return windows


#: distinct values of one field decoded once and shared, up to this many (a field every window
#: has its own value of is not worth a dictionary as large as the file)
_MEMO = 4096


def _column(lines: list[bytes | None], index: int, count: int) -> Any:
    """Line `index` decoded (and dropped): `count` values, or `{"all": value}`."""
    line, lines[index] = lines[index], None
    column = json.loads(line) if line is not None else None
    if isinstance(column, dict) and "all" in column:
        return column
    if not isinstance(column, list) or len(column) != count:
        raise ValueError(f"line {index + 1} does not have {count} values")
    return column


def _hashable(value: Any) -> Any:
    """`value` as a memo key: lists (two levels deep, as `allow` is) as tuples."""
    if type(value) is not list:
        return value
    return tuple(tuple(item) if type(item) is list else item for item in value)


# -- starts ---------------------------------------------------------------------------------

#: the windows file whose starts this process keeps, and the cache file they are kept in
_FOLLOWING: list[tuple[Path, Path]] = []


def follow_starts(path: Path) -> None:
    """Seed `cronspec.RUNS` from the starts kept for the windows file `path` and keep what this
    process adds to them when it exits (for the last windows file it followed: a process reads
    one fleet's)."""
    files = _files(path)
    if files is None or (_FOLLOWING and _FOLLOWING[-1] == (path, files[1])):
        return
    if not _FOLLOWING:
        atexit.register(save_starts)
    _FOLLOWING[:] = [(path, files[1])]
    lines = _lines(files[1])
    try:
        header = json.loads(lines[0] or b"null") if lines else None
        if isinstance(header, dict) and header.get("format") == _FORMAT and header.get("croniter") == _croniter_version() \
                and len(lines) == 1 + len(_RUN_COLUMNS):
            _seed(header["zones"], header["count"], lines)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError) as exc:
        log.debug("starts cache %s ignored: %s", files[1], exc)


#: the starts file: a header, then these columns, one line each
_RUN_COLUMNS = ("expression", "zone", "lo", "complete", "starts")


def _seed(zones: dict[str, str], count: int, lines: list[bytes | None]) -> None:
    exprs, zone_names, los, completes, starts = (_column(lines, i, count) for i in range(1, 1 + len(_RUN_COLUMNS)))
    current = {name: _zone_digest(name) for name in zones}
    trusted = {sys.intern(name) for name, digest in zones.items() if digest is not None and current.get(name) == digest}
    seed, run_of = cronspec.RUNS.seed, cronspec.RememberedStarts
    for expr, zone, lo, complete, run in zip(exprs, zone_names, los, completes, starts, strict=False):
        if type(expr) is not str or type(zone) is not str or type(lo) not in (int, float) or type(run) is not list \
                or not _ascending_seconds(run):
            raise ValueError("a run is not (expression, zone, lo, complete, ascending starts)")
        if zone in trusted:
            seed((sys.intern(expr), sys.intern(zone)), run_of(float(lo), run, complete is True))


def _ascending_seconds(run: list[Any]) -> bool:
    if len(run) == 1:  # most runs: a command asked each schedule for one start
        return type(run[0]) is int
    return all(type(start) is int for start in run) and all(a < b for a, b in itertools.pairwise(run))


def save_starts() -> None:
    """Write the runs of `cronspec.RUNS` for the windows file followed, when any were added."""
    if not _FOLLOWING or not cronspec.RUNS.changed:
        return
    kept = [(key, run) for key, run in cronspec.RUNS.items() if run.starts or run.complete]
    zones = {name: _zone_digest(name) for name in {key[1] for key, _ in kept}}
    kept = [(key, run) for key, run in kept if zones.get(key[1]) is not None]
    header = {"format": _FORMAT, "croniter": _croniter_version(), "zones": zones, "count": len(kept)}
    lines = [_line(header), _line([key[0] for key, _ in kept]), _line([key[1] for key, _ in kept]),
             _line([run.lo for _, run in kept]), _line([run.complete for _, run in kept]),
             _line([run.starts for _, run in kept])]
    _write(_FOLLOWING[-1][1], b"\n".join(lines))
    cronspec.RUNS.changed = False


def _croniter_version() -> str:
    return _module_stamp("croniter")


def _zone_digest(name: str) -> str | None:
    """The SHA-256 of the TZif data `zoneinfo` reads for `name` (the first of its search path,
    then the tzdata package), or None when it cannot be found (its runs are not kept)."""
    parts = name.split("/")
    if not name or any(part in ("", ".", "..") for part in parts):
        return None
    for base in zoneinfo.TZPATH:
        candidate = Path(base, *parts)
        try:
            return hashlib.sha256(candidate.read_bytes()).hexdigest()
        except OSError:
            continue
    try:
        from importlib.resources import files

        return hashlib.sha256(files("tzdata.zoneinfo").joinpath(*parts).read_bytes()).hexdigest()
    except (ImportError, OSError, ValueError):
        return None


# -- the files --------------------------------------------------------------------------------

#: (path, problem) already warned about: a long-running process says it once
_WARNED: set[tuple[str, str]] = set()


def _unsafe(st: os.stat_result) -> str | None:
    """Why a cache file or directory with this `stat` is not to be trusted (None: it is): it
    must be owned by the running user or root and writable by nobody else (ssh's StrictModes)."""
    if st.st_uid not in (os.geteuid(), 0):
        return f"owned by uid {st.st_uid}, not by this user (uid {os.geteuid()}) or root"
    if st.st_mode & 0o022:
        return f"writable by group or others (mode {st.st_mode & 0o7777:04o})"
    return None


def _distrusted(path: Path, problem: str) -> None:
    """One WARNING per (path, problem) per process: the cache is neither read nor written there,
    never a failure."""
    if (str(path), problem) in _WARNED:
        return
    _WARNED.add((str(path), problem))
    log.warning("windows cache %s not used: %s (a cache is never an authority: make it this user's and "
                "writable by nobody else, or set HERMES_ESTOP_CACHE=off)", printable(path), printable(problem))


def _directory_problem(where: Path) -> str | None:
    try:
        return _unsafe(os.stat(where))
    except OSError as exc:
        return None if isinstance(exc, FileNotFoundError) else f"cannot be checked: {exc.strerror or exc}"


def _lines(path: Path) -> list[bytes | None]:
    """The lines of the cache file `path` ([] when there is none, it cannot be read, or it or
    its directory could be written by someone else than this user or root)."""
    problem = _directory_problem(path.parent)
    if problem is not None:
        _distrusted(path.parent, problem)
        return []
    try:
        data, st = read_regular_with_stat(path, _MAX_BYTES)  # a FIFO planted there is refused, not waited on
    except (OSError, StoreError):
        return []
    problem = _unsafe(st)  # the very file read, not the name looked up again
    if problem is not None:
        _distrusted(path, problem)
        return []
    return list(data.split(b"\n"))


def _write(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        problem = _directory_problem(path.parent)
        if problem is not None:
            _distrusted(path.parent, problem)
            return
        atomic_write(path, data, durable=False)
    except (OSError, StoreError) as exc:
        log.debug("cache %s not written: %s", path, exc)
