"""`hermes windows add | list | remove | next | validate | timeline | schema`: the maintenance
windows in `<fleet root>/windows.toml`. `hermes serve` arms and lifts them. The commands about one
occurrence (`skip`, `unskip`, `explain`) are in `windows_occurrences`.

Imports only typer and the core at module level; the window model (pydantic, croniter) is
imported inside the commands."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import typer

from hermes_estop.cli import windows_impact, windows_occurrences  # noqa: F401 - register impact, skip, unskip and explain on windows_app
from hermes_estop.cli.api_client import Remote, remote_next, remote_windows, served_occurrences
from hermes_estop.cli.command_io import EXIT_USAGE, current_estop, duration_option, echo_lines, emit_json, operator_time
from hermes_estop.cli.served import remote_if_named
from hermes_estop.cli.windows_app import JsonOpt, file as _file, now as _now, windows_app
from hermes_estop.cli.windows_impact import starving_jobs
from hermes_estop.model.durations import format_duration
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.hold import Fence
from hermes_estop.model.homes import FLEET
from hermes_estop.model.text import one_line, printable
from hermes_estop.model.timeutil import display_instant, format_instant, format_relative, parse_instant
from hermes_estop.observe.terminal import print_timeline
from hermes_estop.observe.view import Observer
from hermes_estop.windows.export import ics_of, planned
from hermes_estop.windows.forecast import ahead, enabled
from hermes_estop.windows.ledger import open_ledger, skipped_keys
from hermes_estop.windows.model import InvalidWindow, Window, WindowsDocument, refusals_of, refused_window
from hermes_estop.windows.occurrences import upcoming
from hermes_estop.windows.schedule import schedule_of
from hermes_estop.windows.windows_file import against_policy

if TYPE_CHECKING:
    from datetime import datetime

    from hermes_estop.windows.model import Occurrence, Window
    from hermes_estop.windows.schedule import Row, Schedule
    from hermes_estop.windows.windows_file import WindowsFile

    Shown = Window | Row

__all__ = ["register", "windows_app"]

@windows_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The window's name (lowercase letters, digits, '-', '_').")],
    cron: Annotated[str | None, typer.Option("--cron", help="Recurring: a 5-field crontab expression, e.g. '30 2 * * 0'.")] = None,
    tz: Annotated[str | None, typer.Option("--tz", help="IANA timezone the cron expression is read in (default UTC).")] = None,
    at: Annotated[str | None, typer.Option("--at", help="One-shot: the start: 15:00, tomorrow 03:00 (local time unless a zone follows), or ISO-8601 (naive = UTC).")] = None,
    in_: Annotated[str | None, typer.Option("--in", metavar="DUR", help="One-shot: start this long from now (5s, 10m, 2h).")] = None,
    duration: Annotated[str | None, typer.Option("--duration", help="How long each occurrence holds (45m, 2h, PT2H).")] = None,
    drain: Annotated[str | None, typer.Option("--drain", metavar="DUR", help="Arm the hold this long before each start (reason: draining for NAME), so the window begins on a quiet fleet (at most 24h).")] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Shown to refused users while the window holds.")] = None,
    allow_user: Annotated[list[str] | None, typer.Option("--allow-user", help="A user id that keeps working (repeatable).")] = None,
    allow_profile: Annotated[list[str] | None, typer.Option("--allow-profile", help="Narrow the allowed users to these profiles (repeatable).")] = None,
    profile: Annotated[str | None, typer.Option("--profile", help="Hold only this profile (default: the whole fleet).")] = None,
    not_before: Annotated[str | None, typer.Option("--not-before", help="No occurrence starts before this ISO-8601 time.")] = None,
    not_after: Annotated[str | None, typer.Option("--not-after", help="No occurrence starts at or after this ISO-8601 time.")] = None,
    disabled: Annotated[bool, typer.Option("--disabled", help="Add it switched off (enabled = false).")] = False,
    replace: Annotated[bool, typer.Option("--replace", help="Replace a window of the same name.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Add a window: `--cron EXPR [--tz ZONE]`, `--at TIME` or `--in DUR`, with `--duration DUR`."""
    window_at = _one_shot_start(cron, at, in_, tz)
    if duration is None:
        raise InvalidArgument("--duration is required (e.g. --duration 2h)")
    if allow_profile and not allow_user:
        raise InvalidArgument(
            f"--allow-profile {' '.join(allow_profile)} without --allow-user: a profile never grants on its own"
        )
    data: dict[str, object] = {"name": name, "duration": duration, "scope": profile if profile is not None else FLEET}
    if cron is not None:
        data["cron"] = cron
        data["timezone"] = tz if tz is not None else "UTC"
    else:
        data["at"] = window_at
    for key, value in (("drain", drain), ("reason", reason), ("not_before", not_before), ("not_after", not_after)):
        if value is not None:
            data[key] = value
    if allow_user:
        data["allow"] = {"user_ids": list(allow_user), "profiles": list(allow_profile or [])}
    if disabled:
        data["enabled"] = False
    window = Window.parse(data)
    now = _now()
    following = upcoming(window, now, 1)
    if window.at is not None and not following:
        raise InvalidWindow(f"is already over (it ended at {display_instant(window.at + window.duration)})",
                            window=repr(window.name), field="at")
    windows_file = _file()
    guard = current_estop().fleet.policy
    policy, _problem = guard.policy()
    refusals = refusals_of(policy, guard.identity, window) if not policy.empty else ()
    if refusals:
        raise refused_window(window, refusals, windows_file.path)
    windows_file.add(window, replace=replace)
    if as_json:
        emit_json({"path": str(windows_file.path), "window": window.to_json(),
                   "next": following[0].to_json(now, window.zone_of(following[0])) if following else None})
        return
    typer.echo(f"added window {window.name} to {windows_file.path}: {window.describe_schedule()} for "
               f"{window.to_json()['duration']}{_drain_note(window)}, {window.scope}")
    if following:
        typer.echo(f"  next: {display_instant(following[0].start)} ({format_relative(following[0].start, now)})"
                   f"{_drain_from(following[0])}")
    else:
        typer.echo("  no occurrence ahead")
    typer.echo("  `hermes serve` arms it (a running one picks the change up by itself)")


def _one_shot_start(cron: str | None, at: str | None, in_: str | None, tz: str | None) -> str | None:
    """The start of a one-shot window (`--at` or `--in`) as exact ISO-8601; None for a `--cron` one.
    `InvalidArgument` unless exactly one of the three is given, or for `--tz` without `--cron`."""
    if sum(value is not None for value in (cron, at, in_)) != 1:
        raise InvalidArgument("give exactly one of --cron EXPR (recurring), --at TIME or --in DUR (one-shot)")
    start = None
    if in_ is not None:
        start = format_instant(_now() + duration_option("--in", in_))
    elif at is not None:
        start = format_instant(operator_time("--at", at, _now()))
    if tz is not None and cron is None:
        raise InvalidArgument("--tz applies to --cron windows only; give --at with its offset")
    return start


@windows_app.command("list")
def list_(as_json: JsonOpt = False) -> None:
    """Every window in windows.toml."""
    remote = remote_if_named()
    if remote is not None:  # the server's windows, printed as a local list prints them
        document = remote_windows(remote)
        if as_json:
            emit_json(document)
        elif not document["windows"]:
            typer.echo(f"no windows ({printable(document.get('path'))})")
        else:
            echo_lines(printable(line) for line in _list_lines(_Listed.shown(w) for w in document["windows"]))
        return
    windows_file = _file()
    schedule = schedule_of(windows_file, _now())
    items = range(len(schedule))  # no `Window` built for a row
    if as_json:
        emit_json({"path": str(windows_file.path), "windows": [schedule.shown(item) for item in items]})
        return
    if not items:
        typer.echo(f"no windows ({windows_file.path})")
        return
    # a row decoded as its lines are written (100,000 windows' tables held at once as dicts: 100s of MB)
    listed = (_Listed.shown(schedule.shown(item)) for item in items)
    echo_lines(printable(line) for line in _list_lines(listed))


class _Listed(NamedTuple):
    """What `windows list` prints of a window, from what `Window.to_json` made of it (the
    compiled schedule's table, or a server's answer): no `Window` built."""

    name: str
    schedule: str
    duration: str
    drain: str | None
    scope: str
    enabled: bool
    reason: str | None
    user_ids: list[str]
    profiles: list[str]
    bounds: tuple[str | None, str | None]

    @classmethod
    def shown(cls, window: dict[str, Any]) -> _Listed:
        duration = window["duration"]
        if "calendar" in window:  # a calendar's (`CalendarWindow.to_json`): the lengths of its events
            when, spans = f"calendar {window['calendar']}", window["durations"]
            duration = " to ".join(dict.fromkeys((spans[0], spans[-1]))) if spans else "no events"
        else:
            when = (f"cron '{window['cron']}' {window['timezone']}" if window["cron"] is not None
                    else f"at {_displayed(window['at'])}")
        return cls(window["name"], when, duration, window.get("drain"), window["scope"], window["enabled"],
                   window.get("reason"), window["allow"]["user_ids"], window["allow"]["profiles"],
                   (_displayed(window.get("not_before")), _displayed(window.get("not_after"))))


def _displayed(instant: str | None) -> str | None:
    """An instant of `to_json` as a person reads it (`display_instant`)."""
    return display_instant(parse_instant(instant, what="instant")) if instant is not None else None


def _list_lines(listed: Iterable[_Listed]) -> Iterator[str]:
    for window in listed:
        flags = "" if window.enabled else "  (disabled)"
        drain = f", draining {window.drain} ahead" if window.drain is not None else ""
        yield f"{window.name}  {window.schedule}  for {window.duration}{drain}  {window.scope}{flags}"
        if window.reason:
            yield f"    reason  {window.reason}"
        if window.user_ids:
            narrowed = f" on profiles {', '.join(window.profiles)}" if window.profiles else ""
            yield f"    allow   users {', '.join(window.user_ids)}{narrowed}"
        if window.bounds[0] or window.bounds[1]:
            yield f"    bounds  {window.bounds[0] or '-'} .. {window.bounds[1] or '-'}"


@windows_app.command("remove")
def remove(name: Annotated[str, typer.Argument(help="The window to remove.")],
           lift: Annotated[bool, typer.Option("--lift", help="Also lift the hold the window armed now, as you "
                                                            "(judged by the policy's lift_windows rule).")] = False,
           as_json: JsonOpt = False) -> None:
    """Remove a window. A running `hermes serve` stops scheduling it and retires a hold it armed,
    unless the fleet's policy limits who lifts a window's hold (`lift_windows`): then that hold
    stands until the deadline it was armed with, and `--lift` is the operator's lift."""
    windows_file = _file()
    lifted: list[str] = []
    if lift:
        if not any(w.name == name for w in windows_file.load()):
            raise InvalidWindow("no such window", path=windows_file.path, window=repr(name))
        lifted = _lift_window_holds(name)
    window = windows_file.remove(name)
    if as_json:
        emit_json({"path": str(windows_file.path), "removed": window.to_json(), "lifted": lifted})
        return
    typer.echo(f"removed window {window.name} from {windows_file.path}")
    for generation in lifted:
        typer.echo(f"  lifted its hold (generation {generation})")


def _lift_window_holds(name: str) -> list[str]:
    """Lift, as the operator, every hold window `name` armed (its `armed_by` or its body names
    it); judged like any lift (`PolicyRefused`: nothing lifted, the window stays in the file)."""
    fleet = current_estop().fleet
    now = fleet.clock()
    lifted = []
    for full in fleet.read(now=now).readings:
        for reading in (full, *full.scoped):
            hold = reading.hold
            if hold is None or not reading.active or hold.generation is None:
                continue
            body = dict(hold.window or {})
            covers = body.get("covers")
            named = {str(item.get("name")) for item in [body, *(covers if isinstance(covers, list) else [])]
                     if isinstance(item, dict)}
            ours = hold.armed_by == f"window:{name}" or name in named
            if ours and fleet.retire(reading.location, Fence(hold.generation), now=now,
                                     detail=f"window {name} removed with hermes windows remove --lift"):
                lifted.append(hold.generation)
    return lifted


@windows_app.command("next")
def next_(
    name: Annotated[str | None, typer.Argument(help="Only this window.")] = None,
    count: Annotated[int | None, typer.Option("--count", "-n", min=1, max=1000, help="Occurrences per window (default: 5 for one window, 1 for every window).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The next occurrences of every window, soonest start first (one covering now before
    them), in local time and in the window's timezone."""
    remote = remote_if_named()
    if remote is not None:  # the server's windows, printed as a local `windows next` prints them
        _next_served(remote, name, count, as_json)
        return
    windows_file = _file()
    now = _now()
    found = _listed_from_schedule(windows_file, name, count, now)
    skipped = skipped_keys(current_estop().fleet) if found else frozenset()
    if as_json:
        emit_json({"now": format_instant(now),
                   "occurrences": [o.to_json(now, w.zone_of(o)) | {"enabled": w.enabled, "skipped": o.key in skipped}
                                   for w, o in found]})
        return
    lines = _next_lines(found, now, skipped)
    first = next(lines, None)
    if first is None:
        typer.echo("no occurrences ahead")
        return
    echo_lines(itertools.chain((first,), lines))


def _next_served(remote: Remote, name: str | None, count: int | None, as_json: bool) -> None:
    """`windows next` over --server: the server's occurrences, printed as locally."""
    document = remote_next(remote, name, count)
    now, found, skipped = served_occurrences(document)
    if as_json:
        emit_json(document)
        return
    lines = _next_lines(found, now, skipped)
    first = next(lines, None)
    echo_lines(itertools.chain((first,), lines) if first is not None else ("no occurrences ahead",))


def _listed_from_schedule(windows_file: WindowsFile, name: str | None, count: int | None,
                          now: datetime) -> list[tuple[Shown, Occurrence]]:
    """`occurrences.by_start` answered from the windows file's compiled schedule (no `Window`
    built for a row it answers)."""
    schedule = schedule_of(windows_file, now)
    items = list(range(len(schedule)))
    if name is not None:
        items = [schedule.item_named(name, windows_file.path)]
    per_window = count if count is not None else (5 if name is not None else 1)
    found: list[tuple[int, int, Shown, Occurrence]] = []
    for position, item in enumerate(items):
        shown, answered = _upcoming_of(schedule, item, now, per_window)
        found.extend((int(o.start.timestamp()), position, shown, o) for o in answered)
    found.sort(key=lambda item: (item[0], item[1]))
    return [(shown, occurrence) for _, _, shown, occurrence in found]


def _upcoming_of(schedule: Schedule, item: int, now: datetime, count: int) -> tuple[Shown, list[Occurrence]]:
    """`item`'s next `count` occurrences (`occurrences.upcoming`) and what `windows next` shows of
    it: from the schedule as far as it answers, else from the window."""
    answered = schedule.upcoming(item, now, count)
    if answered is not None:
        return schedule.row(item), answered
    window = schedule.window(item)
    return window, upcoming(window, now, count)


def _next_lines(found: list[tuple[Shown, Occurrence]], now: datetime, skipped: frozenset[str]) -> Iterator[str]:
    """One line per occurrence, made as they are written (100,000 windows' lines held at once
    would double the command's memory)."""
    for window, occurrence in found:
        local = occurrence.start.astimezone(window.zone_of(occurrence)).strftime("%Y-%m-%d %H:%M %Z")
        if occurrence.draining(now):
            state = (f"DRAINING (starts {format_relative(occurrence.start, now)}), "
                     f"until {display_instant(occurrence.end)}")
        elif occurrence.covers(now):
            state = f"ACTIVE until {display_instant(occurrence.end)}"
        else:
            state = f"{format_relative(occurrence.start, now)}, until {display_instant(occurrence.end)}"
        state += _drain_from(occurrence, window)
        off = "  (disabled)" if not window.enabled else ""
        off += "  (skipped)" if skipped and occurrence.key in skipped else ""
        yield f"{window.name}  {display_instant(occurrence.start)}  ({local})  {state}  {window.scope}{off}"


def _drain_note(window: Window) -> str:
    """`, draining 15m ahead` for a window with a drain lead, else nothing."""
    return f", draining {format_duration(window.drain)} ahead" if window.drain is not None else ""


def _drain_from(occurrence: Occurrence, window: Shown | None = None) -> str:
    """`, drain from <instant> (<local HH:MM>)` for an occurrence with a drain lead."""
    if not occurrence.lead:
        return ""
    local = f" ({occurrence.arm_at.astimezone(window.zone_of(occurrence)):%H:%M %Z})" if window is not None else ""
    return f", drain from {display_instant(occurrence.arm_at)}{local}"


@windows_app.command("export")
def export(
    ics: Annotated[bool, typer.Option("--ics", help="As iCalendar (the only format).")] = False,
    days: Annotated[int, typer.Option("--days", min=1, max=366, help="How many days ahead.")] = 30,
) -> None:
    """The next DAYS days of occurrences (windows and calendars; skipped ones cancelled) as an
    iCalendar feed with stable UIDs, on stdout: what `GET /calendar.ics` of `hermes serve --http` serves."""
    if not ics:
        raise InvalidArgument("hermes windows export: give --ics (the only format)")
    windows_file, now = _file(), _now()
    schedule = schedule_of(windows_file, now)
    events = planned((ahead(schedule, item, now) for item in enabled(schedule)), now, days)
    entries = open_ledger(current_estop().fleet).load()
    sys.stdout.buffer.write(ics_of(events, entries, now))
    sys.stdout.flush()


def _within_policy(parsed: Any, path: Any) -> Any:
    """`parsed` less the windows the fleet's policy refuses (named as failures)."""
    guard = current_estop().fleet.policy
    return against_policy(parsed, guard.policy()[0], guard.identity, path)


@windows_app.command("validate")
def validate(as_json: JsonOpt = False,
             strict: Annotated[bool, typer.Option("--strict", help="Exit 2 when a cron job starves (every run of it within the horizon held by the windows).")] = False) -> None:
    """Check windows.toml: exit 0 when it validates, 2 with the file, window and field otherwise.
    Warns (on stderr, exit still 0) about a window that can never occur again, and about a cron
    job whose every run within the horizon the windows hold (with --strict: exit 2)."""
    windows_file = _file()
    now = _now()
    # the compiled schedule knows the file, not the fleet's policy: under a policy every window is judged
    under_policy = not current_estop().fleet.policy.policy()[0].empty
    answered = None if under_policy else _validated_by_schedule(windows_file, now)
    if answered is not None:
        _validated(windows_file, *answered, as_json, strict)
        return
    try:
        parsed = _within_policy(windows_file.parse_each(windows_file.read()), windows_file.path)
        failures = parsed.failures
    except InvalidWindow as exc:
        failures = [exc]
    if failures:
        if as_json:
            emit_json({"path": str(windows_file.path), "valid": False, "errors": [f.to_json() for f in failures]})
        else:
            for failure in failures:
                typer.echo(f"hermes: error: {one_line(failure)}", err=True)
        raise typer.Exit(EXIT_USAGE)
    windows = parsed.windows
    _validated(windows_file, len(windows), [w.name for w in windows if not upcoming(w, now, 1)], as_json, strict)


def _validated_by_schedule(windows_file: WindowsFile, now: datetime) -> tuple[int, list[str]] | None:
    """(how many windows, the names of those that never occur again), from the file's compiled
    schedule (there is one only for a file that validates whole); None when the file does not
    validate (the caller lists every failure)."""
    try:
        schedule = schedule_of(windows_file, now)
    except InvalidWindow:
        return None
    items = range(len(schedule))
    over = []
    for item in items:
        shown, answered = _upcoming_of(schedule, item, now, 1)
        if not answered:
            over.append(shown.name)
    return len(items), over


def _validated(windows_file: WindowsFile, count: int, over: list[str], as_json: bool, strict: bool = False) -> None:
    warnings = [f"window {name} can never occur again (bounds, exclusions or a past at)" for name in over]
    starving, unread = starving_jobs(current_estop(), _now()) if count else ([], [])  # cron jobs the windows starve
    warnings += [line for _, line in starving] + unread
    if as_json:
        emit_json({"path": str(windows_file.path), "valid": True, "windows": count, "warnings": warnings,
                   "starving": [job for job, _ in starving]})
    else:
        for warning in warnings:
            typer.echo(f"hermes: warning: {printable(warning)}", err=True)
    if strict and starving:
        if not as_json:
            typer.echo(f"hermes: error: {len(starving)} cron job(s) never run on their schedule (--strict)", err=True)
        raise typer.Exit(EXIT_USAGE)
    if as_json:
        return
    if not count and windows_file.identity() is None:
        typer.echo(f"ok: no windows file at {windows_file.path} (no windows)")
    else:
        typer.echo(f"ok: {count} window(s) in {windows_file.path}")


@windows_app.command("timeline")
def timeline(days: Annotated[int, typer.Option("--days", min=1, max=31, help="How many days ahead (1 to 31).")] = 7) -> None:
    """The next days drawn per scope: window occurrences, the current hold and its deadman (UTC).
    A windows.toml that does not validate: exit 2 with the whole line, like the other commands."""
    _file().load()
    print_timeline(Observer(current_estop()).view(days))


@windows_app.command("schema")
def schema() -> None:
    """Print the JSON Schema of windows.toml."""
    emit_json(WindowsDocument.model_json_schema())


def register(app: typer.Typer) -> None:
    """Add `hermes windows ...` to `app`."""
    app.add_typer(windows_app, name="windows")
