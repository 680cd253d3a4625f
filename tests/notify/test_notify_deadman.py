"""Issue 19: with `hermes serve` running and nothing else reading, a `--ttl 2s` hold's `expire`
audit line is written within `--interval` + 1 s of its deadman (by the daemon's deadman, not by a
reader), and the `expire` notification goes out; on both stores."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from notify_helpers import Receiver, webhook, write_config

from hermes_estop import Estop
from pg_helpers import pg_server, pg_url  # noqa: F401

SRC = str(Path(__file__).resolve().parents[2] / "src")
INTERVAL = 1.0

pytestmark = pytest.mark.slow


def _serve(root: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(root), PYTHONPATH=SRC + os.pathsep + env.get("PYTHONPATH", ""))
    with open(root / "serve.log", "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "hermes_estop", "serve", "--interval", str(INTERVAL)], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)


def _wait_running(root: Path, process: subprocess.Popen[bytes]) -> None:
    for _ in range(1200):
        if "serve: running" in (root / "serve.log").read_text(errors="replace"):
            return
        assert process.poll() is None, (root / "serve.log").read_text(errors="replace")
        time.sleep(0.05)
    raise AssertionError("serve did not start: " + (root / "serve.log").read_text(errors="replace"))


@pytest.fixture(params=["file", "postgresql"])
def store_spec(request: pytest.FixtureRequest) -> str:
    if request.param == "file":
        return "file"
    return request.getfixturevalue("pg_url")


def test_serve_retires_an_expired_hold_and_announces_it_with_no_other_reader(tmp_path, store_spec):
    root = tmp_path / "fleet"
    root.mkdir()
    receiver = Receiver()
    store_line = f'store = "{store_spec}"\n' if store_spec != "file" else ""
    write_config(root, store_line + webhook("hook", receiver.url, events=["expire"]))
    process = _serve(root)
    estop = Estop(home=root, root=root, actor="operator@test")
    try:
        _wait_running(root, process)
        hold = estop.engage(reason="maintenance", ttl="2s")
        assert receiver.wait_for(1, timeout=120), (root / "serve.log").read_text(errors="replace")
        [event] = receiver.events()
        assert event["event"] == "expire" and event["generation"] == hold.generation
        [expired] = [e for e in estop.history() if e.event == "expire"]
        assert expired.generation == hold.generation
        assert hold.expires_at is not None
        # recorded instants, not the test's timing: the daemon wrote the line within the bound
        assert hold.expires_at <= expired.time <= hold.expires_at + timedelta(seconds=INTERVAL + 1)
        assert "deadman: the hold at fleet" in (root / "serve.log").read_text(errors="replace")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        finally:
            if process.poll() is None:
                process.kill()
        receiver.close()
        estop.close()
