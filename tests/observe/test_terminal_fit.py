"""Terminal output fits the terminal it is given (issue 23 item 5): the timeline at any width
and range (one label format per axis, no trailing spaces, the heading wrapped rather than cut)
and `hermes status` at 80 columns."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from obs_helpers import write_windows

from hermes_estop.observe.terminal import render_timeline_text
from hermes_estop.observe.view import Observer
from inprocess_cli import completed

SRC = str(Path(__file__).resolve().parents[2] / "src")
NEW_YORK = {"name": "nightly-backup", "cron": "30 2 * * *", "timezone": "America/New_York", "duration": "2h",
            "drain": "15m", "reason": "nightly backup of the whole database cluster, every replica",
            "allow": {"user_ids": ["424242"]}}
WEEKLY_OPS = {"name": "ops-patching", "cron": "0 9 * * 3", "timezone": "UTC", "duration": "3h", "scope": "ops"}


@pytest.mark.parametrize("days", [1, 7, 31])
@pytest.mark.parametrize("width", [40, 60, 80, 132])
def test_the_timeline_fits_its_width_without_trailing_spaces(estop, fleet_root, width, days):
    write_windows(fleet_root, NEW_YORK, WEEKLY_OPS)
    estop.engage(reason="kernel", ttl="5h", fleet=True)
    lines = [line.plain for line in render_timeline_text(Observer(estop).view(days), width)]
    assert all(len(line) <= width for line in lines), lines
    assert all(line == line.rstrip() for line in lines), lines
    heading = " ".join(lines[:3])
    assert "UTC .." in heading and "one column = " in heading  # wrapped, never cut


@pytest.mark.parametrize("days", [7, 14, 31])
@pytest.mark.parametrize("width", [40, 80, 132])
def test_the_day_axis_uses_one_label_format(estop, fleet_root, width, days):
    write_windows(fleet_root, WEEKLY_OPS)
    lines = [line.plain for line in render_timeline_text(Observer(estop).view(days), width)]
    axis = next(line for line in lines if line.lstrip().startswith("|"))
    labels = [label for label in re.findall(r"\|([^|]*)", axis) if label.strip()]
    assert labels, axis
    named = [bool(re.fullmatch(r"[A-Z][a-z]{2} \d\d *", label)) for label in labels]
    numbered = [bool(re.fullmatch(r"\d\d *", label)) for label in labels]
    assert all(named) or all(numbered), axis


def test_status_fits_80_columns(tmp_path):
    root = tmp_path / "fleet"
    home = root / "profiles" / "ops"
    home.mkdir(parents=True)
    write_windows(root, NEW_YORK, WEEKLY_OPS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(home), HERMES_ROOT=str(root), COLUMNS="80", PYTHONPATH=SRC)

    def hermes(*args: str) -> str:
        result = completed(env, *args)  # in this process: its output is what is checked
        assert result.returncode == 0, result.stderr
        return result.stdout

    hermes("pause", "--fleet", "--reason", "kernel upgrade on every host of the fleet, then a reboot of each",
           "--ttl", "5h", "--allow-user", "424242", "--allow-profile", "ops")
    out = hermes("status")
    assert "nightly-backup" in out and "kernel upgrade" in out
    assert all(len(line) <= 80 for line in out.splitlines()), [line for line in out.splitlines() if len(line) > 80]
