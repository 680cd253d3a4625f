"""Instants beyond what the schedule math computes are user input: one line naming the file, the
window and the field, exit 2, never 70 (issue 20 item 2); `serve --once` arms the other windows."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

import inprocess_cli
from inprocess_cli import run

fleet = inprocess_cli.fleet


def far_beside_now(fleet, far: str) -> None:
    start = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    (fleet / "windows.toml").write_text(
        f'[[windows]]\nname = "now"\nat = {start}\nduration = "1h"\n\n'
        f'[[windows]]\nname = "far"\n{far}\n')


FAR = {
    "at": 'at = 9999-12-31T23:30:00Z\nduration = "1h"',
    "not_before": 'cron = "0 3 * * *"\nduration = "1h"\nnot_before = 9999-06-01T00:00:00Z',
    "early at": 'at = 0001-01-01T00:00:00Z\nduration = "1h"\ndrain = "1h"',
}


@pytest.mark.parametrize("field", FAR)
def test_windows_validate_names_an_instant_out_of_range_and_exits_2(fleet, capsys, field):
    far_beside_now(fleet, FAR[field])
    code, _, err = run(capsys, "windows", "validate")
    name = field.split()[-1]
    assert code == 2 and f"window 'far': field '{name}'" in err and str(fleet / "windows.toml") in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("field", FAR)
def test_serve_once_arms_the_window_covering_now_beside_one_out_of_range(fleet, capsys, field):
    far_beside_now(fleet, FAR[field])
    code, out, err = run(capsys, "serve", "--once", "--json")
    report = json.loads(out)
    assert code == 2 and "window 'far'" in err and "Traceback" not in err
    assert [e["kind"] for e in report["events"]] == ["arm"] and report["failed"]
    code, _, _ = run(capsys, "check", "-q")
    assert code == 1  # held: the window covering now armed


@pytest.mark.parametrize("args", [
    ("windows", "add", "x", "--at", "9999-12-31T23:30:00Z", "--duration", "1h"),
    ("windows", "add", "x", "--cron", "0 3 * * *", "--not-before", "9999-12-31T00:00:00Z", "--duration", "1h"),
    ("check", "--at", "9999-12-31T23:59:59", "--for", "1h"),
    ("check", "--at", "9999-12-31T23:59:59"),
])
def test_an_instant_out_of_range_on_the_command_line_exits_2_with_one_line(fleet, capsys, args):
    code, _, err = run(capsys, *args)
    assert code == 2 and err.startswith("hermes: error: ") and len(err.strip().splitlines()) == 1
    assert "9999" in err
