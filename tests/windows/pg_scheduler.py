"""A window scheduler process on PostgreSQL: `python pg_scheduler.py URL ROOT POLL`.

What `hermes serve` runs, wired for a fleet on PostgreSQL: `WindowService` on the store's clock
with the PostgreSQL ledger, gated by the store's leader election (`poll` seconds between
attempts, also the reconcile interval). Prints one JSON line per change of leadership,
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
from hermes_estop.stores.postgresql import PostgresStore
from hermes_estop.windows.pg_ledger import PostgresLedger
from hermes_estop.windows.service import WindowService


def main() -> int:
    url, root, poll = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    store = PostgresStore(url, root=root)
    estop = Estop(root=root, home=root, store=store, actor=f"scheduler-{os.getpid()}")
    leadership = store.leadership("windows", poll=poll)
    service = WindowService(estop, ledger=PostgresLedger(store), is_leader=leadership.is_leader, poll_interval=poll)
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
