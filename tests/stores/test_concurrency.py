"""The generation fence and crash safety with real processes, on every backend."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_estop.model.hold import HoldState
from hermes_estop.model.timeutil import utc_now

WORKERS = Path(__file__).with_name("workers.py")
pytestmark = pytest.mark.slow


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def spawn(role, spec, root, out, seconds, **kwargs):
    return subprocess.Popen([sys.executable, str(WORKERS), role, spec, str(root), str(out), str(seconds)],
                            env=child_env(), **kwargs)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def test_stress_no_successor_lost_no_partial_body_no_exception(backend, store, fleet_root, tmp_path):
    spec = backend.spec(fleet_root)
    roles = ["rearmer", "rearmer", "checker", "checker", "retirer"]
    outs = [tmp_path / f"{i}-{role}.jsonl" for i, role in enumerate(roles)]
    procs = [spawn(role, spec, fleet_root, out, 3.0, stderr=subprocess.PIPE) for role, out in zip(roles, outs, strict=False)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()

    written = {}
    for out, role in zip(outs, roles, strict=False):
        if role == "rearmer":
            written.update({row["generation"]: row["live"] for row in lines(out)})
    checks = [row for out, role in zip(outs, roles, strict=False) if role == "checker" for row in lines(out)]
    assert sum(row["checks"] for row in checks) > 100
    problems = [problem for row in checks for problem in row["unreadable"]]
    assert not problems, f"a reader saw an unreadable body: {problems[:3]}"
    assert sum(written.values()) >= 40 and len(written) - sum(written.values()) >= 40

    history = store.history()
    removed = [e.generation for e in history if e.event in ("expire", "retire")]
    assert removed, "nothing was ever retired: the race was not exercised"
    lost = [g for g in removed if written.get(g) is True]
    assert not lost, f"live successors were retired: {lost[:5]}"

    last = [e for e in history if e.event in ("engage", "rearm")][-1]
    reading = store.read((fleet_root_location(store, fleet_root),), utc_now())[0]
    if written[last.generation]:
        assert reading.state is HoldState.ACTIVE
        assert reading.hold.generation == last.generation


def fleet_root_location(store, root):
    from hermes_estop.model.homes import Layout

    return Layout(home=root, root=root).fleet


def test_writer_killed_at_random_points_never_frees_a_held_location(backend, store, fleet_estop, fleet_root, tmp_path):
    fleet_estop.engage(reason="standing")
    spec = backend.spec(fleet_root)
    rng = random.Random(7)
    location = fleet_estop.layout.own
    for attempt in range(12):
        proc = spawn("hammer", spec, fleet_root, tmp_path / "hammer.jsonl", 60, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE)
        assert proc.stdout.readline().strip() == b"ready", proc.stderr.read().decode()
        time.sleep(rng.random() * 0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        reading = fleet_estop.store.read((location,), fleet_estop.clock())[0]
        assert reading.state is HoldState.ACTIVE, f"attempt {attempt}: {reading.state} {reading.problem}"
        assert reading.hold.reason in ("standing", "hammer")
    fleet_estop.engage(reason="after the crashes")
    assert fleet_estop.get_state()["reason"] == "after the crashes"
