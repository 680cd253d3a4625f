"""`hermes store check` and `store status` name the privilege a role lacks, and tell a server that
refuses from one that does not answer (issue 23 item 2), against the real PostgreSQL."""

from __future__ import annotations

import json
import uuid

import pytest

from pg_helpers import pg_server, pg_url, with_params  # noqa: F401

#: the subject is each command's output, exit code and files: `hermes` runs in this process
HERMES_IN_PROCESS = True

UNREACHABLE = "postgresql://nobody@127.0.0.1:1/nowhere?connect_timeout=2"


@pytest.fixture
def weak_role(pg_server, pg_url):  # noqa: F811
    """A login role with no privilege on the store's database beyond CONNECT, and its store URL."""
    role = f"weak_{uuid.uuid4().hex[:8]}"
    with pg_server.admin() as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"REVOKE CREATE ON SCHEMA public FROM {role}")
        database = conn.execute("SELECT current_database()").fetchone()[0]
        conn.execute(f"REVOKE CREATE ON DATABASE {database} FROM PUBLIC")
    base = pg_url.replace("://postgres@", f"://{role}@", 1)
    try:
        yield role, base
    finally:
        with pg_server.admin() as conn:
            conn.execute(f"GRANT CREATE ON DATABASE {database} TO PUBLIC")
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


@pytest.mark.postgresql
def test_a_role_without_create_is_told_the_grant_it_needs(hermes, weak_role):
    role, url = weak_role
    result = hermes("--store", url, "store", "check")
    assert result.returncode == 1, result.stderr
    assert "MISSING  CREATE on database" in result.stdout and f"TO {role};" in result.stdout
    data = json.loads(hermes("--store", url, "store", "check", "--json").stdout)
    assert data["answers"] is True and data["ok"] is False and len(data["missing_privileges"]) == 1


@pytest.mark.postgresql
def test_a_role_without_table_privileges_is_refused_not_unreachable(hermes, pg_url, weak_role):  # noqa: F811
    _role, url = weak_role
    hermes("--store", pg_url, "store", "init", check=0)  # the schema, owned by the admin
    status = hermes("--store", url, "store", "status")
    assert status.returncode == 1
    assert "REFUSED" in status.stdout and "UNREACHABLE" not in status.stdout
    assert "MISSING      USAGE on schema" in status.stdout
    check = hermes("--store", url, "store", "check")
    assert check.returncode == 1 and "USAGE on schema" in check.stdout


@pytest.mark.postgresql
def test_the_owner_has_every_privilege(hermes, pg_url):  # noqa: F811
    hermes("--store", pg_url, "store", "init", check=0)
    assert "ok: this role has every privilege" in hermes("--store", pg_url, "store", "check", check=0).stdout


def test_an_unreachable_server_is_called_unreachable(hermes):
    result = hermes("--store", UNREACHABLE, "store", "check")
    assert result.returncode == 1 and "UNREACHABLE" in result.stdout
    assert "UNREACHABLE" in hermes("--store", UNREACHABLE, "store", "status").stdout


def test_the_file_store_has_nothing_to_check(hermes):
    assert "no privileges to check" in hermes("store", "check", check=0).stdout
