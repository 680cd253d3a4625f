"""A running `hermes serve` compiles the schedule of an edited windows file itself, so the next
operator command reads it instead of compiling it (issue 35: warm within a poll interval)."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime

import pytest
from test_serve import Serve

EDITED = """
[[windows]]
name = "added-by-hand"
cron = "30 2 * * 0"
timezone = "Europe/Berlin"
duration = "1h"
"""


@pytest.mark.slow
def test_a_running_serve_compiles_an_edited_file_before_any_command_asks(hermes, kept_schedule):
    hermes.home.mkdir(parents=True)
    hermes("windows", "add", "nightly", "--cron", "0 3 * * *", "--duration", "30m", check=0)
    path = hermes.home / "windows.toml"
    serve = Serve(hermes, "--interval", "0.2")
    try:
        assert serve.running.wait(60), serve.log
        with path.open("a") as file:  # an editor's save: no hermes command runs after it
            file.write(EDITED)
        raw = path.read_bytes()
        # counted in checks, not seconds: a loaded machine takes longer, the ceiling only ends a stall
        limit = time.monotonic() + 120
        while kept_schedule(path, raw, datetime.now(UTC)) is None and time.monotonic() < limit \
                and serve.proc.poll() is None:
            time.sleep(0.1)
        kept = kept_schedule(path, raw, datetime.now(UTC))
    finally:
        code = serve.stop(signal.SIGTERM)
    assert code == 0, serve.log
    assert kept is not None, f"serve never compiled the edited file: {serve.log}"
    assert kept.row_of("added-by-hand") is not None and kept.row_of("nightly") is not None
    listed = hermes("windows", "list", check=0).stdout
    assert "added-by-hand" in listed
    assert kept_schedule(path, raw, datetime.now(UTC)) is not None
