"""Hold stores: the contract (`base.HoldStore`) and one module per backend."""

from __future__ import annotations

from pathlib import Path

from hermes_estop.model.errors import InvalidArgument
from hermes_estop.stores.base import HoldStore
from hermes_estop.stores.file import FileStore

__all__ = ["HoldStore", "FileStore", "open_store", "is_postgres_url"]


def is_postgres_url(spec: str) -> bool:
    return spec.startswith(("postgresql://", "postgres://"))


def open_store(spec: str | None, root: Path) -> HoldStore:
    """The store a spec names: empty or "file" for the sentinel store of fleet root `root`, a
    `postgresql://` URL for the fleet backend."""
    if not spec or spec == "file":
        return FileStore(root)
    if is_postgres_url(spec):
        from hermes_estop.stores.postgresql import PostgresStore

        return PostgresStore(spec, root=root)
    raise InvalidArgument(f"invalid store {spec!r}: expected 'file' or a postgresql:// URL")
