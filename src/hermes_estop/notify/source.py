"""Where notifications come from: the audit trail, read from a cursor onwards, in order.

A position is an integer that only grows along the trail: on the file store the byte offset
just past an event's line in `estop-audit.jsonl`; on PostgreSQL the `audit` row id. Each event
gets an id a receiver can de-duplicate on, stable across retries and restarts: the file
store's is the line's offset plus a hash of the line (so a replaced trail never reuses an
id), PostgreSQL's the row id plus the schema.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..audit import AUDIT_FILE, AuditEvent
from ..fsutil import open_regular

if TYPE_CHECKING:
    from ..stores.base import HoldStore

__all__ = ["AuditSource", "FileAuditSource", "Item", "PostgresAuditSource", "event_body", "source_for"]

#: at most this many bytes of the file trail are read per call
_CHUNK = 256 * 1024


@dataclass(frozen=True)
class Item:
    """One entry of the trail: `event` None for a corrupt line (skipped, never delivered);
    `end` the cursor value once this entry has been dealt with."""

    end: int
    id: str
    event: AuditEvent | None


class AuditSource(Protocol):
    name: str

    def read_after(self, position: int, limit: int) -> list[Item]:
        """At most `limit` entries after `position`, oldest first. Raises `OSError`/`StoreError`
        when the trail cannot be read."""

    def head(self) -> int:
        """The position just past the newest entry (where a target told to `start = "end"` begins)."""


class FileAuditSource:
    """`estop-audit.jsonl` of a fleet root, read with `open_regular` (never a FIFO)."""

    name = "file"

    def __init__(self, root: Path) -> None:
        self.path = root / AUDIT_FILE

    def _size(self) -> int:
        try:
            fd = open_regular(self.path)
        except FileNotFoundError:
            return 0
        try:
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def head(self) -> int:
        return self._size()

    def read_after(self, position: int, limit: int) -> list[Item]:
        try:
            fd = open_regular(self.path)
        except FileNotFoundError:
            return []
        items: list[Item] = []
        try:
            size = os.fstat(fd).st_size
            if position > size:  # the trail was truncated or replaced: start it over
                position = 0
            while len(items) < limit and position < size:
                os.lseek(fd, position, os.SEEK_SET)
                data = os.read(fd, _CHUNK)
                if not data:
                    break
                offset = 0
                while len(items) < limit:
                    newline = data.find(b"\n", offset)
                    if newline < 0:
                        break
                    raw = data[offset:newline]
                    start = position + offset
                    offset = newline + 1
                    if not raw.strip():
                        continue
                    digest = hashlib.sha256(raw).hexdigest()[:12]
                    items.append(Item(position + offset, f"audit-{start}-{digest}", _parse(raw)))
                if offset == 0:
                    if len(data) == _CHUNK:  # one line longer than a chunk: corrupt, step over it
                        items.append(Item(position + len(data), f"audit-{position}-long", None))
                        position += len(data)
                        continue
                    break  # a line still being written: wait for its newline
                position += offset
        finally:
            os.close(fd)
        return items


def _parse(raw: bytes) -> AuditEvent | None:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return AuditEvent.from_json(data) if isinstance(data, dict) else None


class PostgresAuditSource:
    """The `audit` table of the store's schema, by row id."""

    name = "postgresql"

    def __init__(self, store: Any) -> None:
        self.store = store

    def head(self) -> int:
        backend = self.store.backend
        row = backend.run(lambda conn: conn.execute(f"SELECT coalesce(max(id), 0) FROM {backend.s}.audit").fetchone(),
                          what="read the audit trail")
        return int(row[0]) if row else 0

    def read_after(self, position: int, limit: int) -> list[Item]:
        from ..timeutil import to_utc

        backend = self.store.backend
        sql = (f"SELECT id, time, event, location, generation, actor, reason, deadline, detail FROM {backend.s}.audit "
               "WHERE id > %s ORDER BY id LIMIT %s")
        rows = backend.run(lambda conn: conn.execute(sql, [position, limit]).fetchall(), what="read the audit trail")
        schema = self.store.schema
        return [Item(int(row_id), f"audit-{schema}-{row_id}",
                     AuditEvent(to_utc(time), event, location, generation, actor, reason,
                                to_utc(deadline) if deadline else None, detail))
                for row_id, time, event, location, generation, actor, reason, deadline, detail in rows]


def source_for(store: HoldStore, root: Path) -> AuditSource:
    """The trail of `store` (the PostgreSQL table, or the fleet root's JSONL file)."""
    if store.database() is not None:  # a store with a database: its audit table
        return PostgresAuditSource(store)
    return FileAuditSource(root)


def event_body(event_id: str, event: AuditEvent, fleet: Path, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON object a target receives for one audit event."""
    body: dict[str, Any] = {"id": event_id, "event": event.event, "scope": event.location, "fleet": str(fleet)}
    data = event.to_json()
    data.pop("location", None)
    data.pop("event", None)
    body.update(data)
    if extra:
        body.update(extra)
    return body
