"""A running `hermes serve` enforces the fleet's arming policy as it is now (issue 37): a window
longer than `max_ttl` is not armed, and once the policy is changed to allow it, the same
running process arms it, with no restart."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta

import pytest
from test_serve import Serve

from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile


def wait_for(condition, timeout: float = 90.0) -> bool:  # type: ignore[no-untyped-def]
    limit = time.monotonic() + timeout
    while time.monotonic() < limit:
        if condition():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_a_running_serve_arms_a_window_once_the_policy_allows_it(hermes):  # type: ignore[no-untyped-def]
    hermes.home.mkdir(parents=True)
    (hermes.home / "estop.toml").write_text('[policy]\nmax_ttl = "1h"\n')
    WindowsFile(hermes.home).add(Window.parse({"name": "long", "at": (datetime.now(UTC) - timedelta(minutes=1)).isoformat(),
                                               "duration": "3h", "reason": "reindex"}))
    serve = Serve(hermes, "--interval", "0.2")
    try:
        assert serve.running.wait(90), serve.log
        assert wait_for(lambda: "max_ttl" in serve.log), serve.log
        assert hermes("check", "-q").returncode == 0  # not armed: the policy refuses it
        (hermes.home / "estop.toml").write_text('[policy]\nmax_ttl = "4h"\n')
        assert wait_for(lambda: hermes("check", "-q").returncode == 1), serve.log
    finally:
        code = serve.stop(signal.SIGTERM)
    assert code == 0, serve.log
