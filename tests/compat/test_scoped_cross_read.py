"""Scoped holds (issue 26) as a reader that knows no selectors sees them: the independent reader
of upstream's rules (`test_cross_read.upstream_*`) must hold wherever hermes-estop holds, for
every unit of work, while any scoped hold stands; and once the last hold is lifted, the sentinel
is gone for both."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from .test_cross_read import upstream_admits, upstream_engaged, upstream_read

SELECTORS = [{"only": ["kanban"]}, {"only": ["cron"], "jobs": ["nightly-*"]}, {"jobs": ["a?"]},
             {"only": ["gateway", "mine"]}]
ALLOWS = [None, {"user_ids": ["424242"]}, {"user_ids": ["424242"], "profiles": ["ops"]}, {"user_ids": ["7"]}]
TTLS = [None, "45m", "2h"]
WORK = [(component, job, user, profile)
        for component in ("cron", "kanban", "gateway", "mine", None)
        for job in ("nightly-1", "a1", "zz", None)
        for user, profile in (("424242", "ops"), ("424242", "dev"), ("7", None), (None, None))]


def assert_upstream_never_sees_less(estop, path):
    for component, job, user, profile in WORK:
        if not estop.gate(user, profile, component, job):
            assert upstream_engaged(path), (component, job, user, profile)
            assert not upstream_admits(path, user, profile), (component, job, user, profile, upstream_read(path))


@pytest.mark.parametrize("seed", range(12))
def test_upstream_holds_wherever_a_scoped_hold_holds(estop, dot_hermes, seed):
    rng = random.Random(seed)
    path = dot_hermes / "ESTOP"
    # a component of the integrator's own is declared, as every door asks (issue 43 item 7)
    (dot_hermes / "estop.toml").write_text('components = ["mine"]\n')
    if rng.random() < 0.5:
        estop.engage(reason="full", allow=rng.choice(ALLOWS), ttl=rng.choice(TTLS))
    for selector in rng.sample(SELECTORS, rng.randint(1, len(SELECTORS))):
        estop.engage(reason="scoped", allow=rng.choice(ALLOWS), ttl=rng.choice(TTLS), **selector)
        assert_upstream_never_sees_less(estop, path)
    for reading in rng.sample(estop.holds(), len(estop.holds())):
        hold = reading.hold
        if hold.hold_id is not None:
            estop.current().release(hold=hold.hold_id)
        else:
            estop.current().release()
        assert_upstream_never_sees_less(estop, path)
    assert not path.exists() and not upstream_engaged(path)


def test_a_kanban_only_hold_is_a_hold_of_everything_upstream(estop, dot_hermes):
    path = estop.engage(reason="migrating kanban.db", only=["kanban"], allow={"user_ids": ["424242"]})
    assert estop.gate(None, None, "cron", "nightly-1") and not estop.gate(None, None, "kanban")
    body = upstream_read(path)
    assert upstream_engaged(path) and body["reason"] == "[kanban] migrating kanban.db"
    assert upstream_admits(path, "424242", None) and estop.gate("424242", None, "kanban")


def test_upstream_deadline_is_the_last_one_and_none_when_any_hold_has_none(estop, dot_hermes):
    path = estop.engage(only=["kanban"], ttl="1h")
    estop.engage(only=["cron"], ttl="2h")
    deadline = datetime.fromisoformat(upstream_read(path)["expires_at"])
    assert timedelta(minutes=119) < deadline - datetime.now(UTC) <= timedelta(hours=2)
    estop.engage(only=["gateway"])
    assert upstream_read(path)["expires_at"] is None


def test_removing_the_sentinel_by_hand_lifts_every_hold_for_both(estop, dot_hermes):
    path = estop.engage(only=["kanban"])
    estop.engage(reason="full")
    path.unlink()
    assert not estop.is_engaged() and estop.gate(None, None, "kanban")


def test_disengage_lifts_scoped_holds_as_removing_the_sentinel_would(estop, dot_hermes):
    path = estop.engage(only=["kanban"])
    estop.engage()
    assert estop.disengage() and not path.exists() and not estop.is_engaged()
