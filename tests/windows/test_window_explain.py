"""`windows.explain`: the facts that decide whether a window holds at an instant (issue 11 §3),
pure: what holds from an instant on (here a window's own occurrences), the instant, the ledger's
entries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop.windows.explain import Explanation, explain as explain_ahead
from hermes_estop.windows.forecast import window_ahead
from hermes_estop.windows.ledger import ARMED, RELEASED, SKIPPED, LedgerEntry
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import next_start

NIGHTLY = {"name": "nightly", "cron": "30 2 * * *", "timezone": "Europe/Berlin", "duration": "1h"}
# 2026-12-03 02:30 CET = 01:30 UTC
START = datetime(2026, 12, 3, 1, 30, tzinfo=UTC)


def window(**extra) -> Window:
    return Window.parse(NIGHTLY | extra)


def explain(w: Window, at: datetime, entries: dict[str, LedgerEntry]) -> Explanation:
    return explain_ahead(window_ahead(w, at), at, entries)


def entry(w: Window, start: datetime, state: str, generation: str | None = None) -> dict[str, LedgerEntry]:
    occurrence = next_start(w, start - timedelta(seconds=1))
    assert occurrence is not None and occurrence.start == start
    return {occurrence.key: LedgerEntry(occurrence.key, w.name, occurrence.ident, w.scope,
                                        occurrence.end, state, generation)}


def test_an_armed_occurrence_covering_the_instant_holds_and_names_its_generation():
    w = window()
    result = explain(w, START + timedelta(minutes=10), entry(w, START, ARMED, "g1"))
    assert result.holds and result.covering is not None and result.covering.start == START
    assert any("armed as generation g1" in fact for fact in result.facts)
    assert result.facts[-1].startswith("so window nightly holds fleet")
    assert result.to_json()["covering"]["end"] == (START + timedelta(hours=1)).isoformat()


@pytest.mark.parametrize(("state", "said"), [(SKIPPED, "skipped"), (RELEASED, "released early")])
def test_a_covering_occurrence_the_ledger_closed_does_not_hold(state, said):
    w = window()
    result = explain(w, START + timedelta(minutes=10), entry(w, START, state))
    assert not result.holds
    assert any(said in fact for fact in result.facts)


def test_a_disabled_window_never_holds_even_inside_an_occurrence():
    result = explain(window(enabled=False), START + timedelta(minutes=10), {})
    assert not result.holds and any("disabled" in fact for fact in result.facts)


def test_the_instant_at_the_end_is_not_covered_half_open():
    w = window()
    result = explain(w, START + timedelta(hours=1), entry(w, START, ARMED, "g1"))
    assert not result.holds and result.covering is None
    assert result.next is not None and result.next.start == START + timedelta(days=1)


def test_the_drain_lead_covers_the_instant_before_the_start():
    w = window(drain="15m")
    result = explain(w, START - timedelta(minutes=5), {})
    assert result.holds and result.covering is not None
    assert result.covering.arm_at == START - timedelta(minutes=15)
    assert any("drain lead" in fact for fact in result.facts)
    assert not explain(w, START - timedelta(minutes=16), {}).holds


def test_excluded_starts_between_the_instant_and_the_next_occurrence_are_listed():
    w = window(exclude=["2026-12-24", "2026-12-25"])
    result = explain(w, datetime(2026, 12, 23, 12, 0, tzinfo=UTC), {})
    assert [s.date().isoformat() for s in result.excluded] == ["2026-12-24", "2026-12-25"]
    assert result.next is not None and result.next.start == datetime(2026, 12, 26, 1, 30, tzinfo=UTC)
    assert any("excluded start(s)" in fact for fact in result.facts)


def test_a_window_past_not_after_has_no_occurrence_ahead():
    w = window(not_after="2026-12-01T00:00:00Z")
    result = explain(w, START, {})
    assert not result.holds and result.next is None
    assert any("not_after" in fact for fact in result.facts) and "no occurrence ahead" in result.facts


def test_a_skipped_next_occurrence_is_said_so():
    w = window()
    result = explain(w, START - timedelta(hours=2), entry(w, START, SKIPPED))
    assert not result.holds and result.next is not None and result.next.start == START
    assert any(fact.startswith("next occurrence: ") and fact.endswith("(skipped)") for fact in result.facts)
