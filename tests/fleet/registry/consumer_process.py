"""One consumer as its own process, for the registry tests and bench/acks.py:
`python consumer_process.py KIND INTERVAL` with KIND cron, kanban, gateway, apscheduler or loop
(a user loop on the library's consumer API). Runs until SIGTERM; the fleet, home and store come
from the environment (HERMES_ROOT, HERMES_HOME, HERMES_ESTOP_STORE)."""

from __future__ import annotations

import signal
import sys
import threading

from hermes_estop.process.estop import Estop


def main(kind: str, interval: float) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    estop = Estop()
    if kind == "cron":
        from hermes_estop.consumers.loops import CronService

        CronService(estop, interval=interval).run(stop)
    elif kind == "kanban":
        from hermes_estop.consumers.loops import KanbanService

        KanbanService(estop, interval=interval).run(stop)
    elif kind == "gateway":
        from hermes_estop.consumers.gateway import Gateway
        from hermes_estop.consumers.loops import GatewayService

        GatewayService(Gateway(estop)).run(stop)
    elif kind == "apscheduler":
        from apscheduler.schedulers.background import BackgroundScheduler

        from hermes_estop.consumers.scheduling import gate_scheduler

        scheduler = BackgroundScheduler()
        scheduler.add_job(lambda: None, "interval", seconds=interval)
        gate_scheduler(scheduler, estop)
        scheduler.start()
        stop.wait()
        scheduler.shutdown()
    elif kind == "loop":
        from hermes_estop.consumers.reporter import ConsumerReporter

        with ConsumerReporter(estop, "loop", interval=interval) as reporter:
            while not stop.wait(interval):
                estop.gate()
                reporter.report()
    else:
        raise SystemExit(f"unknown consumer kind {kind!r}")
    estop.close()


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
