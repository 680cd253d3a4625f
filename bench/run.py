"""`python bench/run.py [--quick] [--only NAME] [--allow-system]`: run the benchmarks, print a
table, write bench/results.json. Every figure is a ratio against a baseline measured in the same
run, or a distribution over many samples; targets are reported, never asserted.

The printout is markdown for docs/performance.md, as one run: the run's facts (date UTC, total seconds,
interpreter and version, load average at start and end), the table of figures, and the growth
curves (figures whose detail has `seconds` and `peak_rss_mib` keyed by size, bench/windows.py).
results.json carries the same facts and the same markdown.

It refuses to run outside a virtual environment (`--allow-system` overrides, and says so loudly
in the table and the results): an interpreter with a large global site-packages pays for it on
every start, which inflates the `python -c pass` baseline and flatters every start-up ratio.
The results record the interpreter, its `sys.prefix` and the baseline's own time."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# Not the checkout's src/: the in-process figures measure the package installed in this venv, the
# same one the process figures run (issue 24). `pip install .` (or `-e .` to measure a checkout).

from harness import Figure

SUITES = ["core", "consumers", "windows", "postgres", "observe", "acks", "audit", "serve_scale", "api", "impact"]


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
    lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (width + 2) for width in widths) + "|")
    return "\n".join(lines)


GROWTH_SIZES = (1_000, 10_000, 100_000)


def _size(key: str) -> int | None:
    try:
        return int(str(key).replace(",", "").replace("_", ""))
    except ValueError:
        return None


def _command(name: str) -> str:
    """The command of a growth figure: its name up to the size (`hermes windows list`, 100,000
    distinct windows -> `hermes windows list`)."""
    return name.split(", ")[0]


def render_growth(figures: list[Figure]) -> str:
    """The growth curves as a markdown table: seconds at each size (warm: the file read before,
    the windows cache filled), the peak resident memory at the largest, the cold seconds (the
    first read after an edit) where measured, whether the figure's target was met. Empty when
    no figure has a curve."""
    header = ["command", *(f"{size:,}" for size in GROWTH_SIZES), f"peak MiB at {GROWTH_SIZES[-1]:,}",
              "cold (first read after an edit)", "target met"]
    rows = []
    for fig in figures:
        seconds, peak = fig.detail.get("seconds"), fig.detail.get("peak_rss_mib")
        if not isinstance(seconds, dict) or not isinstance(peak, dict):
            continue
        by_size = {_size(k): v for k, v in seconds.items()}
        peaks = {_size(k): v for k, v in peak.items()}
        top = peaks.get(GROWTH_SIZES[-1])
        cold = fig.detail.get("cold_seconds")
        colds = ", ".join(f"{k}: {v:.2f} s" for k, v in cold.items() if _size(k)) if isinstance(cold, dict) else ""
        rows.append([_command(fig.name),
                     *(f"{by_size[size]:.2f} s" if by_size.get(size) is not None else "-" for size in GROWTH_SIZES),
                     f"{top:.0f}" if top is not None else "-", colds or "-",
                     {True: "yes", False: "NO", None: "-"}[fig.met]])
    if not rows:
        return ""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _loads(values: list[float]) -> str:
    return ", ".join(f"{value:.2f}" for value in values)


def _install_kind(editable: object) -> str:
    if editable is None:
        return "install kind unknown"
    return "editable install: the checkout's src/" if editable else "non-editable install"


def render_header(run: dict[str, object]) -> str:
    """The facts a published run states (issue 24): when, how long, with what, on how busy a
    machine."""
    python, machine = run["interpreter"], run["machine"]
    assert isinstance(python, dict) and isinstance(machine, dict)
    return "\n".join([
        f"- run: {run['started_utc']} UTC, {run['seconds']} s in all (`{run['command']}`)",
        f"- interpreter: `{python['executable']}` (Python {python['version']}"
        f"{'' if python['virtualenv'] else ', NOT a virtual environment: baselines INFLATED'}), "
        f"package `{python['package']}` ({_install_kind(python.get('editable'))}); "
        f"`python -c pass` {python['python_c_pass_ms_min_of_7']} ms (min of 7)",
        f"- load average (1, 5, 15 min): {_loads(machine['load_average_before'])} at start, "
        f"{_loads(machine['load_average_after'])} at end; {machine['cpus']} CPUs, {machine['platform']}",
    ])


def in_virtualenv() -> bool:
    """True when this interpreter runs from a venv (or virtualenv): `sys.prefix` is not the
    base installation's."""
    return sys.prefix != getattr(sys, "base_prefix", sys.prefix)


def interpreter() -> dict[str, object]:
    """What the baselines were measured with: the interpreter and its environment, and the
    time of `python -c pass` itself (min of 7 runs, after a warm-up), the start-up floor every
    process figure is a multiple of."""
    times = []
    for _ in range(8):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=False)
        times.append(time.perf_counter() - start)
    return {
        "executable": sys.executable,
        "version": platform.python_version(),
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "virtualenv": in_virtualenv(),
        "python_c_pass_ms_min_of_7": round(min(times[1:]) * 1e3, 2),
        # set, a checkout's stale bytecode would be recompiled on every run of `hermes`: the
        # process figures compile it first (bench/core.py `fresh_bytecode`)
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
        # the package every figure measures, in-process and as processes alike
        "package": _package(),
        "editable": _editable(),
    }


def _package() -> str:
    import hermes_estop

    return str(Path(hermes_estop.__file__).parent)


def _editable() -> bool | None:
    """Whether the package is an editable install (then it is a checkout's `src/`), from pip's
    `direct_url.json`; None when pip did not record one."""
    from importlib import metadata

    try:
        text = metadata.distribution("hermes-estop").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    return bool(json.loads(text).get("dir_info", {}).get("editable")) if text else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples: a smoke run, not a measurement")
    parser.add_argument("--only", choices=SUITES, action="append", help="run only these suites")
    parser.add_argument("--output", type=Path, default=HERE / "results.json")
    parser.add_argument("--allow-system", action="store_true",
                        help="run outside a virtual environment anyway (the start-up baselines are then inflated)")
    args = parser.parse_args(argv)
    started_utc = datetime.now(UTC)
    started = time.monotonic()
    load_before = os.getloadavg()
    if not in_virtualenv() and not args.allow_system:
        print(f"bench: {sys.executable} is not in a virtual environment (sys.prefix {sys.prefix}): its start-up "
              "baseline would be inflated by the global site-packages. Run it from the venv the README sets up, "
              "or pass --allow-system.", file=sys.stderr)
        return 2
    if not in_virtualenv():
        print("bench: WARNING: outside a virtual environment: start-up baselines are INFLATED", file=sys.stderr)
    try:
        python = interpreter()
    except ImportError:
        print("bench: hermes_estop is not installed in this environment: `pip install .` first (the "
              "figures measure the installed package)", file=sys.stderr)
        return 2
    from core import fresh_bytecode

    # once for every suite's processes (bench/windows.py's too), not only bench/core.py's
    bytecode = fresh_bytecode()
    print(f"[bench] package {python['package']} (bytecode compiled: {bytecode['package']})", file=sys.stderr)
    print(f"[bench] interpreter {python['executable']} (prefix {python['prefix']}); "
          f"python -c pass {python['python_c_pass_ms_min_of_7']} ms", file=sys.stderr, flush=True)
    figures: list[Figure] = []
    failures: dict[str, str] = {}
    for suite in args.only or SUITES:
        print(f"[bench] {suite} ...", file=sys.stderr, flush=True)
        try:
            module = importlib.import_module(f"bench_{suite}" if (HERE / f"bench_{suite}.py").exists() else suite)
            figures += module.run(args.quick)
        except Exception as exc:  # noqa: BLE001 - a suite that cannot run is reported, the others still run
            failures[suite] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
    load_after = os.getloadavg()
    finished_utc = datetime.now(UTC)
    result: dict[str, object] = {
        "command": "python bench/run.py" + (" --quick" if args.quick else "")
                   + "".join(f" --only {suite}" for suite in args.only or ())
                   + (" --allow-system" if args.allow_system else ""),
        "started_utc": started_utc.strftime("%Y-%m-%d %H:%M"),
        "when": finished_utc.isoformat(),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                    # other work on the machine shows here: 1-, 5- and 15-minute load averages
                    "load_average_before": [round(x, 2) for x in load_before],
                    "load_average_after": [round(x, 2) for x in load_after]},
        "interpreter": python,
        "bytecode": bytecode,
        "seconds": round(time.monotonic() - started, 1),
        "figures": [fig.to_json() for fig in figures],
        "failed_suites": failures,
    }
    header, table, growth = render_header(result), render(figures), render_growth(figures)
    result["markdown"] = {"header": header, "figures": table, "growth": growth}
    print(header)
    print()
    print(table)
    if growth:
        print()
        print(growth)
    for suite, why in failures.items():
        print(f"suite {suite} did not run: {why}")
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
