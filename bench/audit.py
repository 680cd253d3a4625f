"""Benchmarks of the file audit trail (issue 24): `hermes history --limit N` and `--since TIME` on a
1,000,000-line trail (about 230 MB, one file: the worst case for a reader that had to parse it
all), as real `hermes` processes, each against the same command on an empty trail (the cost of
starting the CLI), interleaved round by round. Memory is the process's peak resident set
(`harness.spawn_measured`). The target is the whole process's: a well-formed `history` runs on
the framework-free path (`cli.fast_path`, `cli.history`).

Run: `python bench/run.py --only audit` (`--quick`: a 100,000-line trail).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from core import _script
from harness import Figure, spawn_measured
from hermes_estop.stores.audit_log import AUDIT_FILE

__all__ = ["run"]

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def write_trail(root: Path, lines: int) -> int:
    """`lines` engage/release lines of the shape a store writes, one second apart; the bytes."""
    root.mkdir(parents=True, exist_ok=True)
    size = 0
    with (root / AUDIT_FILE).open("w") as handle:
        chunk = []
        for n in range(lines):
            stamp = (T0 + timedelta(seconds=n)).isoformat().replace("+00:00", "Z")
            chunk.append(json.dumps({"time": stamp, "event": "engage" if n % 2 == 0 else "release",
                                     "location": f"p{n % 100}", "generation": f"{n:032x}", "actor": "ops@bench-host",
                                     "reason": "nightly maintenance of the shared database", "deadline": stamp,
                                     "detail": None}) + "\n")
            if len(chunk) == 10_000:
                size += handle.write("".join(chunk))
                chunk = []
        size += handle.write("".join(chunk))
    return size


def _run(root: Path, args: list[str]) -> tuple[float, float]:
    """(seconds, peak MiB) of one `hermes ARGS` process on fleet `root`."""
    env = dict(os.environ, HERMES_ROOT=str(root), HERMES_HOME=str(root))
    env.pop("HERMES_ESTOP_STORE", None)
    elapsed, peak, code = spawn_measured([_script("hermes"), *args], env)
    assert code == 0, f"hermes {' '.join(args)} exited {code}"
    return elapsed, peak


def run(quick: bool) -> list[Figure]:
    lines = 100_000 if quick else 1_000_000
    rounds = 3 if quick else 7
    figures = []
    with tempfile.TemporaryDirectory() as name:
        big, empty = Path(name) / "big", Path(name) / "empty"
        size = write_trail(big, lines)
        write_trail(empty, 0)
        last = T0 + timedelta(seconds=lines - 1)
        cases = [(f"--limit {n}", ["history", "--limit", str(n)]) for n in (5, 50, 1000)]
        cases.append(("--since (the newest 100 events)", ["history", "--limit", "1000000", "--since",
                                                          (last - timedelta(seconds=99)).isoformat()]))
        for label, args in cases:
            ours: list[tuple[float, float]] = []
            base: list[tuple[float, float]] = []
            _run(big, args)  # the page cache warm, as for any later run
            for i in range(rounds):
                pair = [(ours, big), (base, empty)] if i % 2 == 0 else [(base, empty), (ours, big)]
                for out, root in pair:
                    out.append(_run(root, args))
            seconds = statistics.median(t for t, _ in ours)
            baseline = statistics.median(t for t, _ in base)
            peak = max(m for _, m in ours)
            extra_ms = (seconds - baseline) * 1e3
            figures.append(Figure(
                f"`hermes history {label}`, {lines:,}-line trail", seconds * 1e3, "ms",
                "the same on an empty trail", baseline * 1e3, seconds / baseline,
                "under 100 ms and 30 MB, the whole process (issue 24)",
                seconds * 1e3 < 100 and peak < 30,
                {"trail_mib": round(size / 2**20), "rounds": rounds, "extra_ms": round(extra_ms, 1),
                 "peak_rss_mib": round(peak, 1), "peak_rss_mib_empty": round(max(m for _, m in base), 1)}))
    return figures
