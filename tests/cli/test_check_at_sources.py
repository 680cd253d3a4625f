"""Issue 19: a hold source that cannot be loaded makes `hermes check --at` exit 2 naming it,
never "free"; the windows source is found whether or not the package's entry points are
installed (a checkout run with `PYTHONPATH=src`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import inprocess_cli
from hermes_estop.process import forecast
from hermes_estop.model.errors import EstopError
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile
from inprocess_cli import run

fleet = inprocess_cli.fleet  # the fixture: a fleet root as this process's home


@pytest.fixture
def covering_window(fleet):
    """A window covering the next hour, at the fleet scope."""
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=5)
    WindowsFile(fleet).save([Window.parse({"name": "nightly", "at": start.isoformat(), "duration": "1h",
                                           "reason": "db"})])
    return start


def test_check_at_exits_2_naming_a_source_that_cannot_be_loaded(capsys, covering_window, monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])
    monkeypatch.setattr(forecast, "BUILTIN_SOURCES", {"windows": "hermes_estop.windows.no_such_module:WindowSource"})
    code, out, err = run(capsys, "check", "--at", (covering_window + timedelta(minutes=1)).isoformat())
    assert code == 2
    assert "cannot load the hold source 'windows'" in err and "no_such_module" in err
    assert "proceed" not in out


def test_the_windows_source_is_found_without_installed_entry_points(capsys, covering_window, monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])
    code, out, _ = run(capsys, "check", "--at", (covering_window + timedelta(minutes=1)).isoformat())
    assert code == 1
    assert "window:nightly at fleet" in out


def test_a_source_without_planned_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(forecast, "BUILTIN_SOURCES", {"odd": "hermes_estop.model.errors:EstopError"})
    with pytest.raises(EstopError, match="'odd'"):
        forecast.discover_sources()
