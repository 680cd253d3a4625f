"""The window ledger on PostgreSQL (`open_ledger` over a PostgreSQL store): the `OccurrenceLedger` contract tests of
`test_window_ledger.py`, run here on the `occurrences` table (imported, with this module's
`ledger` fixture), and what only a shared ledger has."""

from __future__ import annotations

from datetime import timedelta

import pytest
from test_window_ledger import (  # noqa: F401  (the contract, collected here on PostgreSQL)
    T0,
    entry,
    test_commit_removes_the_named_entries_with_the_changes,
    test_commit_upserts_and_keeps_entries_not_named,
    test_empty_ledger_loads_empty,
    test_prune_drops_only_entries_ended_before_the_cutoff,
)

from hermes_estop.model.errors import StoreError
from hermes_estop.stores.postgresql import PostgresStore
from hermes_estop.windows.ledger import ENDED, RELEASED, LedgerEntry, OccurrenceLedger
from pg_helpers import pg_server, pg_url  # noqa: F401

pytestmark = pytest.mark.postgresql


@pytest.fixture
def stores(pg_url):  # noqa: F811
    made = []

    def make() -> PostgresStore:
        made.append(PostgresStore(pg_url, share=False))
        return made[-1]

    yield make
    for store in made:
        store.close()


@pytest.fixture
def ledger(stores) -> OccurrenceLedger:
    store = stores()
    made = OccurrenceLedger(store.open_ledger())
    made.schema = store.schema  # type: ignore[attr-defined]  # where the test edits rows by hand
    return made


def test_another_scheduler_sees_what_one_committed(stores, ledger):
    ledger.commit([entry("a"), entry("b", state=RELEASED)])
    assert OccurrenceLedger(stores().open_ledger()).load() == ledger.load()


def test_a_failed_commit_changes_nothing(ledger):
    ledger.commit([entry("a")])
    bad = entry("b")
    bad = LedgerEntry(**{**bad.__dict__, "detail": "nul \x00 byte"})
    with pytest.raises(StoreError):
        ledger.commit([entry("a", state=ENDED), bad], prune_before=T0 + timedelta(days=1))
    assert ledger.load() == {entry("a").key: entry("a")}


def test_an_unknown_state_in_the_table_raises_naming_the_ledger(pg_server, ledger):  # noqa: F811
    ledger.commit([entry("a")])
    with pg_server.admin() as conn:
        conn.execute(f'UPDATE "{ledger.schema}".occurrences SET state = %s', ["haunted"])
    with pytest.raises(StoreError, match=r"occurrences.*unknown state 'haunted'"):
        ledger.load()
