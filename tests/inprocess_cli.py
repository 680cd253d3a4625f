"""`hermes` run in-process through `hermes_estop.cli.main` (the console-script entry), for tests
that make many CLI calls: the `fleet` fixture (a fleet root as this process's home, no store
override) and `run`. Import both into a test module: `from inprocess_cli import fleet, run`.
`completed` is `subprocess.run([hermes, ...], env=env, capture_output=True, text=True)` without
the process, for a test whose subject is the command's output, exit code and files."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

import hermes_estop
from hermes_estop.cli import main, served
from hermes_estop.process import fleet_config

__all__ = ["PROCESS_COMMANDS", "completed", "fleet", "run"]


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


#: the commands `completed` still runs as a process: `gate` execs its command (in this process it
#: would replace the test run), `run` forwards signals to its child, `serve` is a daemon
PROCESS_COMMANDS = frozenset({"gate", "run", "serve"})


def completed(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`hermes ARGS` in this process as a process with environment `env` would run it (one of
    `PROCESS_COMMANDS` among the words: in a process of its own, as before): `os.environ`
    is `env` (and the zone its TZ names) for the call, stdin is empty, logging has no handler but
    its last resort (a warning reaches stderr, as in a fresh process; not one from a thread that
    was running before the call), what the command left open is closed, the per-process state a
    fresh process starts without (the store and server the command line chose, the configuration
    keys already warned about) is empty; stdout and stderr are decoded as `text=True` decodes a
    pipe. Everything is put back afterwards."""
    if not PROCESS_COMMANDS.isdisjoint(args):
        return subprocess.run([sys.executable, "-m", "hermes_estop", *args], env=dict(env), capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)
    environ, handlers = dict(os.environ), logging.root.handlers[:]
    before = _resources()
    state = dict(served._CHOSEN), fleet_config._CHOSEN[:], set(fleet_config._warned)
    served._CHOSEN.clear()
    fleet_config._CHOSEN.clear()
    fleet_config._warned.clear()
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    stdin = sys.stdin
    os.environ.clear()
    os.environ.update(env)
    time.tzset()
    logging.root.handlers = []
    last_resort = logging.lastResort
    logging.lastResort = _last_resort()
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
        logging.lastResort = last_resort
        os.environ.clear()
        os.environ.update(environ)
        time.tzset()
        served._CHOSEN.clear()
        served._CHOSEN.update(state[0])
        fleet_config._CHOSEN[:] = state[1]
        fleet_config._warned.clear()
        fleet_config._warned.update(state[2])
        _end_since(before)
    return subprocess.CompletedProcess([sys.executable, "-m", "hermes_estop", *args], code, _text(out.getvalue()),
                                       _text(err.getvalue()))


def _last_resort() -> logging.Handler:
    """Logging's last resort (WARNING and up, the message alone, to the current stderr) for the
    records of this thread and the threads it starts: a thread an earlier test left running (a
    store's listener) has no place in this command's stderr, as it would not in a fresh process."""
    before = {thread.ident for thread in threading.enumerate()} - {threading.get_ident()}
    handler = logging._StderrHandler(logging.WARNING)  # type: ignore[attr-defined]
    handler.addFilter(lambda record: record.thread not in before)
    return handler


def _resources() -> tuple[set[int], set[int]]:
    """The cached `Estop`s and the PostgreSQL backends (each with its listener thread and
    sessions) this process holds now, by id."""
    backends = sys.modules.get("hermes_estop.stores.pg_backend")
    return ({id(e) for e in hermes_estop._instances.values()},
            {id(b) for b in backends._live} if backends is not None else set())


def _end_since(before: tuple[set[int], set[int]]) -> None:
    """End what the command left that its process's exit would have ended: the `Estop`s it
    cached and the PostgreSQL backends it opened (a listener thread left behind logs into a later
    test's command when its schema is dropped)."""
    for key, estop in list(hermes_estop._instances.items()):
        if id(estop) not in before[0]:
            del hermes_estop._instances[key]
            estop.close()
    backends = sys.modules.get("hermes_estop.stores.pg_backend")
    if backends is None:
        return
    for backend in list(backends._live):
        if id(backend) not in before[1]:
            for key, shared in list(backends._shared.items()):
                if shared is backend:
                    del backends._shared[key]
            backend.close()


def _text(data: bytes) -> str:
    """`data` as `subprocess.run(..., text=True)` reads a pipe: UTF-8, universal newlines."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
