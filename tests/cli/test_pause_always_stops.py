"""Issue 20 items 4-6 on the command line: `hermes pause` arms whenever the hold can be written
(an audit trail it cannot write is reported, never a reason not to stop), an interrupted pause
says what is on disk, and an empty or foreign-digit deadman is refused rather than dropped."""

from __future__ import annotations

import json
import os

import pytest

from hermes_estop.stores.audit_log import AUDIT_FILE
from hermes_estop.system import fsutil
from inprocess_cli import fleet, run  # noqa: F401

#: the subject is each command's output, exit code and files: `hermes` runs in this process
HERMES_IN_PROCESS = True


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_pause_arms_when_the_audit_trail_is_a_fifo(hermes):
    hermes.root.mkdir(parents=True, exist_ok=True)
    os.mkfifo(hermes.root / AUDIT_FILE)
    result = hermes("pause", "--reason", "stop anyway", "--ttl", "1h", check=0)
    line = one_error_line(result)
    assert "audit" in line and "FIFO" in line and "hold stands" in line
    hermes("check", check=1)
    status = hermes("status", check=0).stdout
    assert "HELD" in status and "audit trail NOT WRITABLE" in status and "FIFO" in status
    data = json.loads(hermes("status", "--json", check=0).stdout)
    assert data["engaged"] and "FIFO" in data["audit_problem"]


def test_status_json_says_the_audit_trail_is_fine(hermes):
    hermes("pause", check=0)
    assert json.loads(hermes("status", "--json", check=0).stdout)["audit_problem"] is None


@pytest.mark.parametrize("args", [["--ttl", ""], ["--ttl", "  "], ["--until", ""]])
def test_empty_ttl_or_until_is_refused_and_arms_nothing(hermes, args):
    result = hermes("pause", *args, check=2)
    assert args[0] in one_error_line(result)
    assert not hermes.sentinel.exists()


def test_empty_ttl_keeps_the_standing_deadman(hermes):
    hermes("pause", "--reason", "standing", "--ttl", "45m", check=0)
    before = hermes.sentinel.read_bytes()
    one_error_line(hermes("pause", "--ttl", "", check=2))
    assert hermes.sentinel.read_bytes() == before


@pytest.mark.parametrize("args", [["--ttl", "٣h"], ["--ttl", "PT٣H"], ["--ttl", "１h"],
                                  ["--until", "٢٠٩٩-01-01T00:00:00Z"]])
def test_deadman_in_digits_of_other_scripts_is_refused(hermes, args):
    one_error_line(hermes("pause", *args, check=2))
    assert not hermes.sentinel.exists()


def interrupt_after_the_rename(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C landing right after the hold was renamed in (atomic_write's directory fsync), once."""
    real = fsutil.fsync_dir

    def interrupted(path: object) -> None:
        monkeypatch.setattr(fsutil, "fsync_dir", real)
        raise KeyboardInterrupt

    monkeypatch.setattr(fsutil, "fsync_dir", interrupted)


def test_pause_interrupted_after_the_rename_says_the_hold_was_written(fleet, capsys, monkeypatch):  # noqa: F811
    assert run(capsys, "pause", "--reason", "standing")[0] == 0
    interrupt_after_the_rename(monkeypatch)
    code, _, err = run(capsys, "pause", "--reason", "re-armed")
    state = json.loads(run(capsys, "status", "--json")[1])
    (hold,) = state["holds"]
    assert code == 130 and hold["reason"] == "re-armed"
    assert "IS HELD" in err and hold["generation"] in err, err
    history = json.loads(run(capsys, "history", "--json")[1])
    assert hold["generation"] in [event["generation"] for event in history]


def test_pause_interrupted_before_the_write_says_nothing_was_written(fleet, capsys, monkeypatch):  # noqa: F811
    assert run(capsys, "pause", "--reason", "standing")[0] == 0

    real = fsutil.atomic_write

    def interrupted(*args: object, **kwargs: object) -> None:
        monkeypatch.setattr(fsutil, "atomic_write", real)
        raise KeyboardInterrupt

    monkeypatch.setattr(fsutil, "atomic_write", interrupted)
    code, _, err = run(capsys, "pause", "--reason", "never")
    assert code == 130 and "nothing was written" in err and "active" in err


def test_pause_interrupted_while_printing_says_the_hold_was_written(fleet, capsys, monkeypatch):  # noqa: F811
    from hermes_estop.cli import hold as hold_cli

    real = hold_cli.paused_lines  # what pause prints once the hold is written

    def interrupted(*args: object, **kwargs: object) -> object:
        monkeypatch.setattr(hold_cli, "paused_lines", real)
        raise KeyboardInterrupt

    monkeypatch.setattr(hold_cli, "paused_lines", interrupted)
    code, _, err = run(capsys, "pause", "--reason", "written")
    state = json.loads(run(capsys, "status", "--json")[1])
    (hold,) = state["holds"]
    assert code == 130 and "IS HELD" in err and hold["generation"] in err, err


def interrupt_when_the_command_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C landing once the command's own code has returned (its exit raised), while the
    command framework leaves the command's context, once."""
    import typer.core

    context = typer.core.TyperGroup.context_class  # the command framework's (typer's own click)
    real = context.__exit__

    def interrupted(self: object, *exc_info: object) -> object:
        result = real(self, *exc_info)  # type: ignore[arg-type]
        if not hasattr(exc_info[1], "exit_code"):  # not yet: the command has not raised its exit
            return result
        monkeypatch.setattr(context, "__exit__", real)
        raise KeyboardInterrupt

    monkeypatch.setattr(context, "__exit__", interrupted)


def test_pause_interrupted_after_it_finished_says_the_hold_and_its_generation(fleet, capsys, monkeypatch):  # noqa: F811
    """Issue 46 item 3: Ctrl-C landing after pause's own code returned (while the command
    framework winds down) said only "hermes: interrupted"; the line says the hold stands."""
    interrupt_when_the_command_is_done(monkeypatch)
    code, _, err = run(capsys, "pause", "--reason", "written")
    state = json.loads(run(capsys, "status", "--json")[1])
    (hold,) = state["holds"]
    assert code == 130 and len(err.splitlines()) == 1, err
    assert "IS HELD" in err and hold["generation"] in err, err


def test_an_interrupted_command_after_a_pause_says_only_interrupted(fleet, capsys, monkeypatch):  # noqa: F811
    """What a pause leaves is said by that pause only: the next command interrupted says nothing of it."""
    assert run(capsys, "pause", "--reason", "standing")[0] == 0
    interrupt_when_the_command_is_done(monkeypatch)
    code, _, err = run(capsys, "resume")
    assert code == 130 and "hold" not in err.lower() and "interrupted;" not in err, err
