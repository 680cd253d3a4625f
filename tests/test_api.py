"""The module-level drop-in API (hermes-agent's `agent/estop.py` names), resolved from the
environment at call time."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta, timezone

import pytest

import hermes_estop
from hermes_estop import Verdict


@pytest.fixture
def fleet_env(tmp_path, monkeypatch):
    root = tmp_path / "fleet"
    monkeypatch.setenv("HERMES_ROOT", str(root))
    monkeypatch.setenv("HERMES_HOME", str(root / "profiles" / "ops"))
    monkeypatch.delenv("HERMES_ESTOP_STORE", raising=False)
    return root


def test_drop_in_names_exist():
    for name in ("is_engaged", "is_allowed", "engage", "disengage", "get_state", "paused_reply", "check_paused",
                 "sentinel_path", "retire", "holds", "gate"):
        assert callable(getattr(hermes_estop, name)), name


def test_environment_is_resolved_at_call_time(tmp_path, monkeypatch):
    monkeypatch.delenv("HERMES_ROOT", raising=False)
    monkeypatch.delenv("HERMES_ESTOP_STORE", raising=False)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "a"))
    hermes_estop.engage(reason="a only")
    assert hermes_estop.is_engaged()
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "b"))
    assert not hermes_estop.is_engaged()
    assert hermes_estop.sentinel_path() == (tmp_path / "b" / "ESTOP").resolve()


def test_engage_writes_the_own_home_and_returns_the_hold(fleet_env):
    hold = hermes_estop.engage(reason="maint", allow={"user_ids": ["42"]}, ttl="45m")
    assert hermes_estop.sentinel_path() == (fleet_env / "profiles" / "ops" / "ESTOP").resolve()
    body = json.loads(hermes_estop.sentinel_path().read_text())
    assert body["generation"] == hold.generation
    assert hermes_estop.is_allowed("42")
    assert hermes_estop.is_allowed(42)
    assert not hermes_estop.is_allowed("7")


def test_gate_verdict_is_truthy_when_work_may_proceed(fleet_env):
    assert isinstance(hermes_estop.gate(), Verdict) and hermes_estop.gate()
    hermes_estop.engage(reason="db migration", ttl="45m", allow={"user_ids": ["42"]})
    held = hermes_estop.gate("7")
    assert not held and held.engaged and not held.admitted
    assert "db migration" in held.notice and "Auto-resumes" in held.notice
    assert held.reason == "db migration" and held.resume_at is not None
    admitted = hermes_estop.gate("42")
    assert admitted and admitted.admitted and admitted.notice is None


def test_get_state_and_paused_reply(fleet_env):
    assert hermes_estop.get_state() is None
    assert hermes_estop.paused_reply() is None
    hermes_estop.engage(reason="maint", ttl="1h", allow={"user_ids": ["42"]})
    state = hermes_estop.get_state()
    assert state["reason"] == "maint"
    assert state["allow"] == {"user_ids": ["42"]}
    assert datetime.fromisoformat(state["expires_at"]) > datetime.now(timezone.utc) + timedelta(minutes=59)
    assert "maint" in hermes_estop.paused_reply()


def test_holds_lists_active_holds_own_home_first(fleet_env):
    hermes_estop.engage(reason="ops")
    hermes_estop.current().engage(reason="fleet", fleet=True)
    assert [r.location.scope for r in hermes_estop.holds()] == ["ops", "fleet"]


def test_retire_removes_only_that_generation(fleet_env):
    first = hermes_estop.engage(reason="first")
    second = hermes_estop.engage(reason="second")
    assert not hermes_estop.retire(first.generation)
    assert hermes_estop.is_engaged()
    assert hermes_estop.retire(second.generation)
    assert not hermes_estop.is_engaged()


def test_disengage_lifts_home_and_fleet_root(fleet_env):
    hermes_estop.engage(reason="ops")
    hermes_estop.current().engage(reason="fleet", fleet=True)
    assert hermes_estop.disengage()
    assert not hermes_estop.is_engaged()


def test_check_paused_logs_once_per_engagement_per_component(fleet_env, caplog):
    log = logging.getLogger("test.cron")
    with caplog.at_level(logging.INFO, logger="test.cron"):
        assert not hermes_estop.check_paused("cron", log)
        hermes_estop.engage(reason="maint")
        for _ in range(5):
            assert hermes_estop.check_paused("cron", log)
            assert hermes_estop.check_paused("kanban", log)
        hermes_estop.disengage()
        assert not hermes_estop.check_paused("cron", log)
        hermes_estop.engage(reason="again")
        assert hermes_estop.check_paused("cron", log)
    messages = [r.getMessage() for r in caplog.records if r.name == "test.cron"]
    assert sum("cron paused" in m for m in messages) == 2
    assert sum("kanban paused" in m for m in messages) == 1


def test_a_store_that_cannot_be_opened_holds_the_fleet(fleet_env, monkeypatch):
    monkeypatch.setenv("HERMES_ESTOP_STORE", "carrier-pigeon://nest")
    assert hermes_estop.is_engaged()
    verdict = hermes_estop.gate("42")
    assert not verdict
    assert not hermes_estop.is_allowed("42")


def test_a_bad_config_file_holds_the_fleet(fleet_env):
    fleet_env.mkdir(parents=True, exist_ok=True)
    (fleet_env / "estop.toml").write_text("store = [unterminated")
    assert hermes_estop.is_engaged()


def test_an_injected_naive_clock_reads_as_utc(tmp_path):
    from datetime import datetime

    from hermes_estop import Estop

    now = [datetime(2026, 6, 1, 12, 0)]
    estop = Estop(home=tmp_path / "h", clock=lambda: now[0])
    hold = estop.engage(reason="maint", ttl="10m")
    assert hold.expires_at == datetime(2026, 6, 1, 12, 10, tzinfo=timezone.utc)
    now[0] = datetime(2026, 6, 1, 12, 9, 59)
    assert estop.is_engaged()
    now[0] = datetime(2026, 6, 1, 12, 10)
    assert not estop.is_engaged()
