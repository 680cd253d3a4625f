"""`hermes serve`: the services runner, the dry run, and one real-time end-to-end run of the
window scheduler as a subprocess observed through `hermes check`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop.daemon.supervisor import run_services
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile


class Looping:
    def __init__(self, name: str) -> None:
        self.name = name
        self.stopped = threading.Event()

    def run(self, stop: threading.Event) -> None:
        stop.wait()
        self.stopped.set()


class Dying:
    name = "dying"

    def run(self, stop: threading.Event) -> None:
        raise RuntimeError("broken")


def test_run_services_returns_0_when_stopped_and_stops_every_service():
    stop = threading.Event()
    services = [Looping("a"), Looping("b")]
    threading.Timer(0.2, stop.set).start()
    assert run_services(services, stop, stop_timeout=5) == 0
    assert all(s.stopped.is_set() for s in services)


def test_one_service_dying_stops_the_others_and_returns_1():
    survivor = Looping("survivor")
    assert run_services([survivor, Dying()], threading.Event(), stop_timeout=5) == 1
    assert survivor.stopped.is_set()


def test_dry_run_prints_the_plan_and_writes_nothing(hermes):
    hermes.home.mkdir(parents=True)
    start = datetime.now(UTC) - timedelta(minutes=1)
    hermes("windows", "add", "now", "--at", start.isoformat(), "--duration", "1h", check=0)
    result = hermes("serve", "--dry-run", "--json", check=0)
    plan = json.loads(result.stdout)
    assert plan["dry_run"] is True
    assert [e["kind"] for e in plan["events"]] == ["arm"]
    assert plan["events"][0]["deadline"] == (start + timedelta(hours=1)).isoformat()
    assert not hermes.sentinel.exists()
    assert not (hermes.home / "windows-state.json").exists()
    once = json.loads(hermes("serve", "--once", "--json", check=0).stdout)
    assert [e["kind"] for e in once["events"]] == ["arm"]
    assert hermes("check", "-q").returncode == 1


def test_serve_once_confirms_a_removal_by_reading_again_and_retires(hermes):
    hermes.home.mkdir(parents=True)
    start = datetime.now(UTC) - timedelta(minutes=1)
    hermes("windows", "add", "now", "--at", start.isoformat(), "--duration", "1h", check=0)
    hermes("serve", "--once", check=0)
    assert hermes.sentinel.exists()
    hermes("windows", "remove", "now", check=0)
    once = json.loads(hermes("serve", "--once", "--interval", "0.2", "--json", check=0).stdout)
    assert [e["kind"] for e in once["events"]] == ["retire"] and once["pending"] is None
    assert not hermes.sentinel.exists()


def test_serve_refuses_a_bad_windows_file_for_once_with_one_line(hermes):
    hermes.home.mkdir(parents=True)
    (hermes.home / "windows.toml").write_text('[[windows]]\nname = "w"\ncron = "* *"\nduration = "1h"\n')
    result = hermes("serve", "--once")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("hermes: error: ")
    assert "window 'w': field 'cron'" in result.stderr


class Serve:
    """`hermes serve` as a subprocess; its log (stderr) is collected line by line."""

    def __init__(self, hermes, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "hermes_estop", "serve", *args], env=hermes.env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.lines: list[str] = []
        self.running = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)
            if "serve: running" in line:
                self.running.set()

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def stop(self, sig: int) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"hermes serve did not stop on {sig}: {self.log}") from None
        self.reader.join(10)
        return self.proc.returncode


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_cleanly_on_a_signal(hermes, sig):
    hermes.home.mkdir(parents=True)
    serve = Serve(hermes, "--interval", "0.2")
    try:
        assert serve.running.wait(30), serve.log
    finally:
        code = serve.stop(sig)
    assert code == 0, serve.log
    assert "serve: stopped" in serve.log and "Traceback" not in serve.log


@pytest.mark.slow
def test_serve_arms_a_one_shot_window_and_check_sees_it_engage_then_lift(hermes):
    """Robust on a loaded machine: the window is written (in-process, no subprocess start in
    between) only once `hermes serve` is up, starting 2 s later and lasting 8 s, so a slow
    `hermes check` (a second or two on a loaded machine) still lands inside it several times; a
    real defect (never armed, held early or late, not retired) still fails."""
    hermes.home.mkdir(parents=True)
    serve = Serve(hermes, "--interval", "0.5")
    observations: list[tuple[datetime, datetime, int]] = []
    try:
        assert serve.running.wait(60), serve.log
        start = datetime.now(UTC) + timedelta(seconds=2)
        end = start + timedelta(seconds=8)
        WindowsFile(hermes.home).add(Window.parse({"name": "demo", "at": start.isoformat(), "duration": "8s",
                                                   "reason": "e2e"}))
        limit = end + timedelta(seconds=60)
        while datetime.now(UTC) < limit and serve.proc.poll() is None:
            before = datetime.now(UTC)
            code = hermes("check", "-q", timeout=60).returncode
            after = datetime.now(UTC)
            observations.append((before, after, code))
            if code == 0 and before >= end and any(c == 1 for _, _, c in observations):
                break
            time.sleep(0.05)
        limit_s = time.monotonic() + 30
        while hermes.sentinel.exists() and time.monotonic() < limit_s:
            time.sleep(0.1)
        retired = not hermes.sentinel.exists()
    finally:
        code = serve.stop(signal.SIGTERM)
    assert code == 0, serve.log
    assert "Traceback" not in serve.log
    assert "window demo: arm fleet" in serve.log
    held = [(b, a) for b, a, c in observations if c == 1]
    assert held, f"hermes check never saw the window hold: {observations}"
    assert all(a >= start for b, a in held), "held before the window started"
    assert all(b < end for b, a in held), "still held after the window ended"
    last_before, _, last_code = observations[-1]
    assert last_code == 0 and last_before >= end, "the hold did not lift after the end"
    assert retired, "the sentinel was not removed after the end"


class InPlaceEditor:
    """Re-saves a file in place every `every` seconds the way `cat src > file` or an editor's
    `open(path, 'w')` does: truncate, then write (here in two parts, so a reader can also catch
    a valid prefix of the file)."""

    def __init__(self, path, data: bytes, every: float = 0.2) -> None:
        self.path, self.data, self.every = path, data, every
        self.saves = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        half = len(self.data) // 2
        while not self.stop.is_set():
            with open(self.path, "wb") as f:
                f.flush()
                f.write(self.data[:half])
                f.flush()
                f.write(self.data[half:])
            self.saves += 1
            self.stop.wait(self.every)


#: in-place re-saves the scheduler must survive: one every 0.05 s, the daemon's own `--interval`
#: (about 15 s on an idle machine). The exposure is the count: a pass that reads the file reads a
#: half-written one with a chance of (time the file is half-written) / (pass interval) per save,
#: whatever the time between saves; a retire it then made is in the log, whenever it happened.
SAVES = 300


@pytest.mark.slow
def test_serve_inside_a_window_keeps_the_fleet_held_while_an_editor_resaves_windows_toml_in_place(hermes):
    from hermes_estop import Estop

    hermes.home.mkdir(parents=True)
    start = datetime.now(UTC) - timedelta(minutes=1)
    WindowsFile(hermes.home).save([Window.parse({"name": "early", "cron": "0 0 1 1 *", "duration": "1h"}),
                                   Window.parse({"name": "maint", "at": start.isoformat(), "duration": "1h"})])
    raw = (hermes.home / "windows.toml").read_bytes()
    serve = Serve(hermes, "--interval", "0.05")
    editor = InPlaceEditor(hermes.home / "windows.toml", raw, every=0.05)
    estop = Estop(root=hermes.home, home=hermes.home)
    checks = free = 0
    try:
        assert serve.running.wait(60), serve.log
        limit = time.monotonic() + 60
        while not hermes.sentinel.exists() and time.monotonic() < limit:
            time.sleep(0.05)
        assert hermes.sentinel.exists(), f"the window was never armed: {serve.log}"
        editor.thread.start()
        # exposure is counted in re-saves and checks, not in seconds: on a loaded machine it takes
        # longer, it never ends short (the ceiling only stops a machine that stalled for minutes)
        until = time.monotonic() + 600
        while ((editor.saves < SAVES or checks < SAVES) and time.monotonic() < until
               and serve.proc.poll() is None):
            checks += 1
            free += not estop.is_engaged()
            time.sleep(0.01)
        cli_free = hermes("check", "-q", timeout=60).returncode == 0
    finally:
        editor.stop.set()
        editor.thread.join(10)
        code = serve.stop(signal.SIGTERM)
    assert code == 0, serve.log
    assert editor.saves >= SAVES and checks >= SAVES, f"{editor.saves} re-saves, {checks} checks: {serve.log}"
    assert free == 0 and not cli_free, f"{free} of {checks} checks found the fleet free: {serve.log}"
    assert "window maint: retire" not in serve.log and "Traceback" not in serve.log
