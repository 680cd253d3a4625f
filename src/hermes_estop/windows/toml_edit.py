"""Edits of a hand-written `windows.toml` that keep what the operator wrote (issue 38): the
header, comments (`# DBA asked for 2h`), the order of the windows and inline tables stay as they
were; only the window added, replaced or removed changes.

Pure text in, text out: `WindowsFile` calls these under its lock and validates the result as
it validates any file before replacing it atomically. tomlkit (the maintained style-preserving
TOML library) finds the tables; removal cuts lines, so a comment written above the next window
stays with that window (tomlkit files it under the table before it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import tomlkit
from tomlkit.items import AoT, Array, InlineTable

__all__ = ["appended", "block", "removed", "replaced"]

#: a `[[windows]]` header line (a trailing comment allowed)
_HEADER = re.compile(r"[ \t]*\[\[[ \t]*windows[ \t]*\]\][ \t]*(#.*)?\r?\n?$")
#: any table header but a window's own sub-table (`[windows.allow]`)
_ANY_HEADER = re.compile(r"[ \t]*\[(?!\[?[ \t]*windows[ \t]*\.)")


def _tables(document: tomlkit.TOMLDocument) -> Any:
    return document.get("windows")


def _index(tables: Any, name: str) -> int:
    for i, table in enumerate(tables or ()):
        if isinstance(table, Mapping) and table.get("name") == name:
            return i
    raise LookupError(name)


def _inline(value: Any) -> Any:
    """A nested table written inline (`allow = { user_ids = [...] }`): one window, one block."""
    if not isinstance(value, Mapping):
        return value
    table = tomlkit.inline_table()
    table.update({key: _inline(item) for key, item in value.items()})
    return table


def block(table: Mapping[str, Any]) -> str:
    """The window `table` as a `[[windows]]` block, nested tables inline (the way a person
    writes `allow = { user_ids = [...] }`)."""
    document = tomlkit.document()
    tables = tomlkit.aot()
    entry = tomlkit.table()
    entry.update({key: _inline(value) for key, value in table.items()})
    tables.append(entry)
    document["windows"] = tables
    return tomlkit.dumps(document)


def appended(text: str, table: Mapping[str, Any]) -> str:
    """`text` with the window `table` after the last one: a `[[windows]]` block at the end of
    the file, or one more inline table of a `windows = [...]` array."""
    document = tomlkit.parse(text)
    tables = _tables(document)
    if isinstance(tables, Array):
        tables.append(_inline(table))
        return tomlkit.dumps(document)
    return text.rstrip("\r\n") + "\n\n" + block(table)


def replaced(text: str, name: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """`text` with the window `name` changed from the table `before` (what it was, written out
    in full) to `after`, in place: only the keys whose value changed are touched, a changed one
    keeps its comment, a new one goes after the last key (not after the comments that
    introduce the next window), one `after` lacks is removed."""
    document = tomlkit.parse(text)
    current = _tables(document)[_index(_tables(document), name)]
    for key in [key for key in current if key in before and key not in after]:
        del current[key]
    for key, value in after.items():
        if before.get(key) == value and (key in current or key in before):
            continue
        if key in current:
            current[key] = _inline(value) if isinstance(current[key], InlineTable) else value
        else:
            _add(current, key, _inline(value))
    return tomlkit.dumps(document)


def _add(table: Any, key: str, value: Any) -> None:
    """`key = value` right after the last key of `table`."""
    body = table.value.body
    last = max((i for i, (name, _) in enumerate(body) if name is not None), default=-1)
    try:
        table.value._insert_at(last + 1, key, value)  # noqa: SLF001 - tomlkit has no public insert; fallback below
    except (AttributeError, IndexError, TypeError):  # a tomlkit without it: at the end
        table[key] = value


def removed(text: str, name: str) -> str:
    """`text` without the window `name`: its `[[windows]]` block and the comment lines right above
    its header go; the comment lines right above the next header stay."""
    document = tomlkit.parse(text)
    tables = _tables(document)
    index = _index(tables, name)
    lines = text.splitlines(keepends=True)
    headers = [i for i, line in enumerate(lines) if _HEADER.match(line)]
    if not isinstance(tables, AoT) or len(headers) != len(tables):
        del tables[index]  # an inline array, or a header inside a multi-line string: tomlkit's cut
        return tomlkit.dumps(document)
    header = headers[index]
    end = next((i for i in range(header + 1, len(lines)) if _ANY_HEADER.match(lines[i])), len(lines))
    start, keep = header, end
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    while keep > header + 1 and lines[keep - 1].lstrip().startswith("#"):
        keep -= 1
    while keep < len(lines) and not lines[keep].strip() and (start == 0 or not lines[start - 1].strip()):
        keep += 1  # one blank line between what was before and after, not two
    edited = "".join(lines[:start] + lines[keep:])
    names = [t.get("name") for t in tables]
    del names[index]
    after = tomlkit.parse(edited)
    if [t.get("name") for t in _tables(after) or ()] != names or after.get("calendars") != document.get("calendars"):
        del tables[index]  # the lines were not what tomlkit read (a header inside a string): its cut
        return tomlkit.dumps(document)
    return edited
