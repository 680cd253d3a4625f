"""Calendar sources of `windows.toml` (issue 27): `[[calendars]]` tables and windows'
`exclude_calendar`, bound to the feeds they name (a local `ics` file, or the copy of a `url` that
`hermes serve` fetched: `fetch.py`). A calendar is a `CalendarWindow` whose occurrences are its
feed's events, so everything treats it like any window. A feed that cannot be used falls back to
its last good copy, loudly (`Parsed.stale`); without one its table fails, held as it was.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta, tzinfo
from functools import partial
from pathlib import Path
from typing import Annotated, Any, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from hermes_estop.model.cronspec import validate_timezone
from hermes_estop.model.durations import format_duration, parse_with_unit
from hermes_estop.model.errors import EstopError
from hermes_estop.model.homes import FLEET
from hermes_estop.system.fsread import read_regular
from hermes_estop.windows.ical import CHUNK, MAX_CALENDAR_BYTES, CalendarError, Feed, feed_digest, parse_feed
from hermes_estop.windows.model import (
    Drain,
    Duration,
    Enabled,
    InvalidWindow,
    Jobs,
    Only,
    Parsed,
    Scope,
    ShapeError,
    Window,
    WindowAllow,
    optional,
    parse_name,
    validate_table,
    written,
)

__all__ = ["CALENDAR_DIR", "CalendarSource", "CalendarWindow", "bind", "cache_paths", "calendar_window", "feed_of",
           "is_url"]

CALENDAR_DIR = "calendars"
DEFAULT_REFRESH = timedelta(minutes=5)
_MAX_PATTERN = 200


def is_url(location: str) -> bool:
    return location.startswith(("https://", "http://"))


def _url(value: object) -> str:
    if not isinstance(value, str) or not is_url(value) or any(c.isspace() for c in value) or len(value) > 2000:
        raise ValueError(f"invalid url {value!r}: expected https://...")
    return value


def _pattern(value: object) -> str:
    if not isinstance(value, str) or len(value) > _MAX_PATTERN:
        raise ValueError(f"expected a regular expression of at most {_MAX_PATTERN} characters")
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {value!r}: {exc}") from None
    return value


def _refresh(value: object) -> timedelta:
    refresh = parse_with_unit(value)
    if refresh < timedelta(seconds=10):
        raise ValueError("refresh: at least 10s")
    return refresh


class CalendarSource(BaseModel):
    """One `[[calendars]]` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, BeforeValidator(partial(parse_name, what="calendar"))] = Field(
        description="a slug, like a window's name (windows and calendars share names)")
    ics: str | None = Field(None, description="path of an .ics file (relative: from the fleet root)")
    url: Annotated[str | None, optional(_url)] = Field(
        None, description="https:// (or http://) feed, fetched by `hermes serve`")
    scope: Scope = Field(FLEET, description="'fleet' or a profile name")
    timezone: Annotated[str | None, optional(lambda value: validate_timezone(value).key)] = Field(
        None, description="zone of all-day and floating events (default: the feed's X-WR-TIMEZONE, else UTC)")
    categories: list[str] = Field(default_factory=list, description="only events with one of these CATEGORIES")
    summary: Annotated[str | None, optional(_pattern)] = Field(
        None, description="only events whose SUMMARY matches this regular expression")
    drain: Drain = Field(None)
    allow: WindowAllow = Field(default_factory=WindowAllow)
    only: Only = Field(default_factory=list)
    jobs: Jobs = Field(default_factory=list)
    enabled: Enabled = True
    refresh: Annotated[Duration, BeforeValidator(_refresh)] = Field(
        DEFAULT_REFRESH, description="how often `hermes serve` fetches a url (default 5m)")

    @model_validator(mode="after")
    def _shape(self) -> CalendarSource:
        if (self.ics is None) == (self.url is None):
            raise ShapeError("ics/url", "give exactly one of ics (a file) or url (a feed)")
        return self

    @property
    def location(self) -> str:
        return self.url or self.ics or ""

    def keep(self, component: Any) -> bool:
        found = {str(category).casefold() for category in component.categories}
        if self.categories and not found & {c.casefold() for c in self.categories}:
            return False
        return self.summary is None or re.search(self.summary, str(component.get("SUMMARY") or "")) is not None

    def to_toml(self) -> dict[str, Any]:
        out = written(self, ("name", "ics", "url", "scope", "timezone", "summary", "categories", "drain", "allow",
                             "only", "jobs", "enabled"))
        if self.refresh != DEFAULT_REFRESH:
            out["refresh"] = format_duration(self.refresh)
        return out

    @classmethod
    def parse(cls, data: Any, *, path: Path | None = None, index: int | None = None) -> CalendarSource:
        return validate_table(cls, data, path=path, index=index, kind="calendar ")


class CalendarWindow(Window):
    source: Any = Field(None, exclude=True)
    calendar_feed: Any = Field(None, exclude=True)

    @property
    def feed(self) -> Feed:
        return cast(Feed, self.calendar_feed)

    def describe_schedule(self, *, for_json: bool = False) -> str:
        return f"calendar {self.source.location}"

    def zone_of(self, occurrence: Any) -> tzinfo:
        return self.feed.zone_of(getattr(occurrence, "uid", None))

    def describe_duration(self) -> str:
        """The lengths of its events (`duration` is how far back an event covering an instant
        may start: never shown, issue 38 item 6)."""
        spans = self.feed.spans
        if len(spans) < 2:
            return format_duration(spans[0]) if spans else "no events"
        return f"{format_duration(spans[0])} to {format_duration(spans[-1])}"

    def to_json(self) -> dict[str, Any]:
        spans = self.feed.spans
        data = {"name": self.name, "calendar": self.source.location, "scope": self.scope, "enabled": self.enabled,
                "duration": format_duration(spans[-1]) if spans else None,
                "durations": [format_duration(span) for span in spans], "allow": self.allow.model_dump(mode="json")}
        return data | self.model_dump(mode="json", include={key for key in ("drain", "only", "jobs") if getattr(self, key)})

    def to_toml(self) -> dict[str, Any]:
        return cast(CalendarSource, self.source).to_toml()


def cache_paths(root: Path, location: str) -> tuple[Path, Path]:
    """The last good copy of a feed in the fleet root, and its metadata (ETag, Last-Modified,
    the last fetch error)."""
    key = hashlib.sha256(location.encode("utf-8")).hexdigest()[:24]
    base = Path(root) / CALENDAR_DIR
    return base / f"{key}.ics", base / f"{key}.json"


def local_path(root: Path, location: str) -> Path:
    return Path(root) / Path(location).expanduser()  # an absolute path stays itself


def fingerprint(root: Path, location: str) -> str:
    """What reading the feed at `location` depends on besides the windows file: the bytes of the
    local file and of the last good copy, and the last fetch's error (a compiled schedule is of
    these: `schedule.Schedule.feeds`)."""
    *feeds, meta = _watched(root, location)
    found = hashlib.sha256(repr(read_meta(meta).get("error")).encode("utf-8", "surrogateescape"))
    for path in feeds:
        try:
            found.update(hashlib.sha256(read_regular(path, MAX_CALENDAR_BYTES)).digest())
        except (OSError, EstopError):
            found.update(b"-")
    return found.hexdigest()


def read_meta(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_regular(path, 64 * 1024))
    except (OSError, ValueError, EstopError):
        return {}
    return data if isinstance(data, dict) else {}


#: the feeds read in this process, by `Feed.digest` (the last 64); one refused by its expansion
#: budget stays refused until its `retry_at`, so a hostile feed costs its budget once
_FEEDS: OrderedDict[str, Feed] = OrderedDict()
_MAX_CACHED = 64


def feed_of(raw: bytes, label: str, tz: str | None = None, keep: Callable[[Any], bool] | None = None,
            salt: str = "") -> Feed:
    """The feed of `raw`, or `CalendarError` when it does not parse or is refused."""
    digest = feed_digest(raw, label, tz, salt)
    found = _FEEDS.pop(digest, None)
    fresh = found is None or time.monotonic() >= found.retry_at
    if found is None or fresh:
        found = parse_feed(raw, label, timezone_name=tz, keep=keep, salt=salt)
    _FEEDS[digest] = found
    if len(_FEEDS) > _MAX_CACHED:
        _FEEDS.popitem(last=False)
    if found.refused is not None:
        raise CalendarError(found.refused)
    if fresh:  # the weeks around now, what the scheduler asks first: a feed over its budget is refused when read
        next(found.events(datetime.now(UTC) - found.longest, CHUNK), None)
    return found


def calendar_window(source: CalendarSource, feed: Feed) -> Window:
    return CalendarWindow.model_construct(
        name=source.name, timezone=feed.tz.key, duration=feed.longest, drain=source.drain,
        allow=source.allow, scope=source.scope, only=list(source.only), jobs=list(source.jobs),
        enabled=source.enabled,
        source=source, calendar_feed=feed)


def _watched(root: Path, location: str) -> list[Path]:
    return [*(() if is_url(location) else (local_path(root, location),)), *cache_paths(root, location)]


def bind(root: Path, path: Path, windows: Iterable[Window], sources: Iterable[CalendarSource]) -> Parsed:
    """`windows` with their `exclude_calendar` bound, and one `CalendarWindow` per source; a
    feed without a usable copy is a failure."""
    found = Parsed([], [])
    for window in windows:
        if window.exclude_calendar is not None:
            feed = _read(found, root, path, window.name, window.exclude_calendar, "exclude_calendar",
                         f"{window.exclude_calendar} (exclude_calendar of window {window.name})")
            if feed is None:
                continue
            window = window.model_copy()
            window._holidays = feed  # noqa: SLF001 - the calendar module fills the window it built
        found.windows.append(window)
    names = {w.name for w in found.windows} | found.failing_names()
    for source in sources:
        if source.name in names:
            found.failures.append(InvalidWindow("duplicate name (a window or calendar has it)", path=path,
                                                window=repr(source.name), field="name"))
            continue
        names.add(source.name)
        feed = _read(found, root, path, source.name, source.location, None, repr(source.name), tz=source.timezone,
                     keep=source.keep, salt=json.dumps([source.categories, source.summary, source.timezone]))
        if feed is not None:
            found.windows.append(calendar_window(source, feed))
    return found


def _read(found: Parsed, root: Path, path: Path, name: str, location: str, field: str | None, label: str,
          **settings: Any) -> Feed | None:
    """The feed at `location` for the table `name`, noted in `found`: a failure when there is no
    usable copy at all, or why it runs on its last good copy (`stale`)."""
    found.files += tuple(_watched(root, location))
    copy, meta_path = cache_paths(root, location)
    meta = read_meta(meta_path)
    problem: str | None = None
    try:
        if not is_url(location):
            local = local_path(root, location)
            try:
                feed = feed_of(read_regular(local, MAX_CALENDAR_BYTES), label, **settings)
                found.digests += (feed.digest,)
                return feed
            except CalendarError as exc:
                problem = str(exc)
            except (OSError, EstopError) as exc:
                problem = f"calendar {label}: cannot read {local}: {getattr(exc, 'strerror', None) or exc}"
        elif meta.get("error"):
            problem = f"calendar {label}: cannot fetch {location}: {meta['error']}"
        try:
            raw = read_regular(copy, MAX_CALENDAR_BYTES)
        except (OSError, EstopError):
            raise CalendarError(f"{problem} (and no last good copy)" if problem is not None else
                                f"calendar {label}: {location} not fetched yet (`hermes serve` fetches it)") from None
        feed = feed_of(raw, label, **settings)
    except CalendarError as exc:
        found.failures.append(InvalidWindow(exc.args[0], path=path, window=repr(name), field=field))
        return None
    if problem is not None:
        fetched = meta.get("fetched_at")
        found.stale[name] = problem + f" (using the last good copy{f' of {fetched}' if fetched else ''})"
    found.digests += (feed.digest,)
    return feed
