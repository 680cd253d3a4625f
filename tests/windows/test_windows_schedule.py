"""windows.schedule: one compiled schedule per version of a windows file. What it answers must
be exactly what the exact functions of `occurrences` answer (croniter under the DST rule, the
exclusions and bounds); a schedule of other bytes, damaged, or writable by someone else is
never trusted; an instant outside its horizon is never answered from it."""

from __future__ import annotations

import logging
import os
from datetime import datetime, timedelta, UTC
from pathlib import Path

import pytest

from hermes_estop.windows.occurrences import covering, next_start, starting_within
from hermes_estop.windows import schedule
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile

NOW = datetime(2026, 10, 20, 12, 0, tzinfo=UTC)

VARIED = '''
[[windows]]
name = "nightly"
cron = "30 2 * * *"
timezone = "Europe/Berlin"
duration = "1h"
drain = "15m"
reason = "nightly maintenance"
allow = { user_ids = ["424242"], profiles = ["alpha"] }

[[windows]]
name = "once"
at = 2026-10-22T10:00:00Z
duration = "2h30m"
scope = "alpha"
only = ["cron"]

[[windows]]
name = "weekly"
cron = "0 4 * * 0"
timezone = "America/New_York"
duration = "45m"
enabled = false
not_after = 2026-10-26T00:00:00Z
exclude = [2026-10-25]

[[windows]]
name = "fall-back"
cron = "30 2 * * *"
timezone = "Europe/Berlin"
duration = "3h"

[[windows]]
name = "long"
cron = "0 0 * * 1"
timezone = "Asia/Tokyo"
duration = "2d"

[[windows]]
name = "quarter-hourly"
cron = "*/15 * * * *"
duration = "5m"
exclude_cron = "* 3 * * *"
'''


def _fleet(tmp_path: Path, text: str = VARIED) -> WindowsFile:
    tmp_path.chmod(0o755)
    (tmp_path / "windows.toml").write_text(text)
    return WindowsFile(tmp_path)


def _load(wf: WindowsFile, now: datetime = NOW, calls: list[int] | None = None) -> schedule.Schedule | None:
    def validate() -> list[Window]:
        if calls is not None:
            calls.append(1)
        return wf.load()

    return schedule.load(wf.path, wf.path.read_bytes(), validate, now)


#: instants across the horizon: the Berlin fall-back night (Oct 25), a drain lead, an end
INSTANTS = [NOW, NOW + timedelta(hours=13, minutes=20), datetime(2026, 10, 25, 0, 45, tzinfo=UTC),
            datetime(2026, 10, 25, 1, 30, tzinfo=UTC), datetime(2026, 10, 25, 3, 0, tzinfo=UTC),
            datetime(2026, 10, 26, 15, 0, tzinfo=UTC), NOW + schedule.HORIZON - timedelta(seconds=1)]


@pytest.mark.parametrize("t", INSTANTS, ids=lambda t: t.isoformat())
def test_schedule_answers_what_the_exact_functions_answer(tmp_path: Path, t: datetime) -> None:
    wf = _fleet(tmp_path)
    windows = wf.load()
    compiled = _load(wf)
    assert compiled is not None
    assert sorted(compiled.covering(t) or []) == sorted(o for w in windows for o in covering(w, t))
    for row, window in enumerate(windows):
        assert compiled.next_start(row, t) == next_start(window, t), window.name
    last = t + timedelta(days=1)
    if last <= NOW + schedule.HORIZON:
        expected = sorted(o for w in windows for o in starting_within(w, t, last - timedelta(seconds=1), 10_000))
        assert sorted(compiled.starting_in(t, last) or []) == expected


def test_schedule_builds_windows_only_for_the_rows_asked_and_they_equal_the_validated(tmp_path: Path) -> None:
    wf = _fleet(tmp_path)
    compiled = _load(wf)
    assert compiled is not None
    assert [compiled.window(row) for row in range(len(compiled))] == wf.load()


def test_a_second_process_reads_the_written_schedule_without_validating(tmp_path: Path) -> None:
    wf = _fleet(tmp_path)
    calls: list[int] = []
    first = _load(wf, calls=calls)
    assert calls == [1] and schedule.schedule_path(wf.path).is_file()
    again = _load(wf, NOW + timedelta(hours=1), calls=calls)
    assert calls == [1], "the schedule on disk was validated again"
    assert first is not None and again is not None and list(again.starts) == list(first.starts)


def _columns(compiled: schedule.Schedule | None) -> tuple[object, ...]:
    assert compiled is not None
    columns = tuple(list(getattr(compiled, name)) for name in schedule._COLUMNS[:-1])
    return (*columns, compiled.tables.values(), compiled.lo, compiled.hi)


EDITS = [('duration = "1h"', 'duration = "2h"'), ('name = "long"', 'name = "longer"'),
         ('[[windows]]\nname = "once"', '[[windows]]\nname = "added"\ncron = "0 9 * * *"\nduration = "1h"\n\n'
                                           '[[windows]]\nname = "once"'),
         ('exclude_cron = "* 3 * * *"', 'exclude_cron = "* 4 * * *"')]


@pytest.mark.parametrize(("old", "new"), EDITS)
def test_an_edit_compiles_what_a_whole_build_compiles(tmp_path: Path, old: str, new: str) -> None:
    wf = _fleet(tmp_path)
    _load(wf)
    wf.path.write_text(VARIED.replace(old, new))
    calls: list[int] = []
    edited = _load(wf, NOW + timedelta(hours=1), calls=calls)
    assert calls == [], "an edit of one table validated the whole file"
    whole = schedule.build(edited.digest if edited else "", wf.load(), NOW, wf.path.read_bytes())
    assert _columns(edited) == _columns(whole)


@pytest.mark.parametrize("bad", ['duration = "forever"', 'name = "nightly"'])
def test_an_edit_that_does_not_validate_is_refused_as_the_file_is(tmp_path: Path, bad: str) -> None:
    from hermes_estop.windows.model import InvalidWindow

    wf = _fleet(tmp_path)
    _load(wf)
    wf.path.write_text(VARIED.replace('name = "long"', bad) if "name" in bad else VARIED.replace('duration = "2d"', bad))
    with pytest.raises(InvalidWindow):
        _load(wf)


def test_an_instant_past_the_horizon_is_not_answered_and_the_schedule_is_rebuilt(tmp_path: Path) -> None:
    wf = _fleet(tmp_path)
    calls: list[int] = []
    compiled = _load(wf, calls=calls)
    later = NOW + schedule.HORIZON + timedelta(hours=1)
    assert compiled is not None and compiled.covering(later) is None and compiled.next_start(0, later) is False
    rebuilt = _load(wf, later, calls=calls)
    assert calls == [1, 1] and rebuilt is not None and rebuilt.answers(later)


@pytest.mark.parametrize("damage", [b"", b"not json\n", b'{"format":1}', b"garbage\n" * 9])
def test_a_damaged_schedule_is_ignored_and_rebuilt(tmp_path: Path, damage: bytes) -> None:
    wf = _fleet(tmp_path)
    _load(wf)
    path = schedule.schedule_path(wf.path)
    text = path.read_bytes()
    path.write_bytes(text.split(b"\n")[0] + b"\n" + damage if damage else damage)
    path.chmod(0o644)
    calls: list[int] = []
    compiled = _load(wf, calls=calls)
    assert calls == [1] and compiled is not None and len(compiled) == 6


def test_a_schedule_with_forged_starts_is_not_believed(tmp_path: Path) -> None:
    wf = _fleet(tmp_path)
    _load(wf)
    path = schedule.schedule_path(wf.path)
    lines = path.read_bytes().split(b"\n")
    lines[11] = lines[11].replace(b"[", b"[1,", 1)  # a start before every other: offsets no longer add up
    path.write_bytes(b"\n".join(lines))
    calls: list[int] = []
    _load(wf, calls=calls)
    assert calls == [1]


def test_a_schedule_others_can_write_is_never_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    wf = _fleet(tmp_path)
    _load(wf)
    path = schedule.schedule_path(wf.path)
    os.chmod(path, 0o666)
    calls: list[int] = []
    with caplog.at_level(logging.WARNING):
        compiled = _load(wf, calls=calls)
    assert calls == [1] and compiled is not None
    assert [r for r in caplog.records if "writable by group or others" in r.getMessage()]


def test_a_window_bound_to_a_calendar_has_no_schedule(tmp_path: Path) -> None:
    (tmp_path / "holidays.ics").write_text("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\nEND:VCALENDAR\r\n")
    wf = _fleet(tmp_path, VARIED + '\n[[windows]]\nname = "cal"\ncron = "0 1 * * *"\nduration = "1h"\n'
                'exclude_calendar = "holidays.ics"\n')
    assert _load(wf) is None


@pytest.mark.parametrize("count", [1, 5, 40])
def test_upcoming_from_the_schedule_is_the_exact_upcoming_or_declines(tmp_path: Path, count: int) -> None:
    from hermes_estop.windows.occurrences import upcoming

    wf = _fleet(tmp_path)
    compiled = _load(wf)
    assert compiled is not None
    for t in INSTANTS:
        for row, window in enumerate(wf.load()):
            answered = compiled.upcoming(row, t, count)
            assert answered is None or answered == upcoming(window, t, count), (window.name, t)
    assert compiled.upcoming(compiled.row_of("quarter-hourly") or 0, NOW, 40) is not None


def test_windows_next_is_answered_from_the_schedule_every_operator_reads(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    wf = _fleet(tmp_path)
    env = dict(os.environ, HERMES_ROOT=str(tmp_path), HERMES_HOME=str(tmp_path))

    def next_json() -> list[dict[str, object]]:
        done = subprocess.run([sys.executable, "-m", "hermes_estop", "windows", "next", "--json"], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout)["occurrences"])

    first = next_json()
    path = schedule.schedule_path(wf.path)
    assert path.is_file(), "the first command did not write the schedule beside the windows file"
    written = path.stat().st_mtime_ns
    assert next_json() == first and path.stat().st_mtime_ns == written
    now = datetime.now(UTC)
    expected = sorted(((o.start, i, o.window) for i, w in enumerate(wf.load()) for o in upcoming_of(w, now)))
    assert [o["window"] for o in first] == [name for _, _, name in expected]


def upcoming_of(window: Window, now: datetime) -> list:
    from hermes_estop.windows.occurrences import upcoming

    return upcoming(window, now, 1)


def test_a_running_serve_writes_the_schedule_the_next_command_reads(tmp_path: Path) -> None:
    import subprocess
    import sys

    wf = _fleet(tmp_path)
    env = dict(os.environ, HERMES_ROOT=str(tmp_path), HERMES_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "hermes_estop", "serve", "--once"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert schedule.schedule_path(wf.path).is_file()
    calls: list[int] = []
    assert _load(wf, datetime.now(UTC), calls=calls) is not None
    assert calls == [], "the schedule serve wrote was not the one the next command reads"


def test_windows_validate_writes_the_schedule_and_warns_from_it(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    wf = _fleet(tmp_path)
    env = dict(os.environ, HERMES_ROOT=str(tmp_path), HERMES_HOME=str(tmp_path))
    outputs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "hermes_estop", "windows", "validate", "--json"], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
        assert schedule.schedule_path(wf.path).is_file()
    assert outputs[0] == outputs[1]
    assert outputs[0]["windows"] == 6
    assert outputs[0]["warnings"] == ["window once can never occur again (bounds, exclusions or a past at)",
                                      "window weekly can never occur again (bounds, exclusions or a past at)"]


def test_a_row_shows_what_its_window_shows(tmp_path: Path) -> None:
    wf = _fleet(tmp_path)
    compiled = _load(wf)
    assert compiled is not None
    assert [compiled.row(row) for row in range(len(compiled))] == [schedule.Row.of(w) for w in wf.load()]


def test_a_schedule_older_than_asked_is_built_again_from_now(tmp_path: Path) -> None:
    wf = _fleet(tmp_path)
    _load(wf)
    later = NOW + schedule.REFRESH + timedelta(minutes=1)
    kept = schedule.load(wf.path, wf.path.read_bytes(), wf.load, later)
    refreshed = schedule.load(wf.path, wf.path.read_bytes(), wf.load, later, schedule.REFRESH)
    assert kept is not None and kept.lo == int(NOW.timestamp())
    assert refreshed is not None and refreshed.lo == int(later.timestamp())
    assert _load(wf, later) is not None and _load(wf, later).lo == int(later.timestamp())  # type: ignore[union-attr]


def test_damaged_tables_refuse_a_window_in_one_line_and_answer_the_rest(tmp_path: Path) -> None:
    from hermes_estop.model.errors import StoreError

    wf = _fleet(tmp_path)
    _load(wf)
    path = schedule.schedule_path(wf.path)
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([*lines[:-1], b'[{"name": 1}]']))
    compiled = _load(wf)
    assert compiled is not None and compiled.row(0).name == "nightly"
    with pytest.raises(StoreError, match="damaged"):
        compiled.window(0)


def test_a_table_header_inside_a_multiline_string_is_not_a_cut(tmp_path: Path) -> None:
    tricky = VARIED.replace('reason = "nightly maintenance"', 'reason = """nightly\n[[windows]]\nmaintenance"""')
    wf = _fleet(tmp_path, tricky)
    _load(wf)
    wf.path.write_text(tricky.replace('duration = "45m"', 'duration = "50m"'))
    edited = _load(wf, NOW + timedelta(hours=1))
    assert edited is not None and edited.window(0) == wf.load()[0]
    whole = schedule.build(edited.digest, wf.load(), datetime.fromtimestamp(edited.lo, UTC), wf.path.read_bytes())
    assert _columns(edited) == _columns(whole)
