"""Fleet-wide impact on PostgreSQL (issue 47): a cron consumer publishes its table in its registry
entry (`CronService`, refreshed when the table changes), and `windows impact` on another host
counts those jobs with the homes under its own root. Real PostgreSQL, an injected clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hermes_estop import Estop
from hermes_estop.consumers.crontable import CronTable
from hermes_estop.consumers.loops import CronService
from hermes_estop.consumers.published_jobs import KEY, published
from hermes_estop.observe.impact_preview import read_queued, window_impact, window_occurrence
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile
from pg_helpers import pg_server, pg_url  # noqa: F401

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def pg_estop(pg_url: str, fleet_root: Path, clock):  # noqa: F811
    clock.set(NOW)
    WindowsFile(fleet_root).save([Window.parse({"name": "nightly", "cron": "0 2 * * *", "duration": "2h"})])
    estop = Estop(home=fleet_root, root=fleet_root, store=pg_url, clock=clock)
    yield estop
    estop.close()


def cron_entries(estop: Estop):
    return [e for e in estop.fleet.consumers().entries() if e.component == "cron"]


def test_the_cron_consumer_publishes_its_table_and_refreshes_it_when_it_changes(pg_estop, fleet_root):
    table = CronTable(fleet_root)
    table.add("backup", "true", now=NOW, schedule="30 2 * * *", owner="7")
    service = CronService(pg_estop, interval=15.0)
    service.reporter = service.registration()
    assert service.reporter is not None and service.reporter.register()
    try:
        service.tick()
        service.reporter.report()
        [entry] = cron_entries(pg_estop)
        assert [row[0] for row in entry.extra[KEY]["jobs"]] == ["backup"]
        table.add("report", "true", now=NOW, schedule="0 3 * * *", owner="8")
        service.tick()
        service.reporter.report()
        [entry] = cron_entries(pg_estop)
        assert [row[0] for row in entry.extra[KEY]["jobs"]] == ["backup", "report"]
    finally:
        service.reporter.deregister()


def test_impact_counts_the_jobs_another_host_publishes(pg_estop, fleet_root, tmp_path):
    """The other host's consumer, as its reporter writes it: its entry under its host name."""
    elsewhere = tmp_path / "other-host-root"
    CronTable(elsewhere).add("remote-backup", "true", now=NOW, schedule="30 2 * * *", owner="7")
    reporter = CronService(pg_estop, interval=15.0).registration()
    assert reporter is not None
    entry = replace(reporter.entry, host="other-host", home="/srv/fleet", extra=published(CronTable(elsewhere).jobs()))
    pg_estop.fleet.consumers().put(entry)
    CronTable(fleet_root).add("local-backup", "true", now=NOW, schedule="45 2 * * *", owner="7")

    queued = read_queued(pg_estop)
    assert [t.home for t in queued.tables][-1] == "other-host:/srv/fleet"
    window, occurrence = window_occurrence(pg_estop, "nightly", 1, NOW)
    assert occurrence is not None
    found = window_impact(pg_estop, window, occurrence, NOW, queued).impact
    assert {(j.home.split("/")[-1], j.name, j.held_count) for j in found.jobs} == {
        ("fleet", "remote-backup", 1), (fleet_root.name, "local-backup", 1)}
    assert found.homes == 2


def test_a_lost_hosts_publication_is_not_counted(pg_estop, clock):
    reporter = CronService(pg_estop, interval=15.0).registration()
    assert reporter is not None
    stale = replace(reporter.entry, host="gone-host", reported_at=NOW - timedelta(hours=1),
                    extra={KEY: {"format": 1, "total": 1, "jobs": [
                        ["old", "30 2 * * *", "UTC", None, "7", None, None, 60, False]]}})
    pg_estop.fleet.consumers().put(stale)
    assert all(not t.home.startswith("gone-host:") for t in read_queued(pg_estop).tables)
