"""`hermes check` and `hermes gate` take the framework-free path when well-formed, and answer
exactly as the Typer app does; anything else goes to the Typer app."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
from hermes_estop.cli import main
code = main(sys.argv[1:])
print("typer-loaded" if "typer" in sys.modules else "typer-not-loaded", file=sys.stderr)
sys.exit(code)
"""

APP = """
import sys
from hermes_estop.cli import main
sys.exit(main(sys.argv[1:], hot_path=False))
"""


def run(hermes, script, *args):
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=hermes.env,
                          timeout=60)


@pytest.mark.parametrize("args", [["check"], ["check", "-q"], ["check", "--user", "42", "--profile=ops", "--json"],
                                  ["--store", "file", "check"], ["gate", "--", "true"], ["gate", "--user=42", "true"]])
def test_well_formed_check_and_gate_never_load_the_cli_framework(hermes, args):
    hermes("pause", check=0)  # held: gate returns instead of exec'ing, so the probe can report
    result = run(hermes, PROBE, *args)
    assert result.returncode in (1, 75), result.stderr
    assert "typer-not-loaded" in result.stderr


@pytest.mark.parametrize("args", [["check", "--help"], ["check", "--bogus"], ["gate", "--held-exit", "x", "--", "true"],
                                  ["check", "extra"], ["status"]])
def test_anything_else_goes_to_the_typer_app(hermes, args):
    assert "typer-loaded" in run(hermes, PROBE, *args).stderr


@pytest.mark.parametrize("args", [
    ["check"], ["check", "-q"], ["check", "--json"], ["check", "--user", "42"], ["check", "--user", "7", "--profile", "ops"],
    ["check", "--user", "42", "--profile", "ops", "--json"], ["gate", "--", "true"], ["gate", "--user", "42", "--", "true"],
    ["gate", "--held-exit", "9", "--", "true"], ["gate", "--held-exit", "300", "--", "true"], ["gate", "--", "no-such-cmd-xyz"],
])
@pytest.mark.parametrize("held", [False, True])
def test_the_hot_path_answers_as_the_typer_app_does(hermes, args, held):
    if held:
        hermes("pause", "--reason", "maint", "--allow-user", "42", "--allow-profile", "ops", check=0)
    hot, app = run(hermes, PROBE, *args), run(hermes, APP, *args)
    assert (hot.returncode, hot.stdout) == (app.returncode, app.stdout)
    assert hot.stderr.replace("typer-not-loaded\n", "") == app.stderr
