"""The audit trail: one JSON line per engage, re-arm, release, retire, expiry lift, and window skip.

The file form is append-only JSONL in the fleet root; each event is a single `write(2)` on an
`O_APPEND` descriptor, so concurrent writers never interleave inside a line.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from .record import Record, set_field
from .fsutil import NotRegularFile, describe_mode, fsync_dir, open_regular, open_shared_file
from .timeutil import format_instant, parse_stamp

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `hermes check` imports this module
if TYPE_CHECKING:
    from collections.abc import Iterator
    from datetime import datetime
    from typing import Any

__all__ = ["AUDIT_FILE", "EVENTS", "AuditEntry", "AuditEvent", "AuditLog", "coalesce_renewals", "default_actor",
           "parse_line"]

AUDIT_FILE = "estop-audit.jsonl"
#: at most this many bytes of the file trail are read per `read_after` call
_CHUNK = 256 * 1024
#: `void`: the engage / re-arm line before it names a generation whose write then failed;
#: `task-start` / `task-end`: a maintenance job run under a hold (`hermes run`, a window's task)
EVENTS = ("engage", "rearm", "release", "retire", "expire", "skip", "void", "task-start", "task-end")


def default_actor() -> str:
    """Who did it, as far as this process can tell: `user@host`."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


class AuditEvent(Record):
    """One line of the audit trail (a `Record`, not a dataclass: the check path imports this)."""

    __slots__ = ("time", "event", "location", "generation", "actor", "reason", "deadline", "detail")  # noqa: RUF023
    time: datetime
    event: str
    location: str
    generation: str | None
    actor: str | None
    reason: str | None
    deadline: datetime | None
    detail: str | None

    def __init__(self, time: datetime, event: str, location: str, generation: str | None = None,
                 actor: str | None = None, reason: str | None = None, deadline: datetime | None = None,
                 detail: str | None = None) -> None:
        set_field(self, "time", time)
        set_field(self, "event", event)
        set_field(self, "location", location)
        set_field(self, "generation", generation)
        set_field(self, "actor", actor)
        set_field(self, "reason", reason)
        set_field(self, "deadline", deadline)
        set_field(self, "detail", detail)

    def to_json(self) -> dict[str, Any]:
        return {"time": format_instant(self.time), "event": self.event, "location": self.location,
                "generation": self.generation, "actor": self.actor, "reason": self.reason,
                "deadline": format_instant(self.deadline), "detail": self.detail}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "AuditEvent | None":
        time = parse_stamp(data.get("time"))
        if time is None or not isinstance(data.get("event"), str):
            return None

        def text(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) else None

        return cls(
            time=time,
            event=data["event"],
            location=text("location") or "?",
            generation=text("generation"),
            actor=text("actor"),
            reason=text("reason"),
            deadline=parse_stamp(data.get("deadline")),
            detail=text("detail"),
        )


class AuditEntry(Record):
    """One entry of the trail read from a cursor: `event` None for a corrupt line (skipped,
    never delivered); `end` the position just past it (a cursor only grows along the trail:
    a byte offset in the file trail, a row id in a database); `id` stable across re-reads, so
    a receiver can de-duplicate on it."""

    __slots__ = ("end", "id", "event")  # noqa: RUF023 (constructor order)
    end: int
    id: str
    event: AuditEvent | None

    def __init__(self, end: int, id: str, event: AuditEvent | None) -> None:
        set_field(self, "end", end)
        set_field(self, "id", id)
        set_field(self, "event", event)


def coalesce_renewals(events: list[AuditEvent]) -> list[tuple[AuditEvent, int]]:
    """`events` with each run of consecutive renewals folded into its last one: a `rearm` at the
    same scope, by the same actor, with the same reason as the `engage`/`rearm` just before it
    (a lease renewed every ttl/3 writes one per renewal). Each item is (the event shown, how many
    renewals it stands for: 1 for an event that folds nothing)."""
    out: list[tuple[AuditEvent, int]] = []
    for event in events:
        if out and event.event == "rearm":
            last, count = out[-1]
            if (last.event in ("engage", "rearm") and last.location == event.location and last.actor == event.actor
                    and last.reason == event.reason):
                if last.event == "rearm":
                    out[-1] = (event, count + 1)
                    continue
        out.append((event, 1))
    return out


def parse_line(raw: bytes) -> AuditEvent | None:
    """The event of one line of the file trail, None when it is not one."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return AuditEvent.from_json(data) if isinstance(data, dict) else None


class AuditLog:
    """The JSONL audit file of one fleet root."""

    def __init__(self, root: Path) -> None:
        self.path = root / AUDIT_FILE

    def append(self, event: AuditEvent, *, sync: bool = True) -> None:
        """Append one line; with `sync`, fsync it and then the directory: a store appends an
        engagement's line before the hold is renamed in, so the line must be as durable as the
        hold that follows it. The directory every time, not only when this call created the
        file: a writer killed between creating the trail and its directory fsync leaves a file
        whose name a power loss would still take (the checker in tests/stores/protocol found
        it). Without `sync` (the line of a removal, which a reader's expiry appends inline):
        a removal lost to a power loss brings its hold back, and its line goes with it."""
        line = (json.dumps(event.to_json(), sort_keys=False) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_shared_file(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, line)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if sync:
            fsync_dir(self.path.parent)

    def check_writable(self) -> None:
        """Refuse (`NotRegularFile`, naming the file) an audit trail this process must not
        append to: not a regular file (a FIFO would block the writer while it holds the
        sentinel lock), hard-linked elsewhere, or another user's. Checked under the lock,
        before a write, so a refused write leaves nothing half-done. Absent is fine."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise NotRegularFile(f"cannot check the audit log {self.path}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(f"the audit log {self.path} is {describe_mode(st.st_mode)}: remove it by hand")
        if st.st_nlink > 1:
            raise NotRegularFile(f"the audit log {self.path} has {st.st_nlink} hard links: refusing to append to it")
        if st.st_uid != os.geteuid():
            raise NotRegularFile(f"the audit log {self.path} belongs to uid {st.st_uid}, not this user: "
                                 "refusing to append to it")

    def _lines(self) -> Iterator[AuditEvent | None]:
        """Every line's event, oldest first; None for a line that is not a valid event."""
        try:
            fd = open_regular(self.path)
        except FileNotFoundError:
            return
        with os.fdopen(fd, "rb") as handle:
            for raw in handle:
                if not raw.strip():
                    continue
                yield parse_line(raw)

    def read_counted(self, limit: int | None = None) -> tuple[list[AuditEvent], int]:
        """(events oldest first, with `limit` only the newest `limit`; how many lines were
        corrupt and skipped). Raises `NotRegularFile`/`OSError` when the file cannot be read."""
        events: list[AuditEvent] = []
        corrupt = 0
        for event in self._lines():
            if event is None:
                corrupt += 1
            else:
                events.append(event)
        return (events[-limit:] if limit else events), corrupt

    def read(self, limit: int | None = None) -> list[AuditEvent]:
        """Oldest first; with `limit`, only the newest `limit` events."""
        return self.read_counted(limit)[0]

    def head(self) -> int:
        """The position just past the newest entry (where a reader told to start at the end begins)."""
        try:
            fd = open_regular(self.path)
        except FileNotFoundError:
            return 0
        try:
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def read_after(self, position: int, limit: int) -> list[AuditEntry]:
        """At most `limit` entries after byte offset `position`, oldest first; a line still being
        written (no newline yet) is left for the next call. An id is the line's offset plus a
        hash of the line, so a replaced trail never reuses one. Raises `OSError` when the file
        cannot be read."""
        import hashlib

        try:
            fd = open_regular(self.path)
        except FileNotFoundError:
            return []
        entries: list[AuditEntry] = []
        try:
            size = os.fstat(fd).st_size
            if position > size:  # the trail was truncated or replaced: start it over
                position = 0
            while len(entries) < limit and position < size:
                os.lseek(fd, position, os.SEEK_SET)
                data = os.read(fd, _CHUNK)
                if not data:
                    break
                offset = 0
                while len(entries) < limit:
                    newline = data.find(b"\n", offset)
                    if newline < 0:
                        break
                    raw = data[offset:newline]
                    start = position + offset
                    offset = newline + 1
                    if not raw.strip():
                        continue
                    digest = hashlib.sha256(raw).hexdigest()[:12]
                    entries.append(AuditEntry(position + offset, f"audit-{start}-{digest}", parse_line(raw)))
                if offset == 0:
                    if len(data) == _CHUNK:  # one line longer than a chunk: corrupt, step over it
                        entries.append(AuditEntry(position + len(data), f"audit-{position}-long", None))
                        position += len(data)
                        continue
                    break  # a line still being written: wait for its newline
                position += offset
        finally:
            os.close(fd)
        return entries
