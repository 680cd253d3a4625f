"""`windows.toml` of one fleet root: reading it safely, changing it atomically, and editing it as
written.

Reads refuse a FIFO, a directory or a planted symlink with one line (`NotRegularFile`, a
`StoreError`): the scheduler takes it as "cannot read" (standing holds stay), never as "zero
windows". The scheduler reads it with `system.fsread.read_snapshot`, which pairs the bytes with
the identity of the very file they came from. Writes take a lock
beside the file and replace it atomically: a reader sees the old file or the new.

`add` and `remove` keep what the operator wrote (issue 38): the header, comments, the order of
the windows and inline tables stay; only the window added, replaced or removed changes. tomlkit
finds the tables; removal cuts lines, so a comment written above the next window stays with it.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

# `tomli`, not the standard library's `tomllib`: the same parser and messages, but tomli's wheels
# are compiled (mypyc) and parse a 10,000-window file about three times faster (bench/windows.py)
from tomli import TOMLDecodeError, loads as toml_loads

from hermes_estop.model.errors import StoreError
from hermes_estop.model.policy import Actor, Policy
from hermes_estop.system.fsread import file_identity, read_snapshot
from hermes_estop.system.fsutil import locked_update
from hermes_estop.windows.calendars import CalendarSource, bind
from hermes_estop.windows.model import WINDOWS_FILE, InvalidWindow, Parsed, Window, refusals_of, refused_window

__all__ = ["MAX_WINDOWS_BYTES", "WINDOWS_FILE", "Parsed", "WindowsFile", "against_policy"]

#: a windows file larger than this is refused (10,000 windows take about 1 MiB)
MAX_WINDOWS_BYTES = 32 * 1024 * 1024
_HEADER = (
    "# Maintenance windows of this fleet (hermes-estop). Edit by hand or with `hermes windows add`;\n"
    "# `hermes windows validate` checks the file, `hermes serve` picks edits up without a restart.\n\n"
)

Identity = tuple[int, ...]


def _unique(windows: Iterable[Window], path: Path) -> tuple[list[Window], list[InvalidWindow]]:
    seen: set[str] = set()
    unique, failures = [], []
    for window in windows:
        if window.name in seen:
            failures.append(InvalidWindow("duplicate name", path=path, window=repr(window.name), field="name"))
        else:
            seen.add(window.name)
            unique.append(window)
    return unique, failures


class WindowsFile:
    """`windows.toml` of one fleet root: load, and locked atomic read-modify-write."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / WINDOWS_FILE
        #: the calendar files the last `parse_each` here bound (part of the file's `identity`)
        self._watched: tuple[Path, ...] = ()
        #: the bytes last validated here and what they held (`hermes serve` reads every pass)
        self._last: tuple[bytes, Parsed] | None = None

    def identity(self) -> Identity | None:
        """What changes whenever the file (or a calendar file it binds) is replaced or edited in
        place; None when absent."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot stat {self.path}: {exc.strerror or exc}") from None
        identity = file_identity(st)
        for path in self._watched:
            try:
                identity += file_identity(os.stat(path))
            except OSError:
                identity += (-1,)
        return identity

    def read(self) -> bytes:
        """b"" when there is no file; `StoreError` when it cannot be read, is not a regular file or
        is too large."""
        return read_snapshot(self.path, MAX_WINDOWS_BYTES).raw

    def load(self) -> list[Window]:
        """Every window in the file, in file order; [] when there is no file. Raises
        `InvalidWindow` or `StoreError`."""
        return self.parse(self.read())

    def parse(self, raw: bytes) -> list[Window]:
        return self.parse_each(raw).whole().windows

    def parse_each(self, raw: bytes) -> Parsed:
        """The windows `raw` holds, each validated on its own, so one bad window never hides the
        others from the scheduler (issue 20 item 2), their calendars bound. Raises
        `InvalidWindow` only when the file as a whole does not read (not UTF-8, not TOML, not
        an array of tables)."""
        parsed = self.validate(raw)
        bound = bind(self.path.parent, self.path, parsed.windows, parsed.sources)
        self._watched = bound.files
        return replace(bound, failures=parsed.failures + bound.failures, sources=parsed.sources)

    def validate(self, raw: bytes) -> Parsed:
        """The windows and calendar sources of `raw`, unbound. The cyclic garbage collector is
        paused meanwhile: validating a large file allocates hundreds of thousands of objects that
        all survive, and each collection walks every one of them again (a fifth of the cold
        start-up at 10,000 windows); nothing here makes cycles."""
        last = self._last
        if last is None or last[0] != raw:
            paused = gc.isenabled()
            gc.disable()
            try:
                last = self._last = (raw, self._tables(raw))
            finally:
                if paused:
                    gc.enable()
        return last[1]

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
        windows, repeated = _unique(self._each(data, "windows", Window.parse, failures), self.path)
        failures += repeated
        return Parsed(windows, failures, self._each(data, "calendars", CalendarSource.parse, failures))

    def _each(self, data: dict[str, Any], key: str, parse: Callable[..., Any], failures: list[InvalidWindow]) -> list[Any]:
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

    def render(self, windows: list[Window]) -> bytes:
        """The file of `windows` (a calendar's window written back as its `[[calendars]]` table)."""
        parts = [_block(key, [w.to_toml() for w in windows if (w.feed is not None) == (key == "calendars")])
                 for key in ("windows", "calendars")]
        return (_HEADER + "\n".join(part for part in parts if part)).encode("utf-8")

    def save(self, windows: list[Window]) -> None:
        Parsed(*_unique(windows, self.path)).whole()  # a repeated name raises, as it fails a read
        with locked_update(self.path) as file:
            file.replace(self.render(windows))

    def add(self, window: Window, *, replace: bool = False) -> None:
        """Append `window` (or, with `replace`, put it in place of the one with its name), the
        rest of the file as it is written."""
        with locked_update(self.path, limit=MAX_WINDOWS_BYTES) as file:
            raw = file.current or b""
            parsed = self.validate(raw).whole()
            if window.name in {source.name for source in parsed.sources}:
                raise InvalidWindow("is the name of a calendar ([[calendars]])", path=self.path, window=repr(window.name))
            before = next((w for w in parsed.windows if w.name == window.name), None)
            if before is None:
                windows = [*parsed.windows, window]
                edit = partial(_appended, table=window.to_toml())
            elif not replace:
                raise InvalidWindow("already exists (remove it first, or use --replace)", path=self.path,
                                    window=repr(window.name))
            else:
                windows = [window if w is before else w for w in parsed.windows]
                edit = partial(_replaced, name=window.name, before=before.to_toml(), after=window.to_toml())
            file.replace(self._edited(raw, edit, windows))

    def remove(self, name: str) -> Window:
        """Remove the window called `name`, the rest of the file as it is written; `InvalidWindow`
        when there is none."""
        with locked_update(self.path, limit=MAX_WINDOWS_BYTES) as file:
            raw = file.current or b""
            windows = self.validate(raw).whole().windows
            gone = next((w for w in windows if w.name == name), None)
            if gone is None:
                raise InvalidWindow("no such window", path=self.path, window=repr(name))
            file.replace(self._edited(raw, partial(_removed, name=name), [w for w in windows if w is not gone]))
        return gone

    def _edited(self, raw: bytes, edit: Callable[[str], str], windows: list[Window]) -> bytes:
        """`raw` changed by `edit` (text to text), checked as every file is: it must validate and
        hold exactly `windows`. A file with no window yet is written whole."""
        text = raw.decode("utf-8-sig")
        if not text.strip():
            return self.render(windows)
        bom = "\ufeff" if raw.startswith(b"\xef\xbb\xbf") else ""
        new = (bom + edit(text)).encode("utf-8")
        if self.validate(new).whole().windows != windows:
            raise InvalidWindow("the edit did not leave the windows expected; edit the file by hand", path=self.path)
        return new


def against_policy(parsed: Parsed, policy: Policy, actor: Actor, path: Path) -> Parsed:
    """`parsed` with every window the policy refuses `actor` moved to its failures: `hermes
    serve` does not arm it, `windows validate` names it."""
    if policy.empty:
        return parsed
    kept, failures = [], list(parsed.failures)
    for window in parsed.windows:
        if refusals := refusals_of(policy, actor, window):
            failures.append(refused_window(window, refusals, path))
        else:
            kept.append(window)
    return replace(parsed, windows=kept, failures=failures)


# -- edits as written (pure text in, text out; tomlkit loaded only by `windows add/remove`) --

#: a `[[windows]]` header line (a trailing comment allowed)
_WINDOW_HEADER = re.compile(r"[ \t]*\[\[[ \t]*windows[ \t]*\]\][ \t]*(#.*)?\r?\n?$")
#: any table header but a window's own sub-table (`[windows.allow]`)
_ANY_HEADER = re.compile(r"[ \t]*\[(?!\[?[ \t]*windows[ \t]*\.)")


def _inline(value: Any) -> Any:
    """A nested table written inline (`allow = { user_ids = [...] }`): one window, one block."""
    import tomlkit

    if not isinstance(value, Mapping):
        return value
    table = tomlkit.inline_table()
    table.update({key: _inline(item) for key, item in value.items()})
    return table


def _block(key: str, tables: list[dict[str, Any]]) -> str:
    """`tables` as `[[key]]` tables ("" for none), what `render` and `add` write."""
    import tomlkit

    block, aot = tomlkit.document(), tomlkit.aot()
    for table in tables:
        entry = tomlkit.table()  # in the order given (a dict would put nested tables last)
        entry.update({name: _inline(value) for name, value in table.items()})
        aot.append(entry)
    if tables:
        block[key] = aot
    return tomlkit.dumps(block)


def _appended(text: str, table: dict[str, Any]) -> str:
    """`text` with the window `table` after the last one: a `[[windows]]` block at the end, or one
    more inline table of a `windows = [...]` array."""
    import tomlkit
    from tomlkit.items import Array

    document = tomlkit.parse(text)
    tables = document.get("windows")
    if isinstance(tables, Array):
        tables.append(_inline(table))
        return tomlkit.dumps(document)
    return text.rstrip("\r\n") + "\n\n" + _block("windows", [table])


def _replaced(text: str, name: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """`text` with the window `name` changed from `before` (written out in full) to `after` in
    place: only the keys whose value changed are touched, a changed one keeps its comment, a new
    one goes after the last key (not after the comments that introduce the next window)."""
    import tomlkit
    from tomlkit.items import InlineTable, Table

    document = tomlkit.parse(text)
    current = next(table for table in document["windows"] if table.get("name") == name)
    for key in [key for key in current if key in before and key not in after]:
        del current[key]
    for key, value in after.items():
        if before.get(key) == value:  # `written` leaves no None: an equal value was in `before`
            continue
        if key in current:
            current[key] = _inline(value) if isinstance(current[key], InlineTable) else value
            continue
        last = max((i for i, (k, item) in enumerate(current.value.body) if k is not None and not isinstance(item, Table)),
                   default=-1)  # a key after a `[windows.allow]` would be the sub-table's
        current.value._insert_at(last + 1, key, _inline(value))  # noqa: SLF001 - tomlkit has no public insert
    return tomlkit.dumps(document)


def _removed(text: str, name: str) -> str:
    """`text` without the window `name`: its block and the comment lines right above its header
    go; the comment lines right above the next header stay."""
    import tomlkit
    from tomlkit.items import AoT

    document = tomlkit.parse(text)
    tables: Any = document["windows"]
    names = [table.get("name") for table in tables]
    index = names.index(name)
    lines = text.splitlines(keepends=True)
    headers = [i for i, line in enumerate(lines) if _WINDOW_HEADER.match(line)]
    if isinstance(tables, AoT) and len(headers) == len(tables):
        header = start = headers[index]
        keep = next((i for i in range(header + 1, len(lines)) if _ANY_HEADER.match(lines[i])), len(lines))
        while start > 0 and lines[start - 1].lstrip().startswith("#"):
            start -= 1
        while keep > header + 1 and lines[keep - 1].lstrip().startswith("#"):
            keep -= 1
        while keep < len(lines) and not lines[keep].strip() and (start == 0 or not lines[start - 1].strip()):
            keep += 1  # one blank line between what was before and after, not two
        edited = "".join(lines[:start] + lines[keep:])
        del names[index]
        after = tomlkit.parse(edited)
        if [t.get("name") for t in after.get("windows") or ()] == names and after.get("calendars") == document.get("calendars"):
            return edited
    del tables[index]  # an inline array, or lines not what tomlkit read (a header inside a string): its cut
    return tomlkit.dumps(document)
