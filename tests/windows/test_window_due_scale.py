"""A reconciliation pass over 10,000 windows does the work of the windows that are due, not of
every window (issue 24), counted, never timed: a pass plans from a schedule (the file's, or one
compiled in memory of the windows it acts on), reads what covers now off its arm order and the
wake-ups off the same, and asks no window; a window compiled once keeps its row while the list
is put together anew. The answers are checked against the exact functions over a walk in time
with edits, disabled windows and time going backwards; the ledger is not parsed again when it
did not change."""

from __future__ import annotations

import importlib
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from schedule_queries import rows, wakeups_for

from hermes_estop.windows import schedule as schedule_module, scheduler as service_module
from hermes_estop.windows.calendars import cache_paths
from hermes_estop.windows.ledger import ARMED, ENDED, RETENTION, LedgerEntry, OccurrenceLedger
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import covering
from hermes_estop.windows.schedule import Part, Schedules, schedule_of
from hermes_estop.windows.windows_file import WindowsFile

# the module, not the function `hermes_estop.windows` re-exports under the same name
occurrences_module = importlib.import_module("hermes_estop.windows.occurrences")
ledger_module = importlib.import_module("hermes_estop.windows.ledger")
MONTH = datetime(2027, 3, 1, tzinfo=UTC)
COUNT = 10_000


def parts(windows: list[Window]) -> list[Part]:
    """`windows` as what a pass composes the rows it plans off of (`Schedules.compose`)."""
    return [Part.of(window) for window in windows]


def write_monthly(root: Path, count: int, scopes: int = 100) -> None:
    """`windows.toml` with `count` windows, window `i` starting once a month at minute `i` of
    the month (1,440 a day from the 1st at 00:00 UTC, for 30 minutes), on `scopes` profiles;
    written as text (saving 10,000 models through the file API would take longer than the test)."""
    for scope in range(scopes):
        (root / "profiles" / f"p{scope:03d}").mkdir(parents=True)
    parts = []
    for i in range(count):
        cron = f"{i % 60} {(i // 60) % 24} {1 + i // 1440} * *"
        parts.append(f'[[windows]]\nname = "w{i:05d}"\ncron = "{cron}"\nduration = "30m"\n'
                     f'scope = "p{i % scopes:03d}"\n\n')
    (root / "windows.toml").write_text("".join(parts))


@pytest.fixture
def questions(monkeypatch):
    """How many times a window was asked about its occurrences (the exact functions)."""
    asked = [0]

    def counting(function):
        def counted(*args, **kwargs):
            asked[0] += 1
            return function(*args, **kwargs)
        return counted

    for name in ("covering", "next_armed", "occurrences"):
        monkeypatch.setattr(occurrences_module, name, counting(getattr(occurrences_module, name)))
    monkeypatch.setattr(schedule_module, "occurrences", counting(schedule_module.occurrences))  # a compile
    return asked


def test_a_quiet_pass_over_10000_windows_asks_about_none_of_them(harness, questions):
    write_monthly(harness.root, COUNT)
    harness.clock.set(MONTH + timedelta(days=12))  # nothing covers the 13th, nothing starts
    harness.start()
    questions[0] = 0
    for _ in range(3):
        harness.clock.advance(minutes=10)
        report = harness.service.reconcile()
        assert report.windows == COUNT and not report.active and not report.errors
    # every window asked once for what covers now and once for its next start on each pass
    # would be 60,000; none is due, so none is asked
    assert questions[0] == 0
    assert harness.jobs()  # the wake-ups still stand (read off the heap)


def test_a_pass_over_10000_windows_asks_about_the_due_ones_and_arms_each_on_its_pass(harness, questions):
    write_monthly(harness.root, COUNT, scopes=1000)
    harness.clock.set(MONTH - timedelta(minutes=5))
    harness.start()
    for step in range(6):
        harness.clock.advance(minutes=10)
        questions[0] = 0
        report = harness.service.reconcile()
        now = harness.clock.now
        # window i starts at minute i of the month: those started in the last 30 minutes cover now
        expected = {f"p{i % 1000:03d}/w{i:05d}@{(MONTH + timedelta(minutes=i)).isoformat()}"
                    for i in range(COUNT) if MONTH + timedelta(minutes=i) <= now < MONTH + timedelta(minutes=i + 30)}
        assert set(report.active) == expected and not report.errors
        entries = harness.entries()
        # every occurrence covering now is armed by the pass it became due on
        assert all(key in entries and entries[key].state == ARMED for key in expected), step
        # ten windows start and ten end between two passes: each is asked (a few questions
        # apiece), and a held scope's chain asks each of its ten windows for its next start;
        # asking every window for what covers now and when it starts next would be 20,000
        assert questions[0] <= 1_000, (step, questions[0])


def _fleet(rng: random.Random) -> list[Window]:
    """Windows of every shape the index answers for: cron with and without a drain lead,
    overlapping and back to back, one-shot, bounded, excluded dates."""
    windows = []
    for i in range(40):
        minute, hour = rng.randrange(60), rng.randrange(24)
        data: dict[str, object] = {"name": f"c{i:02d}", "cron": f"{minute} {hour} * * *",
                                   "duration": rng.choice(["10m", "1h", "3h", "25h"]),
                                   "timezone": rng.choice(["UTC", "Europe/Berlin", "America/New_York"])}
        if i % 4 == 0:
            data["drain"] = rng.choice(["5m", "2h"])
        if i % 7 == 0:
            data["not_after"] = (MONTH + timedelta(days=rng.randrange(1, 4))).isoformat()
        if i % 9 == 0:
            data["exclude"] = [(MONTH + timedelta(days=1)).date().isoformat()]
        if i % 11 == 0:
            data["cron"] = f"*/{rng.choice([15, 20])} * * * *"
        windows.append(Window.parse(data))
    for i in range(10):
        windows.append(Window.parse({"name": f"a{i}", "at": (MONTH + timedelta(hours=rng.randrange(96))).isoformat(),
                                     "duration": "90m", "drain": "30m" if i % 2 else None}))
    return windows


def test_the_answers_and_the_wake_ups_are_the_exact_ones_over_a_walk_in_time(tmp_path):
    rng = random.Random(24)
    windows = _fleet(rng)
    schedules = Schedules(tmp_path / "windows.toml")
    now = MONTH
    for step in range(300):
        roll = rng.random()
        if roll < 0.05:
            now -= timedelta(minutes=rng.randrange(1, 600))  # time going backwards
        else:
            now += timedelta(minutes=rng.choice([1, 3, 10, 37, 240]))
        if roll > 0.95:  # an edit: a new object, or the same one disabled, or a new file
            k = rng.randrange(len(windows))
            windows = list(windows)
            windows[k] = windows[k].model_copy(update={"enabled": not windows[k].enabled} if rng.random() < 0.5
                                               else {"duration": timedelta(minutes=rng.choice([5, 45, 300]))})
        elif roll > 0.93:
            windows = [Window.parse(w.model_dump(mode="json", exclude_none=True)) for w in windows]
        listed = schedules.compose(parts(windows), now)  # a list put together anew on every pass
        timeline = listed.timeline
        got = timeline.covering_now(listed, now)
        exact = {w.name: covering(w, now) for w in windows if w.enabled}
        assert got == {name: found for name, found in exact.items() if found}, (step, now)
        for limit in (3, 256):
            assert service_module.due_wakeups(timeline, listed, got, now, limit) == wakeups_for(windows, now, limit), \
                (step, now)


def test_a_window_is_compiled_once_while_the_list_of_windows_is_put_together_anew(tmp_path, questions):
    """The schedule in memory of the windows a pass acts on (a table that fails, a policy,
    calendars): the same windows in a new list, or read again equal field for field, cost no
    cron arithmetic; an edited window alone is compiled again; every answer stays exact."""
    windows = [Window.parse({"name": f"w{i}", "cron": f"{i} 12 * * *", "duration": "1h"}) for i in range(20)]
    schedules = Schedules(tmp_path / "windows.toml")
    first = schedules.compose(parts(windows), MONTH)
    questions[0] = 0
    for hours in range(1, 12):
        assert schedules.compose(parts(windows), MONTH + timedelta(hours=hours)) is first
    reread = [Window.parse(w.model_dump(mode="json", exclude_none=True)) for w in windows]  # read again, unchanged
    assert reread[0] is not windows[0]
    again = schedules.compose(parts(reread), MONTH + timedelta(hours=12))
    assert questions[0] == 0  # equal field for field: the same occurrences, the rows kept
    edited = [*reread[:5], reread[5].model_copy(update={"duration": timedelta(hours=2)}), *reread[6:]]
    now = MONTH + timedelta(hours=12, minutes=30)
    listed = schedules.compose(parts(edited), now)
    timeline = listed.timeline
    assert listed is not again and 0 < questions[0] <= 3  # the edited window alone, asked for its occurrences
    assert timeline.covering_now(listed, now) == {w.name: covering(w, now) for w in edited if covering(w, now)}
    assert timeline.covering_now(listed, now)["w5"][0].end == MONTH + timedelta(hours=14, minutes=5)


def _entries(count: int) -> list[LedgerEntry]:
    return [LedgerEntry(key=f"fleet/w{i}@x", window=f"w{i}", occurrence="x", scope="fleet", end=MONTH, state=ARMED,
                        generation=f"g{i}", updated_at=MONTH) for i in range(count)]


def test_the_ledger_parses_only_the_entries_that_changed(fleet_root, monkeypatch):
    from hermes_estop.fleet.fleet import Fleet

    ledger = OccurrenceLedger(Fleet.of_files(fleet_root).ledger())
    ledger.commit(_entries(1000))
    assert len(ledger.load()) == 1000
    parsed = [0]
    original = LedgerEntry.from_json

    def counting(key, data):
        parsed[0] += 1
        return original(key, data)

    monkeypatch.setattr(ledger_module.LedgerEntry, "from_json", staticmethod(counting))
    again = ledger.load()
    assert parsed[0] == 0 and len(again) == 1000
    # another writer moves one entry (another process: its own ledger object)
    other = OccurrenceLedger(Fleet.of_files(fleet_root).ledger())
    moved = again["fleet/w7@x"].moved(ENDED, MONTH + timedelta(hours=1), detail="retired")
    other.commit([moved])
    parsed[0] = 0
    after = ledger.load()
    assert after["fleet/w7@x"] == moved and parsed[0] == 1
    assert after == {key: moved if key == moved.key else entry for key, entry in again.items()}


def test_a_damaged_entry_is_still_refused_after_its_good_version_was_read(fleet_root):
    import json

    from hermes_estop.fleet.fleet import Fleet
    from hermes_estop.model.errors import StoreError

    ledger = OccurrenceLedger(Fleet.of_files(fleet_root).ledger())
    ledger.commit(_entries(3))
    ledger.load()
    path = fleet_root / "windows-state.json"
    body = json.loads(path.read_text())
    body["occurrences"]["fleet/w1@x"]["state"] = "bogus"
    path.write_text(json.dumps(body))
    with pytest.raises(StoreError):
        ledger.load()
    with pytest.raises(StoreError):
        ledger.commit(_entries(1))  # a commit validates the stored records: refused too
    body["occurrences"]["fleet/w1@x"]["state"] = ARMED
    body["occurrences"]["fleet/w2@x"]["end"] = "not a time"
    path.write_text(json.dumps(body))
    with pytest.raises(StoreError):
        ledger.load()


def test_a_quiet_pass_prunes_only_once_the_oldest_entry_is_past_the_slack(harness):
    now = harness.clock.now
    old = LedgerEntry(key="fleet/gone@x", window="gone", occurrence="x", scope="fleet", end=now - RETENTION - timedelta(minutes=1),
                      state=ENDED, generation="g", updated_at=now - RETENTION)
    harness.ledger.commit([old])
    harness.start()
    assert "fleet/gone@x" in harness.entries()  # past the retention by a minute: kept for now
    harness.clock.advance(service_module.PRUNE_SLACK)
    harness.service.reconcile()
    assert "fleet/gone@x" not in harness.entries()


def test_a_held_scope_walks_its_chain_from_the_schedule_without_asking_any_window(harness, questions):
    """A scope held by a relay of 200 windows: once the compiled schedule of the file is ready,
    every pass walks the chain from it (what the chain memo of issue 24 saved: no window asked
    for its next start, no cron arithmetic), whether or not a window armed or ended since; the
    deadline stays exact."""
    start = MONTH + timedelta(hours=1)
    harness.write(*[{"name": f"r{k:03d}", "cron": f"{k % 60} {1 + k // 60} * * *", "duration": "2m"}
                    for k in range(200)])
    harness.clock.set(start)
    harness.start()
    assert harness.reading().hold.expires_at == start + timedelta(minutes=201)
    questions[0] = 0
    harness.clock.advance(seconds=20)
    harness.service.reconcile()  # nothing armed or ended since
    assert questions[0] == 0
    harness.clock.advance(minutes=2)  # r000 ended, r002 armed
    harness.service.reconcile()
    assert questions[0] == 0
    assert harness.reading().hold.expires_at == start + timedelta(minutes=201)


def test_the_deadline_of_a_held_scope_is_the_exact_chain_over_a_walk_in_time(harness):
    from hermes_estop.windows.plan import chain_end

    rng = random.Random(26)
    windows = [Window.parse({"name": f"k{k:02d}", "cron": f"{rng.randrange(60)} {rng.randrange(24)} * * *",
                             "duration": rng.choice(["20m", "1h", "2h", "5h"]),
                             "drain": rng.choice([None, "15m"])}) for k in range(60)]
    harness.write(*windows)
    harness.clock.set(MONTH)
    harness.start()
    exact = rows(windows, MONTH + timedelta(days=400))  # before its horizon: the exact functions' chain
    for _ in range(150):
        harness.clock.advance(minutes=rng.choice([1, 5, 10, 25]))
        report = harness.service.reconcile()
        now = harness.clock.now
        members = [o for w in windows for o in covering(w, now)]
        hold = harness.reading().hold
        if not members:
            assert hold is None and not report.active, now  # retired at the end of its chain
            continue
        assert hold is not None and hold.expires_at == chain_end(members, exact, now), now


def test_the_first_pass_on_an_unchanged_file_takes_the_schedule_an_operator_kept(harness, questions):
    """`hermes serve` starting on a file whose schedule a command already kept: its first pass
    reads the occurrences off that schedule (`schedule.Schedules.rows`) and asks no window,
    and arms what the exact functions arm."""
    start = MONTH + timedelta(hours=1)
    harness.write(*[{"name": f"r{k:03d}", "cron": f"{k % 60} {1 + k // 60} * * *", "duration": "2m"}
                    for k in range(50)])
    harness.clock.set(start)
    assert schedule_of(WindowsFile(harness.root), start) is not None
    questions[0] = 0
    harness.start()
    assert questions[0] == 0
    assert harness.reading().hold.expires_at == start + timedelta(minutes=51)


def test_a_list_of_a_files_windows_takes_the_rows_of_its_held_schedule(tmp_path, questions):
    """The guard putting back the version it acted on beside an edit: a list of the file's
    windows (its rows' `Window`s, one of them edited) compiled in memory takes each unedited
    window's row from the schedule held for the file (equal tables, equal windows), asking
    croniter for the edited one only; its answers stay exact."""
    tmp_path.chmod(0o755)
    path = tmp_path / "windows.toml"
    path.write_text("".join(f'[[windows]]\nname = "w{i}"\ncron = "{i} 12 * * *"\nduration = "1h"\n\n' for i in range(30)))
    schedules = Schedules(path)
    rows = schedules.rows(path.read_bytes(), MONTH)
    assert rows is not None
    windows = [rows[i] for i in range(len(rows))]
    windows[7] = windows[7].model_copy(update={"duration": timedelta(minutes=20)})
    now = MONTH + timedelta(hours=12, minutes=10)
    questions[0] = 0
    listed = schedules.compose(parts(windows), now)
    timeline = listed.timeline
    assert 0 < questions[0] <= 3  # the edited window alone
    exact = {w.name: covering(w, now) for w in windows if covering(w, now)}
    assert timeline.covering_now(listed, now) == exact and exact["w7"][0].end == MONTH + timedelta(hours=12, minutes=27)
    assert service_module.due_wakeups(timeline, listed, exact, now) == wakeups_for(windows, now)


def _holidays(root, day: str) -> None:
    (root / "holidays.ics").write_text(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\nBEGIN:VEVENT\r\nUID:h\r\n"
        f"DTSTART;VALUE=DATE:{day}\r\nSUMMARY:holiday\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")


def test_windows_excluding_a_calendar_are_rows_bound_to_their_feed(tmp_path, questions):
    """Windows excluding a calendar's days are rows of the schedule compiled in memory: read
    again with the same feed (new objects, equal with that feed) they cost no cron arithmetic;
    read with the feed changed (today no longer a holiday) they are compiled again, and cover
    now as the exact functions say."""
    tmp_path.chmod(0o755)
    (tmp_path / "windows.toml").write_text("".join(
        f'[[windows]]\nname = "x{i}"\ncron = "{i} 0 * * *"\nduration = "1h"\nexclude_calendar = "holidays.ics"\n\n'
        for i in range(20)))
    _holidays(tmp_path, "20270301")
    wf = WindowsFile(tmp_path)
    schedules = Schedules(wf.path)
    now = MONTH + timedelta(minutes=30)
    first = wf.parse(wf.path.read_bytes())
    listed = schedules.compose(parts(first), now)
    assert listed.timeline.covering_now(listed, now) == {}  # the 1st is a holiday: nothing covers it
    questions[0] = 0
    again = [w.model_copy() for w in first]  # new objects bound to the same feed
    assert schedules.compose(parts(again), now) is listed and questions[0] == 0  # the same rows' keys
    _holidays(tmp_path, "20270302")
    moved = wf.parse(wf.path.read_bytes())
    listed = schedules.compose(parts(moved), now)
    changed = listed.timeline
    assert questions[0] >= len(moved)  # another feed: every window compiled again
    exact = {w.name: covering(w, now) for w in moved if covering(w, now)}
    assert len(exact) == 20 and changed.covering_now(listed, now) == exact


MINUTELY = '[[windows]]\nname = "m"\ncron = "* * * * *"\nduration = "30s"\n'
#: a file of a feed: its minutely window excluding a holiday calendar's days, or beside a `[[calendars]]` table
FED = {"exclude_calendar": MINUTELY + 'exclude_calendar = "holidays.ics"\n',
       "calendars": MINUTELY + '\n[[calendars]]\nname = "maint"\nics = "maint.ics"\n'}
MAINT = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\nBEGIN:VEVENT\r\nUID:maint\r\nDTSTART:20270301T000000Z\r\n"
         "DTEND:20270301T020000Z\r\nSUMMARY:maintenance\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")


@pytest.fixture
def compiles(monkeypatch):
    """How many windows were compiled (a row's occurrences over the horizon asked of croniter)."""
    count = [0]
    real = schedule_module.occurrences

    def counted(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(schedule_module, "occurrences", counted)
    return count


def _fed_fleet(harness, kind: str, holiday: str = "20270302") -> None:
    _holidays(harness.root, holiday)
    (harness.root / "maint.ics").write_text(MAINT)
    (harness.root / "windows.toml").write_text(FED[kind])
    harness.clock.set(MONTH + timedelta(seconds=10))


# the calendar's event to 02:00 chains on into the minutely window's occurrence starting then
@pytest.mark.parametrize(("kind", "until"), [("exclude_calendar", MONTH + timedelta(seconds=30)),
                                             ("calendars", MONTH + timedelta(hours=2, seconds=30))])
def test_a_new_scheduler_on_an_unchanged_fed_file_plans_off_its_kept_schedule(harness, compiles, kind, until):
    """`hermes serve` starting again on a file of a feed (a week of a minutely window is 10,080
    croniter steps) plans off the schedule the last one kept, checked against the feeds as they
    read now: no window compiled in memory, on its first pass or the next; the hold is the one
    the first process armed."""
    _fed_fleet(harness, kind)
    harness.start()
    assert harness.reading().hold.expires_at == until
    compiles[0] = 0
    harness.restart()
    harness.clock.advance(seconds=5)
    assert harness.service.reconcile().ok
    assert compiles[0] == 0
    assert harness.reading().hold.expires_at == until


def test_a_holiday_removed_from_a_kept_fed_schedules_feed_arms_at_the_next_pass(harness, compiles):
    """The feed of a schedule a new scheduler took as kept changes (today no longer a holiday):
    the next pass sees its fingerprint changed, compiles it again and arms the window."""
    _fed_fleet(harness, "exclude_calendar", holiday="20270301")
    harness.start()
    harness.restart()
    assert harness.reading().hold is None and compiles[0] == 1  # the first process's compile only
    _holidays(harness.root, "20270302")
    harness.clock.advance(seconds=1)
    assert harness.service.reconcile().pending is None
    assert compiles[0] == 2  # compiled again, of the feed as it now reads
    assert harness.reading().hold.expires_at == MONTH + timedelta(seconds=30)


@pytest.mark.parametrize("kind", list(FED))
def test_a_feed_failing_under_a_kept_fed_schedule_keeps_the_hold(harness, kind):
    """A feed the held schedule is of that can no longer be read (no last good copy either):
    the window or calendar fails, and the hold it armed stays (never planned off the schedule
    of the feed as it was, never freed)."""
    _fed_fleet(harness, kind)
    harness.start()
    harness.restart()
    generation = harness.reading().hold.generation
    (harness.root / ("holidays.ics" if kind == "exclude_calendar" else "maint.ics")).unlink()
    harness.clock.advance(seconds=5)
    report = harness.service.reconcile()
    assert report.failed and "and no last good copy" in report.failed[0]
    assert harness.reading().hold.generation == generation


def test_a_stale_url_calendar_runs_on_its_last_good_copy_off_the_held_schedule(harness, compiles):
    """A calendar whose last fetch failed runs on its last good copy, named stale on every pass,
    off the schedule a new scheduler takes as kept (nothing compiled); once a fetch succeeds
    (its metadata changes) the next pass compiles it again and no longer calls it stale."""
    url = "https://calendars.invalid/maint.ics"
    copy, meta = cache_paths(harness.root, url)
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(MAINT)
    meta.write_text(json.dumps({"error": "timed out", "fetched_at": "2027-02-28T23:00:00Z"}))
    (harness.root / "windows.toml").write_text(f'[[calendars]]\nname = "maint"\nurl = "{url}"\n')
    harness.clock.set(MONTH + timedelta(seconds=10))
    assert "cannot fetch" in harness.start().stale["maint"]
    compiles[0] = 0
    assert "timed out" in harness.restart().stale["maint"]
    assert compiles[0] == 0 and harness.reading().hold.expires_at == MONTH + timedelta(hours=2)
    meta.write_text(json.dumps({"fetched_at": "2027-03-01T00:00:05Z"}))
    harness.clock.advance(seconds=5)
    report = harness.service.reconcile()
    assert report.stale == {} and report.ok and compiles[0] == 1
    assert harness.reading().hold.expires_at == MONTH + timedelta(hours=2)


@pytest.mark.parametrize("kind", list(FED))
def test_under_a_policy_a_new_scheduler_plans_off_the_kept_schedule(harness, compiles, kind):
    """A fleet with an arming policy (every window is checked against it, so the windows are
    validated, not the schedule's rows): a window the policy admits is still planned off the
    schedule an earlier scheduler kept of the file, not compiled again in memory."""
    (harness.root / "estop.toml").write_text('[policy]\nmax_ttl = "30d"\n')
    _fed_fleet(harness, kind)
    harness.start()
    until = harness.reading().hold.expires_at
    compiles[0] = 0
    harness.restart()
    assert compiles[0] == 0 and harness.reading().hold.expires_at == until
