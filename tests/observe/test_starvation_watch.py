"""`observe.starvation_watch` (issue 47 item 3): `hermes serve` logs a cron job the windows starve
once when it starts starving and once when it clears, from real homes at an injected time."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hermes_estop import Estop, FileStore
from hermes_estop.consumers.crontable import CronTable
from hermes_estop.observe.starvation_watch import StarvationWatch
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import upcoming
from hermes_estop.windows.skips import skip_occurrence, unskip_occurrence
from hermes_estop.windows.windows_file import WindowsFile

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
NIGHTLY = Window.parse({"name": "nightly", "cron": "0 2 * * *", "duration": "2h"})


@pytest.fixture
def estop(fleet_root: Path, clock) -> Estop:
    """A fleet whose nightly window [02:00, 04:00) covers every run of the root's 02:30 job."""
    clock.set(NOW)
    WindowsFile(fleet_root).save([NIGHTLY])
    CronTable(fleet_root).add("nightly-job", "true", now=NOW, schedule="30 2 * * *", owner="7")
    return Estop(home=fleet_root, root=fleet_root, store=FileStore(fleet_root), clock=clock)


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "hermes_estop.serve"]


def test_logged_once_when_it_starts_and_once_when_it_clears(estop, clock, caplog):
    caplog.set_level(logging.INFO, logger="hermes_estop.serve")
    watch = StarvationWatch(estop)
    watch.tick()
    watch.tick()  # still starving: nothing more
    assert [line.split(":")[0] for line in lines(caplog)] == ["starvation"]
    assert "cron job nightly-job (home " in lines(caplog)[0] and "never runs on its schedule" in lines(caplog)[0]
    skipped = upcoming(NIGHTLY, NOW, 3)[2]
    skip_occurrence(estop.fleet, NIGHTLY, skipped, NOW)  # frees the run of the third night: saved
    watch.tick()
    assert len(lines(caplog)) == 2 and "runs on its schedule again" in lines(caplog)[1]
    unskip_occurrence(estop.fleet, NIGHTLY, skipped, NOW)
    clock.advance(timedelta(minutes=10))
    watch.tick()
    assert len(lines(caplog)) == 3 and "never runs on its schedule" in lines(caplog)[2]


def test_only_the_elected_scheduler_logs(estop, caplog):
    caplog.set_level(logging.INFO, logger="hermes_estop.serve")
    watch = StarvationWatch(estop, is_leader=lambda: False)
    watch.tick()
    assert lines(caplog) == [] and watch.starving == {}


def test_it_registers_no_consumer(estop):
    """It starts no work: no entry in the consumer registry (no acknowledgement owed by it)."""
    assert StarvationWatch(estop).registration() is None
