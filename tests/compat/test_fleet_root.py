"""Upstream: any `HERMES_HOME` under `~/.hermes` has the fleet root `~/.hermes`, so a sentinel
at `~/.hermes/ESTOP` pauses it; `<R>/profiles/<name>` elsewhere has the root `<R>`."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("sub", ["custom", "profiles/ops", "profiles/ops/sub", "deep/er/home"])
def test_a_home_under_dot_hermes_honours_the_root_sentinel(estop, dot_hermes, monkeypatch, sub):
    (dot_hermes / "ESTOP").touch()
    monkeypatch.setenv("HERMES_HOME", str(dot_hermes / sub))
    assert estop.is_engaged()
    assert estop.paused_reply() is not None
    (dot_hermes / "ESTOP").unlink()
    assert not estop.is_engaged()


def test_a_custom_root_profile_honours_its_root(estop, tmp_path, monkeypatch):
    root = tmp_path / "srv"
    (root / "profiles" / "ops").mkdir(parents=True)
    (root / "ESTOP").touch()
    monkeypatch.setenv("HERMES_HOME", str(root / "profiles" / "ops"))
    assert estop.is_engaged()


def test_disengage_from_a_nested_home_removes_the_root_sentinel(estop, dot_hermes, monkeypatch):
    (dot_hermes / "ESTOP").touch()
    monkeypatch.setenv("HERMES_HOME", str(dot_hermes / "custom"))
    assert estop.disengage()
    assert not (dot_hermes / "ESTOP").exists()
