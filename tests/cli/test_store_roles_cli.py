"""PostgreSQL with a second role (issue 32 item 13), against the real server: after the README's
own steps (the owner runs `store init` and grants the daemon role), every command the daemon
role runs works; `store check` names every privilege a command needs; `hermes consumers` fails
when it cannot read the registry; a refused password is called refused, with where a password
goes, never UNREACHABLE."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from pg_helpers import pg_server, pg_url  # noqa: F401

#: the subject is each command's output, exit code and files: `hermes` runs in this process
HERMES_IN_PROCESS = True

pytestmark = pytest.mark.postgresql

#: a hang guard for the server to take a configuration reload, never a timing assertion
GUARD = 30.0


def readme_grants(schema: str, role: str, database: str) -> list[str]:
    """The README's grants for a daemon role, word for word but for the names."""
    return [f"GRANT CONNECT ON DATABASE {database} TO {role}",
            f"GRANT USAGE ON SCHEMA {schema} TO {role}",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}",
            f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}"]


@pytest.fixture
def daemon(hermes, pg_server, pg_url):  # noqa: F811
    """The owner (the admin URL) has run `store init` and the README's grants for a login role
    that owns nothing: (role, its store URL, the schema)."""
    role = f"daemon_{uuid.uuid4().hex[:8]}"
    schema = pg_url.rsplit("schema=", 1)[1].split("&")[0]
    hermes("--store", pg_url, "store", "init", check=0)
    with pg_server.admin() as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'right-password'")
        database = conn.execute("SELECT current_database()").fetchone()[0]
        for grant in readme_grants(schema, role, database):
            conn.execute(grant)
    try:
        yield role, pg_url.replace("://postgres@", f"://{role}@", 1), schema
    finally:
        with pg_server.admin() as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def test_after_the_readme_steps_every_command_of_the_daemon_role_works(hermes, daemon):
    _role, url, _schema = daemon
    assert "ok: this role has every privilege" in hermes("--store", url, "store", "check", check=0).stdout
    hermes("--store", url, "pause", "--fleet", "--reason", "maintenance", check=0)
    status = hermes("--store", url, "status")
    assert status.returncode == 0 and "permission denied" not in status.stdout + status.stderr, status
    assert "consumers: none registered" in status.stdout
    consumers = hermes("--store", url, "consumers", "--json")
    assert consumers.returncode == 0 and json.loads(consumers.stdout)["problem"] is None, consumers
    hermes("--store", url, "resume", "--fleet", check=0)


def test_a_daemon_role_registers_consumers_and_keeps_notify_cursors(daemon, fleet_root):
    from hermes_estop.consumers.reporter import ConsumerReporter
    from hermes_estop.model.homes import Layout
    from hermes_estop.process.estop import Estop
    from hermes_estop.stores.postgresql import PostgresStore

    _role, url, _schema = daemon
    store = PostgresStore(url, root=fleet_root, share=False)
    try:
        estop = Estop(layout=Layout(home=fleet_root, root=fleet_root), store=store, actor="daemon@host")
        reporter = ConsumerReporter(estop, "cron", interval=1)
        assert reporter.register(), "the daemon role could not report to the consumer registry"
        assert [entry.component for entry in estop.fleet.consumers().entries()] == ["cron"]
        cursors = estop.fleet.state("notify")
        cursors.save("ops-channel", {"position": 7})
        assert cursors.load() == {"ops-channel": {"position": 7}}
        reporter.deregister()
    finally:
        store.close()


@pytest.mark.parametrize("table", ["consumers", "notify_cursors"])
def test_store_check_names_each_table_a_command_needs(hermes, pg_server, daemon, table):  # noqa: F811
    role, url, schema = daemon
    with pg_server.admin() as conn:
        conn.execute(f"REVOKE DELETE ON {schema}.{table} FROM {role}")
    check = hermes("--store", url, "store", "check")
    assert check.returncode == 1, check
    assert f"MISSING  DELETE on {schema}.{table}" in check.stdout


def test_hermes_consumers_fails_when_it_cannot_read_the_registry(hermes, pg_server, daemon):  # noqa: F811
    role, url, schema = daemon
    with pg_server.admin() as conn:
        conn.execute(f"REVOKE SELECT ON {schema}.consumers FROM {role}")
    for args in (("consumers",), ("consumers", "--json")):
        result = hermes("--store", url, *args)
        assert result.returncode == 1, result
        assert "cannot read the registry" in result.stdout or json.loads(result.stdout)["problem"]


@pytest.fixture
def password_required(pg_server, daemon):  # noqa: F811
    """The server asks the daemon role for its password (scram) on loopback; every other role
    keeps the test cluster's trust."""
    role, _url, _schema = daemon
    if pg_server.data is None:
        pytest.skip("the server's pg_hba.conf is not ours to edit (HERMES_TEST_PG_DSN)")
    with pg_server.admin() as conn:
        hba = Path(conn.execute("SHOW hba_file").fetchone()[0])
    original = hba.read_text()
    hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + original)
    try:
        with pg_server.admin() as conn:
            conn.execute("SELECT pg_reload_conf()")
        deadline = time.monotonic() + GUARD
        dsn = pg_server.dsn.replace("://postgres@", f"://{role}@", 1)
        while True:
            try:
                psycopg.connect(dsn, connect_timeout=5, passfile="/nonexistent").close()
            except psycopg.OperationalError:
                break
            assert time.monotonic() < deadline, "the server never took the new pg_hba.conf"
            time.sleep(0.1)
        yield
    finally:
        hba.write_text(original)
        with pg_server.admin() as conn:
            conn.execute("SELECT pg_reload_conf()")


@pytest.mark.parametrize("password", [None, "wrong-password"], ids=["no-password", "wrong-password"])
def test_a_refused_password_is_called_refused_with_where_a_password_goes(hermes, daemon, password_required, password):
    role, url, _schema = daemon
    if password is not None:
        url = url.replace(f"://{role}@", f"://{role}:{password}@", 1)
    hermes.env["PGPASSFILE"] = "/nonexistent"
    hermes.env.pop("PGPASSWORD", None)
    for args in (("store", "check"), ("store", "status")):
        result = hermes("--store", url, *args)
        text = result.stdout + result.stderr
        assert result.returncode == 1, result
        assert "UNREACHABLE" not in text and "REFUSED" in text, text
        assert "authentication failed" in text and "PGPASSFILE" in text and "PGPASSWORD" in text, text
        assert "wrong-password" not in text  # a password never reaches anything printed
    right = url.replace(f"://{role}:wrong-password@", f"://{role}@", 1).replace(f"://{role}@", f"://{role}:right-password@", 1)
    assert "ok: this role has every privilege" in hermes("--store", right, "store", "check", check=0).stdout
