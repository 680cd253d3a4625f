"""`hermes notify test [NAME]` and `hermes notify status [--json]` as real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from notify_helpers import command, webhook, write_config

from hermes_estop.notify.notifier import build_workers
from inprocess_cli import completed

SRC = str(Path(__file__).resolve().parents[2] / "src")


def hermes(root: Path, *args: str, check: int | None = None) -> subprocess.CompletedProcess[str]:
    """`hermes ARGS` with home `root`, in this process (`completed`): its output is what is checked."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(root), PYTHONPATH=SRC + os.pathsep + env.get("PYTHONPATH", ""))
    result = completed(env, *args)
    if check is not None:
        assert result.returncode == check, (result.returncode, result.stdout, result.stderr)
    return result


def test_notify_test_sends_a_test_event_to_every_target(fleet_root, receiver):
    write_config(fleet_root, webhook("one", receiver.url, secret="k"), webhook("two", receiver.url))
    result = hermes(fleet_root, "notify", "test", check=0)
    assert [line.split()[:2] for line in result.stdout.splitlines()] == [["sent", "one"], ["sent", "two"]]
    assert [e["event"] for e in receiver.events()] == ["test", "test"]
    assert not (fleet_root / "notify-state.json").exists()  # a test touches no cursor


def test_notify_test_name_sends_to_that_target_only(fleet_root, receiver):
    write_config(fleet_root, webhook("one", receiver.url), webhook("two", "http://127.0.0.1:9/"))
    hermes(fleet_root, "notify", "test", "one", check=0)
    assert len(receiver.ids()) == 1


def test_notify_test_exits_1_naming_the_target_that_refused(fleet_root, receiver):
    receiver.default = 500
    write_config(fleet_root, webhook("one", receiver.url))
    result = hermes(fleet_root, "notify", "test", check=1)
    assert result.stdout.startswith("FAILED  one") and "HTTP 500" in result.stdout


@pytest.mark.parametrize(("config", "args", "words"), [
    (None, ("notify", "status"), "no [[notify]] targets"),
    (webhook("one", "http://h/"), ("notify", "test", "nope"), "no notify target named 'nope'"),
    (webhook("one", "http://h/", events=["bogus"]), ("notify", "status"), "field 'events'"),
])
def test_bad_config_or_name_is_one_line_and_exit_2(fleet_root, config, args, words):
    if config is not None:
        write_config(fleet_root, config)
    result = hermes(fleet_root, *args, check=2)
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_notify_status_shows_cursor_lag_and_last_error_escaped(fleet_root, estop, receiver, clock):
    script = "import sys; sys.stdin.read(); sys.stderr.write('\\x1b[31mred\\n'); sys.exit(1)"
    write_config(fleet_root, webhook("hook", receiver.url), command("cmd", [sys.executable, "-c", script]))
    estop.engage(reason="one")
    estop.release()
    for worker in build_workers(estop.fleet):
        worker.tick(clock())
    rows = {row["name"]: row for row in json.loads(hermes(fleet_root, "notify", "status", "--json", check=0).stdout)}
    size = (fleet_root / "estop-audit.jsonl").stat().st_size
    assert (rows["hook"]["cursor"], rows["hook"]["lag"], rows["hook"]["last_error"]) == (size, 0, None)
    assert (rows["cmd"]["cursor"], rows["cmd"]["lag"], rows["cmd"]["failures"]) == (0, 2, 1)
    assert rows["cmd"]["last_error"] == "exit 1: \\x1b[31mred"
    text = hermes(fleet_root, "notify", "status", check=0).stdout
    assert "\x1b" not in text and "\\x1b[31mred" in text
    assert "2 event(s) pending" in text and f"file:{size}, 2 delivered" in text
