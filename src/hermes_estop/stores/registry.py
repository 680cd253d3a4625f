"""The consumer registry's storage (`fleet.registry.entries.ConsumerEntry`, one per consumer process): the
contract and the file implementation; the PostgreSQL one is `pg_registry.PgConsumerTable`.

The file form is one small JSON file per process, `<root>/consumers/<key>.json`, replaced
atomically (write, then rename) at each report: no lock, no read-modify-write, so a consumer's
report never waits on another's, and a reader lists the directory. A report is a heartbeat, not
a record: it is not fsynced (a crash loses at most the last one, and the process with it).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path

from hermes_estop.model.errors import StoreError
from hermes_estop.system.fsread import read_regular
from hermes_estop.system.fsutil import atomic_write
from hermes_estop.fleet.registry.entries import ConsumerEntry

__all__ = ["CONSUMERS_DIR", "ConsumerFiles", "ConsumerTable"]

CONSUMERS_DIR = "consumers"
_MAX_ENTRY_BYTES = 64 * 1024
_SUFFIX = ".json"


class ConsumerTable(ABC):
    """Every registered consumer of one fleet, shared by every process of it."""

    name: str = "abstract"

    @abstractmethod
    def put(self, entry: ConsumerEntry) -> None:
        """Register or update `entry` (by its key). Raises `StoreError` when it cannot be written."""

    @abstractmethod
    def remove(self, key: str) -> None:
        """Deregister `key`; nothing when it is not there. Raises `StoreError` on failure."""

    @abstractmethod
    def entries(self) -> list[ConsumerEntry]:
        """Every entry that can be read (a damaged one is skipped). Raises `StoreError` when
        the registry as a whole cannot be read."""


class ConsumerFiles(ConsumerTable):
    name = "file"

    def __init__(self, root: Path) -> None:
        self.dir = Path(root) / CONSUMERS_DIR

    def _path(self, key: str) -> Path:
        if not key or "/" in key or key.startswith("."):
            raise StoreError(f"invalid consumer key {key!r}")
        return self.dir / f"{key}{_SUFFIX}"

    def put(self, entry: ConsumerEntry) -> None:
        """Replace the entry's file (atomically; not fsynced: a heartbeat rewritten every second)."""
        path = self._path(entry.key)
        try:
            self.dir.mkdir(mode=0o755, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None
        atomic_write(path, entry.encode(), durable=False)

    def remove(self, key: str) -> None:
        path = self._path(key)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreError(f"cannot remove {path}: {exc.strerror or exc}") from None

    def entries(self) -> list[ConsumerEntry]:
        try:
            names = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"cannot list {self.dir}: {exc.strerror or exc}") from None
        found = []
        for name in names:
            if name.startswith(".") or not name.endswith(_SUFFIX):
                continue
            try:
                raw = read_regular(self.dir / name, _MAX_ENTRY_BYTES)
            except (OSError, StoreError):
                continue  # removed meanwhile (a deregistration), or not a regular file
            entry = ConsumerEntry.decode(raw)
            if entry is not None and entry.key == name[: -len(_SUFFIX)]:
                found.append(entry)
        return found
