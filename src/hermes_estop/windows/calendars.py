"""Calendar sources of `windows.toml` (issue 27): `[[calendars]]` tables, and windows'
`exclude_calendar`, bound to the feeds they name.

A calendar becomes one `CalendarWindow`: a `Window` whose occurrences are the feed's events
(`ical.Feed`), so the scheduler, the forecast, the ledger, skips, the page and the metrics treat
it like any window. A feed is a local file (`ics`, relative paths from the fleet root) or the
copy of a `url` that `hermes serve` fetched (`fetch.py`) into `calendars/` in the fleet root.

A feed that cannot be read or parsed falls back to its last good copy in `calendars/` (serve
keeps one for local files too), with a note (`Bound.stale`) that makes it loud; without a good
copy the calendar is a failing table (`InvalidWindow` naming it), which the scheduler's guard
holds as it was, like any window that stops validating. Everything here only reads.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from functools import partial
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from hermes_estop.model.cronspec import validate_timezone
from hermes_estop.model.durations import format_duration, parse_with_unit
from hermes_estop.model.errors import EstopError
from hermes_estop.model.homes import FLEET
from hermes_estop.system.fsread import read_regular
from hermes_estop.windows import kept_files
from hermes_estop.windows.feed_schedule import compile_feed, compiled_feed, feed_key
from hermes_estop.windows.ical import MAX_CALENDAR_BYTES, CalendarError, Feed, parse_feed
from hermes_estop.windows.model import (
    Drain,
    Duration,
    Enabled,
    InvalidWindow,
    Jobs,
    Only,
    Scope,
    ShapeError,
    Window,
    WindowAllow,
    optional,
    parse_name,
    validate_table,
    written,
)

__all__ = ["CALENDAR_DIR", "Bound", "CalendarSource", "CalendarWindow", "bind", "cache_paths", "compiled_path", "is_url"]

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
    only: Only = Field(default_factory=list, description="a scoped hold, as a window's: only these consumer "
                                                         "components")
    jobs: Jobs = Field(default_factory=list, description="a scoped hold, as a window's: only the units of work "
                                                         "whose name matches one of these globs")
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
        """Whether an event passes the filters (CATEGORIES, SUMMARY)."""
        if self.categories:
            wanted = {c.casefold() for c in self.categories}
            found: set[str] = set()
            props = component.get("CATEGORIES")
            for prop in props if isinstance(props, list) else [props] if props is not None else []:
                found.update(str(c).casefold() for c in getattr(prop, "cats", []))
            if not wanted & found:
                return False
        return self.summary is None or re.search(self.summary, str(component.get("SUMMARY") or "")) is not None

    def salt(self) -> str:
        return json.dumps([self.categories, self.summary, self.timezone])

    def to_toml(self) -> dict[str, Any]:
        out = written(self, ("name", "ics", "url", "scope", "timezone", "summary", "categories", "drain", "allow",
                             "only", "jobs", "enabled"))
        if self.refresh != DEFAULT_REFRESH:
            out["refresh"] = format_duration(self.refresh)
        return out

    @classmethod
    def parse(cls, data: Any, *, path: Path | None = None, index: int | None = None) -> CalendarSource:
        source: CalendarSource = validate_table(cls, data, path=path, index=index, kind="calendar ")
        return source


class CalendarWindow(Window):
    """A calendar as a window: its occurrences are the feed's events (`occurrences.occurrences`
    asks `feed`). Built by `bind`, never validated from a table."""

    source: Any = Field(None, exclude=True)
    calendar_feed: Any = Field(None, exclude=True)

    @property
    def feed(self) -> Feed | None:
        feed: Feed | None = self.calendar_feed
        return feed

    def describe_schedule(self, *, for_json: bool = False) -> str:
        src: CalendarSource = self.source
        return f"calendar {src.location}"

    def zone_of(self, occurrence: Any) -> tzinfo:
        feed = self.feed
        return feed.zone_of(getattr(occurrence, "uid", None)) if feed is not None else self.tz

    def describe_duration(self) -> str:
        """The lengths of the feed's events (`duration` is only how far back an event covering
        an instant may start: never shown, issue 38 item 6)."""
        spans = self.feed.spans if self.feed is not None else ()
        if not spans:
            return "no events"
        if len(spans) == 1:
            return format_duration(spans[0])
        return f"{format_duration(spans[0])} to {format_duration(spans[-1])}"

    def to_json(self) -> dict[str, Any]:
        src: CalendarSource = self.source
        spans = self.feed.spans if self.feed is not None else ()
        data = {"name": self.name, "calendar": src.location, "scope": self.scope, "enabled": self.enabled,
                "duration": format_duration(spans[-1]) if spans else None,
                "durations": [format_duration(span) for span in spans], "allow": self.allow.model_dump(mode="json")}
        if self.drain is not None:
            data["drain"] = format_duration(self.drain)
        for key in ("only", "jobs"):
            if getattr(self, key):
                data[key] = list(getattr(self, key))
        return data

    def to_toml(self) -> dict[str, Any]:
        src: CalendarSource = self.source
        return src.to_toml()


def cache_paths(root: Path, location: str) -> tuple[Path, Path]:
    """Where the last good copy of a feed lives in the fleet root, and its metadata (ETag,
    Last-Modified, the last fetch error)."""
    key = hashlib.sha256(location.encode("utf-8")).hexdigest()[:24]
    base = Path(root) / CALENDAR_DIR
    return base / f"{key}.ics", base / f"{key}.json"


def compiled_path(root: Path, location: str, settings: str) -> tuple[Path, bool] | None:
    """Where the compiled schedule of the feed at `location`, read with `settings`, is kept
    (`kept_files.kept_path`: in `calendars/`, or this user's cache when others could write there),
    and whether that is the cache (`kept_files.in_cache`: a directory made private)."""
    key = hashlib.sha256(f"{location}\0{settings}".encode("utf-8", "surrogateescape")).hexdigest()[:24]
    beside = Path(root) / CALENDAR_DIR / key
    path = kept_files.kept_path(beside, ".schedule")
    return None if path is None else (path, kept_files.in_cache(path, beside))


def local_path(root: Path, location: str) -> Path:
    path = Path(location).expanduser()
    return path if path.is_absolute() else Path(root) / path


def read_meta(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_regular(path, 64 * 1024))
    except (OSError, ValueError, EstopError):
        return {}
    return data if isinstance(data, dict) else {}


@dataclass
class Bound:
    """Windows with their calendars bound: `windows` to act on, `failures` (tables that failed),
    `stale` (calendar name -> why it runs on its last good copy), `digests` (what the feeds
    were: part of a read's identity), `files` (what to watch for changes)."""

    windows: list[Window]
    failures: list[InvalidWindow]
    stale: dict[str, str] = field(default_factory=dict)
    digests: tuple[str, ...] = ()
    files: tuple[Path, ...] = ()


#: the feeds read in this process, by content and settings (the last 64)
_FEEDS: OrderedDict[tuple[str, str], Feed] = OrderedDict()
_MAX_CACHED = 64


def _settings(label: str, salt: str, tz: str | None) -> str:
    """What a feed's bytes are read with besides themselves: the label its events are named by,
    the source's filters (`salt`) and its zone."""
    return f"{label}\0{salt}\0{tz}"


def _feed(raw: bytes, label: str, tz: str | None, keep: Callable[[Any], bool] | None, salt: str,
          compiled_at: tuple[Path, bool] | None = None) -> Feed:
    """The feed of `raw`, parsed once per content and settings (and, with `compiled_at`, once
    per content and settings for every process: `feed_schedule`); one that an expansion has since
    refused for its steps or occurrences fails from the next read on, alone, like a feed that
    does not parse (one refused for time alone is read afresh: a machine that was slow)."""
    key = (hashlib.sha256(raw).hexdigest(), _settings(label, salt, tz))
    found = _FEEDS.get(key)
    if found is not None and found.refused is not None:
        if not found.refused_for_time:
            raise CalendarError(f"calendar {label}: {found.refused}")
        found = None
    if found is None:
        now = datetime.now(UTC)

        def parse() -> Feed:
            return parse_feed(raw, label, timezone_name=tz, keep=keep, salt=salt, now=now)

        found = compiled_feed(compiled_at[0], feed_key(*key), label, now, parse) if compiled_at else None
        if found is None:
            found = parse()
            if compiled_at is not None:
                compile_feed(compiled_at[0], feed_key(*key), found, now, private=compiled_at[1])
        _FEEDS.pop(key, None)
        _FEEDS[key] = found
        if len(_FEEDS) > _MAX_CACHED:
            _FEEDS.popitem(last=False)
    return found


def load_feed(root: Path, location: str, label: str, *, tz: str | None = None,
              keep: Callable[[Any], bool] | None = None, salt: str = "") -> tuple[Feed, str | None]:
    """The feed at `location` (a url's fetched copy, or a local file) and, when it runs on its
    last good copy, why. `CalendarError` when there is no usable copy at all."""
    copy, meta_path = cache_paths(root, location)
    compiled_at = compiled_path(root, location, _settings(label, salt, tz))
    meta = read_meta(meta_path)
    problem: str | None = None
    if not is_url(location):
        path = local_path(root, location)
        try:
            return _feed(read_regular(path, MAX_CALENDAR_BYTES), label, tz, keep, salt, compiled_at), None
        except CalendarError as exc:
            problem = str(exc)
        except (OSError, EstopError) as exc:
            problem = f"calendar {label}: cannot read {path}: {getattr(exc, 'strerror', None) or exc}"
    elif meta.get("error"):
        problem = f"calendar {label}: cannot fetch {location}: {meta['error']}"
    try:
        raw = read_regular(copy, MAX_CALENDAR_BYTES)
    except (OSError, EstopError):
        if problem is not None:
            raise CalendarError(f"{problem} (and no last good copy)") from None
        raise CalendarError(f"calendar {label}: {location} not fetched yet (`hermes serve` fetches it)") from None
    feed = _feed(raw, label, tz, keep, salt, compiled_at)
    if problem is not None:
        fetched = meta.get("fetched_at")
        problem += f" (using the last good copy{f' of {fetched}' if fetched else ''})"
    return feed, problem


def _calendar_window(source: CalendarSource, feed: Feed) -> Window:
    return CalendarWindow.model_construct(
        name=source.name, cron=None, timezone=feed.tz.key, at=None, duration=feed.longest, drain=source.drain,
        reason=None, allow=source.allow, scope=source.scope, only=list(source.only), jobs=list(source.jobs),
        enabled=source.enabled, not_before=None,
        not_after=None, exclude=[], exclude_cron=None, exclude_calendar=None, source=source, calendar_feed=feed)


def _excluding(window: Window, feed: Feed) -> Window:
    found = window.model_copy()
    found._holidays = feed  # noqa: SLF001 - the calendar module fills the window it built
    return found


def _watched(root: Path, location: str) -> list[Path]:
    files = list(cache_paths(root, location))
    if not is_url(location):
        files.insert(0, local_path(root, location))
    return files


def bind(root: Path, path: Path, windows: Iterable[Window], sources: Iterable[CalendarSource]) -> Bound:
    """`windows` with their `exclude_calendar` bound, and one `CalendarWindow` per source, each
    from the current feed or its last good copy; a source with neither is a failure."""
    out: list[Window] = []
    failures: list[InvalidWindow] = []
    stale: dict[str, str] = {}
    digests: list[str] = []
    files: list[Path] = []
    for window in windows:
        if window.exclude_calendar is None:
            out.append(window)
            continue
        files.extend(_watched(root, window.exclude_calendar))
        try:
            feed, problem = load_feed(root, window.exclude_calendar, f"{window.exclude_calendar} (exclude_calendar of "
                                      f"window {window.name})")
        except CalendarError as exc:
            failures.append(InvalidWindow(exc.args[0], path=path, window=repr(window.name), field="exclude_calendar"))
            continue
        if problem is not None:
            stale[window.name] = problem
        digests.append(feed.digest)
        out.append(_excluding(window, feed))
    names = {w.name for w in out} | {f.window.strip("'") for f in failures if f.window}
    for source in sources:
        if source.name in names:
            failures.append(InvalidWindow("duplicate name (a window or calendar has it)", path=path,
                                          window=repr(source.name), field="name"))
            continue
        names.add(source.name)
        files.extend(_watched(root, source.location))
        try:
            feed, problem = load_feed(root, source.location, repr(source.name), tz=source.timezone, keep=source.keep,
                                      salt=source.salt())
        except CalendarError as exc:
            failures.append(InvalidWindow(exc.args[0], path=path, window=repr(source.name)))
            continue
        if problem is not None:
            stale[source.name] = problem
        digests.append(feed.digest)
        out.append(_calendar_window(source, feed))
    return Bound(out, failures, stale, tuple(digests), tuple(files))
