"""An edit of what a covering window holds acts as what it is (issue 32 item 9): holding more
(components, job globs) acts at the next read, holding less waits for the stability rule and is
then applied, and neither is taken for an operator's early release. On the fake clock, with the
real scheduler, ledger and sentinel."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from schedule_queries import rows

from hermes_estop.model.selector import Selector, holds_at_least, hull
from hermes_estop.windows.ledger import ARMED, RELEASED
from hermes_estop.windows.model import Window
from hermes_estop.windows.plan import FileGuard, strengthens

EPOCH = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # the `clock` fixture's start
CONFIRM = timedelta(seconds=5)  # the service's stability period (WEAKEN_AFTER)
COMPONENTS = ("cron", "kanban", "gateway")
NAMES = ("nightly-db", "nightly-x", "backup", "other")
WORK = [(component, name) for component in COMPONENTS for name in NAMES]


def maint(only=(), jobs=()) -> dict:
    start = EPOCH + timedelta(hours=1)
    return {"name": "maint", "at": start.isoformat(), "duration": "1h", "reason": "db",
            **({"only": list(only)} if only else {}), **({"jobs": list(jobs)} if jobs else {})}


def held(harness) -> set[tuple[str, str]]:
    return {(c, n) for c, n in WORK if not harness.estop.gate(None, None, c, n)}


def covered(only=(), jobs=()) -> set[tuple[str, str]]:
    selector = Selector.of(only, jobs)
    return {(c, n) for c, n in WORK if selector is None or selector.covers(c, n)}


def armed(harness, only=(), jobs=()) -> None:
    harness.write(maint(only, jobs))
    harness.start()
    harness.run_until(EPOCH + timedelta(hours=1))


def edit(harness, only=(), jobs=()) -> None:
    harness.write(maint(only, jobs))


def poll(harness, after: timedelta):
    harness.run_until(EPOCH + timedelta(hours=1, minutes=1) + after, poll=True)
    return harness.reports[-1]


def released(harness) -> list[str]:
    return [key for key, entry in harness.entries().items() if entry.state == RELEASED]


def test_widening_a_covering_window_to_a_full_hold_holds_kanban_and_the_gateway_at_the_next_read(harness):
    armed(harness, only=["cron"])
    assert held(harness) == covered(only=["cron"])
    edit(harness)
    report = poll(harness, timedelta(0))
    assert report.pending is None
    assert held(harness) == set(WORK)
    reading = harness.reading()
    assert reading.hold.expires_at == EPOCH + timedelta(hours=2) and reading.scoped == ()  # the cron hold retired
    assert released(harness) == [] and harness.entries()[f"fleet/maint@{(EPOCH + timedelta(hours=1)).isoformat()}"].state == ARMED


def test_narrowing_a_covering_window_waits_for_the_stability_rule_then_frees_what_it_no_longer_holds(harness):
    armed(harness)
    generation = harness.reading().hold.generation
    edit(harness, only=["cron"])
    assert poll(harness, timedelta(0)).pending
    assert poll(harness, CONFIRM - timedelta(seconds=1)).pending
    assert held(harness) == set(WORK) and harness.reading().hold.generation == generation
    poll(harness, CONFIRM)
    assert held(harness) == covered(only=["cron"])
    reading = harness.reading()
    assert reading.hold is None and [s.hold.selector.components for s in reading.scoped] == [{"cron"}]
    assert released(harness) == []
    assert [e.generation for e in harness.events("retire")] == [generation]


def test_an_edit_that_moves_a_window_to_other_work_holds_the_new_work_at_once_and_the_old_until_confirmed(harness):
    armed(harness, only=["cron"])
    edit(harness, only=["kanban"])
    assert poll(harness, timedelta(0)).pending
    assert held(harness) == covered(only=["cron", "kanban"])
    poll(harness, CONFIRM)
    assert held(harness) == covered(only=["kanban"])
    assert released(harness) == []


def test_an_operator_release_after_a_selector_edit_is_still_the_operators(harness):
    armed(harness, only=["cron"])
    edit(harness)
    poll(harness, timedelta(0))
    harness.estop.release(fleet=True)
    poll(harness, timedelta(seconds=10))
    assert held(harness) == set()
    assert len(released(harness)) == 1


def test_a_confirmed_removal_of_a_scoped_window_retires_its_scoped_hold(harness):
    armed(harness, only=["cron"])
    harness.file.remove("maint")
    assert poll(harness, timedelta(0)).pending
    assert held(harness) == covered(only=["cron"])
    poll(harness, CONFIRM)
    assert held(harness) == set() and harness.reading().scoped == ()
    assert harness.entries()[f"fleet/maint@{(EPOCH + timedelta(hours=1)).isoformat()}"].state == "withdrawn"


@pytest.mark.parametrize(("old", "new", "stronger"), [
    ({"only": ["cron"]}, {}, True),
    ({"only": ["cron"]}, {"only": ["cron", "kanban"]}, True),
    ({"only": ["cron"], "jobs": ["a*"]}, {"only": ["cron"]}, True),
    ({"jobs": ["a*"]}, {"jobs": ["a*", "b*"]}, True),
    ({"jobs": ["ab"]}, {"jobs": ["*"]}, True),
    ({}, {"only": ["cron"]}, False),
    ({"only": ["cron", "kanban"]}, {"only": ["cron"]}, False),
    ({"only": ["cron"]}, {"only": ["kanban"]}, False),
    ({"only": ["cron"]}, {"only": ["cron"], "jobs": ["a*"]}, False),
    ({"jobs": ["ab"]}, {"jobs": ["a*"]}, False),  # not proven from the names: waits (the safe side)
])
def test_guard_judges_a_selector_edit_by_what_it_holds(old, new, stronger):
    base = {"name": "b", "cron": "0 4 * * *", "duration": "1h"}
    before, after = Window.parse(base | old), Window.parse(base | new)
    assert strengthens(before, after) is stronger
    guard = FileGuard(CONFIRM)
    assert guard.judge((1,), rows([before]), {}, EPOCH).trusted
    verdict = guard.judge((2,), rows([after]), {}, EPOCH)
    assert verdict.trusted is stronger
    (acted,) = verdict.windows
    assert holds_at_least(acted.selector, after.selector) and holds_at_least(acted.selector, before.selector)


def test_a_calendar_window_edit_is_judged_by_its_selector_too():
    from hermes_estop.windows.calendars import CalendarWindow

    feed = object()
    base = {"name": "cal", "at": EPOCH.isoformat(), "duration": "1h"}
    wide = CalendarWindow.model_construct(**vars(Window.parse(base)), calendar_feed=feed)
    narrow = CalendarWindow.model_construct(**vars(Window.parse(base | {"only": ["cron"]})),
                                            calendar_feed=feed)
    assert strengthens(narrow, wide) and not strengthens(wide, narrow)


SELECTORS = st.tuples(st.lists(st.sampled_from(COMPONENTS), unique=True, max_size=2),
                      st.lists(st.sampled_from(("nightly-*", "nightly-db", "backup", "*")), unique=True, max_size=2))


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(old=SELECTORS, new=SELECTORS)
def test_a_selector_edit_holds_what_it_adds_at_once_and_frees_what_it_drops_only_after_the_stability_rule(
        harness, clock, old, new):
    """Each example is a fresh fleet and scheduler (the fixtures only lend their classes)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "fleet"
        root.mkdir()
        harness = type(harness)(root, type(clock)(EPOCH))
        try:
            armed(harness, *old)
            before, after = covered(*old), covered(*new)
            assert held(harness) == before
            edit(harness, *new)
            poll(harness, timedelta(0))
            now_held = held(harness)
            assert after <= now_held, "what the edit adds is held at the next read"
            assert before <= now_held, "what the edit drops is not freed before the stability rule"
            poll(harness, CONFIRM - timedelta(seconds=1))
            assert before | after <= held(harness)
            poll(harness, CONFIRM)
            poll(harness, CONFIRM + timedelta(seconds=1))
            assert held(harness) == after, "once confirmed, the edit is applied"
            assert released(harness) == [], "an edit is never an operator's early release"
        finally:
            harness.close()


def test_hull_holds_both_and_holds_at_least_is_a_preorder():
    a, b = Selector.of(["cron"], ["a*"]), Selector.of(["kanban"], ["b*"])
    both = hull(a, b)
    assert holds_at_least(both, a) and holds_at_least(both, b) and not holds_at_least(a, both)
    assert hull(a, None) is None and holds_at_least(None, a) and not holds_at_least(a, None)
