"""Fixtures of the observability tests: a fleet on a fake clock, its windows, and the real HTTP
server on 127.0.0.1:0."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_estop import Estop
from hermes_estop.observe.server import StatusServer


@pytest.fixture
def estop(fleet_root: Path, clock: Any) -> Iterator[Estop]:
    """The fleet root's Estop on the fake clock (a file store)."""
    fleet = Estop(home=fleet_root, root=fleet_root, clock=clock, store="file", actor="operator@test")
    yield fleet
    fleet.close()


@pytest.fixture
def server(estop: Estop) -> Iterator[StatusServer]:
    """The real endpoints on 127.0.0.1, a free port, served in a daemon thread."""
    with StatusServer(estop, "127.0.0.1", 0) as running:
        yield running
