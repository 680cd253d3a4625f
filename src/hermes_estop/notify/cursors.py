"""Per-target delivery state: the cursor into the audit trail and what an operator should see
(last error, failures, when the next attempt is due, the stale reminders already sent).

File store: `<root>/notify-state.json`, one entry per target, rewritten with
`fsutil.locked_update` under the lock `.notify-state.lock` (read-modify-write
of the writer's own entry, so targets delivering from several threads never lose each
other's progress). PostgreSQL: the `notify_cursors` table of the store's schema, created on
first use, written only by the elected notifier.

The cursor is advanced only after a delivery succeeded, and is written before the next event
is sent: a crash (even SIGKILL) re-delivers at most the one event that was in flight.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..fsutil import locked_update, read_optional

if TYPE_CHECKING:
    from ..stores.base import HoldStore

__all__ = ["STATE_FILE", "CursorStore", "FileCursorStore", "PostgresCursorStore", "TargetState", "cursor_store_for"]

STATE_FILE = "notify-state.json"
_LOCK_FILE = ".notify-state.lock"
_MAX_STATE_BYTES = 4 * 1024 * 1024


@dataclass
class TargetState:
    """One target's progress. `position` None: never started (where it starts is `start`)."""

    source: str | None = None
    position: int | None = None
    delivered: int = 0
    last_id: str | None = None
    last_success: str | None = None
    last_attempt: str | None = None
    last_error: str | None = None
    failures: int = 0
    next_attempt: str | None = None
    #: stale reminders sent: hold key ("<scope> <generation>") -> reminder number
    stale: dict[str, int] = field(default_factory=dict)
    #: when a hold with no `engaged_at` (a hand-made sentinel) was first seen standing
    stale_seen: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> TargetState:
        if not isinstance(data, dict):
            return cls()
        state = cls()
        for key in ("source", "last_id", "last_success", "last_attempt", "last_error", "next_attempt"):
            value = data.get(key)
            setattr(state, key, value if isinstance(value, str) else None)
        position = data.get("position")
        state.position = position if isinstance(position, int) and not isinstance(position, bool) and position >= 0 \
            else None
        for key in ("delivered", "failures"):
            value = data.get(key)
            setattr(state, key, value if isinstance(value, int) and not isinstance(value, bool) else 0)
        stale = data.get("stale")
        state.stale = {k: v for k, v in stale.items() if isinstance(v, int)} if isinstance(stale, dict) else {}
        seen = data.get("stale_seen")
        state.stale_seen = {k: v for k, v in seen.items() if isinstance(v, str)} if isinstance(seen, dict) else {}
        return state

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class CursorStore(Protocol):
    def load(self) -> dict[str, TargetState]:
        """Every target's state. Raises `OSError`/`StoreError` when it cannot be read."""

    def save(self, name: str, state: TargetState) -> None:
        """Persist `name`'s state durably. Raises `StoreError` when it cannot be written."""


class FileCursorStore:
    """`notify-state.json` in the fleet root."""

    name = "file"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / STATE_FILE
        self.lock = root / _LOCK_FILE

    def _read(self) -> dict[str, Any]:
        return self._parse(read_optional(self.path, _MAX_STATE_BYTES))

    @staticmethod
    def _parse(raw: bytes | None) -> dict[str, Any]:
        if raw is None:
            return {}
        try:
            data = json.loads(raw)
        except ValueError:
            return {}  # a corrupt state re-delivers from where each target starts: at least once
        targets = data.get("targets") if isinstance(data, dict) else None
        return targets if isinstance(targets, dict) else {}

    def load(self) -> dict[str, TargetState]:
        return {name: TargetState.from_json(value) for name, value in self._read().items()}

    def save(self, name: str, state: TargetState) -> None:
        with locked_update(self.path, limit=_MAX_STATE_BYTES, lock_path=self.lock) as file:
            targets = self._parse(file.current)
            targets[name] = state.to_json()
            body = json.dumps({"version": 1, "targets": targets}, indent=1, sort_keys=True) + "\n"
            file.replace(body.encode("utf-8"))


class PostgresCursorStore:
    """The `notify_cursors` table of the store's schema (created if missing)."""

    name = "postgresql"

    def __init__(self, store: Any) -> None:
        self.store = store
        self._ready = False

    def _ensure(self) -> None:
        if self._ready:
            return
        from ..stores.pg_schema import LOCK_CLASS

        backend = self.store.backend
        schema = self.store.schema

        def create(conn: Any) -> None:
            found = conn.execute("SELECT to_regclass(%s)", [f"{backend.s}.notify_cursors"]).fetchone()
            if found is not None and found[0] is not None:
                return  # no DDL once it exists: a role without CREATE can use it
            with conn.transaction():  # one creator at a time (concurrent CREATE ... IF NOT EXISTS races)
                conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [LOCK_CLASS, f"{schema}/#schema"])
                conn.execute(f"CREATE TABLE IF NOT EXISTS {backend.s}.notify_cursors (target text PRIMARY KEY, "
                             "state jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT clock_timestamp())")

        backend.run(create, what="create the notify cursor table")
        self._ready = True

    def load(self) -> dict[str, TargetState]:
        self._ensure()
        backend = self.store.backend
        rows = backend.run(lambda conn: conn.execute(f"SELECT target, state FROM {backend.s}.notify_cursors").fetchall(),
                           what="read the notify cursors")
        return {name: TargetState.from_json(state) for name, state in rows}

    def save(self, name: str, state: TargetState) -> None:
        self._ensure()
        backend = self.store.backend
        payload = json.dumps(state.to_json())
        backend.run(lambda conn: conn.execute(
            f"INSERT INTO {backend.s}.notify_cursors (target, state) VALUES (%s, %s::jsonb) "
            "ON CONFLICT (target) DO UPDATE SET state = EXCLUDED.state, updated_at = clock_timestamp()",
            [name, payload]), what="save a notify cursor")


def cursor_store_for(store: HoldStore, root: Path) -> CursorStore:
    if store.database() is not None:  # a store with a database: the cursors are a table of it
        return PostgresCursorStore(store)
    return FileCursorStore(root)
