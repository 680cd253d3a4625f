"""Small keyed records that a service of the fleet keeps where the fleet's holds are kept (today:
the window scheduler's ledger of occurrences): the contract (`RecordTable`) and the file
implementation (`JsonRecordFile`); the PostgreSQL one is `pg_records.PgRecordTable`.

Why this lives in the core: the ledger must be shared by every scheduler of a fleet, so it lives
in the fleet's store (a file in the fleet root for the file store, a table of the store's schema
for PostgreSQL), and the core may not import the services above it. So a store hands out the
STORAGE (`HoldStore.open_ledger()`) and the service keeps its typed layer over it
(`windows.ledger.OccurrenceLedger`).

A record is a flat JSON object (text, null, instants as ISO-8601 text), keyed by text. One of
its fields (`expiry`) is an instant by which old records are pruned.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from hermes_estop.model.errors import StoreError
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import parse_stamp
from hermes_estop.system.fsutil import locked_update, read_optional

__all__ = [
    "LEDGER",
    "LEDGER_FILE",
    "Check",
    "JsonRecordFile",
    "JsonRecord",
    "RecordTable",
    "file_ledger",
]

JsonRecord = dict[str, Any]
#: validates one stored record (key, record); raises `ValueError` naming what is wrong
Check = Callable[[str, Any], object]

#: the window scheduler's ledger: what its records are (for messages), and its file
LEDGER = "the window ledger"
LEDGER_FILE = "windows-state.json"
_FORMAT = 1


class RecordTable(ABC):
    """Keyed records, shared by every process that opens the same table (only a leader writes).
    `load` and `update` are atomic with respect to each other across processes and hosts:
    `load` never sees half of an `update`."""

    #: short backend name for logs and `hermes serve --dry-run`
    name: str = "abstract"

    def __init__(self, what: str, expiry: str) -> None:
        #: what the records are, for messages ("the window ledger")
        self.what = what
        #: the field holding the instant by which a record is pruned (`update(prune_before=)`)
        self.expiry = expiry

    @abstractmethod
    def load(self) -> dict[str, JsonRecord]:
        """Every record, by key; an absent table is empty. Raises `StoreError` naming the table
        when it exists but cannot be read (the caller then takes no decision)."""

    @abstractmethod
    def update(self, upserts: Mapping[str, JsonRecord], *, remove: Iterable[str] = (),
               prune_before: datetime | None = None, check: Check | None = None) -> None:
        """Delete the records keyed `remove`, upsert `upserts` (by key), then delete those whose
        `expiry` instant is before `prune_before`, all or nothing; records not named are left
        as they are (another writer's survive). `check` validates the stored records first
        where the medium can hold records this program did not write (a hand-edited file);
        typed columns need no check.

        Raises `StoreError` on failure (one made by `unreadable` when `check` refuses a record);
        the table is then unchanged."""

    def version(self) -> Hashable | None:
        """A token that changes whenever the records may have changed, so a reader can skip
        parsing them again; None when the table cannot tell cheaply (load every time). Raises
        `StoreError` when it cannot be determined."""
        return None

    def describe(self) -> str:
        return self.name

    def unreadable(self, problem: object) -> StoreError:
        """The error for records this program cannot read."""
        return StoreError(f"{self.what} {self.describe()} is unreadable: {problem} (fix or remove it)")

    def close(self) -> None:
        """Release connections; the table is unusable afterwards."""


class JsonRecordFile(RecordTable):
    """Records as one JSON file, `{"format": 1, "<collection>": {"<key>": {record}, ...}}` (keys
    sorted, written compactly), replaced atomically under an exclusive lock on `.<name>.lock`
    beside it (`fsutil.locked_update`); readers take no lock."""

    name = "file"

    def __init__(self, path: Path, *, what: str, collection: str, expiry: str) -> None:
        super().__init__(what, expiry)
        self.path = Path(path)
        self.collection = collection

    def describe(self) -> str:
        return str(self.path)

    def version(self) -> Hashable | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return ("absent",)
        except OSError as exc:
            raise StoreError(f"cannot stat {self.what} {self.path}: {one_line(exc.strerror or exc)}") from None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def load(self) -> dict[str, JsonRecord]:
        return self._parse(read_optional(self.path, what=self.what))

    def _parse(self, raw: bytes | None) -> dict[str, JsonRecord]:
        if raw is None:
            return {}
        try:
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get(self.collection), dict):
                raise ValueError(f"expected {{\"format\": 1, \"{self.collection}\": {{...}}}}")  # noqa: TRY004
            if data.get("format") != _FORMAT:
                raise ValueError(f"unknown format {data.get('format')!r}")
            records: dict[str, JsonRecord] = data[self.collection]
            return records
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise self.unreadable(exc) from None

    def _render(self, records: Mapping[str, JsonRecord]) -> bytes:
        """The file written compactly, by `json`'s C encoder (an `indent` makes `json` use its
        pure-Python encoder, and the window ledger of a week of 10,000 windows is rewritten on
        every busy pass)."""
        body = {"format": _FORMAT, self.collection: {key: records[key] for key in sorted(records)}}
        return (json.dumps(body, separators=(",", ":")) + "\n").encode("utf-8")

    def update(self, upserts: Mapping[str, JsonRecord], *, remove: Iterable[str] = (),
               prune_before: datetime | None = None, check: Check | None = None) -> None:
        remove = list(remove)
        if not upserts and not remove and prune_before is None:
            return
        with locked_update(self.path, what=self.what) as file:
            records = self._parse(file.current)
            if check is not None:
                try:
                    for key, record in records.items():
                        check(key, record)
                except ValueError as exc:
                    raise self.unreadable(exc) from None
            for key in remove:
                records.pop(key, None)
            records.update(upserts)
            if prune_before is not None:
                records = {key: record for key, record in records.items() if not self._expired(record, prune_before)}
            file.replace(self._render(records))

    def _expired(self, record: JsonRecord, before: datetime) -> bool:
        """Ended before `before`; a record with no readable expiry is kept (never pruned blind)."""
        expiry = parse_stamp(record.get(self.expiry)) if isinstance(record, dict) else None
        return expiry is not None and expiry < before


def file_ledger(root: Path, filename: str = LEDGER_FILE) -> JsonRecordFile:
    """The window scheduler's ledger of the fleet rooted at `root`, as a file there."""
    return JsonRecordFile(Path(root) / filename, what=LEDGER, collection="occurrences", expiry="end")
