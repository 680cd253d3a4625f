"""The coverage audit behind `hermes doctor` (issue 21): an acknowledgement proves that a
registered consumer saw a hold, not that no other code path starts work. This looks for the
other paths in what the work itself records (cron claims and runs, kanban claims, gateway turns
all carry start times and pids):

(a) breaches: work that started while a hold covering it stood and did not admit it;
(b) unregistered dispatchers: work claimed by a process that is not a registered consumer;
(c) consumers lost or stalled.

The hold intervals come from the audit trail (engage/re-arm opens one, release/retire/expire
closes it) and from the holds standing now. The allowlist of a hold that was lifted is not on the
record, so work started under such a hold is flagged whoever owned it (said so in the finding).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hermes_estop.consumers.board import Board, claimant
from hermes_estop.consumers.crontable import CronTable
from hermes_estop.consumers.inflight import fleet_homes
from hermes_estop.consumers.turns import read_turns
from hermes_estop.fleet.registry.entries import ConsumerState, this_host
from hermes_estop.fleet.registry.roster import Roster, read_roster
from hermes_estop.model.hold import Reading
from hermes_estop.model.selector import Selector, selector_of_detail
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import display_instant
from hermes_estop.process.check import Snapshot
from hermes_estop.process.estop import Estop

__all__ = ["Finding", "HoldSpan", "RecordedWork", "audit_coverage", "breaches", "hold_spans"]

_OPENS = ("engage", "rearm")
_CLOSES = ("release", "retire", "expire")


@dataclass(frozen=True)
class HoldSpan:
    scope: str
    generation: str | None
    start: datetime
    end: datetime | None
    #: the standing reading, when it still stands (its allowlist decides who it admitted)
    standing: Reading | None = None
    #: a scoped hold's selector (None: the full hold, which covers all work of its scope)
    selector: Selector | None = None

    def covers(self, profile: str | None, component: str | None = None, job: Any = None) -> bool:
        if self.selector is not None and not self.selector.covers(component, job):
            return False
        return self.scope == "fleet" or (profile is not None and self.scope == profile)

    def admits(self, owner: object, profile: str | None, now: datetime) -> bool:
        if self.standing is None:
            return False  # a lifted hold's allowlist is not on the record
        return Snapshot((self.standing,), now).admits(owner, profile)


@dataclass(frozen=True)
class RecordedWork:
    """One piece of work as recorded: what, when it started, for whom, and which pid claimed it."""

    kind: str
    name: str
    started_at: datetime
    owner: str | None
    profile: str | None
    #: the process that claimed it (the dispatcher or ticker), when recorded
    claimed_by: int | None
    #: the worker's pid, while it runs
    worker: int | None
    running: bool

    def describe(self) -> str:
        who = []
        if self.claimed_by:
            who.append(f"claimed by pid {self.claimed_by}")
        if self.worker:
            who.append(f"worker pid {self.worker}")
        return f"{self.kind} {self.name} started {display_instant(self.started_at)}" + (
            f" ({', '.join(who)})" if who else " (claimant not recorded)")


@dataclass(frozen=True)
class Finding:
    kind: str  # breach, unregistered, lost, stalled, unreadable
    text: str
    pid: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "pid": self.pid}


def hold_spans(events: list[Any], standing: tuple[Reading, ...]) -> list[HoldSpan]:
    """Every hold interval the audit trail and the standing holds show, per scope and hold (the
    full one, and each scoped one by the id and selector its audit lines carry)."""
    spans: list[HoldSpan] = []
    open_at: dict[tuple[str, str | None], tuple[str | None, datetime, Selector | None]] = {}
    for event in events:
        scoped = selector_of_detail(getattr(event, "detail", None))
        key = (event.location, scoped[0] if scoped else None)
        selector = scoped[1] if scoped else None
        if event.event in _OPENS:
            if key in open_at:
                generation, start, was = open_at[key]
                spans.append(HoldSpan(event.location, generation, start, event.time, selector=was))
            open_at[key] = (event.generation, event.time, selector)
        elif event.event in _CLOSES and key in open_at:
            generation, start, was = open_at.pop(key)
            spans.append(HoldSpan(event.location, generation, start, event.time, selector=was))
    by_key = {(r.location.scope, r.hold.hold_id if r.hold is not None else None): r for r in standing}
    for key, (generation, start, selector) in open_at.items():
        reading = by_key.pop(key, None)
        spans.append(HoldSpan(key[0], generation, start, None, reading, selector))
    for (scope, _), reading in by_key.items():  # standing with no audit line (hand-written)
        hold = reading.hold
        if hold is not None and hold.engaged_at is not None:
            spans.append(HoldSpan(scope, hold.generation, hold.engaged_at, None, reading, hold.selector))
    return spans


#: the component each kind of recorded work gates as (`cron`, `kanban`, `gateway` consumers)
_COMPONENT = {"cron job": "cron", "kanban card": "kanban", "gateway turn": "gateway"}


def breaches(work: list[RecordedWork], spans: list[HoldSpan], now: datetime) -> list[Finding]:
    """(a): each piece of work that started strictly inside a span covering it that did not admit it."""
    found = []
    for item in work:
        for span in spans:
            inside = span.start < item.started_at and (span.end is None or item.started_at < span.end)
            # a kanban card's title is not recorded here: a job glob is judged on its assignee only
            names = item.name if item.kind == "cron job" else (item.profile,) if item.kind == "kanban card" else None
            covers = span.covers(item.profile, _COMPONENT.get(item.kind), names)
            if inside and covers and not span.admits(item.owner, item.profile, now):
                lifted = "" if span.standing is not None else "; its allowlist is not on the record"
                found.append(Finding("breach", f"BREACH: {item.describe()} while the {span.scope} hold "
                                               f"{span.generation or '(no generation)'} stood (armed "
                                               f"{display_instant(span.start)}){lifted}",
                                     item.claimed_by or item.worker))
                break
    return found


def _work(estop: Estop, now: datetime) -> tuple[list[RecordedWork], list[str]]:
    """Every cron run and claim, kanban claim and gateway turn on record."""
    work: list[RecordedWork] = []
    problems: list[str] = []
    layout = estop.layout
    for home in fleet_homes(estop):
        try:
            jobs = CronTable(home).jobs()
        except Exception as exc:  # noqa: BLE001 - one unreadable table is one problem line
            problems.append(f"cron table of {home}: {one_line(exc)}")
            jobs = []
        profile_of_home = None if home == layout.root else home.name
        for job in jobs:
            profile = job.profile or profile_of_home
            if job.claim is not None and job.running(now):
                work.append(RecordedWork("cron job", job.name, job.claim.since, job.owner, profile, job.claim.pid or None,
                                 job.claim.worker, True))
            elif job.last is not None and job.last.status != "error":
                work.append(RecordedWork("cron job", job.name, job.last.started_at, job.owner, profile, None, None, False))
        try:
            for turn in read_turns(home):
                if turn.since is not None:
                    work.append(RecordedWork("gateway turn", turn.id, turn.since, turn.user, turn.profile or profile_of_home,
                                     turn.pid, None, True))
        except Exception as exc:  # noqa: BLE001
            problems.append(f"gateway turns of {home}: {one_line(exc)}")
    board = Board(layout.root, clock=estop.clock)
    if board.exists():
        try:
            for card in board.cards():
                if card.started_at is None:
                    continue
                work.append(RecordedWork("kanban card", str(card.id), card.started_at, card.owner, card.profile,
                                 claimant(card.claim), card.pid, card.status == "running"))
        except Exception as exc:  # noqa: BLE001
            problems.append(f"kanban board: {one_line(exc)}")
    return work, problems


def unregistered(work: list[RecordedWork], roster: Roster, host: str) -> list[Finding]:
    """(b): running work whose claimant is not a registered consumer (on this host, where pids
    can be compared), or whose claimant is not recorded at all."""
    known = {row.entry.pid for row in roster.rows if row.entry.host == host and row.state is not ConsumerState.LOST}
    found = []
    for item in work:
        if not item.running or item.kind == "gateway turn":
            continue
        if item.claimed_by is None:
            found.append(Finding("unregistered", f"UNREGISTERED: {item.describe()}: no registered dispatcher "
                                                 "made this claim", item.worker))
        elif item.claimed_by not in known:
            found.append(Finding("unregistered", f"UNREGISTERED: {item.describe()}: pid {item.claimed_by} is not a "
                                                 "registered consumer (dispatching outside the registry)",
                                 item.claimed_by))
    return found


def audit_coverage(estop: Estop) -> tuple[list[Finding], Roster]:
    """Every finding (a), (b), (c) for `estop`'s fleet, and the roster it judged from."""
    fleet = estop.fleet
    snapshot = fleet.read()
    roster = read_roster(fleet)
    events, _ = fleet.history()
    spans = hold_spans(events, snapshot.every_active)
    work, problems = _work(estop, snapshot.now)
    findings = breaches(work, spans, snapshot.now) + unregistered(work, roster, this_host())
    for row in roster.rows:
        if row.state is ConsumerState.LOST:
            findings.append(Finding("lost", f"LOST: {row.describe()} (last report {display_instant(row.entry.reported_at)})",
                                    row.entry.pid))
        elif row.state is ConsumerState.STALLED:
            findings.append(Finding("stalled", f"STALLED: {row.describe()} (no report for {row.lag:.1f}s)",
                                    row.entry.pid))
    if roster.problem is not None:
        findings.append(Finding("unreadable", f"cannot read the consumer registry: {roster.problem}"))
    findings += [Finding("unreadable", f"cannot read the {p}") for p in problems]
    return findings, roster
