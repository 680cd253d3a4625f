"""`hermes windows validate` warns about a cron job the windows starve (issue 47 item 3): every
run of it within the horizon falls inside their holds. Real subprocesses on a real fleet root;
`--strict` makes it exit 2; a skip that frees one run saves the job."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop.consumers.crontable import CronTable
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile


@pytest.fixture
def starved(hermes):
    """A nightly window [02:00, 04:00) UTC and a job at 02:30 UTC: every run is held."""
    hermes.home.mkdir(parents=True)
    WindowsFile(hermes.home).save([Window.parse({"name": "nightly", "cron": "0 2 * * *", "duration": "2h"})])
    table = CronTable(hermes.home)
    table.add("nightly-job", "true", now=datetime.now(UTC), schedule="30 2 * * *", owner="7")
    table.add("daytime", "true", now=datetime.now(UTC), schedule="0 12 * * *", owner="7")
    return hermes


def test_validate_warns_naming_the_starving_job(starved):
    result = starved("windows", "validate", check=0)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("hermes: warning: ")]
    assert len(warnings) == 1 and "cron job nightly-job (home " in warnings[0]
    assert "never runs on its schedule in the next 7d" in warnings[0] and "inside nightly" in warnings[0]
    assert result.stdout.startswith("ok: 1 window(s)")


def test_validate_json_lists_the_starving_job(starved):
    data = json.loads(starved("windows", "validate", "--json", check=0).stdout)
    assert [job["job"] for job in data["starving"]] == ["nightly-job"]
    assert data["starving"][0]["held_by"] == ["window:nightly"] and len(data["warnings"]) == 1


def test_strict_exits_2(starved):
    result = starved("windows", "validate", "--strict", check=2)
    assert result.stderr.strip().splitlines()[-1] == "hermes: error: 1 cron job(s) never run on their schedule (--strict)"


def test_a_skip_that_frees_one_run_saves_it(starved):
    day = (datetime.now(UTC) + timedelta(days=2)).date().isoformat()
    starved("windows", "skip", "nightly", "--on", day, check=0)
    result = starved("windows", "validate", "--strict", check=0)
    assert "warning" not in result.stderr


@pytest.mark.parametrize("planted", ["directory", "fifo"])
def test_an_unusable_board_does_not_stop_the_check_nor_warn_it_unchecked(starved, planted):
    """The board plays no part in starvation: a board that cannot be read leaves the warning
    naming the job and adds no "starvation not checked" line."""
    board = starved.home / "kanban.db"
    board.mkdir() if planted == "directory" else os.mkfifo(board)
    result = starved("windows", "validate", "--strict", check=2)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("hermes: warning: ")]
    assert len(warnings) == 1 and "cron job nightly-job (home " in warnings[0]


def test_a_damaged_cron_table_is_named_as_not_checked(starved):
    (starved.home / "cron" / "jobs.json").write_bytes(b"{not json")
    result = starved("windows", "validate", check=0)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("hermes: warning: ")]
    assert len(warnings) == 1 and warnings[0].startswith("hermes: warning: starvation not checked for the cron table of ")
