"""Upstream's names: `GENERATION_FIELD`, `SENTINEL_NAME`, `check_paused(component, logger)`, and
`paused_reply()` starting with "⏸️ " (the text gateway users already know)."""

from __future__ import annotations

import json
import logging

UPSTREAM_NAMES = ["SENTINEL_NAME", "GENERATION_FIELD", "parse_duration", "sentinel_path", "is_engaged",
                  "engage", "disengage", "get_state", "is_allowed", "paused_reply", "check_paused"]


def test_every_upstream_public_name_is_there(estop):
    missing = [name for name in UPSTREAM_NAMES if not hasattr(estop, name)]
    assert not missing


def test_generation_field_names_the_body_field(estop):
    assert estop.GENERATION_FIELD == "generation" and estop.SENTINEL_NAME == "ESTOP"
    body = json.loads(estop.engage(reason="maint").read_text())
    assert isinstance(body[estop.GENERATION_FIELD], str) and body[estop.GENERATION_FIELD]


def test_check_paused_takes_component_and_logger_positionally(estop, caplog):
    log = logging.getLogger("compat.cron")
    with caplog.at_level(logging.INFO, logger="compat.cron"):
        assert estop.check_paused("cron", log) is False
        estop.engage(reason="maint")
        assert estop.check_paused("cron", log) is True
        assert estop.check_paused("cron", log) is True
    assert sum("cron" in r.getMessage() for r in caplog.records if r.name == "compat.cron") == 1


def test_paused_reply_keeps_the_known_text(estop):
    assert estop.paused_reply() is None
    estop.engage(reason="db migration")
    assert estop.paused_reply() == ("\u23f8\ufe0f Hermes is paused (db migration). New work is on hold; "
                                    "run `hermes resume` to pick things back up.")


def test_get_state_has_the_upstream_keys(estop):
    assert estop.get_state() is None
    estop.engage(reason="maint", allow={"user_ids": ["42"]}, ttl="1h")
    state = estop.get_state()
    assert {"reason", "engaged_at", "expires_at", "allow"} <= set(state)
    assert state["allow"] == {"user_ids": ["42"]}


def test_the_module_logger_is_the_one_hermes_estop_logs_to(estop):
    import hermes_estop

    assert hermes_estop.logger is logging.getLogger("hermes_estop")
