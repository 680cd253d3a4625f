"""The CLI contracts of `hermes pause | resume | status | check | gate | history` against a
temporary home, run in this process (`gate` and the console script as real subprocesses)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

#: the subject is each command's output, exit code and files: `hermes` runs in this process
HERMES_IN_PROCESS = True


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def status(hermes) -> dict:
    return json.loads(hermes("status", "--json", check=0).stdout)


def test_status_on_a_fresh_home_is_free(hermes):
    result = hermes("status", check=0)
    assert "free" in result.stdout
    data = status(hermes)
    assert data["engaged"] is False and data["holds"] == []


def test_pause_prints_what_now_holds(hermes):
    result = hermes("pause", "--reason", "db migration", "--ttl", "45m", "--allow-user", "424242", check=0)
    assert "db migration" in result.stdout
    assert "424242" in result.stdout
    assert re.search(r"\(in 4[45]m", result.stdout)


def test_status_json_has_engaged_and_every_hold_field(hermes):
    hermes("pause", "--reason", "maint", "--ttl", "45m", "--allow-user", "42", "--allow-profile", "ops", check=0)
    data = status(hermes)
    assert data["engaged"] is True
    (hold,) = data["holds"]
    assert hold["scope"] == "fleet" and hold["state"] == "active" and hold["reason"] == "maint"
    assert hold["generation"] and hold["expires_at"] and hold["expires_in"].startswith("in ")
    assert hold["allow"] == {"user_ids": ["42"], "profiles": ["ops"]}
    assert hold["deadline"] == hold["expires_at"] and hold["allowlist"] == hold["allow"]


def test_status_renders_deadline_absolute_and_relative(hermes):
    hermes("pause", "--ttl", "45m", check=0)
    out = hermes("status", check=0).stdout
    assert re.search(r"deadline\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d.*\(in 4[45]m", out)


def test_status_shows_an_unreadable_hold_as_such(hermes):
    hermes.home.mkdir(parents=True)
    hermes.sentinel.write_text("{garbage")
    out = hermes("status", check=0).stdout
    assert "HELD" in out and "unreadable" in out
    (hold,) = status(hermes)["holds"]
    assert hold["state"] == "unreadable" and "not JSON" in hold["problem"]


def test_flagless_pause_rearm_keeps_allowlist_and_deadline(hermes):
    hermes("pause", "--reason", "maint", "--ttl", "45m", "--allow-user", "42", check=0)
    before = status(hermes)["holds"][0]
    hermes("pause", "--reason", "still maint", check=0)
    after = status(hermes)["holds"][0]
    assert after["generation"] != before["generation"]
    assert after["allow"] == before["allow"] and after["expires_at"] == before["expires_at"]
    assert after["reason"] == "still maint"


def test_pause_replace_clears_allowlist_and_deadline(hermes):
    hermes("pause", "--reason", "maint", "--ttl", "45m", "--allow-user", "42", check=0)
    hermes("pause", "--replace", check=0)
    hold = status(hermes)["holds"][0]
    assert hold["allow"]["user_ids"] == [] and hold["expires_at"] is None and hold["reason"] is None


def test_pause_fleet_from_a_profile_home_writes_the_root(profile_hermes):
    profile_hermes("pause", "--fleet", "--reason", "everyone", check=0)
    assert (profile_hermes.root / "ESTOP").exists()
    assert not profile_hermes.sentinel.exists()
    assert [h["scope"] for h in status(profile_hermes)["holds"]] == ["fleet"]


def test_allow_profile_without_allow_user_is_refused(hermes):
    result = hermes("pause", "--allow-profile", "ops", check=2)
    assert "--allow-profile" in one_error_line(result)
    assert not hermes.sentinel.exists()


@pytest.mark.parametrize("ttl", ["banana", "0", "-5m", "2915000d", "999999999d", "nan", "inf", "1.5h"])
def test_bad_ttl_exits_2_arms_nothing(hermes, ttl):
    result = hermes("pause", "--ttl", ttl, check=2)
    assert repr(ttl) in one_error_line(result)
    assert not hermes.sentinel.exists()


@pytest.mark.parametrize("ttl", ["banana", "0", "-5m", "2915000d", "999999999d"])
def test_bad_ttl_exits_2_standing_hold_untouched(hermes, ttl):
    hermes("pause", "--reason", "standing", "--ttl", "45m", "--allow-user", "42", check=0)
    before = hermes.sentinel.read_bytes()
    result = hermes("pause", "--reason", "new", "--ttl", ttl, check=2)
    one_error_line(result)
    assert hermes.sentinel.read_bytes() == before


@pytest.mark.parametrize("args", [["--until", "soon"], ["--until", "2020-01-01T00:00:00Z"], ["--ttl", "1h", "--until", "2099-01-01T00:00Z"],
                                  ["--allow-user", ""], ["--bogus"], ["--ttl"]])
def test_bad_pause_input_exits_2_with_one_line(hermes, args):
    one_error_line(hermes("pause", *args, check=2))
    assert not hermes.sentinel.exists()


def test_check_exit_codes(hermes):
    hermes("check", check=0)
    hermes("pause", "--allow-user", "42", "--allow-profile", "ops", check=0)
    held = hermes("check", check=1)
    assert "held" in held.stdout
    hermes("check", "--user", "42", "--profile", "ops", check=0)
    hermes("check", "--user", "42", "--profile", "research", check=1)
    hermes("check", "--user", "7", "--profile", "ops", check=1)
    assert hermes("check", "--quiet", check=1).stdout == ""
    assert json.loads(hermes("check", "--json", check=1).stdout)["proceed"] is False


def test_gate_runs_the_command_when_free_and_passes_its_exit_code(hermes, tmp_path):
    marker = tmp_path / "ran"
    hermes("gate", "--", "sh", "-c", f"touch {marker}; exit 3", check=3)
    assert marker.exists()


def test_gate_when_held_runs_nothing_and_exits_75(hermes, tmp_path):
    hermes("pause", "--reason", "maint", check=0)
    marker = tmp_path / "ran"
    result = hermes("gate", "--", "sh", "-c", f"touch {marker}", check=75)
    assert "maint" in one_error_line(result)
    assert not marker.exists()


def test_gate_held_exit_code_is_configurable(hermes, tmp_path):
    hermes("pause", check=0)
    hermes("gate", "--held-exit", "9", "--", "true", check=9)
    for bad in ("256", "-1"):
        one_error_line(hermes("gate", "--held-exit", bad, "--", "true", check=2))


def test_gate_held_exit_zero_skips_the_command_as_success(hermes, tmp_path):
    """Issue 9 item 7: a crontab or unit that treats a held skip as success."""
    hermes("pause", check=0)
    marker = tmp_path / "ran"
    result = hermes("gate", "--held-exit", "0", "--", "sh", "-c", f"touch {marker}", check=0)
    assert not marker.exists()
    assert "held" in one_error_line(result)


def test_gate_admits_the_allowlisted_operator(hermes, tmp_path):
    hermes("pause", "--allow-user", "42", check=0)
    marker = tmp_path / "ran"
    hermes("gate", "--user", "42", "--", "sh", "-c", f"touch {marker}", check=0)
    assert marker.exists()


def test_gate_without_a_command_or_with_a_missing_one(hermes):
    one_error_line(hermes("gate", check=2))
    assert "not found" in one_error_line(hermes("gate", "--", "no-such-command-xyz", check=127))


def test_resume_releases_and_reports(hermes):
    hermes("pause", "--reason", "maint", check=0)
    result = hermes("resume", check=0)
    assert "resumed" in result.stdout
    assert not hermes.sentinel.exists()
    assert "no hold" in hermes("resume", check=0).stdout


def test_resume_generation_only_releases_that_generation(hermes):
    hermes("pause", check=0)
    generation = status(hermes)["holds"][0]["generation"]
    result = hermes("resume", "--generation", "not-" + generation, check=1)
    assert "not the current" in result.stderr
    assert hermes.sentinel.exists()
    hermes("resume", "--generation", generation, check=0)
    assert not hermes.sentinel.exists()


def test_resume_from_a_profile_names_the_fleet_hold_that_remains(profile_hermes):
    profile_hermes("pause", "--fleet", check=0)
    profile_hermes("pause", check=0)
    out = profile_hermes("resume", check=0).stdout
    assert "still held by fleet" in out
    profile_hermes("resume", "--fleet", check=0)
    assert status(profile_hermes)["engaged"] is False


def test_history_lists_every_write(hermes):
    hermes("pause", "--reason", "a", check=0)
    hermes("pause", "--reason", "b", check=0)
    hermes("resume", check=0)
    events = json.loads(hermes("history", "--json", check=0).stdout)
    assert [e["event"] for e in events] == ["engage", "rearm", "release"]
    assert {"time", "event", "location", "generation", "actor", "reason", "deadline"} <= set(events[0])
    assert "rearm" in hermes("history", check=0).stdout


def test_history_since_shows_only_what_follows_it_and_refuses_anything_else(hermes):
    hermes("pause", "--reason", "a", check=0)
    hermes("resume", check=0)
    assert json.loads(hermes("history", "--json", "--since", "2999-01-01T00:00:00Z", check=0).stdout) == []
    assert [e["event"] for e in json.loads(hermes("history", "--json", "--since", "1h", check=0).stdout)] == [
        "engage", "release"]
    refused = hermes("history", "--since", "yesterday", check=2)
    assert refused.stderr.strip().count("\n") == 0 and "--since 'yesterday'" in refused.stderr


def test_console_script_is_the_same_app(hermes):
    script = shutil.which("hermes")
    if script is None:
        pytest.fail("the `hermes` console script is not installed (pip install -e .)")
    result = subprocess.run([script, "status", "--json"], capture_output=True, text=True, env=hermes.env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["engaged"] is False
