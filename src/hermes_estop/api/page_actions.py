"""Actions on the status page for a signed-in user (issue 36 item 4): sign in with a token,
then pause, lift, extend and skip from the page, through the write API's routes (`WriteApi`,
so the same roles, fences, audit and errors), with no script on the page.

- Sign-in keeps a session in this process's memory: a random id in an HttpOnly, SameSite=Strict
  cookie (Secure under TLS), bound to the token's hash (never its secret), re-checked on every
  request, so a revoked token signs its sessions out at once.
- Every form carries the session's CSRF token (compared in constant time); a POST without it
  is 403 and changes nothing. SameSite=Strict already keeps other sites' forms from sending
  the cookie; the CSRF token also covers a browser that ignores it.
- Lift and extend send the generation the page showed as `If-Match`: a stale page's lift after
  a re-arm is refused (412) with a message naming the new generation, shown above the new hold.
- A viewer sees no buttons. After an action the browser is sent back to `/` (303) and the
  outcome is shown once.
"""

from __future__ import annotations

import hmac
import json
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from urllib.parse import parse_qs, quote

from hermes_estop.api.routes import ApiError, ApiRequest, WriteApi, hold_ref
from hermes_estop.api.tokens import Token
from hermes_estop.model.hold import Reading
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import format_instant, short_utc
from hermes_estop.process.describe import covers

__all__ = ["COOKIE", "PageActions"]

COOKIE = "hermes_session"
#: the sign-in form's CSRF token, before there is a session (double-submit: the form and this cookie)
SIGN_IN_COOKIE = "hermes_signin"
_CSRF_SHAPE = re.compile(r"[A-Za-z0-9_-]{32,64}")
SESSION_SECONDS = 12 * 3600
MAX_SESSIONS = 1000


def _t(value: object) -> str:
    return escape(printable(value), quote=True)


@dataclass
class Session:
    digest: str
    csrf: str
    started: float
    flash: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class PageAnswer:
    status: int
    headers: dict[str, str]
    body: bytes


class PageActions:
    """The sign-in and the actions of one serving process."""

    def __init__(self, api: WriteApi, *, tls: bool, css: str, monotonic: Callable[[], float] = time.monotonic) -> None:
        """`css`: the status page's style sheet (`observe.page.PAGE_CSS`), for the sign-in page."""
        self.api = api
        self.tls = tls
        self.css = css
        self.monotonic = monotonic
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    # -- sessions ----------------------------------------------------------------------------

    def signed_in(self, cookie_header: str | None) -> tuple[str, Session, Token] | None:
        """The session the request's cookie names and its (still valid) token, or None."""
        sid = _cookie(cookie_header, COOKIE)
        if sid is None:
            return None
        with self._lock:
            session = self._sessions.get(sid)
            if session is None or self.monotonic() - session.started > SESSION_SECONDS:
                self._sessions.pop(sid, None)
                return None
        token = self.api.tokens.by_digest(session.digest, self.api.estop.clock())
        if token is None:
            with self._lock:
                self._sessions.pop(sid, None)
            return None
        return sid, session, token

    def _cookie(self, sid: str, max_age: int) -> str:
        secure = "; Secure" if self.tls else ""
        return f"{COOKIE}={sid}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"

    # -- requests ----------------------------------------------------------------------------

    def post(self, path: str, body: bytes, cookie_header: str | None, remote: str, *,
             origin: str | None = None, host: str | None = None) -> PageAnswer:
        """POST /signin, /signout, /actions/{pause,lift,extend,skip} (form-encoded). A form whose
        `Origin` is not this server's is refused (403) before anything else is read."""
        if origin is not None and origin != self._origin(host):
            return _refused(f"refused: a form sent from another site ({origin}); use this server's own page\n")
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}
        if path == "/signin":
            return self._sign_in(form, cookie_header, remote)
        current = self.signed_in(cookie_header)
        if current is None:
            return _redirect("/signin")
        sid, session, token = current
        if not hmac.compare_digest(form.get("csrf", ""), session.csrf):
            return _refused("refused: the form's CSRF token does not match this session; reload the page\n")
        if path == "/signout":
            with self._lock:
                self._sessions.pop(sid, None)
            return _redirect("/", {"Set-Cookie": self._cookie("", 0)})
        outcome = self._act(path, form, token, remote)
        with self._lock:
            session.flash.append(outcome)
        return _redirect("/")

    def _origin(self, host: str | None) -> str | None:
        """This server's origin as the browser names it (`Host` with the scheme it serves)."""
        return f"{'https' if self.tls else 'http'}://{host}" if host else None

    def sign_in_form(self, cookie_header: str | None, message: str | None = None, status: int = 200) -> PageAnswer:
        """GET /signin: the form, with the sign-in's CSRF token in the form and in a cookie (the
        POST must carry both, equal: another site's form cannot read the cookie to copy it)."""
        csrf = _cookie(cookie_header, SIGN_IN_COOKIE)
        if csrf is None or not _CSRF_SHAPE.fullmatch(csrf):
            csrf = secrets.token_urlsafe(32)
        secure = "; Secure" if self.tls else ""
        cookie = f"{SIGN_IN_COOKIE}={csrf}; Path=/signin; HttpOnly; SameSite=Strict; Max-Age=3600{secure}"
        return PageAnswer(status, {"Content-Type": "text/html; charset=utf-8", "Set-Cookie": cookie},
                          self.sign_in_page(message, csrf).encode())

    def _sign_in(self, form: dict[str, str], cookie_header: str | None, remote: str) -> PageAnswer:
        expected = _cookie(cookie_header, SIGN_IN_COOKIE) or ""
        if not expected or not hmac.compare_digest(form.get("csrf", ""), expected):
            return self.sign_in_form(cookie_header, "this sign-in form is not one this server gave you "
                                                    "(or it expired): sign in again", 403)
        try:
            token = self.api.authenticate_secret(form.get("token", ""), remote)
        except ApiError as exc:
            return self.sign_in_form(cookie_header, exc.message, exc.status)
        sid = secrets.token_urlsafe(32)
        with self._lock:
            if len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions, key=lambda k: self._sessions[k].started)
                self._sessions.pop(oldest)
            self._sessions[sid] = Session(token.digest, secrets.token_urlsafe(32), self.monotonic())
        return _redirect("/", {"Set-Cookie": self._cookie(sid, SESSION_SECONDS)})

    def _act(self, path: str, form: dict[str, str], token: Token, remote: str) -> tuple[str, str]:
        """(kind, message) of one action, done through the write API's routes."""
        hold_id = quote(form.get("id", ""), safe=":")
        generation = form.get("generation", "")
        fenced = {"if-match": f'"{generation}"'} if generation else {}
        request: tuple[str, str, dict[str, str] | None, dict[str, str]]
        if path == "/actions/pause":
            body = {k: form[k] for k in ("reason", "ttl", "scope") if form.get(k, "").strip()}
            request = ("POST", "/api/v1/holds", body, {})
        elif path == "/actions/lift":
            request = ("DELETE", f"/api/v1/holds/{hold_id}", None, fenced)
        elif path == "/actions/extend":
            request = ("POST", f"/api/v1/holds/{hold_id}/extend", {"ttl": form.get("ttl", "")}, fenced)
        elif path == "/actions/skip":
            request = ("POST", f"/api/v1/windows/{quote(form.get('window', ''), safe='')}/skip", None, {})
        else:
            return "error", f"no such action: {path}"
        method, api_path, payload, headers = request
        raw = json.dumps(payload).encode() if payload is not None else b""
        answer = self.api.handle(ApiRequest(method, api_path, headers, raw, remote), token)
        if answer.status >= 400:
            return "error", str(answer.body.get("error") if isinstance(answer.body, dict) else answer.status)
        done = {"/actions/pause": "paused", "/actions/lift": "lifted", "/actions/extend": "extended",
                "/actions/skip": "skipped the next occurrence of"}[path]
        what = form.get("window") or form.get("id") or (answer.body or {}).get("id", "")
        warning = answer.body.get("warning") if isinstance(answer.body, dict) else None
        if isinstance(warning, str):  # armed under no policy: the page says so, as every door does
            return "error", f"{done} {what}; warning: {warning}"
        return "ok", f"{done} {what}"

    # -- rendering ---------------------------------------------------------------------------

    def sign_in_page(self, message: str | None = None, csrf: str = "") -> str:
        """The sign-in form, styled as the status page is."""
        alert = f'<p id="signin-error" role="alert">{_t(message)}</p>' if message else ""
        return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
                '<meta name="viewport" content="width=device-width,initial-scale=1"><title>sign in - hermes-estop</title>'
                f"<style>{self.css}</style></head><body><main><h1>hermes-estop</h1>"
                '<div class="meta">sign in to act on the holds</div>'
                f'<section class="signin"><h2>Sign in</h2>{alert}<form id="signin" method="post" action="/signin">'
                f'<input type="hidden" name="csrf" value="{_t(csrf)}">'
                '<label for="token">Token (from <code>hermes tokens create</code>)</label>'
                '<input id="token" name="token" type="password" autocomplete="off" required>'
                '<p><button id="signin-button" type="submit">Sign in</button></p></form>'
                '<p><a href="/">back to the status page</a></p></section></main></body></html>')

    def card_actions(self, current: tuple[str, Session, Token] | None) -> Callable[[Reading], str] | None:
        """What an operator's page puts on each active hold's card: Lift (behind a confirmation
        naming the scope and the generation it lifts, opened first: no script) and Extend, both
        fenced with the generation shown. None for a viewer or nobody signed in."""
        if current is None or not current[2].allows("operator"):
            return None
        csrf = f'<input type="hidden" name="csrf" value="{_t(current[1].csrf)}">'

        def forms(reading: Reading) -> str:
            hold = reading.hold
            if hold is None or not reading.active:
                return ""
            ref, generation = hold_ref(reading), hold.generation or ""
            fields = (f'{csrf}<input type="hidden" name="id" value="{_t(ref)}">'
                      f'<input type="hidden" name="generation" value="{_t(generation)}">')
            what = (f"scoped hold {_t(hold.hold_id)} at {_t(reading.location.scope)} (covers {_t(covers(hold.selector))})"
                    if hold.hold_id is not None else f"the hold at {_t(reading.location.scope)} (covers everything)")
            why = f", &ldquo;{_t(hold.reason)}&rdquo;" if hold.reason else ""
            return (f'<div class="hold-actions" data-id="{_t(ref)}" data-generation="{_t(generation)}">'
                    f'<details class="lift-confirm"><summary>Lift&hellip;</summary>'
                    f'<p class="confirm">This lifts {what}, generation <code>{_t(generation)}</code>{why}: the work '
                    "it holds starts again. If it was re-armed since this page was drawn, nothing is lifted.</p>"
                    f'<form method="post" action="/actions/lift">{fields}'
                    f'<button class="lift">Lift {_t(ref)} now</button></form></details>'
                    f'<form method="post" action="/actions/extend">{fields}'
                    '<input name="ttl" placeholder="new TTL, e.g. 2h" aria-label="new TTL" required>'
                    '<button class="extend">Extend</button></form></div>')

        return forms

    def decorate(self, page: str, current: tuple[str, Session, Token] | None,
                 windows: list[tuple[str, datetime | None]]) -> str:
        """The status page with the sign-in link, or for a signed-in user who they are, the
        outcome of their last action, and (operator and above) the pause form and a Skip for
        each window's next occurrence, dated (the holds' own actions are on their cards)."""
        notice = ('<p id="insecure" role="alert">Plain HTTP on a non-loopback address: tokens travel in clear.</p>'
                  if self.api.insecure else "")
        if current is None:
            block = f'<section id="actions">{notice}<p><a id="signin-link" href="/signin">Sign in</a> to act on the holds.</p></section>'
            return page.replace('<section id="holds">', block + '<section id="holds">', 1)
        _, session, token = current
        with self._lock:
            flashes, session.flash[:] = list(session.flash), []
        csrf = f'<input type="hidden" name="csrf" value="{_t(session.csrf)}">'
        parts = [f'<section id="actions">{notice}<div id="signed-in">Signed in as {_t(token.name)} ({_t(token.role)}) '
                 f'<form class="inline" method="post" action="/signout">{csrf}<button id="signout">Sign out</button></form></div>']
        parts.extend(f'<p class="flash {kind}" role="status">{_t(message)}</p>' for kind, message in flashes)
        if token.allows("operator"):
            parts.append(f'<form id="pause-form" method="post" action="/actions/pause">{csrf}'
                         '<input name="reason" placeholder="reason" aria-label="reason">'
                         '<input name="ttl" placeholder="TTL, e.g. 45m" aria-label="TTL">'
                         '<input name="scope" placeholder="scope: fleet or a profile" aria-label="scope">'
                         '<button id="pause">Pause</button></form>')
            for name, start in windows:
                when = f" ({_t(short_utc(start))})" if start is not None else ""
                parts.append(f'<form class="inline skip-form" method="post" action="/actions/skip">{csrf}'
                             f'<input type="hidden" name="window" value="{_t(name)}">'
                             f'<button class="skip" data-start="{_t(format_instant(start))}">Skip next {_t(name)}{when}'
                             "</button></form>")
        parts.append("</section>")
        page = page.replace("&middot; read-only", "&middot; signed in", 1)
        return page.replace('<section id="holds">', "".join(parts) + '<section id="holds">', 1)


def _refused(text: str) -> PageAnswer:
    return PageAnswer(403, {"Content-Type": "text/plain; charset=utf-8"}, text.encode())


def _redirect(location: str, headers: dict[str, str] | None = None) -> PageAnswer:
    return PageAnswer(303, {"Location": location, "Content-Type": "text/plain; charset=utf-8", **(headers or {})},
                      b"see " + location.encode() + b"\n")


def _cookie(header: str | None, name: str) -> str | None:
    for part in (header or "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name and value:
            return value
    return None
