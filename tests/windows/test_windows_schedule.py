"""windows.schedule: one compiled schedule per version of a windows file. What it answers must
be exactly what the exact functions of `occurrences` answer (croniter under the DST rule, the
exclusions and bounds), and what the commands print from it exactly what they print from the
validated windows; a schedule of other bytes or code or zone data, damaged, planted (a FIFO, a
directory) or writable by someone else is never trusted (one line, built again); a value
validation refuses is never taken from it; an instant outside its horizon is never answered
from it."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from schedule_queries import covering_all, schedule_path, starting_in, starting_within

from hermes_estop.model.durations import format_duration
from hermes_estop.model.errors import StoreError
from hermes_estop.model.timeutil import display_instant
from hermes_estop.windows import calendars, kept_files, schedule
from hermes_estop.windows.explain import explain
from hermes_estop.windows.export import planned
from hermes_estop.windows.forecast import ahead, enabled, planned_holds, window_ahead
from hermes_estop.windows.model import InvalidWindow, Window
from hermes_estop.windows.occurrences import covering, next_start, occurrences, upcoming
from hermes_estop.windows.windows_file import WindowsFile

NOW = datetime(2026, 10, 20, 12, 0, tzinfo=UTC)


@pytest.fixture
def wf(tmp_path: Path, varied: str) -> WindowsFile:
    """A fleet root holding `VARIED`, private to this user as a fleet root is."""
    return _fleet(tmp_path, varied)


def _fleet(tmp_path: Path, text: str) -> WindowsFile:
    tmp_path.chmod(0o755)
    (tmp_path / "windows.toml").write_text(text)
    return WindowsFile(tmp_path)


def _written(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


def _load(wf: WindowsFile, now: datetime = NOW, calls: list[int] | None = None) -> schedule.Schedule | None:
    """The schedule of `wf` at `now`, as a new process reads it; `calls` gets a 1 when it was
    built (written again) rather than read."""
    path = schedule_path(wf.path)
    before = _written(path)
    found = schedule.load(wf.path, wf.path.read_bytes(), wf.load, now)
    if calls is not None and _written(path) != before:
        calls.append(1)
    return found


#: instants across the horizon: the Berlin fall-back night (Oct 25), a drain lead, an end, the
#: one-shot's fractional start; and past it
INSTANTS = [NOW, NOW + timedelta(hours=13, minutes=20), datetime(2026, 10, 25, 0, 45, tzinfo=UTC),
            datetime(2026, 10, 25, 1, 30, tzinfo=UTC), datetime(2026, 10, 25, 3, 0, tzinfo=UTC),
            datetime(2026, 10, 22, 10, 0, 0, 250000, tzinfo=UTC), datetime(2026, 10, 26, 15, 0, tzinfo=UTC),
            NOW + schedule.HORIZON - timedelta(seconds=1)]
BEYOND = [NOW + schedule.HORIZON + timedelta(hours=1), datetime(2027, 3, 1, tzinfo=UTC), NOW - timedelta(days=1)]


@pytest.mark.parametrize("t", INSTANTS, ids=lambda t: t.isoformat())
def test_schedule_answers_what_the_exact_functions_answer(wf: WindowsFile, t: datetime) -> None:
    windows = wf.load()
    compiled = _load(wf)
    assert compiled is not None
    found = covering_all(compiled, t)
    if found is None:  # declined only where a drain lead from `t` reaches past the horizon
        assert schedule.micros(t) + max(compiled.leads) >= compiled.hi
    else:
        assert sorted(found) == sorted(o for w in windows for o in covering(w, t))
    for row, window in enumerate(windows):
        assert compiled.next_start(row, t) == next_start(window, t), window.name
    last = t + timedelta(days=1)
    if last <= NOW + schedule.HORIZON:
        expected = sorted(o for w in windows for o in starting_within(w, t, last - timedelta(microseconds=1), 10_000))
        assert sorted(starting_in(compiled, t, last) or []) == expected


def _exact_not_ended(window: Window, t: datetime) -> list[tuple[object, timedelta]]:
    found = (o for o in occurrences(window, t - window.duration) if not o.ended(t))
    return [(o, o.lead) for o in itertools.islice(found, 60)]


@pytest.mark.parametrize("t", INSTANTS + BEYOND, ids=lambda t: t.isoformat())
def test_not_ended_is_the_exact_sequence_inside_and_past_the_horizon(wf: WindowsFile, t: datetime) -> None:
    compiled = _load(wf)
    assert compiled is not None
    for row, window in enumerate(wf.load()):
        answered = [(o, o.lead) for o in itertools.islice(compiled.not_ended(row, t), 60)]
        assert answered == _exact_not_ended(window, t), window.name


def test_a_start_with_a_fraction_of_a_second_is_kept_exactly(wf: WindowsFile) -> None:
    compiled = _load(wf)
    assert compiled is not None
    (once,) = compiled.upcoming(compiled.row_of("once") or 0, NOW, 1) or []
    assert once.start == datetime(2026, 10, 22, 10, 0, 0, 250000, tzinfo=UTC)
    assert once.key == upcoming(wf.load()[1], NOW, 1)[0].key


@pytest.mark.parametrize("days", [1, 30])
@pytest.mark.parametrize("t", [NOW, datetime(2026, 10, 25, 1, 30, tzinfo=UTC), *BEYOND], ids=lambda t: t.isoformat())
def test_export_from_the_schedule_is_the_export_of_the_windows(wf: WindowsFile, t: datetime, days: int) -> None:
    compiled = _load(wf)
    assert compiled is not None
    exact = planned((window_ahead(w, t) for w in wf.load() if w.enabled), t, days)
    from_rows = planned((ahead(compiled, row, t) for row in enabled(compiled)), t, days)
    assert [(w, o, o.lead) for w, o in from_rows] == [(w, o, o.lead) for w, o in exact]


@pytest.mark.parametrize("span", [timedelta(microseconds=1), timedelta(hours=6), timedelta(days=3)])
@pytest.mark.parametrize("t", [NOW + timedelta(days=1), datetime(2026, 10, 25, 1, 30, tzinfo=UTC), *BEYOND],
                         ids=lambda t: t.isoformat())
def test_forecast_holds_from_the_schedule_are_the_holds_of_the_windows(wf: WindowsFile, t: datetime,
                                                                       span: timedelta) -> None:
    compiled = _load(wf)
    assert compiled is not None
    for row, window in enumerate(wf.load()):
        answered = planned_holds(ahead(compiled, row, t), t + span, limit=3)
        assert answered == planned_holds(window_ahead(window, t), t + span, limit=3), window.name


@pytest.mark.parametrize("t", [NOW, datetime(2026, 10, 25, 1, 30, tzinfo=UTC), *BEYOND], ids=lambda t: t.isoformat())
def test_explain_from_the_schedule_is_the_explanation_of_the_windows(wf: WindowsFile, t: datetime) -> None:
    compiled = _load(wf)
    assert compiled is not None
    for row, window in enumerate(wf.load()):
        assert explain(ahead(compiled, row, t), t, {}) == explain(window_ahead(window, t), t, {}), window.name


def test_windows_are_built_from_the_schedule_equal_to_the_validated(wf: WindowsFile) -> None:
    compiled = _load(wf)
    assert compiled is not None
    assert [compiled.window(row) for row in range(len(compiled))] == wf.load()
    assert [compiled.shown(row) for row in range(len(compiled))] == [w.to_json() for w in wf.load()]


def test_row_of_finds_every_row_by_its_name(wf: WindowsFile) -> None:
    compiled = _load(wf)
    assert compiled is not None
    assert [compiled.row_of(name) for name in compiled.names] == list(range(len(compiled)))
    assert compiled.row_of("no-such-window") is None


def test_a_second_process_reads_the_written_schedule_without_validating(wf: WindowsFile) -> None:
    calls: list[int] = []
    first = _load(wf, calls=calls)
    assert calls == [1] and schedule_path(wf.path).is_file()
    again = _load(wf, NOW + timedelta(hours=1), calls=calls)
    assert calls == [1], "the schedule on disk was built again"
    assert first is not None and again is not None and list(again.starts) == list(first.starts)


def _columns(compiled: schedule.Schedule | None) -> tuple[object, ...]:
    assert compiled is not None
    columns = tuple(list(getattr(compiled, name)) for name in schedule._COLUMNS[:-1] if name != "sources")
    return (*columns, compiled.tables, compiled.lo, compiled.hi)


EDITS = [('duration = "1h"', 'duration = "2h"'), ('name = "long"', 'name = "longer"'),
         ('[[windows]]\nname = "once"', '[[windows]]\nname = "added"\ncron = "0 9 * * *"\nduration = "1h"\n\n'
                                           '[[windows]]\nname = "once"'),
         ('exclude_cron = "* 3 * * *"', 'exclude_cron = "* 4 * * *"'),
         # a table in a zone no other table uses: the rows of the others are still taken
         ('[[windows]]\nname = "once"', '[[windows]]\nname = "added"\ncron = "0 9 * * *"\nduration = "1h"\n'
                                           'timezone = "Australia/Lord_Howe"\n\n[[windows]]\nname = "once"')]


@pytest.fixture
def validated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables validated from here on (`Window.parse`), by name."""
    seen: list[str] = []
    parse = Window.parse

    def counted(data: object, **kwargs: object) -> Window:
        window = parse(data, **kwargs)  # type: ignore[arg-type]
        seen.append(window.name)
        return window

    monkeypatch.setattr(Window, "parse", counted)
    return seen


@pytest.mark.parametrize("calendars", [False, True], ids=["plain", "calendars"])
@pytest.mark.parametrize(("old", "new"), EDITS)
def test_an_edit_compiles_what_a_whole_build_compiles(tmp_path: Path, varied: str, old: str, new: str,
                                                      validated: list[str], calendars: bool) -> None:
    """The rows of the tables not edited (a calendar's and those excluding its days too, their
    feeds unchanged) are taken from the kept schedule as they are."""
    wf = _calendar_fleet(tmp_path, varied) if calendars else _fleet(tmp_path, varied)
    text = wf.path.read_text()
    _load(wf)
    wf.path.write_text(text.replace(old, new))
    validated.clear()
    edited = _load(wf, NOW + timedelta(hours=1))
    assert len(validated) == text.count(old), f"an edit of {text.count(old)} table(s) validated {validated}"
    whole = schedule.build(edited.digest if edited else "", wf.load(), NOW)
    assert _columns(edited) == _columns(whole)
    assert _as_built_whole(edited, whole, wf) == schedule.dumps(whole, KEY)


@pytest.mark.parametrize("calendars", [False, True], ids=["plain", "calendars"])
def test_a_caller_with_the_windows_validates_only_the_tables_of_a_feed_and_keeps_what_a_command_compiles(
        tmp_path: Path, varied: str, validated: list[str], calendars: bool) -> None:
    """`load` given the windows (the status page, the daemon's pass): a table reading no feed is the
    caller's window, never validated again; one reading a feed is validated and bound again as
    fingerprinted. What it keeps is what a command compiles of the file."""
    wf = _calendar_fleet(tmp_path, varied) if calendars else _fleet(tmp_path, varied)
    windows = wf.load()
    validated.clear()
    found = schedule.load(wf.path, wf.path.read_bytes(), windows, NOW)
    assert validated == (["nightly-off-saturdays", "evening-off-saturdays"] if calendars else [])
    calls: list[int] = []
    assert found is not None and _load(wf, calls=calls) is not None and calls == []  # kept: a command reads it
    schedule_path(wf.path).unlink()
    command = _load(wf)
    assert command is not None and schedule.dumps(found, KEY) == schedule.dumps(command, KEY)


@pytest.mark.parametrize("bad", ['duration = "forever"', 'name = "nightly"'])
def test_an_edit_that_does_not_validate_is_refused_as_the_file_is(wf: WindowsFile, varied: str, bad: str) -> None:
    _load(wf)
    wf.path.write_text(varied.replace('name = "long"', bad) if "name" in bad else varied.replace('duration = "2d"', bad))
    with pytest.raises(InvalidWindow):
        _load(wf)


@pytest.mark.parametrize("table", [
    pytest.param('cron = "0 0 31 2 *"', id="cron"),
    pytest.param('cron = "0 0 * * *"\nexclude_cron = "0 0 30 2 *"', id="exclude-cron"),
])
def test_a_table_whose_expression_never_fires_is_refused_as_the_file_is(wf: WindowsFile, varied: str,
                                                                         table: str) -> None:
    """The compile validates without croniter's "does it ever fire" probe (`probe_deferred`)
    and asks it only of what has no start: the refusal is still the whole validation's."""
    wf.path.write_text(f'{varied}\n[[windows]]\nname = "never"\n{table}\nduration = "1h"\n')
    with pytest.raises(InvalidWindow, match="never fires"):
        _load(wf)
    assert not schedule_path(wf.path).exists()


def test_a_window_with_no_start_left_that_fires_is_compiled(wf: WindowsFile, varied: str) -> None:
    """A row without a start (its `not_after` passed) is one the probe is asked of, and passes."""
    wf.path.write_text(f'{varied}\n[[windows]]\nname = "over"\ncron = "0 0 * * *"\nduration = "1h"\n'
                       'not_after = 2026-01-01T00:00:00Z\n')
    compiled = _load(wf)
    assert compiled is not None
    row = compiled.row_of("over")
    assert row is not None and compiled.offsets[row] == compiled.offsets[row + 1]


@pytest.mark.parametrize("preamble", ["windows = []\n", "other = 1\n"])
def test_a_file_that_is_not_toml_as_a_whole_is_refused_though_each_table_parses(wf: WindowsFile, varied: str,
                                                                                preamble: str) -> None:
    wf.path.write_text(preamble + varied)
    with pytest.raises(InvalidWindow):
        _load(wf)
    assert not schedule_path(wf.path).exists()


def test_an_instant_past_the_horizon_is_not_answered_and_the_schedule_is_rebuilt(wf: WindowsFile) -> None:
    calls: list[int] = []
    compiled = _load(wf, calls=calls)
    later = NOW + schedule.HORIZON + timedelta(hours=1)
    assert compiled is not None and covering_all(compiled, later) is None and compiled.next_start(0, later) is False
    rebuilt = _load(wf, later, calls=calls)
    assert calls == [1, 1] and rebuilt is not None and rebuilt.answers(later)


def _resealed(path: Path, lines: list[bytes]) -> None:
    """Write `lines` to the schedule at `path`, sealed again with its directory's key: what
    this user (who can read the key) could write; what the schedule's other checks must catch."""
    header = json.loads(lines[0])
    if isinstance(header, dict):
        key = kept_files.seal_key(path.parent, create=False)
        assert key is not None
        header["seal"] = kept_files.seal(key, schedule._sealed_header(header), b"\n".join(lines[1:]))
        lines = [json.dumps(header).encode(), *lines[1:]]
    path.write_bytes(b"\n".join(lines))


def _line(path: Path, column: str, change: Callable[[Any], Any]) -> None:
    """Column `column` of the schedule at `path` replaced by `change` of it (sealed again)."""
    lines = path.read_bytes().split(b"\n")
    index = 1 + schedule._COLUMNS.index(column)
    lines[index] = json.dumps(change(json.loads(lines[index]))).encode()
    _resealed(path, lines)


def _header(path: Path, change: Callable[[dict], dict]) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[0] = json.dumps(change(json.loads(lines[0]))).encode()
    _resealed(path, lines)


DAMAGES = [
    pytest.param(lambda p: p.write_bytes(b"garbage\x00\xff"), id="garbage"),
    pytest.param(lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), id="truncated"),
    pytest.param(lambda p: p.write_bytes(b""), id="empty"),
    pytest.param(lambda p: p.write_bytes(p.read_bytes().split(b"\n")[0] + b"\nnot json\n"), id="not-json"),
    pytest.param(lambda p: p.write_bytes(p.read_bytes().split(b"\n")[0] + b"\n" + b"garbage\n" * 19), id="garbage-columns"),
    pytest.param(lambda p: p.write_bytes(p.read_bytes() + b"\n{}"), id="a-table-too-many"),
    pytest.param(lambda p: _line(p, "names", lambda names: names[:1]), id="a-column-of-the-wrong-length"),
    pytest.param(lambda p: _line(p, "durations", lambda column: [1] * len(column)), id="a-value-of-the-wrong-type"),
    pytest.param(lambda p: _line(p, "enabled", lambda column: ["yes"] * len(column)), id="enabled-not-a-bool"),
    pytest.param(lambda p: _line(p, "leads", lambda column: [0.5] * len(column)), id="a-lead-not-an-integer"),
    pytest.param(lambda p: _line(p, "scopes", lambda column: ["../etc"] * len(column)), id="a-scope-validation-refuses"),
    pytest.param(lambda p: _header(p, lambda h: h | {"basis": "x" + h["basis"]}), id="another-code-stamp"),
    pytest.param(lambda p: _header(p, lambda h: h | {"format": 1}), id="another-format"),
    pytest.param(lambda p: (p.unlink(), os.mkfifo(p)), id="a-fifo-planted-in-its-place"),
    pytest.param(lambda p: (p.unlink(), p.mkdir()), id="a-directory-in-its-place"),
]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_schedule_is_ignored_and_built_again(wf: WindowsFile, damage: Callable[[Path], object]) -> None:
    expected = _columns(_load(wf))
    path = schedule_path(wf.path)
    damage(path)
    calls: list[int] = []
    again = _load(wf, calls=calls)
    assert _columns(again) == expected
    assert calls == [1] or path.is_dir()  # a directory in its place is not replaced, and never read


@pytest.mark.parametrize("starts", [[5, 3], ["1"], [1.5], [1, 1]])
def test_a_schedule_with_forged_starts_is_not_believed(wf: WindowsFile, starts: list[object]) -> None:
    expected = _columns(_load(wf))
    path = schedule_path(wf.path)
    _line(path, "starts", lambda column: [*starts, *column[len(starts):]])
    calls: list[int] = []
    assert _columns(_load(wf, calls=calls)) == expected and calls == [1]


def test_a_schedule_of_other_zone_data_is_built_again(wf: WindowsFile, monkeypatch: pytest.MonkeyPatch) -> None:
    _load(wf)
    monkeypatch.setattr(kept_files, "zone_digest", lambda name: "0" * 64)
    calls: list[int] = []
    assert _load(wf, calls=calls) is not None and calls == [1]


def test_zone_digest_is_the_data_zoneinfo_reads() -> None:
    assert kept_files.zone_digest("Europe/Berlin") is not None
    assert kept_files.zone_digest("../../etc/passwd") is None
    assert kept_files.zone_digest("No/Such_Zone") is None
    assert ZoneInfo("Europe/Berlin").key == "Europe/Berlin"


# -- a kept schedule is an accelerator, never an authority (issue 32 item 10) ---------------------

PLANTED = ["/bin/sh", "-c", "echo planted"]
NOBODY = 65534


def nobody() -> int:
    import pwd

    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        return NOBODY


def _plant(path: Path, row: int, change: Callable[[dict], dict]) -> None:
    """The table of row `row` of the schedule at `path` changed by `change`: what someone
    else chose."""
    lines = path.read_bytes().split(b"\n")
    index = len(schedule._COLUMNS) + row
    lines[index] = json.dumps(change(json.loads(lines[index]))).encode()
    _resealed(path, lines)


def _task_run(compiled: schedule.Schedule | None) -> list[str] | None:
    assert compiled is not None
    return compiled.window(compiled.row_of("task") or 0).run


@pytest.mark.parametrize("distrust", [
    pytest.param(lambda kept: os.chmod(kept, 0o664), id="file-group-writable"),
    pytest.param(lambda kept: os.chmod(kept, 0o646), id="file-other-writable"),
    pytest.param(lambda kept: os.chown(kept, nobody(), -1), id="file-owned-by-nobody"),
])
def test_a_schedule_someone_else_could_write_is_ignored_and_the_windows_file_read_again(
        wf: WindowsFile, distrust: Callable[[Path], object], caplog: pytest.LogCaptureFixture) -> None:
    expected = _columns(_load(wf))
    kept = schedule_path(wf.path)
    _plant(kept, 6, lambda table: table | {"run": PLANTED})
    assert _task_run(_load(wf)) == PLANTED  # a private schedule is taken as it is: the plant would work
    distrust(kept)
    with caplog.at_level("WARNING", logger="hermes_estop"):
        again, once_more = _load(wf), _load(wf)
    assert _task_run(again) == _task_run(once_more) == ["/usr/bin/true", "--flag"]
    assert _columns(again) == expected
    lines = [r.getMessage() for r in caplog.records if "never an authority" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]


@pytest.mark.parametrize("distrust", [
    pytest.param(lambda where: os.chmod(where, 0o770), id="group-writable"),
    pytest.param(lambda where: os.chmod(where, 0o757), id="other-writable"),
    pytest.param(lambda where: os.chown(where, nobody(), -1), id="owned-by-nobody"),
])
def test_a_fleet_root_others_can_write_keeps_its_schedule_in_the_users_cache_never_beside_the_file(
        wf: WindowsFile, estop_cache: Path, distrust: Callable[[Path], object],
        caplog: pytest.LogCaptureFixture) -> None:
    expected = _columns(_load(wf))
    kept = schedule_path(wf.path)
    _plant(kept, 6, lambda table: table | {"run": PLANTED})
    distrust(wf.path.parent)
    calls: list[int] = []
    with caplog.at_level("WARNING", logger="hermes_estop"):
        again = _load(wf, calls=calls)
        assert _task_run(again) == ["/usr/bin/true", "--flag"] and _columns(again) == expected
        assert _columns(schedule.load(wf.path, wf.path.read_bytes(), _refused, NOW)) == expected  # read back
    assert [p.name.endswith(".schedule") for p in estop_cache.iterdir() if p.name != kept_files.SEAL_KEY] == [True]
    assert estop_cache.stat().st_mode & 0o777 == 0o700
    assert not [r for r in caplog.records if "never an authority" in r.getMessage()]


def _refused() -> list[Window]:
    raise AssertionError("validated again: the schedule kept in the cache was not read")


@pytest.mark.parametrize("distrust", [
    pytest.param(lambda where: os.chmod(where, 0o777), id="world-writable"),
    pytest.param(lambda where: os.chown(where, nobody(), -1), id="owned-by-nobody"),
])
def test_nothing_is_written_into_a_cache_directory_someone_else_could_write(
        wf: WindowsFile, estop_cache: Path, distrust: Callable[[Path], object],
        caplog: pytest.LogCaptureFixture) -> None:
    wf.path.parent.chmod(0o775)  # the fleet root its group can write: the schedule goes to the cache
    distrust(estop_cache)
    with caplog.at_level("WARNING", logger="hermes_estop"):
        assert _load(wf) is not None and _load(wf) is not None
    assert not schedule_path(wf.path).exists() and list(estop_cache.iterdir()) == []
    lines = [r.getMessage() for r in caplog.records if "never an authority" in r.getMessage()]
    assert len(lines) == 1 and str(estop_cache) in lines[0]


def test_no_schedule_is_kept_when_the_cache_is_turned_off_and_the_root_is_shared(
        wf: WindowsFile, estop_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_ESTOP_CACHE", "off")
    wf.path.parent.chmod(0o775)
    calls: list[int] = []
    assert _columns(_load(wf, calls=calls)) == _columns(_load(wf, calls=calls))
    assert not schedule_path(wf.path).exists() and list(estop_cache.iterdir()) == []


@pytest.mark.parametrize(("field", "value"), [
    ("run", [""]), ("run", ["a\x00b"]), ("run", [1, 2]), ("scope", "../etc"), ("only", ["\x1b[2J"]), ("jobs", [3]),
    ("name", "other"),
])
def test_a_kept_value_validation_refuses_is_never_taken(wf: WindowsFile, field: str, value: object) -> None:
    _load(wf)
    _plant(schedule_path(wf.path), 6, lambda table: table | {field: value})
    compiled = _load(wf)
    assert compiled is not None
    with pytest.raises(StoreError, match="damaged"):
        compiled.window(6)


def _feed(*events: tuple[str, ...]) -> str:
    body = "".join("BEGIN:VEVENT\r\nDTSTAMP:20260101T000000Z\r\n" + "".join(f"{line}\r\n" for line in lines)
                   + "END:VEVENT\r\n" for lines in events)
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\n{body}END:VCALENDAR\r\n"


#: Saturdays off (an all-day event), for the windows that exclude it
HOLIDAYS = _feed(("UID:sat", "DTSTART;VALUE=DATE:20260103", "RRULE:FREQ=WEEKLY;BYDAY=SA", "SUMMARY:weekend"))
#: an on-call window every day 03:00-05:00 UTC and one on Mondays
ONCALL = _feed(("UID:daily", "DTSTART:20260101T030000Z", "DURATION:PT2H", "RRULE:FREQ=DAILY", "SUMMARY:patching"),
               ("UID:monday", "DTSTART:20260105T140000Z", "DURATION:PT30M", "RRULE:FREQ=WEEKLY;BYDAY=MO"))
#: tables of a feed among the plain ones: one first, a `[[calendars]]` before the plain windows
#: (listed after them all, as validation lists it), one last (with a TOML datetime)
CALENDAR_TABLES = ('[[windows]]\nname = "nightly-off-saturdays"\ncron = "0 2 * * *"\nduration = "1h"\n'
                   'exclude_calendar = "holidays.ics"\n\n[[calendars]]\nname = "oncall"\nics = "oncall.ics"\n'
                   'drain = "10m"\n\n')
LAST_BOUND = ('\n[[windows]]\nname = "evening-off-saturdays"\ncron = "0 20 * * *"\nduration = "30m"\n'
              'not_before = 2026-01-01T00:00:00Z\nexclude_calendar = "holidays.ics"\nscope = "b"\n')


def _calendar_fleet(tmp_path: Path, varied: str) -> WindowsFile:
    (tmp_path / "holidays.ics").write_text(HOLIDAYS)
    (tmp_path / "oncall.ics").write_text(ONCALL)
    return _fleet(tmp_path, CALENDAR_TABLES + varied + LAST_BOUND)


def test_a_calendar_and_the_windows_excluding_its_days_are_rows_of_the_schedule(tmp_path: Path, varied: str) -> None:
    """Issue 45: a calendar's events are occurrences of its row (with their ids, UIDs, SUMMARYs
    and zones), in the validated file's order, read by the next command without a feed parsed."""
    wf = _calendar_fleet(tmp_path, varied)
    assert _load(wf) is not None
    calls: list[int] = []
    compiled = _load(wf, calls=calls)
    assert compiled is not None and calls == []
    windows = wf.load()
    assert list(compiled.names) == [w.name for w in windows] and sorted(compiled.feeds or ()) == ["holidays.ics",
                                                                                                    "oncall.ics"]
    for row, window in enumerate(windows):
        answered = compiled.upcoming(row, NOW, 3)
        if answered is None and compiled.row_of(window.name) not in compiled.calendars:
            continue  # past the horizon (the exact functions answer)
        assert answered == upcoming(window, NOW, 3), window.name
        assert [(o.uid, o.reason) for o in answered] == [(o.uid, o.reason) for o in upcoming(window, NOW, 3)]
        assert compiled.window(row) == window  # bound to its feed again
    oncall = compiled.row_of("oncall")
    assert oncall is not None and {o.event for o in compiled.upcoming(oncall, NOW, 3) or ()} >= {
        f"daily@{(NOW + timedelta(days=1)).date().isoformat()}T03:00:00+00:00"}


@pytest.mark.parametrize("count", [1, 5, 40])
def test_upcoming_from_the_schedule_is_the_exact_upcoming_or_declines(wf: WindowsFile, count: int) -> None:
    compiled = _load(wf)
    assert compiled is not None
    for t in INSTANTS:
        for row, window in enumerate(wf.load()):
            answered = compiled.upcoming(row, t, count)
            assert answered is None or answered == upcoming(window, t, count), (window.name, t)
    assert compiled.upcoming(compiled.row_of("quarter-hourly") or 0, NOW, 40) is not None


def _hermes(root: Path, *args: str, cache: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HERMES_ROOT=str(root), HERMES_HOME=str(root), COLUMNS="200")
    if cache is not None:
        env["HERMES_ESTOP_CACHE"] = cache
    return subprocess.run([sys.executable, "-m", "hermes_estop", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_windows_next_is_answered_from_the_schedule_every_operator_reads(wf: WindowsFile) -> None:
    def next_json() -> list[dict[str, object]]:
        done = _hermes(wf.path.parent, "windows", "next", "--json")
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout)["occurrences"])

    first = next_json()
    path = schedule_path(wf.path)
    assert path.is_file(), "the first command did not write the schedule beside the windows file"
    written = path.stat().st_mtime_ns
    assert next_json() == first and path.stat().st_mtime_ns == written
    now = datetime.now(UTC)
    expected = sorted(((o.start, i, o.window) for i, w in enumerate(wf.load()) for o in upcoming(w, now, 1)))
    assert [o["window"] for o in first] == [name for _, _, name in expected]


def _stable(args: tuple[str, ...], out: str) -> object:
    """What a command prints that does not depend on the second it ran."""
    if args[-1] == "--ics":
        return [line for line in out.splitlines() if not line.startswith("DTSTAMP")]
    if "--json" not in args:
        return out
    data = json.loads(out)
    data.pop("now", None)
    return data["windows"] if args[0] == "status" else data  # status: the windows section


def _check_at(days: int) -> tuple[str, ...]:
    at = (datetime.now(UTC) + timedelta(days=days)).replace(minute=0, second=0, microsecond=0)
    return ("check", "--at", at.isoformat(), "--for", "6h", "--json")


#: (the text of `windows next` and `status` says "in 3h 12m": not the same a minute later)
#: events that overlap: one long, two starting at one instant inside it (their ends not ascending)
OVERLAPPING = _feed(("UID:long", "DTSTART:20261020T100000Z", "DTEND:20261020T140000Z", "RRULE:FREQ=DAILY;COUNT=30"),
                    ("UID:short", "DTSTART:20261020T110000Z", "DTEND:20261020T120000Z", "RRULE:FREQ=DAILY;COUNT=30"),
                    ("UID:shorter", "DTSTART:20261020T110000Z", "DTEND:20261020T113000Z", "RRULE:FREQ=DAILY;COUNT=30"))


def test_a_calendar_of_overlapping_events_is_answered_as_its_feed_is(tmp_path: Path) -> None:
    """A calendar's row may hold events of one start and ends out of order: every query is the
    exact functions' answer, and the kept schedule is read back (not taken for damaged)."""
    (tmp_path / "team.ics").write_text(OVERLAPPING)
    wf = _fleet(tmp_path, '[[calendars]]\nname = "team"\nics = "team.ics"\ndrain = "10m"\n')
    assert _load(wf) is not None
    calls: list[int] = []
    compiled = _load(wf, calls=calls)
    assert compiled is not None and calls == []
    (window,) = wf.load()
    day = datetime(2026, 10, 21, tzinfo=UTC)
    for t in [day + timedelta(hours=h, minutes=m) for h in (9, 10, 11, 12, 13, 14) for m in (0, 15, 45, 55)]:
        assert compiled.upcoming(0, t, 4) == upcoming(window, t, 4), t
        assert covering_all(compiled, t) == covering(window, t), t
        assert list(itertools.islice(compiled.not_ended(0, t), 5)) == list(itertools.islice(
            (o for o in occurrences(window, t - window.duration) if not o.ended(t)), 5)), t
        index = compiled.next_arm_index(0, t)
        assert index is not None and compiled.occurrence(0, index) == next(
            o for o in occurrences(window, t - window.duration) if o.arm_at > t), t


def test_the_next_command_answers_a_calendar_from_the_schedule_without_parsing_its_feed(
        tmp_path: Path, varied: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the compiled feed file did (issue 35), the windows schedule does: a process that
    finds the schedule of the file and its feeds as they are parses no feed."""
    wf = _calendar_fleet(tmp_path, varied)
    first = schedule.schedule_of(wf, NOW)
    expected = first.upcoming(first.row_of("oncall") or 0, NOW, 5)
    assert expected is not None and len(expected) == 5 and all(o.event and o.uid for o in expected)
    monkeypatch.setattr(calendars, "_FEEDS", type(calendars._FEEDS)())  # a new process

    def parsed(*args: object, **kwargs: object) -> None:
        raise AssertionError("a feed was parsed")

    monkeypatch.setattr(calendars, "parse_feed", parsed)
    again = schedule.schedule_of(wf, NOW)
    assert again.upcoming(again.row_of("oncall") or 0, NOW, 5) == expected
    window = again.window(again.row_of("oncall") or 0)  # its feed: the row's events as far as they go
    assert upcoming(window, NOW, 5) == expected and window.zone_of(expected[0]) == ZoneInfo("UTC")
    with pytest.raises(AssertionError, match="parsed"):
        upcoming(window, NOW + 2 * schedule.HORIZON, 1)  # past them: the feed bound again


@pytest.mark.parametrize("forge", [
    pytest.param(lambda c: {**c, "events": [[i + 10**6, *e] for i, *e in c["events"]]}, id="an-event-past-the-starts"),
    pytest.param(lambda c: {**c, "events": [[i, e, 3, *rest] for i, e, _, *rest in c["events"]]}, id="a-uid-not-text"),
    pytest.param(lambda c: {**c, "calendars": [[r + 100, t] for r, t in c["calendars"]]}, id="a-calendar-past-the-rows"),
    pytest.param(lambda c: {**c, "feeds": [[f, 3] for f, _ in c["feeds"]]}, id="a-feed-not-text"),
    pytest.param(lambda c: [c], id="not-a-map"),
])
def test_a_schedule_with_forged_calendar_columns_is_not_believed(tmp_path: Path, varied: str,
                                                                 forge: Callable[[Any], Any]) -> None:
    wf = _calendar_fleet(tmp_path, varied)
    expected = _load(wf)
    assert expected is not None
    _line(schedule_path(wf.path), "calendars", forge)
    calls: list[int] = []
    again = _load(wf, calls=calls)
    assert again is not None and calls == [1]
    assert (again.events, again.calendars, again.feeds) == (expected.events, expected.calendars, expected.feeds)


def test_a_calendar_row_whose_table_is_another_calendars_is_refused(tmp_path: Path, varied: str) -> None:
    wf = _calendar_fleet(tmp_path, varied)
    _load(wf)
    _line(schedule_path(wf.path), "calendars", lambda c: {**c, "calendars": [
        [row, table.replace('"oncall"', '"other"')] for row, table in c["calendars"]]})
    compiled = _load(wf)
    assert compiled is not None and compiled.row_of("oncall") in compiled.calendars
    with pytest.raises(StoreError, match="damaged"):
        compiled.window(compiled.row_of("oncall") or 0)


COMMANDS = [("windows", "next", "--json"), ("windows", "list", "--json"), ("windows", "list"),
            ("windows", "next", "oncall", "--json"), ("windows", "next", "nightly-off-saturdays", "--json"),
            ("windows", "explain", "oncall", "--at", "2030-01-07T03:30:00Z", "--json"), ("status", "--json"),
            ("windows", "validate", "--json"), ("windows", "validate"), ("windows", "export", "--ics"), _check_at(1),
            _check_at(100)]


@pytest.mark.parametrize("fleet", ["plain", "calendars", "calendars-edited"])
@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: " ".join(args[:4]))
def test_a_command_answers_the_same_cold_warm_and_without_the_schedule(tmp_path: Path, varied: str,
                                                                       args: tuple[str, ...], fleet: str) -> None:
    """Without: the fleet root writable by its group and the per-user cache off: no schedule
    is read or written. With calendars: a calendar's events and the windows excluding its days
    are rows of the schedule too. Edited: cold is the first command after an edit of the
    file whose schedule is kept (its unchanged rows taken from it)."""
    text = varied.replace("*/15 * * * *", "0 */6 * * *")  # no boundary every few minutes
    wf = _fleet(tmp_path, text) if fleet == "plain" else _calendar_fleet(tmp_path, text)
    if fleet == "plain":
        args = tuple(a if a not in ("oncall", "nightly-off-saturdays") else "long" for a in args)
    root = wf.path.parent
    if fleet == "calendars-edited":
        assert _hermes(root, *args).returncode in (0, 1)
        wf.path.write_text(wf.path.read_text().replace('duration = "2d"', 'duration = "36h"'))
    cold, warm = _hermes(root, *args), _hermes(root, *args)
    assert schedule_path(wf.path).is_file()
    schedule_path(wf.path).unlink()
    root.chmod(0o775)
    plain = _hermes(root, *args, cache="off")
    assert not schedule_path(wf.path).exists()
    assert cold.returncode == warm.returncode == plain.returncode, cold.stderr + warm.stderr + plain.stderr
    assert cold.returncode in (0, 1), cold.stderr
    assert _stable(args, cold.stdout) == _stable(args, warm.stdout) == _stable(args, plain.stdout)
    assert cold.stderr == warm.stderr == plain.stderr


def _three_ways(wf: WindowsFile, *args: str) -> tuple[subprocess.CompletedProcess[str], ...]:
    """`args` run twice with the schedule (the second reads it) and once without it (the root
    made writable by its group, the cache off; made private again after)."""
    root = wf.path.parent
    cold, warm = _hermes(root, *args), _hermes(root, *args)
    root.chmod(0o775)
    plain = _hermes(root, *args, cache="off")
    root.chmod(0o755)
    return cold, warm, plain


def test_a_feed_edit_is_seen_by_the_next_command_which_compiles_the_schedule_again(tmp_path: Path,
                                                                                   varied: str) -> None:
    """A schedule is of the file's bytes and its feeds' (`calendars.fingerprint`)."""
    wf = _calendar_fleet(tmp_path, varied)
    before = _hermes(tmp_path, "windows", "next", "oncall", "--json")
    assert before.returncode == 0, before.stderr
    written = _written(schedule_path(wf.path))
    assert written is not None
    (tmp_path / "oncall.ics").write_text(ONCALL.replace("T030000Z", "T070000Z"))
    after = _hermes(tmp_path, "windows", "next", "oncall", "--json")
    assert after.returncode == 0, after.stderr
    again = _written(schedule_path(wf.path))
    assert again not in (None, written)
    hours = {datetime.fromisoformat(o["start"]).hour for o in json.loads(after.stdout)["occurrences"]}
    assert 7 in hours and 3 not in hours, after.stdout
    assert after.stdout != before.stdout
    third = _hermes(tmp_path, "windows", "next", "oncall", "--json")
    assert json.loads(third.stdout)["occurrences"] == json.loads(after.stdout)["occurrences"]
    assert _written(schedule_path(wf.path)) == again


@pytest.mark.parametrize("broken", ["bad calendar table", "bad exclude_calendar table", "feed gone"])
@pytest.mark.parametrize("args", [("windows", "list"), ("windows", "next", "--json"), ("status", "--json"),
                                  ("windows", "validate", "--json")], ids=lambda args: " ".join(args))
def test_a_calendar_that_fails_fails_as_without_the_schedule(tmp_path: Path, varied: str, broken: str,
                                                             args: tuple[str, ...]) -> None:
    wf = _calendar_fleet(tmp_path, varied)
    assert _hermes(tmp_path, "windows", "list").returncode == 0
    kept = _written(schedule_path(wf.path))
    if broken == "feed gone":
        (tmp_path / "oncall.ics").unlink()
        assert kept is not None, "no schedule kept for a file with calendars"
    else:
        text = wf.path.read_text()
        text = (text.replace('ics = "oncall.ics"', 'ics = "oncall.ics"\nsummary = 3') if broken.startswith("bad calendar")
                else text.replace('exclude_calendar = "holidays.ics"\nscope = "b"', 'exclude_calendar = 3\nscope = "b"'))
        wf.path.write_text(text)
    cold, warm, plain = _three_ways(wf, *args)
    assert cold.returncode == warm.returncode == plain.returncode, cold.stderr + warm.stderr + plain.stderr
    if cold.stdout or warm.stdout or plain.stdout:
        assert _stable(args, cold.stdout) == _stable(args, warm.stdout) == _stable(args, plain.stdout)
    assert cold.stderr == warm.stderr == plain.stderr
    assert "oncall" in cold.stdout + cold.stderr or "evening-off-saturdays" in cold.stdout + cold.stderr
    if broken == "feed gone":
        assert _written(schedule_path(wf.path)) == kept, "the schedule of an unchanged file was built again"


def test_a_running_serve_writes_the_schedule_the_next_command_reads(wf: WindowsFile) -> None:
    done = _hermes(wf.path.parent, "serve", "--once")
    assert done.returncode == 0, done.stderr
    assert schedule_path(wf.path).is_file()
    calls: list[int] = []
    assert _load(wf, datetime.now(UTC), calls=calls) is not None
    assert calls == [], "the schedule serve wrote was not the one the next command reads"


def test_windows_validate_writes_the_schedule_and_warns_from_it(wf: WindowsFile) -> None:
    outputs = []
    for _ in range(2):
        done = _hermes(wf.path.parent, "windows", "validate", "--json")
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
        assert schedule_path(wf.path).is_file()
    assert outputs[0] == outputs[1]
    assert outputs[0]["windows"] == 7
    assert outputs[0]["warnings"] == ["window once can never occur again (bounds, exclusions or a past at)",
                                      "window weekly can never occur again (bounds, exclusions or a past at)"]


def test_a_row_shows_what_its_window_shows(wf: WindowsFile) -> None:
    compiled = _load(wf)
    assert compiled is not None
    assert [compiled.row(row) for row in range(len(compiled))] == [
        schedule.Row(w.name, w.scope, w.enabled, w.timezone, w.describe_schedule(for_json=True), w.describe_duration(),
                     format_duration(w.drain) if w.drain is not None else None) for w in wf.load()]


def test_a_schedule_older_than_asked_is_built_again_from_now(wf: WindowsFile) -> None:
    _load(wf)
    later = NOW + schedule.REFRESH + timedelta(minutes=1)
    kept = schedule.load(wf.path, wf.path.read_bytes(), wf.load, later)
    refreshed = schedule.load(wf.path, wf.path.read_bytes(), wf.load, later, schedule.REFRESH)
    assert kept is not None and kept.answers(NOW) and not kept.answers(NOW - timedelta(microseconds=1))
    assert refreshed is not None and refreshed.answers(later) and not refreshed.answers(later - timedelta(microseconds=1))
    again = _load(wf, later)
    assert again is not None and again.answers(later) and not again.answers(NOW)


def test_damaged_tables_refuse_a_window_in_one_line_and_answer_the_rest(wf: WindowsFile) -> None:
    _load(wf)
    path = schedule_path(wf.path)
    lines = path.read_bytes().split(b"\n")
    lines[len(schedule._COLUMNS)] = b'[{"name": 1}]'
    _resealed(path, lines)
    compiled = _load(wf)
    assert compiled is not None and compiled.row(0).name == "nightly"
    with pytest.raises(StoreError, match="damaged"):
        compiled.window(0)
    assert compiled.window(1) == wf.load()[1]


def test_a_table_header_inside_a_multiline_string_is_not_a_cut(tmp_path: Path, varied: str) -> None:
    tricky = varied.replace('reason = "nightly maintenance"', 'reason = """nightly\n[[windows]]\nmaintenance"""')
    wf = _fleet(tmp_path, tricky)
    built = _load(wf)
    wf.path.write_text(tricky.replace('duration = "45m"', 'duration = "50m"'))
    edited = _load(wf, NOW + timedelta(hours=1))
    assert built is not None and edited is not None and edited.window(0) == wf.load()[0]
    built_at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=edited.lo)
    whole = schedule.build(edited.digest, wf.load(), built_at)
    assert _columns(edited) == _columns(whole)


def test_windows_list_prints_from_the_schedule_what_it_prints_from_the_windows(wf: WindowsFile) -> None:
    from hermes_estop.cli.windows import _list_lines, _Listed

    compiled = _load(wf)
    assert compiled is not None
    from_schedule = [_Listed.shown(compiled.shown(row)) for row in range(len(compiled))]
    assert from_schedule == [_listed(w) for w in wf.load()]
    assert any(line.startswith("    bounds") for line in _list_lines(from_schedule))


def _listed(window: Window) -> tuple[object, ...]:
    """What `windows list` prints of `window`, from the `Window` itself (the oracle of `_Listed.shown`)."""
    drain = format_duration(window.drain) if window.drain is not None else None
    return (window.name, window.describe_schedule(), window.describe_duration(), drain, window.scope, window.enabled,
            window.reason, list(window.allow.user_ids), list(window.allow.profiles),
            (display_instant(window.not_before), display_instant(window.not_after)))


def _page(view: object) -> tuple[object, ...]:
    """What the status page draws of the windows: every bar and every window's state."""
    bars = [(b.window, b.scope, b.start, b.end, b.state, b.key, b.drain_from)
            for lane in view.lanes for piece in lane.slices for b in piece.bars]  # type: ignore[attr-defined]
    states = [(s.window.name, s.active, s.next_start) for s in view.windows]  # type: ignore[attr-defined]
    return bars, states, view.stable_until  # type: ignore[attr-defined]


@pytest.mark.parametrize("t", [NOW, datetime(2026, 10, 25, 1, 30, tzinfo=UTC), NOW + schedule.HORIZON + timedelta(hours=1)],
                         ids=lambda t: t.isoformat())
def test_the_status_page_draws_from_the_schedule_what_it_draws_from_the_windows(
        wf: WindowsFile, t: datetime, monkeypatch: pytest.MonkeyPatch) -> None:
    from hermes_estop import Estop
    from hermes_estop.observe.view import Observer

    _load(wf)
    root = wf.path.parent
    drawn = Observer(Estop(root=root, home=root, clock=lambda: t))
    from_schedule = _page(drawn.view(7))
    assert drawn._schedule is not None
    monkeypatch.setattr(Observer, "_compiled", lambda self, raw, windows: None)
    assert from_schedule == _page(Observer(Estop(root=root, home=root, clock=lambda: t)).view(7))


def _many(calendars: bool) -> str:
    """A file of `_BATCH` * 2 + 50 windows; with `calendars`, every 97th excluding a calendar
    and a `[[calendars]]` table (with a sub-table) after every 131st, so cuts fall before both."""
    text = "# many\n"
    for i in range(2 * schedule._BATCH + 50):
        text += f'[[windows]]\nname = "w{i}"\ncron = "{i % 60} {i % 24} * * *"\nduration = "10m"\n'
        text += 'exclude_calendar = "holidays.ics"\n\n' if calendars and i % 97 == 5 else "\n"
        if calendars and i % 131 == 7:
            text += f'[[calendars]] # on call\nname = "c{i}"\nics = "oncall.ics"\n[calendars.allow]\nuser_ids = [{i}]\n\n'
    return text


def test_a_rewrite_lets_the_kept_schedule_go_and_compiles_what_a_whole_build_compiles(
        tmp_path: Path, validated: list[str]) -> None:
    """A batch of tables none of which is the kept schedule's (a rewrite) lets it go: the tables
    after it are validated too, never a second schedule held beside the one being built."""
    text = _many(False)
    wf = _fleet(tmp_path, text)
    _load(wf)
    for i in range(schedule._BATCH + 10):
        table = f'name = "w{i}"\ncron = "{i % 60} {i % 24} * * *"\nduration = "10m"'
        text = text.replace(table, table.replace('"10m"', '"11m"'))
    wf.path.write_text(text)
    validated.clear()
    edited = _load(wf, NOW + timedelta(hours=1))
    assert len(validated) == 2 * schedule._BATCH + 50
    assert edited is not None
    whole = schedule.build(edited.digest, wf.load(), NOW)  # the kept horizon
    assert _columns(edited) == _columns(whole)
    assert _in_file_order(edited) == wf.load()


def _in_file_order(compiled: schedule.Schedule | None) -> list[object]:
    """The windows `compiled` lists, as their `Window`s (bound to their feeds)."""
    assert compiled is not None
    return [compiled.window(row) for row in range(len(compiled))]


#: a seal key for comparing two schedules' kept bytes
KEY = b"k" * 32


def _as_built_whole(compiled: schedule.Schedule | None, whole: schedule.Schedule | None, wf: WindowsFile) -> bytearray:
    """`compiled` as `build` makes it of the validated windows (its feeds not fingerprinted, its
    rows of no table), once each row is checked to be of its own table (table by table, a row of
    a feed is of the table and the feed)."""
    assert compiled is not None and whole is not None
    assert list(compiled.sources) == [source for source, _ in schedule._validations(wf.path.read_bytes(), wf.path, {})]
    return schedule.dumps(replace(compiled, feeds=None, sources=whole.sources), KEY)


@pytest.mark.parametrize("calendars", [False, True], ids=["plain", "calendars"])
def test_a_file_of_many_batches_compiles_table_by_table_what_a_whole_build_compiles(
        tmp_path: Path, validated: list[str], calendars: bool) -> None:
    (tmp_path / "holidays.ics").write_text(HOLIDAYS)
    (tmp_path / "oncall.ics").write_text(ONCALL)
    text = _many(calendars)
    wf = _fleet(tmp_path, text)
    streamed = _load(wf)
    assert len(validated) == 2 * schedule._BATCH + 50
    assert streamed is not None and sorted(streamed.feeds or ()) == (["holidays.ics", "oncall.ics"] if calendars else [])
    whole = schedule.build(streamed.digest, wf.load(), NOW)
    assert _as_built_whole(streamed, whole, wf) == schedule.dumps(whole, KEY)
    assert _in_file_order(streamed) == wf.load()
    wf.path.write_text(text.replace('name = "w333"\ncron = "33 21', 'name = "w333"\ncron = "34 21'))
    validated.clear()
    edited = _load(wf, NOW + timedelta(hours=1))
    assert validated == ["w333"]  # a row of a feed too is taken as it is while its table and feed are
    assert edited is not None
    whole = schedule.build(edited.digest, wf.load(), NOW)
    assert _as_built_whole(edited, whole, wf) == schedule.dumps(whole, KEY)
    assert _in_file_order(edited) == wf.load()


#: edits of `_calendar_fleet` the whole validation refuses (the same line as without the schedule)
REFUSED_CALENDAR_EDITS = [
    pytest.param('drain = "10m"', 'drain = "forever"', id="a-calendar-table-that-does-not-validate"),
    pytest.param('name = "oncall"', 'name = "long"', id="a-calendar-named-as-a-window"),
    pytest.param('name = "oncall"', 'name = "evening-off-saturdays"', id="a-calendar-named-as-a-window-excluding-its-days"),
    pytest.param('[[windows]]\nname = "once"', '[[calendars]]\nname = "oncall"\nics = "oncall.ics"\n\n'
                                               '[[windows]]\nname = "once"', id="two-calendars-of-one-name"),
    pytest.param('exclude_calendar = "holidays.ics"\nscope = "b"', 'exclude_calendar = 3\nscope = "b"',
                 id="a-window-excluding-a-calendar-that-does-not-validate"),
    pytest.param('name = "evening-off-saturdays"', 'name = "long"', id="a-window-excluding-a-calendar-named-as-another"),
]


@pytest.mark.parametrize(("old", "new"), REFUSED_CALENDAR_EDITS)
@pytest.mark.parametrize("kept", [False, True], ids=["new-file", "edit"])
def test_a_file_with_calendars_is_built_table_by_table_and_refused_as_the_whole_file_is(
        tmp_path: Path, varied: str, old: str, new: str, kept: bool) -> None:
    """The valid file: built without validating it whole (`validate` never called); the file
    edited so that the whole validation refuses it: refused with the line validation gives,
    whether a schedule of the file before the edit is kept or not."""
    wf = _calendar_fleet(tmp_path, varied)
    whole: list[int] = []

    def validate() -> list[Window]:
        whole.append(1)
        return wf.load()

    text = wf.path.read_text()
    first = schedule.load(wf.path, text.encode(), validate, NOW)
    assert first is not None and whole == [], "the file with calendars was validated whole"
    if not kept:
        schedule_path(wf.path).unlink()
    wf.path.write_text(text.replace(old, new, 1))
    with pytest.raises(InvalidWindow) as expected:
        wf.load()
    with pytest.raises(InvalidWindow) as refused:
        schedule.load(wf.path, wf.path.read_bytes(), validate, NOW + timedelta(hours=1))
    assert str(refused.value) == str(expected.value)


def test_a_windows_sub_table_after_a_calendar_is_read_as_the_whole_file_reads_it(tmp_path: Path, varied: str) -> None:
    """`[windows.allow]` after a `[[calendars]]` belongs to the last `[[windows]]` before it:
    cut at the `[[calendars]]`, it would not; the file is then validated whole."""
    wf = _calendar_fleet(tmp_path, varied)
    text = wf.path.read_text().replace('drain = "10m"\n', 'drain = "10m"\n\n[windows.allow]\nuser_ids = [7]\n')
    wf.path.write_text(text)
    assert wf.load()[0].allow.user_ids == ["7"]
    compiled = _load(wf)
    assert _in_file_order(compiled) == wf.load()


def test_a_shared_fleet_roots_schedule_lives_under_xdg_cache_home_made_private(
        wf: WindowsFile, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    xdg = tmp_path_factory.mktemp("xdg")
    monkeypatch.delenv("HERMES_ESTOP_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    wf.path.parent.chmod(0o775)
    _load(wf)
    where = xdg / "hermes-estop"
    assert len(list(where.glob("*.schedule"))) == 1 and where.stat().st_mode & 0o777 == 0o700


def test_a_timeline_keeps_a_bounded_number_of_built_windows(wf: WindowsFile, monkeypatch: pytest.MonkeyPatch) -> None:
    """A running daemon asks for other rows pass after pass: the `Window`s its timeline of a
    schedule keeps built are bounded (the oldest dropped), each one asked again equal to the
    first; the schedule itself keeps none (frozen, issue 45)."""
    monkeypatch.setattr(schedule, "WINDOWS_KEPT", 2)
    compiled = _load(wf)
    assert compiled is not None and len(compiled) >= 3
    rows = schedule.ScheduleTimeline(compiled)
    first = [rows.window(row) for row in range(3)]
    assert len(rows._built) == 2 and rows.window(2) is first[2]
    assert [rows.window(row) for row in range(3)] == first == [compiled.window(row) for row in range(3)]
    assert not hasattr(compiled, "__dict__")  # slots only: nothing to cache in


@pytest.mark.parametrize("text", [None, ""], ids=["no file", "an empty file"])
def test_every_command_gets_a_schedule_also_of_a_file_with_no_windows(tmp_path: Path, text: str | None) -> None:
    """`schedule_of` is the one way a command reads the windows (issue 45): no file, or one of
    no windows, is a schedule of no windows answering now, never None (no second path)."""
    tmp_path.chmod(0o755)
    if text is not None:
        (tmp_path / "windows.toml").write_text(text)
    found = schedule.schedule_of(WindowsFile(tmp_path), NOW)
    assert len(found) == 0 and found.row_of("any") is None
    assert found.answers(NOW) and covering_all(found, NOW) == []


#: one expression in one zone, windows that each cut its starts their own way, and the same
#: expression in another zone
SHARING = "".join(f'[[windows]]\nname = "w{i}"\ncron = "0 */6 * * *"\ntimezone = "Europe/Berlin"\n{extra}\n' for i, extra in enumerate((
    'duration = "1h"\n',
    'duration = "1h"\nscope = "ops"\nexclude = [2026-10-22]\n',
    'duration = "1h"\nexclude_cron = "0 12 * * *"\n',
    'duration = "1h"\ndrain = "15m"\nnot_before = "2026-10-23T00:00:00Z"\n',
    'duration = "1h"\nnot_after = "2026-10-24T00:00:00Z"\n',
    'duration = "2h"\n',
    'duration = "1h"\nenabled = false\n',
))) + '[[windows]]\nname = "tokyo"\ncron = "0 */6 * * *"\ntimezone = "Asia/Tokyo"\nduration = "1h"\n'


def _counting_croniter(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Each (expression, zone) the compile asks croniter to enumerate."""
    asked: list[tuple[str, str]] = []
    enumerate_starts = schedule.cron_starts

    def counted(expr: str, tz: ZoneInfo, since: datetime) -> Any:
        asked.append((expr, tz.key))
        return enumerate_starts(expr, tz, since)

    monkeypatch.setattr(schedule, "cron_starts", counted)
    return asked


def _exactly_as_the_windows(compiled: schedule.Schedule, windows: list[Window]) -> None:
    last = NOW + schedule.HORIZON - timedelta(hours=1)
    assert starting_in(compiled, NOW, last) == sorted(
        (o for w in windows for o in starting_within(w, NOW, last - timedelta(microseconds=1), 10_000)),
        key=lambda o: (o.start, [w.name for w in windows].index(o.window)))
    for row, window in enumerate(windows):
        assert compiled.covering_row(row, NOW + timedelta(days=2, hours=6, minutes=30)) == tuple(
            covering(window, NOW + timedelta(days=2, hours=6, minutes=30))), window.name


def test_windows_sharing_an_expression_ask_croniter_once_and_keep_their_own_exclusions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Croniter is most of a compile: the windows of one expression, zone and look-back share one
    enumeration of its starts; each window's exclusions, bounds, drain and duration stay its own."""
    asked = _counting_croniter(monkeypatch)
    wf = _fleet(tmp_path, SHARING)
    compiled = _load(wf)
    assert compiled is not None
    # one per instant the starts are asked from: the horizon's start less the duration (the 2h
    # window's is another), or a later `not_before`
    assert sorted(asked) == [("0 */6 * * *", "Asia/Tokyo"), *[("0 */6 * * *", "Europe/Berlin")] * 3]
    _exactly_as_the_windows(compiled, wf.load())


def test_past_the_starts_a_compile_may_keep_each_window_asks_croniter_and_answers_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The starts kept for sharing are bounded (a file of many minutely expressions would hold
    millions): past the bound nothing more is kept, and the answers do not change."""
    asked = _counting_croniter(monkeypatch)
    monkeypatch.setattr(schedule, "_KEPT_STARTS", 20)
    wf = _fleet(tmp_path, SHARING)
    compiled = _load(wf)
    assert compiled is not None
    assert len(asked) > 3
    _exactly_as_the_windows(compiled, wf.load())
