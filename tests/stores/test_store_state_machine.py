"""Issue 22: a Hypothesis state machine drives each real store (file, PostgreSQL) through random
sequences of engage, re-arm, release, fenced retire, reads and the passing of time, against a
model of what must hold; a failure shrinks to the shortest sequence that shows it.

Each example works on a scope of its own (a profile home of the test's fleet root), so one
store (one PostgreSQL schema) serves every example."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from hermes_estop.model.errors import HoldConflict
from hermes_estop.model.hold import EngageRequest, Fence, HoldState
from hermes_estop.model.homes import Layout
from hermes_estop.stores import HoldStore

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
_scopes = itertools.count()


@dataclass
class ModelHold:
    generation: str
    reason: str | None
    expires_at: datetime | None

    def active(self, now: datetime) -> bool:
        return self.expires_at is None or now < self.expires_at


def machine_for(store: HoldStore, layout: Layout) -> type[RuleBasedStateMachine]:
    class HoldStoreMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.location = layout.location(f"sm{next(_scopes)}")
            self.now = T0
            self.hold: ModelHold | None = None
            self.stale: list[str] = []
            self.events: list[tuple[str, str | None]] = []  # (event, generation) the trail must show

        def _retired(self) -> None:
            if self.hold is not None:
                self.stale.append(self.hold.generation)
            self.hold = None

        @rule(reason=st.one_of(st.none(), st.sampled_from(["maint", "db", ""])),
              ttl=st.one_of(st.none(), st.integers(min_value=1, max_value=120)))
        def engage(self, reason: str | None, ttl: int | None) -> None:
            deadline = self.now + timedelta(minutes=ttl) if ttl is not None else None
            hold = store.engage(self.location, EngageRequest(reason=reason, expires_at=deadline), self.now, "machine")
            standing = self.hold
            if standing is not None and standing.active(self.now):
                expected = ModelHold(hold.generation, standing.reason if reason is None else reason or None,
                                     deadline if deadline is not None else standing.expires_at)
                self.events.append(("rearm", hold.generation))
            else:
                if standing is not None:
                    self.events.append(("expire", standing.generation))
                expected = ModelHold(hold.generation, reason or None, deadline)
                self.events.append(("engage", hold.generation))
            assert (hold.reason, hold.expires_at) == (expected.reason, expected.expires_at)
            self._retired()
            self.hold = expected

        @rule(which=st.sampled_from(["any", "current", "stale"]))
        def release(self, which: str) -> None:
            if which == "stale" or (which == "current" and self.hold is None):
                generation = self.stale[-1] if self.stale else "0" * 32
                with pytest.raises(HoldConflict):
                    store.release(self.location, generation, self.now, "machine")
                return
            generation = self.hold.generation if which == "current" and self.hold is not None else None
            removed = store.release(self.location, generation, self.now, "machine")
            assert (removed is None) == (self.hold is None)
            if self.hold is not None:
                assert removed is not None and removed.hold is not None
                assert removed.hold.generation == self.hold.generation
                self.events.append(("release", self.hold.generation))
            self._retired()

        @rule(stale=st.booleans())
        def retire(self, stale: bool) -> None:
            if stale or self.hold is None:
                generation = self.stale[-1] if self.stale else "0" * 32
                assert not store.retire(self.location, Fence(generation), self.now, "machine")
                return
            assert store.retire(self.location, Fence(self.hold.generation), self.now, "machine")
            self.events.append(("retire", self.hold.generation))
            self._retired()

        @rule(minutes=st.integers(min_value=1, max_value=90))
        def advance(self, minutes: int) -> None:
            self.now += timedelta(minutes=minutes)

        @invariant()
        def the_store_reads_as_the_model_says(self) -> None:
            (reading,) = store.read((self.location,), self.now)
            if self.hold is None:
                assert reading.state is HoldState.ABSENT, reading
                return
            expected = HoldState.ACTIVE if self.hold.active(self.now) else HoldState.EXPIRED
            assert reading.state is expected and reading.hold is not None, (reading, self.hold)
            assert (reading.hold.generation, reading.hold.reason, reading.hold.expires_at) == (
                self.hold.generation, self.hold.reason, self.hold.expires_at)

        @invariant()
        def every_generation_that_stood_is_on_the_record(self) -> None:
            trail = [(e.event, e.generation) for e in store.history() if e.location == self.location.scope]
            assert trail == self.events

    return HoldStoreMachine


def test_random_operation_sequences_keep_the_store_to_its_model(store, fleet_root):
    machine = machine_for(store, Layout(home=fleet_root, root=fleet_root))
    run_state_machine_as_test(machine, settings=settings(max_examples=30, stateful_step_count=12, deadline=None,
                                                         suppress_health_check=list(HealthCheck)))
