"""`hermes serve --http ADDR:PORT`: the read-only HTTP endpoints, on the stdlib's
`ThreadingHTTPServer` in a daemon thread of `hermes serve` (and nowhere else: `gate()` and the
consumers never pay for it).

- `GET /metrics`: Prometheus text format (`metrics.py`).
- `GET /api/status`: the document of `hermes status --json`, plus the timeline's occurrences.
- `GET /calendar.ics`: the next `?days=N` days of occurrences as iCalendar (`windows.export`),
  for a calendar app to subscribe to.
- `GET /`: the status page (`page.py`).

Read-only by construction: the handler implements GET and HEAD; every other method, also one
HTTP does not define (`FOO`), is 405 with `Allow: GET, HEAD`. A client that goes away mid-request
costs one debug line, never a traceback on serve's stderr (a local client must not flood the log).
It binds loopback unless told otherwise: `parse_listen` refuses any other address without
`allow_remote` (the page shows reasons and allowlisted user ids).
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from prometheus_client import exposition as _exposition

from hermes_estop.model.errors import EstopError, InvalidArgument
from hermes_estop.model.hold import Reading
from hermes_estop.model.netaddr import is_loopback
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import format_instant
from hermes_estop.model.wire import MAX_BODY, ApiRequest, ApiResponse, error_response
from hermes_estop.observe.impact_preview import bar_impacts
from hermes_estop.observe.metrics import MetricsEndpoint, WorkHeldCounter
from hermes_estop.observe.page import UPCOMING_ROWS, render_page
from hermes_estop.observe.view import DEFAULT_DAYS, MAX_DAYS, FleetView, Observer
from hermes_estop.observe.window_times import windows_named
from hermes_estop.process.estop import Estop
from hermes_estop.system.processes import wait_until_set
from hermes_estop.windows.export import MAX_EXPORT_DAYS, ics_of, planned
from hermes_estop.windows.forecast import window_ahead
from hermes_estop.windows.model import Window
from hermes_estop.windows.skips import pick

__all__ = ["REQUEST_DEADLINE", "HttpService", "PageForms", "StatusServer", "WriteRoutes", "attach", "parse_listen",
           "remote_warning", "status_document"]

logger = logging.getLogger("hermes_estop.http")

_ALLOWED = "GET, HEAD"
#: the headers of every HTML answer: no script, no frames, forms only to this server
_PAGE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'"
#: how much of a refused (413) body is read and dropped so the client can read the answer
DISCARD_LIMIT = 1024 * 1024
#: the text format 0.0.4 every Prometheus reads (prometheus_client >= 0.22 calls its newer
#: format "latest"; the names here need none of its escaping, so the output is the same)
METRICS_CONTENT_TYPE: str = getattr(_exposition, "CONTENT_TYPE_PLAIN_0_0_4", _exposition.CONTENT_TYPE_LATEST)


def parse_listen(value: str, *, allow_remote: bool = False) -> tuple[str, int]:
    """`ADDR:PORT` (`[::1]:PORT` for IPv6) as (host, port). `InvalidArgument` (one line, CLI
    exit 2) for a malformed value, a port outside 0..65535, or a non-loopback address without
    `allow_remote`."""
    text = value.strip() if isinstance(value, str) else ""
    host, sep, port_text = text.rpartition(":")
    if text.startswith("["):
        host = host[1:-1] if host.endswith("]") else ""
    if not sep or not host or not port_text.isdigit():
        raise InvalidArgument(f"invalid --http {value!r}: expected ADDR:PORT, e.g. 127.0.0.1:9477")
    port = int(port_text)
    if port > 65535:
        raise InvalidArgument(f"invalid --http {value!r}: port {port} is not in 0..65535")
    if not is_loopback(host) and not allow_remote:
        raise InvalidArgument(f"refusing --http {value}: {host} is not a loopback address "
                              "(add --http-allow-remote to serve the status page and metrics beyond this host)")
    return host, port


def remote_warning(host: str) -> str | None:
    """The warning `hermes serve` prints when `host` is not loopback (None when it is)."""
    if is_loopback(host):
        return None
    return (f"--http on {host}, not a loopback address: anyone who can reach it reads the holds' "
            "reasons and allowlisted user ids (the endpoints are read-only and unauthenticated)")


def status_document(view: FleetView) -> dict[str, Any]:
    """/api/status: the status document of `hermes status --json` (the view's, built with its
    sections) plus `timeline`: the range and every occurrence in it."""
    assert view.status is not None, "a view built by Observer.view carries its status document"
    data = view.status.to_json()
    data["timeline"] = {
        "start": format_instant(view.start),
        "end": format_instant(view.end),
        "lanes": [lane.scope for lane in view.lanes],
        "occurrences": [
            {"window": bar.window, "scope": bar.scope, "start": format_instant(bar.start),
             "end": format_instant(bar.end), "state": bar.state}
            | ({"drain_from": format_instant(bar.drain_from)} if bar.drain_from is not None else {})
            for bar in sorted(view.bars, key=lambda b: (b.start, b.window))
        ],
    }
    if view.problems:
        data["timeline"]["problems"] = list(view.problems)
    return data


#: seconds one request may take in all, from its first byte (or the TLS handshake) to its last
REQUEST_DEADLINE = 30.0


class _Counted(Protocol):
    @property
    def total(self) -> int: ...


class WriteRoutes(Protocol):
    """The write API mounted at /api/v1/ by whoever assembles the server (the daemon mounts
    `api.routes.WriteApi`): the status page does not import it."""

    @property
    def write(self) -> bool: ...

    @property
    def failures(self) -> _Counted: ...

    def handle(self, request: ApiRequest) -> ApiResponse: ...


class _PageAnswer(Protocol):
    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> dict[str, str]: ...

    @property
    def body(self) -> bytes: ...


class PageForms(Protocol):
    """The sign-in and the forms of a signed-in page, mounted with the write API (the daemon
    mounts `api.page_actions.PageActions`). `signed_in`'s answer is passed back as it is."""

    def signed_in(self, cookie_header: str | None) -> Any: ...

    def post(self, path: str, body: bytes, cookie_header: str | None, remote: str, *,
             origin: str | None = None, host: str | None = None) -> _PageAnswer: ...

    def sign_in_form(self, cookie_header: str | None) -> _PageAnswer: ...

    def card_actions(self, current: Any) -> Callable[[Reading], str] | None: ...

    def decorate(self, page: str, current: Any, windows: list[tuple[str, datetime | None]]) -> str: ...


class _Deadlines:
    """One thread that shuts the socket of every request still being read or answered past its
    total deadline: a per-read timeout alone lets a client trickle a byte at a time for ever."""

    def __init__(self) -> None:
        self._due: dict[int, tuple[float, socket.socket]] = {}
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, sock: socket.socket, seconds: float) -> int:
        with self._wake:
            key = id(sock)
            self._due[key] = (time.monotonic() + seconds, sock)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hermes-serve-http-deadlines", daemon=True)
                self._thread.start()
            self._wake.notify()
            return key

    def disarm(self, key: int) -> None:
        with self._wake:
            self._due.pop(key, None)

    def _run(self) -> None:
        while True:
            with self._wake:
                now = time.monotonic()
                late = [key for key, (due, _) in self._due.items() if due <= now]
                cut = [self._due.pop(key)[1] for key in late]
                wait = min((due for due, _ in self._due.values()), default=now + 60.0) - now
                if not cut:
                    self._wake.wait(max(wait, 0.05))
            for sock in cut:
                logger.debug("http: a request from %s did not complete within its deadline; closed", _peer(sock))
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def _peer(sock: socket.socket) -> str:
    try:
        return str(sock.getpeername()[0])
    except OSError:
        return "a client that went away"


class _Handler(BaseHTTPRequestHandler):
    server_version = "hermes-estop"
    protocol_version = "HTTP/1.1"
    timeout = 30

    def handle_one_request(self) -> None:
        """One request under its total deadline (`REQUEST_DEADLINE`), not only a per-read timeout."""
        deadlines: _Deadlines = self.server.deadlines  # type: ignore[attr-defined]
        key = deadlines.arm(self.connection, self.server.request_deadline)  # type: ignore[attr-defined]
        try:
            super().handle_one_request()
        finally:
            deadlines.disarm(key)

    @property
    def app(self) -> StatusServer:
        return self.server.app  # type: ignore[attr-defined,no-any-return]

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("http: %s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def _refuse(self) -> None:
        body = b"read-only: only GET and HEAD are served\n"
        self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
        self.send_header("Allow", _ALLOWED)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _write(self) -> None:
        path = urlsplit(self.path).path
        if self.app.api is not None and path.startswith("/api/v1/"):
            self._api()
        elif self.app.actions is not None and (path in ("/signin", "/signout") or path.startswith("/actions/")):
            self._page_action(path)
        else:
            self._refuse()

    def _page_action(self, path: str) -> None:
        """A form of the status page (`api.page_actions`), form-encoded, at most 64 KiB."""
        assert self.app.actions is not None
        length_text = self.headers.get("Content-Length", "0").strip()
        if not length_text.isdigit() or int(length_text) > MAX_BODY:
            self.close_connection = True
            self._discard_body(length_text)
            self._send(413, {"Content-Type": "text/plain; charset=utf-8"}, b"form too large\n")
            return
        body = self.rfile.read(int(length_text)) if int(length_text) else b""
        answer = self.app.actions.post(path, body, self.headers.get("Cookie"), self.client_address[0],
                                       origin=self.headers.get("Origin"), host=self.headers.get("Host"))
        self._send(answer.status, answer.headers, answer.body)

    def _discard_body(self, length_text: str) -> None:
        """Read and drop a refused body, up to DISCARD_LIMIT, before answering: a client still
        sending when the connection closes gets a reset instead of the 413 (over TLS most of all).
        Past the limit the connection is closed unread; the request timeout bounds the reading."""
        left = min(int(length_text), DISCARD_LIMIT) if length_text.strip().isdigit() else 0
        try:
            while left > 0:
                chunk = self.rfile.read(min(left, 64 * 1024))
                if not chunk:
                    return
                left -= len(chunk)
        except OSError:
            return

    def _send(self, status: int, headers: dict[str, str], body: bytes, *, head: bool = False) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        if headers.get("Content-Type", "").startswith("text/html"):
            self._page_headers()
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _page_headers(self) -> None:
        self.send_header("Content-Security-Policy", _PAGE_POLICY)
        self.send_header("X-Content-Type-Options", "nosniff")

    do_POST = do_DELETE = _write
    do_PUT = do_PATCH = do_OPTIONS = do_CONNECT = do_TRACE = _refuse

    def __getattr__(self, name: str) -> Any:
        if name.startswith("do_"):  # any other method: the stdlib would answer 501
            return self._refuse
        raise AttributeError(name)

    def _api(self) -> None:
        """/api/v1/: the write API (`api.routes`); a body over 64 KiB is 413 before it is read."""
        length_text = self.headers.get("Content-Length", "0")
        if self.headers.get("Transfer-Encoding") or not length_text.strip().isdigit():
            response = error_response(411, "a body needs Content-Length (no chunked encoding)")
            self.close_connection = True
        elif int(length_text) > MAX_BODY:
            response = error_response(413, f"body of {int(length_text)} bytes is over {MAX_BODY} (64 KiB)")
            self.close_connection = True
            self._discard_body(length_text)
        else:
            body = self.rfile.read(int(length_text)) if int(length_text) else b""
            headers = {name.lower(): value for name, value in self.headers.items()}
            url = urlsplit(self.path)
            request = ApiRequest(self.command, url.path, headers, body, self.client_address[0], url.query)
            assert self.app.api is not None
            response = self.app.api.handle(request)
        payload = response.encode()
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        if payload:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(payload)

    def _serve(self, *, head: bool) -> None:
        url = urlsplit(self.path)
        if self.app.api is not None and url.path.startswith("/api/v1/") and not head:
            self._api()
            return
        if url.path == "/signin" and self.app.actions is not None:
            answer = self.app.actions.sign_in_form(self.headers.get("Cookie"))
            self._send(answer.status, answer.headers, answer.body, head=head)
            return
        try:
            found = self.app.route(url.path, parse_qs(url.query), self.headers.get("Cookie"))
        except Exception as exc:
            logger.exception("http: %s failed", url.path)
            found = (HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8",
                     f"error: {one_line(exc)}\n".encode())
        status, content_type, body = found
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        if content_type.startswith("text/html"):
            self._page_headers()
        self.end_headers()
        if not head:
            self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], app: StatusServer, request_deadline: float) -> None:
        self.app = app
        self.deadlines = _Deadlines()
        self.request_deadline = request_deadline
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One log line per failed request instead of the stdlib's traceback on stderr: a debug
        line when the client went away (or timed out), a warning for anything else."""
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            logger.debug("http: %s went away mid-request: %s", client_address, one_line(exc))
        else:
            logger.warning("http: a request from %s failed: %s", client_address, one_line(exc),
                           exc_info=logger.isEnabledFor(logging.DEBUG))


class StatusServer:
    """The endpoints of one fleet, bound at construction (so a busy port is an error before
    anything starts), served by `serve_forever` / `start`."""

    def __init__(self, estop: Estop, host: str = "127.0.0.1", port: int = 0, *,
                 observer: Observer | None = None, work_held: WorkHeldCounter | None = None,
                 api: WriteRoutes | None = None, actions: PageForms | None = None, tls: ssl.SSLContext | None = None,
                 request_deadline: float = REQUEST_DEADLINE) -> None:
        self.estop = estop
        self.observer = observer or Observer(estop)
        self.work_held = work_held or WorkHeldCounter()
        self.metrics = MetricsEndpoint(self.observer, self.work_held)
        self.api = api
        self.tls = tls
        self.actions = actions if api is not None and api.write else None
        try:
            self.httpd = _Server((host, port), self, request_deadline)
        except OSError as exc:
            raise InvalidArgument(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        if tls is not None:  # the handshake happens in the request's thread, under its timeout
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True, do_handshake_on_connect=False)
        self._thread: threading.Thread | None = None

    def status_json(self) -> dict[str, Any]:
        """The document of /api/status (and /api/v1/status)."""
        return status_document(self.observer.view(DEFAULT_DAYS, sections=True))

    def api_status_json(self) -> dict[str, Any]:
        """The document of /api/v1/status: /api/status's, plus `section_lines`, the text of its
        sections as `hermes status` prints them (`hermes --server URL status` prints them)."""
        view = self.observer.view(DEFAULT_DAYS, sections=True, text=True)
        assert view.status is not None
        return status_document(view) | {"section_lines": list(view.status.section_lines)}

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}/"

    def route(self, path: str, query: dict[str, list[str]], cookie: str | None = None) -> tuple[int, str, bytes]:
        """(status, content type, body) for GET `path` (`cookie`: a signed-in page's session)."""
        if path == "/metrics":
            return HTTPStatus.OK, METRICS_CONTENT_TYPE, self.metrics.render() + self._api_metrics()
        if path in ("/api/status", "/api/status/"):
            view = self.observer.view(_days(query), sections=True)
            body = json.dumps(status_document(view), indent=2, default=str).encode()
            return HTTPStatus.OK, "application/json", body + b"\n"
        if path == "/calendar.ics":
            return HTTPStatus.OK, "text/calendar; charset=utf-8", self.calendar(query)
        if path in ("/", "/index.html"):
            view = self.observer.view(_days(query))
            upcoming = view.first_bars(UPCOMING_ROWS)  # each row's "holds back", its details one click away
            impacts = bar_impacts(self.estop, upcoming, windows_named(view, {b.window for b in upcoming}), view.now)
            if self.actions is None:
                page = render_page(view, impacts=impacts)
            else:
                current = self.actions.signed_in(cookie)
                page = render_page(view, card_actions=self.actions.card_actions(current), impacts=impacts)
                page = self.actions.decorate(page, current, [(w.window.name, _next_start(w.window, view.now))
                                                             for w in view.windows])
            return HTTPStatus.OK, "text/html; charset=utf-8", page.encode()
        return HTTPStatus.NOT_FOUND, "text/plain; charset=utf-8", b"not found: try /, /metrics, /api/status or /calendar.ics\n"

    def _api_metrics(self) -> bytes:
        """`hermes_estop_api_auth_failures_total`, when the write API is mounted."""
        if self.api is None:
            return b""
        return ("# HELP hermes_estop_api_auth_failures_total Failed authentications to the write API.\n"
                "# TYPE hermes_estop_api_auth_failures_total counter\n"
                f"hermes_estop_api_auth_failures_total {float(self.api.failures.total)}\n").encode()

    def calendar(self, query: dict[str, list[str]]) -> bytes:
        """/calendar.ics: the windows and calendars as the page shows them (the last ones that
        validated), skipped occurrences cancelled."""
        values = query.get("days")
        days = int(values[0]) if values and values[0].isdigit() else 30
        windows, _, _ = self.observer.load_windows()
        entries, _, _ = self.observer._ledger_entries()
        now = self.observer.fleet.clock()
        found = (window_ahead(window, now) for window in windows if window.enabled)
        return ics_of(planned(found, now, max(1, min(days, MAX_EXPORT_DAYS))), entries, now)

    def start(self) -> StatusServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="hermes-serve-http-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(5.0)
            self._thread = None
        self.httpd.server_close()

    def __enter__(self) -> StatusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _next_start(window: Window, now: datetime) -> datetime | None:
    """The start of the occurrence "Skip next" skips (`skips.pick`), or None when there is none."""
    try:
        return pick(window, now).start
    except EstopError:
        return None


def _days(query: dict[str, list[str]]) -> int:
    values = query.get("days")
    if not values or not values[0].isdigit():
        return DEFAULT_DAYS
    return max(1, min(int(values[0]), MAX_DAYS))


class HttpService:
    """`StatusServer` as a `hermes serve` service: served until `stop` is set."""

    name = "http"

    def __init__(self, server: StatusServer) -> None:
        self.server = server

    def run(self, stop: threading.Event) -> None:
        self.server.start()
        try:  # compute the week's occurrences now, not in the first scrape
            self.server.observer.view()
        except Exception:
            logger.debug("http: warming up failed", exc_info=True)
        what = "read-only" if self.server.api is None or not self.server.api.write else "write API on /api/v1/"
        logger.info("http: serving the status page, /metrics and /api/status on %s (%s)", self.server.url, what)
        try:
            wait_until_set(stop)
        finally:
            self.server.stop()


def attach(server: StatusServer, services: Iterable[Any]) -> HttpService:
    """`server` as a service beside `services` (those `hermes serve` runs): its
    `hermes_estop_scheduler_leader` asks the window scheduler's `is_leader`, and every consumer
    loop's passes feed `hermes_estop_work_held_total` (the loops' `observers` hook)."""
    for service in services:
        if getattr(service, "name", None) == "windows" and callable(getattr(service, "is_leader", None)):
            server.observer.is_leader = service.is_leader
        observers = getattr(service, "observers", None)
        if isinstance(observers, list):
            observers.append(server.work_held.observe)
    return HttpService(server)
