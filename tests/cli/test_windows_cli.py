"""`hermes windows ...`: add, list, remove, next, validate, schema; bad input is one line, exit 2.
Run in-process through `hermes_estop.cli.main` (the console-script entry) for speed; the
subprocess fixture covers the real entry point once."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import inprocess_cli
from inprocess_cli import run

fleet = inprocess_cli.fleet  # the fixture: a fleet root as this process's home


def test_add_list_next_remove(fleet, capsys):
    code, out, _ = run(capsys, "windows", "add", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
                       "--duration", "1h", "--reason", "db maintenance", "--allow-user", "424242",
                       "--allow-profile", "ops", "--profile", "ops")
    assert code == 0 and "added window nightly" in out
    code, out, _ = run(capsys, "windows", "list", "--json")
    [window] = json.loads(out)["windows"]
    assert window == {"name": "nightly", "cron": "30 2 * * *", "timezone": "Europe/Berlin", "at": None,
                      "duration": "1h", "reason": "db maintenance",
                      "allow": {"user_ids": ["424242"], "profiles": ["ops"]}, "scope": "ops", "enabled": True,
                      "not_before": None, "not_after": None}
    code, out, _ = run(capsys, "windows", "next", "nightly", "--count", "3", "--json")
    listed = json.loads(out)["occurrences"]
    assert code == 0 and len(listed) == 3
    assert all(o["local_start"].endswith(("+01:00", "+02:00")) and "T02:30:00" in o["local_start"] for o in listed)
    code, out, _ = run(capsys, "windows", "next")
    assert code == 0 and out.count("nightly") == 1  # every window: its next occurrence (issue 24)
    code, out, _ = run(capsys, "windows", "next", "-n", "5")
    assert code == 0 and out.count("nightly") == 5
    code, out, _ = run(capsys, "windows", "next", "nightly")
    assert code == 0 and out.count("nightly") == 5
    code, out, _ = run(capsys, "windows", "remove", "nightly")
    assert code == 0 and "removed window nightly" in out
    code, out, _ = run(capsys, "windows", "list")
    assert "no windows" in out


def test_add_one_shot_and_validate(fleet, capsys):
    start = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    code, out, _ = run(capsys, "windows", "add", "once", "--at", start.isoformat(), "--duration", "PT2H", "--json")
    assert code == 0 and json.loads(out)["next"]["start"] == start.isoformat()
    code, out, _ = run(capsys, "windows", "validate")
    assert code == 0 and out.startswith("ok: 1 window(s)")


@pytest.mark.parametrize(
    "args, words",
    [
        (["--cron", "* * * * * *", "--duration", "1h"], "field 'cron'"),
        (["--cron", "* * * * *", "--tz", "Nowhere/City", "--duration", "1h"], "field 'timezone'"),
        (["--cron", "* * * * *", "--duration", "0"], "field 'duration'"),
        (["--cron", "* * * * *", "--duration", "-5m"], "field 'duration'"),
        (["--cron", "* * * * *", "--duration", "400d"], "field 'duration'"),
        (["--cron", "* * * * *"], "--duration is required"),
        (["--cron", "* * * * *", "--at", "2030-01-01T00:00:00Z", "--duration", "1h"], "exactly one of --cron"),
        (["--duration", "1h"], "exactly one of --cron"),
        (["--at", "2030-01-01T00:00:00Z", "--tz", "Europe/Berlin", "--duration", "1h"], "--tz applies"),
        (["--at", "2020-01-01T00:00:00Z", "--duration", "1h"], "already over"),
        (["--at", "next tuesday", "--duration", "1h"], "invalid --at 'next tuesday'"),  # issue 38: --at reads 15:00 too
        (["--cron", "* * * * *", "--duration", "1h", "--allow-profile", "ops"], "without --allow-user"),
        (["--cron", "* * * * *", "--duration", "1h", "--profile", "../x"], "field 'scope'"),
    ],
)
def test_add_refuses_bad_input_with_one_line_and_writes_nothing(fleet, capsys, args, words):
    code, _out, err = run(capsys, "windows", "add", "w", *args)
    assert code == 2
    assert words in err and err.count("\n") == 1 and err.startswith("hermes: error: ")
    assert not (fleet / "windows.toml").exists()


def test_bad_name_and_duplicate_are_refused(fleet, capsys):
    code, _, err = run(capsys, "windows", "add", "Bad Name", "--cron", "* * * * *", "--duration", "1h")
    assert code == 2 and "field 'name'" in err
    assert run(capsys, "windows", "add", "w", "--cron", "* * * * *", "--duration", "1h")[0] == 0
    code, _, err = run(capsys, "windows", "add", "w", "--cron", "0 * * * *", "--duration", "1h")
    assert code == 2 and "already exists" in err
    code, _, err = run(capsys, "windows", "remove", "nope")
    assert code == 2 and "'nope': no such window" in err


@pytest.mark.parametrize("command", [["validate"], ["list"], ["next"], ["add", "x", "--cron", "* * * * *", "--duration", "1h"]])
def test_a_bad_file_fails_naming_the_file_window_and_field(fleet, capsys, command):
    path = fleet / "windows.toml"
    path.write_text('[[windows]]\nname = "nightly"\ncron = "30 2 * * *"\nduration = "0"\n')
    code, _, err = run(capsys, "windows", *command)
    assert code == 2
    assert err.strip() == (f"hermes: error: {path}: window 'nightly': field 'duration': "
                           "invalid duration '0': must be positive")


def test_schema_is_json_schema_of_the_file(fleet, capsys):
    code, out, _ = run(capsys, "windows", "schema")
    schema = json.loads(out)
    assert code == 0 and schema["properties"]["windows"]["type"] == "array"
    assert "cron" in schema["$defs"]["Window"]["properties"]


def test_status_shows_windows_and_survives_a_bad_file(fleet, capsys):
    run(capsys, "windows", "add", "nightly", "--cron", "30 2 * * *", "--duration", "1h")
    code, out, _ = run(capsys, "status")
    assert code == 0 and "nightly: cron '30 2 * * *' UTC for 1h, fleet" in out and "next " in out
    code, out, _ = run(capsys, "status", "--json")
    assert json.loads(out)["windows"][0]["name"] == "nightly"
    (fleet / "windows.toml").write_text("[[[")
    code, out, _ = run(capsys, "status")
    flowed = " ".join(out.split())  # status wraps long lines to the terminal: a long tmp path moves the break
    assert code == 0 and "windows: " in flowed and "not valid TOML" in flowed


def test_real_entry_point_exit_code_and_one_line(hermes):
    result = hermes("windows", "add", "w", "--cron", "* * * *", "--duration", "1h")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "field 'cron'" in result.stderr


@pytest.mark.parametrize("kind", ["fifo", "directory"])
@pytest.mark.parametrize("command", ["validate", "list", "next"])
def test_a_windows_file_that_is_not_a_regular_file_is_refused_with_one_line(fleet, capsys, kind, command):
    import os

    path = fleet / "windows.toml"
    if kind == "fifo":
        os.mkfifo(path)  # opening it for reading must not hang
    else:
        path.mkdir()
    code, out, err = run(capsys, "windows", command)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and str(path) in err and "refusing" in err


def test_windows_next_uses_the_fleets_clock(fleet, capsys, monkeypatch):
    from hermes_estop.cli import windows as cli_windows

    run(capsys, "windows", "add", "nightly", "--cron", "0 3 * * *", "--duration", "1h")
    monkeypatch.setattr(cli_windows, "_now", lambda: datetime(2030, 1, 1, 12, tzinfo=UTC))
    code, out, _ = run(capsys, "windows", "next", "--json", "-n", "1")
    assert code == 0
    data = json.loads(out)
    assert data["now"] == "2030-01-01T12:00:00+00:00"
    assert data["occurrences"][0]["start"] == "2030-01-02T03:00:00+00:00"



@pytest.mark.parametrize("args", [["windows", "next", "NIGHTLY"], ["windows", "explain", "nightli"],
                                  ["windows", "skip", "nightli", "--next"], ["windows", "unskip", "nightli", "--next"],
                                  ["windows", "impact", "nigthly"]], ids=lambda a: a[1])
def test_every_command_taking_a_window_name_refuses_an_unknown_one_alike_with_a_guess(fleet, capsys, args):
    assert run(capsys, "windows", "add", "nightly", "--cron", "30 2 * * *", "--duration", "1h")[0] == 0
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert f"no window named {args[2]!r} in {fleet / 'windows.toml'}: did you mean 'nightly'?" in err
    assert err.count("\n") == 1


def test_add_in_starts_a_one_shot_that_long_from_now(fleet, capsys):
    before = datetime.now(UTC)
    code, out, _ = run(capsys, "windows", "add", "soon", "--in", "10m", "--duration", "5m", "--json")
    after = datetime.now(UTC)
    assert code == 0
    start = datetime.fromisoformat(json.loads(out)["next"]["start"])
    assert before + timedelta(minutes=10) - timedelta(seconds=1) <= start <= after + timedelta(minutes=10)


@pytest.mark.parametrize("args", [
    ("--in", "10m", "--at", "2030-01-01T00:00:00Z"),
    ("--in", "10m", "--cron", "30 2 * * *"),
    ("--in", "banana"),
    ("--in", "-5m"),
])
def test_add_in_refuses_bad_or_conflicting_values_in_one_line(fleet, capsys, args):
    code, _out, err = run(capsys, "windows", "add", "bad", *args, "--duration", "5m")
    assert code == 2
    assert len(err.strip().splitlines()) == 1


def test_readme_window_examples_work_on_any_day():
    """The runnable one-shot examples of the README and the documentation site start relative to
    now (`--in`), never at a fixed instant that will be in the past, and need no GNU `date -d`."""
    root = Path(__file__).resolve().parents[2]
    readme = "\n".join(page.read_text() for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))])
    assert "date -d" not in readme and "date -u -d" not in readme
    runnable = [line for line in readme.splitlines() if line.startswith("hermes windows add") and "--cron" not in line]
    assert runnable and all("--in " in line for line in runnable), runnable
