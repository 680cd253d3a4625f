"""Benchmark of `hermes serve --http`: `GET /metrics` and `GET /` (the status page with its SVG
timeline) with 1,000 windows, through real HTTP requests over loopback to the real server
(`StatusServer`, the stdlib ThreadingHTTPServer), one request at a time (a scrape, a browser).

The fleet: 1,000 daily 30-minute windows in four timezones over ten scopes (bench/windows.py's
`make_windows`: 7,000 bars on the page), a fleet-wide hold with a deadman, and the ledger the
scheduler keeps. The first request of each endpoint pays for computing the week's occurrences
(croniter); it is reported apart ("cold"); the figures are the warm requests that follow, as a
Prometheus server scraping every 15 s and a page refreshing every 30 s see them between two
changes; and, apart, requests each a minute later than the one before (the timeline's origin
moved, windows started and ended: the figures recomputed from the cached occurrences).

The HTTP server runs only inside `hermes serve`: `gate()` and the consumers never import it, so
their cost is unchanged (bench/core.py measures `gate()`).

Run: `python bench/observe.py [--quick]` (or as a suite of bench/run.py).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # harness, windows; hermes_estop is the installed package (issue 24)

from harness import Figure, percentile
from hermes_estop import Estop
from hermes_estop.observe.server import StatusServer
from hermes_estop.windows.windows_file import WindowsFile
from windows import make_windows

__all__ = ["run"]

WINDOWS = 1_000
TARGET_MS = 10.0


def _fetch(url: str) -> tuple[float, int]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as response:
        body = response.read()
    return time.perf_counter() - start, len(body)


class SteppingClock:
    """The real time plus an offset the benchmark moves (to put each request in a new minute)."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


def measure(tmp: Path, quick: bool) -> list[Figure]:
    root = tmp / "fleet"
    root.mkdir()
    now = datetime.now(UTC)
    WindowsFile(root).save(make_windows(WINDOWS, now))
    clock = SteppingClock()
    estop = Estop(root, root, clock=clock)
    estop.engage(reason="bench: kernel upgrade", ttl="2d", fleet=True)
    samples = 30 if quick else 300
    stepped = 10 if quick else 60
    figures = []
    with StatusServer(estop) as server:
        for path, name in (("metrics", "/metrics"), ("", "/ (status page)")):
            url = server.url + path
            clock.offset = timedelta(0)
            cold, size = _fetch(url)
            times = [_fetch(url)[0] for _ in range(samples)]
            # Each request a minute later: the timeline's origin moves (and windows start and end
            # as they would over an hour), so the view is computed afresh each time; only what
            # did not change (each window's drawing, its occurrences) is reused.
            moving = []
            for step in range(stepped):
                clock.offset = timedelta(minutes=step + 1)
                moving.append(_fetch(url)[0])
            p50 = statistics.median(times) * 1000
            p99 = percentile(times, 99) * 1000
            figures.append(Figure(
                name=f"GET {name}, {WINDOWS:,} windows", value=p50, unit="ms (p50)", target=f"< {TARGET_MS:g} ms",
                met=p50 < TARGET_MS,
                detail={"p99_ms": round(p99, 2), "cold_ms": round(cold * 1000, 1), "bytes": size,
                        "requests": samples, "new_minute_p50_ms": round(statistics.median(moving) * 1000, 2),
                        "new_minute_p99_ms": round(percentile(moving, 99) * 1000, 2)},
            ))
    estop.close()
    return figures


def run(quick: bool) -> list[Figure]:
    with tempfile.TemporaryDirectory() as name:
        return measure(Path(name), quick)


if __name__ == "__main__":
    for figure in run("--quick" in sys.argv[1:]):
        d = figure.detail
        print(f"{figure.name}: p50 {figure.value:.2f} ms, p99 {d['p99_ms']:.2f} ms; each request in a new "
              f"minute: p50 {d['new_minute_p50_ms']:.2f} ms, p99 {d['new_minute_p99_ms']:.2f} ms; "
              f"first request {d['cold_ms']:.1f} ms; {d['bytes']:,} bytes "
              f"(target {figure.target}: {'met' if figure.met else 'NOT met'})")
