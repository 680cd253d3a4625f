"""A hold that lives exactly as long as a maintenance job (`hermes run`, a window's task): its
deadman is a short LEASE, renewed while the job runs, so a job (or the `hermes run` holding it)
that dies stops renewing and the fleet wakes within one lease instead of hours later.

The lease is fenced on the generation it last wrote. A renewal is a re-arm allowed only while
that generation still stands (`EngageRequest.only_if`); the release at the end is a release of
that generation only. An operator who re-arms or resumes in between owns the hold from then on:
the lease stops renewing, never overwrites their hold, never releases it, and says so.

`Lease` is the decision and the write; the loop that calls `renew(now)` every `ttl/3` is the
caller's (`cli/run.py`), so a fake clock drives every rule in the tests.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .errors import EstopError, HoldConflict
from .fleet import Fleet
from .hold import VACANT, Allow, EngageRequest, Hold, HoldState
from .homes import Location

__all__ = ["Lease", "LeaseState"]

logger = logging.getLogger("hermes_estop.lease")


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

    def __init__(self, fleet: Fleet, location: Location, ttl: timedelta, *, reason: str,
                 allow: Allow | None = None, armed_by: str | None = None,
                 window: Mapping[str, Any] | None = None) -> None:
        if ttl <= timedelta(0):
            raise ValueError("a lease needs a positive ttl")
        self.fleet = fleet
        self.location = location
        self.ttl = ttl
        self.reason = reason
        self.allow = allow
        self.armed_by = armed_by or fleet.actor
        self.window = window
        self.state = LeaseState(None, None)
        #: every generation this lease wrote (a waiter counts a consumer that saw any of them)
        self.generations: set[str] = set()

    def _wrote(self, hold: Hold) -> Hold:
        self.state = LeaseState(hold.generation, hold.expires_at)
        if hold.generation is not None:
            self.generations.add(hold.generation)
        return hold

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
        try:
            hold = self.fleet.engage(self.location, request, now)
        except HoldConflict:
            standing = self.fleet.read((self.location,), now).readings[0]
            generation = standing.hold.generation if standing.hold is not None else None
            self.state = LeaseState(generation, standing.hold.expires_at if standing.hold else None, borrowed=True)
            return self.state
        self._wrote(hold)
        return self.state

    def _rewrite(self, now: datetime, *, reason: str | None, deadline: datetime) -> Hold | None:
        """Re-arm our hold (fenced on our generation); None when it is no longer ours."""
        generation = self.state.generation
        if generation is None or self.state.borrowed or self.state.taken_over:
            return None
        request = EngageRequest(reason=reason, expires_at=deadline, armed_by=self.armed_by, window=self.window,
                                only_if=frozenset({generation}))
        try:
            hold = self.fleet.engage(self.location, request, now)
        except HoldConflict:
            if self.state.deadline is not None and now >= self.state.deadline:
                return self._rearm_lapsed(now, reason, deadline)
            self._let_go(now)
            return None
        return self._wrote(hold)

    def _rearm_lapsed(self, now: datetime, reason: str | None, deadline: datetime) -> Hold | None:
        """Our deadline passed before a renewal got through (the store was down): the hold has
        lifted. Arm it again where nothing else stands; someone else's hold is theirs."""
        request = EngageRequest(reason=reason if reason is not None else self.reason, allow=self.allow,
                                expires_at=deadline, replace=True, armed_by=self.armed_by, window=self.window,
                                only_if=VACANT)
        try:
            hold = self.fleet.engage(self.location, request, now)
        except HoldConflict:
            self._let_go(now)
            return None
        logger.warning("lease at %s: lapsed at %s before a renewal got through; armed again (generation %s)",
                       self.location.describe(), self.state.deadline, hold.generation)
        return self._wrote(hold)

    def _let_go(self, now: datetime) -> None:
        standing = self.fleet.read((self.location,), now).readings[0]
        if standing.state is HoldState.ABSENT:
            why = "the hold was resumed by someone else"
        else:
            other = standing.hold.generation if standing.hold is not None else "unreadable"
            why = f"someone re-armed the hold (generation {other})"
        self.state.taken_over = why
        logger.warning("lease at %s: %s; it is theirs now: not renewed, not released by this job",
                       self.location.describe(), why)

    def renew(self, now: datetime) -> bool:
        """Move our deadman to `now + ttl`. False when the hold is no longer ours (nothing
        written) or the store refused the write (logged; the caller retries at its next
        renewal, and the job is never stopped for it)."""
        try:
            return self._rewrite(now, reason=None, deadline=now + self.ttl) is not None
        except EstopError as exc:
            logger.warning("lease at %s: renewal failed (%s); retried at the next renewal, the job goes on",
                           self.location.describe(), exc)
            return False

    def finish(self, now: datetime, exit_code: int, *, on_failure: str, failure_ttl: timedelta,
               command: str) -> str:
        """The end of the job: release our hold on success (or on failure with `on_failure ==
        "release"`), else keep it with the reason "maintenance failed: CMD exited N" and a fixed
        deadman `failure_ttl` from now. Returns one line saying what happened to the hold."""
        where = self.location.describe()
        if self.state.borrowed:
            return f"the hold at {where} was not this job's; left as it is"
        if self.state.taken_over:
            return f"{self.state.taken_over}: the hold at {where} is left as it is"
        generation = self.state.generation
        if exit_code != 0 and on_failure == "hold":
            reason = f"maintenance failed: {command} exited {exit_code}"
            hold = self._rewrite(now, reason=reason, deadline=now + failure_ttl)
            if hold is None:
                return f"{self.state.taken_over or 'the hold is no longer this job'}: left as it is"
            return f"held at {where} ({reason}) until {hold.expires_at.isoformat() if hold.expires_at else '?'}"
        try:
            removed = self.fleet.release(self.location, generation, now)
        except HoldConflict:
            self._let_go(now)
            return f"{self.state.taken_over}: the hold at {where} is left as it is"
        self.state = LeaseState(None, None)
        return f"released {where}" if removed is not None else f"no hold at {where} to release"
