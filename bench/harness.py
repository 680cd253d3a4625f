"""Measurement helpers for the benchmarks: every figure is a ratio against a baseline measured in
the same run, interleaved round by round so machine noise hits both sides alike, or a
distribution (p50/p99) over many samples."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Comparison", "Figure", "compare", "compare_rounds", "per_call", "percentile", "spawn_measured"]


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


@dataclass
class Comparison:
    """Two sides timed in interleaved rounds: seconds per call of each (medians over their
    runs), the wall-clock ratio subject/baseline of every round, and the same in CPU time."""

    subject: float
    baseline: float
    ratios: list[float]
    cpu_ratios: list[float]

    @property
    def ratio(self) -> float:
        """The median of the per-round (wall-clock) ratios."""
        return statistics.median(self.ratios)

    def spread(self) -> dict[str, float]:
        """The per-round ratios' quartiles and extremes, for a figure's detail: how far apart
        rounds land is what "within noise" means for that figure. The CPU-time ratio (this
        process's) is beside it: on a machine shared with other work the wall clock also counts
        the time the scheduler gave to others, the CPU time mostly does not."""
        return {"rounds": len(self.ratios), "ratio_p25": round(percentile(self.ratios, 25), 4),
                "ratio_p75": round(percentile(self.ratios, 75), 4), "ratio_min": round(min(self.ratios), 4),
                "ratio_max": round(max(self.ratios), 4), "cpu_ratio": round(statistics.median(self.cpu_ratios), 4)}


def _run(func: Callable[[], object], calls: int) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) per call of `func` over `calls` calls."""
    cpu = time.process_time()
    wall = per_call(func, calls)
    return wall, (time.process_time() - cpu) / calls


def compare_rounds(subject: Callable[[], object], baseline: Callable[[], object], *, calls: int,
                   rounds: int) -> Comparison:
    """Time `subject` and `baseline` in `rounds` runs each (rounded up to even) of `calls` calls,
    in rounds of subject, baseline, baseline, subject (ABBA). A round's ratio is the subject's
    two runs over the baseline's two: each side goes first as often as it goes second, and a
    drift during the round (a cache warming, a heap growing, a neighbour's load) weighs on both
    alike. Runs alternating one by one with an odd count give one side the first slot once
    more, and a median over those rounds lands on that side's slot (the "cron free" control
    read 0.84x that way, issue 24). Both sides are warmed the same way first, one unmeasured
    round of a tenth of the calls. The garbage collector stays on: what a user runs."""
    warm = max(1, calls // 10)
    for func in (subject, baseline, baseline, subject):
        per_call(func, warm)
    subject_times, baseline_times, ratios, cpu_ratios = [], [], [], []
    for _ in range((rounds + 1) // 2):
        s1, s1_cpu = _run(subject, calls)
        b1, b1_cpu = _run(baseline, calls)
        b2, b2_cpu = _run(baseline, calls)
        s2, s2_cpu = _run(subject, calls)
        subject_times += [s1, s2]
        baseline_times += [b1, b2]
        ratios.append((s1 + s2) / (b1 + b2))
        cpu_ratios.append((s1_cpu + s2_cpu) / max(b1_cpu + b2_cpu, 1e-9))
    return Comparison(statistics.median(subject_times), statistics.median(baseline_times), ratios, cpu_ratios)


def compare(subject: Callable[[], object], baseline: Callable[[], object], *, calls: int, rounds: int) -> tuple[float, float, float]:
    """(subject s/call, baseline s/call, median of per-round ratios): `compare_rounds` in short."""
    result = compare_rounds(subject, baseline, calls=calls, rounds=rounds)
    return result.subject, result.baseline, result.ratio


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
