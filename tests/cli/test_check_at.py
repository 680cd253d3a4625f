"""`hermes check --at TIME [--for DUR]` (issue 11 section 3), run in this process: would work
be held at that instant, or at any instant of `[TIME, TIME+DUR)`, counting the holds standing now
(with their deadmen) and every window occurrence (drain lead included). Exit 0 / 1 as `check`,
2 with one line on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile

#: a one-shot window well ahead of the real clock the subprocesses read
WINDOW_AT = (datetime.now(UTC) + timedelta(days=20)).replace(minute=0, second=0, microsecond=0)


def iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def minutes(n: float) -> str:
    """WINDOW_AT shifted by n minutes, as the operator types it."""
    return iso(WINDOW_AT + timedelta(minutes=n))


@pytest.fixture
def fleet(hermes):
    """A fleet root with one window: [WINDOW_AT, +1h), a 15 min drain lead, admitting 42."""
    hermes.home.mkdir(parents=True, exist_ok=True)
    WindowsFile(hermes.home).save([Window.parse({
        "name": "upgrade", "at": iso(WINDOW_AT), "duration": "1h", "drain": "15m",
        "reason": "db upgrade", "allow": {"user_ids": ["42"]},
    })])
    return hermes


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize(("args", "code"), [
    pytest.param(["--at", minutes(30)], 1, id="inside-the-window"),
    pytest.param(["--at", minutes(-10)], 1, id="inside-the-drain-lead"),
    pytest.param(["--at", minutes(-16)], 0, id="before-the-drain-lead"),
    pytest.param(["--at", minutes(60)], 0, id="at-the-end-half-open"),
    pytest.param(["--at", minutes(-30), "--for", "15m"], 0, id="range-ending-where-the-drain-starts"),
    pytest.param(["--at", minutes(-30), "--for", "16m"], 1, id="range-crossing-the-drain-start"),
    pytest.param(["--at", minutes(-600), "--for", "12h"], 1, id="long-job-cut-off-by-the-window"),
    pytest.param(["--at", minutes(30), "--user", "42"], 0, id="allowlisted-user-admitted"),
    pytest.param(["--at", minutes(30), "--user", "7"], 1, id="other-user-held"),
])
def test_check_at_exit_code(fleet, args, code):
    result = fleet("check", *args)
    assert result.returncode == code, (result.stdout, result.stderr)
    assert result.stdout.startswith("held" if code else "proceed")


def test_a_future_window_is_reported_with_its_times(fleet):
    result = fleet("check", "--at", minutes(-120), "--for", "3h", check=1)
    out = result.stdout
    assert "window:upgrade" in out
    assert WINDOW_AT.isoformat() in out  # the occurrence (its start)
    assert (WINDOW_AT - timedelta(minutes=15)).isoformat() in out  # held from the drain lead
    assert (WINDOW_AT + timedelta(hours=1)).isoformat() in out  # until its end
    assert "db upgrade" in out


def test_check_at_json_prints_the_intervals(fleet):
    data = json.loads(fleet("check", "--at", minutes(-120), "--for", "3h", "--json", check=1).stdout)
    assert data["proceed"] is False and data["held"] is True
    assert data["start"] == (WINDOW_AT - timedelta(hours=2)).isoformat()
    assert data["end"] == (WINDOW_AT + timedelta(hours=1)).isoformat()
    (interval,) = data["intervals"]
    assert interval["start"] == (WINDOW_AT - timedelta(minutes=15)).isoformat()
    assert interval["end"] == (WINDOW_AT + timedelta(hours=1)).isoformat()
    (hold,) = interval["holds"]
    assert hold["source"] == "window:upgrade" and hold["scope"] == "fleet"
    assert hold["occurrence"] == WINDOW_AT.isoformat()
    assert hold["from"] == interval["start"] and hold["until"] == interval["end"]
    assert hold["allow"]["user_ids"] == ["42"]


def test_check_at_json_when_free(fleet):
    data = json.loads(fleet("check", "--at", minutes(120), "--json", check=0).stdout)
    assert data["proceed"] is True and data["held"] is False and data["intervals"] == []


def test_a_standing_hold_counts_until_its_deadman(hermes):
    hermes("pause", "--ttl", "2h", "--reason", "hotfix", check=0)
    now = datetime.now(UTC)
    result = hermes("check", "--at", iso(now + timedelta(hours=1)), check=1)
    assert "hold at fleet" in result.stdout and "hotfix" in result.stdout
    hermes("check", "--at", iso(now + timedelta(hours=3)), check=0)


def test_a_window_of_a_profile_holds_that_profile_only(hermes):
    hermes.home.mkdir(parents=True, exist_ok=True)
    WindowsFile(hermes.home).save([Window.parse({"name": "ops-only", "at": iso(WINDOW_AT), "duration": "1h",
                                                 "scope": "ops"})])
    hermes("check", "--at", minutes(10), "--profile", "ops", check=1)
    hermes("check", "--at", minutes(10), "--profile", "dev", check=0)
    hermes("check", "--at", minutes(10), check=0)


def test_control_characters_in_a_reason_are_escaped(hermes):
    hermes("pause", "--ttl", "2h", "--reason", "evil\x1b[31m", check=0)
    result = hermes("check", "--at", iso(datetime.now(UTC) + timedelta(minutes=30)), check=1)
    assert "\x1b" not in result.stdout and "\\x1b" in result.stdout


@pytest.mark.parametrize(("args", "named"), [
    (["--at", "tomorrow"], "'tomorrow'"),
    (["--at", "2026-13-45T00:00:00Z"], "2026-13-45"),
    (["--at", minutes(0), "--for", "0"], "--for"),
    (["--at", minutes(0), "--for", "soon"], "'soon'"),
    (["--at", minutes(0), "--for", "400d"], "'400d'"),
    (["--for", "30m"], "--at"),
    (["--at", minutes(0), "--profile", "fleet"], "fleet"),
])
def test_bad_input_exits_2_with_one_line_naming_the_value(fleet, args, named):
    result = fleet("check", *args, check=2)
    line = one_error_line(result)
    assert named in line
    assert result.stdout == ""


def test_a_windows_file_that_does_not_validate_is_exit_2_naming_it(hermes):
    hermes.home.mkdir(parents=True, exist_ok=True)
    (hermes.home / "windows.toml").write_text('[[windows]]\nname = "x"\ncron = "bad"\nduration = "1h"\n')
    line = one_error_line(hermes("check", "--at", minutes(0), check=2))
    assert str(hermes.home / "windows.toml") in line and "cron" in line
    hermes("check", check=0)  # the live check never reads windows.toml


PROBE = """
import sys
from hermes_estop.cli import main

#: the subject is each command's output, exit code and files: `hermes` runs in this process
HERMES_IN_PROCESS = True
code = main(sys.argv[1:])
print("typer-loaded" if "typer" in sys.modules else "typer-not-loaded", file=sys.stderr)
print("forecast-loaded" if "hermes_estop.process.forecast" in sys.modules else "forecast-not-loaded", file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize(("args", "hot"), [
    (["check"], True),
    (["check", "--user", "42", "--json"], True),
    (["check", "--at", minutes(30)], False),
    (["check", "--at", minutes(30), "--for", "1h", "--json"], False),
])
def test_only_check_at_leaves_the_hot_path(fleet, args, hot):
    result = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=fleet.env,
                            timeout=60)
    assert result.returncode in (0, 1), result.stderr
    if hot:
        assert "typer-not-loaded" in result.stderr and "forecast-not-loaded" in result.stderr
    else:
        assert "typer-loaded" in result.stderr and "forecast-loaded" in result.stderr


@pytest.mark.parametrize(("span", "code"), [("1h", 0), ("21d", 1)])
def test_check_at_now_asks_from_the_fleets_clock(fleet, span, code):
    """`--at now --for DUR`: "would a job started now be cut off?" (the question
    `cron add --no-overlap-window` asks), the window being twenty days ahead."""
    result = fleet("check", "--at", "now", "--for", span, "--json")
    assert result.returncode == code, result.stderr
    document = json.loads(result.stdout)
    started = datetime.fromisoformat(document["start"])
    assert abs((started - datetime.now(UTC)).total_seconds()) < 120
    assert document["proceed"] is (code == 0)


@pytest.mark.parametrize(("selector", "covers", "body"), [
    ({}, "all", None),
    ({"only": ["kanban"]}, "kanban", {"components": ["kanban"], "jobs": []}),
    ({"only": ["cron"], "jobs": ["nightly-*"]}, "cron:nightly-*", {"components": ["cron"], "jobs": ["nightly-*"]}),
])
def test_a_forecast_shows_what_a_window_covers_in_text_and_json(hermes, selector, covers, body):
    hermes.home.mkdir(parents=True, exist_ok=True)
    WindowsFile(hermes.home).save([Window.parse({"name": "kb", "at": iso(WINDOW_AT), "duration": "1h", **selector})])
    text = hermes("check", "--at", minutes(30), check=1).stdout
    assert "window:kb at fleet" in text and f"covers {covers}" in text
    data = json.loads(hermes("check", "--at", minutes(30), "--json", check=1).stdout)
    (hold,) = data["intervals"][0]["holds"]
    assert (hold["covers"], hold["selector"]) == (covers, body)


@pytest.mark.parametrize(("args", "covers"), [([], "all"), (["--only", "gateway"], "gateway")])
def test_a_forecast_shows_what_a_standing_hold_covers(hermes, args, covers):
    hermes("pause", *args, check=0)
    text = hermes("check", "--at", iso(datetime.now(UTC) + timedelta(hours=1)), check=1).stdout
    assert f"covers {covers}" in text
    data = json.loads(hermes("check", "--at", iso(datetime.now(UTC) + timedelta(hours=1)), "--json", check=1).stdout)
    (hold,) = data["intervals"][0]["holds"]
    assert hold["covers"] == covers and (hold["hold"] is None) == (not args)
