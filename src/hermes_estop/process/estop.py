"""`Estop`: the hold operations of one process (its homes, its store, its clock) as one object.

The module-level functions in `hermes_estop` resolve an `Estop` from the environment at call time;
programs that do not want environment lookups build one explicitly:
`Estop(home=..., root=..., clock=...)`.

It is longer than most modules because it is the whole public surface of a hold in one place
(read, gate, engage, release, forecast, history): each method is a thin shell over the pure
decisions (`hold`, `gate`, `allow`, `forecast`) and the store, so a reader looks an operation up
here and follows one call into the part that decides.
"""

from __future__ import annotations

from _thread import allocate_lock  # threading.Lock without importing threading (hermes check)
from collections.abc import Mapping
from datetime import datetime

from hermes_estop.model.durations import MAX_DURATION, parse_ttl
from hermes_estop.model.errors import InvalidArgument, InvalidInstant
from hermes_estop.model.hold import Allow, Cause, EngageRequest, Fence, Hold, HoldState, Reading, clean_reason
from hermes_estop.model.homes import SENTINEL_NAME, Layout, Location, resolve_layout
from hermes_estop.model.timeutil import Clock, aware_clock, format_instant, parse_instant
from hermes_estop.process.check import Snapshot, Verdict, admits, decide, engaged, holding, pause_notice
from hermes_estop.stores import HoldStore, open_store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    from collections.abc import Iterable
    from pathlib import Path
    from typing import Any

    from hermes_estop.fleet.fleet import Fleet
    from hermes_estop.model.audit_event import AuditEvent
    from hermes_estop.process.forecast import Forecast, HoldSource

__all__ = ["Estop"]

_ABSENT = HoldState.ABSENT
_EXPIRED = HoldState.EXPIRED

#: the logger this module logs to ("hermes_estop"); imported on first use, so a check that
#: logs nothing never imports `logging`
LOGGER_NAME = "hermes_estop"


def _logger() -> logging.Logger:
    import logging

    return logging.getLogger(LOGGER_NAME)

#: the prefix hermes-agent's `paused_reply` starts with, which gateway users already know
PAUSED_PREFIX = "\u23f8\ufe0f "
# bound on the expiries one Estop remembers having logged (oldest forgotten first)
_MAX_LOGGED = 1024


def _blank(value: Any) -> bool:
    """An empty or blank string: hermes-agent's "not given" for `ttl` and `expires_at`."""
    return isinstance(value, str) and not value.strip()


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
        if store is None:  # the configured store; never raises: an unreadable config holds
            from hermes_estop.process.fleet_config import configured_store

            store = configured_store(layout, env)
        elif isinstance(store, str):
            store = open_store(store, layout.root)
        self.store: HoldStore = store
        self.clock: Clock = aware_clock(clock) if clock is not None else store.default_clock()
        self._actor = actor
        self._fleet: Fleet | None = None
        # Candidates a store can read; a refused profile home (`Location.problem`) is never
        # handed to a store, it reads as unreadable right here (`_refused`).
        self._readable: tuple[Location, ...] = tuple(loc for loc in self.locations if loc.problem is None)
        self._refused = len(self._readable) != len(self.locations)
        # "Logged once" memory of THIS instance (not process-wide): (location key, fence) of the
        # expiries it logged, and per component the engagement check_paused last logged.
        self._log_lock = allocate_lock()
        self._expiry_logged: dict[tuple[str, Fence], None] = {}
        self._paused_logged: dict[str, frozenset[Any]] = {}

    @property
    def fleet(self) -> Fleet:
        """The whole fleet this process belongs to (same store, clock and actor): what every
        fleet-wide feature goes through. Its writes are this view's writes."""
        fleet = self._fleet
        if fleet is None:
            from hermes_estop.fleet.fleet import Fleet

            fleet = self._fleet = Fleet(self.store, self.layout.root, clock=self.clock, actor=self._actor)
        return fleet

    def close(self) -> None:
        """Close the store (its connections and threads). For an Estop that owns its store;
        one built by `for_profile` / `for_fleet` shares its parent's, so close the parent."""
        self.store.close()

    @property
    def actor(self) -> str:
        """Who this process writes as (audit `actor`, body `armed_by`): `user@host` by default,
        resolved once, by its fleet (which every write goes through)."""
        return self._actor if self._actor is not None else self.fleet.actor

    def __repr__(self) -> str:
        return f"Estop(home={str(self.layout.home)!r}, root={str(self.layout.root)!r}, store={self.store.name!r})"

    def for_fleet(self) -> Estop:
        """The same fleet as seen by a process whose home is the fleet root (same store and clock)."""
        if self.layout.home == self.layout.root:
            return self
        return self._view(Layout(home=self.layout.root, root=self.layout.root))

    def for_profile(self, name: str) -> Estop:
        """The same fleet as seen by a process serving profile `name` (its home and the fleet
        root: what `check --profile NAME` asks); same store and clock. `InvalidArgument` for a
        name the profile rules refuse."""
        return self._view(self.layout.for_profile(name))

    def acting_as(self, actor: str) -> Estop:
        """This view writing as `actor` (the audit `actor` and a hold's `armed_by`): the gateway
        writes as the principal that asked. Same layout, store and clock."""
        return self._view(self.layout, actor)

    def _view(self, layout: Layout, actor: str | None = None) -> Estop:
        """Another view of the same fleet. It shares this instance's expiry log memory, so a
        consumer that builds a view per pass still logs each expiry once."""
        view = Estop(layout=layout, store=self.store, clock=self.clock, actor=self._actor if actor is None else actor)
        view._log_lock = self._log_lock
        view._expiry_logged = self._expiry_logged
        return view

    # -- reading -----------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """ONE read of every candidate location. An expired hold reads lifted and is logged
        once; it is never removed here (docs/design.md, "Which clock decides an expiry": this
        process's clock decides for this process only; the daemon's deadman and the operator's
        commands retire it, by a clock the store trusts)."""
        return self._take()[0]

    def _take(self) -> tuple[Snapshot, bool]:
        """The snapshot, and whether any location had a sentinel at all (False: nothing to
        decide, the gate proceeds; the common case, kept to one pass over the readings)."""
        now = self.clock()
        readings = self._read_with_refused(now) if self._refused else self.store.read(self.locations, now)
        present = False
        for reading in readings:
            state = reading.state
            if state is not _ABSENT:
                present = True
                if state is _EXPIRED:
                    self._lift(reading)
            if reading.scoped:
                present = True
                for scoped in getattr(reading.scoped, "expired", reading.scoped):  # `ScopedReadings`: precomputed
                    if scoped.state is _EXPIRED:
                        self._lift(scoped)
        return Snapshot(readings, now), present

    def _read_with_refused(self, now: datetime) -> tuple[Reading, ...]:
        found = iter(self.store.read(self._readable, now)) if self._readable else iter(())
        return tuple(
            next(found) if loc.problem is None
            else Reading(loc, HoldState.UNREADABLE, None, Fence(), loc.problem, Cause.REFUSED_HOME)
            for loc in self.locations
        )

    def _lift(self, reading: Reading) -> None:
        """Log, once per hold, that an expiry lifted it for this process. Nothing is removed."""
        fence = reading.fence or Fence()
        key = (reading.location.key, fence)
        with self._log_lock:
            if key in self._expiry_logged:
                return
            if len(self._expiry_logged) >= _MAX_LOGGED:
                del self._expiry_logged[next(iter(self._expiry_logged))]
            self._expiry_logged[key] = None
        hold = reading.hold
        _logger().warning(
            "hold at %s (generation %s) EXPIRED at its deadman %s by this process's clock: the pause has lifted "
            "here; the hold stays in place until `hermes serve`'s deadman or an operator's command retires it",
            reading.location.describe(),
            fence.describe(),
            format_instant(hold.expires_at) if hold else "?",
        )

    def gate(self, user_id: Any = None, profile: Any = None, component: str | None = None,
             job: Any = None) -> Verdict:
        """Proceed when no active hold covers the work, or when every one that does admits
        (user_id, profile). `component` (`cron`, `kanban`, `gateway`, or a name user code gives
        its consumer) and `job` (the unit's name, or several: a card's assignee and title) say
        what the work is, for scoped holds; work that does not say is covered by every hold."""
        snapshot, present = self._take()
        if not present:
            return Verdict(True, False, False, snapshot, ())
        return decide(snapshot, user_id, profile, component, job)

    def asked(self, user: str | None, profile: str | None, component: str | None = None,
              job: str | None = None) -> Verdict:
        """The verdict `hermes check` gives on work an operator names: `gate` seen from
        `profile` (its home and the fleet root, `for_profile`: what the consumers there
        answer), every value validated as a write validates it (`InvalidArgument`, one line)."""
        from hermes_estop.model.homes import validate_profile_name
        from hermes_estop.model.text import printable

        if user is not None:
            Allow.of([user])  # the id rules a write applies: non-empty, no control characters
        for what, value in (("--component", component), ("--job", job)):
            if value is not None and (not value or printable(value) != value):
                raise InvalidArgument(f"invalid {what} {value!r}: expected a non-empty name without control characters")
        seen_from = self
        if profile is not None:
            validate_profile_name(profile)
            seen_from = self.for_profile(profile)
        return seen_from.gate(user, profile, component, job)

    def is_engaged(self) -> bool:
        return engaged(self.snapshot())

    def is_allowed(self, user_id: Any = None, profile: Any = None) -> bool:
        """True only when at least one hold is active and every active hold admits."""
        return admits(self.snapshot(), user_id, profile)

    def holds(self) -> tuple[Reading, ...]:
        """The active holds (unreadable ones included), own home first, full holds before
        scoped ones."""
        return self.snapshot().every_active

    def get_state(self) -> dict[str, Any] | None:
        """hermes-agent's shape: the first active hold's `reason`, `engaged_at`, `expires_at` and
        `allow` (plus `generation` and `scope`), or None when not engaged."""
        active = self.snapshot().every_active
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
            **({"hold": hold.hold_id, "selector": hold.selector.to_body()}
               if hold is not None and hold.selector is not None else {}),
        }

    def paused_reply(self) -> str | None:
        """The notice for a refused gateway turn, or None when not paused. Starts with "⏸️ "
        like hermes-agent's, so a gateway user meets the text they know."""
        snapshot = self.snapshot()
        notice = pause_notice(snapshot, snapshot.every_active)
        return None if notice is None else PAUSED_PREFIX + notice

    def check_paused(self, component: str, log: logging.Logger | None = None) -> bool:
        """True when a hold covers `component` (a scoped hold of some of its jobs counts: the
        component as a whole is not free); logs at INFO once per engagement per component."""
        snapshot = self.snapshot()
        active = holding(snapshot, component)
        with self._log_lock:
            if not active:
                self._paused_logged.pop(component, None)
                return False
            identity = frozenset((r.location.key, r.fence) for r in active)
            first = self._paused_logged.get(component) != identity
            self._paused_logged[component] = identity
        if first:
            notice = pause_notice(snapshot, active)
            (log or _logger()).info("%s paused by the emergency stop: %s", component, notice)
        return True

    def sentinel_path(self) -> Path:
        """The sentinel `hermes pause` writes for this process (its own home); for a refused
        profile home, the path it names (nothing is ever written there)."""
        return self.layout.home / SENTINEL_NAME

    # -- writing -----------------------------------------------------------------------------

    def _check_writable(self) -> None:
        """Every write from a refused profile home is an error (one line, CLI exit 2): its
        scope must never alias another one, and a resume there must not lift the fleet's."""
        if self._refused:
            raise InvalidArgument(self.layout.refusal or "this home is not a valid profile home")

    def location(self, *, fleet: bool = False) -> Location:
        """The location a write of this process targets: its own home, or (`fleet`) the fleet
        root; `InvalidArgument` from a refused profile home. Any other scope is the fleet's
        (`self.fleet.location(scope)`)."""
        self._check_writable()
        return self.layout.fleet if fleet else self.layout.own

    def deadline(self, ttl: Any, expires_at: Any, now: datetime) -> datetime | None:
        """The deadman a request asks for, validated before anything is written. An empty or
        blank `ttl` / `expires_at` is "not given", as in hermes-agent (a re-arm keeps the
        standing deadline)."""
        if _blank(ttl):
            ttl = None
        if _blank(expires_at):
            expires_at = None
        if ttl is not None and expires_at is not None:
            raise InvalidArgument("give a TTL or an absolute expiry, not both")
        if ttl is not None:
            return now + parse_ttl(ttl)
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
        armed_by: str | None = None,
        window: Mapping[str, Any] | None = None,
        only_if: Any = None,
        only: Iterable[str] | str | None = None,
        jobs: Iterable[str] | str | None = None,
        hold_id: str | None = None,
        override: str | None = None,
    ) -> Hold:
        """Arm, or re-arm non-destructively, the hold of this home (`fleet`: the fleet root).
        Returns the hold written. Everything is validated first: on a bad value nothing is
        written and a standing hold is untouched. `only` (components) and `jobs` (globs over the
        units' names) make it a scoped hold, which stands beside the others at the location;
        pausing the same selector again re-arms it (`hold_id`: the scoped hold to re-arm).
        The fleet's arming policy applies (`PolicyRefused`); `override` (a reason) breaks glass."""
        from hermes_estop.process.fleet_config import check_components

        location = self.location(fleet=fleet)
        check_components(self, [only] if isinstance(only, str) else only, "only")
        request, now = self.engage_request(reason, allow, ttl, expires_at, replace, armed_by=armed_by,
                                           window=window, only_if=only_if, only=only, jobs=jobs, hold_id=hold_id)
        return self.fleet.engage(location, request, now, override=override)

    def engage_request(self, reason: str | None = None, allow: Allow | Mapping[str, Any] | None = None,
                       ttl: Any = None, expires_at: Any = None, replace: bool = False, *,
                       armed_by: str | None = None, window: Mapping[str, Any] | None = None,
                       only_if: Any = None, only: Iterable[str] | str | None = None,
                       jobs: Iterable[str] | str | None = None,
                       hold_id: str | None = None) -> tuple[EngageRequest, datetime]:
        """The validated request for an engage from loose input (a TTL or an instant as text, an
        allowlist as a mapping), and the `now` it was judged at; raises `EstopError` naming the
        bad value. `Fleet.engage(location, *this)` writes it at any scope of the fleet."""
        selector = None
        if only or jobs:  # a full hold (`hermes pause`) never imports the selectors' module
            from hermes_estop.model.selector import Selector

            selector = Selector.of(only or (), jobs or ())
        if hold_id is not None and (selector is None or not isinstance(hold_id, str) or not hold_id.isalnum()):
            raise InvalidArgument(f"invalid hold id {hold_id!r}: a scoped hold (only/jobs) with a letters-and-digits id")
        now = self.clock()
        request = EngageRequest(
            reason=clean_reason(reason),
            allow=Allow.coerce(allow),
            expires_at=self.deadline(ttl, expires_at, now),
            replace=bool(replace),
            armed_by=armed_by or self.actor,
            window=window,
            only_if=only_if,
            selector=selector,
            hold_id=hold_id,
        )
        return request, now

    def release(self, *, fleet: bool = False, generation: str | None = None, hold: str | None = None,
                override: str | None = None) -> Reading | None:
        """The operator's resume of this home (`fleet`: the fleet root); with `generation`, only
        that generation (`HoldConflict` otherwise); with `hold`, only that scoped hold. A plain
        release lifts the full hold and leaves the scoped ones standing. Returns what was
        removed, or None."""
        removed = self.fleet.resume(self.location(fleet=fleet), generation=generation, hold=hold, override=override)
        return removed[0] if removed else None

    def disengage(self) -> bool:
        """Remove every visible hold (this home and the fleet root), scoped ones too: what
        hermes-agent's `disengage` (removing `ESTOP`) does; True when any was removed."""
        self._check_writable()
        return self.fleet.release_everywhere(self._readable)

    def retire(self, generation: str) -> bool:
        """Remove the hold carrying `generation` wherever among this process's locations it
        stands; a successor with another generation survives."""
        if not isinstance(generation, str) or not generation:
            raise InvalidArgument(f"invalid generation {generation!r}")
        self._check_writable()
        return self.fleet.retire_generation(self._readable, generation)

    def history(self, limit: int | None = None) -> list[AuditEvent]:
        return self.fleet.history(limit)[0]

    # -- forecast ----------------------------------------------------------------------------

    def forecast(self, start: Any, end: Any, user_id: Any = None, profile: Any = None, *,
                 sources: Iterable[HoldSource] | None = None, component: str | None = None,
                 job: Any = None) -> Forecast:
        """The intervals of `[start, end)` during which (`user_id`, `profile`) would be held, and
        which holds and window occurrences decide: the holds standing now (with their deadmen)
        and what every registered hold source plans (`sources`: explicit ones instead). See
        `hermes_estop.process.forecast`; imported here on first use, off the hot path."""
        from hermes_estop.process.forecast import forecast_view

        return forecast_view(self, start, end, user_id, profile, sources=sources, component=component, job=job)
