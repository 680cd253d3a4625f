"""Child processes for the multi-process tests: `python workers.py ROLE SPEC ROOT OUT SECONDS`.

Each role works against the store `open_store(SPEC, ROOT)` until SECONDS have passed, writes
what it did to OUT as JSON lines, and exits 0 — any exception escaping is a test failure.
"""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

from hermes_estop.model.hold import EngageRequest, HoldState
from hermes_estop.model.homes import Layout
from hermes_estop.model.timeutil import utc_now
from hermes_estop.process.estop import Estop
from hermes_estop.stores import open_store

#: A worker runs for its seconds AND until it has done this much (a loaded machine gets the same
#: race, only slower), but never past `HARD_CAP` seconds.
MIN_WRITES_OF_EACH_KIND = 25
MIN_CHECKS = 60
HARD_CAP = 120.0


def keep_going(until, done_enough):
    now = time.monotonic()
    return now < until or (not done_enough() and now < until + HARD_CAP)


def rearmer(store, location, out, until):
    """Re-arm as fast as it can: half the writes live (an hour left), half already dead."""
    counts = {True: 0, False: 0}
    while keep_going(until, lambda: min(counts.values()) >= MIN_WRITES_OF_EACH_KIND):
        now = utc_now()
        live = random.random() < 0.5
        deadline = now + (timedelta(hours=1) if live else -timedelta(seconds=1))
        hold = store.engage(location, EngageRequest(reason="live" if live else "dead", expires_at=deadline), now, "rearmer")
        counts[live] += 1
        out.write(json.dumps({"generation": hold.generation, "live": live}) + "\n")


def checker(store, layout, out, until):
    """Gate like a consumer (which never retires: dead holds only read lifted) and count anything unreadable."""
    estop = Estop(layout=layout, store=store, actor="checker")
    checks = 0
    problems = []
    while keep_going(until, lambda: checks >= MIN_CHECKS):  # noqa: B023 - reads the running count on purpose
        snapshot = estop.snapshot()
        checks += 1
        problems += [r.problem for r in snapshot.readings if r.state is HoldState.UNREADABLE]
    out.write(json.dumps({"checks": checks, "unreadable": problems}) + "\n")


def retirer(store, location, out, until):
    """The expiry path with a widened race: decide, wait, then retire what it decided on."""
    attempts = 0
    while time.monotonic() < until:
        now = utc_now()
        reading = store.read((location,), now)[0]
        if reading.state is HoldState.EXPIRED:
            time.sleep(random.random() * 0.003)
            store.retire(location, reading.fence, utc_now(), "retirer", event="expire")
            attempts += 1
    out.write(json.dumps({"attempts": attempts}) + "\n")


def hammer(store, location, out, until):
    """Re-arm live holds forever; the parent SIGKILLs it at a random point."""
    print("ready", flush=True)
    while True:
        now = utc_now()
        store.engage(location, EngageRequest(reason="hammer", expires_at=now + timedelta(hours=1)), now, "hammer")


def main() -> int:
    role, spec, root, out_path, seconds = sys.argv[1:6]
    root_path = Path(root)
    layout = Layout(home=root_path, root=root_path)
    store = open_store(spec, root_path)
    until = time.monotonic() + float(seconds)
    with open(out_path, "a") as out:
        if role == "checker":
            checker(store, layout, out, until)
        else:
            {"rearmer": rearmer, "retirer": retirer, "hammer": hammer}[role](store, layout.fleet, out, until)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
