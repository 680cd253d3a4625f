"""The window scheduler with a fake clock and a real APScheduler (see conftest.Harness): it arms at
each start with the end as the deadman, its expiry job retires exactly that generation, and it is
level-triggered across restarts, releases, manual holds, overlaps and edits of windows.toml."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest
from schedule_queries import schedule_path

from hermes_estop.model.hold import HoldState
from hermes_estop.stores.base import LEDGER_FILE
from hermes_estop.windows.ledger import ARMED, ENDED, INTENT, RELEASED, SKIPPED, LedgerEntry
from hermes_estop.windows.model import Window

US = timedelta(microseconds=1)


def one_shot(harness, name="maint", start_in=timedelta(hours=1), duration="30m", **extra):
    start = harness.clock.now + start_in
    window = {"name": name, "at": start.isoformat(), "duration": duration, **extra}
    return window, start


def armed_one_shot(harness, **kwargs):
    """A one-shot window 1h ahead, the scheduler started, the clock run to its start: the
    window's definition, its start, and the generation the scheduler armed."""
    window, start = one_shot(harness, **kwargs)
    harness.write(window)
    harness.start()
    harness.run_until(start)
    return window, start, harness.reading(kwargs.get("scope", "fleet")).hold.generation


def test_arms_at_start_with_the_occurrence_end_as_deadline(harness):
    window, start = one_shot(harness, reason="db migration", allow={"user_ids": ["424242"]})
    harness.write(window)
    harness.start()
    assert harness.jobs() == {"windows:start:maint": start}
    harness.run_until(start - US)
    assert harness.reading().state is HoldState.ABSENT
    fired = harness.run_until(start)
    assert fired == ["windows:start:maint"]
    reading = harness.reading()
    assert reading.state is HoldState.ACTIVE
    hold = reading.hold
    assert hold.expires_at == start + timedelta(minutes=30)
    assert hold.engaged_at == start
    assert hold.armed_by == "window:maint"
    assert hold.window == {"name": "maint", "occurrence": start.isoformat()}
    assert hold.reason == "db migration"
    assert hold.allow.admits("424242", None) and not hold.allow.admits("1", None)
    assert harness.jobs() == {"windows:end:maint": start + timedelta(minutes=30)}
    assert harness.entries()[f"fleet/maint@{start.isoformat()}"].state == ARMED



@pytest.mark.parametrize(("extra", "before", "reason", "admitted"), [
    ({"reason": "db migration", "allow": {"user_ids": ["424242"], "profiles": ["ops"]}}, timedelta(0), "db migration",
     {("424242", "ops"): True, ("424242", "dev"): False, ("1", "ops"): False}),
    ({"drain": "10m"}, timedelta(minutes=5), "draining for maint", {("424242", None): False}),
    ({"reason": "reindex", "drain": "10m"}, timedelta(minutes=5), "draining for maint: reindex", {}),
])
def test_the_pass_arming_a_row_validates_no_window(harness, monkeypatch, extra, before, reason, admitted):
    """The hold's reason and allowlist are read off the row's table of the held schedule: the
    pass that arms it validates no `Window` (issue 45: one was validated in the middle of planning)."""
    start = harness.clock.now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    harness.write({"name": "maint", "cron": f"0 {start.hour} * * *", "timezone": "UTC", "duration": "30m", **extra})
    harness.service.check_file()  # the file's schedule compiled and held, as `serve --once` does
    validated = []
    parse = Window.parse
    monkeypatch.setattr(Window, "parse", classmethod(lambda cls, data: validated.append(data) or parse(data)))
    harness.clock.set(start - before)
    report = harness.service.tick()
    assert [event.kind for event in report.events] == ["arm"], report.errors
    hold = harness.reading().hold
    assert hold.reason == reason
    assert {who: hold.allow.admits(*who) for who in admitted} == admitted
    assert validated == []

def test_a_pass_over_the_same_bytes_with_a_failing_table_encodes_no_window_again(harness, monkeypatch):
    """A file with a table that does not validate is planned off rows composed of its windows
    (`Schedules.compose`), keyed by each window's table: the next pass over the same bytes reads
    the same windows and takes their keys as they were (encoding 10,000 tables a pass cost more
    than the rest of the pass)."""
    start = harness.clock.now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    harness.write({"name": "maint", "cron": f"0 {start.hour} * * *", "timezone": "UTC", "duration": "30m"},
                  {"name": "other", "cron": "30 * * * *", "timezone": "UTC", "duration": "10m"})
    with open(harness.file.path, "a", encoding="utf-8") as out:
        out.write('\n[[windows]]\nname = "bad"\ncron = "61 * * * *"\nduration = "1h"\n')
    first = harness.service.tick()
    assert len(first.failed) == 1, first.errors
    encoded = []
    dump = Window.to_json_bytes
    monkeypatch.setattr(Window, "to_json_bytes", lambda self: encoded.append(self.name) or dump(self))
    harness.clock.set(start)
    report = harness.service.tick()
    assert [event.kind for event in report.events] == ["arm"], report.errors
    assert harness.reading().hold.window["name"] == "maint"
    assert encoded == []


def test_expiry_job_retires_the_generation_it_armed(harness):
    _window, start, generation = armed_one_shot(harness)
    end = start + timedelta(minutes=30)
    fired = harness.run_until(end)
    assert fired[-1] == "windows:end:maint"
    assert harness.reading().state is HoldState.ABSENT
    [retire] = harness.events("retire")
    assert (retire.generation, retire.time, retire.actor) == (generation, end, "scheduler@test")
    assert harness.entries()[f"fleet/maint@{start.isoformat()}"].state == ENDED
    assert harness.jobs() == {}


def test_operator_rearm_between_arm_and_end_survives_the_expiry_job(harness):
    _window, start, ours = armed_one_shot(harness)
    harness.run_until(start + timedelta(minutes=10))
    theirs = harness.estop.engage(reason="migration overran", ttl="2h", fleet=True)
    harness.run_until(start + timedelta(minutes=20), poll=True)
    fired = harness.run_until(start + timedelta(minutes=30), poll=True)
    assert "windows:end:maint" in fired
    reading = harness.reading()
    assert reading.state is HoldState.ACTIVE
    assert reading.hold.generation == theirs.generation != ours
    assert reading.hold.reason == "migration overran"
    assert reading.hold.expires_at == start + timedelta(minutes=10, hours=2)
    assert harness.events("retire") == []
    assert harness.entries()[f"fleet/maint@{start.isoformat()}"].state == RELEASED


def test_restart_mid_window_arms_for_the_remainder(harness):
    window, start = one_shot(harness, start_in=-timedelta(minutes=10))
    harness.write(window)
    harness.start()  # the scheduler was down at the start; it comes up 10 minutes in
    hold = harness.reading().hold
    assert hold.expires_at == start + timedelta(minutes=30)
    assert hold.engaged_at == harness.clock.now
    assert harness.jobs() == {"windows:end:maint": start + timedelta(minutes=30)}


def test_restart_with_its_hold_standing_keeps_it_and_still_retires_it(harness):
    _window, start, generation = armed_one_shot(harness)
    harness.clock.set(start + timedelta(minutes=5))
    harness.restart()
    assert harness.reading().hold.generation == generation
    assert [e.event for e in harness.events() if e.event != INTENT] == ["engage"]  # one arm, kept
    harness.run_until(start + timedelta(minutes=30))
    assert harness.reading().state is HoldState.ABSENT
    assert [e.generation for e in harness.events("retire")] == [generation]


def test_early_release_is_not_rearmed_not_even_after_a_restart(harness):
    _window, start, _ = armed_one_shot(harness)
    harness.run_until(start + timedelta(minutes=5))
    harness.estop.release(fleet=True)  # the operator's `hermes resume`
    harness.run_until(start + timedelta(minutes=6), poll=True)
    assert harness.reading().state is HoldState.ABSENT
    harness.clock.set(start + timedelta(minutes=7))
    harness.restart()
    harness.run_until(start + timedelta(minutes=20), poll=True)
    assert harness.reading().state is HoldState.ABSENT
    assert [e.event for e in harness.events() if e.event != INTENT] == ["engage", "release"]
    assert harness.entries()[f"fleet/maint@{start.isoformat()}"].state == RELEASED


@pytest.mark.parametrize("manual", ["no-deadline", "shorter-deadline", "hand-written", "unreadable"])
def test_a_hold_it_did_not_arm_is_not_replaced_and_the_skip_is_audited(harness, manual):
    window, start = one_shot(harness)
    harness.write(window)
    sentinel = harness.estop.layout.fleet.sentinel
    if manual == "no-deadline":
        harness.estop.engage(reason="manual", fleet=True)
    elif manual == "shorter-deadline":
        harness.estop.engage(reason="manual", expires_at=start + timedelta(minutes=5), fleet=True)
    elif manual == "hand-written":
        sentinel.write_bytes(b"")  # `touch ESTOP`
    else:
        sentinel.write_bytes(b"{not json")
    before = sentinel.read_bytes()
    harness.start()
    harness.run_until(start + timedelta(minutes=1), poll=True)
    assert sentinel.read_bytes() == before
    [skip] = harness.events("skip")
    assert skip.location == "fleet"
    assert f"window maint occurrence {start.isoformat()} skipped" in skip.detail
    assert harness.entries()[f"fleet/maint@{start.isoformat()}"].state == SKIPPED
    harness.run_until(start + timedelta(minutes=3), poll=True)
    assert len(harness.events("skip")) == 1  # recorded once, not per reconciliation
    harness.run_until(start + timedelta(minutes=31), poll=True)
    assert harness.events("retire") == []
    if manual != "shorter-deadline":
        assert sentinel.read_bytes() == before


OVERLAPS = {
    # name: [(start offset, duration)], the union is [0, last end)
    "overlapping": [(timedelta(0), "1h"), (timedelta(minutes=30), "90m")],
    "back-to-back": [(timedelta(0), "1h"), (timedelta(hours=1), "1h")],
    "nested": [(timedelta(0), "2h"), (timedelta(minutes=30), "30m")],
    "three-chained": [(timedelta(0), "40m"), (timedelta(minutes=30), "40m"), (timedelta(minutes=70), "50m")],
}


@pytest.mark.parametrize("shape", sorted(OVERLAPS))
@pytest.mark.parametrize("scope", ["fleet", "ops"])
def test_overlapping_windows_leave_no_free_instant_on_the_scope(harness, shape, scope):
    base = harness.clock.now + timedelta(hours=1)
    windows, boundaries = [], []
    for i, (offset, duration) in enumerate(OVERLAPS[shape]):
        start = base + offset
        windows.append({"name": f"w{i}", "at": start.isoformat(), "duration": duration, "scope": scope})
        boundaries += [start, start + timedelta(minutes=int(duration[:-1]) * (60 if duration.endswith("h") else 1))]
    last_end = max(boundaries)
    harness.write(*windows)
    harness.start()
    probes = sorted({t + d for t in boundaries for d in (-US, timedelta(0), US)} |
                    {base + timedelta(minutes=m) for m in range(0, int((last_end - base).total_seconds() // 60) + 1, 5)})
    free, held_outside = [], []
    for probe in probes:
        harness.run_until(probe)
        engaged = harness.engaged_at(probe, scope)
        if probe == base:
            # the first arm already reaches the last end: no free instant even if the
            # scheduler were late (or down) at a boundary in between
            assert harness.reading(scope).hold.expires_at == last_end
        if probe < base or probe >= last_end:
            if engaged:
                held_outside.append(probe)
        elif not engaged:
            free.append(probe)
    assert free == [] and held_outside == []
    assert not harness.engaged_at(last_end, scope)
    assert harness.reading(scope).state in (HoldState.ABSENT, HoldState.EXPIRED)
    harness.run_until(last_end + timedelta(minutes=1))
    assert harness.reading(scope).state is HoldState.ABSENT  # retired by the expiry job


def test_overlap_holds_until_the_last_end_from_the_first_start_and_intersects_allowlists(harness):
    base = harness.clock.now + timedelta(hours=1)
    harness.write(
        {"name": "a", "at": base.isoformat(), "duration": "1h", "reason": "db", "allow": {"user_ids": ["1", "2"]}},
        {"name": "b", "at": (base + timedelta(minutes=30)).isoformat(), "duration": "1h", "reason": "net",
         "allow": {"user_ids": ["2", "3"]}},
    )
    harness.start()
    harness.run_until(base)
    first = harness.reading().hold
    assert first.expires_at == base + timedelta(minutes=90)  # chained: b starts before a ends
    assert first.allow.user_ids == {"1", "2"}
    harness.run_until(base + timedelta(minutes=30))
    both = harness.reading().hold
    assert both.allow.user_ids == {"2"}  # deny wins while both cover
    assert both.reason == "db; net"
    assert both.window["covers"] == [{"name": "a", "occurrence": base.isoformat()},
                                     {"name": "b", "occurrence": (base + timedelta(minutes=30)).isoformat()}]
    harness.run_until(base + timedelta(minutes=60))
    assert harness.reading().hold.allow.user_ids == {"2", "3"}
    entries = harness.entries()
    assert entries[f"fleet/b@{(base + timedelta(minutes=30)).isoformat()}"].generation == harness.reading().hold.generation
    assert entries[f"fleet/a@{base.isoformat()}"].state == ENDED
    harness.run_until(base + timedelta(minutes=90))
    assert harness.reading().state is HoldState.ABSENT


def test_window_removed_from_the_file_stops_being_scheduled(harness):
    keep, keep_start = one_shot(harness, name="keep", start_in=timedelta(hours=2))
    drop, drop_start = one_shot(harness, name="drop", start_in=timedelta(hours=1))
    harness.write(keep, drop)
    harness.start()
    assert set(harness.jobs()) == {"windows:start:keep", "windows:start:drop"}
    harness.file.remove("drop")
    harness.run_until(harness.clock.now + timedelta(seconds=5), poll=True)  # the periodic reconcile
    harness.run_until(harness.clock.now + timedelta(seconds=5), poll=True)  # confirms the removal
    assert set(harness.jobs()) == {"windows:start:keep"}
    harness.run_until(drop_start + timedelta(minutes=1), poll=True)
    assert harness.reading().state is HoldState.ABSENT
    harness.run_until(keep_start)
    assert harness.reading().hold.armed_by == "window:keep"


def test_edits_are_picked_up_without_a_restart(harness):
    harness.write({"name": "nightly", "cron": "0 3 * * *", "duration": "1h"})
    harness.start()
    now = harness.clock.now
    assert harness.jobs()["windows:start:nightly"].hour == 3
    harness.write({"name": "nightly", "cron": "0 20 * * *", "duration": "1h"})
    harness.run_until(now + timedelta(seconds=5), poll=True)
    harness.run_until(now + timedelta(seconds=10), poll=True)  # a change is confirmed one interval later
    assert harness.jobs()["windows:start:nightly"] == now.replace(hour=20, minute=0)
    harness.write({"name": "nightly", "cron": "0 20 * * *", "duration": "1h", "enabled": False})
    harness.run_until(now + timedelta(seconds=15), poll=True)
    harness.run_until(now + timedelta(seconds=20), poll=True)
    assert harness.jobs() == {}


def test_removing_a_window_while_it_holds_retires_its_hold(harness):
    _window, start, generation = armed_one_shot(harness)
    harness.file.remove("maint")
    harness.run_until(start + timedelta(minutes=1), poll=True)
    assert harness.reading().state is HoldState.ACTIVE  # not yet: the removal is not confirmed
    harness.run_until(start + timedelta(minutes=1, seconds=5), poll=True)
    assert harness.reading().state is HoldState.ABSENT
    assert [e.generation for e in harness.events("retire")] == [generation]


def test_lost_ledger_is_recovered_from_the_hold_body(harness):
    _window, start, generation = armed_one_shot(harness)
    (harness.root / LEDGER_FILE).unlink()  # e.g. the scheduler died between the arm and the ledger write
    harness.clock.set(start + timedelta(minutes=1))
    report = harness.restart()
    assert [e.kind for e in report.events] == ["adopted"]
    assert harness.reading().hold.generation == generation
    assert harness.events("skip") == []
    harness.run_until(start + timedelta(minutes=30))
    assert [e.generation for e in harness.events("retire")] == [generation]


def test_standby_scheduler_writes_nothing(harness):
    window, start = one_shot(harness)
    harness.write(window)
    harness.leader = False
    harness.start()
    harness.run_until(start + timedelta(minutes=1), poll=True)
    assert harness.reading().state is HoldState.ABSENT
    assert not (harness.root / LEDGER_FILE).exists()
    assert harness.jobs() == {"windows:end:maint": start + timedelta(minutes=30)}  # it keeps waking up
    harness.leader = True
    harness.run_until(start + timedelta(minutes=2), poll=True)
    assert harness.reading().hold.expires_at == start + timedelta(minutes=30)


def test_bad_windows_file_takes_no_decision_and_the_deadman_still_lifts(harness):
    _window, start, _ = armed_one_shot(harness)
    harness.file.path.write_text('[[windows]]\nname = "maint"\ncron = "* * *"\nduration = "30m"\n')
    harness.run_until(start + timedelta(minutes=1), poll=True)
    report = harness.reports[-1]
    assert report.failed and "field 'cron'" in report.failed[0]  # one window failing (issue 20 item 2)
    assert harness.reading().state is HoldState.ACTIVE  # not retired on a broken file
    harness.run_until(start + timedelta(minutes=10), poll=True)  # long past the confirmation period
    assert harness.reading().state is HoldState.ACTIVE
    end = start + timedelta(minutes=30)
    assert not harness.engaged_at(end)


def test_daily_window_arms_once_on_the_fall_back_day(harness):
    harness.clock.set(harness.clock.now.replace(year=2026, month=10, day=24, hour=12))
    harness.write({"name": "nightly", "cron": "30 2 * * *", "timezone": "Europe/Berlin", "duration": "1h"})
    harness.start()
    fired = harness.run_until(harness.clock.now + timedelta(days=2))
    engages = [e.time.isoformat() for e in harness.events("engage")]
    assert engages == ["2026-10-25T00:30:00+00:00", "2026-10-26T01:30:00+00:00"]
    assert fired.count("windows:start:nightly") == 2


def test_only_date_triggers_are_scheduled(harness):
    from apscheduler.triggers.date import DateTrigger

    harness.write({"name": "weekly", "cron": "0 0 * * 0", "duration": "1h"})
    harness.start()
    jobs = harness.service.scheduler.get_jobs()
    assert jobs and all(isinstance(job.trigger, DateTrigger) for job in jobs)
    assert harness.jobs()["windows:start:weekly"].weekday() == 6  # crontab 0 is Sunday, not Monday


def test_moving_an_active_window_to_another_scope_moves_its_hold(harness):
    window, start, old = armed_one_shot(harness, scope="zeta")
    harness.write({**window, "scope": "alpha"})
    harness.run_until(start + timedelta(minutes=1), poll=True)
    harness.run_until(start + timedelta(minutes=1, seconds=5), poll=True)  # confirms the move
    assert harness.reading("zeta").state is HoldState.ABSENT
    assert [e.generation for e in harness.events("retire")] == [old]
    assert harness.reading("alpha").hold.expires_at == start + timedelta(minutes=30)


def test_run_paces_itself_on_the_injected_monotonic_source(harness):
    import threading

    from hermes_estop.windows.scheduler import WindowService

    readings = []

    def monotonic() -> float:  # every reading an hour later: every poll is due at once
        readings.append(1)
        return 3600.0 * len(readings)

    service = WindowService(harness.service.fleet, scheduler=harness.new_service().scheduler,
                            poll_interval=3600, monotonic=monotonic)
    stop = threading.Event()
    polls = []
    original = service.reconcile

    def counting():
        polls.append(1)
        if len(polls) >= 4:
            stop.set()
        return original()

    service.reconcile = counting
    runner = threading.Thread(target=service.run, args=(stop,), daemon=True)
    runner.start()
    runner.join(60)  # with time.monotonic this would wait an hour between polls
    stop.set()
    assert len(polls) >= 4 and readings


def test_the_scheduler_compiles_the_schedule_operators_read(harness):
    from hermes_estop.windows import schedule

    harness.write({"name": "nightly", "cron": "30 2 * * *", "duration": "1h"})
    harness.start()  # the pass leaves the schedule written: nothing else to wait for
    path = schedule_path(harness.file.path)
    assert path.is_file(), "the scheduler did not write the schedule beside windows.toml"
    calls = []
    found = schedule.load(harness.file.path, harness.file.path.read_bytes(), lambda: calls.append(1) or [],
                          harness.clock())
    assert found is not None and calls == [] and list(found.names) == ["nightly"]


#: a real `WindowService` with its own BackgroundScheduler: the window's wake-up runs a pass whose
#: leadership check waits until `shutdown` is under way; prints whether `shutdown` returned
_STOP_DURING_A_WAKE_UP = """
import os, sys, threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from hermes_estop import Estop
from hermes_estop.model.homes import Layout
from hermes_estop.stores import FileStore
from hermes_estop.windows.scheduler import WindowService

root = Path(sys.argv[1])
start = datetime.now(UTC) + timedelta(seconds=2)
(root / "windows.toml").write_text(f'[[windows]]\\nname = "a"\\nat = {start.isoformat()}\\nduration = "1h"\\n')
in_wake_up, release = threading.Event(), threading.Event()

def is_leader():
    if threading.current_thread() is not threading.main_thread() and not in_wake_up.is_set():
        in_wake_up.set()
        release.wait(60)
    return True

service = WindowService(Estop(layout=Layout(home=root, root=root), store=FileStore(root)).fleet,
                        is_leader=is_leader, poll_interval=3600)
service.start()
assert in_wake_up.wait(60), "the window's wake-up never ran"
stopping = threading.Thread(target=service.shutdown, daemon=True)
stopping.start()
stopping.join(1.0)  # shutdown under way: it waits for the wake-up's pass
release.set()
stopping.join(60)
print("stuck" if stopping.is_alive() else "stopped", flush=True)
os._exit(0)  # a stuck APScheduler worker would keep the interpreter from exiting
"""


def test_a_stop_during_a_wake_up_pass_stops(tmp_path):
    """`hermes serve` did not stop on SIGTERM ("hermes-serve-windows thread did not stop within
    15s") when a wake-up's pass was running: APScheduler's shutdown waits for the pass while it
    holds the job store's lock, which the pass needed to set its wake-ups. Run in a process of its
    own: the deadlock it guards against never ends."""
    done = subprocess.run([sys.executable, "-c", _STOP_DURING_A_WAKE_UP, str(tmp_path)], capture_output=True,
                          text=True, timeout=240, check=False)
    assert done.stdout.strip() == "stopped", done.stdout + done.stderr


#: a real `WindowService` with its own BackgroundScheduler: APScheduler's loop is held while it
#: hands the window's due wake-up to its worker, and `shutdown` starts meanwhile; prints every
#: exception a thread died of, then whether `shutdown` returned
_STOP_WHILE_A_WAKE_UP_IS_DUE = """
import os, sys, threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from apscheduler.executors.pool import BasePoolExecutor
from hermes_estop import Estop
from hermes_estop.model.homes import Layout
from hermes_estop.stores import FileStore
from hermes_estop.windows.scheduler import WindowService

root = Path(sys.argv[1])
start = datetime.now(UTC) + timedelta(seconds=2)
(root / "windows.toml").write_text(f'[[windows]]\\nname = "a"\\nat = {start.isoformat()}\\nduration = "1h"\\n')
died, handing, release = [], threading.Event(), threading.Event()
threading.excepthook = lambda args: died.append(f"{args.exc_type.__name__}: {args.exc_value}")
submit = BasePoolExecutor._do_submit_job

def held_submit(self, job, run_times):
    if job.id.startswith("windows:") and not handing.is_set():
        handing.set()
        release.wait(60)
    return submit(self, job, run_times)

BasePoolExecutor._do_submit_job = held_submit
service = WindowService(Estop(layout=Layout(home=root, root=root), store=FileStore(root)).fleet, poll_interval=3600)
service.start()
assert handing.wait(60), "the window's wake-up never came due"
stopping = threading.Thread(target=service.shutdown, daemon=True)
stopping.start()
stopping.join(1.0)  # shutdown under way while APScheduler's loop holds the due wake-up
release.set()
stopping.join(60)
print(*died, "stuck" if stopping.is_alive() else "stopped", sep="\\n", flush=True)
os._exit(0)
"""


def test_a_stop_while_a_wake_up_is_due_kills_no_thread(tmp_path):
    """`hermes serve` printed APScheduler's thread dying ("JobLookupError: 'No job by the id of
    windows:start:...'") when SIGTERM came while a wake-up was due: APScheduler's shutdown marks
    the scheduler stopped before it takes the job store's lock, and its loop, removing the fired
    date job, then looks for it among the jobs of a stopped scheduler."""
    done = subprocess.run([sys.executable, "-c", _STOP_WHILE_A_WAKE_UP_IS_DUE, str(tmp_path)], capture_output=True,
                          text=True, timeout=240, check=False)
    assert done.stdout.strip() == "stopped", done.stdout + done.stderr


@pytest.mark.parametrize("scope", ["../evil", "bad/scope", "UPPER case"])
def test_an_armed_ledger_entry_at_a_scope_that_is_no_scope_is_not_planned(harness, scope):
    """The ledger is read, not trusted: an entry naming a scope no window could have (a path, a
    name no profile has) is not a scope to plan, so it is neither an error line every pass nor a location."""
    harness.write(one_shot(harness)[0])
    end = harness.clock.now + timedelta(hours=1)
    harness.ledger.commit([LedgerEntry(key=f"{scope}/w@x", window="w", occurrence="x", scope=scope, end=end,
                                       state=ARMED, generation="g1")])
    harness.service.tick(harness.clock.now)  # its window is in no file: a weakening, confirmed by the next read
    harness.clock.advance(seconds=10)
    report = harness.service.tick(harness.clock.now)
    assert report.pending is None and report.ok, report.errors
    assert report.events == []
