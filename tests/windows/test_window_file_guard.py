"""windows.toml re-saved in place mid-window never frees the fleet (issue 9 item 1), on the fake
clock: an emptied, missing or torn file that takes a holding window away is acted on only once it
stayed the same for one reconcile interval; a confirmed removal withdraws the occurrence, and the
window coming back before the end re-arms it. Plus the file-type rules (item 12) and the sweep of
writers' temporaries (item 17) for windows.toml and windows-state.json."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest
from schedule_queries import rows

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.hold import HoldState
from hermes_estop.windows.ledger import ARMED, WITHDRAWN, open_ledger
from hermes_estop.windows.model import Window
from hermes_estop.windows.plan import FileGuard

POLL = timedelta(seconds=5)  # the service's default poll interval (the confirmation period)


def holding_window(harness, **extra):
    """Two windows in the file, `maint` armed at its start (30 min long): (start, generation, raw file)."""
    start = harness.clock.now + timedelta(hours=1)
    harness.write({"name": "other", "cron": "0 0 1 1 *", "duration": "1h"},
                  {"name": "maint", "at": start.isoformat(), "duration": "30m", **extra})
    harness.start()
    harness.run_until(start)
    return start, harness.reading().hold.generation, harness.file.path.read_bytes()


def write_in_place(path, data: bytes) -> None:
    """What an editor (or `cat src > windows.toml`) does: truncate, then write, same inode."""
    with open(path, "wb") as f:
        f.write(data)


def poll_at(harness, when):
    harness.run_until(when, poll=True)
    return harness.reports[-1]


@pytest.mark.parametrize("state", ["empty", "missing", "torn-prefix", "torn-last-table"])
def test_a_file_caught_mid_save_never_retires_the_standing_occurrence(harness, state):
    start, generation, raw = holding_window(harness, reason="db", scope="fleet")
    if state == "empty":
        write_in_place(harness.file.path, b"")
    elif state == "missing":
        harness.file.path.unlink()
    elif state == "torn-prefix":  # only the first window made it to disk
        write_in_place(harness.file.path, raw[: raw.rindex(b"[[windows]]", 0, raw.index(b'name = "maint"'))])
    else:  # the last table cut before its optional fields: a window of another scope and reason
        cut = raw.index(b'duration = "30m"', raw.index(b'name = "maint"')) + len(b'duration = "30m"\n')
        write_in_place(harness.file.path, raw[:cut])
    report = poll_at(harness, start + timedelta(minutes=1))
    assert report.pending and "not acted on" in report.pending
    write_in_place(harness.file.path, raw)  # the save completes
    poll_at(harness, start + timedelta(minutes=1) + POLL)
    poll_at(harness, start + timedelta(minutes=2))
    assert harness.reading().hold.generation == generation
    assert harness.events("retire") == [] and harness.events("rearm") == []
    assert harness.entries()[f"fleet/maint@{start.isoformat()}"].state == ARMED


def test_a_save_that_keeps_landing_mid_write_never_confirms(harness):
    start, generation, raw = holding_window(harness)
    when = start
    for _ in range(20):  # each poll finds a new half-written file (a new mtime): never the same one twice
        write_in_place(harness.file.path, b"")
        when += POLL
        poll_at(harness, when)
        write_in_place(harness.file.path, raw)
        harness.file.path.touch()
    assert harness.reading().hold.generation == generation


def test_an_empty_file_that_stays_empty_for_one_interval_retires_the_hold(harness):
    start, generation, _ = holding_window(harness)
    write_in_place(harness.file.path, b"")
    assert poll_at(harness, start + timedelta(minutes=1)).pending
    assert harness.reading().state is HoldState.ACTIVE
    poll_at(harness, start + timedelta(minutes=1) + POLL - timedelta(microseconds=1))
    assert harness.reading().state is HoldState.ACTIVE  # less than one interval: still unconfirmed
    poll_at(harness, start + timedelta(minutes=1) + POLL)
    assert harness.reading().state is HoldState.ABSENT
    assert [e.generation for e in harness.events("retire")] == [generation]
    assert harness.entries()[f"fleet/maint@{start.isoformat()}"].state == WITHDRAWN


def test_a_withdrawn_occurrence_is_rearmed_when_its_window_is_back_before_the_end(harness):
    start, generation, raw = holding_window(harness)
    harness.file.remove("maint")
    poll_at(harness, start + timedelta(minutes=1))
    poll_at(harness, start + timedelta(minutes=1) + POLL)
    assert harness.reading().state is HoldState.ABSENT
    write_in_place(harness.file.path, raw)  # the window is back (additions are trusted at once)
    poll_at(harness, start + timedelta(minutes=3))
    hold = harness.reading().hold
    assert hold is not None and hold.generation != generation
    assert hold.expires_at == start + timedelta(minutes=30)
    assert harness.entries()[f"fleet/maint@{start.isoformat()}"].state == ARMED
    harness.run_until(start + timedelta(minutes=30))
    assert harness.reading().state is HoldState.ABSENT


def test_a_fresh_scheduler_does_not_trust_a_read_missing_a_window_the_ledger_says_holds(harness):
    start, generation, _ = holding_window(harness)
    write_in_place(harness.file.path, b"")
    harness.clock.set(start + timedelta(minutes=2))
    report = harness.restart()  # nothing trusted yet: the ledger is what says `maint` holds
    assert report.pending
    assert harness.reading().hold.generation == generation


def test_adding_a_window_is_acted_on_at_once(harness):
    harness.write({"name": "other", "cron": "0 0 1 1 *", "duration": "1h"})
    harness.start()
    start = harness.clock.now - timedelta(minutes=1)
    harness.file.add(Window.parse({"name": "now", "at": start.isoformat(), "duration": "1h"}))
    report = poll_at(harness, harness.clock.now + timedelta(seconds=1))
    assert report.pending is None
    assert harness.reading().hold.armed_by == "window:now"


@pytest.mark.parametrize("kind", ["fifo", "directory"])
@pytest.mark.parametrize("which", ["windows.toml", "windows-state.json"])
def test_a_non_regular_file_is_refused_with_one_line_and_keeps_the_standing_hold(harness, kind, which):
    start, generation, _ = holding_window(harness)
    path = harness.root / which
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    report = poll_at(harness, start + timedelta(minutes=1))  # must not hang on the FIFO
    assert report.errors and str(path) in report.errors[0] and "\n" not in report.errors[0]
    poll_at(harness, start + timedelta(minutes=2))
    assert harness.reading().hold.generation == generation


def test_windows_file_writers_sweep_temporaries_of_crashed_writers(harness):
    harness.write({"name": "other", "cron": "0 0 1 1 *", "duration": "1h"})
    leftovers = [harness.root / f".windows.toml.tmp-{i}" for i in range(3)]
    for path in leftovers:
        path.write_bytes(b"half")
    harness.file.add(Window.parse({"name": "more", "cron": "0 1 1 1 *", "duration": "1h"}))
    assert not any(path.exists() for path in leftovers)


def test_ledger_writers_sweep_temporaries_of_crashed_writers(harness, fleet_root):
    ledger = open_ledger(Fleet.of_files(fleet_root))
    leftovers = [fleet_root / f".windows-state.json.tmp-{i}" for i in range(3)]
    for path in leftovers:
        path.write_bytes(b"half")
    ledger.commit([], prune_before=datetime(2026, 1, 1, tzinfo=UTC))
    assert not any(path.exists() for path in leftovers)
    assert ledger.load() == {}


# -- the decision alone ---------------------------------------------------------------------

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
A = Window.parse({"name": "a", "cron": "0 3 * * *", "duration": "1h"})
B = Window.parse({"name": "b", "cron": "0 4 * * *", "duration": "1h"})


def test_guard_trusts_the_first_read_and_every_addition():
    guard = FileGuard(POLL)
    assert guard.judge((1,), rows([A]), {}, T0).trusted
    assert guard.judge((2,), rows([A, B]), {}, T0).trusted


@pytest.mark.parametrize("reads, trusted", [
    # (identity, seconds after T0) of consecutive reads of a file without `b`
    ([((3,), 0), ((3,), 5)], [False, True]),
    ([((3,), 0), ((3,), 4.9)], [False, False]),
    ([((3,), 0), ((4,), 5), ((4,), 9)], [False, False, False]),
    ([((3,), 0), ((4,), 5), ((4,), 10)], [False, False, True]),
    ([(None, 0), (None, 5)], [False, True]),
])
def test_guard_confirms_a_shrink_only_by_the_same_file_one_interval_later(reads, trusted):
    guard = FileGuard(POLL)
    guard.judge((1,), rows([A, B]), {}, T0)
    seen = [guard.judge(identity, rows([A]), {}, T0 + timedelta(seconds=s)).trusted for identity, s in reads]
    assert seen == trusted


def test_guard_starts_over_after_a_failed_read():
    guard = FileGuard(POLL)
    guard.judge((1,), rows([A, B]), {}, T0)
    assert not guard.judge((3,), rows([A]), {}, T0).trusted
    guard.interrupted()
    assert not guard.judge((3,), rows([A]), {}, T0 + POLL).trusted
    assert guard.judge((3,), rows([A]), {}, T0 + 2 * POLL).trusted


def fast_poll(harness):
    """The harness's service at `serve --interval 0.05`."""
    from hermes_estop.windows.scheduler import WindowService

    harness.service = WindowService(harness.service.fleet, scheduler=harness.service.scheduler,
                                    is_leader=lambda: True, poll_interval=0.05)


def test_a_fast_poll_interval_still_confirms_a_removal_only_after_the_five_second_floor(harness):
    """`serve --interval 0.05` on a loaded machine: an edit that drops a window is acted on only
    once the file stayed the same for five seconds, not one 50 ms interval (issue 20 item 1: the
    old one-second floor for a complete file is gone)."""
    from hermes_estop.windows.scheduler import WEAKEN_AFTER

    fast_poll(harness)
    start, generation, _ = holding_window(harness)
    assert harness.service.guard.confirm_after == timedelta(seconds=WEAKEN_AFTER) == timedelta(seconds=5)
    harness.file.remove("maint")  # a complete file with `other` only, renamed in
    when = start + timedelta(minutes=1)
    for step in range(99):  # 99 polls 50 ms apart: 4.9 s of the same file
        assert poll_at(harness, when + step * timedelta(seconds=0.05)).pending
    assert harness.reading().hold.generation == generation
    poll_at(harness, when + timedelta(seconds=5))
    assert harness.reading().state is HoldState.ABSENT
    assert [e.generation for e in harness.events("retire")] == [generation]


@pytest.mark.parametrize("state", ["empty", "missing", "torn-prefix"])
def test_a_save_stalled_midway_for_seconds_is_not_taken_for_an_edit_at_a_fast_interval(harness, state):
    """An in-place save whose writer stalls between truncate and write (a journal commit on a
    busy disk) leaves a torn file that does not change from read to read: seen in CI to outlast
    a second. Such a read waits for the five-second floor."""
    fast_poll(harness)
    start, generation, _raw = holding_window(harness)
    if state == "empty":
        write_in_place(harness.file.path, b"")
    elif state == "missing":
        harness.file.path.unlink()
    else:  # the same windows as tables, then a save of it with only the first table on disk
        tables = (b'[[windows]]\nname = "other"\ncron = "0 0 1 1 *"\nduration = "1h"\n\n'
                  b'[[windows]]\nname = "maint"\nat = ' + start.isoformat().encode() + b'\nduration = "30m"\n')
        write_in_place(harness.file.path, tables)
        assert poll_at(harness, start + timedelta(seconds=30)).pending is None
        write_in_place(harness.file.path, tables[: tables.index(b'[[windows]]\nname = "maint"')])
    when = start + timedelta(minutes=1)
    for step in range(99):  # 4.95 s of the same torn file, polled every 50 ms
        report = poll_at(harness, when + step * timedelta(seconds=0.05))
        assert report.pending and "stays the same for 5s" in report.pending
    assert harness.reading().hold.generation == generation
    assert harness.events("retire") == []
    poll_at(harness, when + timedelta(seconds=5))  # still that file after five seconds: an edit
    assert harness.reading().state is HoldState.ABSENT


@pytest.mark.parametrize(("later", "windows", "same_file"), [
    (b"", [], True),                        # emptied in place
    (None, [], False),                      # missing
    (b"windows = [", [A], False),           # a strict prefix of the trusted bytes
    (b"# comments only\n", [], True),       # no window left in the same file
    (b"windows = []\n", [], False),         # no window, a new file renamed in (`windows remove`)
    (b"windows = [ { other } ]", [A], True),  # a complete file that differs
])
def test_every_weakening_waits_the_same_period_whatever_the_read_looks_like(later, windows, same_file):
    """Issue 20 item 1: no heuristic about what a torn file looks like; every read that takes a
    window away waits the one confirmation period (the service's is at least five seconds)."""
    guard = FileGuard(timedelta(seconds=15))
    assert guard.judge((7, 1, 26), rows([A, B]), {}, T0).trusted
    identity = None if later is None else (7, 1 if same_file else 2, len(later))
    assert not guard.judge(identity, rows(windows), {}, T0).trusted
    assert guard.confirm_after == timedelta(seconds=15)
    assert not guard.judge(identity, rows(windows), {}, T0 + timedelta(seconds=15) - timedelta(microseconds=1)).trusted
    assert guard.judge(identity, rows(windows), {}, T0 + timedelta(seconds=15)).trusted


def test_windows_remove_of_the_last_window_is_acted_on_only_after_the_five_second_floor(harness):
    """`hermes windows remove` writes a complete file and renames it in: a weakening like any
    other, acted on after five seconds and two reads (`hermes resume` frees the fleet at once)."""
    fast_poll(harness)
    start = harness.clock.now + timedelta(hours=1)
    harness.write({"name": "maint", "at": start.isoformat(), "duration": "30m"})
    harness.start()
    harness.run_until(start)
    generation = harness.reading().hold.generation
    harness.file.remove("maint")
    when = start + timedelta(minutes=1)
    assert poll_at(harness, when).pending
    assert poll_at(harness, when + timedelta(seconds=1)).pending
    assert poll_at(harness, when + timedelta(seconds=4.95)).pending
    assert harness.reading().hold.generation == generation
    poll_at(harness, when + timedelta(seconds=5))
    assert harness.reading().state is HoldState.ABSENT


# -- issue 20 item 1: every weakening waits five seconds and two reads; arming acts at once ---

def fast_poll_at(harness, seconds):
    """The harness's service at `serve --interval <seconds>`."""
    from hermes_estop.windows.scheduler import WindowService

    harness.service = WindowService(harness.service.fleet, scheduler=harness.service.scheduler,
                                    is_leader=lambda: True, poll_interval=seconds)


def new_first_window(covering_from=None):
    """The TOML table of a window `new` (covering now when `covering_from` is given)."""
    if covering_from is None:
        return b'[[windows]]\nname = "new"\ncron = "0 0 1 1 *"\nduration = "1h"\n\n'
    return (b'[[windows]]\nname = "new"\nat = ' + covering_from.isoformat().encode()
            + b'\nduration = "2h"\nreason = "new work"\n\n')


@pytest.mark.parametrize("covers_now", [False, True])
def test_an_in_place_save_that_writes_a_new_first_window_then_stalls_never_frees_the_fleet(harness, covers_now):
    """The editor truncates windows.toml, writes the new first window, stalls 1.5 s, then writes
    the rest; at `--interval 0.2` the torn read is valid TOML holding only the new window."""
    fast_poll_at(harness, 0.2)
    start, _, _ = holding_window(harness)
    when = start + timedelta(minutes=1)
    first = new_first_window(when - timedelta(seconds=30) if covers_now else None)
    write_in_place(harness.file.path, first)
    for step in range(9):  # 1.6 s of the torn file, polled every 0.2 s
        report = poll_at(harness, when + step * timedelta(seconds=0.2))
        assert report.pending and "not acted on" in report.pending
        assert harness.reading().state is HoldState.ACTIVE
    rest = (b'[[windows]]\nname = "other"\ncron = "0 0 1 1 *"\nduration = "1h"\n\n'
            b'[[windows]]\nname = "maint"\nat = ' + start.isoformat().encode() + b'\nduration = "30m"\n')
    write_in_place(harness.file.path, first + rest)  # the rest lands
    for step in range(9, 60):
        report = poll_at(harness, when + step * timedelta(seconds=0.2))
        assert report.pending is None and not report.errors and not report.failed
        assert harness.reading().state is HoldState.ACTIVE
    assert harness.events("retire") == []
    assert harness.entries()[f"fleet/maint@{start.isoformat()}"].state == ARMED
    assert harness.reading().hold.expires_at >= start + timedelta(minutes=30)


def test_a_window_a_torn_read_adds_arms_at_once_while_what_it_takes_away_waits(harness):
    fast_poll_at(harness, 0.2)
    start, _, _ = holding_window(harness)
    when = start + timedelta(minutes=1)
    write_in_place(harness.file.path, new_first_window(when - timedelta(seconds=30)))
    report = poll_at(harness, when)
    assert report.pending
    hold = harness.reading().hold
    assert "new work" in hold.reason
    assert hold.expires_at == when - timedelta(seconds=30) + timedelta(hours=2)
    covers = {item["name"] for item in hold.window.get("covers", [])}
    assert covers == {"maint", "new"}  # the one the read lacks still holds, with its ledger entry
    assert harness.entries()[f"fleet/maint@{start.isoformat()}"].state == ARMED


def test_a_window_made_longer_acts_at_the_next_read(harness):
    start, _generation, _ = holding_window(harness)
    windows = harness.file.load()
    longer = [w.model_copy(update={"duration": timedelta(hours=2)}) if w.name == "maint" else w for w in windows]
    harness.file.save(longer)
    report = poll_at(harness, start + timedelta(minutes=1))
    assert report.pending is None
    assert harness.reading().hold.expires_at == start + timedelta(hours=2)


@pytest.mark.parametrize("change", [
    {"duration": timedelta(minutes=10)},            # shorter
    {"enabled": False},                             # switched off
    {"scope": "ops"},                               # moved
    {"allow": {"user_ids": ["424242"]}},            # admits more
    {"not_after": T0 - timedelta(days=365)},        # bound moved before it
])
def test_a_weakened_window_waits_like_a_removed_one(harness, change):
    start, generation, _ = holding_window(harness)
    windows = harness.file.load()
    maint = next(w for w in windows if w.name == "maint")
    data = maint.to_toml() | change
    weaker = Window.parse({k: v for k, v in data.items() if v is not None})
    harness.file.save([weaker if w.name == "maint" else w for w in windows])
    when = start + timedelta(minutes=1)
    assert poll_at(harness, when).pending
    assert poll_at(harness, when + timedelta(seconds=4)).pending
    hold = harness.reading().hold
    assert hold.generation == generation and hold.expires_at == start + timedelta(minutes=30)
    assert harness.events("retire") == []


@pytest.mark.parametrize(("old", "new", "stronger"), [
    ({}, {"duration": "2h"}, True),
    ({}, {"drain": "15m"}, True),
    ({"not_after": "2030-01-01T00:00:00Z"}, {}, True),
    ({"exclude": ["2026-03-02"]}, {}, True),
    ({"allow": {"user_ids": ["1", "2"]}}, {"allow": {"user_ids": ["1"]}}, True),
    ({"allow": {"user_ids": ["1"]}}, {"allow": {"user_ids": ["1"], "profiles": ["ops"]}}, True),
    ({"enabled": False}, {"cron": "0 5 * * *"}, True),
    ({}, {"duration": "30m"}, False),
    ({}, {"cron": "0 5 * * *"}, False),
    ({}, {"reason": "other"}, False),
    ({}, {"enabled": False}, False),
    ({}, {"not_before": "2030-01-01T00:00:00Z"}, False),
    ({}, {"exclude_cron": "* * * * *"}, False),
    ({"allow": {"user_ids": ["1"]}}, {"allow": {"user_ids": ["1", "2"]}}, False),
    ({"allow": {"user_ids": ["1"], "profiles": ["ops"]}}, {"allow": {"user_ids": ["1"]}}, False),
])
def test_guard_acts_at_once_only_on_a_change_that_takes_no_hold_time_away(old, new, stronger):
    base = {"name": "b", "cron": "0 4 * * *", "duration": "1h"}
    before, after = Window.parse(base | old), Window.parse(base | new)
    guard = FileGuard(POLL)
    assert guard.judge((1,), rows([A, before]), {}, T0).trusted
    assert guard.judge((2,), rows([A, after]), {}, T0).trusted is stronger


def test_guard_never_confirms_a_weakening_on_a_single_read():
    guard = FileGuard(timedelta(0))
    guard.judge((1,), rows([A, B]), {}, T0)
    assert not guard.judge((2,), rows([A]), {}, T0).trusted
    assert guard.judge((2,), rows([A]), {}, T0).trusted


def test_guard_keeps_what_an_unconfirmed_read_takes_away_and_adds_what_it_adds():
    guard = FileGuard(POLL)
    guard.judge((1,), rows([A, B]), {}, T0)
    c = Window.parse({"name": "c", "cron": "0 5 * * *", "duration": "1h"})
    verdict = guard.judge((2,), rows([c]), {}, T0)
    assert not verdict.trusted
    assert list(verdict.windows) == [c, A, B]
    verdict = guard.judge((3,), rows([A, B]), {}, T0 + timedelta(seconds=1))  # the torn read's addition went away
    assert not verdict.trusted and list(verdict.windows) == [A, B, c]


def test_the_guard_builds_a_window_only_for_a_row_whose_table_changed():
    """Issue 45: the guard compares rows by their tables; a read that weakens one window of 200
    builds that window's two versions alone (to judge it and put the old one back), never one
    for every row, and what it acts on meanwhile is the rows of one schedule."""
    windows = [Window.parse({"name": f"w{i}", "cron": f"{i % 60} 3 * * *", "duration": "1h"}) for i in range(200)]
    first = rows(windows, T0)
    guard = FileGuard(POLL)
    assert guard.judge((1,), first, {}, T0).trusted
    edited = [*windows[:7], windows[7].model_copy(update={"duration": timedelta(minutes=30)}), *windows[8:]]
    read = rows(edited, T0)
    verdict = guard.judge((2,), read, {}, T0)
    assert not verdict.trusted and verdict.reason is not None and "w7" in verdict.reason
    assert set(read.timeline._built) == {7} and set(first.timeline._built) == {7}
    assert verdict.windows is not None and len(verdict.windows) == 200
    assert verdict.windows[7] == windows[7]  # the version acted on, held meanwhile


@pytest.mark.parametrize("scope_of_other", ["dev", "ops"])
def test_a_window_failing_when_a_new_scheduler_starts_holds_its_scope_and_the_others_arm(harness, scope_of_other):
    """A scheduler process that never read a valid version of a window holding per the ledger
    cannot put it back: that window's scope holds as it is, neither armed nor retired, until its
    occurrence ends, and every other window is planned as usual (it blocked every window)."""
    now = harness.clock.now
    start = now.replace(second=0, microsecond=0) + timedelta(minutes=10)
    maint = {"name": "maint", "at": (now - timedelta(minutes=5)).isoformat(), "duration": "1h", "scope": "ops"}
    harness.write(maint)
    harness.start()
    held = harness.reading("ops").hold
    assert held is not None and held.window["name"] == "maint"
    harness.file.path.write_text(
        f'[[windows]]\nname = "maint"\nat = "{maint["at"]}"\nduration = "1 hour please"\nscope = "ops"\n\n'
        f'[[windows]]\nname = "other"\nat = "{start.isoformat()}"\nduration = "10m"\nscope = "{scope_of_other}"\n')
    report = harness.restart()
    assert len(report.failed) == 1 and "maint" in report.failed[0]
    assert any("scope ops: held as it was" in line and "maint" in line for line in report.errors), report.errors
    harness.run_until(start)
    assert harness.reading("ops").hold.generation == held.generation
    other = harness.reading(scope_of_other).hold
    if scope_of_other == "dev":  # another scope: armed at its start
        assert other is not None and other.window["name"] == "other"
    else:  # the held scope: left as it is (the window's hold covers it) until maint's occurrence ends
        assert other.generation == held.generation
    assert harness.entries()[f"ops/maint@{held.window['occurrence']}"].state == ARMED
