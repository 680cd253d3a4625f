"""`windows.toml` of one fleet root: reading it safely and changing it atomically.

Reading opens the file with `fsutil.open_regular` (O_NONBLOCK|O_NOFOLLOW, then fstat): a FIFO,
a directory or a symlink planted there is refused with one line (`NotRegularFile`, a
`StoreError`), which the scheduler treats as "cannot read" (standing holds stay), never as
"zero windows". `snapshot()` returns the bytes together with the identity of the very file
they were read from, so the scheduler can tell a re-save in place (new identity) from a file
that stayed as it was.

Writes go through `fsutil.locked_update`: an exclusive lock beside the file (`.windows.toml.lock`),
the temporaries of writers that died mid-write swept, the file replaced atomically: a reader sees
the old file or the new. Hand editors that re-save in place are the scheduler's problem (`windows.plan`).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import tomli_w

# The TOML parser is `tomli` (a dependency), not the standard library's `tomllib`: they are one
# parser (tomllib is tomli, vendored) with the same results and error messages, but tomli's wheels
# are compiled (mypyc) and parse a 10,000-window file about three times faster; parsing is over
# half of the scheduler's cold start-up at that size (bench/windows.py).
from tomli import TOMLDecodeError, loads as toml_loads

from hermes_estop.model.errors import StoreError
from hermes_estop.system.fsutil import locked_update, read_regular_with_stat
from hermes_estop.windows import toml_edit
from hermes_estop.windows.calendars import CalendarSource, bind
from hermes_estop.windows.model import WINDOWS_FILE, InvalidWindow, Window, check_unique

__all__ = ["MAX_WINDOWS_BYTES", "WINDOWS_FILE", "Parsed", "FileSnapshot", "WindowsFile"]

#: a windows file larger than this is refused (10,000 windows take about 1 MiB)
MAX_WINDOWS_BYTES = 32 * 1024 * 1024
_HEADER = (
    "# Maintenance windows of this fleet (hermes-estop). Edit by hand or with `hermes windows add`;\n"
    "# `hermes windows validate` checks the file, `hermes serve` picks edits up without a restart.\n\n"
)

Identity = tuple[int, ...]


@dataclass(frozen=True)
class Parsed:
    """A file that parses as TOML, window by window: the `windows` that validate, and one
    `InvalidWindow` per table that does not (a table whose name repeats one before it too).
    Calendars (`[[calendars]]`, `exclude_calendar`) bound (`parse_each`): `stale` names those
    running on their last good copy, and why; `digests` says which feed contents were read."""

    windows: list[Window]
    failures: list[InvalidWindow]
    sources: list[CalendarSource] = field(default_factory=list)
    stale: dict[str, str] = field(default_factory=dict)
    digests: tuple[str, ...] = ()

    def failing_names(self) -> frozenset[str]:
        """The names (as written) of the tables that fail, where they have a valid one."""
        return frozenset(f.window.strip("'") for f in self.failures if f.window and f.window.startswith("'"))


def _section(name: str, table: Mapping[str, Any], *, many: bool = False) -> str:
    """`table` as a TOML section, always as a `[[windows]]` table (tomli_w writes a short array
    of tables inline, `windows = [ {...} ]`, so one window read differently from two)."""
    literals = {key: value for key, value in table.items() if not isinstance(value, Mapping)}
    text = (f"[[{name}]]\n" if many else f"[{name}]\n") + tomli_w.dumps(literals)
    for key, value in table.items():
        if isinstance(value, Mapping):
            text += "\n" + _section(f"{name}.{key}", value)
    return text


@dataclass(frozen=True)
class FileSnapshot:
    """One read of the file: its identity (None: no file) and its bytes (b"" when absent)."""

    identity: Identity | None
    raw: bytes


def _identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class WindowsFile:
    """`windows.toml` of one fleet root: load, and locked atomic read-modify-write."""

    def __init__(self, root: Path, name: str = WINDOWS_FILE) -> None:
        self.path = Path(root) / name
        self.lock_path = self.path.with_name(f".{self.path.name}.lock")
        #: the calendar files the last `parse_each` here bound (part of the file's `identity`)
        self._watched: tuple[Path, ...] = ()
        #: the bytes last validated here and what they held (`hermes serve` reads every pass)
        self._last: tuple[bytes, Parsed] | None = None

    def __repr__(self) -> str:
        return f"WindowsFile({str(self.path)!r})"

    def identity(self) -> Identity | None:
        """What changes whenever the file is replaced or edited in place; None when absent."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot stat {self.path}: {exc.strerror or exc}") from None
        identity = _identity(st)
        for path in self._watched:
            try:
                identity += _identity(os.stat(path))
            except OSError:
                identity += (-1,)
        return identity

    def snapshot(self) -> FileSnapshot:
        """The bytes and the identity of the file they came from. Raises `StoreError` (cannot
        read, not a regular file, too large)."""
        try:
            raw, st = read_regular_with_stat(self.path, MAX_WINDOWS_BYTES)
        except FileNotFoundError:
            return FileSnapshot(None, b"")
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        return FileSnapshot(_identity(st), raw)

    def load(self) -> list[Window]:
        """Every window in the file, in file order; [] when there is no file. Raises
        `InvalidWindow` (the file, the window, the field) or `StoreError` (cannot read)."""
        return self.parse(self.snapshot().raw)

    def parse(self, raw: bytes) -> list[Window]:
        """The windows `raw` holds; `InvalidWindow` for the first table that does not validate."""
        parsed = self.parse_each(raw)
        if parsed.failures:
            raise parsed.failures[0]
        return parsed.windows

    def parse_each(self, raw: bytes) -> Parsed:
        """The windows `raw` holds, each validated on its own, so one bad window never hides the
        others from the scheduler (issue 20 item 2), their calendars bound. Raises
        `InvalidWindow` only when the file as a whole does not read (not UTF-8, not TOML, not
        an array of tables)."""
        parsed = self.validate(raw)
        if not parsed.sources and all(w.exclude_calendar is None for w in parsed.windows):
            self._watched = ()
            return replace(parsed, windows=list(parsed.windows), failures=list(parsed.failures))
        bound = bind(self.path.parent, self.path, parsed.windows, parsed.sources)
        self._watched = bound.files
        return Parsed(bound.windows, parsed.failures + bound.failures, parsed.sources, bound.stale, bound.digests)

    def validate(self, raw: bytes, *, whole: bool = False) -> Parsed:
        """The windows and calendar sources of `raw`, unbound; `whole` (an edit): the first
        failing table raises. The cyclic garbage collector is paused meanwhile: validating a
        large file allocates hundreds of thousands of objects that all survive, and each
        collection they trigger walks every one of them again (a fifth of the cold start-up with
        10,000 windows). Nothing here makes cycles to collect; the collector resumes after.
        The last bytes validated here are not validated again."""
        last = self._last
        if last is None or last[0] != raw:
            paused = gc.isenabled()
            gc.disable()
            try:
                last = self._last = (raw, self._tables(raw))
            finally:
                if paused:
                    gc.enable()
        parsed = last[1]
        if whole and parsed.failures:
            raise parsed.failures[0]
        return parsed

    def _tables(self, raw: bytes) -> Parsed:
        try:
            data = toml_loads(raw.decode("utf-8-sig"))
        except UnicodeDecodeError:
            raise InvalidWindow("not UTF-8 text", path=self.path) from None
        except TOMLDecodeError as exc:
            raise InvalidWindow(f"not valid TOML: {exc}", path=self.path) from None
        unknown = sorted(set(data) - {"windows", "calendars"})
        if unknown:
            raise InvalidWindow(f"unknown top-level key(s) {unknown}: expected [[windows]] and [[calendars]] tables",
                                path=self.path)
        failures: list[InvalidWindow] = []
        windows = self._each(data, "windows", Window.parse, failures)
        seen: set[str] = set()
        unique = []
        for window in windows:
            if window.name in seen:
                failures.append(InvalidWindow("duplicate name", path=self.path, window=repr(window.name), field="name"))
            else:
                seen.add(window.name)
                unique.append(window)
        return Parsed(unique, failures, self._each(data, "calendars", CalendarSource.parse, failures))

    def _each(self, data: dict[str, Any], key: str, parse: Callable[..., Any], failures: list[InvalidWindow]) -> list[Any]:
        """Each table of the array `key` (`[[windows]]`, `[[calendars]]`) that validates; the
        others' `InvalidWindow` added to `failures`."""
        tables = data.get(key, [])
        if not isinstance(tables, list):
            raise InvalidWindow(f"{key!r} must be an array of tables ([[{key}]])", path=self.path)
        out = []
        for i, table in enumerate(tables):
            try:
                out.append(parse(table, path=self.path, index=i))
            except InvalidWindow as exc:
                failures.append(exc)
        return out

    def render(self, windows: Iterable[Window], sources: Iterable[CalendarSource] = ()) -> bytes:
        """The file of `windows` and the calendar `sources` (a calendar's window is written back
        as its `[[calendars]]` table)."""
        plain: list[dict[str, Any]] = []
        calendars = [source.to_toml() for source in sources]
        for window in windows:
            (calendars if window.feed is not None else plain).append(window.to_toml())
        parts = [_section("windows", table, many=True) for table in plain]
        parts += [_section("calendars", table, many=True) for table in calendars]
        return (_HEADER + "\n".join(parts)).encode("utf-8")

    def save(self, windows: Iterable[Window]) -> None:
        """Replace the file with `windows` (atomically, under the lock)."""
        windows = list(windows)
        check_unique(windows, self.path)
        with locked_update(self.path, lock_path=self.lock_path) as file:
            file.replace(self.render(windows))

    def add(self, window: Window, *, replace: bool = False) -> list[Window]:
        """Append `window` (or, with `replace`, put it in place of the one with its name),
        editing the file as it is written (`toml_edit`: comments, order and style kept)."""
        with locked_update(self.path, limit=MAX_WINDOWS_BYTES, lock_path=self.lock_path) as file:
            raw = file.current or b""
            parsed = self.validate(raw, whole=True)
            windows = list(parsed.windows)
            names = [w.name for w in windows]
            if window.name in {source.name for source in parsed.sources}:
                raise InvalidWindow("is the name of a calendar ([[calendars]])", path=self.path, window=repr(window.name))
            if window.name in names:
                if not replace:
                    raise InvalidWindow("already exists (remove it first, or use --replace)",
                                        path=self.path, window=repr(window.name))
                before = windows[names.index(window.name)]
                windows[names.index(window.name)] = window
                edit = partial(toml_edit.replaced, name=window.name, before=before.to_toml(), after=window.to_toml())
            else:
                windows.append(window)
                edit = partial(toml_edit.appended, table=window.to_toml())
            file.replace(self._edited(raw, edit, windows, parsed.sources))
        return windows

    def remove(self, name: str) -> Window:
        """Remove the window called `name` (`toml_edit`: the rest of the file as it is written);
        `InvalidWindow` when there is none."""
        with locked_update(self.path, limit=MAX_WINDOWS_BYTES, lock_path=self.lock_path) as file:
            raw = file.current or b""
            parsed = self.validate(raw, whole=True)
            windows = list(parsed.windows)
            for i, window in enumerate(windows):
                if window.name == name:
                    del windows[i]
                    file.replace(self._edited(raw, partial(toml_edit.removed, name=name), windows, parsed.sources))
                    return window
        raise InvalidWindow("no such window", path=self.path, window=repr(name))

    def _edited(self, raw: bytes, edit: Callable[[str], str], windows: list[Window], sources: list[CalendarSource]) -> bytes:
        """`raw` changed by `edit` (text to text), checked under the rules every file is: it must
        validate and hold exactly `windows`. A file with no window yet is written whole."""
        text = raw.decode("utf-8-sig")
        if not text.strip():
            return self.render(windows, sources)
        bom = "\ufeff" if raw.startswith(b"\xef\xbb\xbf") else ""
        new = (bom + edit(text)).encode("utf-8")
        result = self.validate(new, whole=True)
        if result.windows != windows:
            raise InvalidWindow("the edit did not leave the windows expected; edit the file by hand", path=self.path)
        return new
