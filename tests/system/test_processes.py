"""`processes`: what identifies a process to a later signal (pid AND start time), and a command
run in a group of its own."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys

from hermes_estop.system.processes import group_remains, same_process, signal_group, start_time


def test_start_time_is_field_22_even_with_parentheses_and_spaces_in_the_command_name(tmp_path):
    program = tmp_path / "a) 1 2 (b"
    shutil.copy(shutil.which("sleep"), program)
    proc = subprocess.Popen([str(program), "60"], start_new_session=True)
    try:
        with open(f"/proc/{proc.pid}/stat", "rb") as handle:
            raw = handle.read()
        assert start_time(proc.pid) == int(raw[raw.rindex(b")") + 2:].split()[19])
        assert same_process(proc.pid, start_time(proc.pid)) and not same_process(proc.pid, None)
    finally:
        proc.kill()
        proc.wait()


def test_a_group_recorded_with_another_start_time_is_never_signalled():
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        older = start_time(proc.pid) - 1
        assert not signal_group(proc.pid, older, signal.SIGKILL)
        assert not group_remains(proc.pid, older)
        assert proc.poll() is None
        assert signal_group(proc.pid, start_time(proc.pid), signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


#: a runner that starts `sleep 300` as a `Job`, kills the job's guard (so only the command's
#: own parent-death signal is left), says the job's pid, and waits to be killed
RUNNER = """
import os, sys, time
from hermes_estop.system.processes import Job
job = Job(["sleep", "300"], dict(os.environ))
job.guard.kill()
job.guard.wait()
print(job.pid, flush=True)
time.sleep(300)
"""


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def test_a_job_asks_for_a_parent_death_signal_so_it_dies_with_its_runner_even_without_a_guard():
    import os
    import sys
    import time
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[1] / "src")
    runner = subprocess.Popen([sys.executable, "-c", RUNNER], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": src})
    pid = 0
    try:
        pid = int(runner.stdout.readline())
        assert _running(pid)
        runner.kill()
        runner.wait(30)
        deadline = time.monotonic() + 60
        while _running(pid):
            assert time.monotonic() < deadline, "the job outlived its runner"
            time.sleep(0.05)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(30)
        if pid and _running(pid):
            os.kill(pid, signal.SIGKILL)


# A SIGTERM the kernel hands to another thread: the main thread masks it, as a thread that
# happens not to be the one picked would. The handler sets the event the main thread waits on.
_WAITER = """
import signal, sys, threading
from hermes_estop.system.processes import wait_until_set
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
threading.Thread(target=threading.Event().wait, daemon=True).start()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
print("waiting", flush=True)
wait_until_set(stop)
print("stopped", flush=True)
"""


def test_a_sigterm_delivered_to_another_thread_still_ends_the_main_threads_wait():
    waiter = subprocess.Popen([sys.executable, "-c", _WAITER], stdout=subprocess.PIPE, text=True)
    try:
        assert waiter.stdout is not None and waiter.stdout.readline() == "waiting\n"
        waiter.send_signal(signal.SIGTERM)
        assert waiter.wait(30) == 0
        assert waiter.stdout.read() == "stopped\n"
    finally:
        waiter.kill()
        waiter.wait()


#: a runner SIGKILLed as soon as its job (a shell that leaves `sleep 300` in its group) has said
#: its pids, before the runner does anything after the job's fork
_DIES_AT_THE_FORK = """
import os, signal, subprocess, sys, time
from hermes_estop.system.processes import Job

class Dying(subprocess.Popen):
    def __init__(self, args, *rest, **named):
        super().__init__(args, *rest, **named)
        if args[0] == "sh":
            while not os.path.exists(sys.argv[1]):
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)

subprocess.Popen = Dying
Job(["sh", "-c", 'sleep 300 & echo $$ $! > "$1.tmp"; mv "$1.tmp" "$1"; wait', "job", sys.argv[1]], dict(os.environ))
"""


def test_a_runner_killed_right_after_the_jobs_fork_takes_what_the_job_started_down(tmp_path):
    import os
    import time
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[2] / "src")
    pidfile = tmp_path / "pids"
    runner = subprocess.Popen([sys.executable, "-c", _DIES_AT_THE_FORK, str(pidfile)],
                              env={**os.environ, "PYTHONPATH": src})
    pids: list[int] = []
    try:
        assert runner.wait(120) == -signal.SIGKILL
        deadline = time.monotonic() + 60
        pids = [int(word) for word in pidfile.read_text().split()]
        while any(_running(pid) for pid in pids):
            assert time.monotonic() < deadline, f"the job's group outlived its runner: {pids}"
            time.sleep(0.05)
    finally:
        for pid in pids:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
