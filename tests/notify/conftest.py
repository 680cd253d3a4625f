"""Fixtures of the notifier tests: a real webhook receiver, and a fleet on a fake clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from notify_helpers import Receiver

from hermes_estop import Estop


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def estop(fleet_root: Path, clock) -> Iterator[Estop]:
    instance = Estop(home=fleet_root, root=fleet_root, clock=clock, store="file", actor="tester")
    yield instance
    instance.close()
