"""A consumer in another process: `python pg_watcher.py URL ROOT [REFRESH]`.

Opens its own `PostgresStore` on URL (full re-reads only every REFRESH seconds, default an hour,
so nothing but LISTEN/NOTIFY can deliver a change quickly), reads the fleet location as fast as
a busy consumer would (every 0.5 ms), and prints one JSON line per change of what it reads:
`{"t": <CLOCK_MONOTONIC seconds>, "state": ..., "generation": ...}`, the first one once it has
connected. Exits when its stdin closes. Used by the propagation test and `bench/pg_propagation.py`.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

from hermes_estop.model.homes import Layout
from hermes_estop.stores.postgresql import PostgresStore


def main() -> int:
    url, root = sys.argv[1], Path(sys.argv[2])
    refresh = float(sys.argv[3]) if len(sys.argv) > 3 else 3600.0
    store = PostgresStore(url, root=root, refresh=refresh)
    location = Layout(home=root, root=root).fleet
    clock = store.default_clock()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    store.sync(10)
    last = None
    while not stop.is_set():
        reading = store.read((location,), clock())[0]
        seen = (reading.state.value, reading.hold.generation if reading.hold else None)
        if seen != last:
            last = seen
            print(json.dumps({"t": time.monotonic(), "state": seen[0], "generation": seen[1],
                              "problem": reading.problem}), flush=True)
        time.sleep(0.0005)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
