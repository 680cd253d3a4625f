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

`Job` runs a maintenance job (`hermes run`'s CMD) that never outlives the process that started
it: the command asks the kernel for a parent-death signal, a small guard process kills the
job's process group when its runner dies without saying goodbye, and what the command left
running in its group is stopped at its end. A process that leaves the group (`setsid`,
`setpgid`: a double-forked daemon) escapes all three.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GroupResult", "GroupTimeout", "Job", "group_members", "group_remains", "guard_main", "is_group_leader",
           "parent_death_signal", "run_group", "same_process", "signal_group", "start_time", "wait_exited",
           "wait_until_set"]

_STDERR_TAIL = 300


def wait_until_set(stop: threading.Event, poll: float = 0.5) -> None:
    """Block until `stop` is set, waking every `poll` seconds.

    Why not `stop.wait()`: a SIGTERM the kernel delivers to another thread leaves a main thread
    blocked in an untimed wait asleep, and CPython runs the Python handler (the one that sets
    `stop`) only when the main thread next runs; a timed wait lets it, so a stop always stops."""
    while not stop.wait(poll):
        pass


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


def wait_exited(pid: int, timeout: float | None) -> bool:
    """Wait until child `pid` has exited WITHOUT reaping it (its pid, which is also its group's
    id, stays reserved while it is a zombie). False when `timeout` seconds (None: no limit)
    passed first."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        fd = None
    if fd is not None:
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(None if timeout is None else max(0.0, timeout) * 1000))
        finally:
            os.close(fd)
    end = None if timeout is None else time.monotonic() + timeout
    pause = 0.005
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if end is not None and time.monotonic() >= end:
            return False
        time.sleep(pause)
        pause = min(0.05, pause * 2)
    return True


#: how long a SIGKILLed group may take to be gone (a loaded machine schedules the dying late)
_KILLED_GRACE = 5.0


def _wait_group_gone(pgid: int, limit: float) -> None:
    """Return once no live member of `pgid` is left, or after `limit` seconds: SIGKILL is sent,
    not done, when `killpg` returns, and the caller promises that nothing outlives it."""
    end = time.monotonic() + limit
    pause = 0.002
    while group_members(pgid) and time.monotonic() < end:
        time.sleep(pause)
        pause = min(0.05, pause * 2)


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
            exited = wait_exited(process.pid, timeout)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            _wait_group_gone(process.pid, _KILLED_GRACE)
        if not exited:
            raise GroupTimeout(f"timed out after {timeout:g}s")
        size = stderr.seek(0, os.SEEK_END)
        stderr.seek(max(0, size - _STDERR_TAIL))
        return GroupResult(process.returncode, stderr.read())


#: `prctl(2)` option: the signal this process gets when the thread that created it ends
_PR_SET_PDEATHSIG = 1
#: what the guard reads on its stdin when the runner ends its job itself
_GOODBYE = b"done"
_GUARD = ("import sys; sys.path.insert(0, sys.argv[1]); "
          "from hermes_estop.system.processes import guard_main; guard_main()")


def parent_death_signal(sig: signal.Signals, tell: int | None = None) -> Callable[[], None] | None:
    """A `preexec_fn` that makes the child get `sig` when its parent dies (Linux
    `PR_SET_PDEATHSIG`; None elsewhere). It checks the parent after asking, so a parent that died
    between the fork and the request is not missed. With `tell` (a pipe to a `Job`'s guard), the
    child first writes its own pid and start time there, before it runs anything: the guard
    knows whom to kill even when the runner dies the instant after the fork. Everything is
    looked up here, before the fork: the child only calls."""
    if not sys.platform.startswith("linux"):
        return None

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent, number, kill, getppid, getpid = os.getpid(), int(sig), os.kill, os.getppid, os.getpid
    write, started_of = os.write, start_time

    def ask() -> None:
        if tell is not None:
            me = getpid()
            write(tell, f"{me} {started_of(me)}\n".encode())
        prctl(_PR_SET_PDEATHSIG, number, 0, 0, 0)
        if getppid() != parent:
            kill(getpid(), number)

    return ask


def group_members(pgid: int) -> list[tuple[int, str]]:
    """The live processes (zombies left out) of process group `pgid`, each with its command line
    (for an operator: `pid 123 (sleep 20)`), by pid."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            if fields[0] == b"Z" or int(fields[2]) != pgid:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read(4096).replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except (OSError, IndexError, ValueError):
            continue
        members.append((int(entry), command or "?"))
    return sorted(members)


def guard_main() -> None:
    """The guard of a `Job` (run as its own small process, in a session of its own, started
    before the job): the job's first line on stdin names it (pid, start time), written by the
    job itself right after its fork; when stdin ends without the runner's goodbye, the runner
    died, and the job's process group is killed, since nothing holds the job's hold any more."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    said = sys.stdin.buffer.read()
    if said.endswith(_GOODBYE):
        return
    try:
        pid, started = (int(word) for word in said.split(b"\n", 1)[0].split())
    except ValueError:
        return  # the runner died before the job was started: nothing to kill
    if signal_group(pid, started, signal.SIGKILL, leader_may_have_ended=True):
        sys.stderr.write(f"hermes run: the runner of process group {pid} died: that group was killed\n")


class Job:
    """A command in a process group (and session) of its own that does not outlive the process
    that runs it: the command gets SIGKILL when its parent dies (`parent_death_signal`), a guard
    kills its whole group then, and `finish` stops what the command left running in the group.
    `OSError` when the command cannot be started."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        # The guard first: a runner killed between the job's fork and a guard's start would leave
        # what the job starts running (the parent-death signal reaches only the command itself).
        self.guard: subprocess.Popen[bytes] | None = None
        try:
            self.guard = subprocess.Popen(
                [sys.executable, "-I", "-c", _GUARD, str(Path(__file__).resolve().parents[1])],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            self.guard = None  # the parent-death signal still takes the command itself down
        tell = self.guard.stdin.fileno() if self.guard is not None and self.guard.stdin is not None else None
        try:
            self.process = subprocess.Popen(list(argv), env=dict(env), start_new_session=True,
                                            preexec_fn=parent_death_signal(signal.SIGKILL, tell))
        except BaseException:
            self._dismiss_guard()
            raise
        self.pid = self.process.pid
        self.started = start_time(self.pid)  # unreaped: the pid is still this child's

    def signal(self, sig: signal.Signals) -> None:
        """`sig` to the job's whole group (while the command is unreaped its group is ours)."""
        if self.process.returncode is None:
            signal_group(self.pid, self.started, sig, leader_may_have_ended=True)

    def wait(self) -> None:
        """Wait until the command itself has exited, without reaping it."""
        wait_exited(self.pid, None)

    def finish(self, grace: float) -> tuple[int, list[tuple[int, str]]]:
        """After `wait`: stop what the command left running in its group (SIGTERM, SIGKILL after
        `grace` seconds), reap it and dismiss the guard. Returns the command's `returncode` and
        what was left running (pid, command line)."""
        left = group_members(self.pid)
        if left:
            self.signal(signal.SIGTERM)
            end = time.monotonic() + grace
            while group_members(self.pid) and time.monotonic() < end:
                time.sleep(0.05)
            self.signal(signal.SIGKILL)
        returncode = self.process.wait()
        self._dismiss_guard()
        return returncode, left

    def _dismiss_guard(self) -> None:
        guard, self.guard = self.guard, None
        if guard is None or guard.stdin is None:
            return
        try:
            guard.stdin.write(_GOODBYE)
            guard.stdin.close()
        except OSError:
            pass
        guard.wait()
