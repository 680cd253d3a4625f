"""`/api/v1/`: the write API's routes, independent of the HTTP server that carries them.

`WriteApi.handle(ApiRequest) -> ApiResponse`. Every write is made through a `Fleet` over the
serving process's store whose actor is `token:NAME from ADDRESS` (the audit trail's actor, so
the notifier announces it like any write) and whose holds are armed by `token:NAME` (who may
lift them as an operator): the one write path of the CLI, the daemon and the Python API.

Errors are one JSON object, `{"error": message, "status": code}` (plus `field` for a malformed
one, `hold` for a fence that refused): 400 malformed, 401 no or bad credentials, 403 role too
low, 404 nothing there, 409 a conflicting write, 412 `If-Match` names a generation that no
longer stands (or `If-None-Match: *` finds a hold standing), 413 a body over 64 KiB, 429 rate-limited, 503 the store does not answer.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import date, datetime
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote

from hermes_estop.api.limits import RateLimiter
from hermes_estop.api.openapi import openapi_document
from hermes_estop.api.tokens import Token, TokenTable
from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.durations import parse_with_unit
from hermes_estop.model.errors import EstopError, HoldConflict, InvalidArgument, StoreError
from hermes_estop.model.hold import VACANT, Allow, EngageRequest, HoldState, Reading
from hermes_estop.model.homes import Location
from hermes_estop.model.policy import Actor, PolicyRefused
from hermes_estop.model.timeutil import format_instant, parse_instant
from hermes_estop.model.wire import MAX_BODY, ApiRequest, ApiResponse, error_response
from hermes_estop.process.describe import event_json, hold_json, reading_json
from hermes_estop.process.estop import Estop
from hermes_estop.process.fleet_config import check_components, check_profile
from hermes_estop.windows.ledger import skipped_keys
from hermes_estop.windows.occurrences import by_start
from hermes_estop.windows.skips import pick, skip_occurrence, unskip_occurrence
from hermes_estop.windows.windows_file import WindowsFile

__all__ = ["MAX_BODY", "ApiError", "ApiRequest", "ApiResponse", "WriteApi", "error_response", "hold_ref"]

logger = logging.getLogger("hermes_estop.api")
_T = TypeVar("_T")

PREFIX = "/api/v1/"
_HOLD_PATH = re.compile(r"/api/v1/holds/([^/]+)")
_EXTEND_PATH = re.compile(r"/api/v1/holds/([^/]+)/extend")
_SKIP_PATH = re.compile(r"/api/v1/windows/([^/]+)/skip")
_PAUSE_FIELDS = frozenset({"reason", "ttl", "until", "scope", "allow", "only", "jobs", "replace", "override"})
_EXTEND_FIELDS = frozenset({"ttl", "until", "override"})
_LIFT_FIELDS = frozenset({"override"})
_SKIP_FIELDS = frozenset({"on", "occurrence"})


class ApiError(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


def hold_ref(reading: Reading) -> str:
    """A hold's id in the API: its scope for the full hold, `scope:id` for a scoped one."""
    hold = reading.hold
    scope = reading.location.scope
    return scope if hold is None or hold.hold_id is None else f"{scope}:{hold.hold_id}"


class _FailedSignIns:
    """Failed authentications: counted (the metric), logged at most once a minute per address
    with the number since the last line, never with what was sent."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = 0
        self.clock = clock
        self._last: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def record(self, remote: str, why: str) -> None:
        with self._lock:
            self.total += 1
            now = self.clock()
            logged, since = self._last.get(remote, (float("-inf"), 0))
            if now - logged < 60:
                self._last[remote] = (logged, since + 1)
                return
            self._last[remote] = (now, 0)
        more = f" ({since} more since the last line)" if since else ""
        logger.warning("api: failed authentication from %s: %s%s", remote, why, more)


class WriteApi:
    """The routes of one serving process. `write` False serves only the reads (and answers 403
    to every write); tokens are read from the fleet on every request (a revoke is immediate)."""

    def __init__(self, estop: Estop, status_document: Callable[[], dict[str, Any]], *, write: bool,
                 insecure: bool = False, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.estop = estop
        self.tokens = TokenTable(estop.fleet)
        self.write = write
        self.insecure = insecure
        self.status_document = status_document
        self.failures = _FailedSignIns(monotonic)
        self.sign_in_limit = RateLimiter(per_second=0.2, burst=10, clock=monotonic)
        self.write_limit = RateLimiter(per_second=1.0, burst=30, clock=monotonic)

    # -- the entry point ---------------------------------------------------------------------

    def handle(self, request: ApiRequest, token: Token | None = None) -> ApiResponse:
        """The answer to `request`; `token`: the caller is already authenticated (a signed-in
        page's session), else the request's bearer token is."""
        try:
            response = self._route(request, token)
        except ApiError as exc:
            response = error_response(exc.status, exc.message, **exc.extra)
        except HoldConflict as exc:
            response = error_response(409, str(exc))
        except PolicyRefused as exc:  # the fleet's arming policy (issue 37): the rule and the value
            response = error_response(403, str(exc))
        except (StoreError, OSError) as exc:
            response = error_response(503, f"the store does not answer: {exc}")
        except EstopError as exc:
            response = error_response(400, str(exc))
        if self.insecure:
            response.headers["X-Hermes-Insecure"] = "plain HTTP on a non-loopback address: tokens travel in clear"
        return response

    def _route(self, request: ApiRequest, signed_in: Token | None) -> ApiResponse:
        method, path = request.method, request.path.rstrip("/") or "/"
        if path == "/api/v1/openapi.json" and method == "GET":
            return ApiResponse(200, openapi_document())
        routes: list[tuple[str, re.Pattern[str] | str, str, Callable[..., ApiResponse]]] = [
            ("GET", "/api/v1/status", "viewer", self._status),
            ("GET", "/api/v1/check", "viewer", self._check),
            ("GET", "/api/v1/history", "viewer", self._history),
            ("GET", "/api/v1/windows", "viewer", self._windows),
            ("GET", "/api/v1/windows/next", "viewer", self._windows_next),
            ("GET", _HOLD_PATH, "viewer", self._hold),
            ("POST", "/api/v1/holds", "operator", self._pause),
            ("POST", _EXTEND_PATH, "operator", self._extend),
            ("DELETE", _HOLD_PATH, "operator", self._lift),
            ("POST", _SKIP_PATH, "operator", self._skip),
            ("DELETE", _SKIP_PATH, "operator", self._unskip),
        ]
        allowed = []
        for verb, pattern, role, action in routes:
            match = re.fullmatch(pattern, path) if isinstance(pattern, re.Pattern) else (path == pattern or None)
            if match is None:
                continue
            allowed.append(verb)
            if verb != method:
                continue
            token = signed_in or self.authenticate(request.headers.get("authorization", ""), request.remote)
            if not token.allows(role):
                raise ApiError(403, f"token {token.name!r} has role {token.role}; this needs {role} or above")
            if role != "viewer":
                if not self.write:
                    raise ApiError(403, "the write API is off on this server (hermes serve --http-write)")
                if not self.write_limit.allow(token.name):
                    raise ApiError(429, f"too many writes by token {token.name!r}; try again in a minute")
            args = match.groups() if isinstance(match, re.Match) else ()
            return action(request, token, *(_unquote(a) for a in args))
        if allowed:
            return ApiResponse(405, {"error": f"{method} is not served on {path}", "status": 405},
                               {"Allow": ", ".join(sorted(set(allowed)))})
        raise ApiError(404, f"no such endpoint: {path} (see /api/v1/openapi.json)")

    def authenticate(self, header: str, remote: str) -> Token:
        """The token of an `Authorization: Bearer <secret>` header; `ApiError` 401 (counted,
        logged without the secret) or 429 (too many failures from `remote`)."""
        scheme, _, secret = header.partition(" ")
        return self.authenticate_secret(secret if scheme.lower() == "bearer" else "", remote)

    def authenticate_secret(self, secret: str, remote: str) -> Token:
        """The valid token `secret` is; a valid token always gets through, whatever failed from
        its address before (only failures are limited: 429 once an address spent its budget)."""
        token = self.tokens.authenticate(secret.strip(), self.estop.clock()) if secret.strip() else None
        if token is not None:
            return token
        if self.sign_in_limit.exhausted(remote):
            self.failures.record(remote, "rate-limited")
            raise ApiError(429, "too many failed authentications from this address; try again in a minute")
        if not secret.strip():
            self._failed(remote, "no bearer token")
            raise ApiError(401, "no credentials: send Authorization: Bearer <token>")
        self._failed(remote, "unknown, revoked or expired token")
        raise ApiError(401, "bad credentials: unknown, revoked or expired token")

    def _failed(self, remote: str, why: str) -> None:
        self.failures.record(remote, why)
        self.sign_in_limit.allow(remote)

    # -- the routes --------------------------------------------------------------------------

    def _fleet_for(self, token: Token, request: ApiRequest) -> Fleet:
        """The fleet over this process's store, writing as `token:NAME from ADDRESS` with the
        token's role: the arming policy judges the caller, never the account `serve` runs as."""
        return self.estop.fleet.acting_as(Actor.remote(token.name, token.role, request.remote))

    def _status(self, request: ApiRequest, token: Token) -> ApiResponse:
        return ApiResponse(200, self.status_document())

    def _check(self, request: ApiRequest, token: Token) -> ApiResponse:
        """GET /api/v1/check?user=&profile=&component=&job=: the consumers' verdict on that work,
        as `hermes check --json` prints it, plus `line` (what `hermes check` prints) and
        `held_by` (the scopes `hermes gate` names): `hermes check` and `gate` over --server."""
        query = _query(request, {"user", "profile", "component", "job"})
        user, profile, component, job = (query.get(k) for k in ("user", "profile", "component", "job"))
        verdict = self.estop.asked(user, profile, component, job)
        return ApiResponse(200, {**verdict.to_json(component is not None or job is not None), "line": verdict.line,
                                 "held_by": verdict.held_by})

    def _history(self, request: ApiRequest, token: Token) -> ApiResponse:
        """GET /api/v1/history?limit=N&since=TIME: the audit trail's newest `limit` events (at
        most 10,000; default 50) at or after `since`, as `hermes history --json` lists them, and
        how many corrupt entries were skipped: `hermes history` over --server."""
        query = _query(request, {"limit", "since"})
        limit_text = query.get("limit", "50")
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= 10_000:
            raise ApiError(400, f"invalid limit {limit_text!r}: expected 1 to 10000", field="limit")
        try:
            since = parse_instant(query["since"], what="since") if "since" in query else None
        except EstopError as exc:
            raise ApiError(400, str(exc), field="since") from None
        events, corrupt = self.estop.fleet.history(int(limit_text), since)
        return ApiResponse(200, {"events": [event_json(event) for event in events], "corrupt": corrupt})

    def _windows(self, request: ApiRequest, token: Token) -> ApiResponse:
        """GET /api/v1/windows: every window of the fleet's windows.toml, as `hermes windows list
        --json` prints it (`hermes windows list` over --server)."""
        windows_file = WindowsFile(self.estop.fleet.root)
        return ApiResponse(200, {"path": str(windows_file.path), "windows": [w.to_json() for w in windows_file.load()]})

    def _windows_next(self, request: ApiRequest, token: Token) -> ApiResponse:
        """GET /api/v1/windows/next?name=&count=: the next occurrences, soonest first, as
        `hermes windows next --json` lists them, each with its window's `timezone` (`hermes
        windows next` over --server prints them as the local command does)."""
        query = _query(request, {"name", "count"})
        count, name = query.get("count"), query.get("name")
        if count is not None and (not count.isdigit() or not 1 <= int(count) <= 1000):
            raise ApiError(400, f"invalid count {count!r}: expected 1 to 1000", field="count")
        fleet = self.estop.fleet
        windows = WindowsFile(fleet.root).load()
        if name is not None:
            windows = [w for w in windows if w.name == name]
            if not windows:
                raise ApiError(404, f"no window named {name!r}")
        now = fleet.clock()
        found = by_start(windows, now, int(count) if count is not None else (5 if name is not None else 1))
        skipped = skipped_keys(fleet) if found else frozenset()
        return ApiResponse(200, {"now": format_instant(now), "occurrences": [
            o.to_json(now, w.zone_of(o)) | {"enabled": w.enabled, "skipped": o.key in skipped,
                                           "timezone": str(w.zone_of(o))} for w, o in found]})

    def _hold(self, request: ApiRequest, token: Token, ref: str) -> ApiResponse:
        """GET one hold: as it stands, with its generation as the `ETag` (404 when none stands)."""
        location, reading, now = self._found(self.estop.fleet, ref)
        assert reading.hold is not None
        return ApiResponse(200, {"id": hold_ref(reading), "scope": location.scope, **hold_json(reading.hold, now)},
                           etag(reading.hold.generation))

    def _pause(self, request: ApiRequest, token: Token) -> ApiResponse:
        body = _json_object(request.body, _PAUSE_FIELDS)
        if body.get("ttl") is not None and body.get("until") is not None:
            raise ApiError(400, "give ttl or until, not both", field="ttl")
        scope = _text(body, "scope") or "fleet"
        fleet = self._fleet_for(token, request)
        location = _located(fleet, scope)
        allow = _allow(body.get("allow"))
        only, jobs = _texts(body, "only"), _texts(body, "jobs")
        try:
            check_components(self.estop, only, "only")
        except EstopError as exc:
            raise ApiError(400, str(exc), field="only") from None
        override = _text(body, "override")
        replace = body.get("replace", False)
        if not isinstance(replace, bool):
            raise ApiError(400, "invalid replace: expected true or false", field="replace")
        reason = body.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise ApiError(400, "invalid reason: expected a string", field="reason")
        ttl, until = _text(body, "ttl"), _text(body, "until")
        vacant_only, wanted = _if_none_match(request), _if_match(request)
        if vacant_only and wanted is not None:
            raise ApiError(400, "give If-Match or If-None-Match, not both", field="If-None-Match")
        self._deadline(ttl, until, self.estop.clock())
        try:
            engage, now = self.estop.engage_request(reason, allow, ttl, until, replace,
                                                    armed_by=f"token:{token.name}", only=only, jobs=jobs)
        except EstopError as exc:
            raise ApiError(400, str(exc), field="only" if only else "jobs" if jobs else "reason") from None
        if vacant_only:  # arm only where nothing stands (`hermes run`'s lease): what stands is left as it is
            engage = _fenced_on(engage, VACANT)
        elif wanted is not None:  # re-arm only the generation the caller saw (a lease's failure hold)
            try:
                _, reading, _ = self._found(fleet, location.scope)
            except ApiError:
                raise _lifted_since(location.scope) from None
            if not _matches(wanted, reading.hold.generation if reading.hold else None):
                raise self._stale(location.scope, reading, now)
            engage = _fenced_on(engage, frozenset({reading.hold.generation} if reading.hold else set()))
        try:
            hold = self._fenced(fleet, location.scope, wanted, lambda: fleet.engage(location, engage, now, override=override))
        except HoldConflict:
            if not vacant_only:
                raise
            raise self._standing(fleet, location.scope) from None
        reading = Reading(location, HoldState.ACTIVE, hold)
        armed = {"id": hold_ref(reading), "scope": location.scope, **hold_json(hold, now)}
        if fleet.policy.problem is not None:
            armed["warning"] = (f"the fleet's policy cannot be read ({fleet.policy.problem}): armed under no policy; "
                                "no hold is lifted or shortened until it is fixed")
        return ApiResponse(201, armed, etag(hold.generation))

    def _found(self, fleet: Fleet, ref: str) -> tuple[Location, Reading, datetime]:
        """The hold `ref` names (404 when none stands) and the `now` it was read at."""
        scope, _, hold_id = ref.partition(":")
        location = _located(fleet, scope)
        now = fleet.clock()
        (full,) = fleet.read((location,), now).readings
        readings = full.scoped if hold_id else (full,)
        for reading in readings:
            if reading.hold is not None and (not hold_id or reading.hold.hold_id == hold_id) \
                    and reading.state is not HoldState.ABSENT:
                return location, reading, now
        raise ApiError(404, f"no hold {ref!r} stands")

    def _known_scope(self, fleet: Fleet, scope: str) -> None:
        """400 for a lift at a profile this fleet does not have (a typo), with a did-you-mean, as
        `hermes resume --profile NAME` refuses it here (never "no hold" and exit 0)."""
        if _located(fleet, scope).scope == fleet.fleet_location.scope:
            return
        try:
            check_profile(self.estop, scope)
        except InvalidArgument as exc:
            raise ApiError(400, str(exc), field="scope") from None

    def _lift(self, request: ApiRequest, token: Token, ref: str) -> ApiResponse:
        override = _text(_json_object(request.body, _LIFT_FIELDS), "override")
        fleet = self._fleet_for(token, request)
        wanted = _if_match(request)
        self._known_scope(fleet, ref.partition(":")[0])
        try:
            location, reading, now = self._found(fleet, ref)
        except ApiError:
            if wanted is not None:
                raise _lifted_since(ref) from None
            raise
        assert reading.hold is not None
        if wanted is not None and not _matches(wanted, reading.hold.generation):
            raise self._stale(ref, reading, now)
        generation = reading.hold.generation
        removed = self._fenced(fleet, ref, wanted, lambda: fleet.release(location, generation, now, override=override))
        if removed is None:
            raise ApiError(404, f"no hold {ref!r} stands")
        return ApiResponse(200, {"lifted": reading_json(removed, now, fleet.where(location)), "id": ref})

    def _deadline(self, ttl: str | None, until: str | None, now: datetime) -> datetime | None:
        """The deadline `ttl` / `until` ask for; 400 naming the field that does not parse. A TTL
        needs a unit, as on the command line (`30` is refused: `30m? 30s?`)."""
        try:
            if ttl is not None:
                parse_with_unit(ttl)
            return self.estop.deadline(ttl, until, now)
        except EstopError as exc:
            raise ApiError(400, str(exc), field="ttl" if ttl is not None else "until") from None

    def _fenced(self, fleet: Fleet, ref: str, wanted: frozenset[str] | None, write: Callable[[], _T]) -> _T:
        """`write()`; a fence it fails is 412 with the hold as it stands when the caller named a
        generation (`If-Match`), else the conflict as it is (409)."""
        try:
            return write()
        except HoldConflict:
            if wanted is None:
                raise
            raise self._stale_after(fleet, ref) from None

    def _standing(self, fleet: Fleet, ref: str) -> ApiError:
        """412 for `If-None-Match: *` where a hold stands: the hold, and its generation as `ETag`."""
        try:
            _, reading, now = self._found(fleet, ref)
        except ApiError:
            return ApiError(412, f"a hold stood at {ref!r} when this one was asked (If-None-Match: *); nothing was armed")
        generation = reading.hold.generation if reading.hold else None
        return ApiError(412, f"a hold stands at {ref!r} (generation {generation or '?'}); nothing was armed "
                             "(If-None-Match: *)", hold={"id": hold_ref(reading), **hold_json(reading.hold, now)})

    def _stale(self, ref: str, reading: Reading, now: datetime) -> ApiError:
        return ApiError(412, f"hold {ref!r} was re-armed since you looked (it is generation "
                             f"{reading.hold.generation if reading.hold else '?'} now); nothing was lifted",
                        hold={"id": hold_ref(reading), **hold_json(reading.hold, now)})

    def _stale_after(self, fleet: Fleet, ref: str) -> ApiError:
        try:
            _, reading, now = self._found(fleet, ref)
        except ApiError:
            return _lifted_since(ref)
        return self._stale(ref, reading, now)

    def _extend(self, request: ApiRequest, token: Token, ref: str) -> ApiResponse:
        body = _json_object(request.body, _EXTEND_FIELDS)
        ttl, until = _text(body, "ttl"), _text(body, "until")
        if (ttl is None) == (until is None):
            raise ApiError(400, "give ttl or until (one of them)", field="ttl")
        override = _text(body, "override")
        fleet = self._fleet_for(token, request)
        wanted = _if_match(request)
        self._known_scope(fleet, ref.partition(":")[0])
        try:
            location, reading, now = self._found(fleet, ref)
        except ApiError:
            if wanted is not None:  # RFC 9110 13.1.1: If-Match on nothing fails, as a lift's does
                raise _lifted_since(ref) from None
            raise
        hold = reading.hold
        assert hold is not None
        if wanted is not None and not _matches(wanted, hold.generation):
            raise self._stale(ref, reading, now)
        deadline = self._deadline(ttl, until, now)
        engage = EngageRequest(expires_at=deadline, armed_by=hold.armed_by, only_if=frozenset({hold.generation}),
                               selector=hold.selector, hold_id=hold.hold_id)
        extended = self._fenced(fleet, ref, wanted, lambda: fleet.engage(location, engage, now, override=override))
        fresh = Reading(location, HoldState.ACTIVE, extended)
        return ApiResponse(200, {"id": hold_ref(fresh), "scope": location.scope, **hold_json(extended, now)},
                           etag(extended.generation))

    def _skip(self, request: ApiRequest, token: Token, name: str) -> ApiResponse:
        return self._skip_or_unskip(request, token, name, skip=True)

    def _unskip(self, request: ApiRequest, token: Token, name: str) -> ApiResponse:
        return self._skip_or_unskip(request, token, name, skip=False)

    def _skip_or_unskip(self, request: ApiRequest, token: Token, name: str, *, skip: bool) -> ApiResponse:
        body = _json_object(request.body, _SKIP_FIELDS)
        on, start = _text(body, "on"), _text(body, "occurrence")
        if on is not None and start is not None:
            raise ApiError(400, "give on or occurrence, not both", field="on")
        try:
            day = date.fromisoformat(on) if on is not None else None
        except ValueError:
            raise ApiError(400, f"invalid on {on!r}: expected a date, YYYY-MM-DD", field="on") from None
        try:
            instant = parse_instant(start, what="occurrence") if start is not None else None
        except EstopError as exc:
            raise ApiError(400, str(exc), field="occurrence") from None
        fleet = self._fleet_for(token, request)
        window = next((w for w in WindowsFile(fleet.root).load() if w.name == name), None)
        if window is None:
            raise ApiError(404, f"no window named {name!r}")
        now = fleet.clock()
        target = pick(window, now, on=day, start=instant)
        if skip:
            skip_occurrence(fleet, window, target, now)
        else:
            try:
                unskip_occurrence(fleet, window, target, now)
            except InvalidArgument as exc:
                raise ApiError(409, str(exc)) from None
        key = "skipped" if skip else "unskipped"
        zone = window.zone_of(target)
        return ApiResponse(200, {key: target.to_json(now, zone), "window": name, "timezone": str(zone)})


# -- parsing the request -------------------------------------------------------------------


def _unquote(value: str) -> str:
    return unquote(value)


def _json_object(raw: bytes, fields: frozenset[str]) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "malformed body: not JSON", field="body") from None
    except RecursionError:  # a deeply nested array or object: the decoder's stack, not the server's
        raise ApiError(400, "malformed body: nested too deeply", field="body") from None
    if not isinstance(data, dict):
        raise ApiError(400, "malformed body: expected a JSON object", field="body")
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ApiError(400, f"unknown field {unknown[0]!r} (expected {', '.join(sorted(fields))})", field=unknown[0])
    return data


def _query(request: ApiRequest, names: set[str]) -> dict[str, str]:
    """The query's parameters (the last of a repeated one); 400 naming one it does not take."""
    query = {key: values[-1] for key, values in parse_qs(request.query, keep_blank_values=True).items()}
    unknown = sorted(set(query) - names)
    if unknown:
        raise ApiError(400, f"unknown parameter {unknown[0]!r} (expected {', '.join(sorted(names))})", field=unknown[0])
    return query


def _text(body: Mapping[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ApiError(400, f"invalid {name}: expected a non-empty string", field=name)
    return value


def _texts(body: Mapping[str, Any], name: str) -> list[str] | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ApiError(400, f"invalid {name}: expected a list of strings", field=name)
    return value


def _allow(value: Any) -> Allow | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"user_ids", "profiles"}:
        raise ApiError(400, 'invalid allow: expected {"user_ids": [...], "profiles": [...]}', field="allow")
    users, profiles = value.get("user_ids", []), value.get("profiles", [])
    for name, items in (("allow.user_ids", users), ("allow.profiles", profiles)):
        if not isinstance(items, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in items):
            raise ApiError(400, f"invalid {name}: expected a list of ids", field=name)
    if profiles and not users:
        raise ApiError(400, "allow.profiles without allow.user_ids: a profile never grants on its own",
                       field="allow.profiles")
    return Allow.of(users, profiles)


def _located(fleet: Fleet, scope: str) -> Location:
    try:
        return fleet.location(scope)
    except EstopError as exc:
        raise ApiError(400, str(exc), field="scope") from None


#: `If-Match: *`: whatever stands (RFC 9110 13.1.1: false only when nothing does)
ANY = frozenset({"*"})
_ENTITY_TAG = re.compile(r'\s*(\*|(W/)?"([^"]*)")\s*(,|$)')


def _if_match(request: ApiRequest) -> frozenset[str] | None:
    """The generations `If-Match` accepts (RFC 9110 13.1.1): None without the header, `ANY` for
    `*`, else the strong entity-tags of its list (`"G"`, as the `ETag` header of a hold gives
    it); a weak tag (`W/"G"`) never matches. 400 for a value that is not a list of quoted tags."""
    value = request.headers.get("if-match")
    if value is None:
        return None
    tags: set[str] = set()
    position, text = 0, value.strip()
    while position < len(text):
        found = _ENTITY_TAG.match(text, position)
        if found is None or found.end() == position:
            raise ApiError(400, f'invalid If-Match {value!r}: expected the quoted ETag of the hold, "<generation>" '
                                "(or *)", field="If-Match")
        if found.group(1) == "*":
            return ANY
        if found.group(2) is None:
            tags.add(found.group(3))
        position = found.end()
    return frozenset(tags)


def _fenced_on(engage: EngageRequest, only_if: Any) -> EngageRequest:
    """`engage`, written only where `only_if` stands (`VACANT`, or a set of generations)."""
    return EngageRequest(engage.reason, engage.allow, engage.expires_at, engage.replace, engage.armed_by,
                         engage.window, only_if, engage.selector, engage.hold_id)


def _if_none_match(request: ApiRequest) -> bool:
    """Whether `If-None-Match: *` asks to arm only where nothing stands (RFC 9110 13.1.2); 400
    for any other value (a POST has no entity-tag of its own to compare)."""
    value = request.headers.get("if-none-match")
    if value is None:
        return False
    if value.strip() != "*":
        raise ApiError(400, f"invalid If-None-Match {value!r}: expected * (arm only where nothing stands)",
                       field="If-None-Match")
    return True


def _lifted_since(ref: str) -> ApiError:
    """412 for `If-Match` where nothing stands now (RFC 9110 13.1.1: it matches no hold)."""
    return ApiError(412, f"hold {ref!r} was lifted since you looked: nothing stands there now")


def _matches(wanted: frozenset[str], generation: str | None) -> bool:
    """Whether `If-Match` accepts the hold of `generation` (strong comparison)."""
    return wanted is ANY or (generation is not None and generation in wanted)


def etag(generation: str | None) -> dict[str, str]:
    """The `ETag` header of a hold: its generation, quoted (what `If-Match` takes back)."""
    return {"ETag": f'"{generation}"'} if generation else {}
