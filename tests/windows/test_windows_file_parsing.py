"""`windows.toml` parsing (issue 12 item 4): validation pauses the cyclic garbage collector for
speed, and must hand it back exactly as it found it, whatever the file holds; reading the file
never loads the editing library (tomlkit), only `add`/`remove` do."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from hermes_estop.windows.model import InvalidWindow, Window
from hermes_estop.windows.windows_file import WindowsFile

GOOD = b'[[windows]]\nname = "nightly"\ncron = "0 2 * * *"\nduration = "1h"\n'
BAD = [b"not = [toml", b'[[windows]]\nname = "x"\ncron = "0 2 * * *"\nduration = "-1h"\n', b"\xff\xfe", b"windows = 3\n"]


@pytest.fixture
def collector():
    was = gc.isenabled()
    yield
    gc.enable() if was else gc.disable()


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("raw", [GOOD, *BAD])
def test_parsing_leaves_the_garbage_collector_as_it_found_it(tmp_path, collector, enabled, raw):
    gc.enable() if enabled else gc.disable()
    try:
        WindowsFile(tmp_path).parse(raw)
    except InvalidWindow:
        assert raw in BAD
    assert gc.isenabled() is enabled


def test_parsing_runs_with_the_collector_paused(tmp_path, collector, monkeypatch):
    seen = []
    real = Window.parse

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(Window, "parse", spy)
    gc.enable()
    assert [w.name for w in WindowsFile(tmp_path).parse(GOOD)] == ["nightly"]
    assert seen == [False] and gc.isenabled()


EDIT_PROBE = """
import sys
from pathlib import Path
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile
windows_file = WindowsFile(Path(sys.argv[1]))
windows_file.load()
print("tomlkit" in sys.modules)
windows_file.add(Window.parse({"name": "second", "cron": "0 3 * * *", "duration": "1h"}))
print("tomlkit" in sys.modules)
"""


def test_reading_the_file_loads_no_tomlkit_and_an_edit_does(tmp_path):
    (tmp_path / "windows.toml").write_bytes(GOOD)
    done = subprocess.run([sys.executable, "-c", EDIT_PROBE, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
    assert [w.name for w in WindowsFile(tmp_path).load()] == ["nightly", "second"]
