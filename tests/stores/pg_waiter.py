"""A consumer in another process that waits instead of polling: `python pg_waiter.py URL ROOT`.

Opens its own `PostgresStore` (so its own listener connection, as every host of a fleet has),
full re-reads only hourly (so only LISTEN/NOTIFY delivers a change quickly), and blocks on the
listener's version counter (`Listener.wait_version`: a condition the listener thread notifies
when a re-read installed changed rows) instead of reading every 0.5 ms as `pg_watcher.py` does.
A hundred of those pollers would saturate two cores and measure the polling, not the store; a
hundred of these cost nothing while nothing changes. After each wake-up it reads the fleet
location and prints one JSON line per change of what it reads:
`{"t": <CLOCK_MONOTONIC seconds>, "pid": ..., "state": ..., "generation": ...}`, the first one
once it has connected, each with one `write` (shorter than PIPE_BUF: several waiters may share
one pipe without their lines interleaving). Exits when its stdin closes. Used by `bench/postgres.py` (a hundred hosts).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from hermes_estop.homes import Layout
from hermes_estop.stores.postgresql import PostgresStore


def main() -> int:
    url, root = sys.argv[1], Path(sys.argv[2])
    store = PostgresStore(url, root=root, refresh=3600.0)
    location = Layout(home=root, root=root).fleet
    clock = store.default_clock()
    listener = store.listener
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    store.sync(10)
    last = None
    while not stop.is_set():
        # the version is taken BEFORE the read: a change installed after it, even before the
        # wait begins, ends the wait at once (it waits only while the version is still this one)
        version = listener.version
        reading = store.read((location,), clock())[0]
        seen = (reading.state.value, reading.hold.generation if reading.hold else None)
        if seen != last:
            last = seen
            line = json.dumps({"t": time.monotonic(), "pid": os.getpid(), "state": seen[0], "generation": seen[1],
                               "problem": reading.problem})
            os.write(1, (line + "\n").encode())  # one write: whole lines even where waiters share a pipe
        listener.wait_version(version, 0.5)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
