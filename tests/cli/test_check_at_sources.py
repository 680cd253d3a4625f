"""Issue 19: a hold source that cannot be loaded makes `hermes check --at` exit 2 naming it,
never "free"; the windows source is found whether or not the package's entry points are
installed (a checkout run with `PYTHONPATH=src`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import inprocess_cli
from hermes_estop.model.errors import EstopError
from hermes_estop.process import forecast
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


# Issue 46 item 5: part of the windows code that cannot be imported (a broken install, a library
# missing) was `internal error: ImportError` (exit 70); it is exit 2 naming what is missing and how
# to install it, and never "free". A real process whose import of MODULE fails.
@pytest.mark.parametrize(("module", "fix"), [
    ("croniter", "pip install croniter"),
    ("pydantic", "pip install pydantic"),
    ("hermes_estop.windows.occurrences", "reinstall hermes-estop"),
    ("hermes_estop.windows.forecast", "reinstall hermes-estop"),
])
def test_check_at_with_windows_code_missing_is_exit_2_naming_it_never_free(fleet, covering_window, module, fix):
    import os
    import subprocess
    import sys

    program = (f"import sys; sys.modules[{module!r}] = None\n"  # what `import MODULE` then raises: ImportError
               "from hermes_estop.cli import main; sys.exit(main(sys.argv[1:]))")
    at = (covering_window + timedelta(minutes=1)).isoformat()
    result = subprocess.run([sys.executable, "-c", program, "check", "--at", at], capture_output=True, text=True,
                            env={**os.environ, "HERMES_HOME": str(fleet)}, timeout=120, check=False)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert f"'{module}'" in line and fix in line and "internal error" not in line, line
    assert "proceed" not in result.stdout and "free" not in result.stdout


class NeedsAMissingLibrary:
    """A hold source whose library is imported only when it is asked (as the windows' are)."""

    def planned(self, estop, start, end):
        import hermes_estop_no_such_library  # type: ignore[import-not-found]  # noqa: F401

        return []


def test_a_source_that_cannot_import_what_it_needs_when_asked_is_refused_naming_it(fleet):
    from hermes_estop import Estop

    now = datetime.now(UTC)
    with pytest.raises(EstopError, match=r"hermes_estop_no_such_library.*pip install hermes-estop-no-such-library"):
        Estop(root=fleet, home=fleet).forecast(now, now + timedelta(hours=1), sources=[NeedsAMissingLibrary()])
