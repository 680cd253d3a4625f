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

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hermes_estop.process.estop import Estop
from hermes_estop.fleet.fleet import Fleet
from hermes_estop.process.describe import describe_reading, reading_json
from hermes_estop.process.check import Snapshot
from hermes_estop.model.hold import Cause, HoldState, Reading
from hermes_estop.model.homes import Layout, Location
from hermes_estop.fleet.registry.roster import Roster, read_roster
from hermes_estop.fleet.registry.roster import status_section as consumers_section
from hermes_estop.model.text import one_line, printable
from hermes_estop.model.timeutil import display_instant, format_instant, format_relative
from hermes_estop.observe.on_record import OnRecord, on_record
from hermes_estop.consumers.inflight import status_section as in_flight_section
from hermes_estop.windows.status import status_section as windows_section

__all__ = ["FleetStatus", "fleet_status", "lift_command", "standing_line"]


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
        return self.fleet.store.where(location)

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
            "store": self.fleet.store.name,
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
        mine = flat(self.mine.readings)
        out = []
        if self.mine.active:
            out.append(f"HELD: new work is paused ({len(self.mine.every_active)} active hold(s))")
        elif self.engaged:
            out.append(f"PARTLY HELD: only the work scoped holds cover is paused ({len(self.mine.every_active)} "
                       "active scoped hold(s))")
        else:
            out.append("free: no active hold on this process's locations")
        for reading in mine:
            out.extend(self._describe(reading))
        if not mine:
            for loc in self.mine_locations:
                out.append(f"  {printable(loc.describe())}: no hold ({printable(self.where(loc))})")
        if self.others:
            held = sum(1 for r in flat(self.others) if r.active)
            out.append(f"elsewhere in the fleet: {held} active hold(s) on other scopes (they do not hold this process)")
            for reading in flat(self.others):
                out.extend(self._describe(reading))
        out.extend(printable(line) for line in self.section_lines)
        if self.audit_problem is not None:
            out.append("audit trail NOT WRITABLE (holds are still armed, but not recorded): "
                       f"{printable(one_line(self.audit_problem))}")
        return out

    def _describe(self, reading: Reading) -> list[str]:
        lines = describe_reading(reading, self.now, self.where(reading.location))
        override = self.record.override_of(reading.hold.generation if reading.hold is not None else None)
        if override is not None and reading.active:
            lines.append(f"      OVERRIDE   {printable(override.actor or '?')} broke glass over policy "
                         f"{printable(override.rule or '?')}: {printable(one_line(override.reason or ''))}")
        if reading.active and self.record.written_outside(reading):
            lines.append("      written    outside hermes (no write of it on the audit trail)")
        lift = self.lift(reading)
        if lift is not None and reading.active:
            lines.append(f"      lift       {lift}")
        return lines

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
        for section in (windows_section(fleet, mine.now, as_json=as_json), in_flight_section(estop, mine.now),
                        consumers_section(roster)):
            json_sections.update(section.get("json", {}))
            lines.extend(section.get("lines", []))
    record = on_record(fleet, flat(mine.readings) + flat(others), mine.now)
    return FleetStatus(now=mine.now, layout=estop.layout, fleet=fleet, mine=mine,
                       others=others, scopes=scopes, roster=roster, audit_problem=fleet.store.audit_problem(),
                       sections=json_sections, section_lines=tuple(lines), record=record)


def standing_line(estop: Estop) -> str:
    """`FleetStatus.standing_line` of a fresh read; never raises (a shutdown line must not fail
    the shutdown)."""
    try:
        return fleet_status(estop, sections=False).standing_line()
    except Exception as exc:  # noqa: BLE001
        return f"holds left standing unknown ({one_line(exc)})"
