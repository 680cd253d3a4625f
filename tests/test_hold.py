"""The body: parsing untrusted bytes, merging a re-arm, and the property that the predicate never
fails open on arbitrary sentinel bytes."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_estop.estop import Estop
from hermes_estop.hold import NOBODY, Allow, EngageRequest, Hold, encode_body, merge_hold, parse_body
from hermes_estop.homes import Layout
from hermes_estop.stores import FileStore

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)


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
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp <= now


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
stamps = st.one_of(
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2100, 1, 1), timezones=st.none() | st.just(timezone.utc)).map(lambda d: d.isoformat()),
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
