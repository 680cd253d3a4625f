"""`hermes demo` end to end: it must show (and check) a window arming, the consumers holding, the
operator's work running through the hold, and everything resuming at the deadman."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_demo_runs_the_whole_system_and_its_checks_pass(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    result = subprocess.run([sys.executable, "-m", "hermes_estop", "demo", "--dir", str(tmp_path / "demo"), "--json"],
                            capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout[result.stdout.index("{\n"):])
    assert summary["ok"] is True
    assert len(summary["checks"]) == 6 and all(check["ok"] for check in summary["checks"])
    assert "HELD by fleet" in result.stdout and "FREE again" in result.stdout
    assert (tmp_path / "demo" / "estop-audit.jsonl").exists()


def test_demo_refuses_a_directory_that_is_not_empty(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    result = subprocess.run([sys.executable, "-m", "hermes_estop", "demo", "--dir", str(tmp_path / "busy")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "not empty" in result.stderr and len(result.stderr.strip().splitlines()) == 1
