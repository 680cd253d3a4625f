"""The consumer loop services for `hermes serve`: pacing by the monotonic clock, skipping missed
ticks instead of bursting, ticking the consumers and recording their work on stop."""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

import pytest

from hermes_estop import InvalidArgument
from hermes_estop.consumers.cron import CronTable
from hermes_estop.consumers.gateway import Gateway
from hermes_estop.consumers.kanban import Board
from hermes_estop.consumers.loops import (
    CronService,
    GatewayService,
    KanbanService,
    LoopService,
    configured_services,
    next_deadline,
)

from .helpers import T0


@pytest.mark.parametrize(
    "deadline, interval, current, expected",
    [
        (100.0, 10.0, 101.0, (110.0, 0)),   # on time: the next deadline, nothing missed
        (100.0, 10.0, 110.0, (120.0, 1)),   # exactly at the next deadline: it is missed, not run late
        (100.0, 10.0, 135.0, (140.0, 3)),   # a tick that overran by three intervals: three skipped
    ],
)
def test_next_deadline_skips_missed_ticks_instead_of_bursting(deadline, interval, current, expected):
    assert next_deadline(deadline, interval, current) == expected


class ScriptedStop:
    """A stop event for `run`: records each wait and sets itself after `after` ticks."""

    def __init__(self, service, after):
        self.service, self.after, self.waits = service, after, []

    def is_set(self):
        return self.service.ticks >= self.after

    def wait(self, timeout):
        self.waits.append(timeout)
        return self.is_set()


def test_run_paces_by_the_monotonic_clock_and_never_bursts(clock):
    readings = iter([0.0, 1.0, 35.0, 41.0, 52.0])
    ticks: list[object] = []
    service = LoopService("test", ticks.append, interval=10.0, clock=clock, monotonic=lambda: next(readings))
    stop = ScriptedStop(service, after=4)
    service.run(stop)  # type: ignore[arg-type]  # a scripted stand-in for the Event
    assert len(ticks) == 4
    assert stop.waits == [9.0, 5.0, 9.0, 8.0]
    assert service.missed == 2


def test_a_failing_tick_is_logged_and_the_loop_goes_on(clock, caplog):
    calls = []

    def tick(now):
        calls.append(now)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return "ok"

    service = LoopService("flaky", tick, interval=1.0, clock=clock)
    assert service.tick() is None
    assert service.tick() == "ok"
    assert "boom" in caplog.text


@pytest.mark.parametrize("interval", [0, -1, True, "5"])
def test_a_bad_interval_is_refused_naming_it(clock, interval):
    with pytest.raises(InvalidArgument, match=repr(interval)):
        LoopService("x", lambda now: None, interval=interval, clock=clock)


def test_cron_service_holds_while_engaged_and_runs_after_the_lift(p1, clock, tmp_path, appended):
    marker = tmp_path / "ran.log"
    CronTable.of(p1).add("report", f"echo report >> {marker}", now=T0, schedule="*/5 * * * *", profile="p1")
    service = CronService(p1, interval=1.0)
    p1.engage(reason="maintenance")
    clock.set(T0.replace(minute=6))
    assert service.tick().held
    p1.release()
    assert service.tick().started == ("report",)
    service.runner.drain(timeout=120)
    assert appended(marker) == ["report"]
    assert CronTable.of(p1).get("report").last.ok


def test_kanban_service_spawns_without_waiting_and_records_on_a_later_tick(fleet, clock, tmp_path):
    board = Board(fleet.layout.root, clock=clock)
    card = board.add("t", f"while [ ! -e {tmp_path / 'go'} ]; do sleep 0.02; done", ready=True)
    service = KanbanService(fleet, interval=1.0, max_workers=2)
    assert service.tick().spawned == (card.id,)
    assert board.get(card.id).status == "running"
    (tmp_path / "go").touch()
    finished: list[Any] = []
    end = time.monotonic() + 15
    while not finished and time.monotonic() < end:
        finished = service.tick().finished
        time.sleep(0.01)
    assert [run.id for run in finished] == [card.id]
    assert board.get(card.id).status == "done"


@pytest.mark.slow
def test_services_run_in_threads_until_stopped_and_record_their_work(estop_for):
    estop = estop_for("p1", real_clock=True)
    board = Board(estop.layout.root)
    card = board.add("t", "sleep 0.2", ready=True)
    stop = threading.Event()
    service = KanbanService(estop, interval=0.05)
    thread = threading.Thread(target=service.run, args=(stop,))
    thread.start()
    end = time.monotonic() + 15
    while service.ticks < 2 and time.monotonic() < end:
        time.sleep(0.01)
    stop.set()
    thread.join(30)
    assert not thread.is_alive()
    assert board.get(card.id).status == "done"


@pytest.mark.slow
def test_gateway_service_serves_until_stopped(p1):
    service = GatewayService(Gateway(p1), port=0)
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,))
    thread.start()
    try:
        with socket.create_connection(service.address, timeout=10) as sock:
            sock.sendall(b"bob - hi\n")
            assert sock.makefile().readline() == "served: ack hi\n"
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()


def test_configured_services_follow_what_the_home_has(p1, clock):
    assert configured_services(p1) == []
    CronTable.of(p1).add("j", "true", now=T0, schedule="0 3 * * *")
    assert [s.name for s in configured_services(p1)] == ["cron"]
    Board(p1.layout.root).add("t", "true")
    assert [s.name for s in configured_services(p1)] == ["cron", "kanban"]


def _damage(path):
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    path.write_bytes(b"this is not what the program wrote\n" * 100)


def _service_lines(caplog, name):
    return [r for r in caplog.records if r.getMessage().startswith(f"{name}: ") and r.levelno >= logging.WARNING]


@pytest.mark.parametrize("consumer", ["cron", "kanban"])
@pytest.mark.parametrize("debug", [False, True])
def test_a_damaged_consumer_file_is_logged_once_when_it_starts_and_once_when_it_clears(p1, clock, caplog, consumer,
                                                                                      debug):
    caplog.set_level(logging.INFO, logger="hermes_estop")
    if consumer == "cron":
        table = CronTable.of(p1)
        table.add("j", "true", now=T0, schedule="0 3 * * *", profile="p1")
        path, service = table.path, CronService(p1, interval=1.0, debug=debug)
    else:
        Board(p1.layout.root, clock=clock).add("t", "true")
        path, service = p1.layout.root / "kanban.db", KanbanService(p1, interval=1.0, debug=debug)  # type: ignore[assignment]
    good = path.read_bytes()
    _damage(path)
    for _ in range(5):
        assert service.tick() is None
    [started] = _service_lines(caplog, consumer)
    assert str(path) in started.getMessage() and "\n" not in started.getMessage()
    assert (started.exc_info is not None) is debug, "a traceback only under HERMES_DEBUG=1"
    path.write_bytes(good)
    for _ in range(3):
        assert service.tick() is not None
    assert [r.getMessage().split(" (")[0] for r in _service_lines(caplog, consumer)[1:]] == [f"{consumer}: recovered"]


def test_hermes_debug_turns_the_tracebacks_on(monkeypatch, clock):
    monkeypatch.setenv("HERMES_DEBUG", "1")
    assert LoopService("x", lambda now: None, interval=1.0, clock=clock).debug
    monkeypatch.setenv("HERMES_DEBUG", "0")
    assert not LoopService("x", lambda now: None, interval=1.0, clock=clock).debug
