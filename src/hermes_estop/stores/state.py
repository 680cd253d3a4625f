"""Named states of one fleet-wide service (the notifier's per-target cursors), kept where the
fleet's holds are kept so that whichever process leads the service next finds them: the contract
(`StateTable`) and the file implementation; the PostgreSQL one is `pg_state.PgStateTable`.

A state is a JSON object the service owns; the table only keeps it, by name. `save` replaces
one name's state and leaves every other name's as it is (targets delivering from several
threads never lose each other's progress).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from hermes_estop.system.fsutil import locked_update, read_optional

__all__ = ["JsonStateFile", "StateTable"]

_MAX_STATE_BYTES = 4 * 1024 * 1024


class StateTable(ABC):
    """Named JSON states, shared by every process of a fleet."""

    name: str = "abstract"

    @abstractmethod
    def load(self) -> dict[str, Any]:
        """Every name's state. Raises `OSError`/`StoreError` when it cannot be read; a state that
        is not JSON reads as no state (the service starts that name over)."""

    @abstractmethod
    def save(self, name: str, state: dict[str, Any]) -> None:
        """Persist `name`'s state durably. Raises `StoreError` when it cannot be written."""


class JsonStateFile(StateTable):
    """`<root>/<service>-state.json`, `{"version": 1, "targets": {name: state}}`, rewritten
    with `fsutil.locked_update` under `.<service>-state.lock` (read-modify-write of one name)."""

    name = "file"

    def __init__(self, root: Path, service: str) -> None:
        self.path = Path(root) / f"{service}-state.json"
        self.lock = Path(root) / f".{service}-state.lock"

    @staticmethod
    def _parse(raw: bytes | None) -> dict[str, Any]:
        if raw is None:
            return {}
        try:
            data = json.loads(raw)
        except ValueError:
            return {}
        targets = data.get("targets") if isinstance(data, dict) else None
        return targets if isinstance(targets, dict) else {}

    def load(self) -> dict[str, Any]:
        return self._parse(read_optional(self.path, _MAX_STATE_BYTES))

    def save(self, name: str, state: dict[str, Any]) -> None:
        with locked_update(self.path, limit=_MAX_STATE_BYTES, lock_path=self.lock) as file:
            targets = self._parse(file.current)
            targets[name] = state
            body = json.dumps({"version": 1, "targets": targets}, indent=1, sort_keys=True) + "\n"
            file.replace(body.encode("utf-8"))
