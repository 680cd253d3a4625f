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

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

from harness import Figure, compare, percentile

from hermes_estop import Estop
from hermes_estop.homes import Layout
from hermes_estop.stores import FileStore
from hermes_estop.stores.postgresql import PostgresStore

__all__ = ["run"]

REPO = Path(__file__).resolve().parents[1]
WATCHER = REPO / "tests" / "stores" / "pg_watcher.py"
TARGET_MS = 100.0


def _server():
    """(dsn, cleanup)."""
    dsn = os.environ.get("HERMES_TEST_PG_DSN")
    if dsn:
        return dsn, lambda: None
    sys.path.insert(0, str(REPO / "tests"))
    from pg_helpers import _stop_cluster, start_cluster

    server, work = start_cluster()
    return server.dsn, lambda: _stop_cluster(server, work)


def _with_schema(dsn: str, schema: str) -> str:
    return dsn + ("&" if "?" in dsn else "?") + f"schema={schema}"


class _Watcher:
    def __init__(self, url: str, root: Path) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen([sys.executable, str(WATCHER), url, str(root)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def next(self) -> dict:
        return self.lines.get(timeout=30)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


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
    watcher = _Watcher(url, root)
    engaged, released, expired = [], [], []
    try:
        watcher.next()
        for _ in range(20 if quick else 200):
            started = time.monotonic()
            hold = estop.engage(reason="bench")
            seen = watcher.next()
            assert seen["generation"] == hold.generation, seen
            engaged.append(seen["t"] - started)
            started = time.monotonic()
            estop.release()
            seen = watcher.next()
            assert seen["state"] == "absent", seen
            released.append(seen["t"] - started)
        for _ in range(5 if quick else 40):
            now = estop.clock()
            deadline = now + timedelta(milliseconds=150)
            at = time.monotonic() + (deadline - now).total_seconds()
            hold = estop.engage(reason="short", expires_at=deadline)
            assert watcher.next()["state"] == "active"
            seen = watcher.next()
            assert (seen["state"], seen["generation"]) == ("expired", hold.generation), seen
            expired.append(seen["t"] - at)
            estop.release()
            watcher.next()
    finally:
        watcher.close()
        with __import__("psycopg").connect(dsn, autocommit=True) as conn:
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
        with __import__("psycopg").connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{pg.store.schema}" CASCADE')
        pg.store.close()
    return Figure("gate() with an active hold (PostgreSQL store: rows in memory)", subject * 1e6, "us/call",
                  baseline_name="the same on the file store", baseline=baseline * 1e6, ratio=ratio,
                  target="no round trip: same order as the file store", met=ratio < 3)


def run(quick: bool) -> list[Figure]:
    dsn, cleanup = _server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return propagation(dsn, Path(tmp), quick) + [gate_cost(dsn, Path(tmp), quick)]
    finally:
        cleanup()
