"""The window model (docs/design.md §6): one `[[windows]]` table of `windows.toml` (docs/windows.md).

A window is either recurring (`cron`, read in `timezone`) or a one-shot (`at`). Every occurrence
lasts `duration` of absolute time and arms a hold at `scope` admitting `allow`; with `drain` the
hold is armed that long BEFORE each start, so the maintenance begins on a quiet fleet.

How each field's value is read lives in `field_types` (the fields' types), how a refusal is
worded in `invalid` (one line naming the file, the window and the field: exit 2).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timedelta, tzinfo
from functools import lru_cache, partial
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from croniter import croniter
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from hermes_estop.model.cronspec import validate_timezone
from hermes_estop.model.durations import format_duration, parse_with_unit
from hermes_estop.model.hold import MAX_REASON, Allow, clean_reason
from hermes_estop.model.homes import FLEET
from hermes_estop.model.selector import Selector
from hermes_estop.model.timeutil import display_instant, format_instant
from hermes_estop.windows.field_types import (
    MAX_DRAIN,
    Cron,
    Drain,
    Duration,
    Enabled,
    Instant,
    Jobs,
    Only,
    Scope,
    WindowAllow,
    Zone,
    optional,
    parse_exclude,
    parse_name,
    parse_optional_instant,
    validate_scope,
    written,
)
from hermes_estop.windows.ical import Feed
from hermes_estop.windows.invalid import InvalidWindow, ShapeError, validate_table

__all__ = [
    "MAX_DRAIN",
    "MAX_REASON",
    "WINDOWS_FILE",
    "InvalidWindow",
    "Window",
    "WindowAllow",
    "WindowsDocument",
    "check_unique",
    "json_schema",
    "parse_run",
    "validate_scope",
]

WINDOWS_FILE = "windows.toml"
#: at most this many arguments in a window's `run` command
MAX_TASK_ARGS = 256


def parse_run(value: object) -> list[str] | None:
    """A task's command (argv), or None; `ValueError` naming the value. Also what a cached
    window's `run` must pass again: a command is never taken on trust."""
    if value is None:
        return None
    if (not isinstance(value, list) or not value or len(value) > MAX_TASK_ARGS
            or not all(isinstance(arg, str) and arg and "\x00" not in arg for arg in value)):
        raise ValueError(f"invalid run {value!r}: expected a non-empty list of at most {MAX_TASK_ARGS} "
                         "non-empty strings (the command and its arguments)")
    return list(value)


@lru_cache(maxsize=4096)
def cron_matches(expr: str, wall: datetime) -> bool:
    """Whether the naive local `wall` time (seconds ignored) is one `expr` fires at (croniter's
    `match`, on the wall clock of the window's timezone, as every cron decision here is made)."""
    return bool(croniter.match(expr, wall.replace(second=0, microsecond=0)))


def _calendar_location(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 2000:
        raise ValueError(f"invalid exclude_calendar {value!r}: expected an .ics path or an https:// url")
    return value


class Window(BaseModel):
    """One maintenance window. Validated on construction; frozen afterwards."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=False)

    name: Annotated[str, BeforeValidator(partial(parse_name, what="window"))] = Field(
        description="a slug: lowercase letters, digits, '-' and '_', at most 64")
    cron: Cron = Field(None, description="5-field crontab expression (minute hour day month weekday)")
    timezone: Zone = Field("UTC", description="IANA zone the cron expression is read in (cron windows only)")
    at: Instant = Field(None, description="one-shot window: the instant it starts")
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
    not_before: Instant = Field(None, description="no occurrence starts before this instant")
    not_after: Instant = Field(None, description="no occurrence starts at or after this instant")
    exclude: Annotated[list[date], BeforeValidator(parse_exclude)] = Field(
        default_factory=list, description="local dates (in the window's timezone) on which no occurrence starts")
    exclude_cron: Cron = Field(None, description="5-field crontab expression: an occurrence whose local "
                                                 "start it matches does not start (e.g. '* * 24-26 12 *')")
    run: Annotated[list[str] | None, BeforeValidator(parse_run)] = Field(
        None, description="a maintenance task: the command (argv) run at each occurrence's start under the "
                          "window's hold (windows/tasks.py)")
    on_failure_ttl: Annotated[timedelta | None, optional(parse_with_unit)] = Field(
        None, description="with run: how long the hold is kept after the task fails (default 1h)")
    exclude_calendar: Annotated[str | None, optional(_calendar_location)] = Field(
        None, description="an .ics path (from the fleet root) or url: no occurrence starts on a local date an "
                          "event of it covers (holidays)")
    #: the feed `exclude_calendar` names, bound by `calendars.bind` when the file is read
    _holidays: Feed | None = PrivateAttr(None)

    @field_validator("at", "not_before", "not_after", mode="before")
    @classmethod
    def _instant(cls, value: object, info: ValidationInfo) -> datetime | None:
        """An instant occurrences are computed from (`at`, `not_before`) must be schedulable."""
        return parse_optional_instant(value, f"{info.field_name} time", bounded=info.field_name != "not_after")

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

    @field_serializer("duration")
    def _dump_duration(self, value: timedelta) -> str:
        return format_duration(value)

    @field_serializer("drain", "on_failure_ttl")
    def _dump_drain(self, value: timedelta | None) -> str | None:
        return None if value is None else format_duration(value)

    @field_serializer("exclude")
    def _dump_exclude(self, value: list[date]) -> list[str]:
        return [day.isoformat() for day in value]

    @field_serializer("at", "not_before", "not_after")
    def _dump_instant(self, value: datetime | None) -> str | None:
        return format_instant(value)

    # -- derived ---------------------------------------------------------------------------

    @property
    def tz(self) -> ZoneInfo:
        return validate_timezone(self.timezone)

    @property
    def hold_allow(self) -> Allow:
        return self.allow.to_allow()

    @property
    def hold_reason(self) -> str:
        """The reason written into the hold: the window's own, or one naming the window."""
        return self.reason or f"maintenance window {self.name}"

    def reason_for(self, own: str | None, *, draining: bool = False) -> str:
        """The reason of one occurrence's hold: `own` (a calendar event's SUMMARY) or the
        window's; during the drain lead "draining for <window>[: <reason>]", cut to `MAX_REASON`."""
        reason = own or self.reason
        if not draining:
            return reason or self.hold_reason
        text = f"draining for {self.name}" + (f": {reason}" if reason else "")
        return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3].rstrip() + "..."

    @property
    def feed(self) -> Feed | None:
        """The calendar whose events are this window's occurrences (`calendars.CalendarWindow`)."""
        return None

    def excludes(self, start: datetime) -> bool:
        """Whether the occurrence starting at `start` is excluded (`exclude` names its local
        date, an event of `exclude_calendar` covers it, or `exclude_cron` matches its local
        start, minute and all)."""
        # `_holidays` is bound only to a window with `exclude_calendar` (`calendars.bind`), and
        # reading a private attribute costs a pydantic `__getattr__`: asked per start, per window
        if not self.exclude and self.exclude_cron is None and (self.exclude_calendar is None or self._holidays is None):
            return False
        local = start.astimezone(self.tz)
        if local.date() in self.exclude:
            return True
        if self._holidays is not None and self._holidays.covers_day(local.date(), self.tz):
            return True
        return self.exclude_cron is not None and cron_matches(self.exclude_cron, local.replace(tzinfo=None))

    def zone_of(self, occurrence: Any) -> tzinfo:
        """The zone an occurrence is shown in: the window's (a calendar's: its event's own)."""
        return self.tz

    def describe_duration(self) -> str:
        """How long each occurrence lasts, as `windows list` says it."""
        return format_duration(self.duration)

    def describe_schedule(self, *, for_json: bool = False) -> str:
        """The schedule in words: a one-shot's instant as a person reads it (local, to the
        second), or exact UTC for `--json`."""
        if self.cron is not None:
            return f"cron '{self.cron}' {self.timezone}"
        return f"at {format_instant(self.at) if for_json else display_instant(self.at)}"

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        if self.cron is None:
            data.pop("timezone", None)
        for key in ("exclude", "exclude_cron", "exclude_calendar", "drain", "run", "on_failure_ttl", "only", "jobs"):
            if not data.get(key):
                data.pop(key, None)
        return data

    def to_toml(self) -> dict[str, Any]:
        """The table written to `windows.toml`: defaults left out, instants as TOML datetimes."""
        out: dict[str, Any] = {"name": self.name}
        out.update({"cron": self.cron, "timezone": self.timezone} if self.cron is not None else {"at": self.at})
        return out | written(self, ("duration", "drain", "reason", "allow", "scope", "only", "jobs", "enabled",
                                    "not_before", "not_after", "exclude", "exclude_cron", "run", "on_failure_ttl",
                                    "exclude_calendar"))

    @classmethod
    def parse(cls, data: Any, *, path: Path | None = None, index: int | None = None) -> Window:
        """A window from a mapping (a `windows.toml` table, CLI input); `InvalidWindow` naming
        the file, the window (its name, else its position) and the first bad field."""
        window: Window = validate_table(cls, data, path=path, index=index)
        return window


class WindowsDocument(BaseModel):
    """The shape of `windows.toml` (what `hermes windows schema` prints)."""

    model_config = ConfigDict(extra="forbid", title="hermes-estop windows.toml")

    windows: list[Window] = Field(default_factory=list)


def check_unique(windows: Iterable[Window], path: Path | None = None) -> None:
    seen: set[str] = set()
    for window in windows:
        if window.name in seen:
            raise InvalidWindow("duplicate name", path=path, window=repr(window.name), field="name")
        seen.add(window.name)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of `windows.toml`."""
    return WindowsDocument.model_json_schema()
