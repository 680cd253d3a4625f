"""Issue 25: a window can run a task (`run = [...]`): at the occurrence's start (after its drain
lead) under the window's hold, at most once per occurrence (also across restarts), audited
(`task-start`/`task-end`); exit 0 releases the occurrence early, a failure keeps the fleet held
with a fixed deadman and the exit code in the reason, and the window still retires exactly the
generation it armed. On the fake clock, on both stores."""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from hermes_estop import Estop
from hermes_estop.model.hold import HoldState
from hermes_estop.windows.ledger import RELEASED, open_ledger
from hermes_estop.windows.model import Window
from hermes_estop.windows.scheduler import WindowService
from hermes_estop.windows.tasks import TaskService
from hermes_estop.windows.windows_file import WindowsFile
from pg_helpers import pg_server, pg_url  # noqa: F401

#: the task: writes what it was given, then exits with argv[2]
TASK = ("import os, sys\n"
        "open(sys.argv[1], 'w').write(os.environ.get('HERMES_ESTOP_GENERATION', ''))\n"
        "sys.exit(int(sys.argv[2]))\n")


class Setup:
    def __init__(self, root: Path, clock, store: str) -> None:
        self.root = root
        self.clock = clock
        self.estop = Estop(root=root, home=root, clock=clock, store=store, actor="operator@test")
        self.fleet = self.estop.fleet
        self.windows = WindowService(self.fleet)
        self.tasks = TaskService(self.fleet, ledger=self.windows.ledger)
        self.marker = root / "task-ran"
        self.start = clock.now + timedelta(minutes=10)

    def window(self, code: int, **extra) -> Window:
        window = Window.parse({"name": "upgrade", "at": self.start.isoformat(), "duration": "1h", "reason": "upgrade",
                               "run": [sys.executable, "-c", TASK, str(self.marker), str(code)], **extra})
        WindowsFile(self.root).save([window])
        return window

    def settle(self) -> None:
        """Wait (real time) for the running tasks to exit, then collect them."""
        for task in list(self.tasks.running.values()):
            task.process.wait(60)
        self.tasks.tick(self.clock.now)

    def standing(self):
        return self.fleet.read((self.fleet.location("fleet"),)).readings[0]

    def events(self, kind: str) -> list:
        return [e for e in self.fleet.history()[0] if e.event == kind]


@pytest.fixture(params=["file", "postgresql"])
def setup(request, fleet_root: Path, clock):
    store = "file" if request.param == "file" else request.getfixturevalue("pg_url")
    made = Setup(fleet_root, clock, store)
    yield made
    made.tasks.stop(grace=1)
    made.estop.close()


def test_a_task_that_succeeds_runs_once_under_the_window_hold_and_releases_it_early(setup, clock):
    setup.window(0)
    clock.set(setup.start)
    setup.windows.tick(clock.now)
    armed = setup.standing().hold.generation
    assert len(setup.tasks.tick(clock.now)) == 1
    setup.settle()
    assert setup.marker.read_text() == armed                      # it ran under the window's hold
    assert setup.standing().state is HoldState.ABSENT             # released early
    entry = next(iter(open_ledger(setup.fleet).load().values()))
    assert entry.state == RELEASED and "released by its task" in (entry.detail or "")
    assert [e.generation for e in setup.events("task-start")] == [armed]
    assert "exited 0" in setup.events("task-end")[0].detail
    clock.advance(minutes=1)
    setup.windows.tick(clock.now)                                 # the window does not arm it again
    assert setup.standing().state is HoldState.ABSENT
    assert setup.tasks.tick(clock.now) == []                      # nor does the task run again


def test_a_failing_task_keeps_the_fleet_held_past_the_window_and_the_window_retires_only_its_own(setup, clock):
    setup.window(3, on_failure_ttl="3h")
    clock.set(setup.start)
    setup.windows.tick(clock.now)
    armed = setup.standing().hold.generation
    setup.tasks.tick(clock.now)
    setup.settle()
    held = setup.standing()
    assert held.state is HoldState.ACTIVE and held.hold.generation != armed
    assert held.hold.reason.startswith("maintenance failed: ") and held.hold.reason.endswith("exited 3")
    assert held.hold.expires_at == clock.now + timedelta(hours=3)
    clock.set(setup.start + timedelta(hours=1))                   # the window's end
    setup.windows.tick(clock.now)
    after = setup.standing()
    assert after.state is HoldState.ACTIVE and after.hold.generation == held.hold.generation
    assert "exited 3" in setup.events("task-end")[0].detail


def test_no_task_runs_in_the_drain_lead(setup, clock):
    setup.window(0, drain="15m")
    clock.set(setup.start - timedelta(minutes=5))
    setup.windows.tick(clock.now)
    assert setup.standing().state is HoldState.ACTIVE             # held for the drain
    assert setup.tasks.tick(clock.now) == []
    clock.set(setup.start)
    setup.windows.tick(clock.now)
    assert len(setup.tasks.tick(clock.now)) == 1


def test_a_restarted_service_never_runs_an_occurrence_s_task_twice(setup, clock):
    setup.window(0)
    clock.set(setup.start)
    setup.windows.tick(clock.now)
    started = setup.tasks.tick(clock.now)
    assert len(started) == 1
    restarted = TaskService(setup.fleet, ledger=setup.windows.ledger)   # the old one died mid-task
    assert restarted.tick(clock.now) == []
    setup.settle()


def test_an_operator_rearm_during_the_task_is_never_touched_by_its_end(setup, clock):
    setup.window(3)
    clock.set(setup.start)
    setup.windows.tick(clock.now)
    setup.tasks.tick(clock.now)
    theirs = setup.estop.engage(reason="operator: keep it", ttl="6h")
    setup.settle()
    standing = setup.standing()
    assert standing.hold.generation == theirs.generation and standing.hold.reason == "operator: keep it"
    assert "someone else's hold" in setup.events("task-end")[0].detail


def test_stopping_the_service_kills_the_task_group(fleet_root, clock):
    setup = Setup(fleet_root, clock, "file")
    pidfile = fleet_root / "child.pid"
    script = ("import os, subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
              f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
              "time.sleep(120)\n")
    WindowsFile(fleet_root).save([Window.parse({"name": "upgrade", "at": setup.start.isoformat(), "duration": "1h",
                                                "run": [sys.executable, "-c", script]})])
    clock.set(setup.start)
    setup.windows.tick(clock.now)
    setup.tasks.tick(clock.now)
    for _ in range(600):
        if pidfile.exists() and pidfile.read_text():
            break
        time.sleep(0.05)
    child = int(pidfile.read_text())
    setup.tasks.stop(grace=2)
    for _ in range(200):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the task's child outlived the service")
    assert "stopped with hermes serve" in setup.events("task-end")[0].detail


@pytest.mark.parametrize("garbage", ['ics = "missing.ics"', 'ics = "garbage.ics"', 'url = "http://127.0.0.1:9/x.ics"'])
def test_a_failing_calendar_never_stops_another_window_s_task_and_is_logged_once(fleet_root, clock, caplog, garbage):
    """Issue 32 item 6: a task window covering now plus one garbage `[[calendars]]` entry: the
    task starts, and the calendar's problem is one line when it starts and one when it clears."""
    import logging

    setup = Setup(fleet_root, clock, "file")
    (fleet_root / "garbage.ics").write_text("BEGIN:VCALENDAR\r\nthis is not a calendar\r\n")
    setup.window(0)
    good = WindowsFile(fleet_root).path.read_text()
    WindowsFile(fleet_root).path.write_text(good + f'\n[[calendars]]\nname = "bad"\n{garbage}\n')
    caplog.set_level(logging.DEBUG, logger="hermes_estop.windows")
    clock.set(setup.start)
    setup.windows.tick(clock.now)
    started = []
    for _ in range(10):
        started += setup.tasks.tick(clock.now)
        clock.advance(seconds=1)
    assert len(started) == 1
    WindowsFile(fleet_root).path.write_text(good)
    for _ in range(3):
        setup.tasks.tick(clock.now)
    setup.settle()
    lines = [r.getMessage() for r in caplog.records if r.name == "hermes_estop.windows" and "window tasks" in r.getMessage()
             and "'bad'" in r.getMessage()]
    assert len(lines) == 2 and "its task does not start; the others proceed" in lines[0]
    assert "validates again" in lines[1]
    setup.tasks.stop(grace=1)


def test_a_new_task_service_on_a_kept_schedule_validates_only_the_armed_window(fleet_root: Path, clock, parses):
    """With a compiled schedule kept for the file's bytes, a new `hermes serve`'s task service,
    sharing its scheduler's schedule, validates the window whose occurrence the scheduler armed
    once between them, not every window of the file (the old code validated the whole file
    first), and still starts its task."""
    made = Setup(fleet_root, clock, "file")
    try:
        task = made.window(0)
        others = [Window.parse({"name": f"other{i}", "cron": f"{i} 3 * * *", "duration": "5m"}) for i in range(40)]
        WindowsFile(fleet_root).save([task, *others])
        clock.set(made.start)
        made.windows.tick(clock.now)  # the pass leaves the schedule kept
        parses.clear()
        scheduler = WindowService(made.fleet, ledger=made.windows.ledger)
        scheduler.tick(clock.now)
        tasks = TaskService(made.fleet, ledger=made.windows.ledger, schedules=scheduler.schedules)
        assert tasks.tick(clock.now) == [f"fleet/upgrade@{made.start.isoformat()}"]
        assert parses == ["upgrade"]
        for running in tasks.running.values():
            running.process.wait(60)
        tasks.tick(clock.now)
    finally:
        made.tasks.stop(grace=1)
        made.estop.close()


def test_a_feed_refused_after_the_read_stops_only_its_window_s_task_with_one_line(fleet_root, clock, caplog, request):
    """A task window excluding a holiday feed and another task window, both armed; the scheduler's
    refresh holds a new schedule (its rows not built yet), then another thread's expansion refuses
    the feed: asking the window raises, its task does not start, one line names it, the other's
    task starts, and the thread goes on (it raised out of the whole tick)."""
    import logging

    from feed_servers import HEAD, TAIL, refuse_from_another_thread, vevent

    caplog.set_level(logging.INFO, logger="hermes_estop.windows")
    unique = vevent(f"UID:{request.node.name}", "DTSTART:20200101T000000Z", "DURATION:PT1M")  # feeds are kept by digest
    # holidays from 2030 on, hourly: none near now; asked about 2060, the rule walks past its budget
    later = vevent("UID:later", "DTSTART:20300101T000000Z", "DURATION:PT30M", "RRULE:FREQ=HOURLY")
    (fleet_root / "holidays.ics").write_text(HEAD + later + unique + TAIL, newline="")
    task = f'run = ["{sys.executable}", "-c", "pass"]\n'
    (fleet_root / "windows.toml").write_text(
        f'[[windows]]\nname = "excluding"\ncron = "0 12 1 6 *"\nduration = "3d"\nscope = "ops"\n'
        f'exclude_calendar = "holidays.ics"\n{task}\n'
        f'[[windows]]\nname = "plain"\ncron = "0 12 1 6 *"\nduration = "3d"\n{task}')
    estop = Estop(root=fleet_root, home=fleet_root, clock=clock, store="file", actor="operator@test")
    windows = WindowService(estop.fleet)
    tasks = TaskService(estop.fleet, ledger=windows.ledger, schedules=windows.schedules)
    try:
        clock.set(clock.now.replace(month=6, day=1, hour=12, minute=0))
        assert {e.windows for e in windows.tick(clock.now).events} == {("excluding",), ("plain",)}
        clock.advance(days=2)
        assert windows.tick(clock.now).ok  # the schedule is refreshed: its rows are built when asked
        raw = WindowsFile(fleet_root).read()
        refuse_from_another_thread(next(w for w in WindowsFile(fleet_root).parse_each(raw).windows
                                        if w.name == "excluding")._holidays)
        plain = f"fleet/plain@{clock.now.replace(day=1).isoformat()}"
        assert [key for _ in range(3) for key in tasks.tick(clock.now)] == [plain]
        assert [e.detail for e in estop.fleet.history()[0] if e.event == "task-start"] == [f"window task {plain}"]
        lines = [r.getMessage() for r in caplog.records if "excluding" in r.getMessage() and "window tasks" in r.getMessage()]
        assert len(lines) == 1 and "200000 steps" in lines[0] and "its task does not start" in lines[0], lines
        assert not [r for r in caplog.records if r.exc_info], "a tick failed with a traceback"
    finally:
        tasks.stop(grace=1)
        estop.close()
