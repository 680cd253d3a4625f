"""kanban: one board for the whole fleet (`<root>/kanban.db`, SQLite in WAL mode, shared by every
profile) and a dispatcher that spawns a worker for each ready card the gate lets through
(DESIGN 7).

A card is gated by its owner and its assignee profile: a card with a profile asks that profile's
view of the fleet (so a hold in that profile's home applies as well as the fleet root's), a card
without one asks the fleet root's. A held card is never touched: it stays `ready`. Cards whose
owner and profile the gate admits are spawned through the hold (the maintenance lane).

Claiming is one conditional UPDATE (`... WHERE id = ? AND status = 'ready'`): of two dispatcher
processes racing for a card exactly one sees its row change, so a card is never spawned twice.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument, StoreError
from ..estop import Estop
from ..timeutil import Clock, format_instant, in_interval, parse_stamp, utc_now
from .common import PassGate, WorkerPool, WorkResult, parse_timeout, validate_owner, validate_profile, worker_env

__all__ = [
    "BOARD_NAME",
    "STATUSES",
    "UnknownCard",
    "Card",
    "Board",
    "Dispatcher",
    "DispatchReport",
    "HeldCard",
    "CardRun",
]

BOARD_NAME = "kanban.db"
STATUSES = ("todo", "ready", "running", "done", "failed")
_LOST_GRACE = timedelta(minutes=1)
_MAX_TITLE = 500

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS cards (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    title       TEXT NOT NULL,
    command     TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ({", ".join(repr(s) for s in STATUSES)})),
    owner       TEXT,
    profile     TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    started_at  TEXT,
    finished_at TEXT,
    exit_code   INTEGER,
    detail      TEXT,
    claim       TEXT,
    deadline    TEXT
);
CREATE INDEX IF NOT EXISTS cards_status ON cards (status, id);
"""
_COLUMNS = ("id, title, command, status, owner, profile, created_at, updated_at, started_at, finished_at, "
            "exit_code, detail")


class UnknownCard(InvalidArgument):
    """A card id the board does not have."""


@dataclass(frozen=True)
class Card:
    id: int
    title: str
    command: str
    status: str
    owner: str | None
    profile: str | None
    created_at: datetime | None
    updated_at: datetime | None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    detail: str | None = None

    @classmethod
    def from_row(cls, row: tuple) -> "Card":
        (id_, title, command, status, owner, profile, created, updated, started, finished, code, detail) = row
        return cls(id_, title, command, status, owner, profile, parse_stamp(created), parse_stamp(updated),
                   parse_stamp(started), parse_stamp(finished), code, detail)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "command": self.command,
            "status": self.status,
            "owner": self.owner,
            "profile": self.profile,
            "created_at": format_instant(self.created_at),
            "updated_at": format_instant(self.updated_at),
            "started_at": format_instant(self.started_at),
            "finished_at": format_instant(self.finished_at),
            "exit_code": self.exit_code,
            "detail": self.detail,
        }


def _check_id(card_id: Any) -> int:
    if isinstance(card_id, bool) or not isinstance(card_id, int) or card_id <= 0:
        raise InvalidArgument(f"invalid card id {card_id!r}: expected a positive whole number")
    return card_id


class Board:
    """The fleet's board. Every method opens its own short connection, so a `Board` may be
    shared by threads and used by several processes at once."""

    def __init__(self, root: str | Path, *, clock: Clock = utc_now, busy_timeout: float = 30.0) -> None:
        self.root = Path(root)
        self.path = self.root / BOARD_NAME
        self.log_dir = self.root / "kanban-logs"
        self.clock = clock
        self.busy_timeout = busy_timeout

    def exists(self) -> bool:
        return self.path.is_file()

    def _connect(self) -> sqlite3.Connection:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the kanban board {self.path}: {exc}") from None
        return db

    def _run(self, sql: str, params: tuple = ()) -> tuple[list[tuple], int]:
        """One statement in its own (autocommit) transaction: rows, rowcount."""
        with closing(self._connect()) as db:
            try:
                cursor = db.execute(sql, params)
                rows = cursor.fetchall()
                return rows, cursor.rowcount
            except sqlite3.Error as exc:
                raise StoreError(f"kanban board {self.path}: {exc}") from None

    def add(self, title: str, command: str, *, owner: Any = None, profile: Any = None, ready: bool = False,
            now: datetime | None = None) -> Card:
        """A new card, `todo` (or `ready` with `ready=True`). Everything is validated first."""
        if not isinstance(title, str) or not title.strip() or len(title) > _MAX_TITLE:
            raise InvalidArgument(f"invalid title {title!r}: expected 1 to {_MAX_TITLE} characters")
        if not isinstance(command, str) or not command.strip():
            raise InvalidArgument(f"invalid command {command!r}: expected a shell command")
        owner, profile = validate_owner(owner), validate_profile(profile)
        stamp = format_instant(self.clock() if now is None else now)
        rows, _ = self._run(
            f"INSERT INTO cards (title, command, status, owner, profile, created_at, updated_at) "
            f"VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING {_COLUMNS}",
            (" ".join(title.split()), command, "ready" if ready else "todo", owner, profile, stamp, stamp),
        )
        return Card.from_row(rows[0])

    def get(self, card_id: int) -> Card:
        rows, _ = self._run(f"SELECT {_COLUMNS} FROM cards WHERE id = ?", (_check_id(card_id),))
        if not rows:
            raise UnknownCard(f"unknown card {card_id!r}: no such card on {self.path}")
        return Card.from_row(rows[0])

    def cards(self, status: str | None = None) -> list[Card]:
        if status is None:
            rows, _ = self._run(f"SELECT {_COLUMNS} FROM cards ORDER BY id")
        else:
            if status not in STATUSES:
                raise InvalidArgument(f"invalid status {status!r}: expected one of {', '.join(STATUSES)}")
            rows, _ = self._run(f"SELECT {_COLUMNS} FROM cards WHERE status = ? ORDER BY id", (status,))
        return [Card.from_row(row) for row in rows]

    def mark_ready(self, card_id: int, now: datetime | None = None) -> Card:
        """Move a `todo`, `done` or `failed` card (back) to `ready`; a running card is refused."""
        card = self.get(card_id)
        if card.status == "running":
            raise InvalidArgument(f"card {card_id} is running: it cannot be made ready until it ends")
        stamp = format_instant(self.clock() if now is None else now)
        self._run("UPDATE cards SET status = 'ready', updated_at = ?, claim = NULL, deadline = NULL "
                  "WHERE id = ? AND status != 'running'", (stamp, card_id))
        return self.get(card_id)

    def claim(self, card_id: int, token: str, now: datetime, deadline: datetime) -> bool:
        """Atomically move a `ready` card to `running` for `token`; False when another
        dispatcher got there first (or the card is no longer ready)."""
        stamp = format_instant(now)
        _, count = self._run(
            "UPDATE cards SET status = 'running', claim = ?, started_at = ?, updated_at = ?, deadline = ?, "
            "finished_at = NULL, exit_code = NULL, detail = NULL WHERE id = ? AND status = 'ready'",
            (token, stamp, stamp, format_instant(deadline), card_id),
        )
        return count == 1

    def finish(self, card_id: int, token: str, result: WorkResult) -> bool:
        """Record a worker's result on the card it claimed (`done` or `failed`); False when the
        card is no longer that claim's (it was re-queued or marked lost meanwhile)."""
        _, count = self._run(
            "UPDATE cards SET status = ?, finished_at = ?, updated_at = ?, exit_code = ?, detail = ?, "
            "claim = NULL, deadline = NULL WHERE id = ? AND status = 'running' AND claim = ?",
            ("done" if result.ok else "failed", format_instant(result.finished_at),
             format_instant(result.finished_at), result.exit_code, result.detail, card_id, token),
        )
        return count == 1

    def fail_lost(self, now: datetime, keep: frozenset[str] = frozenset()) -> list[int]:
        """Mark `failed` the running cards whose worker's deadline passed more than a grace ago
        (their dispatcher died), except the claims in `keep` (workers this process still has)."""
        rows, _ = self._run("SELECT id, claim, deadline FROM cards WHERE status = 'running'")
        lost = []
        for card_id, claim, deadline in rows:
            until = parse_stamp(deadline)
            if claim in keep or (until is not None and in_interval(now, None, until + _LOST_GRACE)):
                continue
            _, count = self._run(
                "UPDATE cards SET status = 'failed', updated_at = ?, finished_at = ?, "
                "detail = 'worker lost: its dispatcher stopped before recording it', claim = NULL, deadline = NULL "
                "WHERE id = ? AND status = 'running' AND claim IS ?",
                (format_instant(now), format_instant(now), card_id, claim),
            )
            if count == 1:
                lost.append(card_id)
        return lost


@dataclass(frozen=True)
class HeldCard:
    id: int
    notice: str | None


@dataclass(frozen=True)
class CardRun:
    id: int
    result: WorkResult


@dataclass(frozen=True)
class DispatchReport:
    """What one pass did: `spawned` the cards it claimed and started, `held` the ready cards
    the gate refused (left ready), `waiting` admitted ready cards beyond the limit, `taken` the
    cards another dispatcher claimed first, `finished` the results recorded, `lost` the running
    cards found abandoned by a dead dispatcher."""

    now: datetime
    spawned: tuple[int, ...] = ()
    held: tuple[HeldCard, ...] = ()
    waiting: tuple[int, ...] = ()
    taken: tuple[int, ...] = ()
    finished: tuple[CardRun, ...] = ()
    lost: tuple[int, ...] = ()

    @property
    def failed(self) -> tuple[CardRun, ...]:
        return tuple(run for run in self.finished if not run.result.ok)

    def summary(self) -> str:
        parts = [f"{len(self.spawned)} spawned", f"{len(self.held)} held"]
        if self.finished:
            parts.append(f"{len(self.finished) - len(self.failed)} done, {len(self.failed)} failed")
        if self.waiting:
            parts.append(f"{len(self.waiting)} waiting for a slot")
        if self.lost:
            parts.append(f"{len(self.lost)} lost")
        return "kanban dispatch: " + ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "now": format_instant(self.now),
            "spawned": len(self.spawned),
            "held": len(self.held),
            "waiting": len(self.waiting),
            "done": len(self.finished) - len(self.failed),
            "failed": len(self.failed),
            "cards": (
                [{"id": run.id, "outcome": "done" if run.result.ok else "failed", "result": run.result.to_json()}
                 for run in self.finished]
                + [{"id": id_, "outcome": "running"} for id_ in self.spawned
                   if id_ not in {run.id for run in self.finished}]
                + [{"id": held.id, "outcome": "held", "notice": held.notice} for held in self.held]
                + [{"id": id_, "outcome": "waiting"} for id_ in self.waiting]
                + [{"id": id_, "outcome": "taken"} for id_ in self.taken]
                + [{"id": id_, "outcome": "lost"} for id_ in self.lost]
            ),
        }


@dataclass
class Dispatcher:
    """Dispatch passes over the fleet's board, gated per card. Keeps its workers, so a service can
    run passes without waiting (`wait=False`) while `max_workers` bounds how many run at once."""

    estop: Estop
    board: Board | None = None
    max_workers: int = 4
    timeout: timedelta = timedelta(hours=1)
    pool: WorkerPool = field(init=False)

    def __post_init__(self) -> None:
        if isinstance(self.max_workers, bool) or not isinstance(self.max_workers, int) or self.max_workers < 1:
            raise InvalidArgument(f"invalid worker limit {self.max_workers!r}: expected a whole number of at least 1")
        self.timeout = parse_timeout(self.timeout)
        self.fleet = self.estop.for_fleet()
        if self.board is None:
            self.board = Board(self.estop.layout.root, clock=self.estop.clock)
        self.pool = WorkerPool(self.estop.clock)
        self._claims: dict[int, str] = {}

    def pass_gate(self) -> PassGate:
        """The gate one pass decides its cards with: `gate(card.owner, card.profile)`, through
        the card's profile's view of the fleet (or the fleet root's)."""
        return PassGate(self.fleet)

    def tick(self, now: datetime | None = None, *, limit: int | None = None, wait: bool = False) -> DispatchReport:
        """One pass: record ended workers, fail lost cards, then claim and spawn admitted ready
        cards while slots remain (`limit` per pass; at most `max_workers` in flight)."""
        now = self.estop.clock() if now is None else now
        finished = self._record(self.pool.reap())
        if not self.board.exists():
            return DispatchReport(now, finished=tuple(finished))
        lost = self.board.fail_lost(now, frozenset(self._claims.values()))
        slots = self.max_workers - len(self.pool)
        if limit is not None:
            slots = min(slots, limit)
        spawned: list[int] = []
        held: list[HeldCard] = []
        waiting: list[int] = []
        taken: list[int] = []
        gate = self.pass_gate()
        for card in self.board.cards("ready"):
            verdict = gate(card.owner, card.profile)
            if not verdict:
                held.append(HeldCard(card.id, gate.notice(verdict)))
                continue
            if len(spawned) >= slots:
                waiting.append(card.id)
                continue
            token = uuid.uuid4().hex
            if not self.board.claim(card.id, token, now, now + self.timeout):
                taken.append(card.id)
                continue
            self._claims[card.id] = token
            self._spawn(card)
            spawned.append(card.id)
        finished += self._record(self.pool.wait_all() if wait else self.pool.reap())
        return DispatchReport(now, tuple(spawned), tuple(held), tuple(waiting), tuple(taken), tuple(finished),
                              tuple(lost))

    def dispatch(self, now: datetime | None = None, *, limit: int | None = None) -> DispatchReport:
        """One pass that waits for the workers it spawned and records them (`hermes kanban dispatch`)."""
        return self.tick(now, limit=limit, wait=True)

    def drain(self, timeout: float | None = None) -> list[CardRun]:
        """Wait (up to `timeout` seconds) for the workers in flight and record them; those still
        running are left running and are marked lost after their deadline."""
        return self._record(self.pool.wait_all(timeout))

    def _spawn(self, card: Card) -> None:
        layout = self.estop.layout
        home = layout.for_profile(card.profile).home if card.profile else layout.root
        self.pool.start(
            card.id,
            card.command,
            timeout=self.timeout,
            cwd=layout.root,
            env=worker_env(os.environ, {
                "HERMES_HOME": str(home),
                "HERMES_ROOT": str(layout.root),
                "HERMES_KANBAN_CARD": str(card.id),
                "HERMES_KANBAN_OWNER": card.owner,
            }),
            log_path=self.board.log_dir / f"{card.id}.log",
        )

    def _record(self, done: list[tuple[Any, WorkResult]]) -> list[CardRun]:
        runs = []
        for card_id, result in done:
            token = self._claims.pop(card_id, None)
            if token is not None:
                self.board.finish(card_id, token, result)
            runs.append(CardRun(card_id, result))
        return runs
