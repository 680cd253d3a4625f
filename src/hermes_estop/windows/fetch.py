"""Fetching calendar feeds into the fleet root (issue 27), a service of `hermes serve` and the
only place a `url` of `windows.toml` is requested. A feed is untrusted: each fetch has one total
deadline and a size cap and runs in a thread of its own (a slow feed delays nobody); a body becomes
the last good copy (`calendars.cache_paths`) only once it parses, and a failure is kept in the
copy's metadata, which every reader reports. Local `ics` files get a last good copy too, so a file
broken by an edit keeps holding as it was.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from hermes_estop.model.errors import EstopError
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import format_instant, utc_now
from hermes_estop.system.fsread import read_regular
from hermes_estop.system.fsutil import atomic_write
from hermes_estop.windows.calendars import DEFAULT_REFRESH, cache_paths, feed_of, is_url, local_path, read_meta
from hermes_estop.windows.ical import MAX_CALENDAR_BYTES, CalendarError
from hermes_estop.windows.windows_file import WindowsFile

__all__ = ["FETCH_TIMEOUT", "CalendarFetcher", "fetch_once"]

logger = logging.getLogger("hermes_estop.windows")

#: the one deadline of a fetch: connecting, the headers and the whole body (redirects included)
FETCH_TIMEOUT = 30.0
_TICK = 1.0
#: how long stopping waits for the fetches it abandoned (their sockets are shut down at once)
STOP_GRACE = 2.0
_USER_AGENT = "hermes-estop calendar fetch"


class Exchange:
    """One fetch's single deadline (issue 32 item 5) for connecting, the headers and the body.
    Socket timeouts bound each wait, not their sum (a byte every 2 s never times out), so every
    socket the fetch opens is shut down when the deadline passes, or when serve stops (`abort`)."""

    def __init__(self, total: float) -> None:
        self.total = total
        self.deadline = time.monotonic() + total
        self.aborted = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(total, self.abort)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        return max(self.deadline - time.monotonic(), 0.001)

    def adopt(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._sockets.append(sock)
            if self.aborted:
                _shut(sock)
        return sock

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            for sock in self._sockets:
                _shut(sock)

    def close(self) -> None:
        self._timer.cancel()

    def late(self) -> CalendarError:
        return CalendarError("abandoned (serve stopping)" if time.monotonic() < self.deadline else
                             f"no complete answer within {self.total:g}s (connect, headers and body)")


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _opener(exchange: Exchange) -> urllib.request.OpenerDirector:
    """urllib's opener, every socket it opens (the raw one, under any TLS) belonging to `exchange`,
    following redirects to http(s) only: another scheme (ftp) would escape the exchange's deadline."""

    class Handler(urllib.request.HTTPHandler, urllib.request.HTTPSHandler, urllib.request.HTTPRedirectHandler):
        def do_open(self, http_class: Any, req: urllib.request.Request, **kwargs: Any) -> http.client.HTTPResponse:
            class Connection(http_class):  # type: ignore[misc]
                def __init__(self, *args: Any, **kwargs: Any) -> None:
                    super().__init__(*args, **kwargs)
                    self.timeout = exchange.remaining()
                    create: Callable[..., socket.socket] = self._create_connection  # type: ignore[has-type]
                    self._create_connection = lambda *a, **kw: exchange.adopt(create(*a, **kw))

            return super().do_open(Connection, req, **kwargs)

        def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                             newurl: str) -> urllib.request.Request | None:
            if not is_url(newurl):
                raise CalendarError(f"redirected to {newurl[:200]!r}: only http(s) is followed")
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    return urllib.request.build_opener(Handler())


def _get(url: str, meta: dict[str, Any], exchange: Exchange) -> tuple[bytes, Any] | None:
    """The body and headers of `url` (None: not modified since `meta`'s copy)."""
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})  # noqa: S310 - calendar sources admit http(s) URLs only
    for header, key in (("If-None-Match", "etag"), ("If-Modified-Since", "last_modified")):
        if meta.get(key):
            request.add_header(header, str(meta[key]))
    try:
        with _opener(exchange).open(request, timeout=exchange.remaining()) as response:
            body: bytes = response.read(MAX_CALENDAR_BYTES + 1)
            if len(body) > MAX_CALENDAR_BYTES:
                raise CalendarError(f"larger than {MAX_CALENDAR_BYTES // (1024 * 1024)} MiB")
            if exchange.aborted:
                raise exchange.late()
            if response.status != 200:
                raise CalendarError(f"HTTP {response.status}")
            return body, response.headers
    except urllib.error.HTTPError as exc:
        if exc.code == 304:
            return None
        raise CalendarError(f"HTTP {exc.code}") from None
    except (OSError, http.client.HTTPException):
        if exchange.aborted:
            raise exchange.late() from None
        raise


def fetch_once(root: Path, url: str, label: str, *, timeout: float = FETCH_TIMEOUT, exchange: Exchange | None = None) -> str | None:
    """Fetch `url` into its last good copy within `timeout` seconds in all (or `exchange`'s
    deadline); the problem in one line, or None."""
    copy, meta_path = cache_paths(root, url)
    meta = read_meta(meta_path)
    stamp = format_instant(utc_now())
    exchange = exchange or Exchange(timeout)
    try:
        got = _get(url, meta if copy.exists() else {}, exchange)  # revalidated only with a copy to keep
        if got is not None:
            _keep_copy(copy, got[0], label)
            meta.update(etag=got[1].get("etag"), last_modified=got[1].get("last-modified"), fetched_at=stamp)
        problem = None
    except CalendarError as exc:
        problem = str(exc).removeprefix(f"calendar {label}: ")
    except (OSError, ValueError, EstopError, http.client.HTTPException) as exc:
        problem = one_line(getattr(exc, "reason", None) or exc)
    finally:
        exchange.close()
    meta.update(source=url, checked_at=stamp, error=problem)
    if problem is None:
        meta.pop("error_since", None)
    else:
        meta.setdefault("error_since", stamp)
    meta_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(meta_path, json.dumps(meta, sort_keys=True).encode("utf-8"))
    return problem


def _keep_copy(copy: Path, raw: bytes, label: str) -> None:
    """Write `raw` as the last good copy once it parses (a copy that is `raw` already parsed)."""
    with contextlib.suppress(OSError, EstopError):
        if read_regular(copy, MAX_CALENDAR_BYTES) == raw:
            return
    feed_of(raw, label)
    copy.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(copy, raw)


class CalendarFetcher:
    """The service: every feed `windows.toml` names, refreshed on its own period, each fetch in
    a thread of its own (at most one per feed); stopping abandons the fetches in flight and waits
    for them at most `STOP_GRACE` seconds."""

    name = "calendars"

    def __init__(self, root: Path, *, timeout: float = FETCH_TIMEOUT) -> None:
        self.root = Path(root)
        self.windows_file = WindowsFile(self.root)
        self.timeout = timeout
        self._due: dict[str, float] = {}
        self._failing: set[str] = set()
        #: location -> (the fetch's thread, its exchange: None for a local file)
        self._busy: dict[str, tuple[threading.Thread, Exchange | None]] = {}
        self._lock = threading.Lock()

    def pass_once(self) -> list[threading.Thread]:
        """Start a fetch (or keep) of every feed the file names (read without binding them: a feed with
        no copy yet fails its table's binding) that is due and not in flight; the threads started."""
        now = time.monotonic()
        feeds: dict[str, tuple[str, timedelta]] = {}  # location -> (label, refresh)
        with contextlib.suppress(EstopError, OSError):
            parsed = self.windows_file.validate(self.windows_file.read())
            for source in parsed.sources:
                feeds.setdefault(source.location, (repr(source.name), source.refresh))
            for window in parsed.windows:
                if window.exclude_calendar is not None:
                    feeds.setdefault(window.exclude_calendar, (f"{window.exclude_calendar} (exclude_calendar)", DEFAULT_REFRESH))
        started = []
        with self._lock:
            for location, (label, refresh) in feeds.items():
                if self._due.get(location, 0.0) > now or location in self._busy:
                    continue
                remote = is_url(location)
                self._due[location] = now + (refresh.total_seconds() if remote else _TICK * 5)
                exchange = Exchange(self.timeout) if remote else None
                thread = threading.Thread(target=self._keep, args=(location, label, exchange),
                                          name=f"hermes-calendar-fetch {location[:60]}", daemon=True)
                self._busy[location] = (thread, exchange)
                started.append(thread)
            for gone in set(self._due) - set(feeds):
                self._due.pop(gone, None)
                self._failing.discard(gone)
        for thread in started:
            thread.start()
        return started

    def _keep(self, location: str, label: str, exchange: Exchange | None) -> None:
        """Fetch or keep one feed; one log line when it starts failing, one when it reads again."""
        try:
            if exchange is None:  # a local file: its last good copy kept
                try:
                    _keep_copy(cache_paths(self.root, location)[0],
                               read_regular(local_path(self.root, location), MAX_CALENDAR_BYTES), label)
                    problem = None
                except (OSError, EstopError) as exc:
                    problem = one_line(exc)
            else:
                problem = fetch_once(self.root, location, label, timeout=self.timeout, exchange=exchange)
            with self._lock:
                if problem is None and location in self._failing:
                    self._failing.discard(location)
                    logger.info("calendars: %s reads again", location)
                elif problem is not None and location not in self._failing:
                    self._failing.add(location)
                    what = "cannot use" if exchange is None else "cannot fetch"
                    logger.error("calendars: %s %s: %s (its last good copy holds)", what, location, problem)
        except Exception:  # a feed must never take serve down
            logger.exception("calendars: fetching %s failed", location)
        finally:
            with self._lock:
                self._busy.pop(location, None)

    def abandon(self, grace: float = STOP_GRACE) -> None:
        with self._lock:
            busy = list(self._busy.values())
        for _, exchange in busy:
            if exchange is not None:
                exchange.abort()
        deadline = time.monotonic() + grace
        for thread, _ in busy:
            thread.join(max(deadline - time.monotonic(), 0.0))

    def run(self, stop: threading.Event) -> None:
        logger.info("calendars: keeping the feeds of %s", self.windows_file.path)
        try:
            while not stop.is_set():
                try:
                    self.pass_once()
                except Exception:  # a feed must never take serve down
                    logger.exception("calendars: fetch pass failed")
                stop.wait(_TICK)
        finally:
            self.abandon()
