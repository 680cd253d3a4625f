"""One target's delivery, as a pure step: `TargetWorker.tick(now)` sends what is due at `now`
and returns a report; a thin loop (`notify.notifier`) calls it, one thread per target, so a
target that hangs or stays down never delays another or the scheduler.

A tick: when a retry is not yet due, nothing. Otherwise the entries after the cursor, oldest
first; an entry the target did not ask for (event, scope) or a corrupt line just moves the
cursor; a wanted one is sent, and only on success is the cursor moved past it and saved,
before the next one is sent. A failure stops the tick and schedules the retry after a capped
exponential backoff (`backoff_initial` doubling up to `backoff_max`). So events arrive in
order, each at least once, and a crash re-delivers at most the one event in flight.

Once the trail is drained, stale reminders: for every hold with no deadman that has stood
`stale_after` or longer, reminder number `n = floor(held_for / stale_after)` is sent once
(id `stale-<scope>-<generation>-<n>`), so a hold is reminded about every `stale_after`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hermes_estop.model.audit_event import AuditEvent
from hermes_estop.model.durations import format_duration
from hermes_estop.model.hold import HoldState, Reading
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import format_instant, parse_stamp
from hermes_estop.notify.config import CommandTarget, WebhookTarget
from hermes_estop.notify.cursors import CursorStore, TargetState
from hermes_estop.notify.deliver import DeliveryFailed, deliver
from hermes_estop.notify.source import AuditSource, event_body

__all__ = ["BATCH", "DeliveryReport", "TargetWorker", "Upcoming", "stale_reminders"]

logger = logging.getLogger("hermes_estop.notify")

#: entries read from the trail per tick
BATCH = 100

Sender = Callable[[WebhookTarget | CommandTarget, dict[str, Any]], None]


@dataclass
class DeliveryReport:
    delivered: list[str] = field(default_factory=list)
    skipped: int = 0
    error: str | None = None
    waiting_until: datetime | None = None
    caught_up: bool = False


def _hold_key(reading: Reading) -> str:
    fence = reading.fence.describe() if reading.fence is not None else "unknown"
    return f"{reading.location.scope} {fence}"


def stale_reminders(readings: Sequence[Reading], now: datetime, stale_after: timedelta,
                    sent: dict[str, int], seen: dict[str, str]) -> list[tuple[str, int, Reading, datetime]]:
    """(hold key, reminder number, reading, standing since) of every reminder due at `now` and
    not yet sent. A hold without `engaged_at` (a hand-made sentinel, an unreadable one) counts
    from when it was first seen (`seen`, updated here). Pure but for `seen`."""
    due = []
    standing = set()
    for reading in readings:
        if reading.state not in (HoldState.ACTIVE, HoldState.UNREADABLE):
            continue
        hold = reading.hold
        if hold is not None and hold.expires_at is not None:
            continue  # a deadman will lift it: not forgotten
        key = _hold_key(reading)
        standing.add(key)
        since = hold.engaged_at if hold is not None and hold.engaged_at is not None else None
        if since is None:
            since = parse_stamp(seen.get(key))
            if since is None:
                seen[key] = format_instant(now) or ""
                since = now
        number = int((now - since) / stale_after) if now > since else 0
        if number >= 1 and number > sent.get(key, 0):
            due.append((key, number, reading, since))
    for key in list(seen):
        if key not in standing:
            del seen[key]
    return due


#: one `upcoming` notice due: (occurrence key, when it arms, what the event says of it)
Upcoming = tuple[str, datetime, dict[str, Any]]


class TargetWorker:
    """The delivery state machine of one target (see the module docstring)."""

    def __init__(self, target: WebhookTarget | CommandTarget, source: AuditSource, cursors: CursorStore, fleet: Path,
                 *, standing: Callable[[datetime], Sequence[Reading]] | None = None,
                 state: TargetState | None = None, sender: Sender = deliver,
                 enrich: Callable[[AuditEvent], dict[str, Any] | None] | None = None,
                 upcoming: Callable[[datetime, timedelta], Sequence[Upcoming]] | None = None) -> None:
        self.target = target
        #: the window occurrences arming within a span of now (`before`: `serve` hands it in)
        self.upcoming = upcoming
        #: what an event's body carries besides the trail's line (a window's arm: what it holds back)
        self.enrich = enrich
        self.source = source
        self.cursors = cursors
        self.fleet = fleet
        self.standing = standing
        self.sender = sender
        self.state = state if state is not None else cursors.load().get(target.name, TargetState())
        #: asked between two deliveries: True ends the tick early (`hermes serve` is stopping)
        self.stopping: Callable[[], bool] = lambda: False

    def reload(self) -> None:
        """Re-read this target's state (another process may have delivered since: a failover)."""
        self.state = self.cursors.load().get(self.target.name, TargetState())

    @property
    def name(self) -> str:
        return self.target.name

    def _save(self) -> None:
        self.cursors.save(self.name, self.state)

    def _start(self) -> None:
        """Where a target with no cursor (or one for another store) begins."""
        state = self.state
        if state.position is None or state.source != self.source.name:
            state.source = self.source.name
            state.position = self.source.head() if self.target.start == "end" else 0
            self._save()

    def _failed(self, now: datetime, why: str, report: DeliveryReport) -> DeliveryReport:
        state = self.state
        state.failures += 1
        state.last_error = why
        state.last_attempt = format_instant(now)
        retry = now + timedelta(seconds=self.target.backoff(state.failures))
        state.next_attempt = format_instant(retry)
        report.error = why
        report.waiting_until = retry
        logger.warning("notify %s: delivery failed (%d in a row), next try at %s: %s", self.name, state.failures,
                       state.next_attempt, why)
        try:
            self._save()
        except OSError as exc:
            logger.warning("notify %s: cannot save the delivery state: %s", self.name, one_line(exc))
        return report

    def _succeeded(self, now: datetime, event_id: str) -> None:
        state = self.state
        state.delivered += 1
        state.last_id = event_id
        state.last_success = format_instant(now)
        state.last_attempt = state.last_success
        state.failures = 0
        state.last_error = None
        state.next_attempt = None

    def _send(self, event: dict[str, Any]) -> str | None:
        try:
            self.sender(self.target, event)
        except DeliveryFailed as exc:
            return str(exc) or "failed"
        except Exception as exc:  # noqa: BLE001 - a broken target is a failed delivery, never a dead loop
            return one_line(exc)
        return None

    def _extra(self, event: AuditEvent) -> dict[str, Any] | None:
        """`enrich(event)`; a failure sends the event without it (never a lost notification)."""
        if self.enrich is None:
            return None
        try:
            return self.enrich(event)
        except Exception:  # noqa: BLE001 - the event goes out as the trail has it
            return None

    def tick(self, now: datetime) -> DeliveryReport:
        """Deliver what is due at `now` (see the module docstring). Never raises for a target's
        or a trail's failure: it is the report's `error` and the retry is scheduled."""
        report = DeliveryReport()
        due = parse_stamp(self.state.next_attempt)
        if due is not None and now < due:
            report.waiting_until = due
            report.error = self.state.last_error
            return report
        try:
            self._start()
            items = self.source.read_after(self.state.position or 0, BATCH)
        except Exception as exc:  # noqa: BLE001 - an unreadable trail is retried like a failed delivery
            return self._failed(now, f"cannot read the audit trail: {one_line(exc)}", report)
        moved = False
        for item in items:
            if self.stopping():
                break
            event = item.event
            if event is None or not self.target.wants(event.event, event.location):
                self.state.position = item.end
                report.skipped += 1
                moved = True
                continue
            if moved:  # the skipped entries before this one are behind us for good
                self._save()
                moved = False
            why = self._send(event_body(item.id, event, self.fleet, self._extra(event)))
            if why is not None:
                return self._failed(now, why, report)
            self.state.position = item.end
            self._succeeded(now, item.id)
            self._save()
            report.delivered.append(item.id)
        if moved:
            self._save()
        if len(items) < BATCH and not self.stopping():
            report.caught_up = True
            report = self._remind(now, report)
            return report if report.error is not None else self._forewarn(now, report)
        return report

    def _remind(self, now: datetime, report: DeliveryReport) -> DeliveryReport:
        if self.standing is None or "stale" not in self.target.events:
            return report
        try:
            readings = self.standing(now)
        except Exception as exc:  # noqa: BLE001 - a failed read only delays a reminder
            logger.warning("notify %s: cannot read the holds for stale reminders: %s", self.name, one_line(exc))
            return report
        state = self.state
        before = dict(state.stale_seen)
        due = stale_reminders(readings, now, self.target.stale_after, state.stale, state.stale_seen)
        standing_keys = {_hold_key(r) for r in readings}
        pruned = {k: v for k, v in state.stale.items() if k in standing_keys}
        changed = before != state.stale_seen or pruned != state.stale
        state.stale = pruned
        for key, number, reading, since in due:
            scope = reading.location.scope
            if not self.target.wants("stale", scope):
                continue
            hold = reading.hold
            generation = hold.generation if hold is not None else None
            event_id = f"stale-{scope}-{generation or key.split(' ', 1)[1]}-{number}"
            event = {"id": event_id, "event": "stale", "scope": scope, "fleet": str(self.fleet),
                     "time": format_instant(now), "generation": generation,
                     "actor": hold.armed_by if hold is not None else None,
                     "reason": hold.reason if hold is not None else None, "deadline": None,
                     "detail": f"held without a deadman for {_human(now - since)}",
                     "engaged_at": format_instant(since), "held_seconds": int((now - since).total_seconds()),
                     "reminder": number}
            why = self._send(event)
            if why is not None:
                return self._failed(now, why, report)
            state.stale[key] = number
            self._succeeded(now, event_id)
            self._save()
            changed = False
            report.delivered.append(event_id)
        if changed:
            self._save()
        return report

    def _forewarn(self, now: datetime, report: DeliveryReport) -> DeliveryReport:
        """`before`: one `upcoming` event per window occurrence arming within that span of now,
        sent once (the keys kept in the target's state until the occurrence has armed)."""
        before = self.target.before
        if before is None or self.upcoming is None:
            return report
        try:
            due = self.upcoming(now, before)
        except Exception as exc:  # noqa: BLE001 - a failed read only delays a notice
            logger.warning("notify %s: cannot read the windows for upcoming notices: %s", self.name, one_line(exc))
            return report
        state = self.state
        kept = {k: v for k, v in state.upcoming.items() if (parse_stamp(v) or now) > now}
        changed = kept != state.upcoming
        state.upcoming = kept
        for key, arm_at, body in due:
            if key in state.upcoming or not (self.target.scopes is None or body.get("scope") in self.target.scopes):
                continue
            event_id = f"upcoming-{key}"
            event = {"id": event_id, "event": "upcoming", "fleet": str(self.fleet), "time": format_instant(now),
                     "arms_at": format_instant(arm_at), **body}
            why = self._send(event)
            if why is not None:
                return self._failed(now, why, report)
            state.upcoming[key] = format_instant(arm_at) or ""
            self._succeeded(now, event_id)
            self._save()
            changed = False
            report.delivered.append(event_id)
        if changed:
            self._save()
        return report

    def pending(self) -> tuple[int, datetime | None]:
        """(wanted events after the cursor, the time of the oldest): the lag `notify status` shows."""
        position = self.state.position
        if position is None or self.state.source != self.source.name:
            position = self.source.head() if self.target.start == "end" else 0
        count = 0
        oldest: datetime | None = None
        while True:
            items = self.source.read_after(position, 1000)
            for item in items:
                if item.event is not None and self.target.wants(item.event.event, item.event.location):
                    count += 1
                    if oldest is None:
                        oldest = item.event.time
            if len(items) < 1000:
                return count, oldest
            position = items[-1].end


def _human(delta: timedelta) -> str:
    return format_duration(timedelta(seconds=int(delta.total_seconds())))
