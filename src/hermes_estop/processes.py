"""The processes the daemon starts and signals (docs/design.md §8a "Processes"): nothing it starts
outlives it, and it signals only a process it can identify by pid AND start time.

A pid alone is not an identity: once a process ends, the kernel hands its pid to the next one,
and a record read later (a cron claim, a kanban card) would aim a signal at a stranger. So a
record keeps the start time the kernel gives the process (`/proc/<pid>/stat`, field 22, clock
ticks since boot), read at spawn while the child is unreaped and its pid cannot be reused, and a
signal goes out only while that start time still matches.

`run_group` runs a short command (a notify target) in its own process group: success is the
exit status of the command itself, not the end of its output (a background child that keeps
stderr open does not make a finished command look hung), and when the command ends or times out
every process left in its group is killed.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["GroupResult", "GroupTimeout", "group_remains", "is_group_leader", "run_group", "same_process",
           "signal_group", "start_time"]

_STDERR_TAIL = 300


def start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), or None when there is no such
    process (or it cannot be read)."""
    if pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return int(fields[19])  # field 22 counting from pid: the 20th after the command name
    except (OSError, IndexError, ValueError):
        return None


def same_process(pid: int, started: int | None) -> bool:
    """`pid` is still the process recorded as started at `started`. A record without a start
    time identifies nobody."""
    return started is not None and start_time(pid) == started


def is_group_leader(pid: int, started: int | None) -> bool:
    """`pid` is the process recorded at `started` and leads its own process group."""
    if not same_process(pid, started):
        return False
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def _ours(pid: int, started: int | None, leader_may_have_ended: bool) -> bool:
    if is_group_leader(pid, started):
        return True
    # A pid still in use as a process group's id is never handed to a new process, so while the
    # leader is gone (no process has its pid) the members left are still the group recorded.
    return leader_may_have_ended and started is not None and start_time(pid) is None


def group_remains(pid: int, started: int | None) -> bool:
    """Some process of the group recorded (leader `pid`, started at `started`) is still there."""
    if not _ours(pid, started, True):
        return False
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pid: int, started: int | None, sig: signal.Signals, *, leader_may_have_ended: bool = False) -> bool:
    """Send `sig` to the process group `pid` leads, only while `pid` is the process recorded at
    `started` and still leads its group (with `leader_may_have_ended`, also to the members left
    once the leader has ended); False when it is gone, or was never identified as ours."""
    if not _ours(pid, started, leader_may_have_ended):
        return False
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class GroupTimeout(Exception):
    """The command outlived its timeout; its whole group was killed."""


@dataclass(frozen=True)
class GroupResult:
    returncode: int
    #: the last bytes the command wrote on stderr
    stderr: bytes


def _wait_exited(pid: int, timeout: float) -> bool:
    """Wait until child `pid` has exited WITHOUT reaping it (its pid, which is also its group's
    id, stays reserved while it is a zombie). False when `timeout` seconds passed first."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        fd = None
    if fd is not None:
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(max(0.0, timeout) * 1000))
        finally:
            os.close(fd)
    end = time.monotonic() + timeout
    pause = 0.005
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.monotonic() >= end:
            return False
        time.sleep(pause)
        pause = min(0.05, pause * 2)
    return True


def run_group(argv: Sequence[str], data: bytes, timeout: float) -> GroupResult:
    """Run `argv` with `data` on stdin in a process group of its own; wait at most `timeout`
    seconds for the command itself to exit, then kill whatever is left in its group (also what
    it left running in the background). `GroupTimeout` when it did not exit in time; `OSError`
    when it cannot be started."""
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stderr:
        stdin.write(data)
        stdin.flush()
        stdin.seek(0)
        process = subprocess.Popen(list(argv), stdin=stdin, stdout=subprocess.DEVNULL, stderr=stderr,
                                   start_new_session=True, close_fds=True)
        try:
            exited = _wait_exited(process.pid, timeout)
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            process.wait()
        if not exited:
            raise GroupTimeout(f"timed out after {timeout:g}s")
        size = stderr.seek(0, os.SEEK_END)
        stderr.seek(max(0, size - _STDERR_TAIL))
        return GroupResult(process.returncode, stderr.read())
