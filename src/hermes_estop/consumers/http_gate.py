"""503 with a Retry-After that means something, for HTTP-triggered work (issue 36 item 6).

Upstream hermes-agent answers its managed-cron webhooks with 503 and a fixed `Retry-After: 60`.
Here a held request is refused with `Retry-After` = the seconds until the earliest instant the
caller could be admitted: the end of the held interval covering now in the caller's forecast
(`Estop.forecast`: the standing holds' deadmen and the windows' occurrences, so a window's end,
or back-to-back windows' last end), `default` when no end is known (a hold without a deadman),
bounded to `[minimum, maximum]`. The allowlist and scoped holds apply: a request says who it is
for (`Work`: user id, profile, component, job).

- `refusal(estop, work)`: None to proceed, else a `HeldResponse` (any framework);
- `WsgiGate(app, ...)`: WSGI middleware; `AsgiGate(app, ...)`: ASGI middleware (http scopes; the
  lifespan and websockets pass through).

The gate itself is the one predicate (`Estop.gate`); the forecast is computed only for a
request that is refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hermes_estop.model.timeutil import format_instant
from hermes_estop.process.estop import Estop

__all__ = ["AsgiGate", "HeldResponse", "Work", "WsgiGate", "refusal"]

DEFAULT_RETRY = 60
MIN_RETRY = 1
MAX_RETRY = 6 * 3600


@dataclass(frozen=True)
class Work:
    """What a request is: for whom (`user_id`, `profile`) and what (`component`, `job`)."""

    user_id: object = None
    profile: str | None = None
    component: str | None = "gateway"
    job: Any = None


@dataclass(frozen=True)
class HeldResponse:
    """A held request's answer: 503, `retry_after` seconds, and the hold's reason."""

    retry_after: int
    reason: str | None
    until: str | None

    def body(self) -> bytes:
        return json.dumps({"error": "held: new work is paused", "reason": self.reason,
                           "retry_after": self.retry_after, "until": self.until}).encode() + b"\n"

    def headers(self) -> list[tuple[str, str]]:
        return [("Content-Type", "application/json"), ("Retry-After", str(self.retry_after)),
                ("Cache-Control", "no-store")]


def refusal(estop: Estop, work: Work, *, default: int = DEFAULT_RETRY, minimum: int = MIN_RETRY,
            maximum: int = MAX_RETRY) -> HeldResponse | None:
    """None when `work` may proceed now; else the `HeldResponse` with the seconds until it could be
    admitted (see the module docstring)."""
    verdict = estop.gate(work.user_id, work.profile, work.component, work.job)
    if verdict.proceed:
        return None
    now = verdict.snapshot.now
    horizon = now + timedelta(seconds=maximum)
    reason = next((r.hold.reason for r in verdict.holds if r.hold is not None and r.hold.reason), None)
    fallback = HeldResponse(max(minimum, min(default, maximum)), reason, None)
    try:
        forecast = estop.forecast(now, horizon, work.user_id, work.profile, component=work.component, job=work.job)
    except Exception:  # noqa: BLE001 - a forecast that cannot be made never lets held work through
        return fallback
    covering = next((held for held in forecast if held.start <= now < held.end), None)
    if covering is None:
        return fallback
    if covering.end >= horizon:  # beyond the bound: the bound, unless no end is known at all
        endless = any(r.hold is None or r.hold.expires_at is None for r in verdict.holds)
        return fallback if endless else HeldResponse(maximum, reason, None)
    seconds = math.ceil((covering.end - now).total_seconds())
    return HeldResponse(max(minimum, min(seconds, maximum)), reason, format_instant(covering.end))


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _Gate:
    """What both middlewares keep: the app, the fleet's view, how to tell what a request is."""

    def __init__(self, app: Any, estop: Estop | None = None, *,
                 identify: Callable[[Mapping[str, Any]], Work] | None = None, default: int = DEFAULT_RETRY,
                 minimum: int = MIN_RETRY, maximum: int = MAX_RETRY) -> None:
        self.app = app
        self.estop = estop or Estop()
        self.identify = identify or (lambda request: Work())
        self.bounds = {"default": default, "minimum": minimum, "maximum": maximum}

    def refused(self, request: Mapping[str, Any]) -> HeldResponse | None:
        return refusal(self.estop, self.identify(request), **self.bounds)


class WsgiGate(_Gate):
    """WSGI middleware: a held request gets 503 + Retry-After; others reach `app`.
    `identify(environ) -> Work` says what a request is (default: `Work()`, the gateway, nobody
    admitted by an allowlist)."""

    app: WsgiApp

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        refused = self.refused(environ)
        if refused is None:
            return self.app(environ, start_response)
        body = refused.body()
        start_response("503 Service Unavailable", [*refused.headers(), ("Content-Length", str(len(body)))])
        return [body]


AsgiApp = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
                   Awaitable[None]]


class AsgiGate(_Gate):
    """ASGI middleware: a held http request gets 503 + Retry-After; others (and every lifespan
    or websocket scope) reach `app`. `identify(scope) -> Work`. The check reads files (or the
    store's cache): cheap enough to run on the event loop, as `gate()` is everywhere."""

    app: AsgiApp

    async def __call__(self, scope: MutableMapping[str, Any], receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        refused = self.refused(scope)
        if refused is None:
            await self.app(scope, receive, send)
            return
        body = refused.body()
        headers = [(k.lower().encode(), v.encode()) for k, v in refused.headers()]
        await send({"type": "http.response.start", "status": 503,
                    "headers": [*headers, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
