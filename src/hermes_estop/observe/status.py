"""The status document: what holds this process and every other scope of the fleet, built ONCE
per question (`fleet_status`) and rendered by `hermes status` (text and `--json`), /api/status,
/metrics, the status page and `hermes serve`'s shutdown line, so that no two of them can
disagree about which holds stand.

Two parts of one read at one `now`: `mine`, this process's candidate locations (the check
path's own snapshot, so expired holds there are lifted and logged as every check does), and
`others`, every other scope of the fleet (`Fleet.read`: the fleet root and every profile home
on the file store, every row on PostgreSQL) that has a hold. Each hold carries the command that
lifts it from where the document was built (`lift_command`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from hermes_estop.consumers.inflight import in_flight_section
from hermes_estop.fleet.fleet import Fleet
from hermes_estop.fleet.registry.roster import Roster, consumers_section, read_roster
from hermes_estop.model.hold import Cause, HoldState, Reading
from hermes_estop.model.homes import Layout, Location
from hermes_estop.model.text import one_line, printable
from hermes_estop.model.timeutil import display_instant, format_instant, format_relative, parse_stamp
from hermes_estop.observe.hold_provenance import OnRecord, on_record
from hermes_estop.observe.impact_preview import next_impact_section
from hermes_estop.process.check import Snapshot
from hermes_estop.process.describe import describe_reading, reading_from_json, reading_json
from hermes_estop.process.estop import Estop
from hermes_estop.windows.schedule import Schedule, schedule_of
from hermes_estop.windows.status import windows_section
from hermes_estop.windows.windows_file import WindowsFile

__all__ = ["DocumentStatus", "FleetStatus", "status_lines", "fleet_status", "lift_command", "standing_line"]


def lift_command(location: Location, layout: Layout) -> str | None:
    """The command that lifts the hold at `location` when run from `layout`'s home, or None
    for a location no command addresses (a stand-alone home other than this one)."""
    if location.path == layout.home:
        return "hermes resume"
    if location.is_fleet:
        return "hermes resume --fleet"
    if location.scope.startswith("home:"):
        return None
    return f"hermes resume --profile {location.scope}"


def flat(readings: tuple[Reading, ...]) -> tuple[Reading, ...]:
    """Every hold present among `readings`: each full hold, then the scoped holds beside it."""
    return tuple(hold for r in readings for hold in ((r,) if r.present else ()) + r.scoped)


@dataclass(frozen=True)
class FleetStatus:
    """One read of the fleet at `now`, from the point of view of one process."""

    now: datetime
    layout: Layout
    fleet: Fleet
    #: this process's candidate locations, read once (the check path's snapshot)
    mine: Snapshot
    #: every other scope of the fleet with a hold present, fleet first then by name
    others: tuple[Reading, ...]
    #: every scope of the fleet (`Fleet.scopes`), present or not, as read
    scopes: tuple[Location, ...]
    #: why the audit trail cannot be written now (None: it can)
    audit_problem: str | None = None
    #: the consumer registry against the same read of every scope (acknowledged or not)
    roster: Roster | None = None
    #: sections other packages add (windows, work in flight): JSON keys and text lines
    sections: dict[str, Any] = field(default_factory=dict)
    section_lines: tuple[str, ...] = ()
    #: what the audit trail says of the active holds: overrides, writes outside hermes (issue 37)
    record: OnRecord = OnRecord()  # noqa: RUF009 - frozen: one empty record serves every default

    @property
    def engaged(self) -> bool:
        """Whether this process is held (a hold on one of its own locations)."""
        return self.mine.engaged

    @property
    def present(self) -> tuple[Reading, ...]:
        """Every hold present in the fleet (this process's first), active, unreadable or expired;
        the scoped holds of a location right after its full hold."""
        return flat(self.mine.readings) + flat(self.others)

    @property
    def active(self) -> tuple[Reading, ...]:
        """Every hold of the fleet that holds now (unreadable ones included)."""
        return tuple(r for r in self.present if r.active)

    def where(self, location: Location) -> str:
        return self.fleet.where(location)

    def lift(self, reading: Reading) -> str | None:
        """The command that lifts `reading` from here; None when no command can (a store that is
        down, a sentinel that is not a file, a refused home: the notice says what will)."""
        if reading.state is HoldState.UNREADABLE and reading.cause not in (Cause.BODY, Cause.EMPTY, Cause.CANNOT_READ):
            return None
        lift = lift_command(reading.location, self.layout)
        if lift is not None and reading.hold is not None and reading.hold.hold_id is not None:
            return f"{lift} --hold {reading.hold.hold_id}"
        return lift

    # -- renderings --------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """`hermes status --json` and the base of /api/status."""
        now = self.now
        return {
            "engaged": self.engaged,
            "now": format_instant(now),
            "store": self.fleet.store_name,
            "locations": [{"scope": loc.scope, "path": self.where(loc)} for loc in self.mine_locations],
            "holds": [self._json(r) for r in flat(self.mine.readings)],
            "other_holds": [self._json(r) for r in flat(self.others)],
            "fleet": {"engaged": bool(self.active), "active": len(self.active),
                      "scopes": [loc.scope for loc in self.scopes],
                      "holds": [self._json(r) for r in self.present]},
            "audit_problem": self.audit_problem,
            "overrides": [o.to_json() for o in self.record.overrides],
            "written_outside_hermes": [{"scope": scope, "generation": generation}
                                       for scope, generation in self.record.outside],
            **self.sections,
        }

    @property
    def mine_locations(self) -> tuple[Location, ...]:
        return tuple(r.location for r in self.mine.readings)

    def _json(self, reading: Reading) -> dict[str, Any]:
        return reading_json(reading, self.now, self.where(reading.location)) | {"lift": self.lift(reading)}

    def lines(self) -> list[str]:
        """`hermes status`: this process's verdict and holds, then every other scope that holds,
        then the sections. Every value escaped."""
        return status_lines(self)

    def standing_line(self) -> str:
        """One line naming every hold of the fleet a stopping `hermes serve` leaves standing and
        when each lifts (its deadman, or only by a resume)."""
        active = self.active
        if not active:
            return "no hold left standing"
        parts = []
        for reading in active:
            hold = reading.hold
            who = f" armed by {printable(hold.armed_by)}" if hold is not None and hold.armed_by else ""
            if reading.state is HoldState.UNREADABLE:
                lifts = "unreadable: held until removed"
            elif hold is not None and hold.expires_at is not None:
                lifts = f"lifts at {display_instant(hold.expires_at)} ({format_relative(hold.expires_at, self.now)})"
            else:
                lifts = "held until resumed"
            scoped = f" scoped hold {hold.scope_label}" if hold is not None and hold.selector is not None else ""
            parts.append(f"{printable(reading.location.describe())}{scoped}{who} {lifts}")
        return f"leaving {len(active)} hold(s) standing: " + "; ".join(parts)


class _StatusView(Protocol):
    @property
    def now(self) -> datetime: ...
    @property
    def mine(self) -> Snapshot: ...
    @property
    def others(self) -> tuple[Reading, ...]: ...
    @property
    def section_lines(self) -> tuple[str, ...]: ...
    @property
    def audit_problem(self) -> str | None: ...
    @property
    def engaged(self) -> bool: ...
    @property
    def mine_locations(self) -> tuple[Location, ...]: ...
    @property
    def record(self) -> OnRecord: ...
    def where(self, location: Location) -> str: ...
    def lift(self, reading: Reading) -> str | None: ...


def status_lines(view: _StatusView) -> list[str]:
    """The lines of `hermes status`, of this host's read (`FleetStatus`) or of a server's
    document (`DocumentStatus`): one renderer for both."""
    mine = flat(view.mine.readings)
    out = []
    if view.mine.active:
        out.append(f"HELD: new work is paused ({len(view.mine.every_active)} active hold(s))")
    elif view.engaged:
        out.append(f"PARTLY HELD: only the work scoped holds cover is paused ({len(view.mine.every_active)} "
                   "active scoped hold(s))")
    else:
        out.append("free: no active hold on this process's locations")
    for reading in mine:
        out.extend(_described(view, reading))
    if not mine:
        for loc in view.mine_locations:
            out.append(f"  {printable(loc.describe())}: no hold ({printable(view.where(loc))})")
    if view.others:
        held = sum(1 for r in flat(view.others) if r.active)
        out.append(f"elsewhere in the fleet: {held} active hold(s) on other scopes (they do not hold this process)")
        for reading in flat(view.others):
            out.extend(_described(view, reading))
    out.extend(printable(line) for line in view.section_lines)
    if view.audit_problem is not None:
        out.append("audit trail NOT WRITABLE (holds are still armed, but not recorded): "
                   f"{printable(one_line(view.audit_problem))}")
    return out


def _described(view: _StatusView, reading: Reading) -> list[str]:
    lines = describe_reading(reading, view.now, view.where(reading.location))
    override = view.record.override_of(reading.hold.generation if reading.hold is not None else None)
    if override is not None and reading.active:
        lines.append(f"      OVERRIDE   {printable(override.actor or '?')} broke glass over policy "
                     f"{printable(override.rule or '?')}: {printable(one_line(override.reason or ''))}")
    if reading.active and view.record.written_outside(reading):
        lines.append("      written    outside hermes (no write of it on the audit trail)")
    lift = view.lift(reading)
    if lift is not None and reading.active:
        lines.append(f"      lift       {lift}")
    return lines


@dataclass(frozen=True)
class DocumentStatus:
    """The status document a server built (`GET /api/v1/status`, as `to_json` wrote it), read
    back into readings so that `hermes --server URL status` prints it with `status_lines`.
    The sections' text (windows, work in flight, consumers) is the server's, rendered by the
    sections' own code (`section_lines` of /api/v1/status)."""

    now: datetime
    mine: Snapshot
    others: tuple[Reading, ...]
    mine_locations: tuple[Location, ...]
    paths: dict[str, str]
    lifts: dict[tuple[str, str | None], str | None]
    audit_problem: str | None = None
    section_lines: tuple[str, ...] = ()
    record: OnRecord = OnRecord()  # noqa: RUF009 - frozen; overrides and hand-written holds: this host's trail only

    @property
    def engaged(self) -> bool:
        return self.mine.engaged

    def where(self, location: Location) -> str:
        return self.paths.get(location.scope, "?")

    def lift(self, reading: Reading) -> str | None:
        return self.lifts.get((reading.location.scope, reading.hold.hold_id if reading.hold else None))

    @classmethod
    def of(cls, document: dict[str, Any], section_lines: Iterable[str] = ()) -> DocumentStatus:
        now = parse_stamp(document.get("now"))
        if now is None:
            raise ValueError("the status document has no readable `now`")
        entries = [*(document.get("holds") or []), *(document.get("other_holds") or [])]
        paths = {str(e["scope"]): str(e["path"]) for e in [*(document.get("locations") or []), *entries]}
        lifts = {(str(e["scope"]), e.get("hold")): e.get("lift") for e in entries}
        locations = tuple(Location(str(e["scope"]), Path(str(e["path"])).parent)
                          for e in document.get("locations") or [])
        mine = _grouped(locations, [reading_from_json(e) for e in document.get("holds") or []])
        other = [reading_from_json(e) for e in document.get("other_holds") or []]
        others = _grouped(tuple(dict.fromkeys(r.location for r in other)), other)
        return cls(now, Snapshot(mine, now), others, locations, paths, lifts, document.get("audit_problem"),
                   tuple(str(line) for line in section_lines))


def _grouped(locations: tuple[Location, ...], readings: list[Reading]) -> tuple[Reading, ...]:
    """One reading per location, its scoped holds beside it (`flat`'s inverse)."""
    grouped = []
    for location in locations:
        here = [r for r in readings if r.location.scope == location.scope]
        full = next((r for r in here if r.hold is None or r.hold.selector is None),
                    Reading(location, HoldState.ABSENT))
        grouped.append(full.with_scoped(tuple(r for r in here if r is not full)))
    return tuple(grouped)


def fleet_status(estop: Estop, *, sections: bool = True, as_json: bool | None = None) -> FleetStatus:
    """The status document of `estop`'s fleet seen from `estop`'s process, at one `now`.
    `sections`: also the windows' next occurrences and the work in flight (what `hermes status`
    and /api/status show; /metrics and a shutdown line need none); `as_json` True: the sections
    only for `to_json`, False: only for `lines` (None: both). Never raises for what it reads:
    an unreadable scope is a hold, a failing section is one line."""
    mine = estop.snapshot()
    fleet = estop.fleet
    own = {r.location for r in mine.readings}
    scopes = fleet.scopes()
    everything = fleet.read(scopes, now=mine.now)
    others = tuple(r for r in everything.readings if (r.present or r.scoped) and r.location not in own)
    roster = read_roster(fleet, prune=False, snapshot=everything)
    json_sections: dict[str, Any] = {}
    lines: list[str] = []
    if sections:
        schedule = _schedule(fleet, mine.now)
        for section in (windows_section(fleet, mine.now, as_json=as_json, schedule=schedule),
                        next_impact_section(estop, mine.now, as_json=as_json, schedule=schedule),
                        in_flight_section(estop, mine.now),
                        consumers_section(roster)):
            json_sections.update(section.get("json", {}))
            lines.extend(section.get("lines", []))
    record = on_record(fleet, flat(mine.readings) + flat(others), mine.now)
    return FleetStatus(now=mine.now, layout=estop.layout, fleet=fleet, mine=mine,
                       others=others, scopes=scopes, roster=roster, audit_problem=fleet.audit_problem(),
                       sections=json_sections, section_lines=tuple(lines), record=record)


def _schedule(fleet: Fleet, now: datetime) -> Schedule | None:
    """The windows file's schedule, read once for the sections that show it (None when it cannot
    be read: each section then says why in its own line)."""
    try:
        return schedule_of(WindowsFile(fleet.root), now)
    except Exception:  # noqa: BLE001 - the sections report it
        return None


def standing_line(estop: Estop) -> str:
    """`FleetStatus.standing_line` of a fresh read; never raises (a shutdown line must not fail
    the shutdown)."""
    try:
        return fleet_status(estop, sections=False).standing_line()
    except Exception as exc:  # noqa: BLE001
        return f"holds left standing unknown ({one_line(exc)})"
