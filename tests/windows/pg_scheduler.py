"""A window scheduler process on PostgreSQL: `python pg_scheduler.py URL ROOT POLL`.

The services `hermes serve` builds (`daemon.supervisor.build_services`: on a PostgreSQL store, the
`WindowService` with the PostgreSQL ledger, gated by the store's leader election), with `poll`
seconds between election attempts and reconciliations. Prints one JSON line per change of leadership,
`{"t": <CLOCK_MONOTONIC>, "pid": ..., "leader": ...}`, the first once it has campaigned.
SIGTERM stops it cleanly (exit 0).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from hermes_estop import Estop
from hermes_estop.daemon.supervisor import build_services
from hermes_estop.stores.postgresql import PostgresStore


def main() -> int:
    url, root, poll = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    store = PostgresStore(url, root=root)
    estop = Estop(root=root, home=root, store=store, actor=f"scheduler-{os.getpid()}")
    (service,) = [s for s in build_services(estop, poll_interval=poll, leader_poll=poll) if s.name == "windows"]
    leadership = store.leadership("windows", poll=poll)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def report() -> None:
        last = None
        while not stop.is_set():
            leader = leadership.is_leader()
            if leader != last:
                last = leader
                print(json.dumps({"t": time.monotonic(), "pid": os.getpid(), "leader": leader}), flush=True)
            stop.wait(0.01)

    threading.Thread(target=report, daemon=True).start()
    service.run(stop)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
