"""The worker subprocesses that carry out a cron job or a kanban card, and how one ended.

A worker runs in its own session (process group) so a timeout can stop the whole shell pipeline
it started, and writes its output to a log file rather than a pipe, so a worker that prints a lot
never blocks on a reader that is busy waiting for another worker. The log file is opened (and
its tail read back) with `open_regular`: a FIFO planted where the log goes is refused with one
line, it never blocks the consumer. Deadlines run on an injected monotonic source.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hermes_estop.model.errors import StoreError
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import Clock, format_instant, parse_stamp
from hermes_estop.system.fsutil import open_regular
from hermes_estop.system.processes import start_time

__all__ = ["KILL_GRACE", "WorkResult", "Worker", "WorkerPool", "stop_group", "worker_env"]

#: seconds between SIGTERM and SIGKILL when a worker is stopped
KILL_GRACE = 2.0
_TAIL_BYTES = 400
Monotonic = Callable[[], float]


@dataclass(frozen=True)
class WorkResult:
    """How one run of a worker ended. `status` is "ok", "failed" (non-zero exit), "timeout" or
    "error" (it could not be started, its row was parked, or its dispatcher lost it)."""

    status: str
    exit_code: int | None
    started_at: datetime
    finished_at: datetime
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "started_at": format_instant(self.started_at),
            "finished_at": format_instant(self.finished_at),
            "detail": self.detail,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorkResult | None:
        started = parse_stamp(data.get("started_at"))
        finished = parse_stamp(data.get("finished_at"))
        status = data.get("status")
        if not isinstance(status, str) or started is None or finished is None:
            return None
        code = data.get("exit_code")
        detail = data.get("detail")
        return cls(status, code if isinstance(code, int) else None, started, finished,
                   detail if isinstance(detail, str) else None)


def _tail(path: Path) -> str | None:
    """The last non-blank line of a worker's log (for a failure's detail); None when it cannot
    be read (missing, or not a regular file)."""
    try:
        fd = open_regular(path)
    except (OSError, StoreError):
        return None
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - _TAIL_BYTES), os.SEEK_SET)
        data = os.read(fd, _TAIL_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    lines = [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1].strip()[:200] if lines else None


def stop_group(pid: int, wait: Callable[[float | None], bool], grace: float = KILL_GRACE) -> None:
    """SIGTERM the process group `pid` leads, then SIGKILL it when `wait(grace)` says it has not
    ended (the one way workers are stopped: a timeout, `hermes drain --terminate-after`)."""
    for sig, limit in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        if wait(limit):
            return


class Worker:
    """One worker subprocess: `/bin/sh -c command`, output to `log_path`, stopped (its whole
    process group) when it outlives `timeout`."""

    def __init__(self, command: str, *, timeout: timedelta, cwd: Path, env: Mapping[str, str],
                 log_path: Path, clock: Clock, monotonic: Monotonic = time.monotonic) -> None:
        self.command = command
        self.timeout = timeout
        self.log_path = log_path
        self._clock = clock
        self._monotonic = monotonic
        self.started_at = clock()
        self._deadline = monotonic() + timeout.total_seconds()
        self._process: subprocess.Popen[bytes] | None = None
        #: the kernel's start time of the worker, read while it is our unreaped child: with its pid,
        #: what identifies it to a later signal (`processes.signal_group`)
        self.process_start: int | None = None
        self.result: WorkResult | None = None
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log = open_regular(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        except (OSError, StoreError) as exc:
            self.result = WorkResult("error", None, self.started_at, clock(),
                                     f"could not open its log: {one_line(getattr(exc, 'strerror', None) or exc)}")
            return
        try:
            self._process = subprocess.Popen(
                ["/bin/sh", "-c", command],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
                close_fds=True,
            )
            self.process_start = start_time(self._process.pid)
        except OSError as exc:
            self.result = WorkResult("error", None, self.started_at, clock(),
                                     f"could not start: {one_line(exc.strerror or exc)}")
        finally:
            os.close(log)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def poll(self) -> WorkResult | None:
        """The result once the worker has ended (stopping it first when past its timeout)."""
        if self.result is not None or self._process is None:
            return self.result
        code = self._process.poll()
        if code is None and self._monotonic() >= self._deadline:
            self.stop()
            self.result = WorkResult("timeout", self._process.returncode, self.started_at, self._clock(),
                                     f"timed out after {self.timeout.total_seconds():g}s")
        elif code is not None:
            self.result = self._finished(code)
        return self.result

    def wait(self, timeout: float | None = None) -> WorkResult | None:
        """Block until the worker ends or its own timeout stops it; with `timeout`, give up after
        that many seconds and return None (the worker keeps running)."""
        if self.result is not None or self._process is None:
            return self.result
        limit = self._deadline - self._monotonic()
        if timeout is not None:
            limit = min(limit, timeout)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=max(0.0, limit))
        return self.poll()

    def _finished(self, code: int) -> WorkResult:
        finished = self._clock()
        if code == 0:
            return WorkResult("ok", 0, self.started_at, finished, None)
        tail = _tail(self.log_path)
        detail = f"exit {code}" + (f": {tail}" if tail else "")
        return WorkResult("failed", code, self.started_at, finished, detail)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace, to the worker's whole process group."""
        process = self._process
        if process is None:
            return

        def ended(limit: float | None) -> bool:
            try:
                process.wait(timeout=limit)
                return True
            except subprocess.TimeoutExpired:
                return False

        stop_group(process.pid, ended)


class WorkerPool:
    """The workers a consumer has in flight, by key. Thread-safe."""

    def __init__(self, clock: Clock, monotonic: Monotonic = time.monotonic) -> None:
        self.clock = clock
        self.monotonic = monotonic
        self._workers: dict[Hashable, Worker] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._workers)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._workers

    def start(self, key: Hashable, command: str, *, timeout: timedelta, cwd: Path,
              env: Mapping[str, str], log_path: Path) -> Worker:
        worker = Worker(command, timeout=timeout, cwd=cwd, env=env, log_path=log_path, clock=self.clock,
                        monotonic=self.monotonic)
        with self._lock:
            self._workers[key] = worker
        return worker

    def reap(self) -> list[tuple[Hashable, WorkResult]]:
        """Results of the workers that have ended since the last reap."""
        with self._lock:
            items = list(self._workers.items())
        done = []
        for key, worker in items:
            result = worker.poll()
            if result is not None:
                done.append((key, result))
        self._forget(key for key, _ in done)
        return done

    def wait_all(self, timeout: float | None = None) -> list[tuple[Hashable, WorkResult]]:
        """Wait for every worker (each bounded by its own timeout; all by `timeout` seconds when
        given) and return the results of those that ended. Workers still running are left
        running and stay in the pool: in-flight work is never killed by a shutdown."""
        end = None if timeout is None else self.monotonic() + timeout
        with self._lock:
            items = list(self._workers.items())
        done = []
        for key, worker in items:
            remaining = None if end is None else max(0.0, end - self.monotonic())
            result = worker.wait(remaining)
            if result is not None:
                done.append((key, result))
        self._forget(key for key, _ in done)
        return done

    def _forget(self, keys: Iterable[Hashable]) -> None:
        with self._lock:
            for key in keys:
                self._workers.pop(key, None)


def worker_env(base: Mapping[str, str], extra: Mapping[str, str | None]) -> dict[str, str]:
    """`base` with `extra` applied; a None value removes the variable."""
    env = dict(base)
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env
