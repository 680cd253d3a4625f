"""Skipping and excluding occurrences (issue 11 section 2): `exclude` (local dates) and
`exclude_cron` in windows.toml, `hermes windows skip/unskip` recorded in the ledger and audited,
honoured by the scheduler, shown by `windows next`, all across DST changes (Europe/Berlin)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

import inprocess_cli
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.windows.ledger import SKIPPED, entry_for
from hermes_estop.windows.model import InvalidWindow, Window
from hermes_estop.windows.occurrences import upcoming
from hermes_estop.windows.skips import pick
from hermes_estop.windows.windows_file import WindowsFile
from inprocess_cli import run

fleet = inprocess_cli.fleet  # the fixture: a fleet root as this process's home

NIGHTLY = {"name": "nightly", "cron": "30 2 * * *", "timezone": "Europe/Berlin", "duration": "1h"}


def starts(window: Window, since: datetime, count: int) -> list[str]:
    return [o.ident for o in upcoming(window, since, count)]


@pytest.mark.parametrize("excluded, since, expected", [
    # spring forward: 02:30 does not exist on 2026-03-29 (it would start at 03:00 CEST); excluded
    ("2026-03-29", datetime(2026, 3, 28, 12, tzinfo=UTC), ["2026-03-30T00:30:00+00:00", "2026-03-31T00:30:00+00:00"]),
    ("2026-03-30", datetime(2026, 3, 28, 12, tzinfo=UTC), ["2026-03-29T01:00:00+00:00", "2026-03-31T00:30:00+00:00"]),
    # fall back: 02:30 happens twice on 2026-10-25 (the window starts once); excluded by its local date
    ("2026-10-25", datetime(2026, 10, 24, 12, tzinfo=UTC), ["2026-10-26T01:30:00+00:00", "2026-10-27T01:30:00+00:00"]),
    ("2026-10-26", datetime(2026, 10, 24, 12, tzinfo=UTC), ["2026-10-25T00:30:00+00:00", "2026-10-27T01:30:00+00:00"]),
])
def test_an_excluded_local_date_does_not_occur_across_dst(excluded, since, expected):
    window = Window.parse({**NIGHTLY, "exclude": [excluded]})
    assert starts(window, since, 2) == expected


def test_exclude_cron_matches_the_local_start():
    window = Window.parse({**NIGHTLY, "exclude_cron": "* * 24-26 12 *"})
    got = starts(window, datetime(2026, 12, 23, 12, tzinfo=UTC), 2)
    assert got == ["2026-12-27T01:30:00+00:00", "2026-12-28T01:30:00+00:00"]


def test_an_exclude_cron_that_excludes_everything_ends_the_window_instead_of_looping():
    window = Window.parse({"name": "hourly", "cron": "0 * * * *", "duration": "10m", "exclude_cron": "0 * * * *"})
    assert upcoming(window, datetime(2026, 1, 1, tzinfo=UTC), 1) == []


@pytest.mark.parametrize("value", [["2026-02-30"], ["26-12-25"], "2026-12-25", [datetime(2026, 12, 25)], [1]])
def test_validation_refuses_an_impossible_exclude_date_naming_file_window_and_field(tmp_path, value):
    import tomlkit

    path = tmp_path / "windows.toml"
    path.write_text(tomlkit.dumps({"windows": [{**NIGHTLY, "exclude": value}]}))
    with pytest.raises(InvalidWindow) as caught:
        WindowsFile(tmp_path).load()
    assert str(path) in str(caught.value) and "window 'nightly'" in str(caught.value)
    assert caught.value.field == "exclude"


def test_exclusions_survive_a_round_trip_through_the_file(tmp_path):
    window = Window.parse({**NIGHTLY, "exclude": ["2026-12-31", "2026-12-25"], "exclude_cron": "* * 24-26 12 *"})
    WindowsFile(tmp_path).save([window])
    [again] = WindowsFile(tmp_path).load()
    assert again == window and again.exclude == [date(2026, 12, 25), date(2026, 12, 31)]


def test_the_scheduler_does_not_arm_an_excluded_occurrence_across_spring_forward(harness):
    harness.clock.set(datetime(2026, 3, 27, 12, tzinfo=UTC))
    harness.write({**NIGHTLY, "exclude": ["2026-03-29"]})
    harness.start()
    harness.run_until(datetime(2026, 3, 31, 12, tzinfo=UTC))
    engages = [e.time.isoformat() for e in harness.events("engage")]
    assert engages == ["2026-03-28T01:30:00+00:00", "2026-03-30T00:30:00+00:00", "2026-03-31T00:30:00+00:00"]


@pytest.mark.parametrize("unskip", [False, True])
def test_a_skipped_occurrence_on_the_fall_back_day_does_not_arm_and_an_unskip_restores_it(harness, unskip):
    harness.clock.set(datetime(2026, 10, 24, 12, tzinfo=UTC))
    harness.write(NIGHTLY)
    harness.start()
    window = harness.file.load()[0]
    target = pick(window, harness.clock.now, on=date(2026, 10, 25))
    assert target.ident == "2026-10-25T00:30:00+00:00"  # 02:30 CEST, the first of the two 02:30s
    harness.ledger.commit([entry_for(target, SKIPPED, harness.clock.now, None, "skipped by the operator (operator@test)")])
    if unskip:
        harness.ledger.commit([], remove=[target.key])
    harness.run_until(datetime(2026, 10, 26, 12, tzinfo=UTC), poll=True)
    engages = [e.time.isoformat() for e in harness.events("engage")]
    expected = ["2026-10-26T01:30:00+00:00"]
    assert engages == (["2026-10-25T00:30:00+00:00", *expected] if unskip else expected)


def test_pick_refuses_an_occurrence_that_started_or_does_not_exist():
    window = Window.parse(NIGHTLY)
    now = datetime(2026, 3, 29, 1, 30, tzinfo=UTC)  # inside the spring-forward day's occurrence
    with pytest.raises(InvalidArgument, match="already started"):
        pick(window, now, start=datetime(2026, 3, 29, 1, 0, tzinfo=UTC))
    with pytest.raises(InvalidArgument, match="no occurrence starting at"):
        pick(window, now, start=datetime(2026, 3, 30, 1, 30, tzinfo=UTC))
    assert pick(window, now).ident == "2026-03-30T00:30:00+00:00"


# -- the CLI ---------------------------------------------------------------------------------

def test_cli_skip_shows_in_next_is_audited_and_unskip_undoes_it(fleet, capsys):
    # the CLI reads the real clock: a daily hour twelve hours off, so no occurrence is in progress
    # (`next` would list it first, `skip --next` skips the one after)
    hour = (datetime.now(ZoneInfo("Europe/Berlin")).hour + 12) % 24
    run(capsys, "windows", "add", "nightly", "--cron", f"30 {hour} * * *", "--tz", "Europe/Berlin", "--duration", "1h")
    code, out, _ = run(capsys, "windows", "skip", "nightly", "--next", "--json")
    assert code == 0
    skipped = json.loads(out)["skipped"]["occurrence"]
    code, out, _ = run(capsys, "windows", "next", "nightly", "--json", "-n", "2")
    flags = [(o["occurrence"], o["skipped"]) for o in json.loads(out)["occurrences"]]
    assert flags[0] == (skipped, True) and flags[1][1] is False
    code, out, _ = run(capsys, "windows", "next", "nightly", "-n", "1")
    assert "(skipped)" in out
    code, out, _ = run(capsys, "history", "--json")
    assert code == 0 and "skipped by the operator" in out
    code, out, _ = run(capsys, "windows", "unskip", "nightly", "--occurrence", skipped)
    assert code == 0 and "unskipped" in out
    code, _, err = run(capsys, "windows", "unskip", "nightly", "--occurrence", skipped)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "is not skipped" in err
    code, out, _ = run(capsys, "windows", "next", "nightly", "--json", "-n", "1")
    assert json.loads(out)["occurrences"][0]["skipped"] is False


@pytest.mark.parametrize("args, message", [
    (["--on", "2026-02-30"], "invalid --on"),
    (["--on", "2020-01-01"], "already started"),
    (["--next", "--on", "2030-01-01"], "give one of"),
    (["--occurrence", "2030-01-01T00:00:01Z"], "no occurrence starting at"),
])
def test_cli_skip_refuses_bad_targets_with_one_line(fleet, capsys, args, message):
    run(capsys, "windows", "add", "nightly", "--cron", "30 2 * * *", "--duration", "1h")
    code, out, err = run(capsys, "windows", "skip", "nightly", *args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and message in err
    assert not (fleet / "windows-state.json").exists() or SKIPPED not in (fleet / "windows-state.json").read_text()


def test_validate_warns_about_a_window_that_can_never_occur_again(fleet, capsys):
    (fleet / "windows.toml").write_text(
        '[[windows]]\nname = "old"\ncron = "0 3 * * *"\nduration = "1h"\nnot_after = 2020-01-01T00:00:00Z\n'
        '[[windows]]\nname = "fine"\ncron = "0 3 * * *"\nduration = "1h"\n')
    code, out, err = run(capsys, "windows", "validate")
    assert code == 0 and "ok: 2 window(s)" in out
    assert "window old can never occur again" in err and "fine" not in err
    code, out, _ = run(capsys, "windows", "validate", "--json")
    assert json.loads(out)["warnings"] == ["window old can never occur again (bounds, exclusions or a past at)"]
