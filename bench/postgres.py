"""Benchmarks of the PostgreSQL store: how fast a change reaches another process, and what a
check costs when the rows are in memory.

Propagation: a watcher subprocess (`tests/stores/pg_watcher.py`, its own store and connections,
full re-reads only hourly, so only LISTEN/NOTIFY delivers) polls its reading every 0.5 ms and
reports each change with its CLOCK_MONOTONIC time, which is system-wide on Linux. A sample is
the time from just before the writing call in this process (so it includes the whole write
transaction) to the watcher's observation; for an expiry, from the deadline to the observation.

The database is `$HERMES_TEST_PG_DSN`, or a throwaway cluster started for the run.
Run: `python bench/run.py --only postgres` (add `--quick` for a smoke run).
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import psycopg

from harness import Figure, compare, percentile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pg_helpers import JsonLines, _stop_cluster, start_cluster  # noqa: E402

from hermes_estop import Estop  # noqa: E402
from hermes_estop.homes import Layout  # noqa: E402
from hermes_estop.stores import FileStore  # noqa: E402
from hermes_estop.stores.pg_leader import DEFAULT_POLL  # noqa: E402
from hermes_estop.stores.postgresql import PostgresStore  # noqa: E402

__all__ = ["run"]

REPO = Path(__file__).resolve().parents[1]
WATCHER = REPO / "tests" / "stores" / "pg_watcher.py"
SCHEDULER = REPO / "tests" / "windows" / "pg_scheduler.py"
TARGET_MS = 100.0


def _server():
    """(dsn, cleanup)."""
    dsn = os.environ.get("HERMES_TEST_PG_DSN")
    if dsn:
        return dsn, lambda: None
    server, work = start_cluster()
    return server.dsn, lambda: _stop_cluster(server, work)


def _with_schema(dsn: str, schema: str) -> str:
    return dsn + ("&" if "?" in dsn else "?") + f"schema={schema}"


def _ms(values: list[float]) -> list[float]:
    return [v * 1000 for v in values]


def _figures(what: str, samples: list[float]) -> list[Figure]:
    ms = _ms(samples)
    p50, p99 = percentile(ms, 50), percentile(ms, 99)
    detail = {"samples": len(ms), "p50_ms": p50, "p99_ms": p99, "max_ms": max(ms), "min_ms": min(ms)}
    return [
        Figure(f"{what} seen by another process, p50 (PostgreSQL, loopback)", p50, "ms",
               target=f"< {TARGET_MS:g} ms", met=p50 < TARGET_MS, detail=detail),
        Figure(f"{what} seen by another process, p99 (PostgreSQL, loopback)", p99, "ms",
               target=f"< {TARGET_MS:g} ms", met=p99 < TARGET_MS, detail=detail),
    ]


def propagation(dsn: str, tmp: Path, quick: bool) -> list[Figure]:
    url = _with_schema(dsn, f"bench_{os.getpid()}")
    root = tmp / "fleet"
    root.mkdir()
    layout = Layout(home=root, root=root)
    store = PostgresStore(url, root=root, share=False)
    store.init_schema()
    estop = Estop(layout=layout, store=store, actor="bench")
    estop.disengage()
    watcher = JsonLines(WATCHER, url, str(root), stdin=True)
    engaged, released, expired = [], [], []
    try:
        watcher.next(30)
        for _ in range(20 if quick else 200):
            started = time.monotonic()
            hold = estop.engage(reason="bench")
            seen = watcher.next(30)
            assert seen["generation"] == hold.generation, seen
            engaged.append(seen["t"] - started)
            started = time.monotonic()
            estop.release()
            seen = watcher.next(30)
            assert seen["state"] == "absent", seen
            released.append(seen["t"] - started)
        for _ in range(5 if quick else 40):
            now = estop.clock()
            deadline = now + timedelta(milliseconds=150)
            at = time.monotonic() + (deadline - now).total_seconds()
            hold = estop.engage(reason="short", expires_at=deadline)
            assert watcher.next(30)["state"] == "active"
            seen = watcher.next(30)
            assert (seen["state"], seen["generation"]) == ("expired", hold.generation), seen
            expired.append(seen["t"] - at)
            estop.release()
            watcher.next(30)
    finally:
        watcher.finish()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{store.schema}" CASCADE')
        store.close()
    return _figures("a new hold", engaged) + _figures("a release", released) + _figures("an expiry (from its deadline)", expired)


def gate_cost(dsn: str, tmp: Path, quick: bool) -> Figure:
    url = _with_schema(dsn, f"bench_gate_{os.getpid()}")
    root = tmp / "gate"
    root.mkdir()
    layout = Layout(home=root, root=root)
    pg = Estop(layout=layout, store=PostgresStore(url, root=root, share=False), actor="bench")
    files = Estop(layout=layout, store=FileStore(root), actor="bench")
    try:
        pg.engage(reason="bench", allow={"user_ids": ["alice"]})
        files.engage(reason="bench", allow={"user_ids": ["alice"]})
        subject, baseline, ratio = compare(lambda: pg.gate("alice"), lambda: files.gate("alice"),
                                           calls=500 if quick else 5000, rounds=3 if quick else 7)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{pg.store.schema}" CASCADE')
        pg.store.close()
    return Figure("gate() with an active hold (PostgreSQL store: rows in memory)", subject * 1e6, "us/call",
                  baseline_name="the same on the file store", baseline=baseline * 1e6, ratio=ratio,
                  target="no round trip: same order as the file store", met=ratio < 3)


def takeover(dsn: str, tmp: Path, quick: bool) -> list[Figure]:
    """Two scheduler processes (`tests/windows/pg_scheduler.py`, the default leader poll); the
    leader is SIGKILLed; a sample is the time until the standby says it leads."""
    url = _with_schema(dsn, f"bench_ha_{os.getpid()}")
    root = tmp / "ha"
    root.mkdir()
    creator = PostgresStore(url, share=False)
    creator.init_schema()
    samples = []
    try:
        standby = JsonLines(SCHEDULER, url, str(root), str(DEFAULT_POLL))
        assert standby.next(60)["leader"] is True
        for _ in range(3 if quick else 10):
            leader, standby = standby, JsonLines(SCHEDULER, url, str(root), str(DEFAULT_POLL))
            assert standby.next(60)["leader"] is False
            leader.proc.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            leader.finish()
            assert standby.next(60)["leader"] is True
            samples.append(time.monotonic() - killed)
        standby.finish(signal.SIGTERM)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{creator.schema}" CASCADE')
        creator.close()
    ms = _ms(samples)
    detail = {"samples": len(ms), "p50_ms": percentile(ms, 50), "max_ms": max(ms), "leader_poll_s": DEFAULT_POLL}
    return [Figure("scheduler takeover after SIGKILL of the leader, max (PostgreSQL advisory lock)", max(ms), "ms",
                   target=f"<= leader poll ({DEFAULT_POLL:g} s) + scheduling", met=max(ms) <= DEFAULT_POLL * 1000 + 500,
                   detail=detail)]


def run(quick: bool) -> list[Figure]:
    dsn, cleanup = _server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return (propagation(dsn, Path(tmp), quick) + [gate_cost(dsn, Path(tmp), quick)]
                    + takeover(dsn, Path(tmp), quick))
    finally:
        cleanup()
