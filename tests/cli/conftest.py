"""Run `hermes` against a temporary home: as a real subprocess, or in this process where the
test module says its subject is the commands' output, exit codes and files
(`HERMES_IN_PROCESS = True`: `InProcessHermes`)."""

from __future__ import annotations

import pytest
from cli_runner import SRC, Hermes, InProcessHermes  # noqa: F401


def _runner(request: pytest.FixtureRequest) -> type[Hermes]:
    return InProcessHermes if getattr(request.module, "HERMES_IN_PROCESS", False) else Hermes


@pytest.fixture
def hermes(request, tmp_path) -> Hermes:
    return _runner(request)(tmp_path / "home")


@pytest.fixture
def profile_hermes(request, tmp_path) -> Hermes:
    root = tmp_path / "fleet"
    return _runner(request)(root / "profiles" / "ops", root)
