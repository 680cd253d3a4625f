"""What the window scheduler remembers about occurrences, across its restarts.

The sentinel says what holds now; it cannot say that an occurrence was already armed and then
released by the operator (it must not be re-armed), or that it was skipped because a manual hold
stood. The ledger keeps one `LedgerEntry` per occurrence the scheduler acted on, keyed by
`Occurrence.key` (`<scope>/<window>@<start>`).

One abstract base (`OccurrenceLedger`) whose docstrings are the contract, and one implementation
per backend: `JsonFileLedger` here (a JSON file in the fleet root, replaced atomically under a
lock); a PostgreSQL ledger implements the same two methods.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..fsutil import atomic_write, exclusive_lock, read_regular, sweep_temporaries
from ..timeutil import format_instant, parse_stamp

__all__ = [
    "ARMED",
    "ENDED",
    "LEDGER_FILE",
    "RELEASED",
    "RETENTION",
    "SKIPPED",
    "STATES",
    "WITHDRAWN",
    "JsonFileLedger",
    "LedgerEntry",
    "OccurrenceLedger",
    "open_ledger",
]

#: the scheduler armed (or adopted) `generation` for the occurrence; it retires it at the end
ARMED = "armed"
#: the occurrence's hold went away (the operator released or replaced it) before its end:
#: never re-armed
RELEASED = "released"
#: a hold the scheduler did not arm stood when the occurrence was due: never armed
SKIPPED = "skipped"
#: the occurrence is over and its hold retired (or no longer the scheduler's to retire)
ENDED = "ended"
#: its window was removed, disabled or moved (confirmed) while the occurrence held, and the hold
#: retired; NOT closed: the occurrence is re-armed if its window is back before its end
WITHDRAWN = "withdrawn"
STATES = (ARMED, RELEASED, SKIPPED, ENDED, WITHDRAWN)
#: entries are kept this long after their occurrence ends (`hermes status` shows recent ones)
RETENTION = timedelta(days=7)
LEDGER_FILE = "windows-state.json"
_FORMAT = 1


@dataclass(frozen=True)
class LedgerEntry:
    """The scheduler's memory of one occurrence."""

    key: str
    window: str
    occurrence: str
    scope: str
    end: datetime
    state: str
    generation: str | None = None
    updated_at: datetime | None = None
    detail: str | None = None

    def moved(self, state: str, now: datetime, *, generation: str | None = None,
              detail: str | None = None) -> LedgerEntry:
        return replace(self, state=state, generation=generation if generation is not None else self.generation,
                       updated_at=now, detail=detail)

    def to_json(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "occurrence": self.occurrence,
            "scope": self.scope,
            "end": format_instant(self.end),
            "state": self.state,
            "generation": self.generation,
            "updated_at": format_instant(self.updated_at),
            "detail": self.detail,
        }

    @classmethod
    def from_json(cls, key: str, data: Any) -> LedgerEntry:
        """Raises `ValueError` naming what is wrong."""
        if not isinstance(data, dict):
            raise ValueError(f"entry {key!r} is not an object")  # noqa: TRY004 (pydantic/json: ValueError is the contract)
        text: dict[str, str] = {}
        for name in ("window", "occurrence", "scope", "state"):
            value = data.get(name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"entry {key!r}: field {name!r} missing or not text")
            text[name] = value
        if text["state"] not in STATES:
            raise ValueError(f"entry {key!r}: unknown state {text['state']!r}")
        end = parse_stamp(data.get("end"))
        if end is None:
            raise ValueError(f"entry {key!r}: field 'end' missing or not an ISO-8601 time")
        generation = data.get("generation")
        detail = data.get("detail")
        return cls(
            key=key,
            window=text["window"],
            occurrence=text["occurrence"],
            scope=text["scope"],
            end=end,
            state=text["state"],
            generation=generation if isinstance(generation, str) and generation else None,
            updated_at=parse_stamp(data.get("updated_at")),
            detail=detail if isinstance(detail, str) else None,
        )


class OccurrenceLedger(ABC):
    """Where the scheduler's memory of occurrences lives.

    Shared by every scheduler of one fleet (only the leader writes). Both methods are atomic with
    respect to each other across processes and hosts sharing the ledger: `load` never sees half
    of a `commit`."""

    #: short backend name for logs and `hermes serve --dry-run`
    name: str = "abstract"

    @abstractmethod
    def load(self) -> dict[str, LedgerEntry]:
        """Every entry, keyed by `LedgerEntry.key`. An absent ledger is empty.

        Raises `StoreError` naming the ledger when it exists but cannot be read or parsed: the
        scheduler then takes no decision (a forgotten release would be re-armed)."""

    @abstractmethod
    def commit(self, changes: Iterable[LedgerEntry], *, prune_before: datetime | None = None,
               remove: Iterable[str] = ()) -> None:
        """Upsert `changes` (by key), delete the entries keyed `remove` (an operator's unskip) and
        those whose `end` is before `prune_before`, all or nothing. Entries not named are left as
        they are (another writer's survive).

        Raises `StoreError` on failure; the ledger is then unchanged."""

    def describe(self) -> str:
        return self.name

    def close(self) -> None:
        """Release connections; the ledger is unusable afterwards."""


class JsonFileLedger(OccurrenceLedger):
    """The ledger as `windows-state.json` in the fleet root:

        {"format": 1, "occurrences": {"<window>@<start>": {"window", "occurrence", "scope",
         "end", "state", "generation", "updated_at", "detail"}}}

    Replaced atomically (`fsutil.atomic_write`) under an exclusive lock on
    `.windows-state.json.lock`; readers take no lock."""

    name = "file"

    def __init__(self, root: Path, filename: str = LEDGER_FILE) -> None:
        self.path = Path(root) / filename
        self.lock_path = self.path.with_name(f".{self.path.name}.lock")

    def describe(self) -> str:
        return str(self.path)

    def load(self) -> dict[str, LedgerEntry]:
        try:
            raw = read_regular(self.path)  # a FIFO or directory there: refused, never waited on
        except FileNotFoundError:
            return {}
        except StoreError as exc:
            raise StoreError(f"cannot read the window ledger: {exc}") from None
        except OSError as exc:
            raise StoreError(f"cannot read the window ledger {self.path}: {exc.strerror or exc}") from None
        try:
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("occurrences"), dict):
                raise ValueError("expected {\"format\": 1, \"occurrences\": {...}}")  # noqa: TRY004
            if data.get("format") != _FORMAT:
                raise ValueError(f"unknown format {data.get('format')!r}")
            return {key: LedgerEntry.from_json(key, value) for key, value in data["occurrences"].items()}
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise StoreError(f"the window ledger {self.path} is unreadable: {exc} (fix or remove it)") from None

    def commit(self, changes: Iterable[LedgerEntry], *, prune_before: datetime | None = None,
               remove: Iterable[str] = ()) -> None:
        changes = list(changes)
        remove = list(remove)
        if not changes and not remove and prune_before is None:
            return
        with exclusive_lock(self.lock_path):
            entries = self.load()
            for key in remove:
                entries.pop(key, None)
            for entry in changes:
                entries[entry.key] = entry
            if prune_before is not None:
                entries = {key: entry for key, entry in entries.items() if entry.end >= prune_before}
            self._write(entries)

    def _write(self, entries: Mapping[str, LedgerEntry]) -> None:
        body = {"format": _FORMAT,
                "occurrences": {key: entries[key].to_json() for key in sorted(entries)}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        sweep_temporaries(self.path)  # under the writers' lock: no write is in flight
        atomic_write(self.path, (json.dumps(body, indent=2) + "\n").encode("utf-8"))


def open_ledger(root: Path, store: Any = None) -> OccurrenceLedger:
    """The ledger of the fleet rooted at `root`: in the database when the fleet's holds are
    (`store` is a PostgreSQL store, shared by every host's scheduler), else a file in `root`."""
    if store is not None and store.name == "postgresql":
        from .pg_ledger import PostgresLedger

        return PostgresLedger(store)
    return JsonFileLedger(root)
