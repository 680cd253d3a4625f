"""`hermes serve` at scale (issue 24): its HTTP endpoints while it reconciles 10,000 windows, and
the window scheduler's memory over many reconciliations with 10,000 windows and 1,000 profiles.

1. `GET /` and `GET /metrics` of a real `hermes serve --http` process (the installed `hermes`) on a
   fleet of 10,000 windows with distinct schedules (`windows.write_distinct`), and 1,000 for
   comparison, one request at a time, while the scheduler reconciles every `INTERVAL` seconds.
   `-v` makes serve log every pass with its duration (`windows: pass at ... took ...`); the
   passes logged while an endpoint was sampled are counted and reported, so the figure says how
   many reconciliations the requests competed with. Which passes are expensive depends on the
   date: `write_distinct` puts a window start in every minute of the first seven days of each
   month, so on those days every scope is held and each pass chains the scope's occurrences
   (the detail says how many were active).
2. The scheduler in-process (`WindowService(estop.fleet, ...)` with a paused real APScheduler, as
   tests/windows/conftest.py drives it) on a FAKE clock moved `STEP` (10 minutes) per pass from
   the 1st of a month at 00:00: on the first seven days of each month about ten occurrences
   start and ten end between two passes (holds armed and retired at profile scopes, the ledger
   and the audit trail written), the rest of the month is quiet; the ledger keeps a week
   (`RETENTION`), so a long run prunes it. 10,000 windows over 1,000 profiles
   (`<root>/profiles/pNNNN`). The resident set (VmRSS, after `gc.collect()`) after a warm-up and
   at the end; with growth over the target, tracemalloc's top growth sites over 100 more passes
   (allocations since tracing began: a cache entry replaced shows as growth).

   The suite runs `PASSES` (400) of the 10,000 passes the target names, and says so in the
   figure. A quiet pass costs a few milliseconds (no window is asked: what covers now and the
   wake-ups are read off the schedule's arm order); one where ten holds are armed and ten retired costs about
   a hundred (each a fenced, fsync'ed write and an audit line; the audit trail read once for
   recall; the ledger, up to a week of entries, read and rewritten);
   `python bench/serve_scale.py --memory-only --passes 10000` runs them all (minutes). The
   detail has the resident set at `CURVE_POINTS` points with the ledger's size there: the
   ledger holds a week of occurrences, so what it holds rises over the first week of each
   month and falls over the second, and the resident set follows it.

Run: `python bench/run.py --only serve_scale` (`--quick`: fewer requests and passes), or
`python bench/serve_scale.py [--quick] [--passes N]` (N: the memory run's passes).
"""

from __future__ import annotations

import gc
import json
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from core import _script
from harness import Figure, percentile
from windows import write_distinct

__all__ = ["run"]

#: seconds between serve's reconciliations (its `--interval`): passes run during the requests
INTERVAL = 0.5
HTTP_TARGET_MS = 50.0
#: the passes the target names (issue 24); the suite runs `PASSES` of them (see `memory`)
TARGET_PASSES = 10_000
PASSES, QUICK_PASSES = 400, 40
WARMUP, QUICK_WARMUP = 200, 20
#: fake time between two passes
STEP = timedelta(minutes=10)
#: passes in a fake month (31 days): the ledger's week of entries, its pruning and the monthly
#: cycle of `write_distinct` all reached, so a baseline taken after them compares like with like
MONTH_PASSES = 31 * 24 * 6
PROFILES = 1_000
MEMORY_WINDOWS = 10_000
GROWTH_TARGET = 0.05
#: resident set samples between the warm-up and the end (the detail's `rss_curve_mib`)
CURVE_POINTS = 10
_PASS = re.compile(r"windows: pass at \S+ took ([0-9.]+) ms: (\d+) window\(s\), (\d+) active")
_URL = re.compile(r"http: serving .* on (http://\S+/)")


# -- 1. the endpoints while serve reconciles ---------------------------------------------------------

class Serve:
    """A `hermes serve --http 127.0.0.1:0 -v` process on fleet `root`: its URL, and the passes
    it logged (monotonic time of the line, duration ms, active occurrences)."""

    def __init__(self, root: Path) -> None:
        env = dict(os.environ, HERMES_ROOT=str(root), HERMES_HOME=str(root))
        env.pop("HERMES_ESTOP_STORE", None)
        self.proc = subprocess.Popen([_script("hermes"), "serve", "-v", "--interval", str(INTERVAL),
                                      "--http", "127.0.0.1:0"], env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.passes: list[tuple[float, float, int]] = []
        self._urls: queue.Queue[str] = queue.Queue()
        self._tail: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            found = _PASS.search(line)
            if found:
                self.passes.append((time.monotonic(), float(found[1]), int(found[3])))
            elif (url := _URL.search(line)) is not None:
                self._urls.put(url[1])
            elif " DEBUG " not in line:
                self._tail = ([*self._tail, line.rstrip()])[-20:]

    def ready(self, timeout: float = 300.0) -> str:
        """The URL, once serve listens and its scheduler has finished a first pass."""
        try:
            url = self._urls.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"hermes serve did not start: {self._tail}") from None
        deadline = time.monotonic() + timeout
        while not self.passes:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"hermes serve made no pass: {self._tail}")
            time.sleep(0.05)
        return url

    def passes_between(self, start: float, end: float) -> list[tuple[float, float, int]]:
        return [p for p in self.passes if start <= p[0] <= end]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _get(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
    return time.perf_counter() - start


def http_figures(tmp: Path, quick: bool) -> list[Figure]:
    samples = 40 if quick else 300
    figures = []
    for count in ((1_000, 10_000) if not quick else (10_000,)):
        root = tmp / f"http-{count}"
        write_distinct(root, count)
        serve = Serve(root)
        try:
            url = serve.ready()
            for path, label in (("", "/"), ("metrics", "/metrics")):
                cold = _get(url + path)
                started = time.monotonic()
                times = [_get(url + path) for _ in range(samples)]
                ended = time.monotonic()
                during = serve.passes_between(started, ended)
                durations = [p[1] for p in during] or [float("nan")]
                p99 = percentile(times, 99) * 1e3
                met = p99 < HTTP_TARGET_MS if count == 10_000 else None
                figures.append(Figure(
                    f"`hermes serve` GET {label} while it reconciles, {count:,} windows", p99, "ms (p99)",
                    target=f"p99 < {HTTP_TARGET_MS:g} ms with 10,000 windows (issue 24)" if count == 10_000 else "reported",
                    met=met, detail={
                        "p50_ms": round(statistics.median(times) * 1e3, 2), "max_ms": round(max(times) * 1e3, 2),
                        "requests": samples, "first_request_ms": round(cold * 1e3, 1),
                        "sampling_s": round(ended - started, 2), "interval_s": INTERVAL,
                        "passes_during_sampling": len(during),
                        "pass_ms_median": round(statistics.median(durations), 1),
                        "pass_ms_max": round(max(durations), 1),
                        "occurrences_active": max((p[2] for p in during), default=0)}))
        finally:
            serve.stop()
    return figures


# -- 2. the scheduler's memory over many passes on a fake clock --------------------------------------

class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def _settled_rss() -> int:
    gc.collect()
    return _rss_kib()


def memory(tmp: Path, passes: int, warmup: int) -> Figure:
    from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]

    from hermes_estop import Estop
    from hermes_estop.windows.scheduler import WindowService

    root = tmp / "memory"
    write_distinct(root, MEMORY_WINDOWS, tuple(f"p{i:04d}" for i in range(PROFILES)))
    # the 1st of a month: a window starts in every minute of the first days (write_distinct)
    clock = FakeClock(datetime(2027, 3, 1, tzinfo=UTC))
    estop = Estop(root, root, clock=clock, actor="bench@serve_scale")
    scheduler = BackgroundScheduler(timezone=UTC)
    scheduler.start(paused=True)  # keeps the wake-up jobs; the passes run on the fake clock
    service = WindowService(estop.fleet, scheduler=scheduler)
    durations: list[float] = []
    counts: dict[str, int] = {"errors": 0}

    def one_pass() -> None:
        started = time.perf_counter()
        report = service.reconcile()
        durations.append(time.perf_counter() - started)
        counts["errors"] += len(report.errors)
        for event in report.events:
            counts[event.kind] = counts.get(event.kind, 0) + 1
        clock.now += STEP

    curve: list[tuple[int, float, int]] = []
    started = time.perf_counter()
    try:
        for _ in range(warmup):
            one_pass()
        after_warmup = _settled_rss()
        ledger_after_warmup = len(service.ledger.load())
        every = max(1, (passes - warmup) // CURVE_POINTS)
        for done in range(warmup + 1, passes + 1):
            one_pass()
            if (done - warmup) % every == 0 and done < passes:
                curve.append((done, round(_settled_rss() / 1024, 1), len(service.ledger.load())))
        at_end = _settled_rss()
        growth = at_end / after_warmup - 1
        detail: dict[str, object] = {
            "passes": passes, "target_passes": TARGET_PASSES, "warmup_passes": warmup,
            "windows": MEMORY_WINDOWS, "profiles": PROFILES,
            "rss_after_warmup_mib": round(after_warmup / 1024, 1), "rss_at_end_mib": round(at_end / 1024, 1),
            "pass_ms_median": round(statistics.median(durations) * 1e3, 1),
            "pass_ms_p99": round(percentile(durations, 99) * 1e3, 1),
            "first_pass_ms": round(durations[0] * 1e3, 1),
            "fake_clock": f"{datetime(2027, 3, 1, tzinfo=UTC).isoformat()} + {STEP} per pass, to {clock.now.isoformat()}",
            "events": dict(counts), "ledger_entries_after_warmup": ledger_after_warmup,
            "ledger_entries_at_end": len(service.ledger.load()), "audit_trail_mib": round(_size(root) / 2**20, 1),
            "rss_curve_mib": [{"pass": n, "rss_mib": rss, "ledger_entries": entries} for n, rss, entries in curve],
            "wall_s": round(time.perf_counter() - started, 1),
        }
        if growth >= GROWTH_TARGET:
            detail["tracemalloc_top_growth"] = _growth_sites(one_pass, 100)
    finally:
        scheduler.shutdown(wait=False)
        estop.close()
    short = f"{passes:,} of the {TARGET_PASSES:,} passes the target names" if passes < TARGET_PASSES else f"{passes:,} passes"
    return Figure(f"window scheduler memory growth, {MEMORY_WINDOWS:,} windows, {PROFILES:,} profiles ({short})",
                  growth * 100, "% RSS", "RSS after the warm-up", after_warmup / 1024, at_end / after_warmup,
                  f"growth < {GROWTH_TARGET:.0%} over {TARGET_PASSES:,} fake-clock passes (issue 24)",
                  growth < GROWTH_TARGET, detail)


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("estop-audit.jsonl*") if p.is_file())


def _growth_sites(one_pass, passes: int) -> list[str]:
    """Where memory grows: tracemalloc over `passes` more passes, the top 5 sites by growth."""
    tracemalloc.start(5)
    try:
        gc.collect()
        before = tracemalloc.take_snapshot()
        for _ in range(passes):
            one_pass()
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    return [str(stat) for stat in after.compare_to(before, "traceback")[:5]]


# -- 3. a held lane's chain walked without a compiled schedule, and `serve --once` ------------------

#: fake time between two passes of the chain figure (a window of `write_distinct` starts every minute)
CHAIN_STEP = timedelta(seconds=10)


def chain_pass_ms(tmp: Path, passes: int, windows: int = MEMORY_WINDOWS) -> dict[str, object]:
    """The scheduler's passes (in-process, fake clock moved `CHAIN_STEP` a pass from the 1st at
    00:10) while the fleet scope is held by a chain through one lane of `windows` windows, with
    no compiled schedule kept for it: the file has a table that does not validate (a fleet with
    calendars is the same case). Median and worst milliseconds a pass, after a first pass."""
    from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]

    from hermes_estop import Estop
    from hermes_estop.windows.scheduler import WindowService

    root = tmp / f"chain-{windows}"
    write_distinct(root, windows, ("fleet",))
    with open(root / "windows.toml", "a", encoding="utf-8") as out:
        out.write('[[windows]]\nname = "bad"\ncron = "61 * * * *"\nduration = "1h"\n')
    clock = FakeClock(datetime(2027, 3, 1, 0, 10, tzinfo=UTC))
    estop = Estop(root, root, clock=clock, actor="bench@serve_scale")
    scheduler = BackgroundScheduler(timezone=UTC)
    scheduler.start(paused=True)
    service = WindowService(estop.fleet, scheduler=scheduler)
    try:
        service.tick(clock.now)
        took = []
        for _ in range(passes):
            clock.now += CHAIN_STEP
            started = time.perf_counter()
            report = service.tick(clock.now)
            took.append((time.perf_counter() - started) * 1e3)
        return {"windows": windows, "passes": passes, "median_ms": round(statistics.median(took), 2),
                "worst_ms": round(max(took), 2), "active": len(report.active), "failed": len(report.failed)}
    finally:
        scheduler.shutdown(wait=False)
        estop.close()


def serve_once(tmp: Path, rounds: int, windows: int = MEMORY_WINDOWS) -> list[dict[str, float]]:
    """`hermes serve --once` of the installed `hermes` on `windows` distinct windows: COLD the
    first after an edit (a comment appended: no schedule kept for the bytes), WARM the faster
    of the next two (the schedule the cold one wrote); (seconds, peak MiB) each, `rounds` times."""
    from windows_schedule import _edit, _process

    root, cache = tmp / f"once-{windows}", tmp / f"once-cache-{windows}"
    write_distinct(root, windows)
    _process(root, ["serve", "--once"], cache)
    counter = [0]
    out = []
    for _ in range(rounds):
        _edit(root, counter)
        cold = _process(root, ["serve", "--once"], cache)
        warm = min((_process(root, ["serve", "--once"], cache) for _ in range(2)), key=lambda pair: pair[0])
        out.append({"cold_s": cold[0], "cold_mib": cold[1], "warm_s": warm[0], "warm_mib": warm[1]})
        print(json.dumps(out[-1]), flush=True)
    return out


def run(quick: bool, passes: int | None = None) -> list[Figure]:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        figures = http_figures(tmp, quick)
        figures.append(memory(tmp, passes or (QUICK_PASSES if quick else PASSES),
                              QUICK_WARMUP if quick else WARMUP))
        return figures


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--passes", type=int, default=None, help="the memory run's passes (default: the suite's)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="passes before the memory run's baseline (default: the suite's); a fake month is "
                             f"{MONTH_PASSES:,} (the ledger then holds its week and the trail has rotated)")
    parser.add_argument("--memory-only", action="store_true")
    parser.add_argument("--chain-only", action="store_true",
                        help="only the passes walking a held lane's chain of 10,000 windows without a schedule")
    parser.add_argument("--once-only", type=int, metavar="ROUNDS", default=0,
                        help="only `hermes serve --once` cold and warm at 10,000 windows, ROUNDS times")
    parser.add_argument("--as-serve", action="store_true",
                        help="accepted for older figures' command lines: every pass keeps the compiled schedule now, "
                             "as `hermes serve` does")
    args = parser.parse_args()
    if args.chain_only or args.once_only:
        with tempfile.TemporaryDirectory() as name:
            if args.chain_only:
                print(json.dumps(chain_pass_ms(Path(name), args.passes or QUICK_PASSES)))
            if args.once_only:
                serve_once(Path(name), args.once_only)
        raise SystemExit(0)
    if args.memory_only:
        warmup = args.warmup if args.warmup is not None else (QUICK_WARMUP if args.quick else WARMUP)
        with tempfile.TemporaryDirectory() as name:
            figures = [memory(Path(name), warmup + (args.passes or (QUICK_PASSES if args.quick else PASSES)), warmup)]
    else:
        figures = run(args.quick, args.passes)
    for figure in figures:
        print(json.dumps(figure.to_json(), default=str))
