"""A hold that lives exactly as long as a maintenance job (`hermes run`, a window's task): its
deadman is a short LEASE, renewed while the job runs, so a job (or the `hermes run` holding it)
that dies stops renewing and the fleet wakes within one lease instead of hours later.

The lease is fenced on the generation it last wrote. A renewal is a re-arm allowed only while
that generation still stands (`EngageRequest.only_if`); the release at the end is a release of
that generation only. An operator who re-arms or resumes in between owns the hold from then on:
the lease stops renewing, never overwrites their hold, never releases it, and says so.

A renewal the store refuses is retried after `retry_delay` (bounded backoff) until one gets
through. A lease that lapsed anyway (the store down too long, the runner stopped) is armed again
only when the audit trail shows that nobody else wrote its scope since its last renewal: an
operator's resume or re-arm in the gap is never undone.

`Lease` is the decision and the write; the loop that calls `renew(now)` after each
`next_attempt_in()` is the caller's (`cli/run.py`), so a fake clock drives every rule in the tests.
It reads and writes through `LeaseHolds`, which the local fleet implements (`FleetHolds`) and a
client of the write API can implement too (`hermes run --server`, issue 44 item 1): the
decisions stay here, whichever side holds the hold.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.audit_event import AuditEntry, AuditEvent
from hermes_estop.model.errors import EstopError, HoldConflict
from hermes_estop.model.hold import VACANT, Allow, EngageRequest, Hold, HoldState, Reading
from hermes_estop.model.homes import Location
from hermes_estop.model.policy import PolicyRefused
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import display_instant

__all__ = ["FleetHolds", "HoldsRefused", "Lease", "LeaseHolds", "LeaseState", "Renewer", "retry_delay"]

logger = logging.getLogger("hermes_estop.fleet.lease")

#: the audit events that change what stands at a scope, each as an operator reads it
_WRITES = {"engage": "armed", "rearm": "re-armed", "release": "released", "retire": "retired", "expire": "expired"}
#: the lease's own lines: its writes, and the deadman's retire of its lapsed hold
_OWN = frozenset({"engage", "rearm", "expire"})
_PAGE = 500


def retry_delay(ttl: timedelta, failures: int) -> timedelta:
    """How long after its `failures`-th failed renewal in a row a lease tries again: a 60th of
    the lease (at least 50 ms, at most 1 s), doubling, never more than a 12th of the lease (at
    most 10 s). So a store that comes back is written within that bound, and the two thirds of
    a lease left after a missed renewal hold at least eight attempts."""
    first = min(max(ttl / 60, timedelta(milliseconds=50)), timedelta(seconds=1))
    cap = min(ttl / 12, timedelta(seconds=10))
    return min(first * (1 << min(max(0, failures - 1), 20)), cap)


class HoldsRefused(EstopError, PermissionError):
    """A write of the lease refused for good by who keeps the holds (a server's 401 or 403: a
    token revoked, a role too low): retrying would only be refused again."""


class LeaseHolds(Protocol):
    """What a lease reads and writes at its scope. `engage` and `release` raise `HoldConflict`
    for a fence that fails (`EngageRequest.only_if`, the generation released), `PolicyRefused`
    for the fleet's policy, `HoldsRefused` for another refusal that is final, and any other
    `EstopError` for one worth retrying (the store, the server down); `standing` never raises (a
    reading it could not make is UNREADABLE, with its problem); `audit_after` pages the trail
    after a cursor of `audit_head`, which raises an `EstopError` where no trail can be read."""

    @property
    def actor(self) -> str: ...

    def engage(self, location: Location, request: EngageRequest, now: datetime) -> Hold: ...

    def release(self, location: Location, generation: str | None, now: datetime) -> Reading | None: ...

    def standing(self, location: Location, now: datetime) -> Reading: ...

    def audit_head(self) -> int: ...

    def audit_after(self, position: int, limit: int) -> list[AuditEntry]: ...


class FleetHolds:
    """`LeaseHolds` on this host's fleet (its store, its policy, its audit trail)."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    @property
    def actor(self) -> str:
        return self.fleet.actor

    def engage(self, location: Location, request: EngageRequest, now: datetime) -> Hold:
        return self.fleet.engage(location, request, now)

    def release(self, location: Location, generation: str | None, now: datetime) -> Reading | None:
        return self.fleet.release(location, generation, now)

    def standing(self, location: Location, now: datetime) -> Reading:
        return self.fleet.read((location,), now).readings[0]

    def audit_head(self) -> int:
        return self.fleet.store.audit_head()

    def audit_after(self, position: int, limit: int) -> list[AuditEntry]:
        return self.fleet.store.audit_after(position, limit)


@dataclass
class LeaseState:
    """What the lease holds now: `generation` (ours, or None when we hold nothing), whether an
    operator took the hold over, and the deadline last written."""

    generation: str | None
    deadline: datetime | None
    taken_over: str | None = None  # why the lease let go of the hold, for the operator
    borrowed: bool = False  # a hold that was not ours stood when we started: we run under it


class Lease:
    """The hold of one job at `location`, armed by `arm`, renewed by `renew`, ended by `finish`."""

    def __init__(self, fleet: Fleet | LeaseHolds, location: Location, ttl: timedelta, *, reason: str,
                 allow: Allow | None = None, armed_by: str | None = None,
                 window: Mapping[str, Any] | None = None, say: Callable[[str], None] | None = None) -> None:
        if ttl <= timedelta(0):
            raise ValueError("a lease needs a positive ttl")
        #: where the hold is read and written: the local fleet, or what implements `LeaseHolds`
        self.holds: LeaseHolds = FleetHolds(fleet) if isinstance(fleet, Fleet) else fleet
        self.location = location
        self.ttl = ttl
        self.reason = reason
        self.allow = allow
        self.armed_by = armed_by or self.holds.actor
        self.window = window
        self.state = LeaseState(None, None)
        #: every generation this lease wrote (a waiter counts a consumer that saw any of them)
        self.generations: set[str] = set()
        #: what the job's output says (renewals failing and recovering, letting go)
        self.say: Callable[[str], None] = say if say is not None else logger.warning
        #: failed renewals in a row, and when the first of them was tried
        self.failures = 0
        self.failing_since: datetime | None = None
        #: the audit cursor just before the lease's last write: what came after it, at this
        #: scope, decides whether a lapsed lease may arm again (None: the trail could not be read)
        self._mark: int | None = None
        #: why the audit cursor could not be read at the last write (None: it was, or none yet)
        self._mark_problem: str | None = None
        self._lapse_said = False

    def _audit_mark(self) -> int | None:
        try:
            mark = self.holds.audit_head()
        except (EstopError, OSError) as exc:
            self._mark_problem = one_line(exc)
            return None
        self._mark_problem = None
        return mark

    def _wrote(self, hold: Hold, mark: int | None) -> Hold:
        self.state = LeaseState(hold.generation, hold.expires_at)
        self._mark = mark
        if hold.generation is not None:
            self.generations.add(hold.generation)
        return hold

    def next_attempt_in(self) -> timedelta:
        """How long the runner waits before its next `renew`: a third of the lease after a
        renewal that got through, `retry_delay` after one the store refused."""
        return retry_delay(self.ttl, self.failures) if self.failures else self.renew_every

    @property
    def renew_every(self) -> timedelta:
        """How often `renew` should be called: a third of the lease, so two renewals can fail
        (a store briefly down) before the hold lifts."""
        return self.ttl / 3

    def arm(self, now: datetime) -> LeaseState:
        """Arm the lease's hold where none stands. Where one already stands (an operator's pause
        over which the job runs) it is left exactly as it is, borrowed: never renewed, never
        released, and the job runs under it."""
        request = EngageRequest(reason=self.reason, allow=self.allow, expires_at=now + self.ttl, replace=True,
                                armed_by=self.armed_by, window=self.window, only_if=VACANT)
        mark = self._audit_mark()
        try:
            hold = self.holds.engage(self.location, request, now)
        except HoldConflict:
            standing = self.holds.standing(self.location, now)
            generation = standing.hold.generation if standing.hold is not None else None
            self.state = LeaseState(generation, standing.hold.expires_at if standing.hold else None, borrowed=True)
            return self.state
        self._wrote(hold, mark)
        return self.state

    def _rewrite(self, now: datetime, *, reason: str | None, deadline: datetime) -> Hold | None:
        """Re-arm our hold (fenced on our generation); None when it is no longer ours."""
        generation = self.state.generation
        if generation is None or self.state.borrowed or self.state.taken_over:
            return None
        request = EngageRequest(reason=reason, expires_at=deadline, armed_by=self.armed_by, window=self.window,
                                only_if=frozenset({generation}))
        mark = self._audit_mark()
        try:
            hold = self.holds.engage(self.location, request, now)
        except HoldConflict:
            if self.state.deadline is not None and now >= self.state.deadline:
                return self._rearm_lapsed(now, reason, deadline)
            self._let_go(now)
            return None
        return self._wrote(hold, mark)

    def _rearm_lapsed(self, now: datetime, reason: str | None, deadline: datetime) -> Hold | None:
        """Our deadline passed before a renewal got through (the store was down, the runner was
        stopped): the hold has lifted. Arm it again only when nobody else wrote the scope since
        our last write (the audit trail says); an operator's resume or re-arm in the gap stands."""
        act = self._others_act()
        if act is not None:
            self._stand_aside(f"the lease lapsed at {_instant(self.state.deadline)}, and since its last renewal {act}")
            return None
        request = EngageRequest(reason=reason if reason is not None else self.reason, allow=self.allow,
                                expires_at=deadline, replace=True, armed_by=self.armed_by, window=self.window,
                                only_if=VACANT)
        mark = self._audit_mark()
        try:
            hold = self.holds.engage(self.location, request, now)
        except HoldConflict:
            self._let_go(now)
            return None
        self.say(f"lease at {self.location.describe()}: lapsed at {_instant(self.state.deadline)} before a renewal "
                 f"got through (the scope was free until {_instant(now)}; nobody else wrote it): armed again "
                 f"(generation {hold.generation})")
        return self._wrote(hold, mark)

    def _others_act(self) -> str | None:
        """What someone else wrote at our scope since our last write, from the audit trail (None:
        nobody). A trail that cannot be read counts as someone: re-arming blind could undo an
        operator."""
        if self._mark is None:
            why = f" ({self._mark_problem})" if self._mark_problem else ""
            return (f"the audit trail could not be read at its last renewal{why}; an operator's act cannot be "
                    "ruled out")
        position = self._mark
        try:
            while True:
                entries = self.holds.audit_after(position, _PAGE)
                for entry in entries:
                    act = self._act(entry.event)
                    if act is not None:
                        return act
                if len(entries) < _PAGE:
                    return None
                position = entries[-1].end
        except (EstopError, OSError) as exc:
            return f"the audit trail cannot be read ({one_line(exc)}; an operator's act cannot be ruled out)"

    def _act(self, event: AuditEvent | None) -> str | None:
        if event is None or event.location != self.location.scope or event.event not in _WRITES:
            return None
        if event.event in _OWN and event.generation in self.generations:
            return None
        return (f"{event.actor or 'someone'} {_WRITES[event.event]} it at {_instant(event.time)} "
                f"(generation {event.generation or '?'})")

    def _stand_aside(self, why: str) -> None:
        self.state.taken_over = why
        self.say(f"lease at {self.location.describe()}: {why}: not armed again, that decision stands; the job goes "
                 "on, and nothing is renewed or released by it")

    def _let_go(self, now: datetime) -> None:
        standing = self.holds.standing(self.location, now)
        if standing.state is HoldState.ABSENT:
            why = "the hold was resumed by someone else"
        else:
            other = standing.hold.generation if standing.hold is not None else "unreadable"
            why = f"someone re-armed the hold (generation {other})"
        self.state.taken_over = why
        self.say(f"lease at {self.location.describe()}: {why}; it is theirs now: not renewed, not released by this job")

    def renew(self, now: datetime) -> bool:
        """Move our deadman to `now + ttl`. False when the hold is no longer ours (nothing
        written), the fleet's policy refused it (final: never retried), or the store refused the
        write (said once when renewals start failing and once when they recover; the caller
        retries after `next_attempt_in()`, and the job is never stopped for it)."""
        try:
            renewed = self._rewrite(now, reason=None, deadline=now + self.ttl) is not None
        except PolicyRefused as exc:
            # a judgement, not an outage: retrying would only refuse again (and put each
            # refusal on the record); a renewal continues an admitted arm, so this is rare
            self._stand_aside(f"the fleet's policy refused a renewal ({one_line(exc)})")
            return False
        except HoldsRefused as exc:  # a credential or a role refused: final, as a policy's refusal
            self._stand_aside(f"a renewal was refused ({one_line(exc)})")
            return False
        except EstopError as exc:
            self._failed(now, exc)
            return False
        self._recovered(now)
        return renewed

    def _failed(self, now: datetime, exc: EstopError) -> None:
        where = self.location.describe()
        self.failures += 1
        if self.failures == 1:
            self.failing_since = now
            self.say(f"lease at {where}: renewal failed at {_instant(now)} ({one_line(exc)}); retried from "
                     f"{retry_delay(self.ttl, 1).total_seconds():g}s to every {retry_delay(self.ttl, 99).total_seconds():g}s "
                     f"until renewed; the lease lapses at {_instant(self.state.deadline)}; the job goes on")
        lapsed = self.state.deadline is not None and now >= self.state.deadline
        if lapsed and not self._lapse_said:
            self._lapse_said = True
            self.say(f"lease at {where}: lapsed at {_instant(self.state.deadline)} while renewals failed: the scope "
                     "is free meanwhile")

    def _recovered(self, now: datetime) -> None:
        if self.failures:
            self.say(f"lease at {self.location.describe()}: renewals recovered at {_instant(now)} after "
                     f"{self.failures} failed attempt(s) since {_instant(self.failing_since)}")
        self.failures = 0
        self.failing_since = None
        self._lapse_said = False

    def finish(self, now: datetime, exit_code: int, *, on_failure: str, failure_ttl: timedelta,
               command: str) -> str:
        """The end of the job: release our hold on success (or on failure with `on_failure ==
        "release"`), else keep it with the reason "maintenance failed: CMD exited N" and a fixed
        deadman `failure_ttl` from now. Returns one line saying what happened to the hold."""
        where = self.location.describe()
        if self.state.borrowed:
            return f"the hold at {where} was not this job's; left as it is"
        if self.state.taken_over:
            return f"{self.state.taken_over}: left as it is; {self._left_standing(now)}"
        generation = self.state.generation
        if exit_code != 0 and on_failure == "hold":
            reason = f"maintenance failed: {command} exited {exit_code}"
            try:
                hold = self._rewrite(now, reason=reason, deadline=now + failure_ttl)
            except EstopError as exc:
                return f"could not keep {where} held for the failure ({one_line(exc)}): {self._left_standing(now)}"
            if hold is None:
                why = self.state.taken_over or "the hold is no longer this job's"
                return f"{why}: left as it is; {self._left_standing(now)}"
            return f"held at {where} ({reason}) until {_instant(hold.expires_at)}"
        try:
            removed = self.holds.release(self.location, generation, now)
        except HoldConflict:
            self._let_go(now)
            return f"{self.state.taken_over}: left as it is; {self._left_standing(now)}"
        except EstopError as exc:
            return f"the release of {where} failed ({one_line(exc)}): {self._left_standing(now)}"
        self.state = LeaseState(None, None)
        return f"released {where}" if removed is not None else f"no hold at {where} to release"

    def _left_standing(self, now: datetime) -> str:
        """What holds our scope now and until when, for the job's last line."""
        where = self.location.describe()
        reading = self.holds.standing(self.location, now)
        if not reading.active:
            return f"nothing holds {where}"
        hold = reading.hold
        if hold is None:
            ours = (f"; this job's hold lifts at {_instant(self.state.deadline)} at the latest"
                    if self.state.deadline is not None and not self.state.taken_over else "")
            return f"the hold at {where} cannot be read ({one_line(reading.problem or 'unreadable')}){ours}"
        whose = "this job's hold" if hold.generation in self.generations else "the hold"
        until = (f"until {_instant(hold.expires_at)}" if hold.expires_at is not None
                 else "with no deadman, until an operator resumes")
        return f"{whose} at {where} (generation {hold.generation}) stands {until}"


class Renewer:
    """The thread that renews `lease` (every ttl/3; after a refused renewal, again after the
    lease's bounded backoff) until the hold is no longer the lease's or `stop` is called. The
    job is never stopped for a failed renewal. `stop` returns only once no renewal is in
    flight, so the hold's final write never races one. `clock`: the `now` each renewal is
    written at (the fleet's, or this host's for a lease held over the write API)."""

    def __init__(self, lease: Lease, clock: Callable[[], datetime]) -> None:
        self.lease = lease
        self.clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hermes-run-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        lease = self.lease
        while not (lease.state.taken_over or lease.state.borrowed):
            if self._stop.wait(lease.next_attempt_in().total_seconds()):
                return
            lease.renew(self.clock())

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()


def _instant(when: datetime | None) -> str:
    return display_instant(when) or "?"
