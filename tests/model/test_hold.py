"""The body: parsing untrusted bytes, merging a re-arm, and the property that the predicate never
fails open on arbitrary sentinel bytes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.hold import (
    ALLOWLIST_MALFORMED,
    DEADLINE_UNREADABLE,
    NOBODY,
    Allow,
    EngageRequest,
    Hold,
    HoldState,
    clean_reason,
    encode_body,
    merge_hold,
    parse_body,
    prepare,
)
from hermes_estop.model.homes import Layout
from hermes_estop.model.text import unsafe_char
from hermes_estop.process.estop import Estop
from hermes_estop.stores import FileStore

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def test_encoded_body_is_wire_compatible_with_hermes_agent():
    hold = Hold("g1", NOW, "maint", NOW + timedelta(minutes=45), Allow.of(["42"], ["ops"]), "alice@host",
                {"name": "nightly", "occurrence": NOW.isoformat()})
    data = json.loads(encode_body(hold))
    assert data["generation"] == "g1"
    assert datetime.fromisoformat(data["engaged_at"]) == NOW
    assert datetime.fromisoformat(data["expires_at"]) == NOW + timedelta(minutes=45)
    assert data["allow"] == {"user_ids": ["42"], "profiles": ["ops"]}
    assert data["reason"] == "maint" and data["armed_by"] == "alice@host"
    assert parse_body(encode_body(hold)) == hold


def test_merge_keeps_what_the_request_leaves_out():
    standing = Hold("g1", NOW, "maint", NOW + timedelta(hours=1), Allow.of(["42"]))
    merged = merge_hold(standing, EngageRequest(reason="more"), NOW, "g2")
    assert (merged.generation, merged.reason, merged.allow, merged.expires_at) == ("g2", "more", standing.allow,
                                                                                    standing.expires_at)


def test_merge_with_replace_starts_from_nothing():
    standing = Hold("g1", NOW, "maint", NOW + timedelta(hours=1), Allow.of(["42"]))
    merged = merge_hold(standing, EngageRequest(replace=True), NOW, "g2")
    assert (merged.reason, merged.allow, merged.expires_at) == (None, NOBODY, None)


def test_merge_drops_a_kept_deadline_that_has_passed():
    standing = Hold("g1", NOW, "maint", NOW, Allow.of(["42"]))
    assert merge_hold(standing, EngageRequest(), NOW, "g2").expires_at is None


def is_expired_well_formed(raw: bytes, now: datetime) -> bool:
    """Oracle, written independently of the package: a UTF-8 JSON object whose `expires_at` is
    an ISO-8601 string at or before `now` (naive = UTC)."""
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except ValueError:
        return False
    if not isinstance(data, dict) or not isinstance(data.get("expires_at"), str):
        return False
    try:
        stamp = datetime.fromisoformat(data["expires_at"].strip())
    except ValueError:
        return False
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp <= now


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
stamps = st.one_of(
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2100, 1, 1), timezones=st.none() | st.just(UTC)).map(lambda d: d.isoformat()),
    st.text(max_size=30),
    json_values,
)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "generation": st.one_of(st.text(max_size=12), json_values),
        "expires_at": stamps,
        "engaged_at": stamps,
        "reason": json_values,
        "allow": st.one_of(json_values, st.fixed_dictionaries({}, optional={"user_ids": json_values, "profiles": json_values})),
    },
)
sentinel_bytes = st.one_of(
    st.binary(max_size=300),
    bodies.map(lambda d: json.dumps(d).encode()),
    bodies.map(lambda d: b"\xef\xbb\xbf" + json.dumps(d).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=sentinel_bytes, user=st.one_of(st.none(), st.text(max_size=5), st.integers()), profile=st.one_of(st.none(), st.text(max_size=5)))
def test_predicate_never_raises_and_never_fails_open(tmp_path_factory, raw, user, profile):
    root = tmp_path_factory.mktemp("prop")
    estop = Estop(layout=Layout(home=root, root=root), store=FileStore(root), clock=lambda: NOW)
    estop.sentinel_path().write_bytes(raw)
    verdict = estop.gate(user, profile)
    assert verdict.engaged is not is_expired_well_formed(raw, NOW), raw
    if verdict.admitted:
        assert verdict.engaged


# -- issue 9 item 3: an expired body contributes nothing to a new engagement ----------------------


def test_merge_over_an_expired_standing_hold_starts_from_nothing():
    standing = Hold("g1", NOW - timedelta(hours=2), "old", NOW - timedelta(seconds=1), Allow.of(["42"], ["ops"]))
    merged = merge_hold(standing, EngageRequest(), NOW, "g2")
    assert (merged.reason, merged.allow, merged.expires_at) == (None, NOBODY, None)


def test_merge_over_a_hold_expiring_exactly_now_starts_from_nothing():
    standing = Hold("g1", NOW - timedelta(hours=2), "old", NOW, Allow.of(["42"]))
    assert merge_hold(standing, EngageRequest(), NOW, "g2").allow == NOBODY


# -- issue 13 item 5: reason None keeps, "" clears ------------------------------------------------


def test_flagless_rearm_keeps_the_reason_and_explicit_empty_clears_it():
    standing = Hold("g1", NOW, "maint", None, Allow.of(["42"]))
    assert merge_hold(standing, EngageRequest(reason=clean_reason(None)), NOW, "g2").reason == "maint"
    for blank in ("", "   "):
        cleared = merge_hold(standing, EngageRequest(reason=clean_reason(blank)), NOW, "g2")
        assert cleared.reason is None and cleared.allow == standing.allow


# -- issue 13 item 4, issue 9 item 14: ids are exact strings, never control characters -------------


@pytest.mark.parametrize("listed, asked, admitted", [
    ("424242", "424242", True), ("424242", 424242, True), ("424242", " 424242 ", False),
    (" 424242 ", "424242", False), ("Alice", "alice", False),
])
def test_allow_compares_ids_exactly(listed, asked, admitted):
    allow = Allow.of([listed])
    assert allow.admits(asked, None) is admitted
    parsed = parse_body(json.dumps({"allow": {"user_ids": [listed]}}).encode()).allow
    assert parsed.admits(asked, None) is admitted


def test_allowlist_profiles_compare_exactly():
    allow = Allow.of(["42"], ["ops"])
    assert allow.admits("42", "ops") and not allow.admits("42", " ops") and not allow.admits("42", "OPS")


@pytest.mark.parametrize("bad, shown", [("42\x1b[31m", "\\x1b"), ("\u202e42", "\\u202e"), ("4\n2", "\\x0a"),
                                        ("42\u2066", "\\u2066")])
def test_ids_with_control_characters_or_bidi_overrides_are_refused_in_one_line(bad, shown):
    for make in (lambda: Allow.of([bad]), lambda: Allow.of(["42"], [bad])):
        with pytest.raises(InvalidArgument) as caught:
            make()
        message = str(caught.value)
        assert "\n" not in message and shown in message and unsafe_char(message) is None


# -- issue 15 item 2: what in a body could not be read is flagged -----------------------------------


@pytest.mark.parametrize("deadline", ["garbage", 12345, "2026-13-01", {"at": "x"}])
def test_unparsable_deadline_is_a_problem_not_an_expiry(deadline):
    hold = parse_body(json.dumps({"generation": "g", "expires_at": deadline}).encode())
    assert hold.expires_at is None and DEADLINE_UNREADABLE in hold.problems
    reading = prepare(Layout(home=Path("/r"), root=Path("/r")).fleet, hold, None).at(NOW)
    assert reading.state is HoldState.ACTIVE and reading.problem == DEADLINE_UNREADABLE


@pytest.mark.parametrize("deadline", [None, ""])
def test_absent_deadline_is_no_problem(deadline):
    hold = parse_body(json.dumps({"generation": "g", "expires_at": deadline}).encode())
    assert hold.problems == ()
    assert prepare(Layout(home=Path("/r"), root=Path("/r")).fleet, hold, None).at(NOW).problem is None


def test_malformed_allowlist_is_a_problem_on_the_reading():
    hold = parse_body(json.dumps({"generation": "g", "allow": {"user_ids": "42"}}).encode())
    reading = prepare(Layout(home=Path("/r"), root=Path("/r")).fleet, hold, None).at(NOW)
    assert reading.problem == ALLOWLIST_MALFORMED
