"""`hermes windows ... --drain` (issue 11 §1): `add --drain DUR` writes the lead, `list`, `next`
(text and --json: `drain_from`) and `status` show it, `validate` accepts it, and a bad drain is one
line naming the field, exit 2, nothing written."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

import inprocess_cli
from inprocess_cli import run

fleet = inprocess_cli.fleet  # the fixture: a fleet root as this process's home


def tomorrow() -> datetime:
    return (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)


def test_add_with_drain_writes_it_and_next_json_shows_the_drain_start(fleet, capsys):
    start = tomorrow()
    code, out, _ = run(capsys, "windows", "add", "upgrade", "--at", start.isoformat(), "--duration", "1h",
                       "--drain", "15m", "--json")
    assert code == 0
    added = json.loads(out)
    assert added["window"]["drain"] == "15m"
    assert added["next"]["drain_from"] == (start - timedelta(minutes=15)).isoformat()
    assert 'drain = "15m"' in (fleet / "windows.toml").read_text()
    code, out, _ = run(capsys, "windows", "next", "--json")
    [occurrence] = json.loads(out)["occurrences"]
    assert code == 0
    assert occurrence["start"] == start.isoformat()
    assert occurrence["drain_from"] == (start - timedelta(minutes=15)).isoformat()
    assert occurrence["active"] is False and occurrence["draining"] is False


def test_next_text_and_list_show_the_drain(fleet, capsys):
    start = tomorrow()
    run(capsys, "windows", "add", "upgrade", "--at", start.isoformat(), "--duration", "1h", "--drain", "1h30m")
    code, out, _ = run(capsys, "windows", "next")
    drain_from = (start - timedelta(minutes=90)).isoformat()
    assert code == 0 and f"drain from {drain_from}" in out
    code, out, _ = run(capsys, "windows", "list")
    assert code == 0 and "draining 1h30m ahead" in out


def test_next_without_a_drain_has_a_null_drain_start(fleet, capsys):
    run(capsys, "windows", "add", "plain", "--at", tomorrow().isoformat(), "--duration", "1h")
    code, out, _ = run(capsys, "windows", "next", "--json")
    assert code == 0 and json.loads(out)["occurrences"][0]["drain_from"] is None
    code, out, _ = run(capsys, "windows", "next")
    assert "drain" not in out


def test_next_and_status_say_an_occurrence_in_its_lead_is_draining(fleet, capsys):
    start = (datetime.now(UTC) + timedelta(minutes=30)).replace(microsecond=0)
    run(capsys, "windows", "add", "upgrade", "--at", start.isoformat(), "--duration", "1h", "--drain", "2h")
    code, out, _ = run(capsys, "windows", "next", "--json")
    [occurrence] = json.loads(out)["occurrences"]
    assert occurrence["active"] is True and occurrence["draining"] is True
    code, out, _ = run(capsys, "windows", "next")
    assert "DRAINING" in out
    code, out, _ = run(capsys, "status")
    assert code == 0 and "DRAINING now" in out and "upgrade: at " in out and "for 1h, draining 2h ahead, fleet" in out
    code, out, _ = run(capsys, "status", "--json")
    [row] = json.loads(out)["windows"]
    assert row["drain"] == "2h" and row["current"]["draining"] is True


@pytest.mark.parametrize("drain, words", [("0", "must be positive"), ("-15m", "must be positive"),
                                          ("soon", "'soon'"), ("25h", "24h bound")])
def test_add_refuses_a_bad_drain_with_one_line_naming_the_field(fleet, capsys, drain, words):
    code, _, err = run(capsys, "windows", "add", "w", "--cron", "0 2 * * *", "--duration", "1h", "--drain", drain)
    assert code == 2
    assert "field 'drain'" in err and words in err and err.count("\n") == 1 and err.startswith("hermes: error: ")
    assert not (fleet / "windows.toml").exists()


def test_validate_accepts_a_drain_and_refuses_a_bad_one_naming_file_window_and_field(fleet, capsys):
    path = fleet / "windows.toml"
    path.write_text('[[windows]]\nname = "nightly"\ncron = "30 2 * * *"\nduration = "1h"\ndrain = "15m"\n')
    code, out, _ = run(capsys, "windows", "validate")
    assert code == 0 and out.startswith("ok: 1 window(s)")
    path.write_text('[[windows]]\nname = "nightly"\ncron = "30 2 * * *"\nduration = "1h"\ndrain = "2d"\n')
    code, _, err = run(capsys, "windows", "validate")
    assert code == 2
    assert err.strip() == (f"hermes: error: {path}: window 'nightly': field 'drain': invalid drain '2d': "
                           "longer than the 24h bound (a drain lead is at most a day)")
