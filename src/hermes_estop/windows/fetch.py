"""Fetching calendar feeds into the fleet root (issue 27): the only place a `url` of
`windows.toml` is requested, a service of `hermes serve`.

Each url is requested every `refresh` with `If-None-Match` / `If-Modified-Since`, one total
deadline (`Exchange`) and a size cap, in a thread of its own: a slow feed delays nobody else.
A body becomes the last good copy (`calendars.cache_paths`) only once it parses; a failure keeps
the copy and is written into its metadata, which every reader reports (`Parsed.stale`). Local
`ics` files get a last good copy too, so a file broken by an edit keeps holding as it was.
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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hermes_estop.model.errors import EstopError
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import format_instant
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


def _now() -> datetime:
    return datetime.now(UTC)


def _write_meta(path: Path, meta: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(meta, sort_keys=True).encode("utf-8"))


class Exchange:
    """One fetch's single deadline (issue 32 item 5) for connecting, the headers and the body.
    Socket timeouts bound each wait, not their sum (a byte every 2 s never times out), so every
    socket the fetch opens is shut down when the deadline passes, or when serve stops (`abort`)."""

    def __init__(self, total: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.monotonic = monotonic
        self.deadline = monotonic() + total
        self.aborted = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(total, self.abort)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        return max(self.deadline - self.monotonic(), 0.001)

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


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _connection(base: type[http.client.HTTPConnection], exchange: Exchange) -> Any:
    """`base` whose sockets belong to `exchange` (the raw socket, before any TLS on top of it)."""

    class Connection(base):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.timeout = exchange.remaining()
            create: Callable[..., socket.socket] = self._create_connection  # type: ignore[has-type]
            self._create_connection = lambda *a, **kw: exchange.adopt(create(*a, **kw))

    return Connection


def _handlers(exchange: Exchange) -> tuple[urllib.request.BaseHandler, ...]:
    """urllib's http and https handlers, their connections' sockets belonging to `exchange`."""

    class HTTP(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(_connection(http.client.HTTPConnection, exchange), req)

    class HTTPS(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(_connection(http.client.HTTPSConnection, exchange), req,
                                context=self._context)  # type: ignore[attr-defined]

    return HTTP(), HTTPS()


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Redirects to http(s) only: another scheme (ftp) would escape the exchange's deadline."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:
        if not is_url(newurl):
            raise CalendarError(f"redirected to {newurl[:200]!r}: only http(s) is followed")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _get(url: str, meta: dict[str, Any], exchange: Exchange) -> tuple[int, bytes, dict[str, str]]:
    """(status, body, headers), redirects included, within `exchange`'s deadline and the cap."""
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})  # noqa: S310 - calendar sources admit http(s) URLs only
    if meta.get("etag"):
        request.add_header("If-None-Match", str(meta["etag"]))
    if meta.get("last_modified"):
        request.add_header("If-Modified-Since", str(meta["last_modified"]))
    opener = urllib.request.build_opener(*_handlers(exchange), _Redirects())
    try:
        with opener.open(request, timeout=exchange.remaining()) as response:
            chunks: list[bytes] = []
            size = 0
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_CALENDAR_BYTES:
                    raise CalendarError(f"larger than {MAX_CALENDAR_BYTES // (1024 * 1024)} MiB")
                chunks.append(chunk)
            if exchange.aborted:
                raise _Late
            return response.status, b"".join(chunks), {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as exc:
        if exc.code == 304:
            return 304, b"", {}
        raise CalendarError(f"HTTP {exc.code}") from None
    except (OSError, http.client.HTTPException):
        if exchange.aborted:
            raise _Late from None
        raise


class _Late(Exception):
    """The deadline passed (or the fetch was abandoned) before the exchange completed."""


def fetch_once(root: Path, url: str, label: str, *, timeout: float = FETCH_TIMEOUT,
               now: Callable[[], datetime] = _now, exchange: Exchange | None = None) -> str | None:
    """Fetch `url` into its last good copy within `timeout` seconds in all (or `exchange`'s
    deadline); the problem in one line, or None."""
    copy, meta_path = cache_paths(root, url)
    meta = read_meta(meta_path)
    if not copy.exists():
        meta.pop("etag", None)
        meta.pop("last_modified", None)
    stamp = format_instant(now())
    exchange = exchange or Exchange(timeout)
    try:
        status, body, headers = _get(url, meta, exchange)
        if status != 304:
            if status != 200:
                raise CalendarError(f"HTTP {status}")
            _keep_copy(copy, body, label)
            meta.update(etag=headers.get("etag"), last_modified=headers.get("last-modified"), fetched_at=stamp)
        problem = None
    except _Late:
        problem = ("abandoned (serve stopping)" if exchange.monotonic() < exchange.deadline else
                   f"no complete answer within {exchange.total:g}s (connect, headers and body)")
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
    _write_meta(meta_path, meta)
    return problem


def _keep_copy(copy: Path, raw: bytes, label: str) -> None:
    """Write `raw` as the last good copy once it parses (a copy that is `raw` already parsed)."""
    with contextlib.suppress(OSError, EstopError):
        if copy.exists() and read_regular(copy, MAX_CALENDAR_BYTES) == raw:
            return
    feed_of(raw, label)
    copy.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(copy, raw)


def keep_local(root: Path, location: str, label: str) -> str | None:
    """Keep the last good copy of a local .ics file; the problem, or None."""
    try:
        _keep_copy(cache_paths(root, location)[0], read_regular(local_path(root, location), MAX_CALENDAR_BYTES), label)
    except (OSError, EstopError) as exc:
        return one_line(exc)
    return None


class CalendarFetcher:
    """The service: every feed `windows.toml` names, refreshed on its own period, each fetch in
    a thread of its own (at most one per feed); stopping abandons the fetches in flight and waits
    for them at most `STOP_GRACE` seconds."""

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
        #: location -> (the fetch's thread, its exchange: None for a local file)
        self._busy: dict[str, tuple[threading.Thread, Exchange | None]] = {}
        self._lock = threading.Lock()

    def feeds(self) -> dict[str, tuple[str, timedelta]]:
        """location -> (label, refresh) for every feed the file names (none when it does not read;
        `WindowsFile.validate` validates only bytes it has not seen)."""
        try:
            parsed = self.windows_file.validate(self.windows_file.snapshot().raw)
        except (EstopError, OSError):
            return {}
        out: dict[str, tuple[str, timedelta]] = {}
        for source in parsed.sources:
            out.setdefault(source.location, (repr(source.name), source.refresh))
        for window in parsed.windows:
            if window.exclude_calendar is not None:
                out.setdefault(window.exclude_calendar, (f"{window.exclude_calendar} (exclude_calendar)", DEFAULT_REFRESH))
        return out

    def pass_once(self) -> list[threading.Thread]:
        """Start a fetch (or keep) of every feed due and not in flight; the threads started."""
        now = self.monotonic()
        feeds = self.feeds()
        started = []
        with self._lock:
            for location, (label, refresh) in feeds.items():
                if self._due.get(location, 0.0) > now or location in self._busy:
                    continue
                remote = is_url(location)
                self._due[location] = now + (refresh.total_seconds() if remote else self.tick * 5)
                exchange = Exchange(self.timeout) if remote else None
                thread = threading.Thread(target=self._keep, args=(location, label, exchange),
                                          name=f"hermes-calendar-fetch {location[:60]}", daemon=True)
                self._busy[location] = (thread, exchange)
                started.append(thread)
            for gone in set(self._due) - set(feeds):
                self._due.pop(gone, None)
                self._failing.pop(gone, None)
        for thread in started:
            thread.start()
        return started

    def _keep(self, location: str, label: str, exchange: Exchange | None) -> None:
        try:
            if exchange is None:
                problem = keep_local(self.root, location, label)
            else:
                problem = fetch_once(self.root, location, label, timeout=self.timeout, exchange=exchange)
            self._report(location, problem, exchange is not None)
        except Exception:  # a feed must never take serve down
            logger.exception("calendars: fetching %s failed", location)
        finally:
            with self._lock:
                self._busy.pop(location, None)

    def _report(self, location: str, problem: str | None, remote: bool) -> None:
        """One log line when a feed starts failing, one when it is good again."""
        with self._lock:
            if problem is None:
                if self._failing.pop(location, None) is not None:
                    logger.info("calendars: %s reads again", location)
                return
            if location not in self._failing:
                what = "cannot fetch" if remote else "cannot use"
                logger.error("calendars: %s %s: %s (its last good copy holds)", what, location, problem)
            self._failing[location] = problem

    def abandon(self, grace: float = STOP_GRACE) -> None:
        """Abort every fetch in flight and wait for their threads, `grace` seconds in all."""
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
                stop.wait(self.tick)
        finally:
            self.abandon()
