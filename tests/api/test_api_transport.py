"""The transport rules and the token's life against a real `hermes serve`: the write API off
without `--http-write` or without a token, a remote address refused without TLS (or stated
insecure), a token revoked mid-session, failed sign-ins rate-limited (429, a valid token never), and a remote pause
seen by `hermes check` on the file store and on PostgreSQL."""

from __future__ import annotations

import pytest
from api_helpers import hermes, make_token, race_lift, serve

from pg_helpers import pg_server, pg_url  # noqa: F401


def test_without_http_write_every_write_is_403_and_reads_still_answer(tmp_path):
    token = make_token(tmp_path, "ops", "operator")
    with serve(tmp_path) as served:
        client = served.client(token)
        status, _, body = client.request("POST", "/api/v1/holds", {"reason": "x"})
        assert status == 403 and "--http-write" in body["error"]
        assert client.request("GET", "/api/v1/status")[0] == 200
    assert hermes(tmp_path, "check", check=False).returncode == 0


@pytest.mark.parametrize("setup", ["none", "revoked"])
def test_http_write_without_a_valid_token_refuses_to_start_with_one_line(tmp_path, setup):
    if setup == "revoked":
        make_token(tmp_path, "old", "admin")
        hermes(tmp_path, "tokens", "revoke", "old")
    result = hermes(tmp_path, "serve", "--http", "127.0.0.1:0", "--http-write", check=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "no valid token" in result.stderr


@pytest.mark.parametrize("extra", [[], ["--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"],
                                   ["--tls-cert", "/nonexistent.pem"]])
def test_a_remote_write_api_needs_tls_that_loads(tmp_path, extra):
    make_token(tmp_path, "ops", "operator")
    result = hermes(tmp_path, "serve", "--http", "0.0.0.0:0", "--http-allow-remote", "--http-write", *extra, check=False)
    assert result.returncode == 2 and "hermes: error:" in result.stderr
    assert ("without TLS" in result.stderr) if not extra else ("--tls-" in result.stderr)


def test_insecure_http_on_a_remote_address_says_so_in_every_answer(tmp_path):
    token = make_token(tmp_path, "ops", "operator")
    with serve(tmp_path, "--http-allow-remote", "--http-write", "--insecure-http", listen="0.0.0.0:0") as served:
        for path in ("/api/v1/status", "/api/v1/holds/fleet"):
            _, headers, _ = served.client(token).request("GET" if path.endswith("status") else "DELETE", path)
            assert "tokens travel in clear" in headers["x-hermes-insecure"]
        page = served.client().request("GET", "/")[2].decode()
        assert 'id="insecure"' in page and "tokens travel in clear" in page
    with serve(tmp_path, "--http-write") as served:  # loopback: plain HTTP never leaves the host
        assert "x-hermes-insecure" not in served.client(token).request("GET", "/api/v1/status")[1]


def test_a_token_revoked_while_a_client_uses_it_is_refused_from_its_next_request(tmp_path):
    token = make_token(tmp_path, "ci", "operator")
    with serve(tmp_path, "--http-write") as served:
        client = served.client(token)
        assert client.request("POST", "/api/v1/holds", {"reason": "before"})[0] == 201
        hermes(tmp_path, "tokens", "revoke", "ci")
        status, _, body = client.request("DELETE", "/api/v1/holds/fleet")
        assert status == 401 and "revoked" in body["error"]
    assert hermes(tmp_path, "check", check=False).returncode == 1


def test_a_valid_token_always_gets_through_the_failure_limiter(tmp_path):
    """Failed sign-ins from one address are 429 once it spent its budget, while a valid token
    from the same address, sent between the failures, keeps being served (issue 44 item 4)."""
    token = make_token(tmp_path, "ops", "operator")
    with serve(tmp_path, "--http-write") as served:
        guesser, operator = served.client("hme_guess"), served.client(token)
        statuses = [guesser.request("GET", "/api/v1/status")[0] for _ in range(12)]
        assert statuses[:10] == [401] * 10 and statuses[10:] == [429, 429]
        for _ in range(3):
            status, headers, _ = guesser.request("GET", "/api/v1/status")
            assert status == 429 and int(headers["retry-after"]) > 0
            assert operator.request("GET", "/api/v1/status")[0] == 200
        assert operator.request("POST", "/api/v1/holds", {"reason": "x"})[0] == 201
        warnings = [line for line in served.lines if "failed authentication" in line]
    assert len(warnings) == 1 and "hme_guess" not in warnings[0]
    assert hermes(tmp_path, "check", check=False).returncode == 1


def test_a_remote_pause_on_postgresql_is_seen_by_hermes_check_on_another_home(tmp_path, pg_url):  # noqa: F811
    serving, elsewhere = tmp_path / "a", tmp_path / "b"
    serving.mkdir()
    elsewhere.mkdir()
    hermes(serving, "store", "init", store=pg_url)
    token = make_token(serving, "ops", "operator", store=pg_url)
    assert not (serving / "tokens-state.json").exists()  # kept in the database, not a file
    with serve(serving, "--http-write", store=pg_url) as served:
        assert hermes(elsewhere, "check", store=pg_url, check=False).returncode == 0
        status, _, body = served.client(token).request("POST", "/api/v1/holds", {"reason": "from afar"})
        assert status == 201
        checked = hermes(elsewhere, "check", store=pg_url, check=False)
        assert checked.returncode == 1 and "from afar" in checked.stdout
        assert served.client(token).request("DELETE", "/api/v1/holds/fleet",
                                            headers={"If-Match": f'"{body["generation"]}"'})[0] == 200
    assert hermes(elsewhere, "check", store=pg_url, check=False).returncode == 0


@pytest.mark.parametrize(("setting", "expected"), [("true", 201), ("false", 403)])
def test_the_estop_toml_setting_turns_the_write_api_on(tmp_path, setting, expected):
    (tmp_path / "estop.toml").write_text(f"[http]\nwrite = {setting}\n")
    token = make_token(tmp_path, "ops", "operator")
    with serve(tmp_path) as served:
        assert served.client(token).request("POST", "/api/v1/holds", {"reason": "x"})[0] == expected


def test_a_malformed_estop_toml_setting_is_exit_2_naming_it(tmp_path):
    (tmp_path / "estop.toml").write_text('[http]\nwrite = "yes"\n')
    result = hermes(tmp_path, "serve", "--http", "127.0.0.1:0", check=False)
    assert result.returncode == 2 and "[http] write" in result.stderr


def test_two_clients_racing_an_if_match_lift_on_postgresql_exactly_one_wins(tmp_path, pg_url):  # noqa: F811
    hermes(tmp_path, "store", "init", store=pg_url)
    token = make_token(tmp_path, "boss", "admin", store=pg_url)
    with serve(tmp_path, "--http-write", store=pg_url) as served:
        for attempt in range(3):
            generation = served.client(token).request("POST", "/api/v1/holds", {"reason": f"race {attempt}"})[2]["generation"]
            assert race_lift(served, token, generation) == [200, 412]
    assert hermes(tmp_path, "check", store=pg_url, check=False).returncode == 0
