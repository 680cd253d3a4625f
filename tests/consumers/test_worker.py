"""Worker: its deadline runs on the injected monotonic source; a timeout stops the worker's whole
process group; its log is opened as a regular file only."""

from __future__ import annotations

import contextlib
import os
import time
from datetime import timedelta

from hermes_estop.consumers.worker import Worker, WorkerPool

from .helpers import finishes


class Ticks:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_worker_times_out_by_the_injected_monotonic_source_and_its_group_is_stopped(tmp_path, clock):
    ticks = Ticks()
    pidfile = tmp_path / "child.pid"
    worker = Worker(f"sleep 300 & echo $! > {pidfile}; wait", timeout=timedelta(hours=1), cwd=tmp_path, env={},
                    log_path=tmp_path / "w.log", clock=clock, monotonic=ticks)
    assert worker.poll() is None
    ticks.now += 3599
    assert worker.poll() is None, "an hour has not passed on the injected source"
    finishes(lambda: _wait_for_text(pidfile))
    child = int(pidfile.read_text())
    ticks.now += 1
    result = worker.poll()
    assert result is not None and result.status == "timeout"
    assert finishes(lambda: _wait_gone(child))[0] == "returned"


def _wait_for_text(path) -> None:
    while not path.exists() or not path.read_text().strip():
        time.sleep(0.01)


def _wait_gone(pid: int) -> None:
    while _alive(pid):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.01)


def test_a_pool_passes_its_monotonic_source_to_its_workers(tmp_path, clock):
    ticks = Ticks()
    pool = WorkerPool(clock, ticks)
    pool.start("k", "sleep 300", timeout=timedelta(seconds=10), cwd=tmp_path, env={}, log_path=tmp_path / "k.log")
    assert pool.reap() == []
    ticks.now += 10
    [(key, result)] = pool.reap()
    assert (key, result.status) == ("k", "timeout")


def test_a_fifo_at_the_log_path_is_refused_without_blocking(tmp_path, clock):
    os.mkfifo(tmp_path / "w.log")
    kind, worker = finishes(lambda: Worker("true", timeout=timedelta(seconds=5), cwd=tmp_path, env={},
                                           log_path=tmp_path / "w.log", clock=clock))
    assert kind == "returned" and worker.result.status == "error" and "FIFO" in worker.result.detail
