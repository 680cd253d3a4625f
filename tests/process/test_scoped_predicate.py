"""Scoped holds (issue 26): work is held exactly when some active hold whose selector covers it
does not admit its principal (deny wins); an unreadable hold or selector covers everything.
Checked against an oracle written from the rule itself, over generated holds and work, both on
the pure predicate and after a round trip through a real sentinel file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from hermes_estop.model.hold import Allow, Fence, Hold, HoldState, Reading, Sentinel, encode_sentinel, parse_sentinel, prepare
from hermes_estop.model.homes import Layout
from hermes_estop.model.selector import Selector, parse_selector
from hermes_estop.process.check import Snapshot, decide
from hermes_estop.stores.file import FileStore

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
COMPONENTS = ("cron", "kanban", "gateway", "mine")
GLOBS = ("nightly-*", "a?", "b", "[ab]*")
NAMES = ("nightly-1", "a1", "b", "c", "A1")

deadlines = st.sampled_from([None, NOW - timedelta(minutes=1), NOW, NOW + timedelta(minutes=5)])
allows = st.builds(lambda users, profiles: Allow(frozenset(users), frozenset(profiles)),
                   st.sets(st.sampled_from(["1", "2"])), st.sets(st.sampled_from(["ops"]), max_size=1))
selectors = st.one_of(
    st.builds(lambda c, j: Selector(frozenset(c), tuple(j)),
              st.sets(st.sampled_from(COMPONENTS), max_size=2), st.lists(st.sampled_from(GLOBS), max_size=2, unique=True)),
    st.just(parse_selector("not an object")),
)
scoped_holds = st.builds(lambda sel, exp, allow, n: Hold(f"g{n}", NOW, None, exp, allow, selector=sel, hold_id=f"h{n}"),
                         selectors, deadlines, allows, st.integers(0, 10**6))
full_holds = st.one_of(st.none(), st.builds(lambda exp, allow: Hold("full", NOW, None, exp, allow), deadlines, allows))
works = st.tuples(st.sampled_from((*COMPONENTS, None)),
                  st.one_of(st.none(), st.sampled_from(NAMES), st.tuples(st.sampled_from(NAMES), st.sampled_from(NAMES))),
                  st.sampled_from([None, "1", "2"]), st.sampled_from([None, "ops", "dev"]))


def oracle(full: Hold | None, scoped: list[Hold], work: tuple) -> bool:
    """Held, by the rule as issue 26 states it."""
    component, job, user, profile = work
    names = () if job is None else (job,) if isinstance(job, str) else job

    def active(hold: Hold) -> bool:
        return hold.expires_at is None or hold.expires_at > NOW

    def covers(hold: Hold) -> bool:
        sel = hold.selector
        if sel is None or sel.problem is not None:
            return True
        if component is not None and sel.components and component not in sel.components:
            return False
        if not sel.jobs or not names:
            return True
        return any(fnmatchcase(name, glob) for name in names for glob in sel.jobs)

    def admits(hold: Hold) -> bool:
        users, profiles = hold.allow.user_ids, hold.allow.profiles
        return user is not None and user in users and (not profiles or profile in profiles)

    covering = [h for h in ([full] if full else []) + scoped if active(h) and covers(h)]
    return any(not admits(h) for h in covering)


def snapshot_of(full: Hold | None, scoped: list[Hold]) -> Snapshot:
    location = Layout(home=Path("/r"), root=Path("/r")).fleet
    parts = tuple(prepare(location, hold, None).at(NOW) for hold in scoped)
    base = prepare(location, full, None).at(NOW) if full is not None else Reading(location, HoldState.ABSENT)
    return Snapshot((base.with_scoped(parts),), NOW)


@settings(max_examples=400, deadline=None)
@given(full_holds, st.lists(scoped_holds, max_size=5, unique_by=lambda h: h.hold_id), works)
def test_held_exactly_when_a_covering_active_hold_does_not_admit(full, scoped, work):
    component, job, user, profile = work
    verdict = decide(snapshot_of(full, scoped), user, profile, component, job)
    assert (not verdict.proceed) == oracle(full, scoped, work)


@settings(max_examples=200, deadline=None)
@given(full_holds, st.lists(scoped_holds, max_size=5, unique_by=lambda h: h.hold_id), works)
def test_a_sentinel_round_trip_decides_as_the_holds_it_was_written_from(tmp_path_factory, full, scoped, work):
    root = tmp_path_factory.mktemp("scoped")
    body = encode_sentinel(Sentinel(full, tuple(scoped)), NOW)
    if body is not None:
        (root / "ESTOP").write_bytes(body)
    location = Layout(home=root, root=root).fleet
    readings = FileStore(root).read((location,), NOW)
    component, job, user, profile = work
    assert (not decide(Snapshot(readings, NOW), user, profile, component, job).proceed) == oracle(full, scoped, work)


def test_a_body_without_scoped_holds_is_written_exactly_as_before():
    hold = Hold("g", NOW, "maint", None, Allow(frozenset({"1"})))
    body = encode_sentinel(Sentinel(hold, ()), NOW)
    assert body is not None and b"scoped" not in body
    assert parse_sentinel(body) == Sentinel(hold, ())


@pytest.mark.parametrize("body", [
    b'{"scoped_holds": "nope"}',
    b'{"scoped_holds": [{"generation": "g"}]}',
    b'{"scoped_holds": [{"id": "a"}, {"id": "a"}]}',
    b'{"scoped_holds": [], "full_hold": 3}',
])
def test_an_unreadable_scoped_layout_holds_everything(tmp_path, body):
    (tmp_path / "ESTOP").write_bytes(body)
    location = Layout(home=tmp_path, root=tmp_path).fleet
    (reading,) = FileStore(tmp_path).read((location,), NOW)
    assert reading.state is HoldState.UNREADABLE
    assert not decide(Snapshot((reading,), NOW), "1", None, "cron", "anything").proceed


def test_a_malformed_selector_covers_every_component_and_job():
    hold = Hold("g", NOW, None, None, selector=parse_selector({"components": "cron"}), hold_id="x")
    assert hold.selector is not None and hold.selector.problem
    assert not decide(snapshot_of(None, [hold]), None, None, "gateway", "zzz").proceed


def test_only_scoped_holds_leave_uncovered_work_free_and_no_full_hold_reported():
    kanban = Hold("g", NOW, "migrating", None, selector=Selector.of(["kanban"]), hold_id="k")
    snapshot = snapshot_of(None, [kanban])
    assert snapshot.active == () and len(snapshot.scoped_active) == 1 and snapshot.engaged
    assert decide(snapshot, None, None, "cron", "nightly-1").proceed
    held = decide(snapshot, None, None, "kanban")
    assert not held.proceed and held.notice is not None and "kanban: migrating" in held.notice
    assert not decide(snapshot, None, None).proceed  # work that does not say what it is: held


def test_reading_fences_scoped_holds_on_their_own_generation():
    kanban = Hold("gk", NOW, None, None, selector=Selector.of(["kanban"]), hold_id="k")
    (reading,) = snapshot_of(None, [kanban]).readings
    assert reading.scoped[0].fence == Fence("gk")


def test_a_prepared_body_rereads_its_scoped_holds_when_a_deadline_passes():
    location = Layout(home=Path("/r"), root=Path("/r")).fleet
    short = Hold("gs", NOW, None, NOW + timedelta(minutes=5), selector=Selector.of(["kanban"]), hold_id="s")
    long = Hold("gl", NOW, None, NOW + timedelta(hours=1), selector=Selector.of(["cron"]), hold_id="l")
    prepared = prepare(location, Sentinel(None, (short, long)), None)
    states = [tuple(s.state for s in prepared.at(NOW + timedelta(minutes=m)).scoped) for m in (0, 4, 5, 30, 1, 61)]
    active, expired = HoldState.ACTIVE, HoldState.EXPIRED
    assert states == [(active, active), (active, active), (expired, active), (expired, active), (active, active),
                      (expired, expired)]
