"""`hermes store init | status`, and the hold commands switched to PostgreSQL by `--store`,
`$HERMES_ESTOP_STORE` or `store = ...` in the fleet root's `estop.toml` — run in this process
against a real PostgreSQL."""

from __future__ import annotations

import json

import pytest

from hermes_estop.stores.pg_schema import SCHEMA_VERSION
from pg_helpers import pg_server, pg_url  # noqa: F401

#: the subject is each command's output, exit code and files: `hermes` runs in this process
HERMES_IN_PROCESS = True

UNREACHABLE = "postgresql://nobody@127.0.0.1:1/nowhere?connect_timeout=2"


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_store_status_of_the_default_file_store(hermes):
    result = hermes("store", "status", check=0)
    assert "file" in result.stdout
    assert json.loads(hermes("store", "status", "--json", check=0).stdout)["backend"] == "file"


def test_store_init_on_the_file_store_has_nothing_to_do(hermes):
    assert "nothing to create" in hermes("store", "init", check=0).stdout


@pytest.mark.postgresql
def test_store_init_creates_the_versioned_schema_once(hermes, pg_url):  # noqa: F811
    first = json.loads(hermes("--store", pg_url, "store", "init", "--json", check=0).stdout)
    again = json.loads(hermes("--store", pg_url, "store", "init", "--json", check=0).stdout)
    assert first["applied"] == list(range(1, SCHEMA_VERSION + 1)) and first["version"] == SCHEMA_VERSION
    assert again["applied"] == [] and again["version"] == SCHEMA_VERSION
    assert f"already at version {SCHEMA_VERSION}" in hermes("--store", pg_url, "store", "init", check=0).stdout


@pytest.mark.postgresql
def test_store_status_says_what_the_store_is_without_the_password(hermes, pg_url):  # noqa: F811
    hermes("--store", pg_url, "pause", "--reason", "maint", check=0)
    hermes.env["HERMES_ESTOP_STORE"] = pg_url.replace("postgres@", "postgres:hunter2@")
    result = hermes("store", "status", "--json", check=0)
    info = json.loads(result.stdout)
    assert info["backend"] == "postgresql" and info["reachable"] is True
    assert info["schema_version"] == SCHEMA_VERSION and info["holds"] == 1 and info["audit_events"] == 1
    assert info["listener"]["connected"] is True and info["grace_seconds"] == 5.0
    assert "hunter2" not in result.stdout
    text = hermes("store", "status", check=0).stdout
    assert "grace" in text and "hunter2" not in text


def test_store_status_of_an_unreachable_database_exits_1(hermes):
    result = hermes("--store", UNREACHABLE, "store", "status", check=1)
    assert "UNREACHABLE" in result.stdout
    assert json.loads(hermes("--store", UNREACHABLE, "store", "status", "--json", check=1).stdout)["reachable"] is False


def test_an_unreachable_store_holds_and_refuses_writes_in_one_line(hermes):
    assert hermes("--store", UNREACHABLE, "check", check=1).returncode == 1
    status = json.loads(hermes("--store", UNREACHABLE, "status", "--json", check=0).stdout)
    assert status["engaged"] is True and status["holds"][0]["state"] == "unreadable"
    line = one_error_line(hermes("--store", UNREACHABLE, "pause", "--reason", "x", check=2))
    assert "cannot reach the PostgreSQL store" in line


@pytest.mark.parametrize("query, named", [("grace=soon", "'soon'"), ("schema=No-Such", "'No-Such'")])
def test_a_bad_store_url_is_one_line_naming_the_value(hermes, query, named):
    line = one_error_line(hermes("--store", f"postgresql://nobody@127.0.0.1:1/x?{query}", "status", check=2))
    assert named in line


@pytest.mark.postgresql
def test_a_pause_from_one_process_holds_another_through_the_database(hermes, pg_url):  # noqa: F811
    hermes("--store", pg_url, "pause", "--reason", "db migration", "--allow-user", "424242", check=0)
    hermes.env["HERMES_ESTOP_STORE"] = pg_url
    assert "db migration" in hermes("check", check=1).stdout
    hermes("check", "--user", "424242", check=0)
    hermes("resume", check=0)
    hermes("check", check=0)
    events = [line.split()[1] for line in hermes("history", check=0).stdout.splitlines()]
    assert events == ["engage", "release"]


@pytest.mark.postgresql
def test_the_store_can_be_chosen_in_the_fleet_config_file(hermes, pg_url):  # noqa: F811
    hermes.root.mkdir(parents=True, exist_ok=True)
    (hermes.root / "estop.toml").write_text(f'store = "{pg_url}"\n')
    hermes("pause", "--reason", "from the config", check=0)
    assert not hermes.sentinel.exists()
    assert json.loads(hermes("store", "status", "--json", check=0).stdout)["holds"] == 1
