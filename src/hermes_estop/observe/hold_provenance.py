"""What the audit trail says about the holds standing now (issue 37): which were pushed through
the policy with `--override` (shown on `hermes status` and the status page until the hold
ends), and which were written outside hermes (a sentinel or a row by hand: honoured all the
same, shown as such, flagged by `hermes doctor`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from hermes_estop.model.hold import Reading
from hermes_estop.model.timeutil import format_instant

if TYPE_CHECKING:  # pragma: no cover
    from datetime import datetime

    from hermes_estop.fleet.fleet import Fleet
    from hermes_estop.model.audit_event import AuditEvent

__all__ = ["OnRecord", "Override", "on_record"]

#: what a write through hermes leaves on the trail for the generation it wrote
_WRITTEN = frozenset({"engage", "rearm", "void"})
#: a trail stamped by another clock (PostgreSQL's) may lag the body's `engaged_at` a little
_SKEW = timedelta(minutes=5)


@dataclass(frozen=True)
class Override:
    scope: str
    generation: str
    actor: str | None
    reason: str | None
    rule: str | None
    time: datetime

    def to_json(self) -> dict[str, Any]:
        return {"scope": self.scope, "generation": self.generation, "actor": self.actor, "reason": self.reason,
                "rule": self.rule, "time": format_instant(self.time)}

    def line(self) -> str:
        return (f"OVERRIDE at {self.scope} (generation {self.generation}): {self.actor or '?'} broke glass over "
                f"policy {self.rule or '?'}: {self.reason or ''}")


@dataclass(frozen=True)
class OnRecord:
    overrides: tuple[Override, ...] = ()
    #: active holds no hermes write is on the trail for: (scope, generation or None)
    outside: tuple[tuple[str, str | None], ...] = ()
    #: why the trail could not be read (then nothing is claimed about outside writes)
    problem: str | None = None

    def override_of(self, generation: str | None) -> Override | None:
        return next((o for o in self.overrides if o.generation == generation), None) if generation else None

    def written_outside(self, reading: Reading) -> bool:
        generation = reading.hold.generation if reading.hold is not None else None
        return (reading.location.scope, generation) in self.outside


def _rule(detail: str | None) -> str | None:
    return detail.split("=", 1)[0] if detail and "=" in detail else None


def on_record(fleet: Fleet, readings: tuple[Reading, ...], now: datetime) -> OnRecord:
    """The overrides and outside writes among the active `readings`, from one read of the trail
    back to the oldest of them. Never raises: a trail that cannot be read claims nothing."""
    named, unnamed = _by_generation(readings)
    if not named:
        return OnRecord(outside=unnamed)
    try:
        events: list[AuditEvent] = fleet.history(since=_since(named))[0]
    except Exception as exc:  # noqa: BLE001 - a status never fails for its record
        return OnRecord(outside=unnamed, problem=str(exc))
    return _judged(named, unnamed, events)


def _by_generation(readings: tuple[Reading, ...]) -> tuple[dict[str, Reading], tuple[tuple[str, None], ...]]:
    """The active readings by the generation of their hold, and the scopes of those without one
    (a hand-made stop: never on the trail)."""
    named: dict[str, Reading] = {}
    unnamed: list[tuple[str, None]] = []
    for reading in readings:
        generation = reading.hold.generation if reading.hold is not None else None
        if not reading.active:
            continue
        if generation:
            named[generation] = reading
        else:
            unnamed.append((reading.location.scope, None))
    return named, tuple(unnamed)


def _since(named: dict[str, Reading]) -> datetime | None:
    """How far back the trail is read: to the oldest engagement, less the skew of another clock
    (None, the whole trail, when a hold does not say when it was engaged)."""
    stamps = [r.hold.engaged_at for r in named.values() if r.hold is not None and r.hold.engaged_at is not None]
    return min(stamps) - _SKEW if len(stamps) == len(named) else None


def _judged(named: dict[str, Reading], unnamed: tuple[tuple[str, None], ...], events: list[AuditEvent]) -> OnRecord:
    written = {e.generation for e in events if e.event in _WRITTEN}
    overrides = tuple(Override(named[e.generation].location.scope, e.generation, e.actor, e.reason, _rule(e.detail),
                               e.time)
                      for e in events if e.event == "override" and e.generation in named)
    outside = unnamed + tuple((r.location.scope, generation) for generation, r in named.items()
                              if generation not in written)
    return OnRecord(overrides, outside)
