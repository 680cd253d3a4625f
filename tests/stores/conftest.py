"""The `backend` fixture: every contract test runs once per store backend.

A backend knows how to open a store for a fleet root, how to plant raw body bytes at a location
behind the API's back (a hand edit, a corrupt write, another tool's body), and the store spec a
child process passes to `open_store` to reach the same store.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_estop.model.homes import Layout, Location
from hermes_estop.process.estop import Estop
from hermes_estop.stores import FileStore, HoldStore


class Backend:
    name = "abstract"

    def open(self, root: Path) -> HoldStore:
        raise NotImplementedError

    def spec(self, root: Path) -> str:
        """What a child process passes to `open_store(spec, root)`."""
        raise NotImplementedError

    def plant(self, store: HoldStore, location: Location, raw: bytes) -> None:
        """Put `raw` as the body at `location`, bypassing the store's write path."""
        raise NotImplementedError

    def present(self, store: HoldStore, location: Location) -> bool:
        """Whether anything is stored at `location`, read behind the store's back."""
        raise NotImplementedError


class FileBackend(Backend):
    name = "file"

    def open(self, root: Path) -> HoldStore:
        return FileStore(root)

    def spec(self, root: Path) -> str:
        return "file"

    def plant(self, store: HoldStore, location: Location, raw: bytes) -> None:
        location.path.mkdir(parents=True, exist_ok=True)
        tmp = location.path / ".planted"
        tmp.write_bytes(raw)
        os.replace(tmp, location.sentinel)

    def present(self, store: HoldStore, location: Location) -> bool:
        return os.path.lexists(location.sentinel)


#: Every backend the contract suite runs on; the PostgreSQL backend appends itself here.
BACKENDS: list[Backend] = [FileBackend()]

from pg_helpers import PostgresBackend  # noqa: E402  (needs a server: started on first use)

BACKENDS.append(PostgresBackend())  # type: ignore[arg-type]  # pg_helpers cannot import this conftest's Backend


@pytest.fixture(params=BACKENDS, ids=lambda backend: backend.name)
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.param


@pytest.fixture
def store(backend: Backend, fleet_root: Path) -> Iterator[HoldStore]:
    opened = backend.open(fleet_root)
    yield opened
    opened.close()


@pytest.fixture
def fleet_estop(store: HoldStore, root_layout: Layout, clock) -> Estop:
    """A process whose home is the fleet root."""
    return Estop(layout=root_layout, store=store, clock=clock, actor="test@host")


@pytest.fixture
def ops_estop(store: HoldStore, profile_layout: Layout, clock) -> Estop:
    """A process serving profile `ops`: candidates are the ops home and the fleet root."""
    return Estop(layout=profile_layout, store=store, clock=clock, actor="test@host")
