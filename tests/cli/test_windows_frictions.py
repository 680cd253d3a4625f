"""`hermes windows` as an operator edits and reads it (issue 38): `next` in the order things
happen, and `add`/`remove` that keep a hand-written windows.toml as it was written."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

import inprocess_cli
from inprocess_cli import run

fleet = inprocess_cli.fleet  # the fixture: a fleet root as this process's home

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)


@pytest.fixture
def frozen(monkeypatch):
    from hermes_estop.cli import windows as cli_windows

    monkeypatch.setattr(cli_windows, "_now", lambda: NOW)


@pytest.mark.parametrize("count, expected", [
    (1, ["early", "late"]),
    (2, ["early", "late", "early", "late"]),
])
def test_windows_next_lists_occurrences_by_their_next_start(fleet, capsys, frozen, count, expected):
    run(capsys, "windows", "add", "late", "--cron", "0 5 * * *", "--duration", "1h")
    run(capsys, "windows", "add", "early", "--cron", "0 3 * * *", "--duration", "1h")
    code, out, _ = run(capsys, "windows", "next", "-n", str(count))
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == expected
    code, out, _ = run(capsys, "windows", "next", "-n", str(count), "--json")
    listed = json.loads(out)["occurrences"]
    assert [o["window"] for o in listed] == expected
    assert [o["start"] for o in listed] == sorted(o["start"] for o in listed)
