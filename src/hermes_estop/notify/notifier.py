"""The notifier inside `hermes serve`: one thread per target, each a thin loop around
`TargetWorker.tick(now)` that paces itself with `time.monotonic` (a slow or dead target only
ever delays its own thread). On a shared store only the elected process delivers
(`HoldStore.leader_gate("notify")`, through the fleet's store); the others stand by. `gate()` never touches any of this.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.audit_event import AuditEvent
from hermes_estop.model.hold import Reading
from hermes_estop.model.text import one_line
from hermes_estop.notify.config import CommandTarget, WebhookTarget, load_targets
from hermes_estop.notify.cursors import CursorStore, FleetCursorStore
from hermes_estop.notify.source import AuditSource, FleetAuditSource
from hermes_estop.notify.target import DeliveryReport, TargetWorker, Upcoming
from hermes_estop.system.fsutil import open_shared_file
from hermes_estop.system.processes import wait_until_set

__all__ = ["LEADER_LOCK", "POLL", "FileLeader", "NotifyService", "build_workers", "fleet_readings", "notify_services"]

logger = logging.getLogger("hermes_estop.notify")

#: the file store's notifier election (`FileLeader`)
LEADER_LOCK = ".notify-leader.lock"
#: seconds between ticks of a target that is caught up (a new audit event waits at most this)
POLL = 1.0


def fleet_readings(fleet: Fleet) -> Callable[[datetime], Sequence[Reading]]:
    """The readings of every scope of the fleet at `now` (for the stale reminders)."""
    def read(now: datetime) -> Sequence[Reading]:
        return fleet.read(now=now).readings
    return read


def build_workers(fleet: Fleet, targets: Sequence[WebhookTarget | CommandTarget] | None = None,
                  *, source: AuditSource | None = None, cursors: CursorStore | None = None) -> list[TargetWorker]:
    root = fleet.root
    targets = load_targets(root) if targets is None else targets
    source = source if source is not None else FleetAuditSource(fleet)
    cursors = cursors if cursors is not None else FleetCursorStore(fleet)
    states = cursors.load() if targets else {}
    return [TargetWorker(t, source, cursors, root, standing=fleet_readings(fleet), state=states.get(t.name))
            for t in targets]


class FileLeader:
    """The file store's election: whoever holds `<root>/.notify-leader.lock` (a non-blocking
    `flock`, kept for the life of the process) delivers; a second `hermes serve` on the same
    fleet root stands by instead of sending every event twice and racing on the cursors. The
    kernel releases the lock when the holder dies, even by SIGKILL."""

    def __init__(self, root: Path) -> None:
        self.path = root / LEADER_LOCK
        self._fd: int | None = None
        self._guard = threading.Lock()

    def is_leader(self) -> bool:
        with self._guard:
            if self._fd is not None:
                return True
            try:
                fd = open_shared_file(self.path, os.O_RDWR)
            except OSError:
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return False
            self._fd = fd
            return True

    def close(self) -> None:
        with self._guard:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class NotifyService:
    """The `serve` service; `run(stop)` returns promptly once `stop` is set (a delivery in
    flight finishes or times out first: at most the target's `timeout`). Only the elected
    process delivers (`is_leader`; the file store's `FileLeader` when none is given); a
    process that becomes leader re-reads the cursors first, so a failover resumes where the
    previous leader stopped."""

    name = "notify"

    def __init__(self, fleet: Fleet, targets: Sequence[WebhookTarget | CommandTarget], *, poll: float = POLL,
                 is_leader: Callable[[], bool] | None = None,
                 enrich: Callable[[AuditEvent], dict[str, Any] | None] | None = None,
                 upcoming: Callable[[datetime, timedelta], Sequence[Upcoming]] | None = None) -> None:
        self.fleet = fleet
        self.enrich = enrich
        self.upcoming = upcoming
        self.targets = list(targets)
        self.poll = float(poll)
        self.is_leader = is_leader

    def _tick(self, make: Callable[[], TargetWorker], state: dict[str, TargetWorker], leading: bool,
              stop: threading.Event, name: str) -> tuple[DeliveryReport | None, datetime]:
        now = self.fleet.clock()
        try:
            worker = state.get("worker")
            if worker is None:
                worker = state["worker"] = make()
                worker.stopping = stop.is_set
            elif not leading:
                worker.reload()
            return worker.tick(now), now
        except OSError as exc:  # the state cannot be read or saved (StoreError too): retried next tick
            logger.warning("notify %s: %s", name, one_line(exc))
        except Exception:
            logger.exception("notify %s: tick failed", name)
        return None, now

    def _loop(self, make: Callable[[], TargetWorker], name: str, is_leader: Callable[[], bool],
              stop: threading.Event) -> None:
        next_tick = time.monotonic()
        leading = False
        state: dict[str, TargetWorker] = {}
        while not stop.is_set():
            delay = self.poll
            if is_leader():
                report, now = self._tick(make, state, leading, stop, name)
                leading = report is not None
                if report is not None and report.delivered and not report.caught_up:
                    next_tick = time.monotonic()  # more backlog: go on at once
                    continue
                if report is not None and report.waiting_until is not None:  # wake up when the retry is due
                    delay = min(delay, max(0.0, (report.waiting_until - now).total_seconds()) + 0.001)
            else:
                leading = False
            next_tick += delay
            current = time.monotonic()
            if next_tick < current:  # skip missed ticks instead of bursting
                next_tick = current + delay
            stop.wait(next_tick - current)

    def run(self, stop: threading.Event) -> None:
        root = self.fleet.root
        source = FleetAuditSource(self.fleet)
        cursors = FleetCursorStore(self.fleet)
        file_leader = FileLeader(root) if self.is_leader is None else None
        is_leader = self.is_leader or (file_leader.is_leader if file_leader is not None else (lambda: True))
        standing = fleet_readings(self.fleet)

        def maker(target: WebhookTarget | CommandTarget) -> Callable[[], TargetWorker]:
            return lambda: TargetWorker(target, source, cursors, root, standing=standing, enrich=self.enrich,
                                        upcoming=self.upcoming)

        threads = [threading.Thread(target=self._loop, args=(maker(t), t.name, is_leader, stop),
                                    name=f"hermes-notify-{t.name}", daemon=True) for t in self.targets]
        for thread in threads:
            thread.start()
        logger.info("notify: delivering to %s", ", ".join(f"{t.name} ({t.describe()})" for t in self.targets))
        try:
            wait_until_set(stop)
            for thread in threads:
                thread.join(max(t.timeout for t in self.targets) + 1.0)
        finally:
            if file_leader is not None:
                file_leader.close()


def notify_services(fleet: Fleet, leader_poll: float | None = None,
                    enrich: Callable[[AuditEvent], dict[str, Any] | None] | None = None,
                    upcoming: Callable[[datetime, timedelta], Sequence[Upcoming]] | None = None) -> list[NotifyService]:
    """The notifier, when `estop.toml` has `[[notify]]` tables (else nothing); `InvalidNotify`
    (one line naming file, table and field) when one is bad, so `hermes serve` refuses to start
    with it (exit 2) rather than silently dropping a target. `enrich`: what an event's body
    carries besides its line (`serve` gives a window's arm what it holds back); `upcoming`: the
    window occurrences arming soon, for the targets with `before`."""
    targets = load_targets(fleet.root)
    if not targets:
        return []
    return [NotifyService(fleet, targets, is_leader=fleet.leader_gate("notify", leader_poll), enrich=enrich,
                          upcoming=upcoming)]
