"""`consumers.published_jobs` (issue 47): a cron consumer's table as its registry entry carries
it, bounded, and read back as untrusted input (a bad row skipped and counted, never raised)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop.consumers.crontable import CronJob
from hermes_estop.consumers.published_jobs import KEY, MAX_BYTES, published, read_published

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)


def job(name: str, **fields) -> CronJob:
    base = CronJob(name, "rm -rf /secret", "30 2 * * *", "Europe/Berlin", None, "7", "ops", timedelta(minutes=20),
                   NOW, NOW + timedelta(hours=14), no_overlap_window=True)
    return CronJob(**{**base.__dict__, **fields})


def test_round_trip_keeps_what_the_impact_needs_and_no_command():
    original = [job("backup"), job("once", schedule=None, timezone="UTC", at=NOW + timedelta(days=1), owner=None,
                                   profile=None, no_overlap_window=False)]
    extra = published(original)
    assert "rm -rf" not in json.dumps(extra)
    jobs, problem = read_published(json.loads(json.dumps(extra)))
    assert problem is None
    keep = ("name", "schedule", "timezone", "at", "owner", "profile", "next_run_at", "timeout", "no_overlap_window")
    assert [[getattr(j, k) for k in keep] for j in jobs] == [[getattr(j, k) for k in keep] for j in original]


def test_the_entry_is_bounded_and_says_how_many_are_left_out():
    extra = published(job(f"job-{i:05d}-{'x' * 60}") for i in range(5_000))
    assert len(json.dumps(extra[KEY]["jobs"])) <= MAX_BYTES
    jobs, problem = read_published(extra)
    assert extra[KEY]["total"] == 5_000 and 0 < len(jobs) < 5_000
    assert problem == f"{5_000 - len(jobs)} job(s) not published (the entry is bounded)"


@pytest.mark.parametrize("row", [
    pytest.param("not a row", id="not-a-list"),
    pytest.param(["x", "30 2 * * *", "UTC", None, "7", None, None, 60], id="too-short"),
    pytest.param([1, "30 2 * * *", "UTC", None, "7", None, None, 60, False], id="name-not-text"),
    pytest.param(["x" * 300, "30 2 * * *", "UTC", None, "7", None, None, 60, False], id="name-too-long"),
    pytest.param(["x", "30 2 * * *", "UTC", None, "7", None, "yesterday", 60, False], id="bad-instant"),
    pytest.param(["x", "30 2 * * *", "UTC", None, "7", None, None, True, False], id="timeout-a-bool"),
    pytest.param(["x", None, "UTC", None, "7", None, None, 60, False], id="neither-schedule-nor-at"),
])
def test_a_bad_row_is_skipped_and_counted(row):
    good = published([job("good")])[KEY]
    jobs, problem = read_published({KEY: {**good, "jobs": [*good["jobs"], row], "total": 2}})
    assert [j.name for j in jobs] == ["good"] and problem == "1 published row(s) unreadable"


@pytest.mark.parametrize("value", [{"format": 2, "jobs": []}, [], "x", {"format": 1, "jobs": {}}])
def test_a_shape_not_understood_is_one_problem(value):
    assert read_published({KEY: value}) == ((), "its published cron jobs are not in a format this version reads")


def test_no_publication_is_no_problem():
    assert read_published({}) == ((), None)
