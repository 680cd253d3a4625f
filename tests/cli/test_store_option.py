"""Issue 19: `--store` is this command line's choice, carried explicitly (config.use_store), not
written into `os.environ`; the processes the command starts are given it (`child_environment`),
so a `hermes check` inside a gated command reads the same store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import inprocess_cli
from hermes_estop.process import fleet_config as config
from inprocess_cli import run

fleet = inprocess_cli.fleet  # the fixture: a fleet root as this process's home


@pytest.fixture(autouse=True)
def forget_the_choice():
    yield
    config._CHOSEN.clear()


@pytest.mark.parametrize("command", [["status", "--json"], ["check"], ["pause", "--reason", "x"]])
def test_the_store_option_never_writes_the_environment(capsys, fleet, command):
    before = dict(os.environ)
    code, _, err = run(capsys, "--store", "file", *command)
    assert code in (0, 1), err
    assert dict(os.environ) == before
    assert config.child_environment()[config.STORE_ENV] == "file"


def test_a_gated_command_is_told_the_store_the_command_line_chose(tmp_path: Path):
    root = tmp_path / "fleet"
    root.mkdir()
    src = str(Path(config.__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(root), PYTHONPATH=src)
    script = "import os; print(os.environ.get('HERMES_ESTOP_STORE'))"
    done = subprocess.run([sys.executable, "-m", "hermes_estop", "--store", "file", "gate", "--",
                           sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "file"


def test_without_the_option_the_environment_and_estop_toml_decide(fleet, monkeypatch):
    monkeypatch.setenv(config.STORE_ENV, "file")
    assert config.child_environment()[config.STORE_ENV] == "file"
    from hermes_estop.model.homes import resolve_layout

    assert config.store_spec(resolve_layout()) == "file"
