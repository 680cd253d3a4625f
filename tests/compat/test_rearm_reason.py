"""Re-arm and the reason: an explicit `reason=""` clears it (upstream: `reason or None`). A
flagless re-arm keeps it, like the allowlist and the deadline (an intended difference, listed in
the README: a re-arm never silently strips what the standing hold says)."""

from __future__ import annotations


def test_explicit_empty_reason_clears_it(estop):
    estop.engage(reason="maint")
    estop.engage(reason="")
    assert estop.get_state()["reason"] is None
    assert estop.paused_reply().startswith("\u23f8\ufe0f Hermes is paused. ")


def test_flagless_rearm_keeps_reason_allowlist_and_deadline(estop):
    estop.engage(reason="maint", allow={"user_ids": ["alice"]}, ttl="45m")
    before = estop.get_state()
    estop.engage()
    after = estop.get_state()
    assert after["reason"] == "maint"
    assert after["allow"] == before["allow"] == {"user_ids": ["alice"]}
    assert after["expires_at"] == before["expires_at"]


def test_allow_none_keeps_and_empty_allow_replaces(estop):
    estop.engage(allow={"user_ids": ["alice"]})
    estop.engage(allow=None)
    assert estop.is_allowed("alice")
    estop.engage(allow={})
    assert not estop.is_allowed("alice")
