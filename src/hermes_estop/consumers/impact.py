"""What a hold over an interval would hold back (issue 47): the pure half of `hermes windows
impact` and `hermes check --at T --for D --impact`.

A window's occurrence (or an unplanned pause) is a set of planned holds (`PlannedHold`: scope,
`[start, until)`, allowlist, selector). Given them and what the consumers have queued (each
home's cron jobs, the board's ready cards, the registered consumers), `impact` says, without any
I/O, what the consumers' own gates would do:

- each cron run scheduled inside the interval is asked about as the cron tick asks
  (`gate(owner, profile, "cron", job)` on the job's home, the profile it names and the fleet
  root; deny wins): held, or "runs" (a job the hold does not cover, or whose owner it admits).
  A `--no-overlap-window` job is also held before the interval when `[run, run + timeout)`
  would meet it, as its tick refuses such a run. The answer comes from `forecast_holds`, the
  forecast's own sweep, so it is exactly what `hermes check --at` would say at that instant;
- after the lift the cron gate runs a held job once (the missed runs coalesced) and then at
  its first occurrence after that moment: `JobImpact.catch_up` and `JobImpact.then`;
- each ready card is asked about as the dispatcher asks (`gate(owner, profile, "kanban",
  (profile, title))`): a card held at some instant of the interval waits;
- gateway turns are held where a hold covers the `gateway` component (for everyone but the
  users its allowlist admits);
- a registered consumer owes an acknowledgement of a hold it honours and whose selector covers
  its component (`acks.owes`, the rule `--wait` waits by).

Cron times come from `cronspec.starts` (croniter, the one cron math of the package). The work is
bounded: at most `MAX_RUNS` runs of one job are listed (the rest counted), and one forecast is
swept per (scopes, owner, profile, name) the holds can tell apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hermes_estop.consumers.board import Card
from hermes_estop.consumers.crontable import CronJob
from hermes_estop.consumers.kanban import card_names
from hermes_estop.fleet.registry.acks import owes
from hermes_estop.fleet.registry.entries import Ack, ConsumerState
from hermes_estop.fleet.registry.roster import ConsumerRow
from hermes_estop.model.cronspec import first_start_after, starts, validate_timezone
from hermes_estop.model.durations import format_duration
from hermes_estop.model.errors import EstopError
from hermes_estop.model.homes import FLEET, Location
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import format_instant, local_zone
from hermes_estop.process.forecast import HeldInterval, PlannedHold, forecast_holds

__all__ = ["MAX_COUNTED", "MAX_RUNS", "CardsImpact", "GatewayImpact", "HomeJobs", "Impact", "JobImpact", "impact", "starving_line"]

#: at most this many runs of one job are listed (a minutely job over a day is 1,440); the rest are counted
MAX_RUNS = 200
#: at most this many runs of one schedule are counted (a minutely job over ten weeks), then a problem line says so
MAX_COUNTED = 100_000
#: what the cron and kanban consumers and the gateway gate as (their modules' COMPONENT)
CRON, KANBAN, GATEWAY = "cron", "kanban", "gateway"


@dataclass(frozen=True)
class HomeJobs:
    """One home's cron table as read: the home (shown as given), the profile it serves (None:
    the fleet root), its jobs, and a one-line problem when the table could not be read."""

    home: str
    profile: str | None
    jobs: tuple[CronJob, ...] = ()
    problem: str | None = None


@dataclass(frozen=True)
class JobImpact:
    """One cron job with a run in the interval: the runs held and those that go ahead, and, when
    some are held, when it runs after the lift (`catch_up`, once) and then (`then`)."""

    home: str
    home_profile: str | None
    name: str
    owner: str | None
    profile: str | None
    timezone: str
    held: tuple[datetime, ...]
    runs: tuple[datetime, ...]
    #: runs beyond `MAX_RUNS` not listed (held and not alike)
    unlisted_held: int = 0
    unlisted_runs: int = 0
    catch_up: datetime | None = None
    then: datetime | None = None
    #: what holds its held runs (`PlannedHold.source`: `window:<name>`, `pause`, `hold`), in order
    held_by: tuple[str, ...] = ()

    @property
    def starves(self) -> bool:
        """Every run it has in the interval is held: it never runs on its schedule there (only
        once after each lift)."""
        return bool(self.held_count) and not self.run_count

    @property
    def held_count(self) -> int:
        return len(self.held) + self.unlisted_held

    @property
    def run_count(self) -> int:
        return len(self.runs) + self.unlisted_runs

    def to_json(self) -> dict[str, Any]:
        zone = validate_timezone(self.timezone)
        return {"home": self.home, "home_profile": self.home_profile, "job": self.name, "owner": self.owner,
                "profile": self.profile, "timezone": self.timezone, "held_by": list(self.held_by),
                "held": [_run(t, zone) for t in self.held], "held_count": self.held_count,
                "runs": [_run(t, zone) for t in self.runs], "runs_count": self.run_count,
                "after_lift": None if self.catch_up is None else
                {"runs_once_at": format_instant(self.catch_up), "then": format_instant(self.then)}}


def _run(t: datetime, zone: Any) -> dict[str, str | None]:
    return {"at": format_instant(t), "local": t.astimezone(local_zone()).isoformat(), "job_zone": t.astimezone(zone).isoformat()}


@dataclass(frozen=True)
class CardsImpact:
    """The ready cards that would wait: how many, the oldest (ready since), how many per profile
    (None: unassigned), and how many ready cards go ahead."""

    waiting: int = 0
    oldest: datetime | None = None
    oldest_id: int | None = None
    by_profile: Mapping[str | None, int] = field(default_factory=dict)
    proceeding: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"waiting": self.waiting, "oldest": format_instant(self.oldest), "oldest_id": self.oldest_id,
                "by_profile": {("" if k is None else k): v for k, v in sorted(self.by_profile.items(), key=_none_first)},
                "proceeding": self.proceeding}


def _none_first(item: tuple[str | None, int]) -> tuple[bool, str]:
    return item[0] is not None, item[0] or ""


@dataclass(frozen=True)
class GatewayImpact:
    """A hold that holds gateway turns: its scope and the users / profiles it still admits."""

    scope: str
    admits: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"scope": self.scope, "admits": dict(self.admits)}


@dataclass(frozen=True)
class Impact:
    """What holds over `[start, end)` hold back. `problems`: one line per input that could not
    be read (a damaged cron table, the board, the registry): what it says is then a lower bound."""

    start: datetime
    end: datetime
    jobs: tuple[JobImpact, ...]
    cards: CardsImpact
    gateway: tuple[GatewayImpact, ...]
    consumers: tuple[ConsumerRow, ...]
    problems: tuple[str, ...] = ()

    @property
    def held_runs(self) -> int:
        return sum(job.held_count for job in self.jobs)

    @property
    def held_jobs(self) -> tuple[JobImpact, ...]:
        return tuple(job for job in self.jobs if job.held_count)

    @property
    def homes(self) -> int:
        """How many homes have a held run."""
        return len({job.home for job in self.held_jobs})

    def totals(self) -> str:
        """`holds back 14 cron runs in 3 homes, 6 ready cards; gateway turns held; 4 consumers owe an acknowledgement`."""
        homes = self.homes
        text = (f"holds back {self.held_runs} cron run{_s(self.held_runs)} in {homes} home{_s(homes)}, "
                f"{self.cards.waiting} ready card{_s(self.cards.waiting)}; "
                f"gateway turns {'held' if self.gateway else 'not held'}; "
                f"{len(self.consumers)} consumer{_s(len(self.consumers))} will owe an acknowledgement")
        if self.problems:
            text += f" ({len(self.problems)} input(s) unreadable: at least this much)"
        return text

    def totals_json(self) -> dict[str, Any]:
        return {"held_runs": self.held_runs, "held_jobs": len(self.held_jobs), "homes": self.homes,
                "ready_cards_waiting": self.cards.waiting, "gateway_held": bool(self.gateway),
                "consumers_owing": len(self.consumers)}

    def to_json(self) -> dict[str, Any]:
        return {"start": format_instant(self.start), "end": format_instant(self.end), "totals": self.totals_json(),
                "cron": [job.to_json() for job in self.jobs], "kanban": self.cards.to_json(),
                "gateway": {"held": bool(self.gateway), "holds": [g.to_json() for g in self.gateway]},
                "consumers": [_consumer_json(row) for row in self.consumers], "problems": list(self.problems)}


def _consumer_json(row: ConsumerRow) -> dict[str, Any]:
    e = row.entry
    return {"component": e.component, "host": e.host, "pid": e.pid, "profile": e.profile, "state": row.state.value}


def _s(n: int) -> str:
    return "" if n == 1 else "s"


class _HeldSpans:
    """The held intervals of `[start, end)` for one kind of work, swept once per (scopes, owner,
    profile, names) the holds can tell apart: 1,000 jobs of a few owners cost a few sweeps."""

    def __init__(self, holds: Sequence[PlannedHold], start: datetime, end: datetime,
                 locations: Mapping[str, Location], component: str) -> None:
        self.holds = [h for h in holds if h.covers(component, None)]
        self.named = any(h.selector is not None and h.selector.jobs for h in self.holds)
        self.start, self.end, self.locations, self.component = start, end, locations, component
        self._memo: dict[tuple[Any, ...], tuple[HeldInterval, ...]] = {}

    def held(self, scopes: Iterable[str | None], owner: Any, profile: Any, names: Any,
             start: datetime | None = None) -> tuple[HeldInterval, ...]:
        where = tuple(dict.fromkeys(self.locations[s] for s in scopes if s is not None and s in self.locations))
        start = self.start if start is None else min(start, self.start)
        key = (where, owner, profile, names if self.named else None, start)
        try:
            return self._memo[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable owner (a hand-edited row): swept directly
            return forecast_holds(self.holds, start, self.end, where, owner, profile, component=self.component,
                                  job=names).intervals
        found = self._memo[key] = forecast_holds(self.holds, start, self.end, where, owner, profile,
                                                 component=self.component, job=names).intervals
        return found


def _inside(t: datetime, intervals: Sequence[HeldInterval], span: timedelta | None = None) -> HeldInterval | None:
    """The held interval `t` falls in (with `span`: the first one `[t, t + span)` meets)."""
    for interval in intervals:
        if span is None and interval.start <= t < interval.end:
            return interval
        if span is not None and interval.start < t + span and t < interval.end:
            return interval
    return None


class _Starts:
    """The starts of each (schedule, zone) in a range, asked of croniter once per distinct
    question: a fleet's jobs share a few schedules, and croniter is most of an impact's cost
    (bench/impact.py). At most `MAX_COUNTED` starts per question (`cut` then names it)."""

    def __init__(self) -> None:
        self._ranges: dict[tuple[str, str, datetime, datetime], tuple[datetime, ...]] = {}
        self._after: dict[tuple[str, str, datetime], datetime | None] = {}
        self.cut: list[str] = []

    def between(self, schedule: str, timezone: str, lo: datetime, end: datetime) -> tuple[datetime, ...]:
        key = (schedule, timezone, lo, end)
        found = self._ranges.get(key)
        if found is None:
            out: list[datetime] = []
            for t in starts(schedule, validate_timezone(timezone), lo):
                if t >= end:
                    break
                if len(out) >= MAX_COUNTED:
                    self.cut.append(f"schedule {schedule!r} ({timezone}): only its first {MAX_COUNTED} runs counted")
                    break
                out.append(t)
            found = self._ranges[key] = tuple(out)
        return found

    def after(self, schedule: str, timezone: str, t: datetime) -> datetime | None:
        key = (schedule, timezone, t)
        if key not in self._after:
            self._after[key] = first_start_after(schedule, validate_timezone(timezone), t)
        return self._after[key]


def _runs(job: CronJob, start: datetime, end: datetime, now: datetime, memo: _Starts) -> Iterable[datetime]:
    """The job's scheduled runs in `[start, end)` from now on (cronspec: croniter): a one-shot's
    pending instant, a recurring job's starts (a job parked by its tick has none)."""
    if job.next_run_at is None:
        return ()
    if job.schedule is None:
        return (job.next_run_at,) if start <= job.next_run_at < end and job.next_run_at >= now else ()
    validate_timezone(job.timezone)  # a bad zone is the row's problem, before any start is asked
    found = memo.between(job.schedule, job.timezone, max(start, now), end)
    return (t for t in found if t >= job.next_run_at)


def _job(table: HomeJobs, job: CronJob, gate: _HeldSpans, start: datetime, end: datetime, now: datetime,
         memo: _Starts) -> JobImpact | None:
    span = job.timeout if job.no_overlap_window else None
    from_ = start - span if span is not None else start
    scopes = (table.profile or FLEET, job.profile, FLEET)
    intervals = gate.held(scopes, job.owner, job.profile, job.name, from_)
    held: list[datetime] = []
    runs: list[datetime] = []
    unlisted = [0, 0]
    last: HeldInterval | None = None
    by: dict[str, None] = {}
    for t in _runs(job, from_, end, now, memo):
        interval = _inside(t, intervals, span)
        kept, index = (held, 0) if interval is not None else (runs, 1)
        if interval is not None:
            if interval is not last:
                by.update(dict.fromkeys(h.source for h in interval.holds))
            last = interval
        if len(kept) < MAX_RUNS:
            kept.append(t)
        else:
            unlisted[index] += 1
    if not held and not runs:
        return None
    catch_up = then = None
    if last is not None:
        catch_up = last.end
        then = memo.after(job.schedule, job.timezone, catch_up) if job.schedule else None
    return JobImpact(table.home, table.profile, job.name, job.owner, job.profile, job.timezone, tuple(held),
                     tuple(runs), unlisted[0], unlisted[1], catch_up, then, tuple(by))


def _cards(cards: Iterable[Card], gate: _HeldSpans) -> CardsImpact:
    waiting = proceeding = 0
    oldest: tuple[datetime, int] | None = None
    by_profile: dict[str | None, int] = {}
    for card in cards:
        if card.status != "ready":
            continue
        if not gate.held((FLEET, card.profile), card.owner, card.profile, card_names(card)):
            proceeding += 1
            continue
        waiting += 1
        by_profile[card.profile] = by_profile.get(card.profile, 0) + 1
        since = card.updated_at or card.created_at
        if since is not None and (oldest is None or (since, card.id) < oldest):
            oldest = (since, card.id)
    return CardsImpact(waiting, oldest[0] if oldest else None, oldest[1] if oldest else None, by_profile, proceeding)


def _gateway(holds: Sequence[PlannedHold], start: datetime, end: datetime) -> tuple[GatewayImpact, ...]:
    found: dict[tuple[str, str], GatewayImpact] = {}
    for hold in holds:
        active = (hold.start is None or hold.start < end) and (hold.until is None or start < hold.until)
        if active and hold.covers(GATEWAY, None):
            admits = hold.allow.to_body()
            found.setdefault((hold.scope, repr(admits)), GatewayImpact(hold.scope, admits))
    return tuple(found.values())


def _owing(rows: Iterable[ConsumerRow], holds: Sequence[PlannedHold]) -> tuple[ConsumerRow, ...]:
    acks = [Ack(h.scope, h.generation or "?", engaged=True, selector=h.selector) for h in holds]
    return tuple(row for row in rows if row.state is not ConsumerState.LOST and any(owes(row.entry, a) for a in acks))


def impact(holds: Sequence[PlannedHold], start: datetime, end: datetime, now: datetime, *,
           tables: Iterable[HomeJobs] = (), cards: Iterable[Card] = (), consumers: Iterable[ConsumerRow] = (),
           locations: Mapping[str, Location], problems: Iterable[str] = ()) -> Impact:
    """What `holds` hold back over `[start, end)` (runs before `now` are not counted). Pure.
    `locations`: the location of each scope in play (fleet and profile names: a scope missing
    from it is one no work runs under). A job whose row cannot be used (a bad zone or
    expression written by hand) is left out with a problem line, as its tick parks it."""
    found_problems = list(problems)
    cron_gate = _HeldSpans(holds, start, end, locations, CRON)
    memo = _Starts()
    jobs: list[JobImpact] = []
    for table in tables:
        if table.problem is not None:
            found_problems.append(f"cron table of {table.home}: {table.problem}")
        for job in table.jobs:
            try:
                found = _job(table, job, cron_gate, start, end, now, memo)
            except (EstopError, ValueError, OverflowError) as exc:
                found_problems.append(f"cron job {job.name} of {table.home}: {one_line(exc)}")
                continue
            if found is not None:
                jobs.append(found)
    jobs.sort(key=lambda j: (j.home, -j.held_count, j.name))
    found_problems += dict.fromkeys(memo.cut)
    return Impact(start, end, tuple(jobs), _cards(cards, _HeldSpans(holds, start, end, locations, KANBAN)),
                  _gateway(holds, start, end), _owing(consumers, holds), tuple(found_problems))


def starving_line(job: JobImpact, horizon: timedelta) -> str:
    """The warning naming a job that never runs on its schedule within `horizon` (`starves`)."""
    where = f"home {job.home}" + (f", profile {job.profile}" if job.profile else "")
    by = ", ".join(source.removeprefix("window:") for source in job.held_by)
    return (f"cron job {job.name} ({where}, owner {job.owner}) never runs on its schedule in the next "
            f"{format_duration(horizon)}: all {job.held_count} of its runs fall inside {by}; it runs only late, once "
            "after each lift (skip an occurrence, move the job, or admit its owner)")
