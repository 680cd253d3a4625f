"""Windows meet the fleet's arming policy (issue 37): at validation (`hermes windows
validate` names a window the policy refuses; the scheduler does not arm it), at arm time (the
scheduler's actor and scope), and when an operator lifts a window's hold (`lift_windows`), on
the file store and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import tomlkit

import hermes_estop
from hermes_estop import Estop
from hermes_estop.model.hold import HoldState
from hermes_estop.model.policy import PolicyRefused
from hermes_estop.windows.scheduler import WindowService
from inprocess_cli import fleet, run  # noqa: F401
from pg_helpers import pg_server, pg_url  # noqa: F401


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, fleet: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str | None]:  # noqa: F811
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    if url is not None:
        monkeypatch.setenv("HERMES_ESTOP_STORE", url)
    hermes_estop.close()
    yield url
    hermes_estop.close()


def write_windows(root: Path, *windows: dict[str, Any]) -> None:
    (root / "windows.toml").write_text(tomlkit.dumps({"windows": list(windows)}))


def set_policy(root: Path, body: str) -> None:
    (root / "estop.toml").write_text("[policy]\n" + body)


def covering_now(name: str, duration: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "at": datetime.now(UTC) - timedelta(minutes=1), "duration": duration, **more}


def make_scheduler() -> Any:
    """A real APScheduler, paused: the pass below is the scheduler's first reconciliation."""
    from apscheduler.schedulers.background import BackgroundScheduler

    scheduler = BackgroundScheduler(timezone=UTC)
    scheduler.start(paused=True)
    return scheduler


def scheduler_pass(root: Path, url: str | None, actor: str = "scheduler@test") -> Any:
    estop = Estop(root=root, home=root, store=url, actor=actor)
    service = WindowService(estop.fleet, scheduler=make_scheduler())
    try:
        report = service.start()
        reading = estop.fleet.read((estop.fleet.fleet_location,)).readings[0]
    finally:
        service.shutdown()
        estop.close()
    return report, reading


@pytest.mark.parametrize(("policy", "window", "named"), [
    ('max_ttl = "2h"\n', covering_now("long", "3h"), "max_ttl"),
    ('reason_pattern = "^OPS-"\n', covering_now("vague", "1h", reason="tidy"), "reason_pattern"),
    ('[policy.profiles.billing]\nmax_ttl = "30m"\n', covering_now("bill", "1h", scope="billing"), "max_ttl"),
])
def test_windows_validate_names_a_window_the_policy_refuses(store: str | None, fleet: Path,  # noqa: F811
                                                           capsys: pytest.CaptureFixture[str],
                                                           policy: str, window: dict[str, Any], named: str) -> None:
    set_policy(fleet, policy)
    write_windows(fleet, window, covering_now("fine", "10m", reason="OPS-1 ok"))
    code, _out, err = run(capsys, "windows", "validate")
    assert code == 2
    assert f"window '{window['name']}'" in err and named in err and "fine" not in err


def test_a_window_longer_than_max_ttl_is_not_armed_and_the_others_are(store: str | None, fleet: Path) -> None:  # noqa: F811
    set_policy(fleet, 'max_ttl = "2h"\n')
    write_windows(fleet, covering_now("long", "3h"), covering_now("short", "1h"))
    report, reading = scheduler_pass(fleet, store)
    assert any("long" in line and "max_ttl" in line for line in report.failed)
    assert reading.state is HoldState.ACTIVE and reading.hold.armed_by == "window:short"


def test_a_window_within_the_policy_is_armed(store: str | None, fleet: Path) -> None:  # noqa: F811
    set_policy(fleet, 'max_ttl = "2h"\nreason_pattern = "^OPS-"\n')
    write_windows(fleet, covering_now("ok", "1h", reason="OPS-9 patching"))
    report, reading = scheduler_pass(fleet, store)
    assert report.failed == []
    assert reading.state is HoldState.ACTIVE and reading.hold.armed_by == "window:ok"


def test_a_scheduler_that_may_not_hold_the_fleet_does_not_arm_a_fleet_window(store: str | None, fleet: Path) -> None:  # noqa: F811
    set_policy(fleet, 'max_scope = "profile"\n')
    write_windows(fleet, covering_now("whole", "1h"), covering_now("bill", "1h", scope="billing"))
    report, reading = scheduler_pass(fleet, store)
    assert any("whole" in line and "max_scope" in line for line in report.failed)
    assert reading.state is HoldState.ABSENT
    billing = Estop(root=fleet, home=fleet, store=store).fleet
    assert billing.read((billing.location("billing"),)).readings[0].hold.armed_by == "window:bill"


def test_the_fleet_refuses_a_window_arm_the_policy_forbids_and_records_it(store: str | None, fleet: Path) -> None:  # noqa: F811
    """The backstop behind validation: the write path itself, for a window's request."""
    from hermes_estop.model.hold import EngageRequest

    set_policy(fleet, 'max_ttl = "1h"\n')
    estop = Estop(root=fleet, home=fleet, store=store, actor="scheduler@test")
    now = estop.clock()
    request = EngageRequest(reason="maintenance window long", expires_at=now + timedelta(hours=3), replace=True,
                            armed_by="window:long", window={"name": "long", "occurrence": now.isoformat()})
    with pytest.raises(PolicyRefused, match="max_ttl"):
        estop.fleet.engage(estop.fleet.fleet_location, request, now)
    assert estop.fleet.read((estop.fleet.fleet_location,)).readings[0].state is HoldState.ABSENT
    assert [e.event for e in estop.history()][-1] == "refused"
    estop.close()


def test_lifting_a_windows_hold_follows_lift_windows(store: str | None, fleet: Path,  # noqa: F811
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    write_windows(fleet, covering_now("maint", "1h"))
    scheduler_pass(fleet, store)
    set_policy(fleet, 'lift_windows = "admins"\n')
    with pytest.raises(PolicyRefused, match="lift_windows"):
        Estop(root=fleet, home=fleet, store=store, actor="op@test").release(fleet=True)
    code, _out, err = run(capsys, "resume")
    assert code == 2 and "lift_windows" in err
