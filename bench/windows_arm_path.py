"""How many of the package's modules one window arming in `hermes serve --once` goes through
(issue 45: 374 calls over 31 modules on ad4dd3f), and how large windows/ is.

The figure is a count, not a time: a fleet of its own (a temporary directory), one window
(`* * * * *`, 2 minutes, UTC) covering now, then `serve_once` (what `hermes serve --once` runs
after parsing its arguments: the deadman pass, one window pass that arms the window, the
schedule kept for the next command) under a profile hook on this thread and on the threads it
starts. Counted: the calls into a Python function of a `hermes_estop` module, the distinct
such modules, those of `hermes_estop.windows`, and the returns into a module already left once
(how often the path goes back and forth between modules).

Run: `python bench/windows_arm_path.py [--json]` (a second or two).
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from hermes_estop import Estop
from hermes_estop.daemon.supervisor import serve_once
from hermes_estop.model.homes import Layout
from hermes_estop.stores import FileStore
from hermes_estop.windows.scheduler import WindowService

PACKAGE = "hermes_estop"
WINDOWS = Path(__file__).resolve().parent.parent / "src" / "hermes_estop" / "windows"
FILE = '[[windows]]\nname = "a"\ncron = "* * * * *"\nduration = "2m"\ntimezone = "UTC"\n'


class Visits:
    """The profile hook: the calls into the package, by module, and the returns into a module
    already left (a module re-entered)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.reentered = 0
        self._lock = threading.Lock()
        self._stacks: dict[int, list[str]] = {}
        self._left: dict[int, set[str]] = {}

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(PACKAGE):
            return
        me = threading.get_ident()
        with self._lock:
            stack, left = self._stacks.setdefault(me, []), self._left.setdefault(me, set())
            if event == "call":
                self.calls[module] += 1
                stack.append(module)
                return
            if stack:
                gone = stack.pop()
                if stack and stack[-1] != gone:
                    left.add(gone)
                    if stack[-1] in left:
                        self.reentered += 1


def _profiled(run: Any) -> Visits:
    """`run()` under the hook; `SystemExit` unless its report says the window was armed."""
    path = Visits()
    threading.setprofile(path.hook)
    sys.setprofile(path.hook)
    try:
        report = run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    if not report.events or report.errors:
        raise SystemExit(f"the window was not armed: {report.errors or 'no event'}")
    return path


def _fleet(tmp: str) -> Estop:
    root = Path(tmp)
    (root / "windows.toml").write_text(FILE)
    return Estop(layout=Layout(home=root, root=root), store=FileStore(root))


def _figures(path: Visits) -> dict[str, Any]:
    modules = sorted(path.calls)
    windows = [m for m in modules if m.startswith(f"{PACKAGE}.windows")]
    return {"modules": len(modules), "windows_modules": len(windows), "calls": sum(path.calls.values()),
            "windows_calls": sum(path.calls[m] for m in windows), "reentered": path.reentered,
            "by_module": dict(path.calls)}


def measure() -> dict[str, Any]:
    """`whole`: all of `serve_once` (the schedule's build for the next command included: a week
    of a minutely window's starts); `pass`: the window pass that arms it (`settle`) alone."""
    with tempfile.TemporaryDirectory() as tmp:
        whole = _profiled(lambda: serve_once(_fleet(tmp), 1.0, dry_run=False)[0])
    with tempfile.TemporaryDirectory() as tmp:
        service = WindowService(_fleet(tmp).fleet, poll_interval=1.0)
        service.check_file()
        arming = _profiled(service.settle)
    lines = sum(len(p.read_text().splitlines()) for p in WINDOWS.rglob("*.py"))
    return {"whole": _figures(whole), "pass": _figures(arming), "windows_lines": lines,
            "windows_files": len(list(WINDOWS.rglob("*.py")))}


def main() -> None:
    figures = measure()
    if "--json" in sys.argv[1:]:
        print(json.dumps(figures, indent=2, sort_keys=True))
        return
    for name, what in (("pass", "the pass arming one window"), ("whole", "all of serve --once")):
        f = figures[name]
        print(f"{what}: {f['calls']} calls over {f['modules']} package modules ({f['windows_calls']} calls over "
              f"{f['windows_modules']} of windows/), {f['reentered']} returns into a module already left")
    print(f"windows/: {figures['windows_files']} modules, {figures['windows_lines']} lines")


if __name__ == "__main__":
    main()
