"""`hermes cron | kanban | gateway`: JSON where a script wants it, one-line summaries otherwise,
and every bad value refused with exit 2 and one line naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest

from hermes_estop.cli import main
from hermes_estop.consumers.cron import CronTable
from hermes_estop.model.timeutil import utc_now

from .helpers import finishes


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_cron_add_list_remove(cli_env, capsys):
    code, out, _ = run(capsys, "cron", "add", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Berlin",
                       "--command", "echo hi", "--owner", "424242")
    assert code == 0 and out.startswith("added cron job nightly: 0 3 * * * (Europe/Berlin), next run ")
    [job] = run_json(capsys, "cron", "list")["jobs"]
    assert (job["name"], job["owner"], job["profile"], job["timezone"]) == ("nightly", "424242", "p1", "Europe/Berlin")
    assert run(capsys, "cron", "remove", "nightly")[:2] == (0, "removed cron job nightly\n")
    assert run_json(capsys, "cron", "list")["jobs"] == []


def _due_job(home, name, command, **kw):
    """A job whose first occurrence is already behind the real clock (added "3 minutes ago")."""
    CronTable(home).add(name, command, now=utc_now() - timedelta(minutes=3), schedule="* * * * *",
                        profile="p1", **kw)


def test_cron_tick_json_counts_executed_held_and_failed(cli_env, capsys, tmp_path):
    _due_job(cli_env, "good", "true", owner="op")
    _due_job(cli_env, "bad", "exit 5", owner="op")
    _due_job(cli_env, "theirs", "true", owner="bob")
    assert run(capsys, "pause", "--reason", "upgrade", "--allow-user", "op")[0] == 0
    report = run_json(capsys, "cron", "tick")
    assert (report["executed"], report["failed"], report["held"]) == (2, 1, 1)
    outcomes = {row["name"]: row["outcome"] for row in report["jobs"]}
    assert outcomes == {"good": "ok", "bad": "failed", "theirs": "held"}
    code, out, _ = run(capsys, "cron", "tick")
    assert code == 0 and out.splitlines()[0] == "cron tick: 0 executed, 0 failed, 1 held"


def test_kanban_add_list_dispatch(cli_env, capsys):
    assert run(capsys, "kanban", "add", "rebuild index", "--command", "true", "--ready", "--owner", "op")[1] \
        == "added card #1 (ready): rebuild index\n"
    run(capsys, "kanban", "add", "later", "--command", "true")
    run(capsys, "pause", "--fleet", "--reason", "maint")
    held = run_json(capsys, "kanban", "dispatch", "--max", "2")
    assert (held["spawned"], held["held"]) == (0, 1)
    run(capsys, "resume", "--fleet")
    report = run_json(capsys, "kanban", "dispatch", "--max", "2")
    assert (report["spawned"], report["done"]) == (1, 1)
    cards = {card["title"]: card["status"] for card in run_json(capsys, "kanban", "list")["cards"]}
    assert cards == {"rebuild index": "done", "later": "todo"}
    assert run(capsys, "kanban", "ready", "2")[0] == 0
    code, out, _ = run(capsys, "kanban", "dispatch")
    assert code == 0 and out.startswith("kanban dispatch: 1 spawned, 0 held, 1 done, 0 failed")


@pytest.mark.parametrize(
    "argv, named",
    [
        (["cron", "add", "j", "--cron", "61 * * * *", "--command", "true"], "61 * * * *"),
        (["cron", "add", "j", "--cron", "* * *", "--command", "true"], "* * *"),
        (["cron", "add", "j", "--cron", "* * * * *", "--tz", "Nowhere/Land", "--command", "true"], "Nowhere/Land"),
        (["cron", "add", "bad name", "--cron", "* * * * *", "--command", "true"], "bad name"),
        (["cron", "add", "j", "--cron", "* * * * *", "--command", "true", "--profile", "a/b"], "a/b"),
        (["cron", "add", "j", "--cron", "* * * * *", "--command", "true", "--timeout", "0s"], "0s"),
        (["cron", "add", "j", "--at", "yesterday", "--command", "true"], "yesterday"),
        (["cron", "add", "j", "--cron", "* * * * *"], "--command"),
        (["cron", "remove", "ghost"], "ghost"),
        (["kanban", "add", "t", "--command", "true", "--profile", "../up"], "../up"),
        (["kanban", "ready", "99"], "99"),
        (["kanban", "list", "--status", "doing"], "doing"),
        (["kanban", "dispatch", "--max", "0"], "0"),
        (["kanban", "dispatch", "--timeout", "forever"], "forever"),
        (["gateway", "serve", "--port", "70000"], "70000"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_value(cli_env, capsys, argv, named):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and named in err


def test_a_duplicate_job_name_exits_2_and_keeps_the_first(cli_env, capsys):
    run(capsys, "cron", "add", "j", "--cron", "0 3 * * *", "--command", "true")
    code, _, err = run(capsys, "cron", "add", "j", "--cron", "0 4 * * *", "--command", "false")
    assert code == 2 and "'j'" in err and len(err.splitlines()) == 1
    assert CronTable(cli_env).get("j").schedule == "0 3 * * *"


def test_the_consumer_modules_are_not_imported_by_a_cheap_command(subprocess_env):
    probe = ("import sys; from hermes_estop.cli import main; main(['check', '-q']); "
             "print(sorted(m for m in sys.modules if m.startswith(('croniter', 'apscheduler', 'sqlite3', "
             "'hermes_estop.consumers.'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=subprocess_env,
                         check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("argv, planted", [
    (["cron", "list"], "cron/jobs.json"),
    (["cron", "tick"], "cron/jobs.json"),
    (["kanban", "list"], "../../kanban.db"),
    (["kanban", "dispatch"], "../../kanban.db"),
])
def test_a_fifo_planted_at_a_consumer_file_exits_2_with_one_line_and_never_blocks(cli_env, capsys, argv, planted):
    path = (cli_env / planted).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    kind, code = finishes(lambda: main(argv))
    _, err = capsys.readouterr()
    assert (kind, code) == ("returned", 2)
    assert len(err.strip().splitlines()) == 1 and str(path) in err and "FIFO" in err


def test_printed_lines_escape_control_characters_written_by_hand(cli_env, capsys):
    run(capsys, "cron", "add", "j", "--cron", "0 3 * * *", "--command", "echo \x1b[2J \u202e")
    code, out, _ = run(capsys, "cron", "list")
    assert code == 0 and "\x1b" not in out and "\u202e" not in out and "\\x1b[2J \\u202e" in out
