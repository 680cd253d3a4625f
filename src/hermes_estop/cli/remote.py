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
from typing import Any, NoReturn
from urllib.parse import quote

import typer

from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.text import one_line, printable
from hermes_estop.cli.common import EXIT_HELD, EXIT_OK, emit_json
import urllib.error
import urllib.request

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
    body: Any


@dataclass(frozen=True)
class Remote:
    url: str
    token: str

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Answer:
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
        message = answer.body.get("error") if isinstance(answer.body, dict) else None
        _fail(f"server {self.url} answered {answer.status}: {message or 'no explanation'}")


def _decoded(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _fail(message: str) -> NoReturn:
    typer.echo(f"hermes: error: {one_line(message)}", err=True)
    raise typer.Exit(2)


def _hold_lines(hold: dict[str, Any]) -> list[str]:
    allow = hold.get("allow") or {}
    users = ", ".join(str(u) for u in allow.get("user_ids") or []) or "nobody"
    lines = [f"covers     {hold.get('covers', 'all')}", f"generation {hold.get('generation')}"]
    if hold.get("reason"):
        lines.append(f"reason     {hold['reason']}")
    if hold.get("deadline"):
        lines.append(f"deadline   {hold['deadline']} ({hold.get('deadline_in')})")
    lines.append(f"allow      {users}")
    if hold.get("armed_by"):
        lines.append(f"armed by   {hold['armed_by']}")
    return [printable(line) for line in lines]


def _scope(fleet: bool, profile: str | None) -> str:
    if fleet and profile is not None:
        raise InvalidArgument("give --fleet or --profile, not both")
    return profile if profile is not None else "fleet"


def remote_pause(remote: Remote, *, reason: str | None, allow_user: list[str] | None, allow_profile: list[str] | None,
                 ttl: str | None, until: str | None, fleet: bool, profile: str | None, replace: bool,
                 only: list[str] | None, job: list[str] | None, as_json: bool) -> NoReturn:
    body: dict[str, Any] = {"scope": _scope(fleet, profile), "replace": replace}
    if reason is not None:
        body["reason"] = reason
    if allow_user:
        body["allow"] = {"user_ids": allow_user, "profiles": allow_profile or []}
    for name, value in (("ttl", ttl), ("until", until), ("only", only), ("jobs", job)):
        if value:
            body[name] = value
    answer = remote.call("POST", "/api/v1/holds", body)
    if answer.status != 201:
        remote.refused(answer)
    hold = answer.body
    if as_json:
        emit_json({**hold, "server": remote.url})
        raise typer.Exit(EXIT_OK)
    typer.echo(f"paused {printable(hold['scope'])} (hold {printable(hold['id'])} on server {printable(remote.url)})")
    for line in _hold_lines(hold):
        typer.echo(f"  {line}")
    raise typer.Exit(EXIT_OK)


def remote_resume(remote: Remote, *, generation: str | None, hold: str | None, all_: bool, fleet: bool,
                  profile: str | None, as_json: bool) -> NoReturn:
    if all_:
        raise InvalidArgument("--all is not served over --server: lift each hold (--hold ID)")
    scope = _scope(fleet, profile)
    ref = f"{scope}:{hold}" if hold is not None else scope
    answer = remote.call("DELETE", f"/api/v1/holds/{quote(ref, safe=':')}",
                         headers={"If-Match": f'"{generation}"'} if generation is not None else None)
    if answer.status == 404:
        if as_json:
            emit_json({"scope": scope, "released": False, "server": remote.url})
        else:
            typer.echo(f"no hold {printable(ref)} on server {printable(remote.url)}")
        raise typer.Exit(EXIT_OK)
    if answer.status in (409, 412):
        message = answer.body.get("error") if isinstance(answer.body, dict) else "refused"
        if as_json:
            emit_json({"scope": scope, "released": False, "error": message, "server": remote.url})
        else:
            typer.echo(f"hermes: {one_line(message)}", err=True)
        raise typer.Exit(EXIT_HELD)
    if answer.status != 200:
        remote.refused(answer)
    lifted = answer.body["lifted"]
    if as_json:
        emit_json({"scope": scope, "released": True, "generation": lifted.get("generation"), "server": remote.url})
        raise typer.Exit(EXIT_OK)
    typer.echo(f"resumed {printable(ref)} on server {printable(remote.url)} (generation {printable(lifted.get('generation'))})")
    raise typer.Exit(EXIT_OK)


def remote_status(remote: Remote, *, as_json: bool) -> NoReturn:
    answer = remote.call("GET", "/api/v1/status")
    if answer.status != 200 or not isinstance(answer.body, dict):
        remote.refused(answer)
    document = answer.body
    if as_json:
        emit_json(document)
        raise typer.Exit(EXIT_OK)
    fleet = document.get("fleet") or {}
    holds = [h for h in fleet.get("holds") or [] if h.get("state") != "absent"]
    typer.echo(f"HELD: new work is paused ({len(holds)} active hold(s))" if holds
               else "free: no active hold in the fleet")
    for hold in holds:
        where = printable(hold.get("scope")) + (f" hold {printable(hold['hold'])}" if hold.get("hold") else "")
        typer.echo(f"{'HELD' if hold.get('state') == 'active' else printable(str(hold.get('state')).upper()):<5} {where}")
        for line in _hold_lines(hold):
            typer.echo(f"      {line}")
    typer.echo(f"server     {printable(remote.url)}")
    raise typer.Exit(EXIT_OK)


def remote_skip(remote: Remote, name: str, *, on: str | None, occurrence: str | None, as_json: bool) -> NoReturn:
    body = {key: value for key, value in (("on", on), ("occurrence", occurrence)) if value is not None}
    answer = remote.call("POST", f"/api/v1/windows/{quote(name, safe='')}/skip", body)
    if answer.status != 200:
        remote.refused(answer)
    skipped = answer.body["skipped"]
    if as_json:
        emit_json({"skipped": skipped})
        raise typer.Exit(EXIT_OK)
    typer.echo(f"skipped window {printable(name)} occurrence {printable(skipped.get('start'))}: it will not arm")
    raise typer.Exit(EXIT_OK)
