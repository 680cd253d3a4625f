"""The write API against a real `hermes serve --http --http-write` over TLS on loopback (a
self-signed certificate made in the test): every status code, the If-Match fence under a race,
a revoked token, audit and metric, and a remote pause seen by `hermes check` on both stores."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest
from api_helpers import Client, Served, hermes, make_token, race_lift, self_signed, serve

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile

#: a nightly window that never covers the test run: it starts twelve hours from now (the tests
#: must not pass or fail by the hour they run at)
NIGHTLY = {"name": "nightly", "cron": f"0 {(datetime.now(UTC).hour + 12) % 24} * * *", "timezone": "UTC", "duration": "2h"}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet")
    WindowsFile(root).save([Window.parse(NIGHTLY)])
    return root


@pytest.fixture(scope="module")
def tokens(fleet: Path) -> dict[str, str]:
    return {name: make_token(fleet, name, role) for name, role in
            (("watch", "viewer"), ("ops", "operator"), ("ops2", "operator"), ("boss", "admin"))}


@pytest.fixture(scope="module")
def served(fleet: Path, tokens: dict[str, str], tmp_path_factory: pytest.TempPathFactory):
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    with serve(fleet, "--http-write", "--tls-cert", str(cert), "--tls-key", str(key), cafile=cert) as running:
        yield running


@pytest.fixture(autouse=True)
def no_hold(request: pytest.FixtureRequest) -> None:
    if "fleet" in request.fixturenames:
        root = request.getfixturevalue("fleet")
        files = Fleet.of_files(root)
        files.release_all(files.fleet_location)


def _as(served: Served, tokens: dict[str, str], name: str | None) -> Client:
    return served.client(tokens[name] if name is not None else None)


def test_the_server_speaks_tls_with_the_given_certificate(served):
    assert served.url.startswith("https://127.0.0.1:")


def test_a_remote_pause_is_armed_by_the_token_and_audited_with_its_address(fleet, served, tokens):
    status, _, body = _as(served, tokens, "ops").request("POST", "/api/v1/holds",
                                                          {"reason": "deploy", "ttl": "45m"})
    assert status == 201
    assert body["id"] == "fleet" and body["armed_by"] == "token:ops" and body["expires_at"] is not None
    assert hermes(fleet, "check", check=False).returncode == 1
    reading = Fleet.of_files(fleet).read().readings[0]
    assert reading.hold is not None and reading.hold.generation == body["generation"]
    events, _ = Fleet.of_files(fleet).history()
    engaged = [e for e in events if e.event == "engage"]  # between 02:00 and 04:00 UTC the nightly window
    assert engaged[-1].actor == "token:ops from 127.0.0.1"  # also records a skip under this hold
    assert engaged[-1].generation == body["generation"]


def test_status_is_the_status_document_for_a_viewer(served, tokens):
    status, _, body = _as(served, tokens, "watch").request("GET", "/api/v1/status")
    assert status == 200 and body["engaged"] is False and "holds" in body


def test_the_openapi_document_lists_every_route(served):
    status, _, body = served.client().request("GET", "/api/v1/openapi.json")
    assert status == 200 and body["openapi"].startswith("3.")
    assert set(body["paths"]) >= {"/api/v1/status", "/api/v1/holds", "/api/v1/holds/{id}",
                                  "/api/v1/holds/{id}/extend", "/api/v1/windows/{name}/skip"}


@pytest.mark.parametrize(("body", "field"), [
    (b"{not json", "body"),
    (b"[1]", "body"),
    (json.dumps({"reason": "x", "colour": "red"}).encode(), "colour"),
    (json.dumps({"ttl": "soon"}).encode(), "ttl"),
    (json.dumps({"ttl": "1h", "until": "2030-01-01T00:00:00Z"}).encode(), "ttl"),
    (json.dumps({"scope": "../etc"}).encode(), "scope"),
    (json.dumps({"reason": 5}).encode(), "reason"),
    (json.dumps({"allow": {"user_ids": "bob"}}).encode(), "allow.user_ids"),
    (json.dumps({"allow": {"profiles": ["ops"]}}).encode(), "allow.profiles"),
])
def test_a_malformed_pause_is_400_naming_the_field_and_arms_nothing(fleet, served, tokens, body, field):
    status, _, answer = _as(served, tokens, "ops").request("POST", "/api/v1/holds", raw=body)
    assert status == 400 and answer["field"] == field and answer["status"] == 400
    assert not Fleet.of_files(fleet).read().engaged


@pytest.mark.parametrize("header", ["Bearer", "Bearer hme_not-a-token", "Basic b3BzOm9wcw==", None])
def test_no_or_bad_credentials_are_401_and_counted(fleet, served, header):
    client = served.client()
    before = _failures(served)
    status, headers, body = client.request("POST", "/api/v1/holds", {"reason": "x"},
                                           headers={"Authorization": header} if header else None)
    assert status == 401 and "www-authenticate" in headers and body["status"] == 401
    assert not Fleet.of_files(fleet).read().engaged
    assert _failures(served) == before + 1
    assert not any("hme_not-a-token" in line for line in served.lines)


def _failures(served: Served) -> float:
    _, _, text = served.client().request("GET", "/metrics")
    line = next(li for li in text.decode().splitlines() if li.startswith("hermes_estop_api_auth_failures_total"))
    return float(line.split()[-1])


def test_a_viewer_cannot_write_403(fleet, served, tokens):
    status, _, body = _as(served, tokens, "watch").request("POST", "/api/v1/holds", {"reason": "x"})
    assert status == 403 and "viewer" in body["error"]
    assert not Fleet.of_files(fleet).read().engaged


def test_an_operator_lifts_only_the_holds_it_armed_and_an_admin_lifts_any(fleet, served, tokens):
    assert _as(served, tokens, "ops").request("POST", "/api/v1/holds", {"reason": "mine"})[0] == 201
    status, _, body = _as(served, tokens, "ops2").request("DELETE", "/api/v1/holds/fleet")
    assert status == 403 and "token:ops" in body["error"]
    assert Fleet.of_files(fleet).read().engaged
    status, _, body = _as(served, tokens, "boss").request("DELETE", "/api/v1/holds/fleet")
    assert status == 200 and body["lifted"]["reason"] == "mine"
    assert not Fleet.of_files(fleet).read().engaged


@pytest.mark.parametrize(("method", "path"), [
    ("DELETE", "/api/v1/holds/fleet"),
    ("POST", "/api/v1/holds/fleet/extend"),
    ("POST", "/api/v1/windows/no-such-window/skip"),
    ("GET", "/api/v1/nothing-here"),
])
def test_what_is_not_there_is_404(served, tokens, method, path):
    body = {"ttl": "1h"} if path.endswith("extend") else None
    status, _, answer = _as(served, tokens, "boss").request(method, path, body)
    assert status == 404 and answer["status"] == 404


def test_a_stale_if_match_is_412_with_the_new_hold_and_lifts_nothing(fleet, served, tokens):
    ops = _as(served, tokens, "ops")
    seen = ops.request("POST", "/api/v1/holds", {"reason": "first"})[2]["generation"]
    rearmed = ops.request("POST", "/api/v1/holds", {"reason": "second"})[2]["generation"]
    status, _, body = ops.request("DELETE", "/api/v1/holds/fleet", headers={"If-Match": f'"{seen}"'})
    assert status == 412 and body["hold"]["generation"] == rearmed and body["hold"]["reason"] == "second"
    assert Fleet.of_files(fleet).read().engaged
    status, _, _ = ops.request("POST", "/api/v1/holds/fleet/extend", {"ttl": "2h"}, headers={"If-Match": f'"{seen}"'})
    assert status == 412
    assert ops.request("DELETE", "/api/v1/holds/fleet", headers={"If-Match": f'"{rearmed}"'})[0] == 200


def test_extend_gives_a_standing_hold_a_new_deadline(fleet, served, tokens):
    ops = _as(served, tokens, "ops")
    armed = ops.request("POST", "/api/v1/holds", {"reason": "db", "ttl": "10m"})[2]
    status, _, body = ops.request("POST", "/api/v1/holds/fleet/extend", {"ttl": "3h"},
                                  headers={"If-Match": f'"{armed["generation"]}"'})
    assert status == 200 and body["reason"] == "db" and body["expires_at"] > armed["expires_at"]
    assert body["armed_by"] == "token:ops"


def test_skip_and_unskip_of_the_next_occurrence_and_unskip_twice_is_409(fleet, served, tokens):
    ops = _as(served, tokens, "ops")
    status, _, body = ops.request("POST", "/api/v1/windows/nightly/skip")
    assert status == 200 and body["window"] == "nightly"
    assert ops.request("DELETE", "/api/v1/windows/nightly/skip")[0] == 200
    status, _, body = ops.request("DELETE", "/api/v1/windows/nightly/skip")
    assert status == 409 and "not skipped" in body["error"]
    events, _ = Fleet.of_files(fleet).history()
    assert [e.event for e in events[-2:]] == ["skip", "unskip"] and events[-1].actor.startswith("token:ops from ")


def test_a_body_over_64_kib_is_413_and_arms_nothing(fleet, served, tokens):
    status, _, body = _as(served, tokens, "ops").request(
        "POST", "/api/v1/holds", raw=json.dumps({"reason": "x" * (65 * 1024)}).encode())
    assert status == 413 and body["status"] == 413
    assert not Fleet.of_files(fleet).read().engaged


@pytest.mark.parametrize("attempt", range(3))
def test_two_clients_racing_an_if_match_lift_exactly_one_wins(fleet, served, tokens, attempt):
    generation = _as(served, tokens, "boss").request("POST", "/api/v1/holds", {"reason": f"race {attempt}"})[2]["generation"]
    assert race_lift(served, tokens["boss"], generation) == [200, 412]
    assert not Fleet.of_files(fleet).read().engaged


def test_a_scoped_hold_is_lifted_by_its_id_and_leaves_the_full_hold(fleet, served, tokens):
    ops = _as(served, tokens, "ops")
    full = ops.request("POST", "/api/v1/holds", {"reason": "all"})[2]
    status, _, scoped = ops.request("POST", "/api/v1/holds", {"reason": "cron only", "only": ["cron"]})
    assert status == 201 and scoped["id"].startswith("fleet:") and scoped["covers"] != "all"
    assert ops.request("DELETE", "/api/v1/holds/fleet:nosuch")[0] == 404
    status, _, body = ops.request("DELETE", f"/api/v1/holds/{scoped['id']}",
                                  headers={"If-Match": f'"{scoped["generation"]}"'})
    assert status == 200 and body["lifted"]["reason"] == "cron only"
    reading = Fleet.of_files(fleet).read().readings[0]
    assert reading.hold is not None and reading.hold.generation == full["generation"] and not reading.scoped


def test_a_silent_client_does_not_stop_another_being_served(served, tokens):
    """A connection that never starts its TLS handshake (slowloris) ties up its own thread only."""
    with socket.create_connection(("127.0.0.1", int(served.url.rsplit(":", 1)[1].strip("/")))):
        assert _as(served, tokens, "watch").request("GET", "/api/v1/status")[0] == 200


def test_under_tls_the_page_session_cookie_is_secure_httponly_and_samesite_strict(served, tokens):
    from urllib.parse import urlencode

    client = served.client()
    _, form_headers, page = client.request("GET", "/signin")
    cookie = form_headers["set-cookie"].split(";")[0]
    assert "Secure" in form_headers["set-cookie"]
    csrf = page.decode().split('name="csrf" value="', 1)[1].split('"', 1)[0]
    status, headers, _ = client.request("POST", "/signin", raw=urlencode({"token": tokens["ops"], "csrf": csrf}).encode(),
                                        headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie})
    flags = [part.strip() for part in headers["set-cookie"].split(";")]
    assert status == 303 and {"Secure", "HttpOnly", "SameSite=Strict"} <= set(flags)
