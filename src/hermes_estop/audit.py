"""The audit trail: one JSON line per engage, re-arm, release, retire, expiry lift, and window skip.

The file form is append-only JSONL in the fleet root; each event is a single `write(2)` on an
`O_APPEND` descriptor, so concurrent writers never interleave inside a line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from .fsutil import open_shared_file
from .timeutil import format_instant, parse_stamp

__all__ = ["AUDIT_FILE", "EVENTS", "AuditEvent", "AuditLog", "default_actor"]

AUDIT_FILE = "estop-audit.jsonl"
EVENTS = ("engage", "rearm", "release", "retire", "expire", "skip")


def default_actor() -> str:
    """Who did it, as far as this process can tell: `user@host`."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True)
class AuditEvent:
    time: datetime
    event: str
    location: str
    generation: str | None = None
    actor: str | None = None
    reason: str | None = None
    deadline: datetime | None = None
    detail: str | None = None

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


class AuditLog:
    """The JSONL audit file of one fleet root."""

    def __init__(self, root: Path) -> None:
        self.path = root / AUDIT_FILE

    def append(self, event: AuditEvent) -> None:
        line = (json.dumps(event.to_json(), sort_keys=False) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_shared_file(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def _lines(self) -> Iterator[AuditEvent]:
        try:
            handle = open(self.path, "rb")
        except FileNotFoundError:
            return
        with handle:
            for raw in handle:
                try:
                    data = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(data, dict):
                    event = AuditEvent.from_json(data)
                    if event is not None:
                        yield event

    def read(self, limit: int | None = None) -> list[AuditEvent]:
        """Oldest first; with `limit`, only the newest `limit` events."""
        events = list(self._lines())
        return events[-limit:] if limit else events
