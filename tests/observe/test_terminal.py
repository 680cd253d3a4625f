"""`hermes windows timeline`: one row per scope, as wide as the terminal, readable without
colour (each state has its own character)."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from obs_helpers import write_windows
from rich.console import Console

from hermes_estop.observe.terminal import print_timeline, render_timeline_text
from hermes_estop.observe.view import Observer
from inprocess_cli import completed

SRC = str(Path(__file__).resolve().parents[2] / "src")
NIGHTLY = {"name": "nightly", "cron": "0 2 * * *", "timezone": "UTC", "duration": "2h"}
WEEKLY_OPS = {"name": "ops-weekly", "cron": "30 9 * * 3", "timezone": "UTC", "duration": "3h", "scope": "ops"}


def rows(lines) -> dict[str, str]:
    """scope -> the cells of its row."""
    out = {}
    for line in lines:
        text = line.plain if hasattr(line, "plain") else line
        match = re.match(r"([a-z0-9_-]+) +\|(.*)$", text)
        if match:
            out[match.group(1)] = match.group(2)
    return out


def runs(cells: str, char: str) -> int:
    """How many separate runs of `char` a row has."""
    return sum(1 for i, c in enumerate(cells) if c == char and (i == 0 or cells[i - 1] != char))


@pytest.mark.parametrize("width", [60, 80, 132])
def test_one_row_per_scope_fitting_the_width(estop, fleet_root, width):
    write_windows(fleet_root, NIGHTLY, WEEKLY_OPS)
    lines = render_timeline_text(Observer(estop).view(7), width)
    assert all(len(line.plain) <= width for line in lines)
    table = rows(lines)
    assert list(table) == ["fleet", "ops"]
    assert runs(table["fleet"], "#") == 7
    assert runs(table["ops"], "#") == 1


def test_the_hold_and_its_deadman_are_characters_not_only_colour(estop, fleet_root, clock):
    write_windows(fleet_root, NIGHTLY)
    estop.engage(reason="x", ttl="1d", fleet=True)
    lines = render_timeline_text(Observer(estop).view(7), 80, color=True)
    fleet = rows(lines)["fleet"]
    assert fleet.startswith("H")
    assert fleet.count("|") == 1
    # one day of 7 in 73 columns: the deadman lands about a seventh of the way
    assert 8 <= fleet.index("|") <= 12


def test_a_hold_without_deadman_ends_in_an_arrow(estop):
    estop.engage(reason="manual", fleet=True)
    fleet = rows(render_timeline_text(Observer(estop).view(3), 80))["fleet"]
    assert fleet.endswith(">") and set(fleet[:-1]) == {"H"}


def test_an_occurrence_covering_now_is_drawn_with_at(estop, fleet_root, clock):
    write_windows(fleet_root, NIGHTLY)
    clock.set(datetime(2026, 6, 2, 3, tzinfo=UTC))
    fleet = rows(render_timeline_text(Observer(estop).view(7), 80))["fleet"]
    assert fleet.startswith("@")
    assert runs(fleet, "#") == 7  # and 7 more nights within the week


def test_print_timeline_writes_no_escape_sequences_without_a_terminal(estop, fleet_root):
    import io

    write_windows(fleet_root, NIGHTLY)
    out = io.StringIO()
    print_timeline(Observer(estop).view(7), Console(file=out, width=70, force_terminal=False))
    text = out.getvalue()
    assert "\x1b" not in text
    assert max(len(line) for line in text.splitlines()) <= 70


@pytest.mark.parametrize("columns", ["50", "100"])
def test_the_cli_draws_the_timeline_at_the_terminal_width(tmp_path, columns):
    root = tmp_path / "fleet"
    root.mkdir()
    write_windows(root, NIGHTLY, WEEKLY_OPS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(root), HERMES_ROOT=str(root), PYTHONPATH=SRC, COLUMNS=columns)
    result = completed(env, "windows", "timeline", "--days", "7")  # in this process: the output is checked
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= int(columns)
    assert "\x1b" not in result.stdout
    table = rows(lines)
    assert list(table) == ["fleet", "ops"]
    # 7 or 8 nightly runs: the range starts at the (real) current minute
    assert runs(table["fleet"], "#") + runs(table["fleet"], "@") in (7, 8)


@pytest.mark.parametrize("days", ["0", "32", "x"])
def test_the_cli_refuses_a_bad_days_with_exit_2(tmp_path, days):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(tmp_path), HERMES_ROOT=str(tmp_path), PYTHONPATH=SRC)
    result = completed(env, "windows", "timeline", "--days", days)
    assert result.returncode == 2
    assert "--days" in result.stderr
