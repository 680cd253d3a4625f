"""The I/O shell of the impact preview (issue 47): reads what the consumers have queued and hands
it, with the holds in question, to `consumers.impact.impact` (pure).

What it reads is untrusted and read as the consumers' own readers read it, never written and
never waited for: each home's cron table (`CronTable`, bounded, under the fleet root:
`inflight.fleet_homes`), the board's ready cards (`Board`, which gives up rather than wait on a
busy board), the consumer registry (`read_roster` without pruning: a preview writes nothing).
A table, board or registry that cannot be read is one problem line in the answer, never a raise.

Two sources of holds: one occurrence of a window (`window_occurrence`: the hold its scheduler
would arm over `[arm_at, end)`, from `windows.forecast.planned_holds`, the forecast's own), and an
unplanned pause (`pause_hold`: a hold at a scope over `[start, end)` admitting nobody).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from functools import partial
from typing import Any

from hermes_estop.consumers.board import Board, Card
from hermes_estop.consumers.crontable import CronTable
from hermes_estop.consumers.impact import CRON, HomeJobs, Impact, JobImpact, impact
from hermes_estop.consumers.inflight import fleet_homes
from hermes_estop.consumers.published_jobs import read_published
from hermes_estop.fleet.registry.entries import ConsumerState, this_host
from hermes_estop.fleet.registry.roster import ConsumerRow, read_roster
from hermes_estop.model.audit_event import AuditEvent
from hermes_estop.model.cronspec import validate_timezone
from hermes_estop.model.errors import EstopError, InvalidArgument
from hermes_estop.model.hold import NOBODY
from hermes_estop.model.homes import FLEET, Location
from hermes_estop.model.selector import Selector
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import display_instant, format_instant
from hermes_estop.process.estop import Estop
from hermes_estop.process.forecast import PlannedHold
from hermes_estop.windows.forecast import WindowSource, planned_holds, window_ahead
from hermes_estop.windows.kept_files import HORIZON
from hermes_estop.windows.ledger import skipped_keys
from hermes_estop.windows.model import Occurrence, Window
from hermes_estop.windows.occurrences import upcoming
from hermes_estop.windows.plan import ARMED_BY_PREFIX
from hermes_estop.windows.schedule import Schedule, schedule_of
from hermes_estop.windows.windows_file import WindowsFile

__all__ = [
    "ARMING_RECHECK",
    "arming_soon",
    "arm_impact",
    "bar_impacts",
    "MAX_OCCURRENCE",
    "Queued",
    "WindowImpact",
    "impact_lines",
    "next_impact_section",
    "next_occurrence",
    "pause_hold",
    "read_queued",
    "starving",
    "window_impact",
    "window_occurrence",
]

#: `--occurrence N` goes at most this far ahead (a minutely window's week)
MAX_OCCURRENCE = 10_000


@dataclass(frozen=True)
class Queued:
    """What the consumers have queued, as read once: the homes' cron tables, the ready cards,
    the registered consumers, the location of every scope in play, and what could not be read."""

    tables: tuple[HomeJobs, ...]
    cards: tuple[Card, ...]
    consumers: tuple[ConsumerRow, ...]
    locations: dict[str, Location]
    problems: tuple[str, ...]

    def impact(self, holds: list[PlannedHold], start: datetime, end: datetime, now: datetime) -> Impact:
        return impact(holds, start, end, now, tables=self.tables, cards=self.cards, consumers=self.consumers,
                      locations=self.locations, problems=self.problems)


#: how a problem of the board starts (`starving` leaves it out: the board plays no part in it)
_BOARD = "kanban board"


def read_queued(estop: Estop) -> Queued:
    """Every home's cron table, the board's ready cards and the registry. Never raises."""
    problems: list[str] = []
    root = estop.layout.root
    tables: list[HomeJobs] = []
    for home in fleet_homes(estop):
        profile = None if home == root else home.name
        try:
            tables.append(HomeJobs(str(home), profile, tuple(CronTable(home).jobs())))
        except Exception as exc:  # noqa: BLE001 - an unreadable table is one problem line
            tables.append(HomeJobs(str(home), profile, problem=one_line(exc)))
    cards: tuple[Card, ...] = ()
    board = Board(root, clock=estop.clock)
    try:
        if board.exists():
            cards = tuple(board.cards("ready"))
    except Exception as exc:  # noqa: BLE001 - a read never raises
        problems.append(f"{_BOARD}: {one_line(exc)}")
    roster = read_roster(estop.fleet, prune=False)
    if roster.problem is not None:
        problems.append(f"consumer registry: {roster.problem}")
    tables += _published_elsewhere(roster.rows)
    scopes = {FLEET} | {t.profile for t in tables if t.profile} | {
        j.profile for t in tables for j in t.jobs if isinstance(j.profile, str)} | {
        c.profile for c in cards if isinstance(c.profile, str)}
    return Queued(tuple(tables), cards, roster.rows, _locations(estop, scopes), tuple(problems))


def _published_elsewhere(rows: Iterable[ConsumerRow]) -> list[HomeJobs]:
    """The job tables the cron consumers of OTHER hosts publish in their registry entries
    (`published_jobs`; a fleet on PostgreSQL spans hosts): this host's homes are read from disk."""
    here = this_host()
    found = []
    for row in rows:
        entry = row.entry
        if entry.component != CRON or entry.host == here or row.state is ConsumerState.LOST:
            continue
        jobs, problem = read_published(entry.extra)
        if jobs or problem:
            found.append(HomeJobs(f"{entry.host}:{entry.home}", entry.profile, jobs, problem))
    return found


def _locations(estop: Estop, scopes: Iterable[str]) -> dict[str, Location]:
    """The location of each scope that is one (a bad profile name in a row is not: its work is parked)."""
    found = {}
    for scope in scopes:
        try:
            found[scope] = estop.layout.location(scope)
        except (InvalidArgument, ValueError):
            continue
    return found


def pause_hold(scope: str, start: datetime, end: datetime, selector: Selector | None = None) -> PlannedHold:
    """An unplanned pause at `scope` over `[start, end)`, admitting nobody (`check --impact`)."""
    return PlannedHold(scope, start, end, NOBODY, "unplanned pause", "pause", selector=selector)


def window_occurrence(estop: Estop, name: str, number: int, now: datetime) -> tuple[Window, Occurrence | None]:
    """Window `name` and its `number`-th occurrence not ended at `now` (1: the next, or the one
    covering now); None when it has fewer ahead. `InvalidArgument` (one line, with a guess) for
    an unknown name or a number out of range."""
    if not 1 <= number <= MAX_OCCURRENCE:
        raise InvalidArgument(f"invalid --occurrence {number}: expected 1 to {MAX_OCCURRENCE}")
    windows_file = WindowsFile(estop.layout.root)
    schedule = schedule_of(windows_file, now)
    window = schedule.window(schedule.item_named(name, windows_file.path))
    found = upcoming(window, now, number)
    return window, found[number - 1] if len(found) >= number else None


@dataclass(frozen=True)
class WindowImpact:
    """One occurrence's impact: the window, the occurrence, whether the ledger says it is
    skipped (it then arms nothing and holds nothing back), and the impact."""

    window: Window
    occurrence: Occurrence
    skipped: bool
    impact: Impact

    def to_json(self) -> dict[str, Any]:
        return {"window": self.window.name, "scope": self.window.scope, "enabled": self.window.enabled,
                "skipped": self.skipped, "occurrence": self.occurrence.to_json(None, self.window.zone_of(self.occurrence)),
                **self.impact.to_json()}


def window_impact(estop: Estop, window: Window, occurrence: Occurrence, now: datetime,
                  queued: Queued | None = None) -> WindowImpact:
    """What `occurrence` of `window` holds back over `[arm_at, end)`, drain lead included. A
    skipped or disabled one arms nothing: its impact is empty."""
    try:
        skipped = occurrence.key in skipped_keys(estop.fleet)
    except (EstopError, OSError):
        skipped = False  # a ledger that cannot be read: the occurrence is counted (held is the safe side)
    holds = [] if skipped or not window.enabled else [
        h for h in planned_holds(window_ahead(window, occurrence.arm_at), occurrence.end) if h.occurrence == occurrence.ident]
    queued = read_queued(estop) if queued is None else queued
    return WindowImpact(window, occurrence, skipped, queued.impact(holds, occurrence.arm_at, occurrence.end, now))


#: at most this many scheduled times are listed per job in the text (--json: up to `MAX_RUNS`)
_LISTED_TIMES = 3


def impact_lines(found: Impact) -> Iterator[str]:
    """The details under the totals line, per home then job, then the cards, the gateway, the
    consumers and the problems (not escaped: the caller passes each through `printable`)."""
    home = None
    for job in found.jobs:
        if job.home != home:
            home = job.home
            yield f"home {home}" + (f" (profile {job.home_profile})" if job.home_profile else " (fleet root)") + ":"
        yield from _job_lines(job)
    cards = found.cards
    if cards.waiting:
        per = ", ".join(f"{p or '(unassigned)'} {n}" for p, n in sorted(cards.by_profile.items(), key=lambda i: i[0] or ""))
        yield (f"kanban: {cards.waiting} ready card(s) would wait (oldest #{cards.oldest_id}, ready since "
               f"{display_instant(cards.oldest)}); by profile: {per}")
    else:
        yield f"kanban: no ready card would wait ({cards.proceeding} ready card(s) go ahead)"
    if found.gateway:
        for gate in found.gateway:
            yield f"gateway: turns held at {gate.scope} (admits {_admits(gate.admits)})"
    else:
        yield "gateway: turns not held"
    for row in found.consumers:
        yield f"owes an acknowledgement: {row.describe()}"
    for problem in found.problems:
        yield f"unreadable: {problem}"


def _admits(body: Mapping[str, Any]) -> str:
    parts = [f"{key} {', '.join(str(v) for v in values)}" for key, values in sorted(body.items()) if values]
    return "; ".join(parts) or "nobody"


def _job_lines(job: JobImpact) -> Iterator[str]:
    who = f"owner {job.owner}" if job.owner else "no owner"
    if job.profile:
        who += f", profile {job.profile}"
    zone = validate_timezone(job.timezone)
    if job.held_count:
        yield (f"  held  {job.name} ({who}): {job.held_count} run(s) at {_times(job.held, zone, job.unlisted_held)}; "
               f"after the lift: runs once at {display_instant(job.catch_up)}"
               + (f", then {display_instant(job.then)}" if job.then is not None else ""))
    if job.run_count:
        yield f"  runs  {job.name} ({who}): {job.run_count} run(s) at {_times(job.runs, zone, job.unlisted_runs)}"


def _times(times: tuple[datetime, ...], zone: tzinfo, unlisted: int) -> str:
    shown = [f"{display_instant(t)} ({t.astimezone(zone):%H:%M %Z})" for t in times[:_LISTED_TIMES]]
    more = len(times) - _LISTED_TIMES + unlisted
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


class _EveryScope:
    """`estop` seen from every scope in play (the fleet root and each profile), so the windows'
    forecast source plans the holds of every window, not only those of `estop`'s candidates."""

    def __init__(self, estop: Estop, locations: Iterable[Location]) -> None:
        self._estop = estop
        self.locations = tuple(locations)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._estop, name)


def starving(estop: Estop, now: datetime, horizon: timedelta = HORIZON,
             queued: Queued | None = None) -> tuple[list[JobImpact], tuple[str, ...]]:
    """The cron jobs every run of which within `horizon` of `now` falls inside the holds the
    windows will arm (the ledger's skipped occurrences left out: a skip that frees a run saves
    the job), and the problems met reading the consumers' tables. `EstopError` (one line) when
    `windows.toml` cannot be used, as every forecast."""
    queued = read_queued(estop) if queued is None else queued
    problems = tuple(p for p in queued.problems if not p.startswith(f"{_BOARD}:"))  # cards never starve a job
    view = _EveryScope(estop, queued.locations.values())
    holds = list(WindowSource().planned(view, now, now + horizon))
    if not holds:
        return [], ()  # no window arms: no job starves, whatever a table holds
    found = impact(holds, now, now + horizon, now, tables=queued.tables, locations=queued.locations,
                   problems=problems)
    return [job for job in found.jobs if job.starves], found.problems


def next_occurrence(estop: Estop, now: datetime, schedule: Schedule | None = None) -> tuple[Window, Occurrence] | None:
    """The enabled window occurrence that arms next after `now` (not one covering now: that one
    holds already), soonest arm time first, the file's order breaking a tie; None when none is
    ahead. Answered from the file's compiled schedule: a `Window` is built for the one found,
    and for a row only when its next arm lies past what the schedule keeps and could still come
    first (at 10,000 windows, building each row's took seconds of every `status`). `schedule`:
    the file's, when the caller has read it already (`hermes status` reads it once)."""
    schedule = schedule if schedule is not None else schedule_of(WindowsFile(estop.layout.root), now)
    best: tuple[datetime, int, Callable[[], Window], Occurrence] | None = None
    unkept: list[tuple[datetime, int, Callable[[], Window]]] = []
    rows: list[tuple[int, int, int]] = []  # (arm, row, index) of the rows' kept next arms (a row is its place in the file)
    for item in range(len(schedule)):
        if schedule.enabled[item]:
            index = schedule.next_arm_index(item, now)
            if index is not None:
                rows.append((schedule.starts[index] - schedule.leads[item], item, index))
            else:
                beyond = schedule.unkept_arm(item, now)
                if beyond is not None:
                    unkept.append((beyond, item, partial(schedule.window, item)))
    if rows:
        _, row, index = min(rows)
        found = schedule.occurrence(row, index)
        best = (found.arm_at, row, partial(schedule.window, row), found)
    for beyond, position, window_of in sorted(unkept, key=lambda u: u[:2]):
        if best is not None and beyond > best[0]:
            break
        window = window_of()
        following = next((o for o in upcoming(window, now, 2) if not o.covers(now)), None)
        if following is not None and (best is None or (following.arm_at, position) < best[:2]):
            best = (following.arm_at, position, partial(_same, window), following)
    return None if best is None else (best[2](), best[3])


def _same(window: Window) -> Window:
    return window


def _scheduled(schedule: Schedule, now: datetime) -> Iterator[tuple[Callable[[], Window], list[Occurrence], datetime | None]]:
    """Each enabled window of `schedule` (in the file's order) with its next two occurrences as
    far as the schedule keeps them, and the earliest instant one it does not keep can arm (None:
    those are all of them; `Schedule.unkept_arm`)."""
    for item in range(len(schedule)):
        if schedule.enabled[item]:
            kept = schedule.upcoming(item, now, 2) or schedule.upcoming(item, now, 1) or []
            yield partial(schedule.window, item), kept, None if len(kept) == 2 else schedule.unkept_arm(item, now)


def next_impact_section(estop: Estop, now: datetime, *, as_json: bool | None = None,
                        schedule: Schedule | None = None) -> dict[str, Any]:
    """The status section (`hermes status`, /api/status): the next window occurrence to arm and
    the totals of what it will hold back. Never raises: a failure is one line."""
    try:
        nxt = next_occurrence(estop, now, schedule)
        if nxt is None:
            return {"json": {"next_window_impact": None}, "lines": []}
        window, occurrence = nxt
        found = window_impact(estop, window, occurrence, now)
    except Exception as exc:  # noqa: BLE001 - a status read never raises
        problem = one_line(exc)
        return {"json": {"next_window_impact": {"error": problem}}, "lines": [f"next window impact: {problem}"]}
    totals = found.impact
    line = (f"next window {window.name} ({display_instant(occurrence.arm_at)}"
            + (", skipped" if found.skipped else "")
            + f"): holds back {'at least ' if totals.problems else ''}"
            f"{totals.held_runs} cron run{'' if totals.held_runs == 1 else 's'}, "
            f"{totals.cards.waiting} ready card{'' if totals.cards.waiting == 1 else 's'} "
            f"({f'{len(totals.problems)} input(s) unreadable; ' if totals.problems else ''}"
            f"hermes windows impact {window.name})")
    data = {"window": window.name, "occurrence": occurrence.ident, "skipped": found.skipped,
            **totals.totals_json(), "problems": list(totals.problems)}
    return {"json": {"next_window_impact": data} if as_json is not False else {},
            "lines": [line] if as_json is not True else []}


def arm_impact(estop: Estop) -> Callable[[AuditEvent], dict[str, Any] | None]:
    """What a notification of a window's arm carries besides its line (`serve` hands it to the
    notifier): for the `engage` or `rearm` of a hold a window armed (still standing, the same
    generation), `{"impact": {window, occurrence, totals..., "line": ...}}`; else None."""

    def enrich(event: AuditEvent) -> dict[str, Any] | None:
        if event.event not in ("engage", "rearm") or event.generation is None:
            return None
        armed = _window_hold(estop, event)
        if armed is None:
            return None
        name, ident = armed
        now = estop.clock()
        window, _ = window_occurrence(estop, name, 1, now)
        occurrence = next((o for o in upcoming(window, now, 2) if o.ident == ident), None)
        if occurrence is None:
            return None
        found = window_impact(estop, window, occurrence, now)
        return {"impact": {"window": name, "occurrence": ident, **found.impact.totals_json(),
                           "line": found.impact.totals()}}

    return enrich


def _window_hold(estop: Estop, event: AuditEvent) -> tuple[str, str] | None:
    """(window name, occurrence) of the standing hold `event` wrote, when a window armed it."""
    for reading in estop.fleet.read().readings:
        hold = reading.hold
        if reading.location.scope != event.location or hold is None or hold.generation != event.generation:
            continue
        armed_by, window = hold.armed_by or "", hold.window or {}
        occurrence = window.get("occurrence")
        if armed_by.startswith(ARMED_BY_PREFIX) and isinstance(occurrence, str):
            return armed_by.removeprefix(ARMED_BY_PREFIX), occurrence
    return None


def bar_impacts(estop: Estop, bars: Iterable[Any], windows: Mapping[str, Window], now: datetime) -> dict[str, Impact | str]:
    """The impact of each upcoming or active occurrence on the status page (`fleetview.Bar`:
    window, start, end, state, key), by the bar's key: what its hold holds back over `[drain
    from, end)`, or a one-line reason it is not shown. Reads the consumers' tables once. Never raises."""
    out: dict[str, Impact | str] = {}
    try:
        queued = read_queued(estop)
        for bar in bars:
            window = windows.get(bar.window)
            if bar.state not in ("upcoming", "active") or window is None:
                out[bar.key] = f"{bar.state}: arms nothing"
                continue
            arm_at = bar.drain_from or bar.start
            holds = [h for h in planned_holds(window_ahead(window, arm_at), bar.end) if h.start == arm_at and h.until == bar.end]
            out[bar.key] = queued.impact(holds, arm_at, bar.end, now)
    except Exception as exc:  # noqa: BLE001 - the page is served whatever a table holds
        problem = one_line(exc)
        return {bar.key: problem for bar in bars}
    return out


#: how long `arming_soon`'s answer is reused (a notifier asks on every poll; a notice may be this late)
ARMING_RECHECK = timedelta(seconds=30)


def arming_soon(estop: Estop) -> Callable[[datetime, timedelta], list[tuple[str, datetime, dict[str, Any]]]]:
    """What the notifier's `before` notices are about (`TargetWorker.upcoming`): each enabled
    window occurrence not skipped that arms within `(now, now + before]`, as (its key, when it
    arms, the event's fields: window, scope, occurrence, start, end, reason, and `impact`, what it
    holds back). Worked out at most once per `ARMING_RECHECK` for a given span."""
    memo: dict[timedelta, tuple[datetime, list[tuple[str, datetime, dict[str, Any]]]]] = {}

    def due(now: datetime, before: timedelta) -> list[tuple[str, datetime, dict[str, Any]]]:
        known = memo.get(before)
        if known is not None and now - known[0] < ARMING_RECHECK:
            return [item for item in known[1] if now < item[1] <= now + before]
        found = _arming_within(estop, now, before + ARMING_RECHECK)
        memo[before] = (now, found)
        return [item for item in found if now < item[1] <= now + before]

    return due


def _arming_within(estop: Estop, now: datetime, span: timedelta) -> list[tuple[str, datetime, dict[str, Any]]]:
    soon: list[tuple[Callable[[], Window], Occurrence]] = []
    for window_of, ahead, beyond in _scheduled(schedule_of(WindowsFile(estop.layout.root), now), now):
        if beyond is not None and beyond <= now + span:
            window = window_of()
            window_of, ahead = partial(_same, window), upcoming(window, now, 2)
        soon.extend((window_of, o) for o in ahead if now < o.arm_at <= now + span)
    if not soon:
        return []
    skipped = skipped_keys(estop.fleet)
    queued = read_queued(estop)
    out = []
    for window_of, occurrence in soon:
        if occurrence.key in skipped:
            continue
        window = window_of()
        found = window_impact(estop, window, occurrence, now, queued)
        out.append((occurrence.key, occurrence.arm_at, {
            "scope": window.scope, "window": window.name, "occurrence": occurrence.ident,
            "start": format_instant(occurrence.start), "end": format_instant(occurrence.end),
            "reason": window.reason_for(occurrence.reason),
            "impact": {**found.impact.totals_json(), "line": found.impact.totals()}}))
    return out
