"""`processes`: what identifies a process to a later signal (pid AND start time), and a command
run in a group of its own."""

from __future__ import annotations

import shutil
import signal
import subprocess

from hermes_estop.processes import group_remains, same_process, signal_group, start_time


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
