"""The fleet, an operator's token and the write API that the in-process API tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_estop import Estop
from hermes_estop.api.routes import WriteApi
from hermes_estop.api.tokens import TokenTable


@pytest.fixture
def estop(fleet_root: Path) -> Iterator[Estop]:
    fleet = Estop(home=fleet_root, root=fleet_root, store="file", actor="operator@test")
    yield fleet
    fleet.close()


@pytest.fixture
def secret(estop: Estop) -> str:
    """The secret of an operator's token called `ops`."""
    return TokenTable(estop.fleet).create("ops", "operator", None, estop.clock())[1]


@pytest.fixture
def api(estop: Estop) -> WriteApi:
    return WriteApi(estop, lambda: {}, write=True)
