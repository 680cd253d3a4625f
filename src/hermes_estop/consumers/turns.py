"""The gateway's turns in flight, where another process can see them (issue 11: `hermes drain`
waits for them, `hermes status` counts them).

Each gateway process keeps one small file in its home, `gateway/turns-<pid>.json`, listing the
turns it is serving right now; the file is replaced atomically at each turn's start and end and
removed when no turn is in flight. A reader trusts a file only while its pid is alive and still
has the start time the file records (`processes.start_time`), so a crashed gateway's leftover
never keeps a drain waiting, even once its pid is reused. Files are read with `read_regular`: a
FIFO planted there is skipped, it never blocks a reader.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from hermes_estop.model.errors import StoreError
from hermes_estop.model.timeutil import Clock, format_instant, parse_stamp
from hermes_estop.system.fsutil import FILE_MODE, read_regular
from hermes_estop.system.processes import same_process, start_time

__all__ = ["TURNS_DIR", "Turn", "TurnLedger", "pid_alive", "read_turns"]

TURNS_DIR = "gateway"
_PREFIX = "turns-"
_MAX_BYTES = 1024 * 1024


def pid_alive(pid: int) -> bool:
    """The process `pid` exists and has not ended (a zombie waiting to be reaped counts as
    ended). A process of another user counts as alive."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in (b"Z", b"X")


@dataclass(frozen=True)
class Turn:
    """One chat turn a gateway process is serving."""

    id: str
    user: str | None
    profile: str | None
    since: datetime | None
    pid: int
    home: Path


class TurnLedger:
    """The turns this process serves, mirrored to `<home>/gateway/turns-<pid>.json`."""

    def __init__(self, home: str | Path, clock: Clock, pid: int | None = None) -> None:
        self.dir = Path(home) / TURNS_DIR
        self.pid = os.getpid() if pid is None else pid
        self.path = self.dir / f"{_PREFIX}{self.pid}.json"
        self.started = start_time(self.pid)
        self.clock = clock
        self._turns: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    @contextmanager
    def track(self, user: str | None, profile: str | None) -> Iterator[str]:
        """Record a turn as in flight for the duration of the block. A ledger that cannot be
        written never stops the turn (the turn is served; the drain may not see it)."""
        turn = uuid.uuid4().hex[:12]
        with self._lock:
            self._turns[turn] = {"user": user, "profile": profile, "since": format_instant(self.clock())}
            self._write()
        try:
            yield turn
        finally:
            with self._lock:
                self._turns.pop(turn, None)
                self._write()

    def _write(self) -> None:
        try:
            if not self._turns:
                self.path.unlink(missing_ok=True)
                return
            self.dir.mkdir(parents=True, exist_ok=True)
            _replace(self.path, json.dumps({"pid": self.pid, "start": self.started, "turns": self._turns}).encode())
        except (OSError, StoreError):
            pass


def _replace(path: Path, data: bytes) -> None:
    """Replace `path` atomically (readers see the old list or the new one) but without the
    fsyncs of `fsutil.atomic_write`: the file describes this live process only, so after a crash
    it is worthless anyway (its pid is dead), and a turn should not pay ~3 ms of syncs twice."""
    tmp = path.with_name(f".{path.name}.tmp-{os.urandom(6).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.rename(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_turns(home: str | Path) -> list[Turn]:
    """The turns in flight in `home`, from the files of gateway processes still alive."""
    directory = Path(home) / TURNS_DIR
    try:
        names = sorted(entry for entry in os.listdir(directory) if entry.startswith(_PREFIX))
    except OSError:
        return []
    turns = []
    for name in names:
        try:
            data = json.loads(read_regular(directory / name, _MAX_BYTES))
            pid, rows = data["pid"], data["turns"]
            if not isinstance(pid, int) or not isinstance(rows, dict):
                continue
        except (OSError, StoreError, ValueError, KeyError, TypeError):
            continue
        started = data.get("start")
        if not pid_alive(pid) or (isinstance(started, int) and not same_process(pid, started)):
            continue
        for turn_id, row in rows.items():
            row = row if isinstance(row, dict) else {}
            turns.append(Turn(str(turn_id), row.get("user"), row.get("profile"), parse_stamp(row.get("since")),
                              pid, Path(home)))
    return turns
