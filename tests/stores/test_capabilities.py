"""What a caller asks a store for instead of checking which backend it is (issue 14 item 3): the
ledger's storage (`open_ledger`, see test_records.py), its schema (`init_schema`, a no-op where
there is nothing to create) and whether it answers (`reachable`, None where the question has no
meaning)."""

from __future__ import annotations

from hermes_estop.stores.unavailable import UnavailableStore


def test_init_schema_creates_what_the_backend_keeps_and_nothing_for_files(backend, store):
    version, _ = store.init_schema()
    assert (version == 0) == (backend.name == "file")
    assert store.init_schema()[1] == []  # again: nothing left to apply


def test_reachable_is_the_listeners_view_on_a_shared_store_and_no_question_for_files(backend, store):
    if backend.name == "file":
        assert store.reachable() is None
    else:
        assert store.sync() and store.reachable() is True


def test_a_store_that_could_not_be_opened_has_nothing_to_create_or_report():
    store = UnavailableStore("bad url")
    assert store.init_schema() == (0, []) and store.reachable() is None
