"""Scoped holds in the store contract (issue 26), on every backend: several holds at one location,
each engaged, re-armed, released and retired on its own; lifting one never changes another."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from hermes_estop import Estop, HoldConflict
from hermes_estop.model.hold import Fence, HoldState


def scoped_of(estop: Estop):
    (reading,) = estop.store.read((estop.layout.own,), estop.clock())
    return reading, {s.hold.hold_id: s for s in reading.scoped}


def test_holds_at_one_location_are_released_each_on_its_own(fleet_estop):
    full = fleet_estop.engage(reason="everything")
    kanban = fleet_estop.engage(reason="migration", only=["kanban"])
    nightly = fleet_estop.engage(reason="upstream down", only=["cron"], jobs=["nightly-*"])
    assert len({full.generation, kanban.generation, nightly.generation}) == 3
    fleet_estop.release()  # the full hold only
    reading, scoped = scoped_of(fleet_estop)
    assert reading.state is HoldState.ABSENT and set(scoped) == {kanban.hold_id, nightly.hold_id}
    assert fleet_estop.gate(None, None, "gateway") and not fleet_estop.gate(None, None, "kanban")
    fleet_estop.release(hold=kanban.hold_id)
    _, scoped = scoped_of(fleet_estop)
    assert set(scoped) == {nightly.hold_id} and scoped[nightly.hold_id].hold.reason == "upstream down"
    assert fleet_estop.release(generation=nightly.generation).hold.hold_id == nightly.hold_id
    assert not fleet_estop.is_engaged()


def test_retiring_a_scoped_generation_leaves_the_full_hold_and_the_others(fleet_estop):
    full = fleet_estop.engage(reason="everything", allow={"user_ids": ["7"]})
    kanban = fleet_estop.engage(only=["kanban"])
    cron = fleet_estop.engage(only=["cron"])
    assert fleet_estop.retire(kanban.generation)
    assert not fleet_estop.retire(kanban.generation)  # gone: a second retire removes nothing
    reading, scoped = scoped_of(fleet_estop)
    assert reading.hold.generation == full.generation and reading.hold.allow.user_ids == {"7"}
    assert set(scoped) == {cron.hold_id}


def test_a_scoped_rearm_keeps_its_id_and_what_it_is_not_given(fleet_estop):
    first = fleet_estop.engage(reason="migration", only=["kanban"], allow={"user_ids": ["7"]}, ttl="1h")
    again = fleet_estop.engage(reason="still migrating", only=["kanban"])
    assert again.hold_id == first.hold_id and again.generation != first.generation
    assert again.allow.user_ids == {"7"} and again.expires_at == first.expires_at
    assert fleet_estop.retire(first.generation) is False  # the re-arm survives a fence on its predecessor
    assert len(scoped_of(fleet_estop)[1]) == 1


def test_a_scoped_deadman_lifts_that_hold_alone(fleet_estop, clock):
    fleet_estop.engage(reason="everything")
    short = fleet_estop.engage(only=["kanban"], ttl="10m")
    long = fleet_estop.engage(only=["cron"], ttl="2h")
    clock.advance(timedelta(minutes=11))
    assert fleet_estop.gate("x", None, "gateway").proceed is False  # the full hold still stands
    fleet_estop.fleet.retire_expired()  # the deadman retires the expired scoped hold
    reading, scoped = scoped_of(fleet_estop)
    assert set(scoped) == {long.hold_id} and reading.state is HoldState.ACTIVE
    events = [(e.event, e.generation) for e in fleet_estop.history()]
    assert ("expire", short.generation) in events


def test_releasing_an_unknown_generation_removes_nothing(fleet_estop):
    fleet_estop.engage(only=["kanban"])
    with pytest.raises(HoldConflict):
        fleet_estop.release(generation="not-standing")
    with pytest.raises(HoldConflict):
        fleet_estop.release(hold="deadbeef")
    assert len(scoped_of(fleet_estop)[1]) == 1


def test_a_scoped_hold_is_never_written_over_an_unreadable_body(backend, store, fleet_estop):
    backend.plant(store, fleet_estop.layout.own, b"{not json")
    with pytest.raises(HoldConflict, match="unreadable"):
        fleet_estop.engage(only=["kanban"])
    (reading,) = store.read((fleet_estop.layout.own,), fleet_estop.clock())
    assert reading.state is HoldState.UNREADABLE


def test_a_window_style_vacant_fence_is_judged_per_selector(fleet_estop):
    from hermes_estop import VACANT

    fleet_estop.engage(reason="everything")
    fleet_estop.engage(only=["kanban"], only_if=VACANT)  # no kanban hold stands: written
    with pytest.raises(HoldConflict):
        fleet_estop.engage(only=["kanban"], only_if=VACANT)


def test_concurrent_scoped_engages_lose_no_hold(backend, fleet_root, root_layout, clock):
    # the components are the test's own: declared, as every door asks (issue 43 item 7)
    names = ", ".join(f'"c{worker}-{i}"' for worker in range(2) for i in range(8))
    (fleet_root / "estop.toml").write_text(f"components = [{names}]\n")
    stores = [backend.open(fleet_root) for _ in range(2)]
    try:
        views = [Estop(layout=root_layout, store=s, clock=clock, actor="t@h") for s in stores]

        def arm(view: Estop, worker: int) -> None:
            for i in range(8):
                view.engage(only=[f"c{worker}-{i}"])

        threads = [threading.Thread(target=arm, args=(view, n)) for n, view in enumerate(views)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for view in views:
            getattr(view.store, "sync", lambda: True)()
        (reading,) = views[0].store.read((root_layout.own,), clock())
        assert len(reading.scoped) == 16
    finally:
        for opened in stores:
            opened.close()


def test_a_fence_names_exactly_one_hold(fleet_estop):
    kanban = fleet_estop.engage(only=["kanban"])
    assert not fleet_estop.fleet.retire(fleet_estop.layout.own, Fence(None, (1, 2, 3)))
    assert fleet_estop.fleet.retire(fleet_estop.layout.own, Fence(kanban.generation))


def test_the_daemon_deadman_retires_an_expired_scoped_hold_alone(fleet_estop, clock):
    full = fleet_estop.engage(reason="everything", ttl="2h")
    short = fleet_estop.engage(only=["kanban"], ttl="10m")
    clock.advance(timedelta(minutes=11))
    fleet = fleet_estop.fleet
    assert fleet.next_deadline(fleet.read()) == full.expires_at
    retired = fleet.retire_expired()
    assert [r.hold.generation for r in retired] == [short.generation]
    reading, scoped = scoped_of(fleet_estop)
    assert scoped == {} and reading.hold.generation == full.generation


def test_release_all_lifts_the_full_hold_and_every_scoped_one_of_its_location_alone(fleet_estop, ops_estop):
    fleet_estop.engage(reason="everything")
    kanban = fleet_estop.engage(only=["kanban"])
    cron = fleet_estop.engage(only=["cron"])
    ops = ops_estop.engage(only=["gateway"])  # another location: untouched
    fleet = fleet_estop.fleet
    removed = fleet.release_all(fleet.location("fleet"))
    assert [r.hold.hold_id for r in removed] == [None, kanban.hold_id, cron.hold_id]
    reading, scoped = scoped_of(fleet_estop)
    assert reading.state is HoldState.ABSENT and scoped == {}
    assert [s.hold.hold_id for s in scoped_of(ops_estop)[0].scoped] == [ops.hold_id]
    assert fleet.release_all(fleet.location("fleet")) == []
