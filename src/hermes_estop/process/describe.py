"""One hold as every rendering shows it: to a script (`hold_json`, `reading_json`: the body's
wire names and the names an operator reads) and to a person (`describe_hold`,
`describe_reading`: lines with every value escaped). `hermes status`, `hermes pause/resume`, the
status document and the page all use these, so a hold reads the same everywhere.

`covers` is the one way every surface says what a hold covers (its components and job
patterns, or "all"): status, the page, forecasts, metrics labels, history, notifications and
acknowledgements.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from hermes_estop.model.hold import ALL_WORK, DEADLINE_UNREADABLE, Cause, Hold, HoldState, Reading, covers
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import display_instant, format_instant, format_relative
from hermes_estop.process.check import HAND_MADE, unreadable_cause

if TYPE_CHECKING:
    from hermes_estop.model.audit_event import AuditEvent
    from hermes_estop.model.homes import Location

__all__ = ["ALL_WORK", "HOLD_EVENTS", "covers", "event_covers", "event_json", "describe_hold", "describe_reading", "hold_json",
           "paused_lines", "reading_from_json", "reading_json", "resumed_line"]



#: the audit events that name a hold (a task's or a skip's line names no hold of its own)
HOLD_EVENTS = ("engage", "rearm", "release", "retire", "expire", "void")


def event_covers(event: str, detail: str | None) -> str | None:
    """What the hold an audit line names covers (`covers`: a scoped hold's selector is in its
    `detail`, a full hold's line has none); None for a line that names no hold."""
    if event not in HOLD_EVENTS:
        return None
    from hermes_estop.model.selector import selector_of_detail

    scoped = selector_of_detail(detail)
    return covers(scoped[1] if scoped is not None else None)


def event_json(event: AuditEvent) -> dict[str, Any]:
    """An audit event as `hermes history --json` (and /api/v1/history) shows it, with what its
    hold covers (`event_covers`)."""
    data = event.to_json()
    covered = event_covers(event.event, event.detail)
    return data if covered is None else data | {"covers": covered}


def hold_json(hold: Hold | None, now: datetime) -> dict[str, Any]:
    """A hold as scripts read it: the body's wire names (`expires_at`, `allow`) and the names
    an operator reads in `hermes status` (`deadline`, `deadline_in`, `allowlist`)."""
    expires_at = format_instant(hold.expires_at) if hold is not None else None
    expires_in = format_relative(hold.expires_at, now) if hold is not None and hold.expires_at else None
    allow = hold.allow.to_body() if hold is not None else {"user_ids": [], "profiles": []}
    return {
        "generation": hold.generation if hold else None,
        "reason": hold.reason if hold else None,
        "engaged_at": format_instant(hold.engaged_at) if hold else None,
        "expires_at": expires_at,
        "expires_in": expires_in,
        "deadline": expires_at,
        "deadline_in": expires_in,
        "allow": allow,
        "allowlist": allow,
        "armed_by": hold.armed_by if hold else None,
        "window": dict(hold.window) if hold is not None and hold.window else None,
        "hold": hold.hold_id if hold is not None else None,
        "selector": hold.selector.to_body() if hold is not None and hold.selector is not None else None,
        "covers": covers(hold.selector) if hold is not None else ALL_WORK,
    }


def reading_json(reading: Reading, now: datetime, where: str) -> dict[str, Any]:
    """One reading; `where` is `HoldStore.where(location)` (a sentinel path, a database row)."""
    data: dict[str, Any] = {"scope": reading.location.scope, "path": where, "state": reading.state.value}
    data.update(hold_json(reading.hold, now))
    data["problem"] = reading.problem
    data["cause"] = reading.cause.value if reading.cause is not None else None
    return data


def reading_from_json(data: dict[str, Any]) -> Reading:
    """`reading_json`'s inverse, for a reading another host rendered (`hermes --server`): the
    same hold, so the same lines describe it. The location's path is its sentinel's directory."""
    from pathlib import Path

    from hermes_estop.model.hold import hold_from_json
    from hermes_estop.model.homes import Location

    location = Location(str(data.get("scope")), Path(str(data.get("path") or "")).parent)
    state = HoldState(data.get("state") or HoldState.ACTIVE.value)
    hold = hold_from_json(data) if data.get("generation") or data.get("hold") or data.get("engaged_at") else None
    cause = Cause(data["cause"]) if data.get("cause") else None
    return Reading(location, state, hold, problem=data.get("problem"), cause=cause)


def describe_hold(hold: Hold, now: datetime) -> list[str]:
    """The detail lines of one readable hold, every value escaped (`printable`: a reason, an
    id or an actor is whatever a body says, and must never drive the terminal)."""
    lines = [f"covers     {ALL_WORK}" if hold.selector is None else
             f"scoped     hold {printable(hold.hold_id or '?')}: only {covers(hold.selector)}"]
    lines.append(f"generation {printable(hold.generation) if hold.generation else '(none: hand-written)'}")
    lines.append(f"reason     {printable(hold.reason) if hold.reason else '(none)'}")
    if hold.expires_at is not None:
        lines.append(f"deadline   {display_instant(hold.expires_at)} ({format_relative(hold.expires_at, now)})")
    elif DEADLINE_UNREADABLE in hold.problems:
        lines.append("deadline   unreadable (held until `hermes resume`)")
    else:
        lines.append("deadline   none (held until `hermes resume`)")
    allow = hold.allow
    if allow.user_ids:
        users = ", ".join(printable(user) for user in sorted(allow.user_ids))
        profiles = f" on profiles {', '.join(printable(p) for p in sorted(allow.profiles))}" if allow.profiles else ""
        lines.append(f"allow      users {users}{profiles}")
    elif not allow.valid:
        lines.append("allow      (malformed: admits nobody)")
    else:
        lines.append("allow      nobody")
    if hold.armed_by:
        lines.append(f"armed by   {printable(hold.armed_by)}")
    if hold.problems:  # said in the body's own words too: "deadline unreadable: held until resumed"
        lines.append(f"problem    {'; '.join(printable(p) for p in hold.problems)}")
    return lines


def describe_reading(reading: Reading, now: datetime, location: str) -> list[str]:
    """A heading line and indented detail lines for one present reading; `location` is
    `HoldStore.where(...)` of its location. An unreadable hold names its cause and what will lift
    it (`check.unreadable_cause`)."""
    where = f"{printable(reading.location.describe())} ({printable(location)})"
    if reading.state is HoldState.UNREADABLE and reading.cause is Cause.EMPTY:
        return [f"HELD  {where}", f"      {HAND_MADE}", f"      covers     {ALL_WORK}"]
    if reading.state is HoldState.UNREADABLE:
        return [f"HELD  {where}", f"      unreadable: {unreadable_cause(reading)} (held, admits nobody)",
                f"      covers     {ALL_WORK}"]
    if reading.state is HoldState.EXPIRED:
        return [f"lifted {where}: expired at {display_instant(reading.hold.expires_at) if reading.hold else '?'}"]
    assert reading.hold is not None
    return [f"HELD  {where}"] + [f"      {line}" for line in describe_hold(reading.hold, now)]


def paused_lines(location: Location, hold: Hold, where: str, note: str, now: datetime,
                 others: list[Reading]) -> list[str]:
    """What `hermes pause` prints (here and over `--server`): the hold armed, then every other
    full hold that holds this process."""
    scoped = "" if hold.selector is None else f" for {covers(hold.selector)} only (hold {printable(hold.hold_id or '?')})"
    lines = [f"paused {printable(location.describe())}{scoped}{note} ({printable(where)})"]
    lines.extend(f"  {line}" for line in describe_hold(hold, now))
    lines.extend(f"also held by {printable(reading.location.describe())}" for reading in others)
    return lines


def resumed_line(location: Location, removed: Reading) -> str:
    """What `hermes resume` says of one lifted hold (here and over `--server`), in the words
    `hermes status` showed it in."""
    where = printable(location.describe())
    if removed.hold is not None and removed.hold.selector is not None:
        return (f"resumed {where} scoped hold {removed.hold.scope_label} "
                f"(generation {printable(removed.hold.generation or '?')})")
    if removed.hold is not None and removed.hold.generation:
        return f"resumed {where} (generation {printable(removed.hold.generation)})"
    if removed.state is HoldState.UNREADABLE and removed.cause is not Cause.EMPTY:
        return f"resumed {where} (removed an unreadable hold: {printable(removed.problem or '?')})"
    return f"resumed {where} (a hand-made stop with no details)"
