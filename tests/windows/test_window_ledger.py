"""The ledger contract, run against every implementation (today: the JSON file)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.errors import StoreError
from hermes_estop.stores.base import LEDGER_FILE
from hermes_estop.windows.ledger import (
    ARMED,
    ENDED,
    SKIPPED,
    LedgerEntry,
    OccurrenceLedger,
    open_ledger,
)

T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)


def entry(name: str, end: datetime = T0, state: str = ARMED, generation: str | None = "g") -> LedgerEntry:
    occurrence = (end - timedelta(hours=1)).isoformat()
    return LedgerEntry(key=f"fleet/{name}@{occurrence}", window=name, occurrence=occurrence, scope="fleet", end=end,
                       state=state, generation=generation, updated_at=T0, detail="why")


@pytest.fixture(params=["file"])
def ledger(request, tmp_path: Path) -> OccurrenceLedger:
    return open_ledger(Fleet.of_files(tmp_path))


def test_empty_ledger_loads_empty(ledger):
    assert ledger.load() == {}


def test_commit_upserts_and_keeps_entries_not_named(ledger):
    a, b = entry("a"), entry("b")
    ledger.commit([a, b])
    moved = a.moved(ENDED, T0 + timedelta(minutes=1))
    ledger.commit([moved])
    assert ledger.load() == {a.key: moved, b.key: b}


def test_prune_drops_only_entries_ended_before_the_cutoff(ledger):
    old, recent = entry("old", T0 - timedelta(days=8)), entry("recent", T0)
    ledger.commit([old, recent])
    ledger.commit([], prune_before=T0 - timedelta(days=7))
    assert set(ledger.load()) == {recent.key}


def test_commit_removes_the_named_entries_with_the_changes(ledger):
    ledger.commit([entry("a"), entry("b", state=SKIPPED), entry("c")])
    ledger.commit([entry("c", state=ENDED)], remove=[entry("b").key, "fleet/never@x"])
    assert ledger.load() == {entry("a").key: entry("a"), entry("c").key: entry("c", state=ENDED)}


def test_a_new_instance_sees_what_was_committed(ledger, tmp_path):
    ledger.commit([entry("a")])
    assert open_ledger(Fleet.of_files(tmp_path)).load() == ledger.load()


def test_unreadable_file_ledger_raises_naming_the_file(tmp_path):
    ledger = open_ledger(Fleet.of_files(tmp_path))
    for body in (b"{", b"[]", json.dumps({"format": 1, "occurrences": {"k": {"window": "a"}}}).encode(),
                 json.dumps({"format": 9, "occurrences": {}}).encode()):
        (tmp_path / LEDGER_FILE).write_bytes(body)
        with pytest.raises(StoreError, match=str(tmp_path / LEDGER_FILE)):
            ledger.load()


def test_file_ledger_is_replaced_atomically_and_leaves_no_temporaries(tmp_path):
    ledger = open_ledger(Fleet.of_files(tmp_path))
    ledger.commit([entry(f"w{i}") for i in range(5)])
    assert sorted(p.name for p in tmp_path.iterdir()) == [".windows-state.json.lock", "windows-state.json"]
    data = json.loads((tmp_path / LEDGER_FILE).read_text())
    assert data["format"] == 1 and len(data["occurrences"]) == 5
