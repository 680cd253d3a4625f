"""The `hermes` subprocess runner the CLI tests share (a module of its own, not conftest, so a
test module can import it whatever other conftest files the session has loaded)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hermes_estop import Estop
from inprocess_cli import completed

__all__ = ["SRC", "Hermes", "InProcessHermes"]

SRC = str(Path(__file__).resolve().parents[2] / "src")


class Hermes:
    def __init__(self, home: Path, root: Path | None = None) -> None:
        self.home = home
        self.root = root or home
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
        self.env["HERMES_HOME"] = str(home)
        if root is not None:
            self.env["HERMES_ROOT"] = str(root)
        self.env["PYTHONPATH"] = SRC + os.pathsep + self.env.get("PYTHONPATH", "")

    def __call__(self, *args: str, check: int | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        result = subprocess.run([sys.executable, "-m", "hermes_estop", *args], capture_output=True, text=True,
                                env=self.env, timeout=timeout, stdin=subprocess.DEVNULL)
        if check is not None:
            assert result.returncode == check, (result.returncode, result.stdout, result.stderr)
        return result

    def estop(self) -> Estop:
        """The library's view of this home (what `hermes pause` / `resume` call), for a test's
        set-up where the CLI is not what it tests: no process started."""
        return Estop(home=self.home, root=self.root)

    @property
    def sentinel(self) -> Path:
        return self.home / "ESTOP"


class InProcessHermes(Hermes):
    """`Hermes` run in this process (`inprocess_cli.completed`: the environment the process would
    see, stdout and stderr as a pipe reads them; `gate`, `run` and `serve` still a process), for
    tests whose subject is a command's output, exit code and files, not the process."""

    def __call__(self, *args: str, check: int | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        result = completed(self.env, *args)
        if check is not None:
            assert result.returncode == check, (result.returncode, result.stdout, result.stderr)
        return result
