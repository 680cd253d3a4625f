"""`observe.impact_preview` (issue 47): the impact of a window's occurrence read from real homes
(cron tables in the fleet root and a profile home, the kanban board, the ledger) at an injected
time; what cannot be read is one problem line, never a raise."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hermes_estop import Estop, FileStore
from hermes_estop.consumers.board import Board
from hermes_estop.consumers.crontable import CronTable
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.observe.impact_preview import (
    impact_lines,
    next_impact_section,
    next_occurrence,
    read_queued,
    window_impact,
    window_occurrence,
)
from hermes_estop.windows.model import Window
from hermes_estop.windows.skips import skip_occurrence
from hermes_estop.windows.windows_file import WindowsFile

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def estop(fleet_root: Path, clock) -> Estop:
    """The fleet root's Estop at NOW, with a nightly window (02:00 UTC for 2h, drained 15m,
    admitting 42), a cron table in the root and one in profile ops, and three ready cards."""
    clock.set(NOW)
    (fleet_root / "profiles" / "ops").mkdir(parents=True)
    WindowsFile(fleet_root).save([Window.parse({"name": "nightly", "cron": "0 2 * * *", "duration": "2h",
                                                "drain": "15m", "allow": {"user_ids": ["42"]}})])
    root_table = CronTable(fleet_root)
    root_table.add("backup", "true", now=NOW, schedule="30 2 * * *", timezone="Europe/Berlin", owner="7")
    root_table.add("maint", "true", now=NOW, schedule="0 3 * * *", owner="42")
    CronTable(fleet_root / "profiles" / "ops").add("sync", "true", now=NOW, schedule="*/30 * * * *", owner="9")
    board = Board(fleet_root, clock=clock)
    board.add("a", "true", owner="7", profile="ops", ready=True, now=NOW - timedelta(hours=2))
    board.add("b", "true", owner="42", ready=True, now=NOW)
    board.add("c", "true", owner="8", ready=True, now=NOW - timedelta(hours=1))
    board.add("d", "true", owner="8", now=NOW)  # todo: not ready, never counted
    return Estop(home=fleet_root, root=fleet_root, store=FileStore(fleet_root), clock=clock)


def test_next_occurrence_holds_back_runs_in_both_homes_and_the_ready_cards(estop):
    window, occurrence = window_occurrence(estop, "nightly", 1, NOW)
    assert occurrence is not None and occurrence.start == datetime(2026, 6, 2, 2, tzinfo=UTC)
    found = window_impact(estop, window, occurrence, NOW).impact
    # backup 02:30 CEST = 00:30 UTC: before the drain; sync: 02:00, 02:30, 03:00, 03:30; maint: admitted
    assert {j.name: (j.held_count, j.run_count) for j in found.jobs} == {"sync": (4, 0), "maint": (0, 1)}
    assert (found.cards.waiting, found.cards.oldest_id, dict(found.cards.by_profile)) == (2, 1, {"ops": 1, None: 1})
    lines = list(impact_lines(found))
    assert lines[0].endswith("(fleet root):") and lines[1].startswith("  runs  maint (owner 42): 1 run(s)")
    assert lines[2].endswith("(profile ops):") and lines[3].startswith("  held  sync (owner 9): 4 run(s)")
    assert "after the lift: runs once at 2026-06-02T04:00:00+00:00, then 2026-06-02T04:30:00+00:00" in lines[3]


def test_second_occurrence_is_the_day_after(estop):
    _, occurrence = window_occurrence(estop, "nightly", 2, NOW)
    assert occurrence is not None and occurrence.start == datetime(2026, 6, 3, 2, tzinfo=UTC)


def test_a_skipped_occurrence_holds_back_nothing(estop):
    window, occurrence = window_occurrence(estop, "nightly", 1, NOW)
    assert occurrence is not None
    skip_occurrence(estop.fleet, window, occurrence, NOW)
    found = window_impact(estop, window, occurrence, NOW)
    assert found.skipped and (found.impact.held_runs, found.impact.cards.waiting) == (0, 0)
    assert not found.impact.gateway


@pytest.mark.parametrize(("name", "guess"), [("nightlz", "did you mean 'nightly'?"), ("zzz", "")])
def test_unknown_window_is_one_line_with_a_guess(estop, name, guess):
    with pytest.raises(InvalidArgument) as caught:
        window_occurrence(estop, name, 1, NOW)
    text = str(caught.value)
    assert f"no window named {name!r}" in text and guess in text and "\n" not in text


@pytest.mark.parametrize("bad", [b"{not json", b'{"jobs": [{"name": 1}]}', b"\x00" * 10])
def test_a_damaged_cron_table_is_one_problem_line(estop, fleet_root, bad):
    (fleet_root / "profiles" / "ops" / "cron" / "jobs.json").write_bytes(bad)
    queued = read_queued(estop)
    assert [t.problem is not None for t in queued.tables] == [False, True]
    window, occurrence = window_occurrence(estop, "nightly", 1, NOW)
    assert occurrence is not None
    found = window_impact(estop, window, occurrence, NOW, queued).impact
    assert [j.name for j in found.jobs] == ["maint"]
    assert len(found.problems) == 1 and "damaged" in found.problems[0]


def test_a_fifo_planted_as_the_board_is_a_problem_not_a_hang(estop, fleet_root):
    for name in ("kanban.db", "kanban.db-wal", "kanban.db-shm"):
        (fleet_root / name).unlink(missing_ok=True)
    import os

    os.mkfifo(fleet_root / "kanban.db")
    queued = read_queued(estop)
    assert queued.cards == () and len(queued.problems) == 1 and "kanban board" in queued.problems[0]


@pytest.mark.parametrize(("windows", "expected"), [
    pytest.param([{"name": "nightly", "cron": "0 2 * * *", "duration": "2h", "drain": "15m"},
                  {"name": "early", "cron": "50 1 * * *", "duration": "1h"}], "nightly",
                 id="the-drain-lead-arms-it-first"),
    pytest.param([{"name": "nightly", "cron": "0 2 * * *", "duration": "2h"},
                  {"name": "now", "cron": "0 11 * * *", "duration": "2h"}], "nightly",
                 id="not-the-one-holding-now"),
    pytest.param([{"name": "nightly", "cron": "0 2 * * *", "duration": "2h", "enabled": False},
                  {"name": "later", "cron": "0 3 * * *", "duration": "1h"}], "later", id="not-a-disabled-one"),
    pytest.param([{"name": "past", "at": "2026-05-01T00:00:00Z", "duration": "1h"}], None, id="none-ahead"),
    pytest.param([{"name": "july", "cron": "0 0 1 7 *", "duration": "1h"},
                  {"name": "june30", "cron": "30 23 30 6 *", "duration": "1h"}], "june30",
                 id="both-past-the-schedules-horizon"),
    pytest.param([{"name": "a", "cron": "0 0 20 6 *", "duration": "1h"},
                  {"name": "b", "cron": "0 1 20 6 *", "duration": "1h", "drain": "2h"}], "b",
                 id="past-the-horizon-the-drain-lead-arms-it-first"),
    pytest.param([{"name": "far", "cron": "0 0 1 7 *", "duration": "1h"},
                  {"name": "soon", "cron": "0 3 5 6 *", "duration": "1h"}], "soon", id="in-the-horizon-beats-past-it"),
    pytest.param([{"name": "now", "cron": "0 11 1 6 *", "duration": "2h"},
                  {"name": "next-year", "cron": "0 0 1 6 *", "duration": "1h"}], "next-year",
                 id="not-the-one-holding-now-past-the-horizon"),
])
def test_next_occurrence_is_the_next_to_arm(estop, fleet_root, windows, expected):
    WindowsFile(fleet_root).save([Window.parse(w) for w in windows])
    found = next_occurrence(estop, NOW)
    assert (found[0].name if found else None) == expected


def test_next_occurrence_builds_no_window_the_schedule_answers_for(estop, fleet_root, monkeypatch):
    """A status at 10,000 windows built each row's `Window` and asked croniter when its next arm
    lay past the schedule's horizon: seconds of every `status`. A row past the horizon is asked
    only when it could still arm first."""
    far = [{"name": f"m{i}", "cron": f"{i} 0 1 7 *", "duration": "1h"} for i in range(40)]
    WindowsFile(fleet_root).save([Window.parse(w) for w in
                                  [*far, {"name": "soon", "cron": "0 3 5 6 *", "duration": "1h"}]])
    next_occurrence(estop, NOW)  # compiles and keeps the schedule
    built: list[str] = []
    parse = Window.parse

    def counted(cls, data, **kwargs):
        built.append(data.get("name") if isinstance(data, dict) else "?")
        return parse(data, **kwargs)

    monkeypatch.setattr(Window, "parse", classmethod(counted))
    window, occurrence = next_occurrence(estop, NOW)
    assert (window.name, occurrence.start) == ("soon", datetime(2026, 6, 5, 3, tzinfo=UTC))
    assert built == ["soon"]
    WindowsFile(fleet_root).save([Window.parse(w) for w in far])
    next_occurrence(estop, NOW)
    built.clear()
    window, occurrence = next_occurrence(estop, NOW)
    assert (window.name, occurrence.start) == ("m0", datetime(2026, 7, 1, 0, 0, tzinfo=UTC))
    assert len(built) <= 2  # the first past the horizon asked, then the one found


def test_a_status_reads_the_windows_schedule_once(estop, monkeypatch):
    """The windows section and the next window's impact share one read of the kept schedule: at
    100,000 windows a second read was a second 60 MB and a second of every `status`."""
    from hermes_estop.observe.status import fleet_status
    from hermes_estop.windows import schedule

    fleet_status(estop)  # compiles and keeps the schedule
    read = schedule.loads
    reads: list[int] = []
    monkeypatch.setattr(schedule, "loads", lambda *a, **k: reads.append(1) or read(*a, **k))
    found = fleet_status(estop)
    assert found.sections["next_window_impact"]["window"] == "nightly" and found.sections["windows"]
    assert len(reads) == 1


def test_status_section_says_the_next_windows_totals(estop):
    section = next_impact_section(estop, NOW)
    assert section["lines"] == ["next window nightly (2026-06-02T01:45:00+00:00): holds back 4 cron runs, "
                                "2 ready cards (hermes windows impact nightly)"]
    assert section["json"]["next_window_impact"]["held_runs"] == 4


def test_status_section_never_raises(estop, fleet_root):
    (fleet_root / "windows.toml").write_text("[[windows]]\nname = 'x'\n")
    section = next_impact_section(estop, NOW)
    assert len(section["lines"]) == 1 and section["lines"][0].startswith("next window impact: ")


def test_status_section_says_at_least_when_an_input_is_unreadable(estop, fleet_root):
    (fleet_root / "profiles" / "ops" / "cron" / "jobs.json").write_bytes(b"{not json")
    section = next_impact_section(estop, NOW)
    assert section["lines"] == ["next window nightly (2026-06-02T01:45:00+00:00): holds back at least 0 cron runs, "
                                "2 ready cards (1 input(s) unreadable; hermes windows impact nightly)"]
    [problem] = section["json"]["next_window_impact"]["problems"]
    assert problem.startswith("cron table of ") and "damaged" in problem


def test_impact_waits_for_no_lock_a_tick_or_a_dispatch_pass_holds(estop, fleet_root):
    """A tick edits the cron table under its lock, a pass writes the board: the preview reads the
    table without that lock and gives up on a board held locked (one problem line), never waiting."""
    window, occurrence = window_occurrence(estop, "nightly", 1, NOW)
    assert occurrence is not None
    holder = sqlite3.connect(fleet_root / "kanban.db", isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        with CronTable(fleet_root / "profiles" / "ops").edit(), CronTable(fleet_root).edit():
            found = window_impact(estop, window, occurrence, NOW).impact
    finally:
        holder.close()
    assert {j.name: (j.held_count, j.run_count) for j in found.jobs} == {"sync": (4, 0), "maint": (0, 1)}
    assert found.cards.waiting == 0 and [p.split(":")[0] for p in found.problems] == ["kanban board"]
    assert "is busy" in found.problems[0]
