"""`hermes --server URL`: `pause`, `resume`, `status` and `windows skip` against a server's
write API (`/api/v1/`) instead of this host's store, as amtool speaks to Alertmanager. The token
is read from `--token-file` / `$HERMES_ESTOP_TOKEN_FILE`; TLS is verified with the system's
trust store (`$SSL_CERT_FILE` names another). Nothing is ever written locally: a server that
cannot be reached, or refuses, is exit 2 with one line (a fence that refused is exit 1, as a
local `resume --generation` that finds another generation)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from datetime import tzinfo, UTC
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote, urlencode, urlsplit

import typer

from hermes_estop.model.errors import HoldConflict, InvalidArgument
from hermes_estop.model.hold import Reading
from hermes_estop.model.text import one_line, printable
from hermes_estop.cli.common import EXIT_OK, echo_lines, emit_json, fit_lines, terminal_width
from datetime import datetime, timedelta
from hermes_estop.model.hold import hold_from_json
from hermes_estop.model.hold import Fence, HoldState, not_current
from hermes_estop.model.homes import Location
from hermes_estop.model.netaddr import is_loopback
from hermes_estop.model.timeutil import display_instant, parse_stamp
from hermes_estop.process.describe import paused_lines
from hermes_estop.process.describe import reading_from_json
from hermes_estop.cli.outcome import Resumed, finish_resume, refused_resume

if TYPE_CHECKING:
    from hermes_estop.observe.status import DocumentStatus
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    from hermes_estop.model.audit_event import AuditEvent

__all__ = ["SERVED", "SERVER_ENV", "TOKEN_FILE_ENV", "Remote", "chosen_server", "unserved", "use_server"]

SERVER_ENV = "HERMES_ESTOP_SERVER"
TOKEN_FILE_ENV = "HERMES_ESTOP_TOKEN_FILE"
_CHOSEN: dict[str, str | None] = {}
#: one remote call's total deadline, in seconds (connect, TLS, request and the whole answer)
TIMEOUT = 30.0


#: the commands `--server` serves (the words after `hermes`); every other command is refused
#: with one line while a server is named: it would act on this host's files, not the server's fleet
SERVED = frozenset({("pause",), ("resume",), ("status",), ("check",), ("gate",), ("history",), ("help",),
                    ("windows", "list"), ("windows", "next"), ("windows", "skip"), ("windows", "unskip")})
#: the command groups: alone (`hermes windows`) they print their help, which acts on nothing
_GROUPS = frozenset({"windows", "cron", "kanban", "gateway", "store", "notify", "tokens", "policy"})
#: the root options that take a value (`hermes --server URL pause`)
_ROOT_VALUED = ("--store", "--server", "--token-file")


def unserved(args: Sequence[str]) -> str | None:
    """The one line refusing `hermes ARGS` while a server is named (`--server` among the root
    options, or $HERMES_ESTOP_SERVER) and the command is not one `--server` serves; None
    otherwise (no server, a served command, or help and the version, which act on nothing)."""
    server, words, rest = os.environ.get(SERVER_ENV) or None, list[str](), list(args)
    while rest and len(words) < 2:
        head = rest.pop(0)
        if head in ("-h", "--help", "--version"):
            return None
        name, eq, value = head.partition("=")
        if not words and name in _ROOT_VALUED:
            value = value if eq else (rest.pop(0) if rest else "")
            server = value or server if name == "--server" else server
        elif head == "--":
            break
        elif not head.startswith("-"):
            words.append(head)
        elif words:
            break  # a command's own option: the words so far name it
    if server is None or not words or any(tuple(words[:n]) in SERVED for n in (1, 2)):
        return None
    if words == words[:1] and words[0] in _GROUPS and not rest:
        return None
    if any(flag in rest for flag in ("-h", "--help")):
        return None
    command = " ".join(words if words[0] in _GROUPS else words[:1])
    return (f"hermes {command} is not served over --server ({server}): it would act on this host's files, not "
            f"the server's fleet; run it on a host of the fleet, or unset {SERVER_ENV} / drop --server")


def use_server(url: str | None, token_file: str | None) -> None:
    """Record `--server` / `--token-file` from the command line (they win over the environment)."""
    _CHOSEN.update(server=url, token_file=token_file)


def chosen_server() -> Remote | None:
    """The server this command speaks to, or None to act on the local store."""
    url = _CHOSEN.get("server") or os.environ.get(SERVER_ENV) or None
    if url is None:
        return None
    if not url.startswith(("http://", "https://")):
        raise InvalidArgument(f"invalid --server {url!r}: expected http(s)://HOST:PORT")
    token_file = _CHOSEN.get("token_file") or os.environ.get(TOKEN_FILE_ENV)
    if not token_file:
        raise InvalidArgument(f"--server {url} needs a token: --token-file PATH or ${TOKEN_FILE_ENV}")
    try:
        token = Path(token_file).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read --token-file {token_file}: {getattr(exc, 'strerror', None) or exc}") from None
    if not token:
        raise InvalidArgument(f"--token-file {token_file} is empty")
    return Remote(url.rstrip("/"), token)


@dataclass(frozen=True)
class Answer:
    status: int
    #: the decoded JSON of the answer (None: none, or not JSON)
    body: object


@dataclass(frozen=True)
class Remote:
    url: str
    token: str
    #: seconds one call may take in all (connect, TLS, the request, the whole answer)
    deadline: float = TIMEOUT

    def call(self, method: str, path: str, body: object = None, headers: dict[str, str] | None = None) -> Answer:
        """One request; an HTTP error status is an `Answer`, a server that cannot be reached (or
        does not answer in `deadline` seconds, all told) is exit 2 (one line). A redirect is never
        followed (it would carry the token elsewhere): it is exit 2 naming where it pointed.
        `ssl` and `http.client` are imported here: a local command never pays for them."""
        import http.client
        import ssl

        parts = urlsplit(self.url)
        host = parts.hostname or ""
        try:
            port = parts.port
        except ValueError:
            _fail(f"invalid --server {self.url}: bad port")
        if parts.scheme != "https" and not is_loopback(host):
            _fail(f"refusing to send the token to {self.url} over plain HTTP: {host} is not a loopback address "
                  "(use https://)")
        data = json.dumps(body).encode() if body is not None else None
        sent = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json", **(headers or {})}
        connection: http.client.HTTPConnection
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(host, port, timeout=self.deadline,
                                                     context=ssl.create_default_context())
        else:
            connection = http.client.HTTPConnection(host, port, timeout=self.deadline)
        late = threading.Event()
        timer = threading.Timer(self.deadline, _cut, (connection, late))
        timer.daemon = True
        timer.start()
        try:
            connection.request(method, parts.path.rstrip("/") + path, body=data, headers=sent)
            response = connection.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if late.is_set():
                self._late()
            _fail(f"cannot reach server {self.url}: {getattr(exc, 'reason', None) or exc or type(exc).__name__}; "
                  "nothing was changed")
        finally:
            timer.cancel()
            connection.close()
        if late.is_set():  # a cut answer can look whole: what was read is not trusted
            self._late()
        if 300 <= response.status < 400:
            _fail(f"server {self.url} answered {response.status}, a redirect to "
                  f"{response.getheader('Location') or 'nowhere'}: not followed (it would carry the token); "
                  "give --server the URL it names")
        return Answer(response.status, _decoded(raw))

    def _late(self) -> NoReturn:
        _fail(f"server {self.url} did not answer within {self.deadline:g} s (the total deadline of a call); "
              "what it did is unknown: see hermes status")

    def refused(self, answer: Answer) -> NoReturn:
        """Exit 2 with the server's one line; a 400 (bad input, refused by the checks a local
        command runs) in the local words alone."""
        message = answer.body.get("error") if isinstance(answer.body, dict) else None
        if answer.status == 400 and message:
            _fail(str(message))
        _fail(f"server {self.url} answered {answer.status}: {message or 'no explanation'}")


def _cut(connection: Any, late: threading.Event) -> None:
    """The deadline of one call passed: shut its socket, so whatever read waits returns."""
    late.set()
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


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
    from hermes_estop.observe.status import DocumentStatus  # the status stack: not for `hermes pause` (issue 45)

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
    from hermes_estop.observe.status import status_lines  # the status stack: not for `hermes pause` (issue 45)

    document, view = _view(remote)
    if as_json:
        emit_json(document)
        raise typer.Exit(EXIT_OK)
    echo_lines(fit_lines(status_lines(view), terminal_width()))
    raise typer.Exit(EXIT_OK)


def remote_skip(remote: Remote, name: str, *, on: str | None, occurrence: str | None, as_json: bool,
                undo: bool = False) -> NoReturn:
    """`hermes windows skip` (`undo`: `unskip`) over --server, printed as the local one prints it."""
    from hermes_estop.windows.skips import skipped_line  # the windows package: not for `hermes pause` (issue 45)

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
    from hermes_estop.model.audit_event import AuditEvent
    from hermes_estop.model.timeutil import format_instant

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
    from hermes_estop.windows.occurrences import Occurrence

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
