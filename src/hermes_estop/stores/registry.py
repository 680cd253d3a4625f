"""The consumer registry's storage: what a consumer process reports of itself (`ConsumerEntry`, one
per process, and its stored form), the contract and the file implementation; the PostgreSQL one is
`pg_registry.PgConsumerTable`. What an entry proves (live, stalled, lost; acknowledged) is decided
by the fleet (`fleet.registry.entries`).

The file form is one small JSON file per process, `<root>/consumers/<key>.json`, replaced
atomically (write, then rename) at each report: no lock, no read-modify-write, so a consumer's
report never waits on another's, and a reader lists the directory. A report is a heartbeat, not
a record: it is not fsynced (a crash loses at most the last one, and the process with it).
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from hermes_estop.model.errors import StoreError
from hermes_estop.model.timeutil import format_instant, parse_stamp
from hermes_estop.system.fsread import read_regular
from hermes_estop.system.fsutil import atomic_write

__all__ = ["CONSUMERS_DIR", "ConsumerEntry", "ConsumerFiles", "ConsumerTable", "entry_key"]

CONSUMERS_DIR = "consumers"
_MAX_ENTRY_BYTES = 64 * 1024
_SUFFIX = ".json"


@dataclass(frozen=True)
class ConsumerEntry:
    """One registered consumer process, as it last reported itself."""

    component: str
    host: str
    pid: int
    #: the pid's start time (clock ticks since boot), so a reused pid is never taken for it
    pid_start: int | None
    home: str
    profile: str | None
    #: the scopes whose holds this consumer honours ("fleet", profile names; `ALL_SCOPES`: all)
    scopes: tuple[str, ...]
    version: str
    #: seconds between its reports (its loop's interval, at least `MIN_REPORT_INTERVAL`)
    interval: float
    registered_at: datetime
    reported_at: datetime
    #: reports made so far: a waiter knows a report is newer than the moment it started waiting
    seq: int = 0
    #: (scope, generation) of every active hold it saw in its last report ("?" for a hold with none)
    observed: tuple[tuple[str, str], ...] = ()
    #: its verdict on that read: "proceed" or "held"
    verdict: str = "proceed"
    #: when it first saw the engagement it reports (None: nothing held)
    observed_since: datetime | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return entry_key(self.component, self.host, self.pid)

    def describe(self) -> str:
        """`kanban@host-b pid 4411`: how an operator names it."""
        return f"{self.component}@{self.host} pid {self.pid}"

    def reported(self, now: datetime, observed: tuple[tuple[str, str], ...], verdict: str) -> ConsumerEntry:
        """This entry after one more report at `now` that saw `observed`."""
        since = self.observed_since if observed == self.observed and self.observed_since is not None else now
        return replace(self, reported_at=now, seq=self.seq + 1, observed=observed, verdict=verdict,
                       observed_since=since if observed else None)

    def to_json(self) -> dict[str, Any]:
        return {
            "version_format": 1, "component": self.component, "host": self.host, "pid": self.pid,
            "pid_start": self.pid_start, "home": self.home, "profile": self.profile,
            "scopes": list(self.scopes), "version": self.version, "interval": self.interval,
            "registered_at": format_instant(self.registered_at), "reported_at": format_instant(self.reported_at),
            "seq": self.seq, "observed": [{"scope": s, "generation": g} for s, g in self.observed],
            "verdict": self.verdict, "observed_since": format_instant(self.observed_since), "extra": self.extra,
        }

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, data: object) -> ConsumerEntry | None:
        """The entry of a stored document; None for one that is not (a damaged file is ignored,
        never fatal to a reader)."""
        if not isinstance(data, dict):
            return None
        try:
            registered, reported = parse_stamp(data["registered_at"]), parse_stamp(data["reported_at"])
            pid, interval = data["pid"], data["interval"]
            if registered is None or reported is None or not isinstance(pid, int) or isinstance(pid, bool):
                return None
            if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not interval > 0:
                return None
            observed = tuple((str(o["scope"]), str(o["generation"])) for o in data.get("observed") or ())
            pid_start = data.get("pid_start")
            return cls(
                component=str(data["component"]), host=str(data["host"]), pid=pid,
                pid_start=pid_start if isinstance(pid_start, int) else None, home=str(data.get("home") or ""),
                profile=data.get("profile") if isinstance(data.get("profile"), str) else None,
                scopes=tuple(str(s) for s in data.get("scopes") or ()), version=str(data.get("version") or "?"),
                interval=float(interval), registered_at=registered, reported_at=reported,
                seq=int(data.get("seq") or 0), observed=observed, verdict=str(data.get("verdict") or "?"),
                observed_since=parse_stamp(data.get("observed_since")),
                extra=_extra(data.get("extra")),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    @classmethod
    def decode(cls, raw: bytes) -> ConsumerEntry | None:
        try:
            return cls.from_json(json.loads(raw))
        except ValueError:
            return None


def _extra(value: object) -> dict[str, object]:
    """A stored entry's `extra`: what the consumer added of its own (`{}` when it is not an object)."""
    return {str(key): item for key, item in value.items()} if isinstance(value, dict) else {}


def entry_key(component: str, host: str, pid: int) -> str:
    """The registry key of one consumer: safe as a file name (the host is reduced to its
    letters, digits, dots and dashes)."""
    safe_host = "".join(c if c.isalnum() or c in ".-" else "_" for c in host)[:64] or "_"
    safe_component = "".join(c if c.isalnum() or c in ".-" else "_" for c in component)[:64] or "_"
    return f"{safe_component}@{safe_host}-{pid}"



class ConsumerTable(ABC):
    """Every registered consumer of one fleet, shared by every process of it."""

    name: str = "abstract"

    @abstractmethod
    def put(self, entry: ConsumerEntry) -> None:
        """Register or update `entry` (by its key). Raises `StoreError` when it cannot be written."""

    @abstractmethod
    def remove(self, key: str) -> None:
        """Deregister `key`; nothing when it is not there. Raises `StoreError` on failure."""

    @abstractmethod
    def entries(self) -> list[ConsumerEntry]:
        """Every entry that can be read (a damaged one is skipped). Raises `StoreError` when
        the registry as a whole cannot be read."""


class ConsumerFiles(ConsumerTable):
    name = "file"

    def __init__(self, root: Path) -> None:
        self.dir = Path(root) / CONSUMERS_DIR

    def _path(self, key: str) -> Path:
        if not key or "/" in key or key.startswith("."):
            raise StoreError(f"invalid consumer key {key!r}")
        return self.dir / f"{key}{_SUFFIX}"

    def put(self, entry: ConsumerEntry) -> None:
        """Replace the entry's file (atomically; not fsynced: a heartbeat rewritten every second)."""
        path = self._path(entry.key)
        try:
            self.dir.mkdir(mode=0o755, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None
        atomic_write(path, entry.encode(), durable=False)

    def remove(self, key: str) -> None:
        path = self._path(key)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreError(f"cannot remove {path}: {exc.strerror or exc}") from None

    def entries(self) -> list[ConsumerEntry]:
        try:
            names = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"cannot list {self.dir}: {exc.strerror or exc}") from None
        found = []
        for name in names:
            if name.startswith(".") or not name.endswith(_SUFFIX):
                continue
            try:
                raw = read_regular(self.dir / name, _MAX_ENTRY_BYTES)
            except (OSError, StoreError):
                continue  # removed meanwhile (a deregistration), or not a regular file
            entry = ConsumerEntry.decode(raw)
            if entry is not None and entry.key == name[: -len(_SUFFIX)]:
                found.append(entry)
        return found
