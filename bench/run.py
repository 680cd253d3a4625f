"""`python bench/run.py [--quick] [--only NAME]`: run the benchmarks, print a table, write
bench/results.json. Every figure is a ratio against a baseline measured in the same run, or a
distribution over many samples; targets are reported, never asserted."""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from harness import Figure  # noqa: E402

SUITES = ["core", "consumers", "windows", "postgres"]


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:,.0f}"


def render(figures: list[Figure]) -> str:
    rows = [("figure", "value", "baseline", "ratio", "target", "met")]
    for fig in figures:
        rows.append((fig.name, f"{_fmt(fig.value)} {fig.unit}",
                     f"{_fmt(fig.baseline)} ({fig.baseline_name})" if fig.baseline_name else "-",
                     f"{_fmt(fig.ratio)}x" if fig.ratio is not None else "-", fig.target,
                     {True: "yes", False: "NO", None: "-"}[fig.met]))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (width + 2) for width in widths) + "|")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples: a smoke run, not a measurement")
    parser.add_argument("--only", choices=SUITES, action="append", help="run only these suites")
    parser.add_argument("--output", type=Path, default=HERE / "results.json")
    args = parser.parse_args(argv)
    figures: list[Figure] = []
    failures: dict[str, str] = {}
    started = time.monotonic()
    for suite in args.only or SUITES:
        print(f"[bench] {suite} ...", file=sys.stderr, flush=True)
        try:
            module = importlib.import_module(f"bench_{suite}" if (HERE / f"bench_{suite}.py").exists() else suite)
            figures += module.run(args.quick)
        except Exception as exc:  # a suite that cannot run is reported, the others still run
            failures[suite] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
    table = render(figures)
    print(table)
    for suite, why in failures.items():
        print(f"suite {suite} did not run: {why}")
    result = {
        "command": "python bench/run.py" + (" --quick" if args.quick else ""),
        "when": datetime.now(timezone.utc).isoformat(),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": __import__("os").cpu_count()},
        "seconds": round(time.monotonic() - started, 1),
        "figures": [fig.to_json() for fig in figures],
        "failed_suites": failures,
    }
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
