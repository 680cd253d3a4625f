"""`pg_notice`: which notified row changes a listener applies without re-reading the table. The
decisions are pure (PostgreSQL's visibility rule, the order of notices, arming only), so they are
tested on crafted snapshots here; `test_postgresql_notices.py` runs them against a real server."""

from __future__ import annotations

import json

import pytest

from hermes_estop.stores.pg_notice import apply_arming, parse_notice, parse_snapshot, visible

SNAPSHOT = parse_snapshot("100:105:101,103")


def upsert(xid: int, scope: str, body: bytes, revision: int) -> str:
    return json.dumps({"x": xid, "s": scope, "r": revision, "b": body.hex()})


def delete(xid: int, scope: str) -> str:
    return json.dumps({"x": xid, "s": scope, "d": True})


def row(body: bytes, revision: int) -> tuple[bytes, int]:
    return (body, revision)


@pytest.mark.parametrize(("xid", "seen"), [(99, True), (100, True), (101, False), (102, True), (103, False),
                                           (104, True), (105, False), (200, False)])
def test_visible_is_postgresqls_rule(xid, seen):
    assert SNAPSHOT is not None
    assert visible(xid, SNAPSHOT) is seen


def test_a_snapshot_with_nothing_running_parses():
    snapshot = parse_snapshot("7:7:")
    assert snapshot is not None and (snapshot.xmin, snapshot.xmax, snapshot.running) == (7, 7, frozenset())


@pytest.mark.parametrize("text", ["", "7:7", "a:b:", "7:7:x", None])
def test_a_snapshot_that_does_not_parse_applies_nothing(text):
    assert parse_snapshot(text) is None  # type: ignore[arg-type]
    assert apply_arming({}, [upsert(200, "ops", b"a", 1)], parse_snapshot(text), row) is None  # type: ignore[arg-type]


def test_new_rows_committed_after_the_re_read_are_applied_in_delivery_order():
    rows = {"fleet": row(b"old", 1)}
    got = apply_arming(rows, [upsert(105, "ops", b"a", 7), upsert(103, "dev", b"b", 8)], SNAPSHOT, row)
    assert got == {"fleet": (b"old", 1), "ops": (b"a", 7), "dev": (b"b", 8)}
    assert rows == {"fleet": (b"old", 1)}  # the installed mapping is never changed in place


def test_an_unreadable_body_arms_too():
    assert apply_arming({}, [upsert(200, "fleet", b"", 3)], SNAPSHOT, row) == {"fleet": (b"", 3)}


@pytest.mark.parametrize("payloads", [
    [delete(200, "fleet")],  # a release: only a re-read may lift a hold
    [upsert(200, "fleet", b"new", 9)],  # a change of a row we have (a re-arm, a scoped release)
    [upsert(200, "ops", b"a", 1), delete(201, "fleet")],  # one weakening notice re-reads the batch
    [upsert(200, "ops", b"a", 1), upsert(201, "ops", b"b", 2)],  # the second changes a row the first made
    [delete(200, "ops")],  # the deletion of a row we do not have: our rows are not what was committed
])
def test_anything_but_a_new_row_asks_for_a_re_read(payloads):
    assert apply_arming({"fleet": row(b"old", 1)}, payloads, SNAPSHOT, row) is None


def test_a_change_the_re_read_already_shows_is_skipped():
    """A release re-read before its notice arrives: the notice of the engage before it (visible
    in the re-read's snapshot) must not put the released hold back, and the release's own
    notice (visible too) needs no second re-read."""
    rows: dict[str, tuple[bytes, int]] = {}
    got = apply_arming(rows, [upsert(102, "fleet", b"held", 5), delete(104, "fleet")], SNAPSHOT, row)
    assert got is rows


@pytest.mark.parametrize("payload", [
    "*",  # TRUNCATE, a body too large for a notification
    "fleet",  # the trigger of schema version 1 and 2: the scope only
    "{}", "[1]", "123", '{"x": 200, "s": "fleet"}', '{"x": "200", "s": "fleet", "d": true}',
    '{"x": 200, "s": "fleet", "r": 3, "b": "zz"}', '{"x": 200, "s": "fleet", "r": "3", "b": "00"}',
    '{"x": 200, "s": 7, "r": 3, "b": "00"}', '{"x": true, "s": "fleet", "r": 3, "b": "00"}', "[" * 100000,
])
def test_a_notice_without_a_change_asks_for_a_re_read(payload):
    assert parse_notice(payload) is None
    assert apply_arming({}, [upsert(200, "ops", b"a", 1), payload], SNAPSHOT, row) is None


def test_no_notice_is_applied_before_a_first_re_read():
    assert apply_arming({}, [upsert(200, "ops", b"a", 1)], None, row) is None
