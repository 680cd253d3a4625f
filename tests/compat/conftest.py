"""hermes-estop as an integrator would use it in place of hermes-agent's `agent/estop.py`: a
module `agent/estop.py` that re-exports `hermes_estop`, imported as `agent.estop`. Every test in
this package talks to that alias only, and pins a behaviour of the upstream contract."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import hermes_estop

SHIM = '''"""agent.estop, provided by hermes-estop."""
from hermes_estop import *  # noqa: F401,F403
from hermes_estop import GENERATION_FIELD, SENTINEL_NAME, parse_duration  # noqa: F401
'''


@pytest.fixture
def dot_hermes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user home whose `~/.hermes` is the fleet root; no `HERMES_ROOT`, the file store."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("HERMES_ROOT", raising=False)
    monkeypatch.delenv("HERMES_ESTOP_STORE", raising=False)
    monkeypatch.delenv("HERMES_HOME", raising=False)
    root = tmp_path / ".hermes"
    root.mkdir()
    return root


@pytest.fixture
def estop(tmp_path: Path, dot_hermes: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """`agent.estop`, imported through the shim."""
    shim_dir = tmp_path / "shim"
    (shim_dir / "agent").mkdir(parents=True)
    (shim_dir / "agent" / "__init__.py").write_text("")
    (shim_dir / "agent" / "estop.py").write_text(SHIM)
    monkeypatch.syspath_prepend(str(shim_dir))
    for name in ("agent", "agent.estop"):
        sys.modules.pop(name, None)
    module = importlib.import_module("agent.estop")
    yield module
    for name in ("agent", "agent.estop"):
        sys.modules.pop(name, None)
    hermes_estop.close()
