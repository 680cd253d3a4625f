"""The `hermes` subprocess runner the CLI tests share (a module of its own, not conftest, so a
test module can import it whatever other conftest files the session has loaded)."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from hermes_estop import Estop
from hermes_estop.cli import main, served
from hermes_estop.process import fleet_config

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
    """`Hermes` run in this process through `hermes_estop.cli.main` (the console-script entry),
    for tests whose subject is a command's output, exit code and files, not the process: the call
    sees exactly the environment the process would (`os.environ` is `env` for its length), an
    empty stdin, no logging handler but logging's last resort (as in a fresh process, a warning
    reaches stderr), and gets stdout and stderr decoded as `text=True` decodes a pipe. A command
    named in `PROCESS_COMMANDS` still starts a process: `gate` execs its command, `run` forwards
    signals to its child, `serve` is a daemon."""

    PROCESS_COMMANDS = frozenset({"gate", "run", "serve"})

    def __call__(self, *args: str, check: int | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        if not self.PROCESS_COMMANDS.isdisjoint(args):
            return super().__call__(*args, check=check, timeout=timeout)
        environ, handlers = dict(os.environ), logging.root.handlers[:]
        # the per-process state a fresh process starts without: the server and the store the
        # command line chose, the configuration keys already warned about
        state = dict(served._CHOSEN), fleet_config._CHOSEN[:], set(fleet_config._warned)
        served._CHOSEN.clear()
        fleet_config._CHOSEN.clear()
        fleet_config._warned.clear()
        out, err = io.BytesIO(), io.BytesIO()
        stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
        stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
        stdin = sys.stdin
        os.environ.clear()
        os.environ.update(self.env)
        time.tzset()  # the zone the process would read from `env`'s TZ
        logging.root.handlers = []
        try:
            sys.stdin = io.StringIO("")
            with redirect_stdout(stdout), redirect_stderr(stderr):
                try:
                    code = main(list(args))
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 1
                stdout.flush()
                stderr.flush()
        finally:
            sys.stdin = stdin
            logging.root.handlers = handlers
            os.environ.clear()
            os.environ.update(environ)
            time.tzset()
            served._CHOSEN.clear()
            served._CHOSEN.update(state[0])
            fleet_config._CHOSEN[:] = state[1]
            fleet_config._warned.clear()
            fleet_config._warned.update(state[2])
        result = subprocess.CompletedProcess([sys.executable, "-m", "hermes_estop", *args], code,
                                             _text(out.getvalue()), _text(err.getvalue()))
        if check is not None:
            assert result.returncode == check, (result.returncode, result.stdout, result.stderr)
        return result


def _text(data: bytes) -> str:
    """`data` as `subprocess.run(..., text=True)` reads a pipe: UTF-8, universal newlines."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
