"""Fixtures for the consumer tests: the shared fleet root with profile homes, the shared fake
clock started at `T0`, and `Estop`s for the root and each profile, all sharing one file store."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from hermes_estop import Estop, FileStore
from hermes_estop.consumers.cron import CronTable

from .helpers import T0


@pytest.fixture
def clock(clock):
    """The shared fake clock (tests/conftest.py), started at this package's `T0`."""
    clock.set(T0)
    return clock


@pytest.fixture
def root(fleet_root: Path) -> Path:
    (fleet_root / "profiles").mkdir(exist_ok=True)
    return fleet_root


@pytest.fixture
def store(root: Path) -> FileStore:
    return FileStore(root)


@pytest.fixture
def estop_for(root: Path, clock, store: FileStore):
    """`estop_for(None)`: the fleet root's Estop; `estop_for("p1")`: profile p1's."""

    def make(profile: str | None = None, *, real_clock: bool = False) -> Estop:
        home = root / "profiles" / profile if profile else root
        home.mkdir(parents=True, exist_ok=True)
        return Estop(home=home, root=root, store=store, clock=None if real_clock else clock)

    return make


@pytest.fixture
def fleet(estop_for) -> Estop:
    return estop_for(None)


@pytest.fixture
def p1(estop_for) -> Estop:
    return estop_for("p1")


@pytest.fixture
def cli_env(root: Path, monkeypatch: pytest.MonkeyPatch):
    """Point the `hermes` CLI (run in-process through `main`) at profile p1 of the test fleet."""
    home = root / "profiles" / "p1"
    home.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HERMES_HOME", str(home))
    monkeypatch.setenv("HERMES_ROOT", str(root))
    monkeypatch.delenv("HERMES_ESTOP_STORE", raising=False)
    return home


@pytest.fixture
def subprocess_env(cli_env: Path) -> dict[str, str]:
    """The environment for a `python -m hermes_estop` child process in the test fleet."""
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture
def python() -> str:
    return sys.executable


def _appended(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except FileNotFoundError:
        return []


@pytest.fixture
def appended():
    """`appended(path)`: the words workers appended to `path` (none when none ran)."""
    return _appended


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """The file a test cron job appends to when it runs."""
    return tmp_path / "ran.log"


@pytest.fixture
def table(p1: Estop) -> CronTable:
    """Profile p1's cron job table."""
    return CronTable.of(p1)
