"""The modules one window arming goes through (issue 45 item 1: at most half of the 34 that
`bench/windows_arm_path.py` counted on ad4dd3f). The pass that arms a window visits the
scheduler, the compiled schedule, the plan, the ledger and the window model of windows/, and
Fleet's one write path (`tests/fleet/test_write_path.py`), nothing else: a new hop (a module
split off, the file's parser on a pass whose schedule is held) shows here."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from tests.fleet.test_write_path import WRITE_PATH

from hermes_estop import Estop
from hermes_estop.model.homes import Layout
from hermes_estop.stores import FileStore
from hermes_estop.windows.scheduler import WindowService

ARM_PATH = WRITE_PATH | {f"hermes_estop.windows.{name}" for name in ("scheduler", "schedule", "plan", "ledger", "model")}
FILE = '[[windows]]\nname = "a"\ncron = "* * * * *"\nduration = "2m"\ntimezone = "UTC"\n'


def _service(root: Path) -> WindowService:
    root.mkdir()
    (root / "windows.toml").write_text(FILE)
    estop = Estop(layout=Layout(home=root, root=root), store=FileStore(root))
    service = WindowService(estop.fleet, poll_interval=1.0)
    service.check_file()  # the schedule compiled and held, as by the pass before
    return service


def test_arming_a_window_visits_at_most_half_the_modules_it_did(tmp_path: Path) -> None:
    _service(tmp_path / "warm").settle()  # a module's first import runs its own code, not the pass's
    service = _service(tmp_path / "fleet")
    modules: set[str] = set()

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and (name := frame.f_globals.get("__name__", "")).startswith("hermes_estop"):
            modules.add(name)

    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        report = service.settle()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert [e.kind for e in report.events] == ["arm"] and report.ok, report.errors
    assert sorted(modules - ARM_PATH) == []
    assert len(modules) <= 34 // 2
