"""Upstream: `engage()` returns the sentinel `Path` it wrote (`cmd_pause` prints it and callers
use `.exists()`)."""

from __future__ import annotations

from pathlib import Path


def test_engage_returns_the_sentinel_path(estop, dot_hermes):
    path = estop.engage(reason="maint")
    assert isinstance(path, Path)
    assert path.exists() and path == estop.sentinel_path()
    assert path.resolve() == (dot_hermes / estop.SENTINEL_NAME).resolve()


def test_cmd_pause_prints_the_path(estop):
    line = f"    sentinel: {estop.engage(reason='maint', ttl='45m')}"
    assert line.endswith("/.hermes/ESTOP")


def test_a_profile_engage_returns_the_profile_sentinel(estop, dot_hermes, monkeypatch):
    monkeypatch.setenv("HERMES_HOME", str(dot_hermes / "profiles" / "ops"))
    path = estop.engage()
    assert path.resolve() == (dot_hermes / "profiles" / "ops" / "ESTOP").resolve() and path.exists()
    assert not (dot_hermes / "ESTOP").exists()
