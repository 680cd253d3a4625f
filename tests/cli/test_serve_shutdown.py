"""Issue 15 item 9: `hermes serve` stopped by SIGTERM inside a window says which holds it leaves
standing and when they lift (the window's hold stays to its deadman). A real `hermes serve`."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta

import pytest
from test_serve import Serve


def assert_armed(hermes, serve, limit: float = 60.0) -> None:
    """Wait (generously: a loaded machine) for serve to arm the window's hold."""
    end = time.monotonic() + limit
    while not hermes.sentinel.exists() and time.monotonic() < end:
        time.sleep(0.1)
    assert hermes.sentinel.exists(), serve.log


@pytest.mark.slow
def test_serve_stopped_inside_a_window_names_the_hold_it_leaves_and_when_it_lifts(hermes):
    hermes.home.mkdir(parents=True)
    start = datetime.now(UTC) - timedelta(minutes=1)
    hermes("windows", "add", "upgrade", "--at", start.isoformat(), "--duration", "1h", "--reason", "db", check=0)
    serve = Serve(hermes, "--interval", "0.2")
    try:
        assert serve.running.wait(30), serve.log
        assert_armed(hermes, serve, 30)
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


@pytest.mark.slow
def test_serve_stops_within_its_bound_while_a_feed_trickles_and_another_never_matches(hermes):
    """Issue 32 item 5, issue 33 item 5: a feed sending its body a byte every 2 s, and one whose
    rule never matches: an ordinary window covering now is armed, and SIGTERM stops serve
    cleanly (exit 0, every service within its bound)."""
    from feed_servers import HEAD, TAIL, SlowFeed, vevent

    hermes.home.mkdir(parents=True)
    (hermes.home / "never.ics").write_text(HEAD + vevent(
        "UID:never", "DTSTART:20260101T000000Z", "DURATION:PT1H", "RRULE:FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30") + TAIL,
        newline="")
    slow = SlowFeed()
    start = datetime.now(UTC) - timedelta(minutes=1)
    (hermes.home / "windows.toml").write_text(
        f'[[windows]]\nname = "upgrade"\nat = {start.isoformat().replace("+00:00", "Z")}\nduration = "1h"\n\n'
        f'[[calendars]]\nname = "slow"\nurl = "{slow.url}"\n\n[[calendars]]\nname = "never"\nics = "never.ics"\n')
    serve = Serve(hermes, "--interval", "0.2")
    try:
        assert serve.running.wait(60), serve.log
        assert slow.requested.wait(60), serve.log
        assert_armed(hermes, serve)
    finally:
        code = serve.stop(signal.SIGTERM)
        slow.close()
    assert code == 0, serve.log
    assert "did not stop" not in serve.log and "Traceback" not in serve.log
    assert "calendar 'never'" in serve.log
