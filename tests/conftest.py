"""Fixtures every test package shares: a fake clock and temporary fleet homes."""

from __future__ import annotations

import compileall
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import hermes_estop
from hermes_estop.model.homes import Layout

if TYPE_CHECKING:
    from hermes_estop.windows.schedule import Schedule

EPOCH = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the package's bytecode once, before the suite starts a thousand `hermes`
    processes: in a clean clone under `PYTHONDONTWRITEBYTECODE=1` (no `.pyc` is ever written)
    each of them would otherwise compile every module it imports again, about a third of a
    short command's CPU (bench/core.py's `fresh_bytecode`, for the same reason). A `.pyc` is
    used only while its source is unchanged (its recorded mtime and size), so a stale one costs
    what a missing one does and is never run."""
    compileall.compile_dir(os.path.dirname(hermes_estop.__file__), quiet=1)


class FakeClock:
    """An injectable clock: returns `now` until told to move."""

    def __init__(self, start: datetime = EPOCH) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        self.now = self.now + (delta if delta is not None else timedelta(**kwargs))
        return self.now

    def set(self, when: datetime) -> datetime:
        self.now = when
        return self.now


@pytest.fixture(autouse=True)
def estop_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The per-user cache directory (`windows.kept_files.cache_dir`: where a schedule goes when the
    fleet root is not private) of the test's own, for it and the processes it starts: no test
    reads what another, or the user running the suite, left there."""
    where = tmp_path_factory.mktemp("estop-cache")
    monkeypatch.setenv("HERMES_ESTOP_CACHE", str(where))
    return where


def pin_zone(name: str | None) -> None:
    """This process's (and its children's) local zone: `TZ`, read again by the C library."""
    if name is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = name
    time.tzset()


@pytest.fixture(autouse=True)
def local_zone_utc() -> Iterator[None]:
    """Human-facing times are shown in the local zone (issue 38): every test reads them in UTC
    unless it pins another zone (`berlin`), whatever zone the machine running the suite is in."""
    before = os.environ.get("TZ")
    pin_zone("UTC")
    yield
    pin_zone(before)


@pytest.fixture
def zone_pinner() -> Callable[[str | None], None]:
    """`pin_zone`, for a test that pins a zone of its own (the autouse fixture restores it)."""
    return pin_zone


@pytest.fixture
def kept_schedule() -> Callable[[Path, bytes, datetime], Schedule | None]:
    """The schedule kept for the windows file's bytes `raw` that a command would take at `now`
    (a read, never a build): sealed, of these bytes and feeds, answering now."""
    from hermes_estop.windows import kept_files, schedule  # only the tests that ask import windows

    def read(windows_path: Path, raw: bytes, now: datetime) -> Schedule | None:
        path = kept_files.kept_path(windows_path, ".schedule")
        found = schedule._kept(path, windows_path) if path is not None else None
        if found is None or found.digest != hashlib.sha256(raw).hexdigest() or not found.answers(now) \
                or not schedule._fed_as_now(found, windows_path):  # `answers`: less than `HORIZON` old
            return None
        return found
    return read


@pytest.fixture
def berlin() -> str:
    """A local zone an hour ahead of UTC in winter: `TZ=Europe/Berlin` for the test and its children."""
    pin_zone("Europe/Berlin")
    return "Europe/Berlin"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fleet_root(tmp_path: Path) -> Path:
    root = tmp_path / "fleet"
    root.mkdir()
    return root


@pytest.fixture
def root_layout(fleet_root: Path) -> Layout:
    """A process whose home is the fleet root."""
    return Layout(home=fleet_root, root=fleet_root)


@pytest.fixture
def profile_layout(fleet_root: Path) -> Layout:
    """A process serving profile `ops` of the fleet."""
    return Layout(home=fleet_root, root=fleet_root).for_profile("ops")
