"""The module-level drop-in API (hermes-agent's `agent/estop.py` names), resolved from the
environment at call time."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

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


def test_engage_writes_the_own_home_and_returns_its_sentinel_path(fleet_env):
    path = hermes_estop.engage(reason="maint", allow={"user_ids": ["42"]}, ttl="45m")
    assert path == hermes_estop.sentinel_path() == (fleet_env / "profiles" / "ops" / "ESTOP").resolve()
    assert path.exists()
    body = json.loads(path.read_text())
    assert body[hermes_estop.GENERATION_FIELD] == hermes_estop.get_state()["generation"]
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
    assert datetime.fromisoformat(state["expires_at"]) > datetime.now(UTC) + timedelta(minutes=59)
    assert "maint" in hermes_estop.paused_reply()
    assert hermes_estop.paused_reply().startswith("\u23f8\ufe0f Hermes is paused (maint)")


def test_close_forgets_the_cached_instances(fleet_env):
    first = hermes_estop.current()
    hermes_estop.close()
    assert hermes_estop.current() is not first


def test_the_instance_cache_is_bounded(tmp_path, monkeypatch):
    monkeypatch.delenv("HERMES_ROOT", raising=False)
    monkeypatch.delenv("HERMES_ESTOP_STORE", raising=False)
    hermes_estop.close()
    closed = []
    for index in range(3 * hermes_estop._MAX_INSTANCES):
        monkeypatch.setenv("HERMES_HOME", str(tmp_path / f"h{index}"))
        estop = hermes_estop.current()
        estop.store.close = lambda estop=estop: closed.append(estop)  # type: ignore[misc]
    assert len(hermes_estop._instances) <= hermes_estop._MAX_INSTANCES
    assert len(closed) == 2 * hermes_estop._MAX_INSTANCES
    hermes_estop.close()


def test_expiry_log_memory_is_per_instance(tmp_path, caplog):
    from hermes_estop import Estop

    now = [datetime(2026, 6, 1, 12, 0, tzinfo=UTC)]
    first = Estop(home=tmp_path / "h", clock=lambda: now[0])
    first.engage(reason="maint", ttl="10m")
    now[0] += timedelta(minutes=10)
    second = Estop(home=tmp_path / "h", clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="hermes_estop"):
        assert not first.is_engaged() and not first.is_engaged()
        assert not second.is_engaged()
    assert sum("EXPIRED" in r.getMessage() for r in caplog.records) == 2


def test_holds_lists_active_holds_own_home_first(fleet_env):
    hermes_estop.engage(reason="ops")
    hermes_estop.current().engage(reason="fleet", fleet=True)
    assert [r.location.scope for r in hermes_estop.holds()] == ["ops", "fleet"]


def test_retire_removes_only_that_generation(fleet_env):
    first = hermes_estop.current().engage(reason="first")
    second = hermes_estop.current().engage(reason="second")
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
    assert hold.expires_at == datetime(2026, 6, 1, 12, 10, tzinfo=UTC)
    now[0] = datetime(2026, 6, 1, 12, 9, 59)
    assert estop.is_engaged()
    now[0] = datetime(2026, 6, 1, 12, 10)
    assert not estop.is_engaged()


# -- issue 9 item 4: a home at profiles/fleet is not a profile home ---------------------------------


@pytest.mark.parametrize("name", ["fleet", ".hidden"])
def test_a_refused_profile_home_reads_as_held(tmp_path, name):
    from hermes_estop import Estop, HoldState

    estop = Estop(home=tmp_path / "r" / "profiles" / name)
    assert estop.is_engaged() and not estop.gate("42")
    refused = estop.holds()[0]
    assert refused.state is HoldState.UNREADABLE and "not a valid profile home" in refused.problem


def test_writes_from_a_refused_profile_home_are_refused_and_never_touch_the_fleet(tmp_path):
    from hermes_estop import Estop, InvalidArgument

    root = tmp_path / "r"
    Estop(home=root).engage(reason="fleet-wide")
    estop = Estop(home=root / "profiles" / "fleet")
    for write in (lambda: estop.engage(reason="x"), estop.disengage, lambda: estop.release(),
                  lambda: estop.engage(reason="x", fleet=True), lambda: estop.retire("g")):
        with pytest.raises(InvalidArgument, match="not a valid profile home"):
            write()
    assert Estop(home=root).is_engaged()
    assert not (root / "profiles" / "fleet" / "ESTOP").exists()


def test_module_level_api_from_a_refused_profile_home(tmp_path, monkeypatch):
    monkeypatch.delenv("HERMES_ROOT", raising=False)
    monkeypatch.delenv("HERMES_ESTOP_STORE", raising=False)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "r" / "profiles" / "fleet"))
    assert hermes_estop.is_engaged()
    with pytest.raises(hermes_estop.InvalidArgument):
        hermes_estop.engage(reason="x")


def test_views_of_one_estop_log_an_expiry_once(tmp_path, caplog):
    from hermes_estop import Estop

    now = [datetime(2026, 6, 1, 12, 0, tzinfo=UTC)]
    estop = Estop(home=tmp_path / "r", clock=lambda: now[0])
    estop.engage(reason="maint", ttl="10m")
    now[0] += timedelta(minutes=10)
    with caplog.at_level(logging.WARNING, logger="hermes_estop"):
        for _ in range(3):
            assert estop.for_profile("ops").gate() and estop.for_fleet().gate()
    assert sum("EXPIRED" in r.getMessage() for r in caplog.records) == 1


def test_estop_close_closes_its_store(tmp_path):
    from hermes_estop import Estop

    estop = Estop(home=tmp_path)
    closed = []
    estop.store.close = lambda: closed.append(True)
    estop.close()
    assert closed == [True]
