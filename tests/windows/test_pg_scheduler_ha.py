"""High availability of the window scheduler on PostgreSQL: two real scheduler processes (what
`hermes serve` runs, see `pg_scheduler.py`) against one database elect one leader; the leader
is SIGKILLed in the middle of a window; the standby takes over, lifts that window's hold at its
deadman exactly once, arms a window due after the kill (another scope) exactly once, and nothing
is armed twice (the audit table says so)."""

from __future__ import annotations

import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest

from hermes_estop.model.hold import HoldState
from hermes_estop.model.homes import Layout
from hermes_estop.stores.postgresql import PostgresStore
from hermes_estop.windows.ledger import ENDED, OccurrenceLedger
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile
from pg_helpers import JsonLines, pg_server, pg_url  # noqa: F401

pytestmark = [pytest.mark.postgresql, pytest.mark.slow]

SCHEDULER = Path(__file__).with_name("pg_scheduler.py")
POLL = 0.2
TAKEOVER_BOUND = 10.0  # a correctness bound for a loaded machine; measured takeover is about POLL


def scheduler(url: str, root: Path) -> JsonLines:
    return JsonLines(SCHEDULER, url, str(root), str(POLL))


def eventually(predicate, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened within {timeout}s: {what}")
        time.sleep(0.02)


def test_standby_takes_over_when_the_leader_is_killed_mid_window(pg_url, fleet_root):  # noqa: F811
    store = PostgresStore(pg_url, root=fleet_root, share=False)
    store.init_schema()
    fleet = Layout(home=fleet_root, root=fleet_root).fleet
    clock = store.default_clock()
    schedulers = []
    try:
        first = scheduler(pg_url, fleet_root)
        schedulers.append(first)
        assert first.next()["leader"] is True
        second = scheduler(pg_url, fleet_root)
        schedulers.append(second)
        assert second.next()["leader"] is False

        start = clock() + timedelta(seconds=1.5)
        WindowsFile(fleet_root).save([Window.parse({"name": "mid", "at": start.isoformat(), "duration": "4s",
                                                    "reason": "ha test"})])
        end = start + timedelta(seconds=4)

        def armed():
            reading = store.read((fleet,), clock())[0]
            return reading.hold if reading.state is HoldState.ACTIVE and reading.hold.armed_by == "window:mid" else None

        hold = eventually(armed, "the leader arms the window at its start")
        assert hold.expires_at == end
        first.proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        first.proc.wait(30)

        took_over = second.next(TAKEOVER_BOUND)
        assert took_over["leader"] is True
        print(f"takeover {took_over['t'] - killed:.3f}s after SIGKILL")

        late = clock() + timedelta(seconds=1)
        WindowsFile(fleet_root).save([
            Window.parse({"name": "mid", "at": start.isoformat(), "duration": "4s", "reason": "ha test"}),
            Window.parse({"name": "late", "at": late.isoformat(), "duration": "2s", "reason": "after the kill",
                          "scope": "ops"}),
        ])

        def removed(generation):
            return [e for e in store.history() if e.generation == generation and e.event in ("retire", "expire", "release")]

        (lift,) = eventually(lambda: removed(hold.generation), "the standby retires the window's hold")
        assert lift.event == "retire" and lift.time >= end
        assert lift.actor == f"scheduler-{second.proc.pid}"

        def late_armed():
            return [e for e in store.history() if e.event in ("engage", "rearm") and e.reason == "after the kill"]

        (late_engage,) = eventually(late_armed, "the standby arms the next window")
        eventually(lambda: removed(late_engage.generation), "the standby retires the next window")

        engages = [e for e in store.history() if e.event in ("engage", "rearm")]
        assert [(e.generation, e.actor) for e in engages] == [
            (hold.generation, f"scheduler-{first.proc.pid}"),
            (late_engage.generation, f"scheduler-{second.proc.pid}"),
        ]
        assert sorted(e.generation for e in store.history() if e.event in ("retire", "expire", "release")) == sorted(
            [hold.generation, late_engage.generation])
        # the pass that retires a hold commits the ledger after the store's retire: a read in
        # between (a slow pass on a loaded machine) still sees the occurrence armed
        expected = {("mid", ENDED, hold.generation), ("late", ENDED, late_engage.generation)}

        def ledger():
            entries = {(e.window, e.state, e.generation) for e in OccurrenceLedger(store.open_ledger()).load().values()}
            return entries if entries == expected else None

        eventually(ledger, f"the ledger records both occurrences ended: {expected}")
        second.finish(signal.SIGTERM)
        assert second.proc.returncode == 0
    finally:
        for process in schedulers:
            log = process.finish()
            print(f"--- scheduler {process.proc.pid} ---\n" + "\n".join(log.splitlines()[-40:]))
        store.close()
