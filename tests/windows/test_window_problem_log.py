"""The scheduler logs a problem of windows.toml once when it starts and once when it clears
(issue 20 item 3): an editor's torn saves used to log an ERROR line per read."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

BROKEN_WINDOW = ('[[windows]]\nname = "good"\ncron = "0 3 * * *"\nduration = "1h"\n\n'
                 '[[windows]]\nname = "far"\nat = 9999-12-31T23:30:00Z\nduration = "1h"\n')


def test_a_broken_file_is_logged_once_when_it_starts_and_once_when_it_clears(harness, caplog):
    start = harness.clock.now + timedelta(hours=1)
    harness.write({"name": "maint", "at": start.isoformat(), "duration": "30m"})
    harness.start()
    raw = harness.file.path.read_bytes()
    caplog.set_level(logging.DEBUG, logger="hermes_estop.windows")
    for i in range(12):  # an editor's torn saves: each fails at a different position
        harness.file.path.write_bytes(raw + b"\n" + b" " * i + b"= torn")
        harness.run_until(harness.clock.now + timedelta(seconds=1), poll=True)
        assert harness.reports[-1].errors
    harness.file.path.write_bytes(raw)
    for _ in range(3):
        harness.run_until(harness.clock.now + timedelta(seconds=1), poll=True)
    records = [r for r in caplog.records if r.name == "hermes_estop.windows"]
    assert [r.levelname for r in records if r.levelno >= logging.ERROR] == ["ERROR"]
    assert len([r for r in records if r.levelno == logging.INFO and "reads and parses again" in r.getMessage()]) == 1


def test_a_failing_window_is_logged_once_when_it_starts_and_once_when_it_clears(harness, caplog):
    harness.write({"name": "good", "cron": "0 3 * * *", "duration": "1h"})
    harness.start()
    caplog.set_level(logging.DEBUG, logger="hermes_estop.windows")
    good = harness.file.path.read_bytes()
    for i in range(5):
        harness.file.path.write_bytes(BROKEN_WINDOW.encode() + b"#" * i)
        harness.run_until(harness.clock.now + timedelta(seconds=1), poll=True)
    harness.file.path.write_bytes(good)
    harness.run_until(harness.clock.now + timedelta(seconds=1), poll=True)
    records = [r for r in caplog.records if r.name == "hermes_estop.windows"]
    assert [r.levelname for r in records if r.levelno >= logging.ERROR] == ["ERROR"]
    assert len([r for r in records if "'far' validates again" in r.getMessage()]) == 1


def serve_window_services(root):
    """The window scheduler and the window tasks exactly as `hermes serve` assembles them."""
    from hermes_estop import Estop
    from hermes_estop.daemon.supervisor import build_services
    from hermes_estop.windows.scheduler import WindowService
    from hermes_estop.windows.tasks import TaskService

    services = build_services(Estop(root=root, home=root), poll_interval=1.0)
    windows = next(s for s in services if isinstance(s, WindowService))
    tasks = next(s for s in services if isinstance(s, TaskService))
    return windows, tasks


@pytest.mark.parametrize("broken", [b"[[windows]\nname = 'torn", BROKEN_WINDOW.encode()],
                         ids=["unreadable", "a-window-fails"])
def test_a_broken_windows_file_is_one_line_when_it_starts_and_one_when_it_clears_under_serve(tmp_path, caplog, broken):
    """Issue 46 item 6: the scheduler and the window tasks each logged a broken windows.toml
    when the problem started; one problem is one line when it starts and one when it clears."""
    root = tmp_path / "fleet"
    root.mkdir()
    good = b'[[windows]]\nname = "good"\ncron = "0 3 * * *"\nduration = "1h"\n'
    (root / "windows.toml").write_bytes(good)
    windows, tasks = serve_window_services(root)
    windows.tick()
    tasks.tick()
    caplog.set_level(logging.DEBUG, logger="hermes_estop")
    for i in range(3):  # several passes of both services over the same broken file
        (root / "windows.toml").write_bytes(broken + b"\n#" + b" " * i)
        windows.tick()
        tasks.tick()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    caplog.clear()
    (root / "windows.toml").write_bytes(good)
    for _ in range(2):
        windows.tick()
        tasks.tick()
    cleared = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO
               and ("again" in r.getMessage())]
    assert len(cleared) == 1, cleared


def test_a_problem_naming_hostile_text_is_logged_escaped(harness, caplog):
    """A file's text reaches the log through a problem's message (here a calendar that cannot
    be read, named by its path): an escape sequence in it is shown, never sent to the terminal."""
    harness.write({"name": "w1", "cron": "0 3 * * *", "duration": "1h", "exclude_calendar": "h\x1bol.ics"})
    caplog.set_level(logging.DEBUG, logger="hermes_estop.windows")
    harness.start()
    harness.run_until(harness.clock.now + timedelta(seconds=1), poll=True)
    logged = [r.getMessage() for r in caplog.records if r.name == "hermes_estop.windows" and r.levelno >= logging.ERROR]
    assert logged, "the bad window was not logged"
    assert not any("\x1b" in line for line in logged), logged
    assert any("\\x1b" in line for line in logged), logged
