"""The record storage a store hands out (`HoldStore.open_ledger()`, `stores.base`), on every
backend (issue 14 item 3): the window ledger lives where the fleet's holds live, chosen by the
store itself, with the same file name and JSON shape, and the same table, as before the move."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.errors import StoreError
from hermes_estop.stores import FileStore, HoldStore
from hermes_estop.stores.base import LEDGER_FILE, JsonRecordFile, file_ledger
from hermes_estop.stores.postgresql import PostgresStore
from hermes_estop.stores.unavailable import UnavailableStore
from hermes_estop.windows.ledger import ARMED, LedgerEntry, OccurrenceLedger, open_ledger
from pg_helpers import pg_server, pg_url, session_server  # noqa: F401

T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)


def record(end: datetime = T0, state: str = ARMED) -> dict[str, object]:
    return {"window": "w", "occurrence": (end - timedelta(hours=1)).isoformat(), "scope": "fleet",
            "end": end.isoformat(), "state": state, "generation": "g1", "updated_at": T0.isoformat(), "detail": None}


def test_the_store_hands_out_the_ledger_where_it_keeps_the_fleet(backend, store, fleet_root):
    records = store.open_ledger()
    if backend.name == "file":
        assert isinstance(records, JsonRecordFile) and records.path == fleet_root / LEDGER_FILE
    else:
        assert records.describe().endswith(f"({store.schema}.occurrences)")
    assert records.name == backend.name


def test_records_round_trip_upsert_remove_and_prune_on_every_backend(store):
    records = store.open_ledger()
    assert records.load() == {}
    old, kept, gone = record(T0 - timedelta(days=8)), record(T0), record(T0, state="skipped")
    records.update({"old": old, "kept": kept, "gone": gone})
    assert records.load() == {"old": old, "kept": kept, "gone": gone}
    records.update({"kept": {**kept, "state": "ended"}}, remove=["gone", "never"], prune_before=T0 - timedelta(days=7))
    assert records.load() == {"kept": {**kept, "state": "ended"}}


def test_the_typed_ledger_over_the_store_sees_what_the_store_keeps(store, fleet_root):
    end = T0 + timedelta(microseconds=123456)
    entry = LedgerEntry(key="fleet/w@x", window="w", occurrence="x", scope="fleet", end=end, state=ARMED,
                        generation="g", updated_at=T0, detail="why")
    open_ledger(Fleet(store, fleet_root)).commit([entry])
    assert OccurrenceLedger(store.open_ledger()).load() == {entry.key: entry}


def test_the_file_ledger_keeps_its_name_and_json_shape(tmp_path):
    """The shape `JsonFileLedger` wrote before the storage moved into the store, now written
    compactly by `json`'s C encoder (issue 35 retired the hand-rendered indented writer)."""
    entry = LedgerEntry(key="fleet/w@2026-06-01T11:00:00+00:00", window="w", occurrence="2026-06-01T11:00:00+00:00",
                        scope="fleet", end=T0, state=ARMED, generation="g", updated_at=T0, detail=None)
    open_ledger(Fleet.of_files(tmp_path)).commit([entry])
    text = (tmp_path / "windows-state.json").read_text()
    assert json.loads(text) == {"format": 1, "occurrences": {"fleet/w@2026-06-01T11:00:00+00:00": {
        "window": "w", "occurrence": "2026-06-01T11:00:00+00:00", "scope": "fleet", "end": "2026-06-01T12:00:00+00:00",
        "state": "armed", "generation": "g", "updated_at": "2026-06-01T12:00:00+00:00", "detail": None}}}
    assert text.startswith('{"format":1,"occurrences":{"fleet/w@') and text.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".windows-state.json.lock", "windows-state.json"]


def test_a_commit_over_a_damaged_file_entry_writes_nothing(tmp_path):
    """As before the move: the file can hold what this program did not write; a commit then
    fails naming the file rather than carrying the damage along."""
    path = tmp_path / LEDGER_FILE
    body = json.dumps({"format": 1, "occurrences": {"k": {"window": "a"}}})
    path.write_text(body)
    ledger = open_ledger(Fleet.of_files(tmp_path))
    entry = LedgerEntry(key="fleet/w@x", window="w", occurrence="x", scope="fleet", end=T0, state=ARMED)
    with pytest.raises(StoreError, match=f"{path}.*is unreadable.*'k'"):
        ledger.commit([entry])
    assert path.read_text() == body


def test_a_record_with_no_readable_expiry_is_never_pruned(tmp_path):
    records = file_ledger(tmp_path)
    records.update({"odd": {"window": "w", "end": "someday"}})
    records.update({}, prune_before=T0)
    assert set(records.load()) == {"odd"}


def test_the_file_ledger_version_changes_with_the_file(tmp_path):
    records = file_ledger(tmp_path)
    absent = records.version()
    records.update({"a": record()})
    first = records.version()
    records.update({"b": record()})
    assert len({absent, first, records.version()}) == 3


@pytest.mark.parametrize("make", [lambda root: UnavailableStore("bad url"), lambda root: FileStore(root)])
def test_a_store_keeps_the_ledger_in_the_root_it_is_given(make, tmp_path):
    store: HoldStore = make(tmp_path / "elsewhere")
    assert store.open_ledger(tmp_path).describe() == str(tmp_path / LEDGER_FILE)


def test_a_store_with_no_fleet_root_refuses_to_guess_one():
    with pytest.raises(StoreError, match="no fleet root"):
        UnavailableStore("bad url").open_ledger()


@pytest.mark.postgresql
def test_rows_written_before_the_move_still_load(pg_url):  # noqa: F811
    """Compatibility with existing data: a row as the old `PostgresLedger` wrote it."""
    store = PostgresStore(pg_url, share=False)
    store.init_schema()
    with session_server().admin() as conn:
        conn.execute(f'INSERT INTO "{store.schema}".occurrences (key, window_name, occurrence, scope, ends_at, state, '
                     "generation, updated_at, detail) VALUES ('k', 'w', 'o', 'fleet', %s, 'released', '', NULL, NULL)",
                     [T0])
    entry = OccurrenceLedger(store.open_ledger()).load()["k"]
    store.close()
    assert entry == LedgerEntry(key="k", window="w", occurrence="o", scope="fleet", end=T0, state="released")
