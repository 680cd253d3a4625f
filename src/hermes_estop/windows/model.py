"""The window model (docs/design.md §6): one `[[windows]]` table of `windows.toml` (docs/windows.md),
its fields' types (shared with `[[calendars]]`), how a refusal reads (`InvalidWindow`: one line
naming the file, the window and the field, the same for the file, `windows add` and `validate`)
and the fleet's arming policy applied to a window when it is validated (issue 37: a schedule
never surprises at 03:00).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo
from difflib import get_close_matches
from functools import lru_cache, partial
from pathlib import Path
from typing import Annotated, Any, TypeVar
from zoneinfo import ZoneInfo

from croniter import croniter
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    Strict,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from hermes_estop.model.cronspec import validate_cron, validate_timezone
from hermes_estop.model.durations import format_duration, parse_with_unit
from hermes_estop.model.errors import EstopError
from hermes_estop.model.hold import MAX_REASON, Allow, clean_reason
from hermes_estop.model.homes import FLEET, validate_profile_name
from hermes_estop.model.policy import Actor, Policy, Refusal, window_refusals
from hermes_estop.model.selector import Selector
from hermes_estop.model.timeutil import display_instant, format_instant, in_interval, parse_instant, schedulable, to_utc
from hermes_estop.windows.ical import Feed

__all__ = [
    "MAX_REASON",
    "WINDOWS_FILE",
    "InvalidWindow",
    "Parsed",
    "Occurrence",
    "ShapeError",
    "Window",
    "WindowAllow",
    "WindowsDocument",
    "occurrence_key",
    "reason_of",
    "refusals_of",
    "refused_window",
    "validate_scope",
    "validate_table",
]

WINDOWS_FILE = "windows.toml"
MAX_TASK_ARGS = 256
#: draining the fleet more than a day before a window is a typo, not a plan
MAX_DRAIN = timedelta(hours=24)
#: a window's or a calendar's name (they share names)
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


class InvalidWindow(EstopError, ValueError):
    """A window definition (or `windows.toml`) that does not validate. `problems` is every
    (field, message) found and the message names them all, so a typo'd key is never hidden
    behind the field it left missing; `field` is the first's."""

    def __init__(self, message: str, *, path: Path | None = None, window: str | None = None,
                 field: str | None = None, problems: Sequence[tuple[str | None, str]] = ()) -> None:
        where = [str(path)] if path is not None else []
        if window is not None:
            where.append(f"window {window}")
        every = list(problems) or [(field, message)]
        said = "; ".join(f"field {f!r}: {m}" if f is not None else m for f, m in every)
        super().__init__(": ".join([*where, said]))
        self.path = path
        self.window = window
        self.field = every[0][0]
        self.problems = tuple(every)

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path) if self.path is not None else None, "window": self.window,
                "problems": [{"field": f, "message": m} for f, m in self.problems], "error": str(self)}


class ShapeError(ValueError):
    """A model validator's refusal, carrying the field to name (pydantic gives it no location)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


Model = TypeVar("Model", bound=BaseModel)


def _problem(error: Any, known: list[str]) -> tuple[str | None, str]:
    loc = [str(part) for part in error.get("loc", ())]
    field = ".".join(loc) if loc else None
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, Exception):  # a validator's own words
        return cause.field if isinstance(cause, ShapeError) else field, str(cause)
    if error.get("type") == "extra_forbidden":
        if loc and loc[0] == "allow":
            return field, "unknown field (expected user_ids, profiles)"
        close = get_close_matches(loc[-1], known, n=1, cutoff=0.7) if loc else []
        if close:
            return field, f"unknown field (did you mean {close[0]!r}?)"
        return field, f"unknown field (expected one of {', '.join(known)})"
    if error.get("type") == "missing":
        return field, "required"
    if error.get("type") == "bool_type":  # `Enabled`: the wording its own validator had
        return field, f"invalid {field} {error.get('input')!r}: expected true or false"
    return field, f"{error.get('msg', 'invalid')} (got {error.get('input')!r})"


def validate_table(model: type[Model], data: Any, *, path: Path | None, index: int | None, kind: str = "") -> Model:
    """`model` validated from one `windows.toml` table, or an `InvalidWindow` naming the table and
    every bad field, unknown keys first (a typo'd key explains the field it left missing)."""
    if not isinstance(data, dict):
        raise InvalidWindow(f"expected a table, got {type(data).__name__}", path=path, window=_label(None, index, kind))
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        known = list(model.model_fields)
        errors = sorted(exc.errors(), key=lambda error: error.get("type") != "extra_forbidden")
        raise InvalidWindow("invalid", path=path, window=_label(data.get("name"), index, kind),
                            problems=[_problem(error, known) for error in errors]) from None


def _label(name: object, index: int | None, kind: str) -> str | None:
    """How a refusal names a table: its name, else its position (made only for a refusal)."""
    if isinstance(name, str) and NAME_RE.fullmatch(name):
        return repr(name)
    return f"{kind}#{index + 1}" if index is not None else None


# -- the fields' types (each parser's `ValueError` names the value; `_problem` names the field) --

def optional(parse: Callable[[Any], Any]) -> BeforeValidator:
    return BeforeValidator(lambda value: None if value is None else parse(value))


def parse_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise ValueError(f"invalid {what} name {value!r}: use lowercase letters, digits, '-' and '_' "
                         "(starting with a letter or digit, at most 64)")
    return value


def validate_scope(value: object) -> str:
    if value == FLEET:
        return FLEET
    try:
        return validate_profile_name(value)
    except EstopError as exc:
        raise ValueError(f"invalid scope {value!r}: expected {FLEET!r} or a profile name ({exc})") from None


def _drain(value: object) -> timedelta | None:
    lead = parse_with_unit(value)
    if lead > MAX_DRAIN:
        raise ValueError(f"invalid drain {value!r}: longer than the {MAX_DRAIN // timedelta(hours=1)}h bound "
                         "(a drain lead is at most a day)")
    return lead


def _selector_part(value: object, field: str) -> list[str]:
    """`only` or `jobs`: a list of names, each checked as `Selector.of` checks operator input (its
    `InvalidArgument` is a `ValueError`: pydantic reports its words)."""
    if not isinstance(value, list):
        raise ValueError(f"invalid {field} {value!r}: expected a list of names")  # noqa: TRY004
    Selector.of(value if field == "only" else (), value if field == "jobs" else ())
    return list(value)


def _exclude(value: object) -> list[date]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"invalid exclude {value!r}: expected a list of dates (YYYY-MM-DD)")  # noqa: TRY004
    out: set[date] = set()
    for item in value:
        try:  # a TOML date as it is (a datetime is not one), else text
            out.add(item if isinstance(item, date) and not isinstance(item, datetime) else date.fromisoformat(item))
        except (TypeError, ValueError):
            raise ValueError(f"invalid exclude date {item!r}: expected a calendar date (YYYY-MM-DD)") from None
    return sorted(out)


def _run(value: object) -> list[str]:
    if (not isinstance(value, list) or not value or len(value) > MAX_TASK_ARGS
            or not all(isinstance(arg, str) and arg and "\x00" not in arg for arg in value)):
        raise ValueError(f"invalid run {value!r}: expected a non-empty list of at most {MAX_TASK_ARGS} "
                         "non-empty strings (the command and its arguments)")
    return list(value)


def _start(value: object, what: str) -> datetime:
    """`at` and `not_before` must lie in `timeutil.COMPUTABLE` (the year 9999 would overflow
    the scheduler's arithmetic): refused here, naming the field, not met at run time."""
    return schedulable(parse_instant(value, what=what), what=what)


def _calendar_location(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 2000:
        raise ValueError(f"invalid exclude_calendar {value!r}: expected an .ics path or an https:// url")
    return value


#: how `to_json` writes a duration (`1h30m`)
_DUMPED = PlainSerializer(lambda value: None if value is None else format_duration(value))
Duration = Annotated[
    timedelta,
    _DUMPED,
    WithJsonSchema({"type": "string", "description": "45m, 1h30m, 90s, 1d or ISO-8601 PT2H; at most 366 days",
                    "examples": ["1h", "90m", "PT2H"]}),
]
Drain = Annotated[
    timedelta | None,
    optional(_drain),
    _DUMPED,
    WithJsonSchema({"type": "string", "description": "arm the hold this long before each start (reason "
                                                     "'draining for <window>'), so the window begins on a "
                                                     "quiet fleet; positive, at most 24h",
                    "examples": ["15m", "1h"]}),
]
Instant = Annotated[
    datetime | None,
    PlainSerializer(format_instant),
    WithJsonSchema({"type": "string", "format": "date-time",
                    "description": "ISO-8601 instant; without an offset it is UTC"}),
]
Cron = Annotated[str | None, optional(validate_cron)]
Zone = Annotated[str, BeforeValidator(lambda value: validate_timezone(value).key)]
Scope = Annotated[str, BeforeValidator(validate_scope)]
Enabled = Annotated[bool, Strict()]  # true or false, never 1 or "yes"
Only = Annotated[list[str], BeforeValidator(partial(_selector_part, field="only"))]
Jobs = Annotated[list[str], BeforeValidator(partial(_selector_part, field="jobs"))]


class WindowAllow(BaseModel):
    """Who keeps working through the window's hold: `user_ids` grant, `profiles` narrow."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_ids: list[str] = Field(default_factory=list)
    profiles: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, data: Any) -> Any:
        if not isinstance(data, dict) or set(data) - {"user_ids", "profiles"}:
            return data  # extra="forbid" names an unknown key
        users, profiles = data.get("user_ids") or [], data.get("profiles") or []
        for key, items in (("user_ids", users), ("profiles", profiles)):
            if not isinstance(items, list):
                raise ValueError(f"invalid allow.{key} {items!r}: expected a list")  # noqa: TRY004
        text = all(type(item) is str for item in (*users, *profiles))  # else a key could be equal, not same
        found = _allowlist(tuple(users), tuple(profiles)) if text else _allowlist.__wrapped__(users, profiles)
        return {"user_ids": list(found[0]), "profiles": list(found[1])}


@lru_cache(maxsize=1024)
def _allowlist(users: Sequence[Any], profiles: Sequence[Any]) -> tuple[list[str], list[str]]:
    """An allowlist normalized (`Allow.of`): kept, as a fleet's windows share a few."""
    allow = Allow.of(users, profiles)
    return sorted(allow.user_ids), sorted(allow.profiles)


def written(model: BaseModel, keys: Iterable[str]) -> dict[str, Any]:
    """The fields `keys` of `model` that `windows.toml` writes: all but the empty ones and `enabled = true`."""
    out: dict[str, Any] = {}
    for key in keys:
        value = getattr(model, key)
        if isinstance(value, WindowAllow):
            value = {k: list(v) for k, v in value.model_dump().items() if v} if value.user_ids else None
        elif key == "enabled":
            value = None if value else False
        if value is not None and value != []:
            out[key] = format_duration(value) if isinstance(value, timedelta) else value
    return out


@lru_cache(maxsize=4096)
def cron_matches(expr: str, wall: datetime) -> bool:
    return bool(croniter.match(expr, wall.replace(second=0, microsecond=0)))


def reason_of(name: str, reason: str | None, own: str | None = None, *, draining: bool = False) -> str:
    """The reason of one occurrence's hold (`own`: a calendar event's SUMMARY). Of the fields, not
    a `Window`: the scheduler reads them off a row's table."""
    reason = own or reason
    if not draining:
        return reason or f"maintenance window {name}"
    text = f"draining for {name}" + (f": {reason}" if reason else "")
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3].rstrip() + "..."


#: the fields `Window.to_json` leaves out when empty
_OPTIONAL = ("exclude", "exclude_cron", "exclude_calendar", "drain", "run", "on_failure_ttl", "only", "jobs")


class Window(BaseModel):
    """One maintenance window. Validated on construction; frozen afterwards."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=False)

    name: Annotated[str, BeforeValidator(partial(parse_name, what="window"))] = Field(
        description="a slug: lowercase letters, digits, '-' and '_', at most 64")
    cron: Cron = Field(None, description="5-field crontab expression (minute hour day month weekday)")
    timezone: Zone = Field("UTC", description="IANA zone the cron expression is read in (cron windows only)")
    at: Annotated[Instant, optional(partial(_start, what="at time"))] = Field(
        None, description="one-shot window: the instant it starts")
    duration: Annotated[Duration, BeforeValidator(parse_with_unit)] = Field(
        description="how long each occurrence lasts (absolute time)")
    drain: Drain = Field(None)
    reason: Annotated[str | None, BeforeValidator(lambda value: clean_reason(value) or None)] = Field(
        None, description="shown to refused users while the window holds")
    allow: WindowAllow = Field(default_factory=WindowAllow)
    scope: Scope = Field(FLEET, description="'fleet' or a profile name")
    only: Only = Field(default_factory=list, description="a scoped hold: only these consumer components "
                                                         "(cron, kanban, gateway, apscheduler, or your own)")
    jobs: Jobs = Field(default_factory=list, description="a scoped hold: only the units of work whose "
                                                         "name matches one of these globs")
    enabled: Enabled = True
    not_before: Annotated[Instant, optional(partial(_start, what="not_before time"))] = Field(
        None, description="no occurrence starts before this instant")
    not_after: Annotated[Instant, optional(partial(parse_instant, what="not_after time"))] = Field(
        None, description="no occurrence starts at or after this instant")
    exclude: Annotated[list[date], BeforeValidator(_exclude)] = Field(
        default_factory=list, description="local dates (in the window's timezone) on which no occurrence starts")
    exclude_cron: Cron = Field(None, description="5-field crontab expression: an occurrence whose local "
                                                 "start it matches does not start (e.g. '* * 24-26 12 *')")
    run: Annotated[list[str] | None, optional(_run)] = Field(
        None, description="a maintenance task: the command (argv) run at each occurrence's start under the "
                          "window's hold (windows/tasks.py)")
    on_failure_ttl: Annotated[timedelta | None, optional(parse_with_unit), _DUMPED] = Field(
        None, description="with run: how long the hold is kept after the task fails (default 1h)")
    exclude_calendar: Annotated[str | None, optional(_calendar_location)] = Field(
        None, description="an .ics path (from the fleet root) or url: no occurrence starts on a local date an "
                          "event of it covers (holidays)")
    #: the feed `exclude_calendar` names, bound by `calendars.bind` when the file is read
    _holidays: Feed | None = PrivateAttr(None)

    @property
    def selector(self) -> Selector | None:
        """What the window's hold covers (None: everything, a full hold)."""
        return Selector.of(self.only, self.jobs)

    @model_validator(mode="after")
    def _shape(self) -> Window:
        if (self.cron is None) == (self.at is None):
            raise ShapeError("cron/at", "give exactly one of cron (recurring) or at (one-shot)")
        if self.at is not None and "timezone" in self.model_fields_set and self.timezone != "UTC":
            raise ShapeError("timezone", "applies to cron windows only; write the at instant with its offset")
        if self.on_failure_ttl is not None and self.run is None:
            raise ShapeError("on_failure_ttl", "applies to a window with run only")
        if self.not_before is not None and self.not_after is not None and self.not_after <= self.not_before:
            raise ShapeError("not_after", f"{format_instant(self.not_after)} is not after not_before "
                                           f"{format_instant(self.not_before)}")
        return self

    @property
    def tz(self) -> ZoneInfo:
        return validate_timezone(self.timezone)

    @property
    def hold_allow(self) -> Allow:
        return Allow.of(self.allow.user_ids, self.allow.profiles)

    def reason_for(self, own: str | None) -> str:
        return reason_of(self.name, self.reason, own)

    @property
    def feed(self) -> Feed | None:
        """The calendar whose events are this window's occurrences (`calendars.CalendarWindow`)."""
        return None

    def excludes(self, start: datetime) -> bool:
        # asked per start, per window: reading a private attribute costs a pydantic `__getattr__`
        if not self.exclude and self.exclude_cron is None and (self.exclude_calendar is None or self._holidays is None):
            return False
        local = start.astimezone(self.tz)
        return (local.date() in self.exclude
                or (self._holidays is not None and self._holidays.covers_day(local.date(), self.tz))
                or (self.exclude_cron is not None and cron_matches(self.exclude_cron, local.replace(tzinfo=None))))

    def zone_of(self, occurrence: Any) -> tzinfo:
        """The zone an occurrence is shown in: the window's (a calendar's: its event's own)."""
        return self.tz

    def describe_duration(self) -> str:
        return format_duration(self.duration)

    def describe_schedule(self, *, for_json: bool = False) -> str:
        """A one-shot's instant as a person reads it (local, to the second), or exact UTC for `--json`."""
        if self.cron is not None:
            return f"cron '{self.cron}' {self.timezone}"
        return f"at {format_instant(self.at) if for_json else display_instant(self.at)}"

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude=self._left_out())

    def to_json_bytes(self) -> bytes:
        """`to_json` as compact JSON (UTF-8, not ASCII-escaped), encoded by pydantic in one pass:
        the compiled schedule keeps it per row (a third of the cost of `json.dumps(to_json())`)."""
        if type(self).to_json is not Window.to_json:
            return json.dumps(self.to_json(), separators=(",", ":"), ensure_ascii=False).encode()
        return self.model_dump_json(exclude=self._left_out()).encode()

    def _left_out(self) -> set[str]:
        out = {key for key in _OPTIONAL if not getattr(self, key)}
        return out if self.cron is not None else out | {"timezone"}

    def to_toml(self) -> dict[str, Any]:
        return written(self, [key for key in Window.model_fields if self.cron is not None or key != "timezone"])

    @classmethod
    def parse(cls, data: Any, *, path: Path | None = None, index: int | None = None) -> Window:
        """A window from a mapping (a `windows.toml` table, CLI input), or `InvalidWindow`."""
        return validate_table(cls, data, path=path, index=index)


class WindowsDocument(BaseModel):
    """The shape of `windows.toml` (what `hermes windows schema` prints)."""

    model_config = ConfigDict(extra="forbid", title="hermes-estop windows.toml", defer_build=True)

    windows: list[Window] = Field(default_factory=list)


# -- the fleet's arming policy, met when a window is validated, not when it arms

_POLICY_FIELDS = {"max_ttl": "duration", "reason_pattern": "reason", "require_ttl": "duration", "max_scope": "scope"}


def refusals_of(policy: Policy, actor: Actor, window: Window) -> tuple[Refusal, ...]:
    """Every rule `window`, armed by `actor`, breaks: its hold lasts its drain lead and its
    duration, and is judged by the operator's reason (`reason_for(None)`), never "draining for ...",
    as the fleet judges it when it is armed."""
    length = window.duration + (window.drain or timedelta(0))
    return window_refusals(policy, actor, window.scope, length, window.reason_for(None))


def refused_window(window: Window, refusals: tuple[Refusal, ...], path: Path | None = None) -> InvalidWindow:
    return InvalidWindow("; ".join(r.message for r in refusals), path=path, window=repr(window.name),
                         field=_POLICY_FIELDS.get(refusals[0].rule))


# -- one occurrence of a window: the value the schedule, the plan and the ledger share

@dataclass(frozen=True, order=True, slots=True)
class Occurrence:
    """One occurrence: `[start, end)` of `window`, held at `scope`, instants aware UTC. A
    calendar's also has its `event` (the id from UID and RECURRENCE-ID: it stays when the
    instance is moved), the event's `uid` and its `reason` (the SUMMARY)."""

    start: datetime
    end: datetime
    window: str
    scope: str
    lead: timedelta = field(default=timedelta(0), compare=False)
    event: str | None = None
    uid: str | None = field(default=None, compare=False)
    reason: str | None = field(default=None, compare=False)

    @property
    def arm_at(self) -> datetime:
        return self.start - self.lead if self.lead else self.start

    @property
    def ident(self) -> str:
        """What the hold's `window` field names it by: the start, ISO-8601 UTC (a calendar's: the
        event's id)."""
        return self.event or to_utc(self.start).isoformat()

    @property
    def key(self) -> str:
        """Stable identity across processes and restarts: `<scope>/<window>@<start>` (a scope
        name never contains '/'; the same window moved to another scope is another hold)."""
        return occurrence_key(self.scope, self.window, self.ident)

    def covers(self, now: datetime) -> bool:
        return in_interval(now, self.arm_at, self.end)

    def draining(self, now: datetime) -> bool:
        return in_interval(now, self.arm_at, self.start)

    def ended(self, now: datetime) -> bool:
        return not in_interval(now, None, self.end)

    def to_json(self, now: datetime | None, tz: tzinfo) -> dict[str, object]:
        """`tz`: the zone its window shows it in (`Window.zone_of`); `now`: say whether it holds."""
        data: dict[str, object] = {"window": self.window, "scope": self.scope, "occurrence": self.ident,
                                   "start": format_instant(self.start), "end": format_instant(self.end),
                                   "local_start": self.start.astimezone(tz).isoformat(),
                                   "drain_from": format_instant(self.arm_at) if self.lead else None}
        if self.uid is not None:
            data["uid"] = self.uid
            data["reason"] = self.reason
        if now is not None:
            data["active"] = self.covers(now)
            data["draining"] = self.draining(now)
        return data


def occurrence_key(scope: str, window: str, ident: str) -> str:
    return f"{scope}/{window}@{ident}"


@dataclass
class Parsed:
    """The tables of a windows file: the `windows` that validate, and one `InvalidWindow` per
    table that does not (or repeats a name). Calendars bound (`calendars.bind`): `stale` names
    those running on their last good copy, and why; `digests` the feeds read (part of a read's
    identity); `files` what to watch. `sources` are the `calendars.CalendarSource`s (not named
    here: calendars.py builds on this module)."""

    windows: list[Window]
    failures: list[InvalidWindow]
    sources: list[Any] = field(default_factory=list)
    stale: dict[str, str] = field(default_factory=dict)
    digests: tuple[str, ...] = ()
    files: tuple[Path, ...] = ()

    def whole(self) -> Parsed:
        """Itself when every table validates, else the first failure raised."""
        if self.failures:
            raise self.failures[0]
        return self

    def failing_names(self) -> frozenset[str]:
        """The names (as written) of the tables that fail, where they have a valid one."""
        return frozenset(f.window.strip("'") for f in self.failures if f.window and f.window.startswith("'"))
