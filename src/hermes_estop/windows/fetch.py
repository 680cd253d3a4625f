"""Fetching calendar feeds into the fleet root (issue 27): the only place a `url` of
`windows.toml` is requested, a service of `hermes serve` beside the window scheduler.

Each feed (a `[[calendars]]` url, a window's `exclude_calendar` url) is requested every `refresh`
with `If-None-Match` / `If-Modified-Since`, a timeout and a size cap. A body is written as the
last good copy (`calendars.cache_paths`) only once it parses (`ical.parse_feed`); a failure
(network, HTTP status, garbage) keeps the copy and is written into the copy's metadata, which
every reader of `windows.toml` reports (`Parsed.stale`: the log, the page's banner, a metric).
Local `ics` files get a last good copy too, so a file broken by an edit keeps holding as it was.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..errors import EstopError
from ..fsread import read_regular
from ..fsutil import atomic_write
from ..text import one_line
from ..timeutil import format_instant
from .calendars import DEFAULT_REFRESH, cache_paths, is_url, local_path, read_meta
from .ical import MAX_CALENDAR_BYTES, CalendarError, parse_feed
from .windows_file import WindowsFile

__all__ = ["FETCH_TIMEOUT", "CalendarFetcher", "fetch_once"]

logger = logging.getLogger("hermes_estop.windows")

FETCH_TIMEOUT = 10.0
_TICK = 1.0
_USER_AGENT = "hermes-estop calendar fetch"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _write_meta(path: Path, meta: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(meta, sort_keys=True).encode("utf-8"))


def _get(url: str, meta: dict[str, Any], timeout: float) -> tuple[int, bytes, dict[str, str]]:
    """(status, body, headers); a body over the cap is refused, the whole exchange bounded."""
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    if meta.get("etag"):
        request.add_header("If-None-Match", str(meta["etag"]))
    if meta.get("last_modified"):
        request.add_header("If-Modified-Since", str(meta["last_modified"]))
    deadline = time.monotonic() + 3 * timeout
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (http(s) only: validated)
            chunks: list[bytes] = []
            size = 0
            while True:
                chunk = response.read(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_CALENDAR_BYTES:
                    raise CalendarError(f"larger than {MAX_CALENDAR_BYTES // (1024 * 1024)} MiB")
                if time.monotonic() > deadline:
                    raise CalendarError(f"took more than {3 * timeout:g}s")
                chunks.append(chunk)
            return response.status, b"".join(chunks), {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as exc:
        if exc.code == 304:
            return 304, b"", {}
        raise CalendarError(f"HTTP {exc.code}") from None


def fetch_once(root: Path, url: str, label: str, *, timeout: float = FETCH_TIMEOUT,
               now: Callable[[], datetime] = _now) -> str | None:
    """Fetch `url` into its last good copy; the problem (one line) or None."""
    copy, meta_path = cache_paths(root, url)
    meta = read_meta(meta_path)
    if not copy.exists():
        meta.pop("etag", None)
        meta.pop("last_modified", None)
    stamp = format_instant(now())
    try:
        status, body, headers = _get(url, meta, timeout)
        if status != 304:
            if status != 200:
                raise CalendarError(f"HTTP {status}")
            parse_feed(body, label)
            copy.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(copy, body)
            meta.update(etag=headers.get("etag"), last_modified=headers.get("last-modified"), fetched_at=stamp)
        problem = None
    except CalendarError as exc:
        problem = str(exc).removeprefix(f"calendar {label}: ")
    except (OSError, ValueError, EstopError) as exc:
        problem = one_line(getattr(exc, "reason", None) or exc)
    meta.update(source=url, checked_at=stamp, error=problem)
    if problem is None:
        meta.pop("error_since", None)
    else:
        meta.setdefault("error_since", stamp)
    _write_meta(meta_path, meta)
    return problem


def keep_local(root: Path, location: str, label: str) -> str | None:
    """Keep the last good copy of a local .ics file; the problem, or None."""
    copy, _ = cache_paths(root, location)
    try:
        raw = read_regular(local_path(root, location), MAX_CALENDAR_BYTES)
        parse_feed(raw, label)
    except (OSError, EstopError) as exc:
        return one_line(exc)
    try:
        if copy.exists() and read_regular(copy, MAX_CALENDAR_BYTES) == raw:
            return None
    except (OSError, EstopError):
        pass
    copy.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(copy, raw)
    return None


class CalendarFetcher:
    """The service: every feed `windows.toml` names, refreshed on its own period."""

    name = "calendars"

    def __init__(self, root: Path, *, timeout: float = FETCH_TIMEOUT, tick: float = _TICK,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.root = Path(root)
        self.windows_file = WindowsFile(self.root)
        self.timeout = timeout
        self.tick = tick
        self.monotonic = monotonic
        self._due: dict[str, float] = {}
        self._failing: dict[str, str] = {}

    def feeds(self) -> dict[str, tuple[str, timedelta]]:
        """location -> (label, refresh) for every feed the file names (none when it does not read)."""
        try:
            parsed = self.windows_file.parse_each(self.windows_file.snapshot().raw)
        except (EstopError, OSError):
            return {}
        out: dict[str, tuple[str, timedelta]] = {}
        for source in parsed.sources:
            out.setdefault(source.location, (repr(source.name), source.refresh))
        for window in parsed.windows:
            if window.exclude_calendar is not None:
                out.setdefault(window.exclude_calendar, (f"{window.exclude_calendar} (exclude_calendar)", DEFAULT_REFRESH))
        return out

    def pass_once(self) -> None:
        """Fetch (or keep) every feed that is due."""
        now = self.monotonic()
        feeds = self.feeds()
        for location, (label, refresh) in feeds.items():
            if self._due.get(location, 0.0) > now:
                continue
            remote = is_url(location)
            problem = fetch_once(self.root, location, label, timeout=self.timeout) if remote else \
                keep_local(self.root, location, label)
            self._due[location] = now + (refresh.total_seconds() if remote else self.tick * 5)
            self._report(location, problem, remote)
        for gone in set(self._due) - set(feeds):
            self._due.pop(gone, None)
            self._failing.pop(gone, None)

    def _report(self, location: str, problem: str | None, remote: bool) -> None:
        """One log line when a feed starts failing, one when it is good again."""
        if problem is None:
            if self._failing.pop(location, None) is not None:
                logger.info("calendars: %s reads again", location)
            return
        if location not in self._failing:
            what = "cannot fetch" if remote else "cannot use"
            logger.error("calendars: %s %s: %s (its last good copy holds)", what, location, problem)
        self._failing[location] = problem

    def run(self, stop: threading.Event) -> None:
        logger.info("calendars: keeping the feeds of %s", self.windows_file.path)
        while not stop.is_set():
            try:
                self.pass_once()
            except Exception:  # a feed must never take serve down
                logger.exception("calendars: fetch pass failed")
            stop.wait(self.tick)
