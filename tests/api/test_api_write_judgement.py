"""The write API reaches the same judgement as every other door (issue 43): an operator token
weakens only the holds it armed, whether it asks by DELETE, extend, replace or a re-arm, and
owns what it arms (ownership compares token names; the address stays in the audit text). A real
`hermes serve --http-write` over TLS on loopback; the admin's hold is armed as `boss`."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from api_helpers import Served, make_token, self_signed, serve

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.hold import EngageRequest, Hold
from hermes_estop.model.policy import Actor


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet")
    (root / "estop.toml").write_text('[policy.roles]\n"boss" = "admin"\n')
    return root


@pytest.fixture(scope="module")
def tokens(fleet: Path) -> dict[str, str]:
    return {name: make_token(fleet, name, role) for name, role in (("ops", "operator"), ("pager", "admin"))}


@pytest.fixture(scope="module")
def served(fleet: Path, tokens: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    with serve(fleet, "--http-write", "--tls-cert", str(cert), "--tls-key", str(key), cafile=cert) as running:
        yield running


@pytest.fixture
def admins_hold(fleet: Path) -> Iterator[Hold]:
    admin = Fleet.of_files(fleet).acting_as(Actor("boss@host", user="boss"))
    now = datetime.now(UTC)
    yield admin.engage(admin.fleet_location, EngageRequest(reason="boss's", expires_at=now + timedelta(hours=2),
                                                           armed_by="boss@host"), now)
    admin.release_all(admin.fleet_location)


def held_as(fleet: Path, hold: Hold) -> bool:
    (reading,) = Fleet.of_files(fleet).read().readings[:1]
    return reading.active and reading.hold is not None and reading.hold.expires_at == hold.expires_at \
        and reading.hold.armed_by == hold.armed_by


@pytest.mark.parametrize(("method", "path", "body"), [
    pytest.param("POST", "/api/v1/holds/fleet/extend", {"ttl": "2s"}, id="extend-shorter"),
    pytest.param("POST", "/api/v1/holds", {"replace": True, "ttl": "1s"}, id="replace-short"),
    pytest.param("POST", "/api/v1/holds", {"allow": {"user_ids": ["424242"]}}, id="rearm-wider-allowlist"),
    pytest.param("DELETE", "/api/v1/holds/fleet", None, id="delete"),
])
def test_an_operator_token_may_not_weaken_an_admins_hold_by_any_verb(
        fleet: Path, served: Served, tokens: dict[str, str], admins_hold: Hold,
        method: str, path: str, body: Any) -> None:
    status, _, answer = served.client(tokens["ops"]).request(method, path, body)
    assert status == 403, answer
    assert held_as(fleet, admins_hold)
    refused = [e for e in Fleet.of_files(fleet).history()[0] if e.event == "refused"]
    assert refused and refused[-1].actor == "token:ops from 127.0.0.1"


def test_a_noop_rearm_does_not_make_the_token_the_owner(fleet: Path, served: Served, tokens: dict[str, str],
                                                        admins_hold: Hold) -> None:
    ops = served.client(tokens["ops"])
    status, _, hold = ops.request("POST", "/api/v1/holds", {})
    assert status == 201 and hold["armed_by"] == "boss@host", hold
    assert ops.request("DELETE", "/api/v1/holds/fleet")[0] == 403
    assert Fleet.of_files(fleet).read().engaged


def test_an_operator_token_lifts_and_shortens_its_own_hold(fleet: Path, served: Served, tokens: dict[str, str]) -> None:
    ops = served.client(tokens["ops"])
    status, _, hold = ops.request("POST", "/api/v1/holds", {"reason": "deploy", "ttl": "30m"})
    assert status == 201 and hold["armed_by"] == "token:ops"
    assert ops.request("POST", "/api/v1/holds/fleet/extend", {"ttl": "5m"})[0] == 200
    assert ops.request("DELETE", "/api/v1/holds/fleet")[0] == 200
    assert not Fleet.of_files(fleet).read().engaged


def test_an_admin_token_may_shorten_an_admins_hold(fleet: Path, served: Served, tokens: dict[str, str],
                                                   admins_hold: Hold) -> None:
    status, _, hold = served.client(tokens["pager"]).request("POST", "/api/v1/holds/fleet/extend", {"ttl": "5m"})
    assert status == 200 and hold["armed_by"] == "boss@host", hold


def test_a_component_nothing_gates_as_is_refused_with_a_did_you_mean(fleet: Path, served: Served,
                                                                     tokens: dict[str, str]) -> None:
    status, _, answer = served.client(tokens["ops"]).request("POST", "/api/v1/holds", {"only": ["kanbn"], "ttl": "5m"})
    assert status == 400 and "did you mean 'kanban'" in answer["error"], answer
    assert not Fleet.of_files(fleet).read().engaged
