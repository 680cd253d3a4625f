"""Upstream: `engage(ttl="")` (and a blank one) is "not given": the standing deadline is kept."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("ttl", ["", "  ", None])
def test_empty_ttl_keeps_the_standing_deadline(estop, ttl):
    estop.engage(reason="maint", ttl="45m")
    deadline = estop.get_state()["expires_at"]
    estop.engage(reason="again", ttl=ttl)
    assert estop.get_state()["expires_at"] == deadline


def test_empty_ttl_on_a_fresh_engage_arms_without_a_deadman(estop):
    estop.engage(reason="maint", ttl="")
    assert estop.is_engaged() and estop.get_state()["expires_at"] is None
