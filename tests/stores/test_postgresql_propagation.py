"""Propagation: another process, with its own store and connections, sees a new hold, a release
and an expiry within the bound. The watcher re-reads in full only once an hour, so only
LISTEN/NOTIFY (or, for the expiry, its own reading of the deadline) can pass these.

`PROPAGATION_BOUND` is a generous correctness bound for a loaded CI machine, not a speed
claim; the measured figures (p50/p99 on loopback) come from `bench/pg_propagation.py`."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest

from hermes_estop import Estop
from hermes_estop.stores.postgresql import PostgresStore
from pg_helpers import JsonLines, pg_server, pg_url  # noqa: F401

pytestmark = [pytest.mark.postgresql, pytest.mark.slow]

WATCHER = Path(__file__).with_name("pg_watcher.py")
#: Without LISTEN/NOTIFY the watcher would see a change only at its hourly full read; 5 s
#: still tells the two apart by a factor of 720 and leaves a loaded 2-core machine room.
PROPAGATION_BOUND = 5.0


@pytest.fixture
def watcher(pg_url, fleet_root):  # noqa: F811
    creator = PostgresStore(pg_url, share=False)
    creator.init_schema()
    creator.close()
    watching = JsonLines(WATCHER, pg_url, str(fleet_root), stdin=True)
    yield watching
    watching.finish()


def test_another_process_sees_a_hold_a_release_and_an_expiry_within_the_bound(pg_url, root_layout, watcher):  # noqa: F811
    store = PostgresStore(pg_url, root=root_layout.root, share=False)
    estop = Estop(layout=root_layout, store=store, actor="writer")
    try:
        assert watcher.next(timeout=60)["state"] == "absent"  # a cold start on a loaded machine is slow

        started = time.monotonic()
        hold = estop.engage(reason="propagation")
        seen = watcher.next()
        assert (seen["state"], seen["generation"]) == ("active", hold.generation)
        assert seen["t"] - started < PROPAGATION_BOUND

        started = time.monotonic()
        estop.release()
        seen = watcher.next()
        assert seen["state"] == "absent"
        assert seen["t"] - started < PROPAGATION_BOUND

        # 3 s: long enough that a loaded watcher still sees the hold active before it expires; the
        # two processes' readings of the database clock may differ by a round trip, hence the 1 s
        # of slack before the deadline (an expiry that ignored the deadline would come 3 s early)
        now = estop.clock()
        deadline = now + timedelta(seconds=3)
        expiry_mono = time.monotonic() + (deadline - estop.clock()).total_seconds()
        hold = estop.engage(reason="short", expires_at=deadline)
        seen = watcher.next()
        assert (seen["state"], seen["generation"]) == ("active", hold.generation)
        seen = watcher.next()
        assert (seen["state"], seen["generation"]) == ("expired", hold.generation)
        assert -1.0 < seen["t"] - expiry_mono < PROPAGATION_BOUND
    finally:
        store.close()
