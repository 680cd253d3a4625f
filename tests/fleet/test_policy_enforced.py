"""The arming policy at the fleet's one write path (issue 37): every rule through the CLI,
`hermes run`, the Python API and the drop-in, on the file store and on PostgreSQL."""

from __future__ import annotations

import logging
import os
import pwd
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hermes_estop
from hermes_estop import Estop
from hermes_estop.model.policy import PolicyRefused
from inprocess_cli import fleet, run  # noqa: F401
from pg_helpers import pg_server, pg_url  # noqa: F401

ME = pwd.getpwuid(os.geteuid()).pw_name


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, fleet: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:  # noqa: F811
    """The fleet's store: the sentinel files, or a real PostgreSQL schema of the test's own."""
    if request.param == "postgresql":
        monkeypatch.setenv("HERMES_ESTOP_STORE", request.getfixturevalue("pg_url"))
    hermes_estop.close()
    yield request.param
    hermes_estop.close()


def set_policy(root: Path, body: str) -> None:
    (root / "estop.toml").write_text("[policy]\n" + body)


def engaged(capsys: pytest.CaptureFixture[str]) -> bool:
    return run(capsys, "check")[0] != 0


def refused_events(capsys: pytest.CaptureFixture[str]) -> str:
    return run(capsys, "history", "--json")[1]


ARM_RULES = [
    ('max_ttl = "1h"\n', ["--ttl", "2h"], "max_ttl", "2h"),
    ("require_ttl = true\n", [], "require_ttl", "deadman"),
    ('reason_pattern = "^OPS-[0-9]+"\n', ["--reason", "tidy up"], "reason_pattern", "tidy up"),
    ('max_scope = "profile"\n', ["--fleet"], "max_scope", "fleet"),
]


@pytest.mark.parametrize(("policy", "flags", "rule", "value"), ARM_RULES)
def test_a_pause_the_policy_refuses_writes_nothing_and_says_which_rule(
        store: str, fleet: Path, capsys: pytest.CaptureFixture[str],  # noqa: F811
        policy: str, flags: list[str], rule: str, value: str) -> None:
    set_policy(fleet, policy)
    code, _out, err = run(capsys, "pause", *flags)
    assert code == 2
    assert err.count("\n") == 1 and rule in err and value in err
    assert not engaged(capsys)
    trail = refused_events(capsys)
    assert '"refused"' in trail and rule in trail and ME in trail


@pytest.mark.parametrize(("policy", "flags", "rule", "value"), ARM_RULES)
def test_a_pause_within_the_policy_is_written(store: str, fleet: Path, capsys: pytest.CaptureFixture[str],  # noqa: F811
                                              policy: str, flags: list[str], rule: str, value: str) -> None:
    set_policy(fleet, policy)
    allowed = {"max_ttl": ["--ttl", "30m"], "require_ttl": ["--ttl", "30m"],
               "reason_pattern": ["--reason", "OPS-12 tidy up"], "max_scope": ["--profile", "billing"]}[rule]
    assert run(capsys, "pause", *allowed)[0] == 0
    assert '"engage"' in refused_events(capsys)


@pytest.mark.parametrize(("lift", "admin", "lifted"), [
    ("admins", False, False),
    ("admins", True, True),
    ("anyone", False, True),
])
def test_lifting_another_actors_hold_follows_the_lift_rule(store: str, fleet: Path,  # noqa: F811
                                                           capsys: pytest.CaptureFixture[str],
                                                           lift: str, admin: bool, lifted: bool) -> None:
    Estop(actor="someone@elsewhere").engage(reason="theirs")
    roles = f'[policy.roles]\n"{ME}" = "admin"\n' if admin else ""
    set_policy(fleet, f'lift = "{lift}"\n' + roles)
    code, _out, err = run(capsys, "resume")
    assert (code == 0) == lifted, err
    assert engaged(capsys) != lifted
    if not lifted:
        assert "lift" in err and "someone@elsewhere" in err


def test_the_owner_may_lift_its_own_hold_under_owner_or_admin(store: str, fleet: Path,  # noqa: F811
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "pause", "--reason", "mine")[0] == 0
    set_policy(fleet, 'lift = "owner-or-admin"\n')
    assert run(capsys, "resume")[0] == 0
    assert not engaged(capsys)


PY_ARGS: dict[str, dict[str, Any]] = {"max_ttl": {"ttl": "2h"}, "require_ttl": {}, "reason_pattern": {"reason": "tidy up", "ttl": "30m"},
           "max_scope": {"fleet": True}}


@pytest.mark.parametrize(("policy", "flags", "rule", "value"), ARM_RULES)
def test_the_python_api_meets_every_rule(store: str, fleet: Path, capsys: pytest.CaptureFixture[str],  # noqa: F811
                                         policy: str, flags: list[str], rule: str, value: str) -> None:
    set_policy(fleet, policy)
    estop = Estop()
    with pytest.raises(PolicyRefused, match=rule):
        estop.engage(**PY_ARGS[rule])
    estop.close()
    assert not engaged(capsys)


def test_a_remote_caller_is_judged_by_its_tokens_role(store: str, fleet: Path,  # noqa: F811
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from hermes_estop.fleet.fleet import Fleet
    from hermes_estop.model.policy import Actor

    set_policy(fleet, 'max_scope = "profile"\n')
    local = Estop()
    request, now = local.engage_request(reason="from the api")
    operator = Fleet(local.store, fleet, identity=Actor.remote("ci", "operator"))
    with pytest.raises(PolicyRefused, match="token:ci may hold a profile, not the fleet"):
        operator.engage(operator.fleet_location, request, now)
    with pytest.raises(PolicyRefused, match="may not override"):
        operator.engage(operator.fleet_location, request, now, override="because")
    admin = Fleet(local.store, fleet, identity=Actor.remote("pager", "admin"))
    assert admin.engage(admin.fleet_location, request, now).armed_by == local.actor
    assert [e.actor for e in admin.history()[0] if e.event == "refused"] == ["token:ci", "token:ci"]
    local.close()


def test_a_chat_user_pausing_through_the_gateway_takes_no_local_privilege(store: str, fleet: Path,  # noqa: F811
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from hermes_estop.consumers.gateway import Gateway

    set_policy(fleet, f'max_scope = "profile"\n[policy.roles]\n"{ME}" = "admin"\n')
    estop = Estop()
    assert estop.fleet.policy.identity.user == ME  # the account the gateway runs as: an admin
    reply = Gateway(estop, operators=["424242"]).handle("424242", None, "/pause db")
    assert reply.kind == "error" and "max_scope" in reply.text and "gateway:424242@" in reply.text
    assert not engaged(capsys)
    estop.close()


def test_the_drop_in_reports_a_refused_engage_without_raising(store: str, fleet: Path,  # noqa: F811
                                                              capsys: pytest.CaptureFixture[str],
                                                              caplog: pytest.LogCaptureFixture) -> None:
    set_policy(fleet, "require_ttl = true\n")
    with caplog.at_level(logging.WARNING, logger="hermes_estop"):
        path = hermes_estop.engage(reason="drop-in")
    assert path.name == "ESTOP"
    assert "require_ttl" in caplog.text
    assert not engaged(capsys)


@pytest.mark.parametrize(("policy", "flags", "rule"), [
    ('max_ttl = "10m"\n', ["--ttl", "1h"], "max_ttl"),
    ('reason_pattern = "^OPS-"\n', ["--ttl", "5m"], "reason_pattern"),
    ('max_scope = "profile"\n', ["--ttl", "5m", "--fleet"], "max_scope"),
])
def test_hermes_run_is_refused_before_the_job_starts(store: str, fleet: Path, tmp_path: Path,  # noqa: F811
                                                     capsys: pytest.CaptureFixture[str],
                                                     policy: str, flags: list[str], rule: str) -> None:
    set_policy(fleet, policy)
    marker = tmp_path / "ran"
    code, _out, err = run(capsys, "run", *flags, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w').close()")
    assert code == 2 and rule in err
    assert not marker.exists()
    assert not engaged(capsys)


def test_hermes_run_ends_its_own_hold_where_only_admins_may_lift(store: str, fleet: Path, tmp_path: Path,  # noqa: F811
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    set_policy(fleet, 'lift = "admins"\nmax_ttl = "1h"\n')
    marker = tmp_path / "ran"
    code, _out, err = run(capsys, "run", "--ttl", "10m", "--", sys.executable, "-c",
                          f"open({str(marker)!r}, 'w').close()")
    assert code == 0, err
    assert marker.exists()
    assert not engaged(capsys)


def test_an_override_writes_and_is_on_the_record(store: str, fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    set_policy(fleet, 'max_ttl = "1h"\n')
    code, _out, err = run(capsys, "pause", "--ttl", "3h", "--override", "INC-7 datacentre fire")
    assert code == 0, err
    assert engaged(capsys)
    trail = refused_events(capsys)
    assert '"override"' in trail and "INC-7 datacentre fire" in trail and "max_ttl" in trail


def test_a_bad_policy_is_named_and_never_stops_a_stop(store: str, fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    set_policy(fleet, 'max_tll = "1h"\n')
    assert run(capsys, "pause", "--ttl", "3h")[0] == 0
    assert engaged(capsys)
    code, _out, err = run(capsys, "resume")
    assert code == 2 and "max_tll" in err
    assert engaged(capsys)


def test_a_policy_set_in_postgresql_is_enforced_on_every_host(fleet: Path, tmp_path: Path,  # noqa: F811
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch, pg_url: str) -> None:  # noqa: F811
    monkeypatch.setenv("HERMES_ESTOP_STORE", pg_url)
    hermes_estop.close()
    wanted = tmp_path / "policy.toml"
    wanted.write_text('[policy]\nmax_ttl = "1h"\n')
    assert run(capsys, "policy", "set", str(wanted))[0] == 0
    other_host_root = tmp_path / "elsewhere"
    other_host_root.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(other_host_root))  # no estop.toml there: the database's policy
    code, _out, err = run(capsys, "pause", "--ttl", "2h")
    assert code == 2 and "max_ttl" in err
    shown = run(capsys, "policy", "show", "--json")[1]
    assert '"max_ttl": "1h"' in shown and "postgresql" in shown
    hermes_estop.close()


@pytest.mark.parametrize(("body", "named"), [('max_tll = "1h"\n', "max_tll"), ('lift = "me"\n', "'me'")])
def test_policy_check_names_the_bad_key(fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],  # noqa: F811
                                        body: str, named: str) -> None:
    bad = tmp_path / "policy.toml"
    bad.write_text("[policy]\n" + body)
    code, _out, err = run(capsys, "policy", "check", str(bad))
    assert code == 2 and named in err and err.count("\n") == 1


def test_policy_set_on_the_file_store_points_at_estop_toml(fleet: Path, tmp_path: Path,  # noqa: F811
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    wanted = tmp_path / "policy.toml"
    wanted.write_text('[policy]\nmax_ttl = "1h"\n')
    code, _out, err = run(capsys, "policy", "set", str(wanted))
    assert code == 2 and "estop.toml" in err


def test_doctor_flags_a_hold_written_by_hand_and_not_one_written_by_hermes(
        store: str, fleet: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest) -> None:  # noqa: F811
    assert run(capsys, "pause", "--reason", "through hermes", "--profile", "billing")[0] == 0
    body = b'{"generation": "by-hand", "reason": "hand"}'
    if store == "file":
        (fleet / "ESTOP").write_bytes(body)
    else:
        estop = Estop()
        with request.getfixturevalue("pg_server").admin() as conn:
            conn.execute(f'INSERT INTO "{estop.store.schema}".holds (scope, body) VALUES (%s, %s)',  # type: ignore[attr-defined]
                         ["fleet", body])
        estop.close()
    code, out, _err = run(capsys, "doctor", "--json")
    assert code == 1
    flagged = [line for line in out.splitlines() if "OUTSIDE HERMES" in line]
    assert len(flagged) == 1 and "by-hand" in flagged[0]


@pytest.mark.parametrize("flags", [["--all"], ["--hold", "HOLD"]])
def test_lifting_a_scoped_hold_follows_the_lift_rule(store: str, fleet: Path, capsys: pytest.CaptureFixture[str],  # noqa: F811
                                                     flags: list[str]) -> None:
    hold = Estop(actor="someone@elsewhere").engage(reason="theirs", only="cron")
    set_policy(fleet, 'lift = "admins"\n')
    args = [hold.hold_id if flag == "HOLD" else flag for flag in flags]
    code, _out, err = run(capsys, "resume", *args)
    assert code == 2 and "lift" in err
    assert run(capsys, "check", "--component", "cron")[0] != 0
    assert run(capsys, "resume", *args, "--override", "INC-9 cron must run")[0] == 0
    assert run(capsys, "check", "--component", "cron")[0] == 0
