"""Acknowledged stops (issue 21): from engage to every consumer acknowledged, for 10 consumer
processes (kanban dispatchers, each its own subprocess, `tests/fleet/registry/consumer_process.py`),
on the file store and on PostgreSQL. A sample is the time from just before the engaging call to
the moment `wait_for_acks` (polling the registry every 50 ms) sees the last acknowledgement; the
release is measured the same way. Target: p99 < one consumer interval + 100 ms.

Run: `python bench/run.py --only acks` (add `--quick` for a smoke run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import Figure, percentile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from hermes_estop import Estop
from hermes_estop.fleet.registry.acks import ack_for_release, wait_for_acks
from hermes_estop.fleet.registry.entries import Ack
from pg_helpers import _stop_cluster, start_cluster

__all__ = ["run"]

CONSUMER = Path(__file__).resolve().parents[1] / "tests" / "registry" / "consumer_process.py"
CONSUMERS = 10
INTERVAL = 1.0


def _measure(store: str | None, root: Path, samples: int) -> tuple[list[float], list[float]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES")}
    env |= {"HERMES_ROOT": str(root), "HERMES_HOME": str(root)}
    if store is not None:
        env["HERMES_ESTOP_STORE"] = store
    estop = Estop(root, root, store=store) if store is not None else Estop(root, root)
    fleet = estop.fleet
    procs = [subprocess.Popen([sys.executable, str(CONSUMER), "kanban", str(INTERVAL)], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL) for _ in range(CONSUMERS)]
    engage, release = [], []
    try:
        deadline = time.monotonic() + 60
        while len(fleet.consumers().entries()) < CONSUMERS:
            if time.monotonic() > deadline:
                raise RuntimeError("the consumers did not register within 60 s")
            time.sleep(0.1)
        location = fleet.fleet_location
        for _ in range(samples):
            start = time.monotonic()
            hold = fleet.engage(location, *estop.engage_request("bench"))
            found = wait_for_acks(fleet, Ack("fleet", hold.generation or "?", engaged=True), timeout=30)
            assert found.done and len(found.acknowledged) == CONSUMERS, found
            engage.append(time.monotonic() - start)
            ack = ack_for_release(fleet, "fleet", hold.generation or "?")
            start = time.monotonic()
            fleet.release(location)
            found = wait_for_acks(fleet, ack, timeout=30)
            assert found.done and len(found.acknowledged) == CONSUMERS, found
            release.append(time.monotonic() - start)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
        estop.close()
    return engage, release


def _figures(store: str, what: str, samples: list[float]) -> list[Figure]:
    ms = [s * 1000 for s in samples]
    target = INTERVAL * 1000 + 100
    detail = {"samples": len(ms), "consumers": CONSUMERS, "interval_s": INTERVAL, "max_ms": max(ms), "min_ms": min(ms)}
    return [Figure(f"{what} acknowledged by {CONSUMERS} consumers, p{pct} ({store})", percentile(ms, pct), "ms",
                   target=f"< {target:g} ms" if pct == 99 else "", met=percentile(ms, pct) < target if pct == 99 else None,
                   detail=detail) for pct in (50, 99)]


def run(quick: bool) -> list[Figure]:
    samples = 5 if quick else 30
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "file-fleet"
        root.mkdir()
        engage, release = _measure(None, root, samples)
        figures += _figures("file", "engage", engage) + _figures("file", "release", release)
        dsn = os.environ.get("HERMES_TEST_PG_DSN")
        cleanup = None
        if not dsn:
            server, work = start_cluster()
            dsn, cleanup = server.dsn, (lambda: _stop_cluster(server, work))
        try:
            root = Path(tmp) / "pg-fleet"
            root.mkdir()
            url = dsn + ("&" if "?" in dsn else "?") + f"schema=bench_acks_{os.getpid()}"
            engage, release = _measure(url, root, samples)
            figures += _figures("postgresql", "engage", engage) + _figures("postgresql", "release", release)
        finally:
            if cleanup is not None:
                cleanup()
    return figures
