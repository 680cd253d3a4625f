"""The notifier inside a real `hermes serve`: a backlog survives SIGKILL and restarts with nothing
lost and at most one duplicate per target per crash (the event in flight); a target that stays
down (it never answers) does not delay another target."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
from notify_helpers import STALL, Receiver, webhook, write_config

from hermes_estop import Estop
from hermes_estop.fleet.fleet import Fleet
from hermes_estop.notify.config import load_targets
from hermes_estop.notify.notifier import NotifyService

SRC = str(Path(__file__).resolve().parents[2] / "src")

pytestmark = pytest.mark.slow


def serve(root: Path) -> subprocess.Popen[bytes]:
    """`hermes serve` on `root`, its log appended to `root/serve.log` (shown when a test fails)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(root), PYTHONPATH=SRC + os.pathsep + env.get("PYTHONPATH", ""))
    with open(root / "serve.log", "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "hermes_estop", "serve", "--interval", "1"], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)


def log_tail(root: Path) -> str:
    return (root / "serve.log").read_text(errors="replace")[-3000:]


def stop(process: subprocess.Popen[bytes], sig: signal.Signals) -> int:
    process.send_signal(sig)
    try:
        process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode


def test_serve_restarted_and_sigkilled_mid_backlog_loses_nothing_and_duplicates_within_the_bound(fleet_root):
    # slow enough that every kill lands mid-backlog: the last stop has 25 events (2.5 s) of room,
    # even when this process is descheduled between seeing the count and sending the signal
    receiver = Receiver(delay=0.1)
    try:
        estop = Estop(home=fleet_root, root=fleet_root, store="file", actor="tester")
        for index in range(40):
            estop.engage(reason=f"r{index}")
            estop.release()
        expected = [item.id for item in Fleet.of_files(fleet_root).store.audit_after(0, 1000)]
        assert len(expected) == 80
        write_config(fleet_root, webhook("hook", receiver.url, backoff_initial=0.1, backoff_max=0.5))
        kills = 0
        for wanted, sig in ((10, signal.SIGKILL), (25, signal.SIGTERM), (40, signal.SIGKILL), (55, signal.SIGKILL)):
            process = serve(fleet_root)
            assert receiver.wait_for(wanted), log_tail(fleet_root)
            code = stop(process, sig)
            if sig is signal.SIGKILL:
                kills += 1
            else:
                assert code == 0
            assert len(set(receiver.ids())) < len(expected), "the backlog was drained before the stop"
        process = serve(fleet_root)
        try:
            while len(set(receiver.ids())) < len(expected):
                assert receiver.wait_for(len(receiver.ids()) + 1), log_tail(fleet_root)
        finally:
            assert stop(process, signal.SIGTERM) == 0
        ids = receiver.ids()
        assert set(ids) == set(expected)                       # nothing lost
        assert list(dict.fromkeys(ids)) == expected            # first deliveries in audit order
        duplicates = sum(n - 1 for n in Counter(ids).values())
        assert duplicates <= kills                             # at most the in-flight event per crash
    finally:
        receiver.close()


def test_a_target_that_never_answers_does_not_delay_another(fleet_root):
    dead = Receiver(default=STALL, stall_seconds=120)
    live = Receiver()
    stopper = threading.Event()
    try:
        estop = Estop(home=fleet_root, root=fleet_root, store="file", actor="tester")
        write_config(fleet_root, webhook("dead", dead.url, timeout=60), webhook("live", live.url))
        service = NotifyService(estop.fleet, load_targets(fleet_root), poll=0.05)
        thread = threading.Thread(target=service.run, args=(stopper,), daemon=True)
        thread.start()
        for index in range(3):
            estop.engage(reason=f"r{index}")
            assert live.wait_for(index + 1)
        assert len(dead.requests) == 1 and dead.accepted == []  # still stuck on its first event
        assert [e["reason"] for e in live.events()] == ["r0", "r1", "r2"]
    finally:
        stopper.set()
        live.close()
        dead.server.shutdown()


def test_two_notifiers_on_one_file_fleet_deliver_each_event_once(fleet_root, receiver):
    estop = Estop(home=fleet_root, root=fleet_root, store="file", actor="tester")
    write_config(fleet_root, webhook("hook", receiver.url))
    services = [NotifyService(estop.fleet, load_targets(fleet_root), poll=0.05) for _ in range(2)]
    stopper = threading.Event()
    threads = [threading.Thread(target=s.run, args=(stopper,), daemon=True) for s in services]
    for thread in threads:
        thread.start()
    try:
        for index in range(4):
            estop.engage(reason=f"r{index}")
            assert receiver.wait_for(index + 1)
    finally:
        stopper.set()
        for thread in threads:
            thread.join(30)
    assert [e["reason"] for e in receiver.events()] == ["r0", "r1", "r2", "r3"]
    assert len(set(receiver.ids())) == len(receiver.ids())


def test_gate_never_loads_the_notifier(fleet_root):
    write_config(fleet_root, webhook("hook", "http://127.0.0.1:9/"))
    code = ("import sys, hermes_estop; hermes_estop.gate(); "
            "print(sorted(m for m in sys.modules if m.startswith('hermes_estop.notify')))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(fleet_root), PYTHONPATH=SRC)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                            check=True)
    assert result.stdout.strip() == "[]"
