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


HAND_WRITTEN = '''\
# Maintenance windows of the ops fleet, hand-written.
# Ask #ops before changing one.

[[windows]]
name = "nightly"   # the DB one
cron = "30 2 * * *"
timezone = "Europe/Berlin"
duration = "2h"  # DBA asked for 2h
allow = { user_ids = ["424242"] }

# the weekly one
[[windows]]
name = "weekly"
cron = "0 4 * * 0"
timezone = "UTC"
duration = "1h"

[[calendars]]
name = "holidays"
ics = "holidays.ics"
'''


def hand_written(fleet):
    path = fleet / "windows.toml"
    path.write_text(HAND_WRITTEN)
    (fleet / "holidays.ics").write_text("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//t//EN\r\nEND:VCALENDAR\r\n")
    return path


def test_windows_add_keeps_a_hand_written_files_comments_order_and_style(fleet, capsys):
    path = hand_written(fleet)
    code, _, err = run(capsys, "windows", "add", "extra", "--cron", "0 1 * * *", "--duration", "1h",
                       "--allow-user", "7")
    assert code == 0, err
    assert path.read_text() == HAND_WRITTEN + '''
[[windows]]
name = "extra"
cron = "0 1 * * *"
timezone = "UTC"
duration = "1h"
allow = {user_ids = ["7"]}
scope = "fleet"
'''


def test_windows_add_replace_changes_only_the_values_that_changed(fleet, capsys):
    path = hand_written(fleet)
    code, _, err = run(capsys, "windows", "add", "nightly", "--replace", "--cron", "30 2 * * *", "--tz",
                       "Europe/Berlin", "--duration", "3h", "--allow-user", "424242", "--reason", "db")
    assert code == 0, err
    assert path.read_text() == HAND_WRITTEN.replace(
        'duration = "2h"  # DBA asked for 2h\nallow = { user_ids = ["424242"] }\n',
        'duration = "3h"  # DBA asked for 2h\nallow = { user_ids = ["424242"] }\nreason = "db"\n')


SUB_TABLE = '''\
[[windows]]
name = "nightly"
cron = "30 2 * * *"
timezone = "UTC"
duration = "2h"

[windows.allow]
user_ids = ["424242"]  # the DBA
'''


def test_windows_add_replace_puts_a_new_key_before_a_windows_sub_table(fleet, capsys):
    """A key the window did not have goes with its keys, not under `[windows.allow]` (which it
    would join); was an internal error (exit 70)."""
    path = fleet / "windows.toml"
    path.write_text(SUB_TABLE)
    code, _, err = run(capsys, "windows", "add", "nightly", "--replace", "--cron", "30 2 * * *", "--duration", "2h",
                       "--allow-user", "424242", "--reason", "db")
    assert code == 0, err
    assert path.read_text() == SUB_TABLE.replace('duration = "2h"\n', 'duration = "2h"\nreason = "db"\n')


@pytest.mark.parametrize("name, cut", [
    ("nightly", '''[[windows]]
name = "nightly"   # the DB one
cron = "30 2 * * *"
timezone = "Europe/Berlin"
duration = "2h"  # DBA asked for 2h
allow = { user_ids = ["424242"] }

'''),
    ("weekly", '''# the weekly one
[[windows]]
name = "weekly"
cron = "0 4 * * 0"
timezone = "UTC"
duration = "1h"

'''),
])
def test_windows_remove_cuts_only_that_window_and_the_comment_above_it(fleet, capsys, name, cut):
    path = hand_written(fleet)
    code, _, err = run(capsys, "windows", "remove", name)
    assert code == 0, err
    assert cut in HAND_WRITTEN and path.read_text() == HAND_WRITTEN.replace(cut, "")


def test_windows_add_and_remove_keep_an_inline_array_of_windows_inline(fleet, capsys):
    path = fleet / "windows.toml"
    path.write_text('# short form\nwindows = [\n  { name = "a", cron = "0 1 * * *", duration = "1h" },  # first\n]\n')
    assert run(capsys, "windows", "add", "b", "--cron", "0 2 * * *", "--duration", "1h")[0] == 0
    assert run(capsys, "windows", "remove", "a")[0] == 0
    text = path.read_text()
    assert text.startswith("# short form\nwindows = [") and "[[windows]]" not in text
    _code, out, _ = run(capsys, "windows", "list", "--json")
    assert [w["name"] for w in json.loads(out)["windows"]] == ["b"]


def test_an_edit_that_does_not_validate_leaves_the_hand_written_file_as_it_was(fleet, capsys):
    path = hand_written(fleet)
    code, _, err = run(capsys, "windows", "add", "weekly", "--cron", "0 1 * * *", "--duration", "1h")
    assert code == 2 and "already exists" in err
    code, _, err = run(capsys, "windows", "add", "holidays", "--cron", "0 1 * * *", "--duration", "1h")
    assert code == 2 and "calendar" in err
    assert path.read_text() == HAND_WRITTEN
