"""The store contract, run on every backend (see `conftest.BACKENDS`): docs/design.md §3 read rules on
bodies, docs/design.md §4 deny-wins and profile-is-not-authority, docs/design.md §5 re-arm, generation fence and
TTL refusal."""

from __future__ import annotations

import codecs
import json
import logging
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from hermes_estop import VACANT, Estop, HoldConflict, InvalidDuration, InvalidInstant
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.hold import Allow, HoldState
from hermes_estop.model.timeutil import format_instant


def body(**fields) -> bytes:
    return json.dumps(fields).encode()


def only(estop: Estop):
    """The one present reading at the estop's own location."""
    return estop.store.read((estop.layout.own,), estop.clock())[0]


# -- docs/design.md §3: reading, fail safe in both directions ---------------------------------------------


def test_no_hold_is_not_engaged_and_admits_nobody(fleet_estop):
    assert not fleet_estop.is_engaged()
    assert fleet_estop.gate("424242")
    assert not fleet_estop.is_allowed("424242")


@pytest.mark.parametrize(
    "raw, problem",
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b"{not json", "not JSON"),
        (b"\xff\xfe\x00garbage", "not JSON"),
        (b"[1, 2, 3]", "not a JSON object"),
        (b'"engaged"', "not a JSON object"),
        (b"null", "not a JSON object"),
        (b"42", "not a JSON object"),
    ],
    ids=["empty", "whitespace", "not-json", "binary", "array", "string", "null", "number"],
)
def test_unreadable_body_is_active_and_admits_nobody(backend, store, fleet_estop, raw, problem):
    backend.plant(store, fleet_estop.layout.own, raw)
    reading = only(fleet_estop)
    assert reading.state is HoldState.UNREADABLE
    assert problem in reading.problem
    assert fleet_estop.is_engaged()
    assert not fleet_estop.gate("424242")
    assert not fleet_estop.is_allowed("424242")


def test_body_larger_than_one_mebibyte_is_active_unreadable(backend, store, fleet_estop):
    big = json.dumps({"generation": "g", "reason": "x" * (1024 * 1024)}).encode()
    backend.plant(store, fleet_estop.layout.own, big)
    reading = only(fleet_estop)
    assert reading.state is HoldState.UNREADABLE
    assert "larger than" in reading.problem
    assert fleet_estop.is_engaged()


@pytest.mark.parametrize(
    "fields",
    [
        {"generation": "g1"},
        {"generation": "g1", "expires_at": None},
        {"generation": "g1", "expires_at": "not a time"},
        {"generation": "g1", "expires_at": 1700000000},
        {"generation": "g1", "expires_at": ""},
    ],
    ids=["absent", "null", "unparsable", "number", "empty"],
)
def test_missing_or_unparsable_deadline_is_active_without_deadline(backend, store, fleet_estop, clock, fields):
    backend.plant(store, fleet_estop.layout.own, body(**fields))
    clock.advance(days=3650)
    reading = only(fleet_estop)
    assert reading.state is HoldState.ACTIVE
    assert reading.hold.expires_at is None
    assert fleet_estop.is_engaged()


def test_future_deadline_is_active_until_exactly_then(backend, store, fleet_estop, clock):
    deadline = clock.now + timedelta(minutes=45)
    backend.plant(store, fleet_estop.layout.own, body(generation="g1", expires_at=format_instant(deadline)))
    clock.set(deadline - timedelta(microseconds=1))
    assert fleet_estop.is_engaged()
    clock.set(deadline)
    assert not fleet_estop.is_engaged()


def test_naive_stamp_is_read_as_utc(backend, store, fleet_estop, clock):
    deadline = clock.now + timedelta(hours=1)
    naive = deadline.replace(tzinfo=None).isoformat()
    backend.plant(store, fleet_estop.layout.own, body(generation="g1", expires_at=naive))
    clock.set(deadline - timedelta(seconds=1))
    assert only(fleet_estop).hold.expires_at == deadline
    assert fleet_estop.is_engaged()
    clock.set(deadline)
    assert not fleet_estop.is_engaged()


def test_zulu_and_offset_stamps_are_the_same_instant(backend, store, fleet_estop, clock):
    deadline = clock.now + timedelta(hours=1)
    stamp = (deadline + timedelta(hours=2)).replace(tzinfo=None).isoformat() + "+02:00"
    backend.plant(store, fleet_estop.layout.own, body(generation="g1", expires_at=stamp))
    assert only(fleet_estop).hold.expires_at == deadline
    backend.plant(store, fleet_estop.layout.own, body(generation="g2", expires_at=deadline.strftime("%Y-%m-%dT%H:%M:%SZ")))
    assert only(fleet_estop).hold.expires_at == deadline


def test_past_deadline_reads_lifted_and_only_the_deadman_retires_it(backend, store, fleet_estop, clock):
    past = clock.now - timedelta(seconds=1)
    backend.plant(store, fleet_estop.layout.own, body(generation="g1", expires_at=format_instant(past)))
    assert not fleet_estop.is_engaged()
    assert backend.present(store, fleet_estop.layout.own)  # a reader never removes (issue 32 item 8)
    assert fleet_estop.history() == []
    assert [r.fence.generation for r in fleet_estop.fleet.retire_expired()] == ["g1"]
    assert not backend.present(store, fleet_estop.layout.own)
    events = [e.event for e in fleet_estop.history()]
    assert events == ["expire"]


def test_bom_body_with_past_deadline_is_expired_and_retired_by_the_deadman(backend, store, fleet_estop, clock):
    past = clock.now - timedelta(minutes=5)
    raw = codecs.BOM_UTF8 + body(generation="g1", expires_at=format_instant(past), reason="window")
    backend.plant(store, fleet_estop.layout.own, raw)
    assert only(fleet_estop).state is HoldState.EXPIRED
    assert not fleet_estop.is_engaged()
    fleet_estop.fleet.retire_expired()
    assert not backend.present(store, fleet_estop.layout.own)


def test_bom_body_with_future_deadline_is_active(backend, store, fleet_estop, clock):
    future = clock.now + timedelta(minutes=5)
    raw = codecs.BOM_UTF8 + body(generation="g1", expires_at=format_instant(future), allow={"user_ids": ["7"]})
    backend.plant(store, fleet_estop.layout.own, raw)
    assert fleet_estop.is_engaged()
    assert fleet_estop.is_allowed("7")


@pytest.mark.parametrize(
    "allow",
    [
        "424242",
        ["424242"],
        {"user_ids": "424242"},
        {"user_ids": 424242},
        {"user_ids": ["424242"], "profiles": "ops"},
        {"user_ids": [["424242"]]},
        {"user_ids": [True]},
        {"user_ids": [424242.0]},
    ],
    ids=["bare-string", "list", "user_ids-string", "user_ids-number", "profiles-string", "nested", "bool", "float"],
)
def test_malformed_allowlist_is_active_and_admits_nobody(backend, store, fleet_estop, allow):
    backend.plant(store, fleet_estop.layout.own, body(generation="g1", allow=allow))
    assert fleet_estop.is_engaged()
    assert not fleet_estop.is_allowed("424242", "ops")
    assert not fleet_estop.gate("424242", "ops")


@pytest.mark.parametrize("listed, asked", [(424242, "424242"), ("424242", 424242), (424242, 424242)])
def test_ids_compare_as_strings(backend, store, fleet_estop, listed, asked):
    backend.plant(store, fleet_estop.layout.own, body(generation="g1", allow={"user_ids": [listed]}))
    assert fleet_estop.is_allowed(asked)


def test_unknown_fields_are_ignored(backend, store, fleet_estop):
    raw = body(generation="g1", allow={"user_ids": ["7"], "teams": ["x"]}, colour="red", armed_by="window:w")
    backend.plant(store, fleet_estop.layout.own, raw)
    assert fleet_estop.is_allowed("7")
    assert only(fleet_estop).hold.armed_by == "window:w"


# -- docs/design.md §4: deny wins, profile is not authority -----------------------------------------------


@pytest.mark.parametrize("order", ["root-first", "profile-first"])
def test_deny_wins_strict_root_and_permissive_profile(ops_estop, order):
    def strict_root():
        ops_estop.engage(reason="root", allow={"user_ids": ["alice"]}, fleet=True)

    def permissive_profile():
        ops_estop.engage(reason="ops", allow={"user_ids": ["alice", "bob"]})

    steps = [strict_root, permissive_profile] if order == "root-first" else [permissive_profile, strict_root]
    for step in steps:
        step()
    assert ops_estop.is_allowed("alice", "ops")
    assert not ops_estop.is_allowed("bob", "ops")
    assert not ops_estop.gate("bob", "ops")
    assert ops_estop.gate("alice", "ops")


def test_corrupt_profile_hold_denies_despite_permissive_root(backend, store, ops_estop):
    ops_estop.engage(reason="root", allow={"user_ids": ["alice"]}, fleet=True)
    backend.plant(store, ops_estop.layout.own, b"{corrupt")
    assert ops_estop.is_engaged()
    assert not ops_estop.is_allowed("alice", "ops")


def test_expired_hold_does_not_count_beside_a_fresh_one(ops_estop, clock):
    ops_estop.engage(reason="old", allow={"user_ids": ["bob"]}, ttl="10m")
    ops_estop.engage(reason="fresh", allow={"user_ids": ["alice"]}, ttl="2h", fleet=True)
    clock.advance(minutes=10)
    assert ops_estop.is_engaged()
    assert ops_estop.is_allowed("alice", "ops")
    assert not ops_estop.is_allowed("bob", "ops")
    assert [r.location.scope for r in ops_estop.holds()] == ["fleet"]


def test_no_hold_at_all_admits_nobody(ops_estop):
    assert not ops_estop.is_allowed("alice", "ops")
    assert not ops_estop.is_allowed(None, None)


def test_profiles_only_allowlist_admits_nobody(backend, store, fleet_estop):
    backend.plant(store, fleet_estop.layout.own, body(generation="g1", allow={"profiles": ["ops"]}))
    assert not fleet_estop.is_allowed(None, "ops")
    assert not fleet_estop.is_allowed("alice", "ops")
    assert not fleet_estop.gate(None, "ops")


def test_profiles_only_allowlist_written_through_the_api_admits_nobody(fleet_estop):
    fleet_estop.engage(allow={"profiles": ["ops"]})
    assert fleet_estop.is_engaged()
    assert not fleet_estop.is_allowed(None, "ops")
    assert not fleet_estop.is_allowed("alice", "ops")


def test_operator_input_refuses_a_profiles_only_allowlist():
    with pytest.raises(InvalidArgument, match="profile never grants"):
        Allow.of((), ["ops"])


def test_wrong_user_on_the_right_profile_stays_paused(fleet_estop):
    fleet_estop.engage(allow={"user_ids": ["alice"], "profiles": ["ops"]})
    assert not fleet_estop.gate("mallory", "ops")


def test_right_user_on_an_unlisted_profile_stays_paused(fleet_estop):
    fleet_estop.engage(allow={"user_ids": ["alice"], "profiles": ["ops"]})
    assert not fleet_estop.gate("alice", "research")
    assert not fleet_estop.gate("alice", None)
    assert fleet_estop.gate("alice", "ops")


def test_profile_hold_pauses_only_that_profile(fleet_estop, ops_estop):
    ops_estop.engage(reason="ops only")
    assert ops_estop.is_engaged()
    assert not fleet_estop.is_engaged()
    assert fleet_estop.for_profile("research").gate()


def test_fleet_hold_pauses_every_profile(fleet_estop):
    fleet_estop.engage(reason="everyone")
    for name in ("ops", "research"):
        assert fleet_estop.for_profile(name).is_engaged()


# -- docs/design.md §5: re-arm, replace ------------------------------------------------------------------


def test_rearm_keeps_allowlist_and_deadline(fleet_estop):
    first = fleet_estop.engage(reason="maint", allow={"user_ids": ["alice"], "profiles": ["ops"]}, ttl="45m")
    second = fleet_estop.engage(reason="still maint")
    assert second.generation != first.generation
    assert second.allow == first.allow
    assert second.expires_at == first.expires_at
    assert second.reason == "still maint"


def test_rearm_without_reason_keeps_reason(fleet_estop):
    fleet_estop.engage(reason="maint", ttl="45m")
    assert fleet_estop.engage(ttl="1h").reason == "maint"


def test_rearm_with_explicit_deadline_replaces_it(fleet_estop, clock):
    fleet_estop.engage(ttl="45m", allow={"user_ids": ["alice"]})
    again = fleet_estop.engage(ttl="2h")
    assert again.expires_at == clock.now + timedelta(hours=2)
    assert again.allow.user_ids == {"alice"}


def test_replace_clears_allowlist_deadline_and_reason(fleet_estop):
    fleet_estop.engage(reason="maint", allow={"user_ids": ["alice"]}, ttl="45m")
    fresh = fleet_estop.engage(replace=True)
    assert fresh.allow.empty
    assert fresh.expires_at is None
    assert fresh.reason is None
    assert not fleet_estop.is_allowed("alice")


def test_explicit_empty_allowlist_replaces(fleet_estop):
    fleet_estop.engage(allow={"user_ids": ["alice"]}, ttl="45m")
    emptied = fleet_estop.engage(allow={})
    assert emptied.allow.empty
    assert emptied.expires_at is not None
    assert not fleet_estop.is_allowed("alice")


def test_kept_deadline_that_has_passed_is_dropped(backend, store, fleet_estop, clock):
    past = clock.now - timedelta(minutes=1)
    backend.plant(store, fleet_estop.layout.own,
                  body(generation="g1", expires_at=format_instant(past), allow={"user_ids": ["alice"]}))
    hold = fleet_estop.engage(reason="again")
    assert hold.expires_at is None
    assert fleet_estop.is_engaged()


def test_engage_over_unreadable_hold_writes_a_fresh_body(backend, store, fleet_estop):
    backend.plant(store, fleet_estop.layout.own, b"garbage")
    hold = fleet_estop.engage(reason="fixed")
    assert only(fleet_estop).state is HoldState.ACTIVE
    assert only(fleet_estop).hold.generation == hold.generation


def test_every_engage_mints_a_new_generation(fleet_estop):
    generations = {fleet_estop.engage(reason=str(i)).generation for i in range(20)}
    assert len(generations) == 20


def test_vacant_precondition_never_replaces_a_standing_hold(fleet_estop):
    standing = fleet_estop.engage(reason="operator", allow={"user_ids": ["alice"]})
    with pytest.raises(HoldConflict):
        fleet_estop.engage(reason="window", only_if=VACANT)
    assert only(fleet_estop).hold.generation == standing.generation


def test_generation_precondition_rearms_only_its_own_hold(fleet_estop):
    mine = fleet_estop.engage(reason="window", only_if=VACANT)
    extended = fleet_estop.engage(reason="window", ttl="2h", only_if={mine.generation})
    operator = fleet_estop.engage(reason="operator")
    with pytest.raises(HoldConflict):
        fleet_estop.engage(reason="window", only_if={extended.generation})
    assert only(fleet_estop).hold.generation == operator.generation


# -- release and retire -------------------------------------------------------------------------


def test_release_removes_the_hold_and_is_audited(fleet_estop):
    hold = fleet_estop.engage(reason="maint")
    removed = fleet_estop.release()
    assert removed.hold.generation == hold.generation
    assert not fleet_estop.is_engaged()
    assert [e.event for e in fleet_estop.history()] == ["engage", "release"]


def test_release_of_another_generation_refuses_and_keeps_the_hold(fleet_estop):
    hold = fleet_estop.engage(reason="maint")
    with pytest.raises(HoldConflict, match="not the current"):
        fleet_estop.release(generation="somebody-else")
    assert only(fleet_estop).hold.generation == hold.generation


def test_release_removes_an_unreadable_hold(backend, store, fleet_estop):
    backend.plant(store, fleet_estop.layout.own, b"")
    assert fleet_estop.release() is not None
    assert not fleet_estop.is_engaged()


def test_disengage_removes_every_visible_hold(ops_estop):
    ops_estop.engage(reason="ops")
    ops_estop.engage(reason="fleet", fleet=True)
    assert ops_estop.disengage()
    assert not ops_estop.is_engaged()
    assert not ops_estop.disengage()


def test_retire_removes_only_its_generation(fleet_estop):
    first = fleet_estop.engage(reason="window")
    successor = fleet_estop.engage(reason="operator re-arm")
    assert not fleet_estop.retire(first.generation)
    assert only(fleet_estop).hold.generation == successor.generation
    assert fleet_estop.retire(successor.generation)
    assert not fleet_estop.is_engaged()


def test_audit_trail_records_every_write(fleet_estop, clock):
    g1 = fleet_estop.engage(reason="a", ttl="10m")
    g2 = fleet_estop.engage(reason="b")
    clock.advance(minutes=10)
    fleet_estop.is_engaged()
    g3 = fleet_estop.engage(reason="c")
    fleet_estop.retire(g3.generation)
    g4 = fleet_estop.engage(reason="d")
    fleet_estop.release()
    events = [(e.event, e.generation) for e in fleet_estop.history()]
    assert events == [
        ("engage", g1.generation), ("rearm", g2.generation), ("expire", g2.generation),
        ("engage", g3.generation), ("retire", g3.generation), ("engage", g4.generation),
        ("release", g4.generation),
    ]
    first = fleet_estop.history()[0]
    assert first.location == "fleet" and first.actor == "test@host" and first.reason == "a"
    assert first.deadline == g1.expires_at


# -- the generation fence -----------------------------------------------------------------------


def test_rearm_after_expiry_decision_survives_the_retirement(fleet_estop, store, clock):
    fleet_estop.engage(reason="window", ttl="10m")
    clock.advance(minutes=10)
    landed: dict[str, Any] = {}

    def interleave(step):
        if step == "expiry:decided" and not landed:
            landed["hold"] = fleet_estop.engage(reason="operator", ttl="1h")

    store.interleave = interleave
    try:
        assert fleet_estop.fleet.retire_expired() == []  # the deadman read before the re-arm landed
    finally:
        store.interleave = None
    assert landed, "the interleaving point was never reached"
    assert fleet_estop.is_engaged()
    assert only(fleet_estop).hold.generation == landed["hold"].generation


def test_rearm_landing_during_the_unlink_survives(fleet_estop, store, clock):
    fleet_estop.engage(reason="window", ttl="10m")
    clock.advance(minutes=10)
    threads: list[threading.Thread] = []
    landed = {}

    def rearm():
        landed["hold"] = fleet_estop.engage(reason="operator", ttl="1h")

    def interleave(step):
        if step == "retire:before-unlink" and not threads:
            thread = threading.Thread(target=rearm)
            thread.start()
            threads.append(thread)
            time.sleep(0.2)  # let the re-arm reach the lock the retirement holds

    store.interleave = interleave
    try:
        fleet_estop.fleet.retire_expired()
    finally:
        store.interleave = None
    assert threads, "the interleaving point was never reached"
    threads[0].join(10)
    assert fleet_estop.is_engaged()
    assert only(fleet_estop).hold.generation == landed["hold"].generation


def test_expiry_is_logged_once_per_generation(fleet_estop, clock, caplog):
    fleet_estop.engage(reason="window", ttl="10m")
    clock.advance(minutes=10)
    with caplog.at_level(logging.WARNING, logger="hermes_estop"):
        for _ in range(5):
            assert not fleet_estop.is_engaged()
        again = fleet_estop.engage(reason="second", ttl="10m")
        clock.advance(minutes=10)
        for _ in range(5):
            assert not fleet_estop.is_engaged()
    expired = [r for r in caplog.records if "EXPIRED" in r.getMessage()]
    assert len(expired) == 2
    assert again.generation in expired[1].getMessage()


# -- deadlines are refused before anything is written -------------------------------------------

BAD_TTLS = ["banana", "0", "-5m", "2915000d", "999999999d", "0s", "nan", "inf", "-inf", "1.5h", "45x", "PT0S",
            "367d", "P", "PT", "5m30", "m"]


@pytest.mark.parametrize("ttl", BAD_TTLS)
def test_bad_ttl_refused_and_standing_hold_untouched(fleet_estop, ttl):
    standing = fleet_estop.engage(reason="standing", allow={"user_ids": ["alice"]}, ttl="45m")
    with pytest.raises(InvalidDuration, match="invalid duration"):
        fleet_estop.engage(reason="new", ttl=ttl)
    after = only(fleet_estop).hold
    assert after == standing
    assert [e.event for e in fleet_estop.history()] == ["engage"]


@pytest.mark.parametrize("ttl", ["banana", "0", "-5m", "999999999d"])
def test_bad_ttl_refused_on_a_fresh_home_arms_nothing(backend, store, fleet_estop, ttl):
    with pytest.raises(InvalidDuration):
        fleet_estop.engage(ttl=ttl)
    assert not backend.present(store, fleet_estop.layout.own)
    assert fleet_estop.history() == []


@pytest.mark.parametrize("ttl", [float("nan"), float("inf"), -1, 0, True, 1.5, 10**12])
def test_bad_numeric_ttl_refused(fleet_estop, ttl):
    with pytest.raises(InvalidDuration):
        fleet_estop.engage(ttl=ttl)


@pytest.mark.parametrize("until", ["yesterday", "2026-13-01T00:00", "2020-01-01T00:00:00Z", "2030-01-01T00:00:00Z"])
def test_bad_until_refused_before_anything_is_written(backend, store, fleet_estop, until):
    with pytest.raises(InvalidInstant):
        fleet_estop.engage(expires_at=until)
    assert not backend.present(store, fleet_estop.layout.own)


def test_ttl_and_until_together_are_refused(fleet_estop):
    with pytest.raises(InvalidArgument):
        fleet_estop.engage(ttl="45m", expires_at="2026-06-01T13:00:00Z")


def test_generation_precondition_refuses_once_that_generation_was_released(fleet_estop, backend, store):
    mine = fleet_estop.engage(reason="window", only_if=VACANT)
    fleet_estop.release()
    with pytest.raises(HoldConflict):
        fleet_estop.engage(reason="window", only_if={mine.generation})
    assert not backend.present(store, fleet_estop.layout.own)


# -- issue 9 item 3, issue 13 items 4-6: what a (re-)engage takes from the standing hold ----------


def test_engage_over_an_unretired_expired_hold_inherits_nothing(backend, store, fleet_estop, clock):
    past = clock.now - timedelta(minutes=1)
    backend.plant(store, fleet_estop.layout.own,
                  body(generation="dead", reason="old maint", expires_at=format_instant(past),
                       allow={"user_ids": ["alice"], "profiles": ["ops"]}))
    fresh = fleet_estop.engage()
    assert fresh.reason is None and fresh.allow.empty and fresh.expires_at is None
    assert not fleet_estop.is_allowed("alice", "ops")
    events = [e.event for e in fleet_estop.history()]
    assert events[-1] == "engage" and "rearm" not in events


def test_explicit_empty_reason_clears_the_reason_on_rearm(fleet_estop):
    fleet_estop.engage(reason="maint", allow={"user_ids": ["alice"]}, ttl="45m")
    cleared = fleet_estop.engage(reason="")
    assert cleared.reason is None
    assert cleared.allow.user_ids == {"alice"} and cleared.expires_at is not None
    assert only(fleet_estop).hold.reason is None


@pytest.mark.parametrize("ttl", ["", "   "])
def test_empty_ttl_is_not_given_and_keeps_the_standing_deadline(fleet_estop, ttl):
    standing = fleet_estop.engage(reason="maint", ttl="45m")
    again = fleet_estop.engage(reason="still", ttl=ttl)
    assert again.expires_at == standing.expires_at


@pytest.mark.parametrize("listed, asked", [("424242", " 424242 "), (" 424242 ", "424242"), ("Alice", "alice")])
def test_ids_compare_exactly_without_stripping_or_case_folding(backend, store, fleet_estop, listed, asked):
    backend.plant(store, fleet_estop.layout.own, body(generation="g1", allow={"user_ids": [listed]}))
    assert not fleet_estop.is_allowed(asked)
    assert fleet_estop.is_allowed(listed)


def test_unparsable_deadline_is_flagged_on_the_reading(backend, store, fleet_estop):
    backend.plant(store, fleet_estop.layout.own, body(generation="g1", expires_at="garbage"))
    reading = only(fleet_estop)
    assert reading.state is HoldState.ACTIVE
    assert reading.problem == "deadline unreadable: held until resumed"


def test_history_since_keeps_the_events_at_or_after_it(fleet_estop, clock):
    for index in range(3):
        fleet_estop.engage(reason=f"r{index}")
        fleet_estop.release()
        clock.advance(minutes=10)
    since = clock.now - timedelta(minutes=20)
    events, _ = fleet_estop.fleet.history(None, since)
    assert [(e.event, e.reason) for e in events] == [("engage", "r1"), ("release", "r1"), ("engage", "r2"),
                                                     ("release", "r2")]
    assert [e.reason for e in fleet_estop.fleet.history(1, since)[0]] == ["r2"]


# -- the two parts of the contract (stores/base.py): holds, and the fleet's state -------------------------

def test_every_store_keeps_both_parts_of_the_contract(store):
    from hermes_estop.stores.base import FleetState, Holds

    assert isinstance(store, Holds) and isinstance(store, FleetState)


@pytest.mark.parametrize("part", ["Holds", "FleetState"])
def test_each_part_alone_names_what_a_backend_must_implement(part):
    import hermes_estop.stores.base as base

    with pytest.raises(TypeError, match="abstract"):
        getattr(base, part)()


def test_service_state_saved_by_one_store_is_loaded_by_another(backend, store, fleet_root):
    store.open_state("notify", fleet_root).save("ops-channel", {"position": 7})
    other = backend.open(fleet_root)
    try:
        assert other.open_state("notify", fleet_root).load()["ops-channel"] == {"position": 7}
    finally:
        other.close()
