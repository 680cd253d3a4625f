"""Issue 46 item 2: who retires an expired generation on a fleet with no `hermes serve` running.
Readers never retire (docs/design.md §5), so `serve --once` runs the deadman pass a running serve
runs, and an operator's next write (`pause`, `resume`, `run`) retires every expired generation of
the fleet with the store's trusted clock: an expired scoped hold no longer stays in the sentinel
body that hermes-agent's own `agent/estop.py` reads (where it kept refusing the full hold's
allowlisted user)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

import inprocess_cli
from hermes_estop import Estop
from inprocess_cli import run

fleet = inprocess_cli.fleet  # the fixture: a fleet root as this process's home


def arm(root, *, ago: timedelta = timedelta(0), profile: str | None = None, **kwargs):
    """A hold armed `ago` in the past (with a TTL shorter than that: expired by now)."""
    armed_at = datetime.now(UTC) - ago
    home = root / "profiles" / profile if profile is not None else root
    home.mkdir(parents=True, exist_ok=True)
    return Estop(root=root, home=home, clock=lambda: armed_at).engage(**kwargs)


def body_text(root) -> str:
    return (root / "ESTOP").read_text(encoding="utf-8")


def expired_scoped_hold_under_a_standing_full_hold(root) -> str:
    """The issue's fleet: a full hold admitting alice, and a scoped hold whose deadman passed."""
    arm(root, reason="maintenance", allow={"user_ids": ["alice"]})
    scoped = arm(root, ago=timedelta(hours=2), ttl=60, only=["cron"])
    assert scoped.generation in body_text(root)
    return scoped.generation


def expire_events(capsys) -> list[dict]:
    history = json.loads(run(capsys, "history", "--json")[1])
    return [event for event in history if event["event"] == "expire"]


def test_serve_once_retires_an_expired_scoped_hold(fleet, capsys):
    generation = expired_scoped_hold_under_a_standing_full_hold(fleet)
    code, out, err = run(capsys, "serve", "--once")
    assert code == 0, err
    assert generation not in body_text(fleet)  # out of the body every reader reads
    assert f"generation {generation}" in out and "retired" in out
    assert [event["generation"] for event in expire_events(capsys)] == [generation]
    assert run(capsys, "check", "--user", "alice")[0] == 0  # the full hold still stands, admitting alice
    assert run(capsys, "check", "--user", "bob")[0] == 1


def test_serve_once_json_lists_what_the_deadman_pass_retired(fleet, capsys):
    generation = expired_scoped_hold_under_a_standing_full_hold(fleet)
    code, out, err = run(capsys, "serve", "--once", "--json")
    assert code == 0, err
    (retired,) = json.loads(out)["retired"]
    assert retired["generation"] == generation and retired["scope"] == "fleet"


def test_serve_dry_run_retires_nothing(fleet, capsys):
    generation = expired_scoped_hold_under_a_standing_full_hold(fleet)
    code, _, err = run(capsys, "serve", "--dry-run")
    assert code == 0, err
    assert generation in body_text(fleet) and not expire_events(capsys)


@pytest.mark.parametrize("command", [
    ["pause", "--fleet", "--reason", "next"],
    ["resume", "--fleet"],
    ["run", "--fleet", "--", "true"],
])
def test_an_operators_next_write_retires_every_expired_generation(fleet, capsys, command):
    standing = arm(fleet, reason="standing").generation
    lapsed = arm(fleet, ago=timedelta(hours=2), ttl=60, profile="ops", reason="lapsed").generation
    ops_sentinel = fleet / "profiles" / "ops" / "ESTOP"
    assert ops_sentinel.exists()
    code, _, err = run(capsys, *command)
    assert code == 0, err
    assert not ops_sentinel.exists()  # another scope's expired hold: retired by this write
    assert [event["generation"] for event in expire_events(capsys)] == [lapsed]
    assert standing != lapsed


def test_an_operators_write_keeps_a_hold_whose_deadman_is_ahead(fleet, capsys):
    running = arm(fleet, profile="ops", ttl=3600, reason="still running").generation
    assert run(capsys, "pause", "--fleet", "--reason", "next")[0] == 0
    assert running in (fleet / "profiles" / "ops" / "ESTOP").read_text(encoding="utf-8")
    assert not expire_events(capsys)
