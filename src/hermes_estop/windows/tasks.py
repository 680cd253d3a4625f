"""Window tasks (docs/windows.md, "Window tasks"): the window's deadman is the task's lease; exit 0
releases the occurrence early, a failure keeps the fleet held. At most once per occurrence, also
across restarts: `task-start` is in the audit trail before the command starts. Nothing the daemon
starts outlives it (`stop`). Only the leader runs tasks.
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.errors import EstopError, HoldConflict
from hermes_estop.model.hold import EngageRequest, Fence, HoldState
from hermes_estop.model.text import one_line
from hermes_estop.process.fleet_config import child_environment
from hermes_estop.system.processes import signal_group, start_time
from hermes_estop.windows.ledger import ARMED, RELEASED, LedgerEntry, OccurrenceLedger, entry_for, open_ledger
from hermes_estop.windows.model import Occurrence, Window
from hermes_estop.windows.occurrences import covering
from hermes_estop.windows.schedule import Schedules, Windows
from hermes_estop.windows.scheduler import ProblemLog
from hermes_estop.windows.windows_file import Parsed, WindowsFile

__all__ = ["DEFAULT_FAILURE_TTL", "GENERATION_ENV", "TASK_END", "TASK_START", "RunningTask", "TaskService"]

logger = logging.getLogger("hermes_estop.windows")

TASK_START = "task-start"
TASK_END = "task-end"
GENERATION_ENV = "HERMES_ESTOP_GENERATION"
DEFAULT_FAILURE_TTL = timedelta(hours=1)
#: how many of the newest audit events are read to tell whether an occurrence's task already ran
_HISTORY_DEPTH = 5000
_KILL_GRACE = 5.0


def _detail(key: str) -> str:
    return f"window task {key}"


@dataclass
class RunningTask:
    occurrence: Occurrence
    window: Window
    generation: str
    process: subprocess.Popen[bytes]
    #: the process's start time, read at spawn (its identity with the pid: `processes`)
    started: int | None


class TaskService:
    name = "window-tasks"

    def __init__(self, fleet: Fleet, *, ledger: OccurrenceLedger | None = None, windows_file: WindowsFile | None = None,
                 is_leader: Callable[[], bool] | None = None, poll_interval: float = 1.0,
                 schedules: Schedules | None = None) -> None:
        self.fleet = fleet
        self.ledger = ledger or open_ledger(fleet)
        self.windows_file = windows_file or WindowsFile(fleet.root)
        self.is_leader = is_leader or (lambda: True)
        self.poll_interval = min(float(poll_interval), 1.0)
        self.running: dict[str, RunningTask] = {}
        self.problems = ProblemLog()
        #: at DEBUG beside the scheduler whose schedules it shares: it logs the file's problems
        self.file_problems = ProblemLog(quiet=schedules is not None)
        self._lock = threading.Lock()
        #: the scheduler's compiled schedules (`WindowService.schedules`), shared
        self.schedules = schedules

    def due(self, windows: Sequence[Window], entries: dict[str, LedgerEntry], now: datetime,
            rows: Windows | None = None) -> list[tuple[Window, Occurrence, str]]:
        """In the order of the windows: an occurrence started (drain lead over), armed by the
        scheduler, not already running or run. Only the windows the ledger has armed are built:
        asked of the scheduler's schedule (`rows`, whose windows `windows` are), else of the exact
        functions. A window that cannot be asked (a feed refused since the read) is its own problem only: one line."""
        place = rows.position if rows is not None else {w.name: i for i, w in reversed(list(enumerate(windows)))}.get
        candidates = []
        unasked: dict[str, str] = {}
        for entry in entries.values():
            if entry.state != ARMED or not entry.generation or entry.end <= now or entry.key in self.running:
                continue
            at = place(entry.window)
            try:
                window = None if at is None else windows[at]
                if window is None or window.run is None or not window.enabled:
                    continue
                found = covering(window, now) if rows is None else rows.timeline.covering(window, now)
            except EstopError as exc:
                unasked[entry.window] = f"window tasks: {one_line(exc)} (its task does not start; the others proceed)"
                continue
            for occurrence in found:
                if occurrence.key == entry.key and not occurrence.draining(now):
                    candidates.append((at or 0, occurrence, window, entry.generation))
        self.problems.only("unasked:", unasked, "window tasks: window {} is asked again (or its occurrence ended)")
        candidates.sort(key=lambda c: (c[0], c[1]))
        details = {_detail(occurrence.key): occurrence.key for _, occurrence, _, _ in candidates}
        events = self.fleet.history(_HISTORY_DEPTH)[0] if details else []
        ran = {details[e.detail] for e in events if e.event == TASK_START and e.detail in details}
        return [(window, occurrence, generation) for _, occurrence, window, generation in candidates
                if occurrence.key not in ran]

    def _windows(self) -> tuple[Sequence[Window], Windows | None]:
        """The scheduler's schedule's rows (as windows and as rows) when it holds one of the file,
        else the windows that validate: a table that does not is its own problem only (issue 32 item 6)."""
        try:
            raw = self.windows_file.read()
            held = self.schedules.held(raw) if self.schedules is not None else None
            parsed = self.windows_file.parse_each(raw) if held is None else Parsed([], [])
        except (EstopError, OSError) as exc:
            self.file_problems.start("file", f"window tasks: cannot read the windows ({exc}); no task starts until it reads")
            return [], None
        self.file_problems.clear("file", "window tasks: the windows read again")
        self.file_problems.only("failed:", {str(f.window or f): f"window tasks: {f} (its task does not start; the others proceed)"
                                            for f in parsed.failures},
                                "window tasks: {} validates again (or was removed)")
        return (held.windows, held.windows) if held is not None else (parsed.windows, None)

    def tick(self, now: datetime | None = None) -> list[str]:
        """The keys of the occurrences whose task started; one that cannot start is recorded as
        ended with exit 127."""
        when = self.fleet.clock() if now is None else now
        with self._lock:
            for key, task in list(self.running.items()):
                code = task.process.poll()
                if code is not None:
                    del self.running[key]
                    # what the task left running in its group does not outlive it
                    signal_group(task.process.pid, task.started, signal.SIGKILL, leader_may_have_ended=True)
                    self._finish(task, _status(code), when)
            if not self.is_leader():
                return []
            windows, rows = self._windows()
            try:
                entries = self.ledger.load()
            except (EstopError, OSError) as exc:
                self.problems.start("ledger", f"window tasks: cannot read the ledger ({exc}); no task starts until it reads")
                return []
            self.problems.clear("ledger", "window tasks: the ledger reads again")
            ready = self.due(windows, entries, when, rows)
            for window, occurrence, generation in ready:
                self._start(window, occurrence, generation, when)
        return [occurrence.key for _, occurrence, _ in ready]

    def _start(self, window: Window, occurrence: Occurrence, generation: str, now: datetime) -> None:
        assert window.run is not None
        location = self.fleet.location(occurrence.scope)
        shown = shlex.join(window.run)
        # on the record BEFORE the command starts: a restart never runs an occurrence's task twice
        try:
            self.fleet.record(TASK_START, location, generation=generation, reason=window.reason_for(None),
                              deadline=occurrence.end, detail=_detail(occurrence.key), now=now)
        except (EstopError, OSError) as exc:
            logger.error("window task %s: not started: its start cannot be recorded (%s), and an unrecorded "  # noqa: TRY400 - one line, no traceback
                         "start could run twice; retried at the next pass", occurrence.key, exc)
            return
        env = child_environment()
        env.update({GENERATION_ENV: generation, "HERMES_HOME": str(self.fleet.root), "HERMES_ROOT": str(self.fleet.root),
                    "HERMES_WINDOW": window.name, "HERMES_WINDOW_OCCURRENCE": occurrence.ident})
        try:
            process = subprocess.Popen(window.run, env=env, cwd=self.fleet.root, start_new_session=True,
                                       stdin=subprocess.DEVNULL)
        except OSError as exc:
            logger.error("window task %s: cannot start %s: %s", occurrence.key, shown, exc.strerror or exc)  # noqa: TRY400 - one line
            self._end_record(occurrence, generation, 127, f"could not start ({exc.strerror or exc})", now)
            self._failed(window, occurrence, generation, 127, now)
            return
        logger.info("window task %s: started %s (pid %d) under generation %s", occurrence.key, shown, process.pid,
                    generation)
        self.running[occurrence.key] = RunningTask(occurrence, window, generation, process, start_time(process.pid))

    def _end_record(self, occurrence: Occurrence, generation: str, code: int, outcome: str, now: datetime) -> None:
        try:
            self.fleet.record(TASK_END, self.fleet.location(occurrence.scope), generation=generation,
                              deadline=occurrence.end, detail=f"{_detail(occurrence.key)} exited {code}: {outcome}",
                              now=now)
        except (EstopError, OSError) as exc:
            logger.warning("window task %s: cannot record its end (%s)", occurrence.key, exc)

    def _finish(self, task: RunningTask, code: int, now: datetime) -> None:
        if code == 0:
            try:
                removed = self.fleet.retire(self.fleet.location(task.occurrence.scope), Fence(task.generation), now=now)
            except (EstopError, OSError) as exc:
                outcome = f"the window's hold could not be released ({exc}); it lifts at the window's end"
            else:
                self._remember(task.occurrence, task.generation, "released by its task (exit 0)", now)
                outcome = ("the window's hold was released early" if removed
                           else "the window's hold was no longer standing (someone else's hold is left as it is)")
        else:
            outcome = self._failed(task.window, task.occurrence, task.generation, code, now)
        self._end_record(task.occurrence, task.generation, code, outcome, now)
        logger.info("window task %s exited %d: %s", task.occurrence.key, code, outcome)

    def _failed(self, window: Window, occurrence: Occurrence, generation: str, code: int, now: datetime) -> str:
        assert window.run is not None
        reason = f"maintenance failed: {shlex.join(window.run)} exited {code}"
        ttl = window.on_failure_ttl or DEFAULT_FAILURE_TTL
        location = self.fleet.location(occurrence.scope)
        request = EngageRequest(reason=reason, expires_at=now + ttl, armed_by=f"window:{window.name} task",
                                only_if=frozenset({generation}))
        try:
            hold = self.fleet.engage(location, request, now)
        except HoldConflict:
            standing = self.fleet.read((location,), now).readings[0]
            gone = standing.state in (HoldState.ABSENT, HoldState.EXPIRED)
            return ("the window's hold was released or had lifted: nothing is held for the failure" if gone
                    else "someone else's hold stands: left as it is")
        except (EstopError, OSError) as exc:
            return f"the failure hold could not be written ({exc}); the window's hold lifts at its end"
        until = hold.expires_at.isoformat() if hold.expires_at else "?"
        self._remember(occurrence, hold.generation or generation, f"task failed (exit {code}): held until {until}", now)
        return f"held ({reason}) until {until}"

    def _remember(self, occurrence: Occurrence, generation: str, detail: str, now: datetime) -> None:
        """Released in the ledger: the scheduler does not arm it again."""
        try:
            self.ledger.commit([entry_for(occurrence, RELEASED, now, generation, detail)])
        except (EstopError, OSError) as exc:
            logger.warning("window task %s: cannot record the outcome in the ledger (%s)", occurrence.key, exc)

    def stop(self, grace: float = _KILL_GRACE) -> None:
        """SIGTERM every task's process group, SIGKILL what is left after `grace` seconds (the
        window's hold stays until its deadman)."""
        with self._lock:
            tasks = list(self.running.values())
            self.running.clear()
        for task in tasks:
            signal_group(task.process.pid, task.started, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for task in tasks:
            with contextlib.suppress(subprocess.TimeoutExpired):
                task.process.wait(max(0.0, deadline - time.monotonic()))
            signal_group(task.process.pid, task.started, signal.SIGKILL, leader_may_have_ended=True)
            task.process.wait()
            self._end_record(task.occurrence, task.generation, _status(task.process.returncode or 0),
                             "stopped with hermes serve; the window's hold stays until its end", self.fleet.clock())

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                try:
                    self.tick()
                except Exception:
                    logger.exception("window tasks: a pass failed")
                stop.wait(self.poll_interval)
        finally:
            self.stop()


def _status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode

