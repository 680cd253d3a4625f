"""Benchmarks of the core: the gate check, the `hermes check` process, deadman precision."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness import Figure, compare, percentile
from hermes_estop import Estop
from hermes_estop.model.homes import Layout
from hermes_estop.stores import FileStore

__all__ = ["run"]


def _fleet(tmp: Path, profiles: int = 1) -> Layout:
    root = tmp / "fleet"
    (root / "profiles").mkdir(parents=True)
    for i in range(profiles):
        (root / "profiles" / f"p{i}").mkdir()
    return Layout(home=root / "profiles" / "p0", root=root)


def gate_no_hold(tmp: Path, quick: bool) -> Figure:
    layout = _fleet(tmp / "nohold")
    estop = Estop(layout=layout, store=FileStore(layout.root))
    paths = [str(location.sentinel) for location in estop.locations]

    def raw_stats() -> None:
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                os.lstat(path)  # the floor: one lstat per candidate location

    subject, baseline, ratio = compare(lambda: estop.gate("alice", "p0"), raw_stats,
                                       calls=5_000 if quick else 50_000, rounds=5 if quick else 15)
    return Figure("gate() with no hold present (file store)", subject * 1e6, "us/call",
                  "raw os.lstat of the candidate paths", baseline * 1e6, ratio, "<= 2x", ratio <= 2.0)


def _naive_gate(paths: list[str], user: str, profile: str, now: datetime) -> bool:
    """The straightforward design: read and parse every sentinel for 'engaged', then again for
    the allowlist."""

    def load(path: str):
        try:
            with open(path, encoding="utf-8-sig") as handle:
                text = handle.read()
        except FileNotFoundError:
            return "absent"
        try:
            data = json.loads(text)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def active(data) -> bool:
        if data == "absent":
            return False
        if data is None or not data.get("expires_at"):
            return True
        return now < datetime.fromisoformat(data["expires_at"])

    engaged = any(active(load(path)) for path in paths)
    if not engaged:
        return True
    for path in paths:
        data = load(path)
        if not active(data):
            continue
        allow = (data or {}).get("allow") or {}
        if user not in [str(u) for u in allow.get("user_ids") or []]:
            return False
        profiles = allow.get("profiles") or []
        if profiles and profile not in profiles:
            return False
    return True


def gate_held(tmp: Path, quick: bool) -> Figure:
    layout = _fleet(tmp / "held")
    estop = Estop(layout=layout, store=FileStore(layout.root))
    estop.engage(reason="root", allow={"user_ids": ["alice"]}, ttl="2h", fleet=True)
    estop.engage(reason="profile", allow={"user_ids": ["alice"], "profiles": ["p0"]}, ttl="2h")
    time.sleep(0.2)  # let the bodies settle so the identity cache may serve them
    paths = [str(location.sentinel) for location in estop.locations]
    assert estop.gate("alice", "p0") and _naive_gate(paths, "alice", "p0", datetime.now(UTC))
    naive, ours, _ = compare(lambda: _naive_gate(paths, "alice", "p0", datetime.now(UTC)),
                             lambda: estop.gate("alice", "p0"), calls=2_000 if quick else 20_000, rounds=5 if quick else 11)
    speedup = naive / ours
    return Figure("gate() with active holds at root and profile", ours * 1e6, "us/call",
                  "naive checker: re-read + re-parse every sentinel twice per call", naive * 1e6, speedup,
                  ">= 5x faster", speedup >= 5.0, {"speedup_is": "baseline / value"})


def gate_profiles(tmp: Path, quick: bool) -> list[Figure]:
    """A dispatcher gating work for every profile of a fleet where every profile and the root hold."""
    figures = []
    base = None
    for count in (1, 10, 100):
        layout = _fleet(tmp / f"profiles-{count}", count)
        fleet = Estop(layout=Layout(home=layout.root, root=layout.root), store=FileStore(layout.root))
        fleet.engage(reason="root", allow={"user_ids": ["alice"]}, ttl="2h", fleet=True)
        views = [fleet.for_profile(f"p{i}") for i in range(count)]
        for view in views:
            view.engage(reason="profile", allow={"user_ids": ["alice"]}, ttl="2h")
        time.sleep(0.2)
        calls = max(1, (2_000 if quick else 20_000) // count)

        def sweep() -> None:
            for view in views:  # noqa: B023 - sweep runs inside this iteration
                view.gate("alice", view.layout.profile)

        from harness import per_call

        per_gate = min(per_call(sweep, calls) for _ in range(3 if quick else 7)) / count
        base = base or per_gate
        figures.append(Figure(f"gate() per profile, fleet of {count} held profiles", per_gate * 1e6, "us/call",
                              "the same with 1 profile", base * 1e6, per_gate / base, "flat (per-gate cost independent of fleet size)",
                              per_gate / base < 2.0))
    return figures


def gate_scoped(tmp: Path, quick: bool) -> list[Figure]:
    """Issue 26: `gate()` for a cron job with one full hold standing, then with 100 scoped holds
    standing beside it (kanban, gateway and cron job globs, none covering the job asked about,
    then one that does): the scoped holds must cost less than the one hold itself again."""
    from harness import per_call

    calls = 2_000 if quick else 20_000
    rounds = 5 if quick else 11
    figures = []

    def timed(estop: Estop, job: str) -> float:
        return min(per_call(lambda: estop.gate("alice", "p0", "cron", job), calls) for _ in range(rounds))

    layout = _fleet(tmp / "scoped-one")
    one = Estop(layout=layout, store=FileStore(layout.root))
    one.engage(reason="root", allow={"user_ids": ["alice"]}, ttl="2h", fleet=True)
    layout = _fleet(tmp / "scoped-100")
    many = Estop(layout=layout, store=FileStore(layout.root))
    many.engage(reason="root", allow={"user_ids": ["alice"]}, ttl="2h", fleet=True)
    for i in range(100):
        only, jobs = [("kanban", []), ("gateway", []), ("cron", [f"batch-{i}-*"]), ("cron", [f"etl-{i}?"])][i % 4]
        many.engage(reason=f"scoped {i}", only=[only], jobs=jobs, ttl="2h", fleet=True,
                    allow={"user_ids": ["alice"]} if i % 2 else None)
    time.sleep(0.2)  # let the bodies settle so the identity cache may serve them
    assert one.gate("alice", "p0", "cron", "nightly-1") and many.gate("alice", "p0", "cron", "nightly-1")
    assert not many.gate("alice", "p0", "cron", "batch-2-x")
    base = timed(one, "nightly-1")
    for label, job in (("none covering the job", "nightly-1"), ("one covering it (held)", "batch-2-x")):
        value = timed(many, job)
        figures.append(Figure(f"gate() with 1 full + 100 scoped holds standing, {label}", value * 1e6, "us/call",
                              "gate() with one full hold standing", base * 1e6, value / base, "< 2x", value / base < 2.0))
    return figures


def _script(name: str) -> str:
    """The console script itself, not a version manager's shim in front of it."""
    candidate = Path(sysconfig.get_path("scripts")) / name
    return str(candidate) if candidate.exists() else name


def installed_package(env: dict[str, str] | None = None) -> Path:
    """Where `hermes_estop` is imported from by this venv's interpreter run as the process
    figures run it (same environment, not this process's `sys.path`): the installed package,
    which is the checkout's `src/` only for an editable install."""
    out = subprocess.run([sys.executable, "-c", "import hermes_estop; print(hermes_estop.__file__)"],
                         env=env, capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    return Path(out.stdout.strip()).parent


def fresh_bytecode(env: dict[str, str] | None = None) -> dict[str, object]:
    """Compile the installed package's bytecode before timing a process. A pip install compiles
    it at install time and an editable install writes it on the first run; but a checkout being
    edited (or a shell with `PYTHONDONTWRITEBYTECODE=1`) leaves stale `.pyc` files, and then
    every run recompiles the sources it imports and the figure measures the compiler (the
    4x reported before this step was mostly that). The package compiled is the one the timed
    processes import (`installed_package`), checked to be the one the in-process figures
    imported. Returns what was done, for the results."""
    import compileall

    import hermes_estop

    package = installed_package(env)
    in_process = Path(hermes_estop.__file__).parent
    compiled = compileall.compile_dir(str(package), quiet=1)
    return {"package": str(package), "compiled": bool(compiled), "same_as_in_process": package == in_process,
            "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE")}


def check_process(tmp: Path, quick: bool) -> list[Figure]:
    """`hermes check` and `hermes gate -- true` as whole processes, against `python -c pass` of
    the same interpreter (bench/run.py refuses a system interpreter, whose start-up inflates it).
    The figure is the ratio of the minimums over many runs (hyperfine's floor: start-up noise only
    ever adds), the runs of subject and baseline interleaved; the median ratio is in the detail."""
    env = dict(os.environ, HERMES_HOME=str(tmp / "proc-home"))
    env.pop("HERMES_ROOT", None)
    env.pop("HERMES_ESTOP_STORE", None)
    bytecode = fresh_bytecode(env)
    bare = [sys.executable, "-c", "pass"]

    def once(cmd: list[str]) -> float:
        start = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        return time.perf_counter() - start

    figures = []
    true = shutil.which("true") or "true"
    runs = 15 if quick else 60
    for label, cmd in (("`hermes check --quiet`", [_script("hermes"), "check", "--quiet"]),
                       ("`hermes gate -- true`", [_script("hermes"), "gate", "--", true])):
        once(cmd), once(bare)  # warm the page cache
        subject, baseline = [], []
        for i in range(runs):
            pair = (cmd, bare) if i % 2 else (bare, cmd)
            times = {id(c): once(c) for c in pair}
            subject.append(times[id(cmd)])
            baseline.append(times[id(bare)])
        ratio = min(subject) / min(baseline)
        figures.append(Figure(f"{label} as a whole process", min(subject) * 1e3, "ms/run (min)",
                              "python -c pass (same venv, min)", min(baseline) * 1e3, ratio, "<= 3x", ratio <= 3.0,
                              {"interpreter": sys.executable, "runs": runs, "bytecode": bytecode,
                               "median_ms": round(statistics.median(subject) * 1e3, 2),
                               "baseline_median_ms": round(statistics.median(baseline) * 1e3, 2),
                               "median_ratio": round(statistics.median(s / b for s, b in zip(subject, baseline, strict=False)), 3)}))
    return figures


#: prints the package modules a `hermes ARGS` run imported (sys.modules at its exit), as JSON on stderr
_MODULES_AT_EXIT = """
import json, sys
from hermes_estop.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(name for name in sys.modules if name.startswith("hermes_estop"))), file=sys.stderr)
"""


def pause_imports(tmp: Path, quick: bool) -> list[Figure]:
    """Issue 45: the package modules a real `hermes pause --ttl 5m` imports (target 35; 81 before
    the issue, 41 at its first turn), beside `hermes pause --help` and `hermes --help` (every
    command's help: the whole CLI), and the whole `hermes pause` process's time (min over the runs,
    against `python -c pass`; target 0.2 s on a quiet machine). Each count is one process's
    `sys.modules` at exit, in a fresh home without a policy or windows."""
    home = tmp / "pause-home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("HERMES_")}
    env["HERMES_HOME"] = str(home)
    bytecode = fresh_bytecode(env)

    def loaded(*args: str) -> list[str]:
        done = subprocess.run([sys.executable, "-c", _MODULES_AT_EXIT, *args], env=env, capture_output=True, text=True,
                              check=False, cwd=tmp)
        return json.loads(done.stderr.splitlines()[-1])

    pause = ["pause", "--ttl", "5m", "--reason", "bench"]
    paused = loaded(*pause)
    figures = [Figure("package modules `hermes pause --ttl 5m` imports", len(paused), "modules", None, None, None,
                      "<= 35", len(paused) <= 35, {"modules": paused, "bytecode": bytecode})]
    for label, args in (("`hermes pause --help`", ["pause", "--help"]), ("`hermes --help`", ["--help"])):
        figures.append(Figure(f"package modules {label} imports", len(loaded(*args)), "modules"))
    runs = 5 if quick else 20
    subject, baseline = [], []
    for _ in range(runs):
        for cmd, into in (([_script("hermes"), *pause], subject), ([sys.executable, "-c", "pass"], baseline)):
            start = time.perf_counter()
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            into.append(time.perf_counter() - start)
    figures.append(Figure("`hermes pause --ttl 5m` as a whole process", min(subject), "s/run (min)",
                          "python -c pass (same venv, min)", min(baseline), min(subject) / min(baseline), "<= 0.2 s",
                          min(subject) <= 0.2, {"runs": runs, "median_s": round(statistics.median(subject), 4),
                                                "load_average_1min": round(os.getloadavg()[0], 2)}))
    return figures


def deadman_precision(tmp: Path, quick: bool) -> Figure:
    """How late after `expires_at` a consumer polling every 1 ms is told the hold lifted.

    The consumer-visible delay has two parts, reported apart because only one is the code's:
    the POLL GAP (from the deadline to the start of the first check after it: the poll period
    plus however late `time.sleep(0.001)` returns, which on a loaded 2-core machine is the
    scheduler's, tens of ms) and the LIFTING CHECK (from the later of the deadline and that
    check's start to its return: one snapshot plus the retire a reader does inline). The
    figure is the second, the deadman's precision; the whole delay is in the detail. Each check
    is a snapshot carrying the `now` it decided at, so the decision itself is also checked to be
    exact: no check decided at or after the deadline may say held (`late_decisions`) and none
    before it may say lifted (`early`). One expiry is run first, unmeasured: the first one in a
    process imports what retiring and logging need, once per process, not once per deadline."""
    import logging

    layout = _fleet(tmp / "deadman")
    estop = Estop(layout=layout, store=FileStore(layout.root))
    # the lift is logged at WARNING once per engagement; 200 of them on stderr would be noise
    logger, quiet = logging.getLogger("hermes_estop"), logging.NullHandler()
    logger.addHandler(quiet)
    logger.propagate = False

    def one() -> tuple[float, float, float, int, int]:
        deadline = datetime.now(UTC) + timedelta(milliseconds=20)
        estop.engage(reason="deadman", expires_at=deadline)
        early = late = 0
        while True:
            started = datetime.now(UTC)
            snapshot = estop.snapshot()
            returned = datetime.now(UTC)
            if not snapshot.engaged:
                early += snapshot.now < deadline
                break
            late += snapshot.now >= deadline
            time.sleep(0.001)
        ms = 1e3
        return ((started - deadline).total_seconds() * ms, (returned - max(started, deadline)).total_seconds() * ms,
                (returned - deadline).total_seconds() * ms, early, late)

    try:
        one()  # warm-up: the first expiry of a process imports the retire and logging paths
        samples = [one() for _ in range(30 if quick else 200)]
    finally:
        logger.removeHandler(quiet)
        logger.propagate = True
    gap, check, total = ([row[i] for row in samples] for i in range(3))
    early, late = sum(row[3] for row in samples), sum(row[4] for row in samples)
    p99 = percentile(check, 99)

    def dist(values: list[float]) -> dict[str, float]:
        return {"p50": round(percentile(values, 50), 3), "p99": round(percentile(values, 99), 3), "max": round(max(values), 3)}

    return Figure("deadman precision: the first check after expires_at reports the lift", p99,
                  "ms after the deadline (p99)", "expires_at", 0.0, None,
                  "p99 < 5 ms, never early, no late decision", p99 < 5.0 and early == 0 and late == 0,
                  {"lifting_check_ms": dist(check), "poll_gap_ms": dist(gap), "consumer_total_ms": dist(total),
                   "early": early, "late_decisions": late, "samples": len(samples),
                   "load_average_1min": round(os.getloadavg()[0], 2)})


def daemon_expiry_lateness(tmp: Path, quick: bool) -> Figure:
    """How late after `expires_at` the daemon's deadman (`hermes serve --interval 1`, nothing else
    reading) writes the `expire` audit line: the recorded retire instant less the deadline, for
    holds armed on ten profile scopes at once with staggered TTLs (issue 19)."""
    import random
    import signal

    root = tmp / "daemon"
    for index in range(10):
        (root / "profiles" / f"p{index}").mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(root), HERMES_ROOT=str(root))
    log = open(root / "serve.log", "wb")
    serve = subprocess.Popen([sys.executable, "-m", "hermes_estop", "serve", "--interval", "1"], env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    estop = Estop(home=root, root=root, store=FileStore(root))
    lateness: list[float] = []
    try:
        for _ in range(300):
            if b"serve: running" in (root / "serve.log").read_bytes():
                break
            time.sleep(0.05)
        rng = random.Random(19)
        for _ in range(2 if quick else 6):
            armed = {}
            for index in range(10):
                hold = estop.for_profile(f"p{index}").engage(reason="bench", ttl=str(rng.randint(1, 3)))
                armed[hold.generation] = hold.expires_at
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                expired = {e.generation: e.time for e in estop.history(2000) if e.event == "expire"}
                if all(g in expired for g in armed):
                    break
                time.sleep(0.2)
            lateness += [(expired[g] - at).total_seconds() * 1e3 for g, at in armed.items() if g in expired]
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(30)
        log.close()
    p50, p99 = percentile(lateness, 50), percentile(lateness, 99)
    return Figure("daemon deadman: expire line after expires_at, serve --interval 1, no reader", p99,
                  "ms after the deadline (p99)", None, None, None, "p99 <= interval + 1 s (2000 ms)",
                  p99 <= 2000.0, {"p50_ms": round(p50, 2), "p99_ms": round(p99, 2), "max_ms": round(max(lateness), 2),
                                  "samples": len(lateness), "load_average_1min": round(os.getloadavg()[0], 2)})


def run(quick: bool) -> list[Figure]:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        figures = [gate_no_hold(tmp, quick), gate_held(tmp, quick)]
        figures += gate_profiles(tmp, quick)
        figures += gate_scoped(tmp, quick)
        figures += check_process(tmp, quick)
        figures += pause_imports(tmp, quick)
        figures.append(deadman_precision(tmp, quick))
        figures.append(daemon_expiry_lateness(tmp, quick))
    return figures
