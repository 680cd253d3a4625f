"""kanban's board: one for the whole fleet (`<root>/kanban.db`, SQLite in WAL mode, shared by
every profile), its cards, and the conditional updates that move them.

Claiming is one conditional UPDATE (`... WHERE id = ? AND status = 'ready'`): of two dispatcher
processes racing for a card exactly one sees its row change, so a card is never spawned twice.
A running card records its claim, when it started and its worker's pid (its process group), so
another process can tell what is in flight (issue 11: `hermes drain`).

Before SQLite opens the file, the board checks it with `open_regular` (`O_NONBLOCK|O_NOFOLLOW`,
then regular) and its `-wal`, `-shm` and `-journal` companions with `lstat`: a FIFO, directory or
symlink planted there is refused with one line and never blocks a pass. The schema script and
WAL mode run once per board file (per inode), not on every statement.

Reads never wait (the reader guarantee): a read gives up after `READ_WAIT` when another process
holds the board's lock (`locking_mode=EXCLUSIVE`, a long write) and raises `BoardBusy`, one line
saying so; only writes wait for the lock, up to `busy_timeout`.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hermes_estop.consumers.validate import validate_owner, validate_profile
from hermes_estop.consumers.worker import WorkResult
from hermes_estop.model.errors import InvalidArgument, StoreError
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import Clock, format_instant, in_interval, parse_stamp, utc_now
from hermes_estop.system.fsutil import describe_mode, open_regular
from hermes_estop.system.processes import same_process, start_time

__all__ = ["BOARD_NAME", "READ_WAIT", "STATUSES", "Board", "BoardBusy", "Card", "UnknownCard", "abandoned",
           "claim_token", "claimant", "claimant_lives"]

BOARD_NAME = "kanban.db"
STATUSES = ("todo", "ready", "running", "done", "failed")
_LOST_GRACE = timedelta(minutes=1)
_MAX_TITLE = 500
_COMPANIONS = ("-wal", "-shm", "-journal")
#: seconds a read waits for a board another process holds locked before saying it is busy
READ_WAIT = 0.1
_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)

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
    deadline    TEXT,
    pid         INTEGER,
    pid_start   INTEGER
);
CREATE INDEX IF NOT EXISTS cards_status ON cards (status, id);
"""
_COLUMNS = ("id, title, command, status, owner, profile, created_at, updated_at, started_at, finished_at, "
            "exit_code, detail, pid, claim, pid_start")
CardRow = tuple[Any, ...]


class UnknownCard(InvalidArgument):
    """A card id the board does not have."""


class BoardBusy(StoreError):
    """Another process holds the board's lock longer than this one would wait."""


def _failed(path: Path, exc: sqlite3.Error, action: str) -> StoreError:
    if getattr(exc, "sqlite_errorcode", None) in _BUSY:
        return BoardBusy(f"the kanban board {path} is busy: another process holds its lock")
    return StoreError(f"{action} {path}: {one_line(exc)}")


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
    #: the worker's pid (its process group) while running; kept when it is found lost
    pid: int | None = None
    #: the claim that started its last run (kept after the run: who claimed it, for `hermes doctor`)
    claim: str | None = None
    #: the worker's start time (`processes.start_time`): without it the worker is never signalled
    pid_start: int | None = None

    @classmethod
    def from_row(cls, row: CardRow) -> Card:
        (id_, title, command, status, owner, profile, created, updated, started, finished, code, detail, pid,
         claim, pid_start) = row
        return cls(id_, title, command, status, owner, profile, parse_stamp(created), parse_stamp(updated),
                   parse_stamp(started), parse_stamp(finished), code, detail, pid if isinstance(pid, int) else None,
                   claim if isinstance(claim, str) else None, pid_start if isinstance(pid_start, int) else None)

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
            "pid": self.pid,
        }


def _check_id(card_id: object) -> int:
    if isinstance(card_id, bool) or not isinstance(card_id, int) or card_id <= 0:
        raise InvalidArgument(f"invalid card id {card_id!r}: expected a positive whole number")
    return card_id


class Board:
    """The fleet's board. Every method opens its own short connection, so a `Board` may be
    shared by threads and used by several processes at once."""

    def __init__(self, root: str | Path, *, clock: Clock = utc_now, busy_timeout: float = 30.0,
                 read_timeout: float = READ_WAIT) -> None:
        self.root = Path(root)
        self.path = self.root / BOARD_NAME
        self.log_dir = self.root / "kanban-logs"
        self.clock = clock
        self.busy_timeout = busy_timeout
        self.read_timeout = read_timeout
        self._prepared: tuple[int, int] | None = None
        self._prepare_lock = threading.Lock()

    def exists(self) -> bool:
        """Something is at the board's path (a FIFO or directory too: using it is then refused
        with one line, rather than the board silently counting as absent)."""
        return os.path.lexists(self.path)

    def _identity(self) -> tuple[int, int] | None:
        """The board file's (device, inode), checked regular without ever blocking; None when it
        does not exist yet. `StoreError` naming what is planted there otherwise."""
        for suffix in _COMPANIONS:
            companion = Path(f"{self.path}{suffix}")
            try:
                mode = os.lstat(companion).st_mode
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StoreError(f"cannot open the kanban board: {companion}: {one_line(exc.strerror or exc)}") from None
            if not stat.S_ISREG(mode):
                raise StoreError(f"cannot open the kanban board: {companion} is {describe_mode(mode)}: "
                                 "refusing to use it")
        try:
            fd = open_regular(self.path)
        except FileNotFoundError:
            return None
        except StoreError as exc:
            raise StoreError(f"cannot open the kanban board: {one_line(exc)}") from None
        except OSError as exc:
            raise StoreError(f"cannot open the kanban board {self.path}: {one_line(exc.strerror or exc)}") from None
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        return st.st_dev, st.st_ino

    def _unwritten(self) -> bool:
        """No board file yet, or an empty one with no write-ahead log: it holds no card. A read
        answers that without connecting, since connecting would create the file and write the
        schema, and a read (`hermes status`, an impact preview) never writes."""
        if self._identity() is None:
            return True
        try:
            if os.stat(self.path).st_size:
                return False
            return not os.stat(f"{self.path}-wal").st_size
        except FileNotFoundError:
            return True
        except OSError:
            return False

    def _connect(self, wait: float) -> sqlite3.Connection:
        identity = self._identity()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=wait, isolation_level=None)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the kanban board {self.path}: {one_line(exc)}") from None
        if identity is None or identity != self._prepared:
            try:
                self._prepare(db)
            except sqlite3.Error as exc:
                db.close()
                raise _failed(self.path, exc, "cannot open the kanban board") from None
        return db

    def _prepare(self, db: sqlite3.Connection) -> None:
        """Once per board file: WAL mode (it persists in the file), the schema, and the columns
        a board made by an older version lacks."""
        with self._prepare_lock:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            columns = {row[1] for row in db.execute("PRAGMA table_info(cards)")}
            for column in ("pid", "pid_start"):
                if column not in columns:
                    db.execute(f"ALTER TABLE cards ADD COLUMN {column} INTEGER")
            self._prepared = self._identity()

    def _run(self, sql: str, params: tuple[Any, ...] = (), *, read: bool = False) -> tuple[list[CardRow], int]:
        """One statement in its own (autocommit) transaction: rows, rowcount. A `read` waits
        for a locked board at most `read_timeout` (`BoardBusy`), a write `busy_timeout`."""
        if read and self._unwritten():
            return [], 0
        with closing(self._connect(self.read_timeout if read else self.busy_timeout)) as db:
            try:
                db.execute("PRAGMA synchronous=NORMAL")
                cursor = db.execute(sql, params)
                rows = cursor.fetchall()
                return rows, cursor.rowcount
            except sqlite3.Error as exc:
                raise _failed(self.path, exc, "kanban board") from None

    def add(self, title: str, command: str, *, owner: object = None, profile: str | None = None, ready: bool = False,
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
        rows, _ = self._run(f"SELECT {_COLUMNS} FROM cards WHERE id = ?", (_check_id(card_id),), read=True)
        if not rows:
            raise UnknownCard(f"unknown card {card_id!r}: no such card on {self.path}")
        return Card.from_row(rows[0])

    def cards(self, status: str | None = None) -> list[Card]:
        if status is None:
            rows, _ = self._run(f"SELECT {_COLUMNS} FROM cards ORDER BY id", read=True)
        else:
            if status not in STATUSES:
                raise InvalidArgument(f"invalid status {status!r}: expected one of {', '.join(STATUSES)}")
            rows, _ = self._run(f"SELECT {_COLUMNS} FROM cards WHERE status = ? ORDER BY id", (status,), read=True)
        return [Card.from_row(row) for row in rows]

    def mark_ready(self, card_id: int, now: datetime | None = None) -> Card:
        """Move a `todo`, `done` or `failed` card (back) to `ready`; a running card is refused."""
        card = self.get(card_id)
        if card.status == "running":
            raise InvalidArgument(f"card {card_id} is running: it cannot be made ready until it ends")
        stamp = format_instant(self.clock() if now is None else now)
        self._run("UPDATE cards SET status = 'ready', updated_at = ?, claim = NULL, deadline = NULL, pid = NULL, "
                  "pid_start = NULL WHERE id = ? AND status != 'running'", (stamp, card_id))
        return self.get(card_id)

    def claim(self, card_id: int, token: str, now: datetime, deadline: datetime) -> bool:
        """Atomically move a `ready` card to `running` for `token`; False when another
        dispatcher got there first (or the card is no longer ready)."""
        stamp = format_instant(now)
        _, count = self._run(
            "UPDATE cards SET status = 'running', claim = ?, started_at = ?, updated_at = ?, deadline = ?, "
            "finished_at = NULL, exit_code = NULL, detail = NULL, pid = NULL, pid_start = NULL "
            "WHERE id = ? AND status = 'ready'",
            (token, stamp, stamp, format_instant(deadline), card_id),
        )
        return count == 1

    def note_worker(self, card_id: int, token: str, pid: int, started: int | None = None) -> bool:
        """Record the pid and start time of the worker running `card_id` for `token` (what
        `hermes drain` watches and, identified by both, may stop)."""
        _, count = self._run("UPDATE cards SET pid = ?, pid_start = ? WHERE id = ? AND status = 'running' "
                             "AND claim = ?", (pid, started, card_id, token))
        return count == 1

    def park(self, card_id: int, reason: str, now: datetime) -> bool:
        """Mark a `ready` card the dispatcher cannot use (a hand-edited bad profile, say) `failed`
        with the reason, as cron parks a bad row: it is not retried every pass."""
        stamp = format_instant(now)
        _, count = self._run(
            "UPDATE cards SET status = 'failed', updated_at = ?, finished_at = ?, exit_code = NULL, detail = ?, "
            "claim = NULL, deadline = NULL, pid = NULL, pid_start = NULL WHERE id = ? AND status = 'ready'",
            (stamp, stamp, reason, card_id),
        )
        return count == 1

    def finish(self, card_id: int, token: str, result: WorkResult) -> bool:
        """Record a worker's result on the card it claimed (`done` or `failed`); False when the
        card is no longer that claim's (it was re-queued or marked lost meanwhile). The claim
        stays: it names who ran the card."""
        _, count = self._run(
            "UPDATE cards SET status = ?, finished_at = ?, updated_at = ?, exit_code = ?, detail = ?, "
            "deadline = NULL, pid = NULL, pid_start = NULL "
            "WHERE id = ? AND status = 'running' AND claim = ?",
            ("done" if result.ok else "failed", format_instant(result.finished_at),
             format_instant(result.finished_at), result.exit_code, result.detail, card_id, token),
        )
        return count == 1

    def fail_lost(self, now: datetime, keep: frozenset[str] = frozenset()) -> list[int]:
        """Mark `failed` the running cards nobody is working on any more: its claimant and its
        worker are both gone and its deadline (a claim without one: its start) passed more than
        a grace ago. The claims in `keep` (workers this process still has) are never judged. The
        claim and the worker's pid stay on the card: they are the evidence `hermes doctor`
        names a breach with."""
        rows, _ = self._run("SELECT id, claim, deadline, started_at, pid, pid_start FROM cards "
                            "WHERE status = 'running'")
        lost = []
        for card_id, claim, deadline, started, pid, pid_start in rows:
            if claim in keep or not abandoned(claim, parse_stamp(deadline) or parse_stamp(started), now,
                                              claimant_lives(claim, pid, pid_start)):
                continue
            _, count = self._run(
                "UPDATE cards SET status = 'failed', updated_at = ?, finished_at = ?, "
                "detail = 'worker lost: its dispatcher stopped before recording it', deadline = NULL "
                "WHERE id = ? AND status = 'running' AND claim IS ?",
                (format_instant(now), format_instant(now), card_id, claim),
            )
            if count == 1:
                lost.append(card_id)
        return lost


def claim_token(pid: int, started: int | None, nonce: str) -> str:
    """A dispatcher's claim: `<pid>-<start time>-<nonce>`, naming the process that made it
    exactly (`claimant`), so another process can tell whether it still lives."""
    return f"{pid}-{started if started is not None else 'x'}-{nonce}"


def claimant(token: str | None) -> int | None:
    """The dispatcher pid a kanban claim token names (`<pid>-...`), None for another form."""
    if token is None:
        return None
    head = token.split("-", 1)[0]
    return int(head) if head.isdigit() and "-" in token else None


def _claimant_start(token: str) -> int | None:
    parts = token.split("-")
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def claimant_lives(claim: object, pid: object, pid_start: object) -> bool:
    """Whether the process that claimed a card, or the worker it recorded, still runs (on this
    host, where the board is). A claimant known only by its pid counts while that pid runs: a
    claim is never judged lost on a guess."""
    if isinstance(claim, str) and (claimed_by := claimant(claim)) is not None:
        started = _claimant_start(claim)
        if same_process(claimed_by, started) if started is not None else start_time(claimed_by) is not None:
            return True
    if isinstance(pid, int) and not isinstance(pid, bool):
        return same_process(pid, pid_start) if isinstance(pid_start, int) else start_time(pid) is not None
    return False


def abandoned(claim: object, until: datetime | None, now: datetime, lives: bool) -> bool:
    """Pure: a running card is lost when nobody that claimed or works on it lives (`lives`) and
    `until` (its deadline, else its start) passed more than `_LOST_GRACE` ago; a card that says
    neither is lost once nobody lives."""
    if lives:
        return False
    return until is None or not in_interval(now, None, until + _LOST_GRACE)
