"""What the window scheduler remembers about occurrences across restarts: the sentinel cannot say
that an occurrence was released by the operator (never re-armed), or skipped.

The hold is written before the ledger; a crash in between, then `hermes resume`, would leave no
memory of the arm. So every arm is preceded by an intent in the audit trail (`INTENT`), which
`recall` pairs with the store's own audit of the write (issue 9 item 2).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.fleet.tables import LEDGER_FILE, RecordTable
from hermes_estop.model.timeutil import format_instant, parse_stamp

if TYPE_CHECKING:
    from hermes_estop.model.audit_event import AuditEvent
    from hermes_estop.windows.model import Occurrence

__all__ = ["ARMED", "CLOSED", "ENDED", "INTENT", "LEDGER_FILE", "RELEASED", "RETENTION", "SKIPPED", "WITHDRAWN",
           "LedgerEntry", "OccurrenceLedger", "entry_for", "intent_detail", "open_ledger",
           "recall", "skipped_keys"]

#: the scheduler armed (or adopted) `generation` for the occurrence; it retires it at the end
ARMED = "armed"
#: its hold went away (the operator released or replaced it) before its end: never re-armed
RELEASED = "released"
#: a hold the scheduler did not arm stood when the occurrence was due: never armed
SKIPPED = "skipped"
#: the occurrence is over and its hold retired (or no longer the scheduler's to retire)
ENDED = "ended"
#: its window was removed, disabled or moved while it held; NOT closed: re-armed if its window is
#: back before its end
WITHDRAWN = "withdrawn"
#: the states of an occurrence that will not be armed (again)
CLOSED = frozenset({RELEASED, SKIPPED, ENDED})
#: entries are kept this long after their occurrence ends (`hermes status` shows recent ones)
RETENTION = timedelta(days=7)


@dataclass(frozen=True)
class LedgerEntry:
    key: str
    window: str
    occurrence: str
    scope: str
    end: datetime
    state: str
    generation: str | None = None
    updated_at: datetime | None = None
    detail: str | None = None

    def moved(self, state: str, now: datetime, *, detail: str | None = None) -> LedgerEntry:
        return replace(self, state=state, updated_at=now, detail=detail)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self) | {"end": format_instant(self.end), "updated_at": format_instant(self.updated_at)}
        del data["key"]
        return data

    @classmethod
    def from_json(cls, key: str, data: Any) -> LedgerEntry:
        """Raises `ValueError` naming what is wrong."""
        if not isinstance(data, dict):
            raise ValueError(f"entry {key!r} is not an object")  # noqa: TRY004 (pydantic/json: ValueError is the contract)
        text: dict[str, Any] = {name: data.get(name) for name in ("window", "occurrence", "scope", "state")}
        for name, value in text.items():
            if not isinstance(value, str) or not value:
                raise ValueError(f"entry {key!r}: field {name!r} missing or not text")
        if text["state"] not in (ARMED, RELEASED, SKIPPED, ENDED, WITHDRAWN):
            raise ValueError(f"entry {key!r}: unknown state {text['state']!r}")
        end = parse_stamp(data.get("end"))
        if end is None:
            raise ValueError(f"entry {key!r}: field 'end' missing or not an ISO-8601 time")
        generation, detail = data.get("generation"), data.get("detail")
        return cls(key=key, **text, end=end, generation=generation if isinstance(generation, str) and generation else None,
                   updated_at=parse_stamp(data.get("updated_at")), detail=detail if isinstance(detail, str) else None)


class OccurrenceLedger:
    """Shared by every scheduler of one fleet (only the leader writes): `load` never sees half of
    a `commit`."""

    def __init__(self, records: RecordTable) -> None:
        self.records = records
        #: key -> (entry, the record it was parsed from) of the records last read
        self._parsed: dict[str, tuple[LedgerEntry, object]] = {}

    def load(self) -> dict[str, LedgerEntry]:
        """`StoreError` when it cannot be read or parsed: the scheduler then decides nothing (a
        forgotten release would be re-armed)."""
        records = self.records.load()
        try:
            entries = {key: self._entry(key, value) for key, value in records.items()}
        except ValueError as exc:
            raise self.records.unreadable(exc) from None
        if len(self._parsed) > len(entries):
            self._parsed = {key: self._parsed[key] for key in entries}
        return entries

    def _entry(self, key: str, value: Any) -> LedgerEntry:
        """Not parsed again while the record is the same: parsing 10,000 entries' instants on every
        pass was most of a pass (issue 24)."""
        known = self._parsed.get(key)
        if known is not None and known[1] == value:
            return known[0]
        entry = LedgerEntry.from_json(key, value)
        self._parsed[key] = (entry, value)
        return entry

    def commit(self, changes: Iterable[LedgerEntry], *, prune_before: datetime | None = None,
               remove: Iterable[str] = ()) -> None:
        """All or nothing (`StoreError`: unchanged); entries not named are left."""
        self.records.update({entry.key: entry.to_json() for entry in changes}, remove=remove,
                            prune_before=prune_before, check=self._entry)

    def close(self) -> None:
        self.records.close()


def open_ledger(fleet: Fleet) -> OccurrenceLedger:
    return OccurrenceLedger(fleet.ledger())


def skipped_keys(fleet: Fleet) -> frozenset[str]:
    return frozenset(key for key, entry in open_ledger(fleet).load().items() if entry.state == SKIPPED)


def entry_for(occurrence: Occurrence, state: str, now: datetime, generation: str | None = None,
              detail: str | None = None) -> LedgerEntry:
    return LedgerEntry(key=occurrence.key, window=occurrence.window, occurrence=occurrence.ident,
                       scope=occurrence.scope, end=occurrence.end, state=state, generation=generation,
                       updated_at=now, detail=detail)


#: the audit event a window scheduler appends right before it arms
INTENT = "window-arm"
_PREFIX = "arming "


def intent_detail(keys: Iterable[str]) -> str:
    """The intent's detail: the occurrence keys (`<scope>/<window>@<start>`, no spaces)."""
    return _PREFIX + " ".join(keys)


def recall(events: Iterable[AuditEvent], scope: str, keys: Collection[str]) -> dict[str, str]:
    """occurrence key -> generation: each intent in `events` (oldest first) paired with the first
    `engage` or `rearm` after it by the same actor with the same deadline; the latest arm wins."""
    out: dict[str, str] = {}
    waiting: dict[str, tuple[str | None, datetime | None]] = {}
    for event in events:
        if event.location != scope:
            continue
        if event.event == INTENT and (detail := event.detail or "").startswith(_PREFIX):
            for key in detail[len(_PREFIX):].split():
                if key in keys:
                    waiting[key] = (event.actor, event.deadline)
        elif event.event in ("engage", "rearm") and event.generation and waiting:
            for key, (actor, deadline) in list(waiting.items()):
                if actor == event.actor and deadline == event.deadline:
                    out[key] = event.generation
                    del waiting[key]
    return out
