"""A consumer in another process that waits instead of polling: `python pg_waiter.py URL ROOT [N]`.

Opens its own `PostgresStore` (so its own listener connection, as every host of a fleet has),
full re-reads only hourly (so only LISTEN/NOTIFY delivers a change quickly), and blocks on the
listener's version counter (`wait_version` below: the condition the listener thread notifies
when it installed changed rows) instead of reading every 0.5 ms as `pg_watcher.py` does.
A hundred of those pollers would saturate two cores and measure the polling, not the store; a
hundred of these cost nothing while nothing changes. After each wake-up it reads the fleet
location and prints one JSON line per change of what it reads:
`{"t": <CLOCK_MONOTONIC seconds>, "pid": ..., "listener": 0, "state": ..., "generation": ...}`,
the first one once it has connected, each with one `write` (shorter than PIPE_BUF: several
waiters may share one pipe without their lines interleaving). Exits when its stdin closes.

With N > 1 it opens N stores that share nothing (`share=False`: N listeners, N connections)
and waits on each from its own thread, its lines numbered by `listener`: N hosts' connections
in one process, for when a machine cannot run a process per host.
Used by `bench/postgres.py` (a hundred hosts).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from hermes_estop.model.homes import Layout
from hermes_estop.stores.pg_cache import Listener
from hermes_estop.stores.postgresql import PostgresStore


def wait_version(listener: Listener, after: int, timeout: float) -> int:
    """Block until `listener.version` moves past `after` (or `timeout` seconds); returns it. The
    listener thread notifies its condition whenever it installs changed rows."""
    deadline = time.monotonic() + timeout
    with listener._cond:
        while listener.version <= after:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or listener._stopping:
                break
            listener._cond.wait(remaining)
        return listener.version


def watch(store: PostgresStore, number: int, root: Path, stop: threading.Event) -> None:
    location = Layout(home=root, root=root).fleet
    clock = store.default_clock()
    listener = store.listener
    last = None
    while not stop.is_set():
        # the version is taken BEFORE the read: a change installed after it, even before the
        # wait begins, ends the wait at once (it waits only while the version is still this one)
        version = listener.version
        reading = store.read((location,), clock())[0]
        seen = (reading.state.value, reading.hold.generation if reading.hold else None)
        if seen != last:
            last = seen
            line = json.dumps({"t": time.monotonic(), "pid": os.getpid(), "listener": number, "state": seen[0],
                               "generation": seen[1], "problem": reading.problem})
            os.write(1, (line + "\n").encode())  # one write: whole lines even where waiters share a pipe
        wait_version(listener, version, 0.5)


def main() -> int:
    url, root = sys.argv[1], Path(sys.argv[2])
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    stores = [PostgresStore(url, root=root, refresh=3600.0, share=count == 1) for _ in range(count)]
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    for store in stores:
        store.sync(10)
    others = [threading.Thread(target=watch, args=(store, number, root, stop), daemon=True)
              for number, store in enumerate(stores) if number]
    for thread in others:
        thread.start()
    watch(stores[0], 0, root, stop)
    for thread in others:
        thread.join(5)
    for store in stores:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
