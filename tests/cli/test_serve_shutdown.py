"""Issue 15 item 9: `hermes serve` stopped by SIGTERM inside a window says which holds it leaves
standing and when they lift (the window's hold stays to its deadman). A real `hermes serve`."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta

import pytest
from test_serve import Serve


@pytest.mark.slow
def test_serve_stopped_inside_a_window_names_the_hold_it_leaves_and_when_it_lifts(hermes):
    hermes.home.mkdir(parents=True)
    start = datetime.now(UTC) - timedelta(minutes=1)
    hermes("windows", "add", "upgrade", "--at", start.isoformat(), "--duration", "1h", "--reason", "db", check=0)
    serve = Serve(hermes, "--interval", "0.2")
    try:
        assert serve.running.wait(30), serve.log
        limit = time.monotonic() + 30
        while not hermes.sentinel.exists() and time.monotonic() < limit:
            time.sleep(0.1)
        assert hermes.sentinel.exists(), serve.log
    finally:
        code = serve.stop(signal.SIGTERM)
    assert code == 0, serve.log
    lines = [line for line in serve.lines if "serve: stopped" in line]
    assert len(lines) == 1, serve.log
    assert "leaving 1 hold(s) standing" in lines[0] and "window:upgrade" in lines[0]
    assert "lifts at " in lines[0]
    hermes("check", check=1)  # the hold stays to its deadman


@pytest.mark.slow
def test_serve_stopped_with_nothing_held_says_so(hermes):
    hermes.home.mkdir(parents=True)
    serve = Serve(hermes, "--interval", "0.2")
    try:
        assert serve.running.wait(30), serve.log
    finally:
        code = serve.stop(signal.SIGTERM)
    assert code == 0 and "serve: stopped; no hold left standing" in serve.log
