"""`Record`, the core's immutable value classes without `dataclasses`: values compare and hash by
their fields, refuse assignment, and survive pickling and copying (readings cross processes)."""

from __future__ import annotations

import copy
import pickle
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hermes_estop.model.hold import Allow, Fence, Hold, HoldState, Reading
from hermes_estop.model.homes import Layout, Location
from hermes_estop.process.check import Snapshot, Verdict

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
FLEET = Location("fleet", Path("/r"))
READING = Reading(FLEET, HoldState.ACTIVE, Hold("g", NOW, "maint", None, Allow.of(["42"])), Fence("g"))


@pytest.mark.parametrize("value", [FLEET, Layout(Path("/r"), Path("/r")), Fence("g", (1, 2)), READING,
                                   Snapshot((READING,), NOW), Verdict(False, True, False, Snapshot((), NOW))],
                         ids=lambda v: type(v).__name__)
def test_values_compare_by_fields_and_survive_pickling_and_copying(value):
    assert pickle.loads(pickle.dumps(value)) == value
    assert copy.deepcopy(value) == value and copy.copy(value) == value


def test_values_are_immutable():
    with pytest.raises(AttributeError, match="immutable"):
        READING.state = HoldState.ABSENT  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del FLEET.scope


def test_equal_values_hash_alike_and_different_classes_differ():
    assert hash(Location("fleet", Path("/r"))) == hash(FLEET) and {FLEET: 1}[Location("fleet", Path("/r"))] == 1
    assert Fence("g") != Location("g", None)  # type: ignore[arg-type]
    assert Fence("g") != ("g", None)


def test_repr_names_every_field():
    assert repr(Fence("g")) == "Fence(generation='g', file_id=None)"
