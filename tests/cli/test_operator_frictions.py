"""The second hour's frictions of issue 38 on the command line: a resume that lifted nothing
while scoped holds stand, `resume --all`, a profile pause that says it is not the fleet's, and
error lines that name what they are about once."""

from __future__ import annotations

import json
import re

import pytest

#: the subject is each command's output, exit code and files: `hermes` runs in this process
HERMES_IN_PROCESS = True


def hold_id(output: str) -> str:
    found = re.search(r"\(hold ([0-9a-f]+)\)", output)
    assert found, output
    return found.group(1)


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_resume_with_only_scoped_holds_standing_says_what_stands_and_fails(hermes, json_flag):
    kanban = hermes.estop().engage(only="kanban").hold_id  # what `pause --only kanban` arms
    result = hermes("resume", *json_flag, check=1)
    if json_flag:
        document = json.loads(result.stdout)
        assert document["released"] is False and [h["hold"] for h in document["holds"]] == [kanban]
    else:
        assert "only scoped holds stand there (1)" in result.stdout
        assert f"`hermes resume --hold {kanban}`" in result.stdout
        assert "`hermes resume --all` every hold at" in result.stderr
    hermes("check", "--component", "kanban", check=1)


def test_resume_with_nothing_standing_still_succeeds(hermes):
    assert "no hold at" in hermes("resume", check=0).stdout


def test_resume_all_lifts_the_full_hold_and_every_scoped_hold_at_the_scope(profile_hermes):
    estop = profile_hermes.estop()  # the holds `pause --fleet --only`, `pause` and `pause --only` arm
    estop.engage(fleet=True, only="gateway")
    estop.engage(reason="everything")
    kanban, cron = estop.engage(only="kanban").hold_id, estop.engage(only="cron").hold_id
    result = profile_hermes("resume", "--all", check=0)
    lines = [line for line in result.stdout.splitlines() if line.startswith("resumed ")]
    assert len(lines) == 3 and kanban in lines[1] and cron in lines[2]
    assert not profile_hermes.sentinel.exists()
    profile_hermes("check", "--component", "kanban", check=0)
    profile_hermes("check", "--component", "gateway", check=1)  # the fleet root's is another scope
    assert "scoped hold still stands at fleet" in result.stdout


@pytest.mark.parametrize("args", [["--all", "--hold", "x"], ["--all", "--generation", "g"]])
def test_resume_all_with_one_hold_named_is_refused(hermes, args):
    hermes.estop().engage()  # what `pause` arms
    result = hermes("resume", *args, check=2)
    assert result.stderr.count("\n") == 1 and "give one of --generation, --hold or --all" in result.stderr
    assert hermes.sentinel.exists()


@pytest.mark.parametrize("args, says", [
    ([], True), (["--only", "cron"], True), (["--fleet"], False), (["--profile", "ops"], False),
])
def test_a_plain_pause_from_a_profile_home_says_it_is_not_the_fleets(profile_hermes, args, says):
    first = profile_hermes("pause", *args, check=0).stdout.splitlines()[0]
    assert ("(not the fleet: --fleet for every profile)" in first) is says
    if not args:
        assert first.startswith("paused profile ops (not the fleet: --fleet for every profile)")


def test_a_pause_in_a_standalone_home_says_nothing_of_profiles(hermes):
    assert "not the fleet" not in hermes("pause", check=0).stdout


@pytest.mark.parametrize("args, expected", [
    (["nosuch"], "hermes: error: No such command 'nosuch'."),
    (["windows", "nosuch"], "hermes: error: windows: No such command 'nosuch'."),
    (["pause", "--ttl", "5x"], "hermes: error: --ttl: invalid duration '5x': expected e.g. 45m, 1h30m, 90s, 1d or PT45M"),
    (["check", "--at", "now", "--for", "0"], "hermes: error: --for: invalid duration '0': must be positive"),
])
def test_an_error_line_says_hermes_once_and_names_its_option(hermes, args, expected):
    result = hermes(*args, check=2)
    assert result.stderr.strip() == expected
    assert not hermes.sentinel.exists()


@pytest.mark.parametrize("words, usage", [
    ([], "Usage: hermes [OPTIONS] COMMAND [ARGS]..."),
    (["pause"], "Usage: hermes pause [OPTIONS]"),
    (["windows", "add"], "Usage: hermes windows add [OPTIONS] NAME"),
])
def test_help_command_shows_the_help_of_the_command_it_names(hermes, words, usage):
    result = hermes("help", *words, check=0)
    assert result.stdout.startswith(usage)
    assert result.stdout == hermes(*words, "--help", check=0).stdout


def test_help_of_an_unknown_command_is_one_line_exit_2(hermes):
    assert hermes("help", "nosuch", check=2).stderr.strip() == "hermes: error: No such command 'nosuch'."


def test_the_top_level_help_says_how_to_get_a_commands_help(hermes):
    assert "`hermes help COMMAND` (or `hermes COMMAND -h`) explains a command." in hermes(check=0).stdout


def test_resume_of_another_profile_with_only_scoped_holds_there_fails_too(hermes):
    hermes("pause", "--profile", "ops", "--only", "cron", check=0)
    result = hermes("resume", "--profile", "ops", check=1)
    assert "only scoped holds stand there (1)" in result.stdout
    hermes("resume", "--profile", "ops", "--all", check=0)
    hermes("resume", "--profile", "ops", check=0)
