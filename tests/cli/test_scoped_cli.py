"""Scoped holds on the command line (issue 26): `pause --only/--job`, `resume --hold`, `check` and
`gate` with `--component/--job`, on both the framework-free path and the Typer app."""

from __future__ import annotations

import json
import re

import pytest

#: the subject is each command's output, exit code and files: `hermes` runs in this process
HERMES_IN_PROCESS = True

APP = ("-c", "import sys\nfrom hermes_estop.cli import main\nsys.exit(main(sys.argv[1:], hot_path=False))")


def hold_id(output: str) -> str:
    found = re.search(r"\(hold ([0-9a-f]+)\)", output)
    assert found, output
    return found.group(1)


@pytest.mark.parametrize("component, job, code", [
    ("kanban", None, 1), ("cron", None, 0), ("cron", "nightly-1", 0), ("gateway", None, 0), (None, None, 1),
])
def test_check_answers_per_component_under_a_kanban_only_hold(hermes, component, job, code):
    hermes.estop().engage(only="kanban", reason="migrating kanban.db")  # what `pause --only` arms
    args = ["check", *(["--component", component] if component else []), *(["--job", job] if job else [])]
    result = hermes(*args, check=code)
    if code:
        assert "kanban: migrating kanban.db" in result.stdout


@pytest.mark.parametrize("job, code", [("nightly-db", 1), ("hourly", 0), (None, 1)])
def test_a_job_glob_holds_only_matching_jobs(hermes, job, code):
    hermes.estop().engage(only="cron", jobs="nightly-*")  # what `pause --only --job` arms
    hermes("check", "--component", "cron", *(["--job", job] if job else []), check=code)


def test_gate_runs_the_command_when_the_scoped_hold_does_not_cover_it(hermes, tmp_path):
    hermes("pause", "--only", "kanban", check=0)
    marker = tmp_path / "ran"
    hermes("gate", "--component", "cron", "--job", "x", "--", "touch", str(marker), check=0)
    assert marker.exists()
    held = hermes("gate", "--component", "kanban", "--", "touch", str(tmp_path / "no"), check=75)
    assert "held by" in held.stderr and not (tmp_path / "no").exists()


def test_full_and_scoped_holds_released_in_either_order_leave_the_other_standing(hermes):
    hermes("pause", "--reason", "everything", check=0)
    scoped = hold_id(hermes("pause", "--only", "kanban", check=0).stdout)
    resumed = hermes("resume", check=0)
    assert "scoped hold still stands at" in resumed.stdout and f"--hold {scoped}" in resumed.stdout
    hermes("check", "--component", "kanban", check=1)
    hermes("check", "--component", "cron", check=0)
    hermes("pause", "--reason", "everything again", check=0)
    hermes("resume", "--hold", scoped, check=0)
    hermes("check", "--component", "kanban", check=1)  # the full hold still stands
    hermes("check", "--component", "cron", check=1)
    hermes("resume", check=0)
    hermes("check", check=0)
    assert not hermes.sentinel.exists()


def test_pausing_the_same_selector_again_rearms_it(hermes):
    first = hold_id(hermes("pause", "--only", "kanban", "--reason", "a", check=0).stdout)
    second = hold_id(hermes("pause", "--only", "kanban", "--reason", "b", check=0).stdout)
    other = hold_id(hermes("pause", "--only", "cron", check=0).stdout)
    assert first == second != other
    status = json.loads(hermes("status", "--json", check=0).stdout)
    assert "kanban" in json.dumps(status) and other in json.dumps(status)


def test_resume_of_an_unknown_hold_names_what_stands(hermes):
    scoped = hold_id(hermes("pause", "--only", "kanban", check=0).stdout)
    result = hermes("resume", "--hold", "deadbeef", check=1)
    assert "no scoped hold 'deadbeef'" in result.stderr and scoped in result.stderr
    hermes("check", "--component", "kanban", check=1)


@pytest.mark.parametrize("args", [["pause", "--only", ""], ["pause", "--only", "a\x1bb"], ["pause", "--job", ""],
                                  ["check", "--component", ""], ["resume", "--hold", "x", "--generation", "y"]])
def test_bad_selector_input_is_one_line_exit_2(hermes, args):
    result = hermes(*args, check=2)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not hermes.sentinel.exists()


@pytest.mark.parametrize("args", [["check", "--component", "cron"], ["check", "--component", "kanban", "--json"],
                                  ["check", "--component", "cron", "--job", "nightly-1"],
                                  ["gate", "--component", "kanban", "--", "true"]])
def test_the_hot_path_answers_scoped_checks_as_the_typer_app_does(hermes, args):
    hermes.estop().engage(only="kanban", jobs="night*")  # what `pause --only --job` arms
    import subprocess
    import sys

    hot = hermes(*args)
    app = subprocess.run([sys.executable, *APP, *args], capture_output=True, text=True, env=hermes.env, timeout=60)
    assert (hot.returncode, hot.stdout, hot.stderr) == (app.returncode, app.stdout, app.stderr)


def test_check_at_forecasts_per_component(hermes):
    hermes("pause", "--only", "kanban", "--ttl", "1h", check=0)
    hermes("check", "--at", "now", "--component", "cron", check=0)
    held = hermes("check", "--at", "now", "--component", "kanban", check=1)
    assert "scoped hold" in held.stdout and "kanban" in held.stdout


def test_history_names_each_scoped_hold_and_its_selector(hermes):
    scoped = hold_id(hermes("pause", "--only", "cron", "--job", "nightly-*", "--reason", "upstream down", check=0).stdout)
    hermes("resume", "--hold", scoped, check=0)
    history = hermes("history", check=0).stdout
    lines = [line for line in history.splitlines() if f"scoped hold {scoped}" in line]
    assert len(lines) == 2 and all('"nightly-*"' in line and '"cron"' in line for line in lines)


def test_check_says_when_scoped_holds_stand_that_do_not_cover_the_work(hermes):
    hermes.estop().engage(only="kanban")  # what `pause --only` arms
    assert "no active hold covers this work (1 scoped hold(s) stand)" in hermes(
        "check", "--component", "cron", check=0).stdout
