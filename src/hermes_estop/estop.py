"""`Estop`: the hold operations of one process (its homes, its store, its clock) as one object.

The module-level functions in `hermes_estop` resolve an `Estop` from the environment at call time;
programs that do not want environment lookups build one explicitly:
`Estop(home=..., root=..., clock=...)`.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping

from .audit import AuditEvent, default_actor
from .durations import MAX_DURATION, parse_duration
from .errors import EstopError, InvalidArgument, InvalidInstant
from .gate import Snapshot, Verdict, admits, decide, engaged, pause_notice
from .hold import Allow, EngageRequest, Fence, Hold, HoldState, Reading, clean_reason
from .homes import Layout, Location, resolve_layout
from .stores import HoldStore, open_store
from .timeutil import Clock, aware_clock, format_instant, parse_instant

__all__ = ["Estop"]

logger = logging.getLogger("hermes_estop")

_log_lock = threading.Lock()
# (location key, fence) of every expiry this process has logged: one WARNING per generation.
_expiry_logged: set[tuple[str, Fence]] = set()
# component -> identity of the engagement last logged by check_paused.
_paused_logged: dict[str, frozenset] = {}


class Estop:
    """The hold as seen by one process."""

    def __init__(
        self,
        home: str | Path | None = None,
        root: str | Path | None = None,
        *,
        clock: Clock | None = None,
        store: HoldStore | str | None = None,
        actor: str | None = None,
        layout: Layout | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if layout is None:
            if home is None and root is None:
                layout = resolve_layout(env)
            else:
                overrides = {}
                if home is not None:
                    overrides["HERMES_HOME"] = str(home)
                if root is not None:
                    overrides["HERMES_ROOT"] = str(root)
                layout = resolve_layout(overrides)
        self.layout = layout
        self.locations: tuple[Location, ...] = layout.candidates
        if store is None or isinstance(store, str):
            from .config import store_spec

            store = open_store(store if store is not None else store_spec(layout, env), layout.root)
        self.store: HoldStore = store
        self.clock: Clock = aware_clock(clock) if clock is not None else store.default_clock()
        self._actor = actor

    @property
    def actor(self) -> str:
        """Who this process writes as (audit `actor`, body `armed_by`): `user@host` by default."""
        if self._actor is None:
            self._actor = default_actor()
        return self._actor

    def __repr__(self) -> str:
        return f"Estop(home={str(self.layout.home)!r}, root={str(self.layout.root)!r}, store={self.store.name!r})"

    def for_fleet(self) -> "Estop":
        """The same fleet as seen by a process whose home is the fleet root (same store and clock)."""
        if self.layout.home == self.layout.root:
            return self
        return Estop(layout=Layout(home=self.layout.root, root=self.layout.root), store=self.store,
                     clock=self.clock, actor=self.actor)

    def for_profile(self, name: str) -> "Estop":
        """The same fleet as seen by a process serving profile `name`: same store and clock."""
        return Estop(layout=self.layout.for_profile(name), store=self.store, clock=self.clock, actor=self.actor)

    # -- reading -----------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """ONE read of every candidate location. Expired holds are retired as a side effect
        (generation-fenced) and logged once; the snapshot already reports them lifted."""
        now = self.clock()
        readings = self.store.read(self.locations, now)
        for reading in readings:
            if reading.state is HoldState.EXPIRED:
                self._lift(reading, now)
        return Snapshot(readings, now)

    def _lift(self, reading: Reading, now: datetime) -> None:
        fence = reading.fence or Fence()
        self.store.step("expiry:decided")
        removed = self.store.expire(reading, now, self.actor)
        key = (reading.location.key, fence)
        with _log_lock:
            first = key not in _expiry_logged
            if first:
                if len(_expiry_logged) > 10_000:
                    _expiry_logged.clear()
                _expiry_logged.add(key)
        if first:
            hold = reading.hold
            logger.warning(
                "hold at %s (generation %s) EXPIRED at its deadman %s: the pause has lifted; the sentinel %s",
                reading.location.describe(),
                fence.describe(),
                format_instant(hold.expires_at) if hold else "?",
                {True: "was retired", False: "was already gone"}.get(
                    removed, "is left for the next reader or `hermes serve` to retire (it stays inert)"),
            )

    def gate(self, user_id: Any = None, profile: Any = None) -> Verdict:
        """Proceed when not engaged, or when every active hold admits (user_id, profile)."""
        return decide(self.snapshot(), user_id, profile)

    def is_engaged(self) -> bool:
        return engaged(self.snapshot())

    def is_allowed(self, user_id: Any = None, profile: Any = None) -> bool:
        """True only when at least one hold is active and every active hold admits."""
        return admits(self.snapshot(), user_id, profile)

    def holds(self) -> tuple[Reading, ...]:
        """The active holds (unreadable ones included), own home first."""
        return self.snapshot().active

    def get_state(self) -> dict[str, Any] | None:
        """hermes-agent's shape: the first active hold's `reason`, `engaged_at`, `expires_at` and
        `allow` (plus `generation` and `scope`), or None when not engaged."""
        active = self.snapshot().active
        if not active:
            return None
        reading = active[0]
        hold = reading.hold
        allow = hold.allow.to_body() if hold is not None else {}
        return {
            "scope": reading.location.scope,
            "generation": hold.generation if hold else None,
            "reason": hold.reason if hold else None,
            "engaged_at": format_instant(hold.engaged_at) if hold else None,
            "expires_at": format_instant(hold.expires_at) if hold else None,
            "allow": {key: value for key, value in allow.items() if value},
        }

    def paused_reply(self) -> str | None:
        """The notice for a refused gateway turn, or None when not paused."""
        return pause_notice(self.snapshot())

    def check_paused(self, component: str, log: logging.Logger | None = None) -> bool:
        """True when engaged; logs at INFO once per engagement per component."""
        snapshot = self.snapshot()
        active = snapshot.active
        with _log_lock:
            if not active:
                _paused_logged.pop(component, None)
                return False
            identity = snapshot.engagement
            first = _paused_logged.get(component) != identity
            _paused_logged[component] = identity
        if first:
            notice = pause_notice(snapshot)
            (log or logger).info("%s paused by the emergency stop: %s", component, notice)
        return True

    def sentinel_path(self) -> Path:
        """The sentinel `hermes pause` writes for this process (its own home)."""
        return self.layout.own.sentinel

    # -- writing -----------------------------------------------------------------------------

    def location(self, *, fleet: bool = False, scope: str | None = None) -> Location:
        if scope is not None:
            return self.layout.location(scope)
        return self.layout.fleet if fleet else self.layout.own

    def deadline(self, ttl: Any, expires_at: Any, now: datetime) -> datetime | None:
        """The deadman a request asks for, validated before anything is written."""
        if ttl is not None and expires_at is not None:
            raise InvalidArgument("give a TTL or an absolute expiry, not both")
        if ttl is not None:
            return now + parse_duration(ttl)
        if expires_at is None:
            return None
        when = parse_instant(expires_at, what="expiry time")
        if when <= now:
            raise InvalidInstant(f"invalid expiry time {format_instant(when)!r}: it is not in the future")
        if when - now > MAX_DURATION:
            raise InvalidInstant(
                f"invalid expiry time {format_instant(when)!r}: more than {MAX_DURATION.days} days ahead"
            )
        return when

    def engage(
        self,
        reason: str | None = None,
        allow: Allow | Mapping[str, Any] | None = None,
        ttl: Any = None,
        expires_at: Any = None,
        replace: bool = False,
        *,
        fleet: bool = False,
        scope: str | None = None,
        armed_by: str | None = None,
        window: Mapping[str, Any] | None = None,
        only_if: Any = None,
    ) -> Hold:
        """Arm, or re-arm non-destructively, the hold of this home (`fleet`: the fleet root;
        `scope`: a named scope). Returns the hold written. Everything is validated first: on a
        bad value nothing is written and a standing hold is untouched."""
        now = self.clock()
        request = EngageRequest(
            reason=clean_reason(reason),
            allow=Allow.coerce(allow),
            expires_at=self.deadline(ttl, expires_at, now),
            replace=bool(replace),
            armed_by=armed_by or self.actor,
            window=window,
            only_if=only_if,
        )
        return self.store.engage(self.location(fleet=fleet, scope=scope), request, now, self.actor)

    def release(self, *, fleet: bool = False, scope: str | None = None, generation: str | None = None) -> Reading | None:
        """The operator's resume of one location; with `generation`, only that generation
        (`HoldConflict` otherwise). Returns what was removed, or None."""
        return self.store.release(self.location(fleet=fleet, scope=scope), generation, self.clock(), self.actor)

    def disengage(self) -> bool:
        """Remove every visible hold (this home and the fleet root); True when any was removed."""
        now = self.clock()
        removed = False
        for location in self.locations:
            if self.store.release(location, None, now, self.actor) is not None:
                removed = True
        return removed

    def retire(self, generation: str, *, scope: str | None = None) -> bool:
        """Remove the hold carrying `generation` (at `scope`, or wherever among the candidate
        locations it stands); a successor with another generation survives."""
        if not isinstance(generation, str) or not generation:
            raise InvalidArgument(f"invalid generation {generation!r}")
        now = self.clock()
        locations = (self.layout.location(scope),) if scope is not None else self.locations
        removed = False
        for location in locations:
            if self.store.retire(location, Fence(generation), now, self.actor):
                removed = True
        return removed

    def record(self, event: str, location: Location, *, generation: str | None = None, reason: str | None = None,
               deadline: datetime | None = None, detail: str | None = None) -> None:
        """Append a non-write event (a window's skipped occurrence) to the audit trail."""
        self.store.append_audit(
            AuditEvent(self.clock(), event, location.scope, generation, self.actor, reason, deadline, detail)
        )

    def history(self, limit: int | None = None) -> list[AuditEvent]:
        return self.store.history(limit)
