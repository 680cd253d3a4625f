"""The dispatcher process of the time-to-stop benchmark (`bench/consumers.py`).

`python bench/stop_dispatcher.py ROOT INTERVAL`: the real `KanbanService` (the `Dispatcher`
paced by its `LoopService` loop) on the board of fleet ROOT, every INTERVAL seconds, through the
fleet's own `Estop`. One JSON line per pass (`t0`, `t1`: CLOCK_MONOTONIC, system-wide on Linux,
so comparable with the parent's) and per spawn (`t`, just before the worker is started). Stops
when stdin closes.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from hermes_estop import Estop
from hermes_estop.consumers.loops import KanbanService
from hermes_estop.consumers.worker import WorkerPool

_out = threading.Lock()


def emit(**event: Any) -> None:
    with _out:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


class SpawnLog(WorkerPool):
    def start(self, key, command, **kwargs):  # type: ignore[no-untyped-def]
        emit(kind="spawn", t=time.monotonic(), card=key)
        return super().start(key, command, **kwargs)


class TimedService(KanbanService):
    def tick(self, now=None):  # type: ignore[no-untyped-def]
        t0 = time.monotonic()
        report = super().tick(now)
        emit(kind="pass", t0=t0, t1=time.monotonic(), spawned=len(report.spawned) if report else 0)
        return report


def main() -> None:
    root, interval = Path(sys.argv[1]), float(sys.argv[2])
    estop = Estop(home=root, root=root)
    service = TimedService(estop, interval=interval, max_workers=4, drain_timeout=5.0)
    service.dispatcher.pool = SpawnLog(estop.clock)
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    emit(kind="ready")
    sys.stdin.read()
    stop.set()
    thread.join(30)


if __name__ == "__main__":
    main()
