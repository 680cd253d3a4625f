"""What the consumers share: the gate question for a piece of owned work, names, and the worker
subprocesses that carry out a cron job or a kanban card.

A worker runs in its own session (process group) so a timeout can stop the whole shell pipeline
it started, and writes its output to a log file rather than a pipe, so a worker that prints a lot
never blocks on a reader that is busy waiting for another worker.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Hashable, Iterable, Mapping

from ..durations import parse_duration
from ..errors import InvalidArgument
from ..estop import Estop
from ..gate import Snapshot, Verdict, decide
from ..homes import validate_profile_name
from ..timeutil import Clock, format_instant, parse_stamp

__all__ = [
    "DEFAULT_TIMEOUT",
    "validate_name",
    "validate_profile",
    "validate_owner",
    "parse_timeout",
    "PASS_SNAPSHOT_AGE",
    "gate_work",
    "PassGate",
    "WorkResult",
    "Worker",
    "WorkerPool",
    "worker_env",
]

DEFAULT_TIMEOUT = timedelta(hours=1)
#: how old (seconds) the snapshot a pass decides an item from may be: how late a hold engaged
#: mid-pass may be seen by the rest of that pass
PASS_SNAPSHOT_AGE = 0.005
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_KILL_GRACE = 2.0
_TAIL_BYTES = 400


def validate_name(value: Any, what: str) -> str:
    """A name an operator types and a file may be named after: letters, digits, '.', '_', '-'."""
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
        raise InvalidArgument(
            f"invalid {what} {value!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return value


def validate_profile(value: Any) -> str | None:
    return None if value is None else validate_profile_name(value)


def validate_owner(value: Any) -> str | None:
    """An owner is an authenticated principal id, compared as a string (DESIGN 3)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidArgument(f"invalid owner {value!r}: expected a user id")
    text = str(value).strip()
    if not text or len(text) > 256 or any(ch.isspace() or ord(ch) < 32 for ch in text):
        raise InvalidArgument(f"invalid owner {value!r}: expected a non-empty user id without spaces")
    return text


def parse_timeout(value: Any) -> timedelta:
    """A worker timeout, in the one duration grammar (`90s`, `10m`, `PT1H`)."""
    if value is None:
        return DEFAULT_TIMEOUT
    return parse_duration(value)


def _view(estop: Estop, profile: str | None) -> Estop:
    """The view of the fleet that work assigned to `profile` is gated through: `estop` itself for
    its own profile (or none), else that profile's (`estop.for_profile`), so a hold in that
    profile's home applies to the work as well as the fleet root's."""
    if profile is None or profile == estop.layout.profile:
        return estop
    return estop.for_profile(profile)


def gate_work(estop: Estop, owner: str | None, profile: str | None) -> Verdict:
    """The gate for one piece of work owned by `owner` and assigned to `profile` (a chat turn, a
    scheduled call). A pass over many items uses a `PassGate`."""
    return _view(estop, profile).gate(owner, profile)


class PassGate:
    """The gate for one pass over many items (a cron tick, a kanban dispatch pass).

    Asking the store for every item costs more than the rest of a 10,000-item pass
    (bench/consumers.py). A pass instead decides its items from snapshots at most `max_age`
    seconds old, one per view it needs (see `gate_work`), all read again once older: every
    decision still comes from ONE snapshot, and a hold engaged mid-pass still stops the rest of
    the pass within `max_age`. `decide` is pure, so the verdict for an (owner, profile), and
    the pause notice, are worked out once and reused for as long as the reads find the same
    readings. One `PassGate` per pass: it is not thread-safe and keeps what it read until dropped."""

    def __init__(self, estop: Estop, *, max_age: float = PASS_SNAPSHOT_AGE,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.estop = estop
        self.max_age = max_age
        self._monotonic = monotonic
        self._own = estop.layout.profile
        self._views: dict[str | None, Estop] = {}
        self._snapshots: dict[str | None, Snapshot] = {}
        self._verdicts: dict[tuple[Any, Any], Verdict] = {}
        self._stale_at = float("-inf")
        self._notices: dict[int, tuple[Snapshot, str | None]] = {}

    def __call__(self, owner: str | None, profile: str | None) -> Verdict:
        """The verdict for work owned by `owner` and assigned to `profile`; `InvalidArgument`
        for a profile name that is not one."""
        if self._monotonic() >= self._stale_at:
            self._refresh()
        try:
            return self._verdicts[owner, profile]
        except KeyError:
            pass
        except TypeError:  # an unhashable owner or profile (a hand-edited row): asked directly
            return gate_work(self.estop, owner, profile)
        key = None if profile is None or profile == self._own else profile
        snapshot = self._snapshots.get(key)
        if snapshot is None:
            view = self._views.get(key)
            if view is None:
                view = self._views[key] = _view(self.estop, key)
            snapshot = self._snapshots[key] = view.snapshot()
        verdict = self._verdicts[owner, profile] = decide(snapshot, owner, profile)
        return verdict

    def _refresh(self) -> None:
        """Read every view used so far again; forget the verdicts if any reading changed."""
        self._stale_at = self._monotonic() + self.max_age
        changed = False
        for key, view in self._views.items():
            old = self._snapshots.get(key)
            new = view.snapshot()
            if old is None or old.readings != new.readings:
                self._snapshots[key] = new
                changed = True
        if changed:
            self._verdicts.clear()

    def notice(self, verdict: Verdict) -> str | None:
        """`verdict.notice`, worked out once per snapshot."""
        if verdict:
            return None
        snapshot = verdict.snapshot
        memo = self._notices.get(id(snapshot))
        if memo is None or memo[0] is not snapshot:
            memo = self._notices[id(snapshot)] = (snapshot, verdict.notice)
        return memo[1]


@dataclass(frozen=True)
class WorkResult:
    """How one run of a worker ended. `status` is "ok", "failed" (non-zero exit), "timeout" or
    "error" (it could not be started, or its dispatcher lost it)."""

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
    def from_json(cls, data: Mapping[str, Any]) -> "WorkResult | None":
        started = parse_stamp(data.get("started_at"))
        finished = parse_stamp(data.get("finished_at"))
        if not isinstance(data.get("status"), str) or started is None or finished is None:
            return None
        code = data.get("exit_code")
        return cls(data["status"], code if isinstance(code, int) else None, started, finished, data.get("detail"))


def _tail(path: Path) -> str | None:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - _TAIL_BYTES))
            data = handle.read()
    except OSError:
        return None
    lines = [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1].strip()[:200] if lines else None


class Worker:
    """One worker subprocess: `/bin/sh -c command`, output to `log_path`, stopped (its whole
    process group) when it outlives `timeout`."""

    def __init__(self, command: str, *, timeout: timedelta, cwd: Path, env: Mapping[str, str],
                 log_path: Path, clock: Clock) -> None:
        self.command = command
        self.timeout = timeout
        self.log_path = log_path
        self._clock = clock
        self.started_at = clock()
        self._deadline = time.monotonic() + timeout.total_seconds()
        self._process: subprocess.Popen[bytes] | None = None
        self.result: WorkResult | None = None
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(log_path, "wb") as log:
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
        except OSError as exc:
            self.result = WorkResult("error", None, self.started_at, clock(),
                                     f"could not start: {exc.strerror or exc}")

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def poll(self) -> WorkResult | None:
        """The result once the worker has ended (stopping it first when past its timeout)."""
        if self.result is not None or self._process is None:
            return self.result
        code = self._process.poll()
        if code is None and time.monotonic() >= self._deadline:
            self._stop()
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
        limit = self._deadline - time.monotonic()
        if timeout is not None:
            limit = min(limit, timeout)
        try:
            self._process.wait(timeout=max(0.0, limit))
        except subprocess.TimeoutExpired:
            pass
        return self.poll()

    def _finished(self, code: int) -> WorkResult:
        finished = self._clock()
        if code == 0:
            return WorkResult("ok", 0, self.started_at, finished, None)
        tail = _tail(self.log_path)
        detail = f"exit {code}" + (f": {tail}" if tail else "")
        return WorkResult("failed", code, self.started_at, finished, detail)

    def _stop(self) -> None:
        assert self._process is not None
        for sig, grace in ((signal.SIGTERM, _KILL_GRACE), (signal.SIGKILL, None)):
            try:
                os.killpg(self._process.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self._process.wait(timeout=grace)
                return
            except subprocess.TimeoutExpired:
                continue


class WorkerPool:
    """The workers a consumer has in flight, by key. Thread-safe."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
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
        worker = Worker(command, timeout=timeout, cwd=cwd, env=env, log_path=log_path, clock=self.clock)
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
        end = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            items = list(self._workers.items())
        done = []
        for key, worker in items:
            remaining = None if end is None else max(0.0, end - time.monotonic())
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

