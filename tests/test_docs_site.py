"""The documentation site (issue 38 item 2): its CLI reference is generated from the Typer app and
lists every command the app has, every page is in the navigation, every metric the exporter
serves is documented with its labels, and the roles the PostgreSQL page sets up are enough for
the daemons (run against a real server)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import uuid
from pathlib import Path
from types import ModuleType

import pytest
import typer

from inprocess_cli import completed
from pg_helpers import pg_server  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def cli_reference_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cli_reference", DOCS / "hooks" / "cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def app_command_paths() -> list[str]:
    """Every command of the full `hermes` app, as `hermes windows add`, walked from the click tree."""
    from hermes_estop.cli.application import build_app

    def walk(command: object, path: tuple[str, ...]) -> list[str]:
        found = [" ".join(("hermes", *path))]
        for name, sub in (getattr(command, "commands", None) or {}).items():
            if not getattr(sub, "hidden", False):
                found += walk(sub, (*path, name))
        return found

    return walk(typer.main.get_command(build_app()), ())


def test_the_cli_reference_lists_every_command_the_app_has():
    rendered = cli_reference_hook().reference_markdown()
    headings = re.findall(r"^#{2,4} (hermes(?: [\w-]+)*)$", rendered, flags=re.MULTILINE)
    assert sorted(headings) == sorted(app_command_paths())
    assert len(headings) >= 40


@pytest.mark.parametrize("command", ["pause", "windows add", "store check"])
def test_the_cli_reference_shows_each_commands_own_help(command):
    rendered = cli_reference_hook().reference_markdown()
    section = rendered.split(f" hermes {command}\n", 1)[1].split("\n#", 1)[0]
    assert f"Usage: hermes {command} [OPTIONS]" in section
    assert "-h, --help" in section


def test_the_cli_reference_page_is_generated_not_written_by_hand():
    hook = cli_reference_hook()
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert hook.MARKER in page
    assert "Usage: hermes" not in page
    rendered = hook.on_page_markdown(page, None, None, None)
    assert hook.MARKER not in rendered and "## hermes pause" in rendered
    assert "hooks/cli_reference.py" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def nav_pages() -> set[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text.split("\nnav:\n", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r":\s*([\w./-]+\.md)\s*$", nav, flags=re.MULTILINE))


def test_every_page_is_in_the_navigation_and_every_entry_exists():
    pages = {p.name for p in DOCS.glob("*.md")}
    assert nav_pages() == pages


def exported_metrics() -> list[str]:
    """The metric families `observe/metrics.py` builds (counters as exposed, with `_total`)."""
    source = (ROOT / "src" / "hermes_estop" / "observe" / "metrics.py").read_text(encoding="utf-8")
    found = [name for name in re.findall(r'GaugeMetricFamily\(\s*"(hermes_estop_\w+)"', source)]
    found += [f"{name}_total" for name in re.findall(r'CounterMetricFamily\(\s*"(hermes_estop_\w+)"', source)]
    return found


def test_every_metric_is_documented_in_the_observability_table():
    page = (DOCS / "observability.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(hermes_estop_\w+)(?:\{[\w,]+\})?` \|", page, flags=re.MULTILINE)
    metrics = exported_metrics()
    assert len(metrics) >= 15
    assert sorted(set(rows)) == sorted(metrics)


# -- the PostgreSQL page's roles, on a real server ---------------------------------------------

def sql_blocks(text: str) -> list[str]:
    return re.findall(r"```sql\n(.*?)```", text, flags=re.DOTALL)


def renamed(sql: str, owner: str, daemon: str, database: str) -> str:
    """The page's SQL for this test's own roles and database; passwords dropped (trust auth)."""
    sql = re.sub(r"\bestop_daemon\b", daemon, sql)
    sql = re.sub(r"\bestop\b", owner, sql)
    sql = re.sub(r"\bfleet\b", database, sql)
    sql = re.sub(r"--[^\n]*", "", sql)
    return re.sub(r" PASSWORD '[^']*'", "", sql)


def hermes(store: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`hermes --store STORE ARGS` in this process (`completed`): the roles' rights are checked,
    not a process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(tmp_path), HERMES_ROOT=str(tmp_path), HERMES_ESTOP_CACHE="off")
    return completed(env, "--store", store, *args)


def url_for(dsn: str, role: str, database: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(dsn)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{role}@{host}", f"/{database}", parts.query, ""))


@pytest.mark.postgresql
def test_the_postgresql_pages_roles_give_the_daemon_role_what_it_needs(pg_server, tmp_path):  # noqa: F811
    import psycopg

    create_roles, grants = sql_blocks((DOCS / "postgresql.md").read_text(encoding="utf-8"))
    tag = uuid.uuid4().hex[:8]
    owner, daemon, database = f"own_{tag}", f"dmn_{tag}", f"fleet_{tag}"
    with pg_server.admin() as conn:
        for statement in renamed(create_roles, owner, daemon, database).split(";"):
            if statement.strip():
                conn.execute(statement)
    try:
        owner_url, daemon_url = url_for(pg_server.dsn, owner, database), url_for(pg_server.dsn, daemon, database)
        before = hermes(daemon_url, tmp_path, "store", "check")
        assert before.returncode == 1, before.stdout + before.stderr  # nothing granted yet
        assert hermes(owner_url, tmp_path, "store", "init").returncode == 0
        with psycopg.connect(owner_url, autocommit=True) as conn:
            for statement in renamed(grants, owner, daemon, database).split(";"):
                if statement.strip():
                    conn.execute(statement)
        check = hermes(daemon_url, tmp_path, "store", "check")
        assert check.returncode == 0, check.stdout + check.stderr
        pause = hermes(daemon_url, tmp_path, "pause", "--fleet", "--reason", "from the daemon role", "--ttl", "5m")
        assert pause.returncode == 0, pause.stderr
        assert "from the daemon role" in hermes(daemon_url, tmp_path, "status").stdout
        assert hermes(daemon_url, tmp_path, "resume", "--fleet").returncode == 0
    finally:
        with pg_server.admin() as conn:
            conn.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'")
            conn.execute(f"DROP DATABASE IF EXISTS {database}")
            for role in (daemon, owner):
                conn.execute(f"DROP ROLE IF EXISTS {role}")
