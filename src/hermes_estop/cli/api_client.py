"""`hermes --server URL`: `pause`, `resume`, `status` and `windows skip` against a server's
write API (`/api/v1/`) instead of this host's store, as amtool speaks to Alertmanager. The token
is read from `--token-file` / `$HERMES_ESTOP_TOKEN_FILE`; TLS is verified with the system's
trust store (`$SSL_CERT_FILE` names another). Nothing is ever written locally: a server that
cannot be reached, or refuses, is exit 2 with one line (a fence that refused is exit 1, as a
local `resume --generation` that finds another generation). `Remote.send` is the same request
for a caller that goes on after a failure (`hermes run`'s lease, `cli/served_holds.py`): it
raises `Unreached` where `Remote.call` exits."""

from __future__ import annotations

import http.client
import io
import json
import socket
import ssl
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote, urlencode, urlsplit
from zoneinfo import ZoneInfo

import typer

from hermes_estop.cli.command_io import EXIT_OK, echo_lines, emit_json, fit_lines, terminal_width
from hermes_estop.cli.write_outcome import Resumed, finish_resume, refused_resume
from hermes_estop.model.audit_event import AuditEvent
from hermes_estop.model.errors import HoldConflict, InvalidArgument, StoreUnavailable
from hermes_estop.model.hold import Fence, HoldState, Reading, hold_from_json, not_current
from hermes_estop.model.homes import Location
from hermes_estop.model.netaddr import is_loopback
from hermes_estop.model.text import one_line, printable
from hermes_estop.model.timeutil import display_instant, format_instant, parse_stamp
from hermes_estop.observe.status import DocumentStatus, status_lines
from hermes_estop.process.describe import paused_lines, reading_from_json
from hermes_estop.windows.model import Occurrence
from hermes_estop.windows.skips import skipped_line

__all__ = ["Answer", "Remote", "Unreached"]

#: one remote call's total deadline, in seconds (connect, TLS, request and the whole answer)
TIMEOUT = 30.0


@dataclass(frozen=True)
class Answer:
    status: int
    #: the decoded JSON of the answer (None: none, or not JSON)
    body: object


class Unreached(StoreUnavailable):
    """The server could not be reached, did not answer within a call's deadline, or answered
    with a redirect (never followed): `Remote.send` raises it, where `Remote.call` exits 2. A
    `StoreUnavailable`: a lease renewing over the API retries it as it retries a store down."""


@dataclass(frozen=True)
class Remote:
    url: str
    token: str
    #: seconds one call may take in all (connect, TLS, the request, the whole answer)
    deadline: float = TIMEOUT

    def call(self, method: str, path: str, body: object = None, headers: dict[str, str] | None = None) -> Answer:
        """`send`, for a command that ends at the first failure: a server that cannot be reached
        (or answers late, or redirects) is exit 2 with `send`'s one line."""
        try:
            return self.send(method, path, body, headers)
        except Unreached as exc:
            _fail(str(exc))

    def send(self, method: str, path: str, body: object = None, headers: dict[str, str] | None = None) -> Answer:
        """One request; an HTTP error status is an `Answer`, a server that cannot be reached (or
        does not answer in `deadline` seconds, all told) is `Unreached` naming why. A redirect is
        never followed (it would carry the token elsewhere): `Unreached` naming where it pointed.
        The deadline holds without a thread: each blocking step waits at most for the time left."""
        ends = time.monotonic() + self.deadline
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        try:
            port = parts.port
        except ValueError:
            raise Unreached(f"invalid --server {self.url}: bad port") from None
        if parts.scheme != "https" and not is_loopback(host):
            raise Unreached(f"refusing to send the token to {self.url} over plain HTTP: {host} is not a loopback "
                            "address (use https://)")
        data = json.dumps(body).encode() if body is not None else None
        sent = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json", **(headers or {})}
        connection: http.client.HTTPConnection
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(host, port, timeout=self.deadline,
                                                     context=ssl.create_default_context())
        else:
            connection = http.client.HTTPConnection(host, port, timeout=self.deadline)
        try:
            connection.connect()  # connect and the TLS handshake: under the whole deadline
            connection.sock = _Deadlined(connection.sock, ends)
            connection.request(method, parts.path.rstrip("/") + path, body=data, headers=sent)
            response = connection.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if time.monotonic() >= ends:
                raise Unreached(f"server {self.url} did not answer within {self.deadline:g} s (the total deadline "
                                "of a call); what it did is unknown: see hermes status") from None
            why = getattr(exc, "reason", None) or exc or type(exc).__name__
            raise Unreached(f"cannot reach server {self.url}: {why}; nothing was changed") from None
        finally:
            connection.close()
        if 300 <= response.status < 400:
            raise Unreached(f"server {self.url} answered {response.status}, a redirect to "
                            f"{response.getheader('Location') or 'nowhere'}: not followed (it would carry the "
                            "token); give --server the URL it names")
        return Answer(response.status, _decoded(raw))

    def said(self, answer: Answer) -> str:
        """The server's one line for a refused `answer`: a 400 (bad input, refused by the checks
        a local command runs) in the local words alone, else naming the server and the status."""
        message = answer.body.get("error") if isinstance(answer.body, dict) else None
        if answer.status == 400 and message:
            return str(message)
        return f"server {self.url} answered {answer.status}: {message or 'no explanation'}"

    def refused(self, answer: Answer) -> NoReturn:
        """Exit 2 with the server's one line (`said`)."""
        _fail(self.said(answer))


class _Deadlined:
    """A connected socket whose every send and read waits at most for the time left before
    `ends` (`time.monotonic()`), and fails with `TimeoutError` once none is left: a server that
    trickles its answer a byte at a time still ends the call at its deadline."""

    def __init__(self, sock: socket.socket, ends: float) -> None:
        self._sock = sock
        self._ends = ends

    def _arm(self) -> None:
        left = self._ends - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline of the call passed")
        self._sock.settimeout(left)

    def sendall(self, data: bytes) -> None:
        self._arm()
        self._sock.sendall(data)

    def recv_into(self, buffer: Any, nbytes: int = 0) -> int:
        self._arm()
        return self._sock.recv_into(buffer, nbytes)

    def makefile(self, mode: str = "rb", buffering: int = -1) -> io.BufferedReader:
        """What `http.client` reads the answer from: a buffered reader over `recv_into` above."""
        return io.BufferedReader(socket.SocketIO(self, "rb"))  # type: ignore[arg-type]

    def _decref_socketios(self) -> None:
        """The reader closed: the socket itself is closed with the connection."""

    def close(self) -> None:
        self._sock.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _decoded(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _fail(message: str) -> NoReturn:
    typer.echo(f"hermes: error: {one_line(message)}", err=True)
    raise typer.Exit(2)


def _scope(fleet: bool, profile: str | None) -> str:
    if fleet and profile is not None:
        raise InvalidArgument("give --fleet or --profile, not both")
    return profile if profile is not None else "fleet"


#: a pause over --server names no scope: it pauses the fleet, and says so (there is no home to default to)
_THE_FLEET_NOTE = " (the fleet: --server has no home of its own; --profile NAME for one profile)"


#: what /api/v1/status adds to the document `hermes status --json` prints
_API_ONLY = ("timeline", "section_lines")


def _view(remote: Remote) -> tuple[dict[str, Any], DocumentStatus]:
    """The server's status document (as `hermes status --json` prints it) and its readings."""
    answer = remote.call("GET", "/api/v1/status")
    if answer.status != 200 or not isinstance(answer.body, dict):
        remote.refused(answer)
    document = {key: value for key, value in answer.body.items() if key not in _API_ONLY}
    try:
        return document, DocumentStatus.of(document, answer.body.get("section_lines") or ())
    except (KeyError, TypeError, ValueError) as exc:
        _fail(f"server {remote.url} answered a status document this client cannot read: {exc}")


def _location(view: DocumentStatus, scope: str) -> Location:
    """The location `scope` names, with its home as the server's document gives it."""
    return Location(scope, Path(view.where(_location_of(scope))).parent)


def _at(view: DocumentStatus, scope: str) -> Reading | None:
    """The reading (full hold and scoped holds) the server's document has at `scope`."""
    return next((r for r in (*view.mine.readings, *view.others) if r.location.scope == scope), None)


def remote_pause(remote: Remote, *, reason: str | None, allow_user: list[str] | None, allow_profile: list[str] | None,
                 ttl: str | None, until: str | None, fleet: bool, profile: str | None, replace: bool,
                 only: list[str] | None, job: list[str] | None, as_json: bool, override: str | None = None) -> NoReturn:
    """`hermes pause` over --server: the server arms the hold; the answer is printed as a local
    pause prints it (`paused_lines`, the same JSON), read back from the server's status."""
    body: dict[str, Any] = {"scope": _scope(fleet, profile), "replace": replace}
    if reason is not None:
        body["reason"] = reason
    if allow_user:
        body["allow"] = {"user_ids": allow_user, "profiles": allow_profile or []}
    for name, value in (("ttl", ttl), ("until", until), ("only", only), ("jobs", job), ("override", override)):
        if value:
            body[name] = value
    answer = remote.call("POST", "/api/v1/holds", body)
    if answer.status != 201 or not isinstance(answer.body, dict):
        remote.refused(answer)
    _, view = _view(remote)
    location = _location(view, str(answer.body["scope"]))
    where = view.where(location)
    if as_json:
        fields = {key: value for key, value in answer.body.items() if key not in ("id", "scope")}
        emit_json({"scope": location.scope, "path": where, **fields, "engaged": view.engaged})
        raise typer.Exit(EXIT_OK)
    note = _THE_FLEET_NOTE if not fleet and profile is None else ""
    others = [r for r in view.mine.active if r.location.scope != location.scope]
    echo_lines(paused_lines(location, hold_from_json(answer.body), where, note, view.now, others))
    raise typer.Exit(EXIT_OK)


def _lifted(remote: Remote, ref: str, generation: str | None, override: str | None = None) -> Reading | HoldConflict | None:
    """DELETE one hold (`If-Match` on `generation`; `override`: break glass, judged by the
    server with the token's rights): what was lifted, the conflict a fence refused, or None
    when nothing stood."""
    answer = remote.call("DELETE", f"/api/v1/holds/{quote(ref, safe=':')}",
                         {"override": override} if override is not None else None,
                         headers={"If-Match": f'"{generation}"'} if generation is not None else None)
    if answer.status == 404:
        return None
    if answer.status in (409, 412):
        return _conflict(ref, generation if answer.status == 412 else None, answer.body)
    if answer.status != 200 or not isinstance(answer.body, dict):
        remote.refused(answer)
    return reading_from_json(answer.body["lifted"])


def _conflict(ref: str, generation: str | None, body: object) -> HoldConflict:
    """The error a local resume gives for the same refusal: for a failed fence on `generation`
    (412) `not_current` with the hold the server says stands (none: it was lifted), else the
    server's words (409)."""
    standing = body.get("hold") if isinstance(body, dict) else None
    if generation is None:
        return HoldConflict(str(body.get("error") if isinstance(body, dict) else body))
    location = _location_of(ref.partition(":")[0])
    hold = hold_from_json(standing) if isinstance(standing, dict) else None
    reading = Reading(location, HoldState.ACTIVE, hold, Fence(hold.generation)) if hold is not None else None
    return not_current(location, generation, reading)


def remote_resume(remote: Remote, *, generation: str | None, hold: str | None, all_: bool, fleet: bool,
                  profile: str | None, as_json: bool, override: str | None = None) -> NoReturn:
    """`hermes resume` over --server: one DELETE per hold it lifts (`--all`: the full hold and
    every scoped hold at the scope as the server's status showed them, each fenced with
    If-Match on the generation seen), printed as a local resume prints it."""
    scope = _scope(fleet, profile)
    _, before = _view(remote)
    standing = _at(before, scope)
    removed: list[Reading] = []
    try:
        for ref, fence in _targets(scope, standing, generation, hold, all_):
            lifted = _lifted(remote, ref, fence, override)
            if isinstance(lifted, HoldConflict):
                raise lifted
            if lifted is not None:
                removed.append(lifted)
    except HoldConflict as exc:
        refused_resume(scope, exc, as_json=as_json)
    document, view = _view(remote)
    finish_resume(_resumed(view, document, scope, removed), as_json=as_json)


def _targets(scope: str, standing: Reading | None, generation: str | None, hold: str | None,
             all_: bool) -> list[tuple[str, str | None]]:
    """The holds to DELETE, each with the generation its If-Match names (None: unfenced)."""
    scoped = [r.hold for r in standing.scoped if r.hold is not None] if standing is not None else []
    if hold is not None:
        found = next((h for h in scoped if h.hold_id == hold), None)
        if found is None:
            labels = ", ".join(h.scope_label for h in scoped) or "none"
            where = _location_of(scope).describe()
            raise HoldConflict(f"no scoped hold {hold!r} at {where} (scoped holds there: {labels})")
        return [(f"{scope}:{hold}", found.generation)]
    if not all_:
        return [(scope, generation)]
    full = standing.hold if standing is not None and standing.present and standing.hold is not None else None
    return ([(scope, full.generation)] if full is not None else []) + [(f"{scope}:{h.hold_id}", h.generation)
                                                                       for h in scoped]


def _location_of(scope: str) -> Location:
    """The location `scope` names, for its words (`describe`) alone."""
    return Location(scope, Path())


def _resumed(view: DocumentStatus, document: dict[str, Any], scope: str, removed: list[Reading]) -> Resumed:
    """What a resume over --server lifted at `scope`, and what stands after it, from the server's
    status read after the lifts (its JSON entries as the server wrote them)."""
    entries = {(e["scope"], e.get("hold")): e for e in document.get("holds") or []}
    holds = [entries[_key(r)] | {"lift": _lift(view, r.location.scope)} for r in view.mine.every_active]
    location = _location(view, scope)
    return Resumed(location, view.where(location), removed, _at(view, scope), view.mine, holds,
                   lambda at: _lift(view, at.scope))


def _key(reading: Reading) -> tuple[str, str | None]:
    return reading.location.scope, reading.hold.hold_id if reading.hold is not None else None


def _lift(view: DocumentStatus, scope: str) -> str | None:
    """The command the server's document says lifts the full hold at `scope` (`lift_command`
    as the server sees it; a scoped hold's `--hold ID` taken off)."""
    for (where, hold_id), lift in view.lifts.items():
        if where == scope and lift is not None:
            return lift.removesuffix(f" --hold {hold_id}") if hold_id else lift
    return None


def remote_status(remote: Remote, *, as_json: bool) -> NoReturn:
    """`hermes status` over --server: the server's document, printed by `status_lines`."""
    document, view = _view(remote)
    if as_json:
        emit_json(document)
        raise typer.Exit(EXIT_OK)
    echo_lines(fit_lines(status_lines(view), terminal_width()))
    raise typer.Exit(EXIT_OK)


def remote_skip(remote: Remote, name: str, *, on: str | None, occurrence: str | None, as_json: bool,
                undo: bool = False) -> NoReturn:
    """`hermes windows skip` (`undo`: `unskip`) over --server, printed as the local one prints it."""
    body = {key: value for key, value in (("on", on), ("occurrence", occurrence)) if value is not None}
    answer = remote.call("DELETE" if undo else "POST", f"/api/v1/windows/{quote(name, safe='')}/skip", body)
    key = "unskipped" if undo else "skipped"
    if answer.status != 200 or not isinstance(answer.body, dict) or not isinstance(answer.body.get(key), dict):
        remote.refused(answer)
    target = answer.body[key]
    if as_json:
        emit_json({key: target})
        raise typer.Exit(EXIT_OK)
    start = parse_stamp(target.get("start"))
    if start is None:
        _fail(f"server {remote.url} answered a skip without its start")
    if undo:
        typer.echo(unskipped_line(name, start))
    else:
        typer.echo(skipped_line(name, start, _zone(answer.body.get("timezone"), target.get("local_start"))))
    raise typer.Exit(EXIT_OK)


def unskipped_line(name: str, start: datetime) -> str:
    """What `windows unskip` prints, here and over `--server`."""
    return f"unskipped window {printable(name)} occurrence {display_instant(start)}: it arms at its start"


def _zone(name: object, local_start: object) -> tzinfo:
    """The window's zone as the server named it; its offset at the occurrence otherwise."""
    try:
        return ZoneInfo(str(name))
    except (ValueError, KeyError, OSError):
        pass
    try:
        return datetime.fromisoformat(str(local_start)).tzinfo or UTC
    except ValueError:
        return UTC


def remote_check(remote: Remote, user: str | None, profile: str | None, component: str | None,
                 job: str | None) -> dict[str, Any]:
    """`hermes check` / `gate` over --server: the server's verdict on this work (`/api/v1/check`),
    as `{"document": what check --json prints, "line": what check prints, "proceed": bool,
    "held_by": the scopes gate names}`, its text escaped again (the server is not trusted to)."""
    query = {key: value for key, value in (("user", user), ("profile", profile), ("component", component),
                                           ("job", job)) if value is not None}
    answer = remote.call("GET", "/api/v1/check" + (f"?{urlencode(query)}" if query else ""))
    body = answer.body
    if answer.status != 200 or not isinstance(body, dict) or not isinstance(body.get("proceed"), bool):
        remote.refused(answer)
    document = {key: value for key, value in body.items() if key not in ("line", "held_by")}
    return {"document": document, "proceed": body["proceed"], "line": printable(body.get("line") or ""),
            "held_by": printable(body.get("held_by") or "")}


def remote_history(remote: Remote, limit: int, since: datetime | None) -> tuple[list[AuditEvent], int]:
    """`hermes history` over --server: the server's trail (`/api/v1/history`), its newest `limit`
    events at or after `since`, and how many corrupt entries it skipped."""
    query = {"limit": str(limit), **({"since": format_instant(since)} if since is not None else {})}
    answer = remote.call("GET", f"/api/v1/history?{urlencode(query)}")
    body = answer.body
    if answer.status != 200 or not isinstance(body, dict) or not isinstance(body.get("events"), list):
        remote.refused(answer)
    events = [AuditEvent.from_json(item) if isinstance(item, dict) else None for item in body["events"]]
    corrupt = body.get("corrupt")
    skipped = (corrupt if isinstance(corrupt, int) else 0) + events.count(None)
    return [event for event in events if event is not None], skipped


def remote_windows(remote: Remote) -> dict[str, Any]:
    """`hermes windows list` over --server: the server's windows as `windows list --json` prints them."""
    answer = remote.call("GET", "/api/v1/windows")
    if answer.status != 200 or not isinstance(answer.body, dict) or not isinstance(answer.body.get("windows"), list):
        remote.refused(answer)
    return answer.body


def remote_next(remote: Remote, name: str | None, count: int | None) -> dict[str, Any]:
    """`hermes windows next` over --server: the server's next occurrences (`/api/v1/windows/next`)."""
    query = {key: str(value) for key, value in (("name", name), ("count", count)) if value is not None}
    answer = remote.call("GET", "/api/v1/windows/next" + (f"?{urlencode(query)}" if query else ""))
    body = answer.body
    if answer.status != 200 or not isinstance(body, dict) or not isinstance(body.get("occurrences"), list):
        remote.refused(answer)
    return body


@dataclass(frozen=True)
class _ServedWindow:
    """What `windows next` shows of a window the server named: its name, scope, zone, state."""

    name: str
    scope: str
    enabled: bool
    zone: tzinfo

    def zone_of(self, occurrence: object) -> tzinfo:
        return self.zone


def served_occurrences(document: dict[str, Any]) -> tuple[datetime, list[tuple[Any, Any]], frozenset[str]]:
    """The server's `windows next` answer as the local command's rows: `now`, each (window,
    occurrence) rebuilt from its JSON, and the keys of the skipped ones. The document's own
    `timezone` fields are taken out of it (`--json` prints what the local command prints)."""
    now = parse_stamp(document.get("now"))
    if now is None:
        _fail("the server answered windows next without its now")
    found, skipped = [], set()
    try:
        for item in document["occurrences"]:
            zone = _zone(item.pop("timezone", None), item.get("local_start"))
            start, end, drain = (parse_stamp(item.get(k)) for k in ("start", "end", "drain_from"))
            if start is None or end is None:
                raise ValueError("an occurrence without its start or end")
            occurrence = Occurrence(start, end, str(item["window"]), str(item["scope"]),
                                    lead=start - drain if drain is not None else timedelta(0))
            found.append((_ServedWindow(str(item["window"]), str(item["scope"]), bool(item.get("enabled", True)), zone),
                          occurrence))
            if item.get("skipped"):
                skipped.add(occurrence.key)
    except (KeyError, TypeError, ValueError) as exc:
        _fail(f"server answered windows next with an occurrence this client cannot read: {exc}")
    return now, found, frozenset(skipped)
