"""`hermes windows explain NAME [--at TIME] [--json]` (issue 11 §3): the chain of facts behind
"does this window hold at T", read from the real windows.toml and ledger; an unknown window or a
bad time is one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import inprocess_cli
from inprocess_cli import run

fleet = inprocess_cli.fleet  # the fixture: a fleet root as this process's home


@pytest.fixture
def windows_fleet(fleet: Path) -> Path:
    """`fleet` with the window these tests explain."""
    (fleet / "windows.toml").write_text(
        '[[windows]]\nname = "nightly"\ncron = "0 2 * * *"\ntimezone = "Europe/Berlin"\nduration = "1h"\n'
        'drain = "15m"\nexclude = ["2027-12-25"]\n')
    return fleet


def explained(capsys, *args: str) -> dict:
    code, out, _ = run(capsys, "windows", "explain", "nightly", "--json", *args)
    assert code == 0
    return json.loads(out)


@pytest.mark.parametrize(("at", "holds", "part"), [
    ("2027-03-10T01:30:00Z", True, "(it)"),                 # 02:30 Berlin, inside the hour
    ("2027-03-10T00:50:00Z", True, "(its drain lead)"),     # 01:50 Berlin, inside the 15m lead
    ("2027-03-10T00:40:00Z", False, None),                  # before the lead
    ("2027-03-10T02:00:00Z", False, None),                  # 03:00 Berlin: the deadman has passed
])
def test_explain_says_whether_the_occurrence_covering_the_instant_holds(windows_fleet, capsys, at, holds, part):
    result = explained(capsys, "--at", at)
    assert result["holds"] is holds
    assert result["facts"][-1].startswith(f"so window nightly {'holds fleet' if holds else 'does not hold'}")
    if part is None:
        assert result["covering"] is None
    else:
        assert result["covering"]["start"] == "2027-03-10T01:00:00+00:00"
        assert result["covering"]["arm_at"] == "2027-03-10T00:45:00+00:00"
        assert any(part in fact for fact in result["facts"])


def test_explain_names_the_excluded_date_before_the_next_occurrence(windows_fleet, capsys):
    result = explained(capsys, "--at", "2027-12-24T12:00:00Z")
    assert result["holds"] is False
    assert result["excluded"] == ["2027-12-25T01:00:00+00:00"]
    assert result["next"]["start"] == "2027-12-26T01:00:00+00:00"


def test_explain_reads_a_skip_from_the_ledger(windows_fleet, capsys):
    code, _, _ = run(capsys, "windows", "skip", "nightly", "--occurrence", "2027-03-10T01:00:00Z")
    assert code == 0
    result = explained(capsys, "--at", "2027-03-10T01:30:00Z")
    assert result["holds"] is False
    assert any("skipped: it does not arm" in fact for fact in result["facts"])


def test_explain_text_prints_one_line_per_fact(windows_fleet, capsys):
    code, out, _ = run(capsys, "windows", "explain", "nightly", "--at", "2027-03-10T01:30:00Z")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].strip().startswith("schedule: ")
    assert lines[-1].strip() == "so window nightly holds fleet at 2027-03-10T01:30:00+00:00"


@pytest.mark.parametrize(("args", "named"), [
    (("windows", "explain", "nope"), "'nope'"),
    (("windows", "explain", "nightly", "--at", "tomorrow-ish"), "'tomorrow-ish'"),
])
def test_explain_refuses_an_unknown_window_or_a_bad_time_in_one_line(windows_fleet, capsys, args, named):
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and named in err
