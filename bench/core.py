"""Benchmarks of the core: the gate check, the `hermes check` process, deadman precision."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from harness import Figure, compare, percentile

from hermes_estop import Estop
from hermes_estop.homes import Layout
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
            try:
                os.lstat(path)  # the floor: one lstat per candidate location
            except FileNotFoundError:
                pass

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
    assert estop.gate("alice", "p0") and _naive_gate(paths, "alice", "p0", datetime.now(timezone.utc))
    naive, ours, _ = compare(lambda: _naive_gate(paths, "alice", "p0", datetime.now(timezone.utc)),
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
            for view in views:
                view.gate("alice", view.layout.profile)

        from harness import per_call

        per_gate = min(per_call(sweep, calls) for _ in range(3 if quick else 7)) / count
        base = base or per_gate
        figures.append(Figure(f"gate() per profile, fleet of {count} held profiles", per_gate * 1e6, "us/call",
                              "the same with 1 profile", base * 1e6, per_gate / base, "flat (per-gate cost independent of fleet size)",
                              per_gate / base < 2.0))
    return figures


def _script(name: str) -> str:
    """The console script itself, not a version manager's shim in front of it."""
    candidate = Path(sysconfig.get_path("scripts")) / name
    return str(candidate) if candidate.exists() else name


def check_process(tmp: Path, quick: bool) -> list[Figure]:
    """`hermes check` and `hermes gate -- true` as whole processes, against `python -c pass` of
    the same interpreter (bench/run.py refuses a system interpreter, whose start-up inflates it)."""
    env = dict(os.environ, HERMES_HOME=str(tmp / "proc-home"))
    env.pop("HERMES_ROOT", None)
    env.pop("HERMES_ESTOP_STORE", None)
    bare = [sys.executable, "-c", "pass"]

    def run(cmd):
        def go():
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        return go

    figures = []
    true = shutil.which("true") or "true"
    for label, cmd in (("`hermes check --quiet`", [_script("hermes"), "check", "--quiet"]),
                       ("`hermes gate -- true`", [_script("hermes"), "gate", "--", true])):
        subject, baseline, ratio = compare(run(cmd), run(bare), calls=1, rounds=10 if quick else 30)
        figures.append(Figure(f"{label} as a whole process", subject * 1e3, "ms/run", "python -c pass (same venv)",
                              baseline * 1e3, ratio, "<= 3x", ratio <= 3.0, {"interpreter": sys.executable}))
    return figures


def deadman_precision(tmp: Path, quick: bool) -> Figure:
    layout = _fleet(tmp / "deadman")
    estop = Estop(layout=layout, store=FileStore(layout.root))
    lateness = []
    for _ in range(30 if quick else 200):
        deadline = datetime.now(timezone.utc) + timedelta(milliseconds=20)
        estop.engage(reason="deadman", expires_at=deadline)
        while estop.is_engaged():
            time.sleep(0.001)
        lateness.append((datetime.now(timezone.utc) - deadline).total_seconds() * 1e3)
    early = sum(1 for value in lateness if value < 0)
    p50, p99 = percentile(lateness, 50), percentile(lateness, 99)
    return Figure("deadman precision: a consumer polling every 1 ms sees the lift", p99, "ms late (p99)",
                  "expires_at", 0.0, None, "p99 < 5 ms late, never early", p99 < 5.0 and early == 0,
                  {"p50_ms": round(p50, 3), "p99_ms": round(p99, 3), "max_ms": round(max(lateness), 3),
                   "early": early, "samples": len(lateness)})


def run(quick: bool) -> list[Figure]:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        figures = [gate_no_hold(tmp, quick), gate_held(tmp, quick)]
        figures += gate_profiles(tmp, quick)
        figures += check_process(tmp, quick)
        figures.append(deadman_precision(tmp, quick))
    return figures
