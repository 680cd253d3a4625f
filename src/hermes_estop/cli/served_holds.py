"""`hermes run --server`: the lease's holds (`fleet.lease.LeaseHolds`) kept by a server's write
API, so the decisions of a lease (`fleet.lease.Lease`) stay the same whichever side holds the
hold, and every write is still judged by the server's fleet.

Each write is one request, fenced by the server: the arm is `POST /api/v1/holds` with
`If-None-Match: *` (only where nothing stands), a renewal `POST /api/v1/holds/{scope}/extend` and
the failure hold `POST /api/v1/holds`, both with `If-Match` on the lease's generation, the release
`DELETE /api/v1/holds/{scope}` with the same `If-Match`. What the answers mean to the lease:
412 (and 409, and a 404 where a generation was named) is someone else's write, `HoldConflict`:
the lease stands aside, never overwriting their hold; 400, 401 and 403 are final,
`HoldsRefused`; a server that cannot be reached, a 429 or a 5xx is `StoreError`, retried with
the lease's backoff. The API serves no cursor of the audit trail, so `audit_head` raises: a
lease whose deadline passed is reported and never armed again (an operator's resume in the gap
cannot be ruled out).

A deadline the lease writes is computed on this host's clock and sent as a TTL (clocks differ);
the hold it gets back carries that deadline, which is at or before the server's own in real
time (the server counts the TTL from when it answered), so the lease never believes it holds
longer than it does.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any
from urllib.parse import quote

from hermes_estop.cli.api_client import Answer, Remote, Unreached
from hermes_estop.fleet.lease import HoldsRefused
from hermes_estop.model.audit_event import AuditEntry
from hermes_estop.model.errors import EstopError, HoldConflict, StoreError
from hermes_estop.model.hold import VACANT, Cause, EngageRequest, Fence, Hold, HoldState, Reading, hold_from_json
from hermes_estop.model.homes import Location
from hermes_estop.process.describe import reading_from_json

__all__ = ["ServedHolds"]

#: answers that are final: bad input, no or bad credentials, a role (or the policy) refusing
_FINAL = frozenset({400, 401, 403})
#: answers that say someone else wrote the hold since the lease did
_CONFLICT = frozenset({409, 412})


class ServedHolds:
    """`LeaseHolds` over `remote`'s write API. `warning`: what the arm's answer warned of (the
    server's policy unreadable), for the job's output."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote
        self.warning: str | None = None

    @property
    def actor(self) -> str:
        """Who writes: the server records the token (`token:NAME from ADDRESS`) whatever this says."""
        return f"a token at {self.remote.url}"

    def engage(self, location: Location, request: EngageRequest, now: datetime) -> Hold:
        """The arm (`only_if` VACANT), a renewal (fenced, no new reason: an extend) or the
        failure hold (fenced, a new reason: a re-arm of that generation)."""
        ttl = _ttl(request.expires_at, now)
        scope = location.scope
        if request.only_if is VACANT:
            body: dict[str, Any] = {"scope": scope, "replace": True, **ttl}
            if request.reason is not None:
                body["reason"] = request.reason
            if request.allow is not None and not request.allow.empty:
                body["allow"] = request.allow.to_body()
            answer = self._send("POST", "/api/v1/holds", body, {"If-None-Match": "*"})
            armed = self._written(answer, 201, fenced=False)
            warning = armed.get("warning")
            self.warning = str(warning) if warning else None
        elif request.reason is None:
            answer = self._send("POST", f"/api/v1/holds/{_ref(scope)}/extend", ttl, _if_match(request.only_if))
            armed = self._written(answer, 200, fenced=True)
        else:
            answer = self._send("POST", "/api/v1/holds", {"scope": scope, "reason": request.reason, **ttl},
                                _if_match(request.only_if))
            armed = self._written(answer, 201, fenced=True)
        hold = hold_from_json(armed)
        if hold.generation is None:
            raise StoreError(f"server {self.remote.url} answered a write without the hold's generation")
        return Hold(hold.generation, hold.engaged_at, hold.reason, request.expires_at or hold.expires_at, hold.allow,
                    hold.armed_by, hold.window, hold.problems, hold.selector, hold.hold_id)

    def release(self, location: Location, generation: str | None, now: datetime) -> Reading | None:
        """`DELETE` the hold at `location`, fenced on `generation`; None when nothing stood."""
        headers = {"If-Match": f'"{generation}"'} if generation is not None else None
        answer = self._send("DELETE", f"/api/v1/holds/{_ref(location.scope)}", None, headers)
        if answer.status == 404 and generation is None:
            return None
        lifted = self._written(answer, 200, fenced=generation is not None).get("lifted")
        if not isinstance(lifted, dict):
            raise StoreError(f"server {self.remote.url} answered a lift without what it lifted")
        return reading_from_json(lifted)

    def standing(self, location: Location, now: datetime) -> Reading:
        """The hold the server says stands at `location`; never raises (a server that cannot
        say is an UNREADABLE reading, active: fail safe)."""
        try:
            answer = self.remote.send("GET", f"/api/v1/holds/{_ref(location.scope)}")
        except Unreached as exc:
            return Reading(location, HoldState.UNREADABLE, problem=str(exc), cause=Cause.STORE_DOWN)
        if answer.status == 404:
            return Reading(location, HoldState.ABSENT)
        if answer.status != 200 or not isinstance(answer.body, dict):
            return Reading(location, HoldState.UNREADABLE, problem=self.remote.said(answer), cause=Cause.STORE_DOWN)
        hold = hold_from_json(answer.body)
        lapsed = hold.expires_at is not None and hold.expires_at <= now
        return Reading(location, HoldState.EXPIRED if lapsed else HoldState.ACTIVE, hold, Fence(hold.generation))

    def audit_head(self) -> int:
        raise EstopError("the write API serves no cursor of the audit trail")

    def audit_after(self, position: int, limit: int) -> list[AuditEntry]:
        raise EstopError("the write API serves no cursor of the audit trail")

    def _send(self, method: str, path: str, body: object, headers: dict[str, str] | None) -> Answer:
        try:
            return self.remote.send(method, path, body, headers)
        except Unreached as exc:
            raise StoreError(str(exc)) from None

    def _written(self, answer: Answer, expected: int, *, fenced: bool) -> dict[str, Any]:
        """The body of a write the server did (`expected`), or the error its answer means to a
        lease: `HoldConflict` (someone else's write; a 404 where a generation was named is
        theirs too: the hold was lifted), `HoldsRefused` (final) or `StoreError` (retried)."""
        if answer.status == expected and isinstance(answer.body, dict):
            return answer.body
        said = self.remote.said(answer)
        if answer.status in _CONFLICT or (fenced and answer.status == 404):
            standing = answer.body.get("hold") if isinstance(answer.body, dict) else None
            raise HoldConflict(said, standing)
        if answer.status in _FINAL:
            raise HoldsRefused(said)
        raise StoreError(said)


def _ref(scope: str) -> str:
    return quote(scope, safe="")


def _ttl(deadline: datetime | None, now: datetime) -> dict[str, str]:
    """The deadline as the TTL the API takes (whole seconds, rounded up; none: no deadman)."""
    if deadline is None:
        return {}
    return {"ttl": f"{max(1, math.ceil((deadline - now).total_seconds()))}s"}


def _if_match(generations: frozenset[str] | object) -> dict[str, str]:
    """`If-Match` on the generations a fenced write names (their quoted ETags)."""
    if not isinstance(generations, frozenset) or not generations:
        raise EstopError("a fenced write over the API needs the generation it is fenced on")
    return {"If-Match": ", ".join(f'"{g}"' for g in sorted(generations))}
