"""Issue 25: a lease's renewals are coalesced in `hermes history` (one line per run of them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop.model.audit_event import AuditEvent, coalesce_renewals

T0 = datetime(2026, 6, 1, tzinfo=UTC)


def ev(event: str, seconds: int, *, actor: str = "run@h", reason: str | None = "maintenance", location: str = "fleet"):
    return AuditEvent(T0 + timedelta(seconds=seconds), event, location, f"g{seconds}", actor, reason)


def test_consecutive_renewals_fold_into_the_last_one():
    events = [ev("engage", 0), ev("rearm", 1), ev("rearm", 2), ev("rearm", 3), ev("release", 4)]
    folded = coalesce_renewals(events)
    assert [(e.event, e.generation, n) for e, n in folded] == [("engage", "g0", 1), ("rearm", "g3", 3),
                                                                ("release", "g4", 1)]


@pytest.mark.parametrize("other", [
    ev("rearm", 2, actor="operator@h"),
    ev("rearm", 2, reason="something else"),
    ev("rearm", 2, location="ops"),
])
def test_a_rearm_by_someone_else_or_for_another_reason_is_never_folded(other):
    events = [ev("engage", 0), ev("rearm", 1), other, ev("rearm", 3)]
    assert len(coalesce_renewals(events)) == 4
