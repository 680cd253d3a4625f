"""The value types of a window's fields and how each is read: durations (`duration`, `drain`),
instants, exclusion dates, the allowlist (`WindowAllow`). Pure parsing, shared by the model
(`model.py`), which only says which field is which.

Each parser raises `ValueError` (or an `EstopError` that is one) naming the bad value; the
model's validators let pydantic carry it, and `invalid.as_invalid` names the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import date, datetime, timedelta
from functools import partial
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from hermes_estop.model.cronspec import validate_cron, validate_timezone
from hermes_estop.model.durations import format_duration, parse_with_unit
from hermes_estop.model.errors import EstopError
from hermes_estop.model.hold import Allow
from hermes_estop.model.homes import FLEET, validate_profile_name
from hermes_estop.model.selector import Selector
from hermes_estop.model.timeutil import parse_instant, schedulable

__all__ = ["MAX_DRAIN", "NAME_RE", "Cron", "Drain", "Duration", "Enabled", "Instant", "Jobs", "Only", "Scope",
           "WindowAllow", "Zone", "optional", "parse_drain", "parse_exclude", "parse_name", "parse_optional_instant",
           "parse_selector_part", "validate_scope", "written"]

#: the longest drain lead: draining the fleet more than a day before a window is a typo, not a plan
MAX_DRAIN = timedelta(hours=24)
#: a window's or a calendar's name (they share names)
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def optional(parse: Callable[[Any], Any]) -> BeforeValidator:
    """The field validator running `parse` on a value that is not None."""
    return BeforeValidator(lambda value: None if value is None else parse(value))


def parse_name(value: object, what: str) -> str:
    """A window's or calendar's (`what`) name: a slug of at most 64."""
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise ValueError(f"invalid {what} name {value!r}: use lowercase letters, digits, '-' and '_' "
                         "(starting with a letter or digit, at most 64)")
    return value


def validate_scope(value: object) -> str:
    """'fleet' or a profile name; `ValueError` naming the value."""
    if value == FLEET:
        return FLEET
    try:
        return validate_profile_name(value)
    except EstopError as exc:
        raise ValueError(f"invalid scope {value!r}: expected {FLEET!r} or a profile name ({exc})") from None


def _enabled(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"invalid enabled {value!r}: expected true or false")  # noqa: TRY004
    return value

Duration = Annotated[
    timedelta,
    WithJsonSchema({"type": "string", "description": "45m, 1h30m, 90s, 1d or ISO-8601 PT2H; at most 366 days",
                    "examples": ["1h", "90m", "PT2H"]}),
]
Drain = Annotated[
    timedelta | None,
    BeforeValidator(lambda value: parse_drain(value)),
    WithJsonSchema({"type": "string", "description": "arm the hold this long before each start (reason "
                                                     "'draining for <window>'), so the window begins on a "
                                                     "quiet fleet; positive, at most 24h",
                    "examples": ["15m", "1h"]}),
]
Instant = Annotated[
    datetime | None,
    WithJsonSchema({"type": "string", "format": "date-time",
                    "description": "ISO-8601 instant; without an offset it is UTC"}),
]


Cron = Annotated[str | None, optional(validate_cron)]
Zone = Annotated[str, BeforeValidator(lambda value: validate_timezone(value).key)]
Scope = Annotated[str, BeforeValidator(validate_scope)]
Enabled = Annotated[bool, BeforeValidator(_enabled)]


def parse_optional_instant(value: object, what: str, *, bounded: bool = True) -> datetime | None:
    """An instant or None. `bounded`: an instant occurrences are computed from (`at`,
    `not_before`) must lie in `timeutil.COMPUTABLE`: one in the year 9999 would overflow the
    scheduler's arithmetic, so it is refused here, naming the field, not met at run time."""
    if value is None:
        return None
    instant = parse_instant(value, what=what)
    return schedulable(instant, what=what) if bounded else instant


def parse_drain(value: object) -> timedelta | None:
    """A drain lead: None (no lead), or a positive duration of at most `MAX_DRAIN`."""
    if value is None:
        return None
    lead = parse_with_unit(value)
    if lead > MAX_DRAIN:
        raise ValueError(f"invalid drain {value!r}: longer than the {MAX_DRAIN // timedelta(hours=1)}h bound "
                         "(a drain lead is at most a day)")
    return lead


def parse_selector_part(value: object, field: str) -> list[str]:
    """`only` (components) or `jobs` (job globs) of a window or a calendar: a list of names,
    each checked as `Selector.of` checks operator input."""
    if isinstance(value, str) or not isinstance(value, list):
        raise ValueError(f"invalid {field} {value!r}: expected a list of names")  # noqa: TRY004
    try:
        Selector.of(value if field == "only" else (), value if field == "jobs" else ())
    except EstopError as exc:
        raise ValueError(str(exc)) from None
    return list(value)


Only = Annotated[list[str], BeforeValidator(partial(parse_selector_part, field="only"))]
Jobs = Annotated[list[str], BeforeValidator(partial(parse_selector_part, field="jobs"))]


def parse_exclude(value: object) -> list[date]:
    """Exclusion dates: a list of `date`s or `YYYY-MM-DD` strings, deduplicated and sorted."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"invalid exclude {value!r}: expected a list of dates (YYYY-MM-DD)")  # noqa: TRY004
    out: set[date] = set()
    for item in value:
        if isinstance(item, datetime) or not isinstance(item, (date, str)):
            raise ValueError(f"invalid exclude date {item!r}: expected YYYY-MM-DD")  # noqa: TRY004
        if isinstance(item, str):
            try:
                item = date.fromisoformat(item)
            except ValueError:
                raise ValueError(f"invalid exclude date {item!r}: not a calendar date (YYYY-MM-DD)") from None
        out.add(item)
    return sorted(out)


class WindowAllow(BaseModel):
    """Who keeps working through the window's hold: `user_ids` grant, `profiles` narrow."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_ids: list[str] = Field(default_factory=list)
    profiles: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        unknown = set(data) - {"user_ids", "profiles"}
        if unknown:
            return data  # extra="forbid" names the key
        users, profiles = data.get("user_ids") or [], data.get("profiles") or []
        for key, items in (("user_ids", users), ("profiles", profiles)):
            if not isinstance(items, list):
                raise ValueError(f"invalid allow.{key} {items!r}: expected a list")  # noqa: TRY004
        allow = Allow.of(users, profiles)
        return {"user_ids": sorted(allow.user_ids), "profiles": sorted(allow.profiles)}

    def to_allow(self) -> Allow:
        return Allow.of(self.user_ids, self.profiles)


def written(model: BaseModel, keys: Iterable[str]) -> dict[str, Any]:
    """The fields `keys` of `model` (a window, a calendar) that `windows.toml` writes, in that
    order: those not at their default (None, empty, `enabled`), durations as text, the
    allowlist only with users."""
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
