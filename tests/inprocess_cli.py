"""`hermes` run in-process through `hermes_estop.cli.main` (the console-script entry), for tests
that make many CLI calls: the `fleet` fixture (a fleet root as this process's home, no store
override) and `run`. Import both into a test module: `from inprocess_cli import fleet, run`."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_estop.cli import main

__all__ = ["fleet", "run"]


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "fleet"
    root.mkdir()
    for name in ("HERMES_ROOT", "HERMES_ESTOP_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HERMES_HOME", str(root))
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`hermes ARGS`: (exit code, stdout, stderr)."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err
