"""Forecast: the intervals of `[start, end)` during which a principal would be held, and why
(issue 11 section 3: `hermes check --at T [--for DUR]`, `Estop.forecast`).

Two parts:

- `forecast_holds`, a PURE function from planned holds (`PlannedHold`: a hold at a scope over
  `[start, until)`, with its allowlist) to the merged held intervals (`Forecast`). It answers with
  the predicate itself (docs/design.md §4): at every instant, the planned holds active then
  (`timeutil.in_interval`, half-open) are turned into readings and `check.decide` says whether the
  principal proceeds, so deny wins across root and profile holds exactly as in a live check.
- `forecast_view`, what `Estop.forecast` runs: the standing holds of the principal's view now
  (with their deadmen), plus what every `HoldSource` plans. The window occurrences are such a
  source, found through the entry-point group `hermes_estop.hold_sources` and loaded only when a
  forecast is asked for: the core never imports the windows package (docs/design.md §8).

Each planned hold is counted on its own (deny wins across them). The live scheduler may do less
than that: a window occurrence due while a hold it did not arm stands is skipped (§6). The
forecast does not guess what will stand then, so it errs on the side of "held".

One module for one job, the forecast: the shell does nothing but gather the planned holds the
pure function takes, and the value types are what both speak.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib import import_module
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from hermes_estop.model.errors import EstopError, InvalidArgument
from hermes_estop.model.hold import NOBODY, Allow, Fence, Hold, HoldState, Reading
from hermes_estop.model.homes import Layout, Location
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import Clock, display_instant, format_instant, in_interval, parse_instant
from hermes_estop.process.check import Snapshot, decide
from hermes_estop.process.describe import covers
from hermes_estop.system.missing_code import missing_code

if TYPE_CHECKING:
    from hermes_estop.fleet.fleet import Fleet

__all__ = [
    "HOLD",
    "INSTANT",
    "SOURCE_GROUP",
    "EstopView",
    "Forecast",
    "HeldInterval",
    "HoldSource",
    "PlannedHold",
    "discover_sources",
    "forecast_holds",
    "forecast_view",
    "forecast_views",
    "standing_holds",
]

#: the entry-point group planned-hold sources register under (pyproject.toml)
SOURCE_GROUP = "hermes_estop.hold_sources"
#: `PlannedHold.source` of a hold standing now
HOLD = "hold"
#: the span that stands for one instant: `[T, T + INSTANT)` holds exactly the instant T
#: (datetime's resolution), so "held at T" is a forecast like any other
INSTANT = timedelta(microseconds=1)


def _stamp(value: datetime | None) -> str | None:
    return format_instant(value)


@dataclass(frozen=True)
class PlannedHold:
    """A hold at `scope` ("fleet" or a profile name) active over `[start, until)`: `start` None
    means already standing (armed before any instant asked about), `until` None means open-ended
    (no deadman). `source` says what arms it: `"hold"` for one standing now, `"window:<name>"`
    for a window occurrence (`occurrence`: its start, ISO-8601 UTC; `start` is then its arm
    time, the start less the window's drain lead). `readable` False is an unreadable hold: it
    admits nobody (`problem` says why). `note` says why a planned hold is an assumption (a
    forecast cut short) rather than a computed one."""

    scope: str
    start: datetime | None
    until: datetime | None
    allow: Allow = NOBODY
    reason: str | None = None
    source: str = HOLD
    occurrence: str | None = None
    generation: str | None = None
    armed_by: str | None = None
    readable: bool = True
    problem: str | None = None
    note: str | None = None
    #: a scoped hold's selector (`selector.Selector`) and id; None: it covers all work
    selector: Any = None
    hold_id: str | None = None

    def covers(self, component: str | None, job: Any) -> bool:
        return self.selector is None or bool(self.selector.covers(component, job))

    def active_at(self, now: datetime) -> bool:
        return in_interval(now, self.start, self.until)

    def reading(self, location: Location) -> Reading:
        """This hold as the predicate reads it at `location`."""
        if not self.readable:
            return Reading(location, HoldState.UNREADABLE, None, Fence(self.generation), self.problem)
        hold = Hold(self.generation, reason=self.reason, expires_at=self.until, allow=self.allow,
                    armed_by=self.armed_by)
        return Reading(location, HoldState.ACTIVE, hold, Fence(self.generation), self.problem)

    def describe(self) -> str:
        """One line (not yet escaped: callers pass it through `text.printable`)."""
        if self.source == HOLD:
            what = f"hold at {self.scope}"
            if self.selector is not None:
                what = f"scoped hold {self.hold_id} at {self.scope}"
            if self.generation:
                what += f" (generation {self.generation})"
            span = "standing"
        else:
            what = f"{self.source} at {self.scope}"
            if self.occurrence:
                what += f", occurrence {self.occurrence}"
            span = f"from {display_instant(self.start)}" if self.start is not None else "standing"
            if self.start is not None and _is_instant(self.occurrence) and _stamp(self.start) != self.occurrence:
                span += " (drain lead)"
        span += f" until {display_instant(self.until)}" if self.until is not None else ", no deadman"
        parts = [what, span, f"covers {self.covers_text}"]
        if not self.readable:
            parts.append(f"unreadable ({self.problem or 'unknown problem'}): admits nobody")
        elif self.reason:
            parts.append(f"reason {self.reason!r}")
        if self.note:
            parts.append(self.note)
        return "; ".join(parts)

    @property
    def covers_text(self) -> str:
        """What it covers (`describe.covers`): "all", or its components and job globs."""
        return covers(self.selector)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "scope": self.scope,
            "hold": self.hold_id,
            "selector": self.selector.to_body() if self.selector is not None else None,
            "covers": self.covers_text,
            "occurrence": self.occurrence,
            "from": _stamp(self.start),
            "until": _stamp(self.until),
            "reason": self.reason,
            "generation": self.generation,
            "armed_by": self.armed_by,
            "allow": self.allow.to_body(),
            "readable": self.readable,
            "problem": self.problem,
            "note": self.note,
        }


@dataclass(frozen=True)
class HeldInterval:
    """`[start, end)`, clipped to the range asked about, during which the principal is held;
    `holds`: the planned holds that refuse it at some instant of it (deny wins), in order of
    first refusal."""

    start: datetime
    end: datetime
    holds: tuple[PlannedHold, ...]

    def to_json(self) -> dict[str, Any]:
        return {"start": _stamp(self.start), "end": _stamp(self.end), "holds": [h.to_json() for h in self.holds]}


@dataclass(frozen=True)
class Forecast:
    """The answer: the held intervals of `[start, end)` for (`user_id`, `profile`), in order,
    merged (two never touch), and `notes` on what the forecast had to assume. Reads as the
    sequence of its intervals (empty, hence falsy, when never held)."""

    start: datetime
    end: datetime
    user_id: str | None
    profile: str | None
    intervals: tuple[HeldInterval, ...]
    notes: tuple[str, ...] = ()

    @property
    def held(self) -> bool:
        """Held at some instant of `[start, end)`."""
        return bool(self.intervals)

    # it reads as the sequence of its held intervals: `len()`, iteration, indexing, and truthy
    # exactly when held at some instant
    def __len__(self) -> int:
        return len(self.intervals)

    def __iter__(self) -> Iterator[HeldInterval]:
        return iter(self.intervals)

    def __getitem__(self, index: int) -> HeldInterval:
        return self.intervals[index]

    def to_json(self) -> dict[str, Any]:
        return {
            "start": _stamp(self.start),
            "end": _stamp(self.end),
            "user_id": self.user_id,
            "profile": self.profile,
            "held": self.held,
            "intervals": [i.to_json() for i in self.intervals],
            "notes": list(self.notes),
        }


def _relevant(planned: Iterable[PlannedHold], start: datetime, end: datetime, by_scope: dict[str, Location],
              component: str | None, job: Any) -> list[PlannedHold]:
    """The planned holds that can act on `[start, end)` from these scopes, in order of beginning
    (a hold begins at max(its start, `start`); open-started ones are active from the beginning)."""
    relevant = [
        hold for hold in dict.fromkeys(planned)  # the same hold planned twice counts once
        if hold.scope in by_scope and hold.covers(component, job)
        and (hold.start is None or hold.start < end) and (hold.until is None or start < hold.until)
    ]
    relevant.sort(key=lambda h: start if h.start is None or h.start < start else h.start)
    return relevant


def _edges(relevant: Sequence[PlannedHold], start: datetime, end: datetime) -> list[datetime]:
    """`start` and every instant inside the range where a relevant hold begins or ends."""
    edges = {start}
    for hold in relevant:
        for edge in (hold.start, hold.until):
            if edge is not None and start < edge < end:
                edges.add(edge)
    return sorted(edges)


_Stretch = tuple[datetime, datetime, dict[PlannedHold, None]]


def _begun(hold: PlannedHold, at: datetime) -> bool:
    return hold.start is None or hold.start <= at


def _extend(held: list[_Stretch], at: datetime, until: datetime, refusing: tuple[PlannedHold, ...]) -> None:
    """Add the held segment `[at, until)`, merged into the last stretch when they touch."""
    if held and held[-1][1] == at:
        first, _, holds = held[-1]
        holds.update(dict.fromkeys(refusing))
        held[-1] = (first, until, holds)
    else:
        held.append((at, until, dict.fromkeys(refusing)))


def forecast_holds(planned: Iterable[PlannedHold], start: datetime, end: datetime, locations: Sequence[Location],
                   user_id: Any = None, profile: Any = None, notes: Iterable[str] = (),
                   component: str | None = None, job: Any = None) -> Forecast:
    """The intervals of `[start, end)` during which (`user_id`, `profile`) would be held by
    `planned`, seen from the candidate `locations` (a planned hold at a scope none of them has
    is ignored). Pure.

    A sweep over the instants where some planned hold begins or ends: between two of them the
    set of active holds is constant, so one decision (`check.decide` over their readings) holds
    for the whole segment. Held segments that touch are merged (back-to-back windows leave no
    free instant). An empty range holds nothing. `InvalidArgument` when `end` is before `start`."""
    if end < start:
        raise InvalidArgument(f"invalid forecast range: end {display_instant(end)} is before start {display_instant(start)}")
    by_scope = {location.scope: location for location in locations}
    relevant = _relevant(planned, start, end, by_scope, component, job)
    readings = {id(hold): hold.reading(by_scope[hold.scope]) for hold in relevant}
    instants = _edges(relevant, start, end)
    held: list[_Stretch] = []  # [start, end, the refusing holds in order of first refusal]
    active: list[PlannedHold] = []
    pending = 0
    for i, at in enumerate(instants):
        if at >= end:
            break
        while pending < len(relevant) and _begun(relevant[pending], at):
            active.append(relevant[pending])
            pending += 1
        active = [hold for hold in active if hold.active_at(at)]
        current = tuple(readings[id(hold)] for hold in active)
        if not active or decide(Snapshot(current, at), user_id, profile).proceed:
            continue
        refusing = tuple(hold for hold, reading in zip(active, current, strict=True) if not reading.admits(user_id, profile))
        _extend(held, at, instants[i + 1] if i + 1 < len(instants) else end, refusing)
    intervals = tuple(HeldInterval(first, last, tuple(holds)) for first, last, holds in held)
    return Forecast(start, end, None if user_id is None else str(user_id), None if profile is None else str(profile),
                    intervals, tuple(notes))


# -- the I/O shell: what `Estop.forecast` runs ---------------------------------------------


class EstopView(Protocol):
    """What a forecast reads of an `Estop` (a Protocol: this module must not import `estop`,
    which imports it)."""

    @property
    def layout(self) -> Layout: ...

    @property
    def locations(self) -> tuple[Location, ...]: ...

    @property
    def fleet(self) -> Fleet: ...

    @property
    def clock(self) -> Clock: ...

    def snapshot(self) -> Snapshot: ...

    def for_profile(self, name: str) -> EstopView: ...


@runtime_checkable
class HoldSource(Protocol):
    """Something that plans holds ahead of time (the maintenance windows). `planned` yields the
    holds it would arm that are active at some instant of `[start, end)` on the fleet `estop`
    belongs to; it may yield holds at scopes the principal does not see (they are ignored).
    It RAISES (an `EstopError`, one line) when it cannot tell: a forecast must never read a
    source it could not read as "nothing planned"."""

    def planned(self, estop: EstopView, start: datetime, end: datetime) -> Iterable[PlannedHold]: ...


#: the sources this package ships, by the same `module:attribute` their entry points name: a
#: checkout run without installed metadata (`PYTHONPATH=src`) must still count its windows
BUILTIN_SOURCES = {"windows": "hermes_estop.windows.forecast:WindowSource"}


def discover_sources() -> list[HoldSource]:
    """The built-in sources and those registered under the entry-point group
    `hermes_estop.hold_sources` (an entry point of a built-in's name replaces it), each
    instantiated with no argument. Loaded on each call (a forecast is not on the hot path).
    `EstopError` naming the source when one cannot be loaded: a source that cannot be read
    must never count as "nothing planned"."""
    named: dict[str, tuple[str, Any]] = {}
    for name, value in BUILTIN_SOURCES.items():
        module, _, attribute = value.partition(":")
        named[name] = (value, lambda module=module, attribute=attribute: getattr(import_module(module), attribute))
    for point in importlib.metadata.entry_points(group=SOURCE_GROUP):  # looked up when called: tests replace it
        named[point.name] = (point.value, point.load)
    sources: list[HoldSource] = []
    for name in sorted(named):
        value, load = named[name]
        try:
            source = load()()
        except ImportError as exc:
            raise missing_code(f"load the hold source {name!r} ({value})", exc) from None
        except Exception as exc:  # noqa: BLE001 - a broken source is one line, never a "free"
            raise EstopError(f"cannot load the hold source {name!r} ({value}): {one_line(exc)}") from None
        if not isinstance(source, HoldSource):
            raise EstopError(f"the hold source {name!r} ({value}) has no planned() method")
        sources.append(source)
    return sources


def standing_holds(snapshot: Snapshot) -> list[PlannedHold]:
    """The active holds of one snapshot as planned holds: standing already, until their deadman
    (None: until resumed); an unreadable one admits nobody and has no deadman."""
    out = []
    for reading in snapshot.every_active:
        hold = reading.hold
        if reading.state is HoldState.UNREADABLE or hold is None:
            out.append(PlannedHold(reading.location.scope, None, None, NOBODY, None, HOLD,
                                   generation=reading.fence.generation if reading.fence else None,
                                   readable=False, problem=reading.problem))
            continue
        out.append(PlannedHold(reading.location.scope, None, hold.expires_at, hold.allow, hold.reason, HOLD,
                               occurrence=_occurrence_of(hold), generation=hold.generation,
                               armed_by=hold.armed_by, problem=reading.problem, selector=hold.selector,
                               hold_id=hold.hold_id))
    return out


def _occurrence_of(hold: Hold) -> str | None:
    value = hold.window.get("occurrence") if hold.window is not None else None
    return value if isinstance(value, str) else None


def forecast_view(estop: EstopView, start: Any, end: Any, user_id: Any = None, profile: Any = None, *,
                  sources: Iterable[HoldSource] | None = None, component: str | None = None,
                  job: Any = None) -> Forecast:
    """`Estop.forecast`: the held intervals of `[start, end)` for (`user_id`, `profile`) seen from
    `estop` (from `estop.for_profile(profile)` when a profile is given, as `hermes check
    --profile` asks), counting the holds standing now and what every source plans (`sources`,
    default: `discover_sources()`). `start` / `end` are aware datetimes or ISO-8601 text; `end`
    equal to `start` asks about that one instant. Raises `EstopError` (one line) on bad input or a
    source that cannot be read."""
    view = estop.for_profile(str(profile)) if profile is not None else estop
    return forecast_views((view,), start, end, user_id, profile, sources=sources, component=component, job=job)


def forecast_views(views: Sequence[EstopView], start: Any, end: Any, user_id: Any = None, profile: Any = None, *,
                   sources: Iterable[HoldSource] | None = None, component: str | None = None,
                   job: Any = None) -> Forecast:
    """`forecast_view` over the union of several views' candidate locations (deny wins across
    all of them): work that runs under one home for another profile is gated on both
    (`consumers.passgate.work_views`), and so is its forecast."""
    first = parse_instant(start, what="forecast start")
    last = parse_instant(end, what="forecast end")
    if last < first:
        raise InvalidArgument(f"invalid forecast range: end {_stamp(last)} is before start {_stamp(first)}")
    if last == first:
        last = first + INSTANT
    if user_id is not None:
        Allow.of([user_id])  # the id rules a check applies (one line naming a bad id)
    chosen = discover_sources() if sources is None else list(sources)
    locations: dict[Location, None] = {}
    planned: dict[PlannedHold, None] = {}
    for view in views:
        locations.update(dict.fromkeys(view.locations))
        planned.update(dict.fromkeys(standing_holds(view.snapshot())))
        for source in chosen:
            try:
                planned.update(dict.fromkeys(source.planned(view, first, last)))
            except ImportError as exc:  # a part loaded only now (a broken install): never "free"
                raise missing_code(f"forecast with the hold source {type(source).__name__}", exc) from None
    notes = tuple(dict.fromkeys(hold.note for hold in planned if hold.note))
    return forecast_holds(planned, first, last, tuple(locations), user_id, profile, notes, component, job)


def _is_instant(text: str | None) -> bool:
    """Whether an occurrence is named by its start (a window's), not by an event id (a calendar's)."""
    try:
        datetime.fromisoformat(text or "")
    except ValueError:
        return False
    return True
