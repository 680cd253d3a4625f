"""Upstream: admission compares `str(user_id)` and `str(profile)` exactly: no stripping, no
case folding; `424242` and `"424242"` are the same id."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("asked, admitted", [("424242", True), (424242, True), (" 424242 ", False),
                                             ("424242 ", False), ("0424242", False)])
def test_user_ids_compare_exactly(estop, asked, admitted):
    estop.engage(reason="maint", allow={"user_ids": ["424242"]})
    assert estop.is_allowed(asked) is admitted


@pytest.mark.parametrize("profile, admitted", [("ops", True), ("Ops", False), (" ops", False), (None, False)])
def test_profiles_compare_exactly(estop, profile, admitted):
    estop.engage(allow={"user_ids": ["alice"], "profiles": ["ops"]})
    assert estop.is_allowed("alice", profile) is admitted


def test_names_are_not_case_folded(estop):
    estop.engage(allow={"user_ids": ["Alice"]})
    assert estop.is_allowed("Alice") and not estop.is_allowed("alice")
