"""The CLI's human-facing times (issue 38) in a pinned local zone (`TZ=Europe/Berlin`): shown to
the second with the offset, `--json` unchanged (UTC, exact); `--until`/`--at` read wall-clock
times and say the zone they assumed."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from cli_runner import Hermes

BERLIN = ZoneInfo("Europe/Berlin")
#: a time as `display_instant` shows it in Berlin: no microseconds, the offset
LOCAL = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+0[12]:00"


@pytest.fixture
def local(berlin, tmp_path) -> Hermes:
    hermes = Hermes(tmp_path / "home")
    assert hermes.env["TZ"] == "Europe/Berlin"
    return hermes


def test_pause_status_and_the_notice_show_local_times_to_the_second(local):
    paused = local("pause", "--ttl", "45m", "--reason", "db", check=0).stdout
    assert re.search(rf"deadline   {LOCAL} \(in 45m\)", paused), paused
    status = local("status", check=0).stdout
    assert re.search(rf"deadline   {LOCAL} \(in 4\dm", status), status
    held = local("check", check=1).stdout
    assert re.search(rf"held: .* until {LOCAL}$", held.strip()), held  # who holds, and until when (issue 44 item 8)
    document = json.loads(local("status", "--json", check=0).stdout)
    expires = document["holds"][0]["expires_at"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00", expires), expires  # --json: UTC


def _tomorrow_at_3(zone) -> set[datetime]:
    """Tomorrow 03:00 in `zone`, as of just before and just after the command (a midnight in between)."""
    now = datetime.now(zone)
    return {(now + timedelta(days=days)).replace(hour=3, minute=0, second=0, microsecond=0).astimezone(UTC)
            for days in (1, 2)}


@pytest.mark.parametrize("until, zone, says", [
    ("tomorrow 03:00", BERLIN, "read in local time (Europe/Berlin)"),
    ("tomorrow 03:00 America/New_York", ZoneInfo("America/New_York"), None),
])
def test_until_reads_a_wall_clock_time_and_says_the_zone_it_assumed(local, until, zone, says):
    expected = _tomorrow_at_3(zone)
    result = local("pause", "--until", until, "--json", check=0)
    assert datetime.fromisoformat(json.loads(result.stdout)["expires_at"]) in expected
    if says:
        assert result.stderr.startswith(f"hermes: note: --until '{until}' {says}: ")
    else:
        assert result.stderr == ""


def test_check_at_reads_a_wall_clock_time(local):
    result = local("check", "--at", "tomorrow 03:00 UTC", check=0)
    assert re.fullmatch(rf"proceed: not held at {LOCAL}\n", result.stdout), result.stdout
    assert result.stderr == ""


def test_a_bad_until_is_one_line_naming_the_option_and_writes_nothing(local):
    result = local("pause", "--until", "15:00 Mars/Olympus", check=2)
    assert result.stderr == ("hermes: error: invalid --until '15:00 Mars/Olympus': unknown time zone "
                             "'Mars/Olympus' (an IANA name such as Europe/Berlin, or UTC)\n")
    assert not local.sentinel.exists()


def test_history_and_windows_next_show_local_times(local):
    local("pause", "--ttl", "1h", check=0)
    line = local("history", check=0).stdout.splitlines()[0]
    assert re.match(rf"{LOCAL}  engage .* deadline={LOCAL}  covers=all$", line), line
    local("windows", "add", "nightly", "--cron", "0 2 * * *", "--tz", "UTC", "--duration", "1h", check=0)
    line = local("windows", "next", check=0).stdout.splitlines()[0]
    assert re.match(r"nightly  \d{4}-\d\d-\d\dT(03:00:00\+01:00|04:00:00\+02:00)  \(\d{4}-\d\d-\d\d 02:00 UTC\)", line), line


def test_a_one_shot_windows_instant_is_shown_local_and_kept_exact_in_json(local):
    added = local("windows", "add", "once", "--in", "3h", "--duration", "1h", check=0).stdout
    assert re.match(rf"added window once to .*: at {LOCAL} for 1h, fleet$", added.splitlines()[0]), added
    listed = local("windows", "list", check=0).stdout
    assert re.match(rf"once  at {LOCAL}  for 1h  fleet", listed), listed
    document = json.loads(local("status", "--json", check=0).stdout)
    (row,) = document["windows"]["windows"] if isinstance(document["windows"], dict) else document["windows"]
    assert re.fullmatch(r"at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00", row["schedule"]), row  # --json: UTC
