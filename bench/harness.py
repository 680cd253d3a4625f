"""Measurement helpers for the benchmarks: every figure is a ratio against a baseline measured in
the same run, interleaved round by round so machine noise hits both sides alike, or a
distribution (p50/p99) over many samples."""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

__all__ = ["Figure", "per_call", "compare", "percentile", "spawn_measured"]


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    baseline_name: str | None = None
    baseline: float | None = None
    ratio: float | None = None
    target: str = ""
    met: bool | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def per_call(func: Callable[[], object], calls: int) -> float:
    """Seconds per call of `func` over `calls` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        func()
    return (time.perf_counter() - start) / calls


def compare(subject: Callable[[], object], baseline: Callable[[], object], *, calls: int, rounds: int) -> tuple[float, float, float]:
    """(subject s/call, baseline s/call, median of per-round ratios), alternating the two."""
    subject_times, baseline_times, ratios = [], [], []
    per_call(subject, max(1, calls // 10))
    per_call(baseline, max(1, calls // 10))
    for i in range(rounds):
        if i % 2:
            b = per_call(baseline, calls)
            s = per_call(subject, calls)
        else:
            s = per_call(subject, calls)
            b = per_call(baseline, calls)
        subject_times.append(s)
        baseline_times.append(b)
        ratios.append(s / b)
    return statistics.median(subject_times), statistics.median(baseline_times), statistics.median(ratios)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


_MEASURE = """
import os, sys, time
argv = sys.argv[1:]
null = os.open(os.devnull, os.O_WRONLY)
started = time.perf_counter()
pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)])
_, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - started, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def spawn_measured(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(seconds, peak resident MiB, exit code) of one process, its output discarded. Started
    from a small Python process rather than from the bench: a child's peak counts the memory
    of the process it was forked from until its exec (the bench's 100 MB, otherwise), so the
    launcher is small and the timing is the launcher's, from spawn to exit."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-S", "-c", _MEASURE, *argv], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[0]), int(out[1]) / 1024, int(out[2])
