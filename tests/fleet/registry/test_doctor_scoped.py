"""The coverage audit with scoped holds (issue 26): work a scoped hold does not cover is no breach,
work it covers is; the spans of a full and a scoped hold at one scope are kept apart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop.consumers.coverage import RecordedWork, breaches, hold_spans
from hermes_estop.model.audit_event import AuditEvent
from hermes_estop.model.hold import Hold
from hermes_estop.model.selector import Selector
from hermes_estop.stores.base import scoped_detail

T = datetime(2026, 6, 1, 12, tzinfo=UTC)


def line(event, minutes, generation, hold=None):
    return AuditEvent(T + timedelta(minutes=minutes), event, "fleet", generation, "op@h", None, None,
                      scoped_detail(hold))


def work(kind, name, minutes, profile=None):
    return RecordedWork(kind, name, T + timedelta(minutes=minutes), None, profile, 123, None, False)


KANBAN = Hold("gk", selector=Selector.of(["kanban"]), hold_id="k1")
NIGHTLY = Hold("gn", selector=Selector.of(["cron"], ["nightly-*"]), hold_id="n1")


@pytest.mark.parametrize("item, breach", [
    (work("cron job", "hourly", 5), False),
    (work("gateway turn", "t1", 5), False),
    (work("kanban card", "7", 5), True),
    (work("cron job", "nightly-db", 15), True),
    (work("cron job", "hourly", 15), False),
    (work("kanban card", "8", 25), False),  # after the kanban hold's release
])
def test_only_work_a_scoped_hold_covers_is_a_breach(item, breach):
    events = [line("engage", 0, "gk", KANBAN), line("engage", 10, "gn", NIGHTLY), line("release", 20, "gk", KANBAN),
              line("release", 30, "gn", NIGHTLY)]
    assert bool(breaches([item], hold_spans(events, ()), T + timedelta(hours=1))) is breach


def test_a_full_hold_released_under_a_scoped_one_closes_only_its_own_span():
    events = [line("engage", 0, "gf"), line("engage", 5, "gk", KANBAN), line("release", 10, "gf")]
    spans = hold_spans(events, ())
    assert sorted((s.generation, s.end is None) for s in spans) == [("gf", False), ("gk", True)]
    assert not breaches([work("cron job", "hourly", 15)], spans, T + timedelta(hours=1))
    assert breaches([work("kanban card", "9", 15)], spans, T + timedelta(hours=1))
