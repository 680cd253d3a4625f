"""`hermes windows validate` names every problem of every window, unknown keys first (a typo'd
key explains the field it left missing), in text and in `--json` (on stdout), exit 2."""

from __future__ import annotations

import json

import pytest

import inprocess_cli
from inprocess_cli import run

fleet = inprocess_cli.fleet

TYPO = """
[[windows]]
name = "nightly"
cron = "0 3 * * *"
duraton = "1h"

[[windows]]
name = "once"
at = "soon"
duration = "1h"
"""


def test_validate_names_the_typod_key_first_then_what_it_left_missing(fleet, capsys):
    (fleet / "windows.toml").write_text(TYPO)
    code, out, err = run(capsys, "windows", "validate")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 2
    assert "window 'nightly': field 'duraton': unknown field (did you mean 'duration'?); field 'duration': required" in lines[0]
    assert "window 'once': field 'at'" in lines[1]


def test_validate_json_prints_every_problem_on_stdout(fleet, capsys):
    (fleet / "windows.toml").write_text(TYPO)
    code, out, _ = run(capsys, "windows", "validate", "--json")
    assert code == 2
    data = json.loads(out)
    assert data["valid"] is False
    nightly, once = data["errors"]
    assert [p["field"] for p in nightly["problems"]] == ["duraton", "duration"]
    assert [p["field"] for p in once["problems"]] == ["at"]


@pytest.mark.parametrize("body", ["x =", "[[windows]]\nname = 'a'\nbogus = 1\n"])
def test_validate_json_on_a_broken_file_still_answers_on_stdout(fleet, capsys, body):
    (fleet / "windows.toml").write_text(body)
    code, out, _ = run(capsys, "windows", "validate", "--json")
    assert code == 2 and json.loads(out)["valid"] is False


def test_validate_json_on_a_good_file(fleet, capsys):
    (fleet / "windows.toml").write_text('[[windows]]\nname = "a"\ncron = "0 3 * * *"\nduration = "1h"\n')
    code, out, _ = run(capsys, "windows", "validate", "--json")
    assert code == 0 and json.loads(out)["valid"] is True
