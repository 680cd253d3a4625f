"""`hermes --server URL`: `pause`, `resume`, `status` and `windows skip` against a server's
write API (`/api/v1/`) instead of this host's store, as amtool speaks to Alertmanager. The token
is read from `--token-file` / `$HERMES_ESTOP_TOKEN_FILE`; TLS is verified with the system's
trust store (`$SSL_CERT_FILE` names another). Nothing is ever written locally: a server that
cannot be reached, or refuses, is exit 2 with one line (a fence that refused is exit 1, as a
local `resume --generation` that finds another generation)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from datetime import tzinfo, UTC
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote

import typer

from hermes_estop.model.errors import HoldConflict, InvalidArgument
from hermes_estop.model.hold import Reading
from hermes_estop.model.text import one_line
from hermes_estop.cli.common import EXIT_OK, echo_lines, emit_json, fit_lines, terminal_width
import urllib.error
import urllib.request
from datetime import datetime
from hermes_estop.model.hold import hold_from_json
from hermes_estop.model.hold import Fence, HoldState, not_current
from hermes_estop.model.homes import Location
from hermes_estop.model.timeutil import parse_stamp
from hermes_estop.process.describe import paused_lines
from hermes_estop.process.describe import reading_from_json
from hermes_estop.cli.outcome import Resumed, finish_resume, refused_resume

if TYPE_CHECKING:
    from hermes_estop.observe.status import DocumentStatus
from zoneinfo import ZoneInfo

__all__ = ["SERVER_ENV", "TOKEN_FILE_ENV", "Remote", "chosen_server", "use_server"]

SERVER_ENV = "HERMES_ESTOP_SERVER"
TOKEN_FILE_ENV = "HERMES_ESTOP_TOKEN_FILE"
_CHOSEN: dict[str, str | None] = {}
TIMEOUT = 30.0


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

    def call(self, method: str, path: str, body: object = None, headers: dict[str, str] | None = None) -> Answer:
        """One request; an HTTP error status is an `Answer`, a server that cannot be reached is
        exit 2 (one line). `ssl` and `urllib` are imported here: a local command never pays for them."""
        import ssl

        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT, context=ssl.create_default_context()) as response:
                return Answer(response.status, _decoded(response.read()))
        except urllib.error.HTTPError as exc:
            return Answer(exc.code, _decoded(exc.read()))
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            _fail(f"cannot reach server {self.url}: {reason}; nothing was changed")

    def refused(self, answer: Answer) -> NoReturn:
        """Exit 2 with the server's one line; a 400 (bad input, refused by the checks a local
        command runs) in the local words alone."""
        message = answer.body.get("error") if isinstance(answer.body, dict) else None
        if answer.status == 400 and message:
            _fail(str(message))
        _fail(f"server {self.url} answered {answer.status}: {message or 'no explanation'}")


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
                 only: list[str] | None, job: list[str] | None, as_json: bool) -> NoReturn:
    """`hermes pause` over --server: the server arms the hold; the answer is printed as a local
    pause prints it (`paused_lines`, the same JSON), read back from the server's status."""
    body: dict[str, Any] = {"scope": _scope(fleet, profile), "replace": replace}
    if reason is not None:
        body["reason"] = reason
    if allow_user:
        body["allow"] = {"user_ids": allow_user, "profiles": allow_profile or []}
    for name, value in (("ttl", ttl), ("until", until), ("only", only), ("jobs", job)):
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


def _lifted(remote: Remote, ref: str, generation: str | None) -> Reading | HoldConflict | None:
    """DELETE one hold (`If-Match` on `generation`): what was lifted, the conflict a fence
    refused, or None when nothing stood."""
    answer = remote.call("DELETE", f"/api/v1/holds/{quote(ref, safe=':')}",
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
                  profile: str | None, as_json: bool) -> NoReturn:
    """`hermes resume` over --server: one DELETE per hold it lifts (`--all`: the full hold and
    every scoped hold at the scope as the server's status showed them, each fenced with
    If-Match on the generation seen), printed as a local resume prints it."""
    scope = _scope(fleet, profile)
    _, before = _view(remote)
    standing = _at(before, scope)
    removed: list[Reading] = []
    try:
        for ref, fence in _targets(scope, standing, generation, hold, all_):
            lifted = _lifted(remote, ref, fence)
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


def remote_skip(remote: Remote, name: str, *, on: str | None, occurrence: str | None, as_json: bool) -> NoReturn:
    from hermes_estop.windows.skips import skipped_line  # the windows package: not for `hermes pause` (issue 45)

    body = {key: value for key, value in (("on", on), ("occurrence", occurrence)) if value is not None}
    answer = remote.call("POST", f"/api/v1/windows/{quote(name, safe='')}/skip", body)
    if answer.status != 200 or not isinstance(answer.body, dict):
        remote.refused(answer)
    skipped = answer.body["skipped"]
    if as_json:
        emit_json({"skipped": skipped})
        raise typer.Exit(EXIT_OK)
    start = parse_stamp(skipped.get("start"))
    if start is None:
        _fail(f"server {remote.url} answered a skip without its start")
    typer.echo(skipped_line(name, start, _zone(answer.body.get("timezone"), skipped.get("local_start"))))
    raise typer.Exit(EXIT_OK)


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
