"""Run `hermes` as a real subprocess against a temporary home."""

from __future__ import annotations

import pytest
from cli_runner import SRC, Hermes  # noqa: F401


@pytest.fixture
def hermes(tmp_path) -> Hermes:
    return Hermes(tmp_path / "home")


@pytest.fixture
def profile_hermes(tmp_path) -> Hermes:
    root = tmp_path / "fleet"
    return Hermes(root / "profiles" / "ops", root)
