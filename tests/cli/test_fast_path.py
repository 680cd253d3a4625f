"""`hermes check`, `hermes gate` and `hermes history` take the framework-free path when
well-formed, and answer exactly as the Typer app does; anything else goes to the Typer app."""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest
from cli_runner import Hermes

from hermes_estop.model.hold import Allow

PROBE = """
import sys
from hermes_estop.cli import main
code = main(sys.argv[1:])
print("typer-loaded" if "typer" in sys.modules else "typer-not-loaded", file=sys.stderr)
sys.exit(code)
"""

APP = """
import sys
from hermes_estop.cli import main
sys.exit(main(sys.argv[1:], hot_path=False))
"""


def run(hermes, script, *args):
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=hermes.env,
                          timeout=60)


@pytest.mark.parametrize("args", [["check"], ["check", "-q"], ["check", "--user", "42", "--profile=ops", "--json"],
                                  ["--store", "file", "check"], ["gate", "--", "true"], ["gate", "--user=42", "true"]])
def test_well_formed_check_and_gate_never_load_the_cli_framework(hermes, args):
    hermes.estop().engage()  # held: gate returns instead of exec'ing, so the probe can report
    result = run(hermes, PROBE, *args)
    assert result.returncode in (1, 75), result.stderr
    assert "typer-not-loaded" in result.stderr


@pytest.mark.parametrize("args", [["check", "--help"], ["check", "--bogus"], ["gate", "--held-exit", "x", "--", "true"],
                                  ["check", "extra"], ["status"]])
def test_anything_else_goes_to_the_typer_app(hermes, args):
    assert "typer-loaded" in run(hermes, PROBE, *args).stderr


@pytest.mark.parametrize("args", [
    ["check"], ["check", "-q"], ["check", "--json"], ["check", "--user", "42"], ["check", "--user", "7", "--profile", "ops"],
    ["check", "--user", "42", "--profile", "ops", "--json"], ["gate", "--", "true"], ["gate", "--user", "42", "--", "true"],
    ["gate", "--held-exit", "9", "--", "true"], ["gate", "--held-exit", "300", "--", "true"], ["gate", "--", "no-such-cmd-xyz"],
])
@pytest.mark.parametrize("held", [False, True])
def test_the_hot_path_answers_as_the_typer_app_does(hermes, args, held):
    if held:
        hermes.estop().engage(reason="maint", allow=Allow.of(["42"], ["ops"]))
    hot, app = run(hermes, PROBE, *args), run(hermes, APP, *args)
    assert (hot.returncode, hot.stdout) == (app.returncode, app.stdout)
    assert hot.stderr.replace("typer-not-loaded\n", "") == app.stderr


HISTORIES = [["history"], ["history", "--limit", "2"], ["history", "-n", "1"], ["history", "--limit=3", "--json"],
             ["history", "--since", "1h"], ["history", "--since", "2026-01-01T00:00:00Z", "--json"],
             ["--store", "file", "history", "-n", "2"], ["history", "--since", "yesterday-ish"]]


@pytest.mark.parametrize("args", HISTORIES)
def test_well_formed_history_never_loads_the_cli_framework(history_home, args):
    result = run(history_home, PROBE, *args)
    assert "typer-not-loaded" in result.stderr


@pytest.mark.parametrize("args", [["history", "--limit", "0"], ["history", "-n", "x"], ["history", "--limit", "2", "-n", "3"],
                                  ["history", "extra"], ["history", "--help"], ["history", "--bogus"]])
def test_a_history_the_hot_path_cannot_vouch_for_goes_to_the_typer_app(hermes, args):
    assert "typer-loaded" in run(hermes, PROBE, *args).stderr


@pytest.fixture(scope="module")
def history_home(tmp_path_factory: pytest.TempPathFactory) -> Hermes:
    """A home whose trail has an engage, a re-arm with a control character in its reason and a
    release, written through the library (what `hermes pause` / `resume` call): the `history`
    tests only read it."""
    hermes = Hermes(tmp_path_factory.mktemp("history") / "home")
    estop = hermes.estop()
    estop.engage(reason="first")
    estop.engage(reason="second \x1b[31m")
    assert estop.disengage()
    return hermes


@pytest.mark.parametrize("args", [*HISTORIES, ["history", "--limit", "0"], ["history", "-n", "x"]])
def test_history_on_the_hot_path_answers_as_the_typer_app_does(history_home, args):
    hot, app = run(history_home, PROBE, *args), run(history_home, APP, *args)
    assert (hot.returncode, hot.stdout) == (app.returncode, app.stdout)
    assert hot.stderr.replace("typer-not-loaded\n", "").replace("typer-loaded\n", "") == app.stderr
    assert hot.returncode in (0, 2)


# Issue 12 item 2: `hermes check` / `hermes gate` on the file store import only what one read
# needs. Any of these on the check path is a framework, a consumer or a backend it never uses.
NEVER_ON_THE_CHECK_PATH = ("logging", "typer", "click", "pydantic", "apscheduler", "croniter", "psycopg",
                           "sqlite3", "asyncio", "hermes_estop.cli.application", "hermes_estop.windows",
                           "hermes_estop.consumers", "hermes_estop.stores.postgresql",
                           # the largest stdlib imports the core once paid for (issue 12's profile)
                           "dataclasses", "inspect", "typing")


def _imported(hermes, *args: str) -> set[str]:
    """The modules a real `python -X importtime ARGS` process imported."""
    return _importtime(tuple(args), tuple(sorted(hermes.env.items())))


def _importtime(args: tuple[str, ...], env: tuple[tuple[str, str], ...]) -> set[str]:
    result = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True,
                            text=True, env=dict(env), timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode in (0, 1, 75), result.stderr[-2000:]
    names = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.add(name)
    return names


def imported_modules(hermes, *args: str) -> set[str]:
    """The modules a real `python -X importtime -m hermes_estop ARGS` process imported beyond
    what this interpreter imports for `-c pass`: a site-packages `.pth` file of the machine (one
    here imports certifi, which pulls typing and tempfile) is the interpreter's cost, not ours."""
    names = _imported(hermes, "-m", "hermes_estop", *args)
    assert "hermes_estop.cli.fast_path" in names  # the probe saw the check path itself
    return names - _bare_interpreter(tuple(sorted((k, v) for k, v in hermes.env.items() if not k.startswith("HERMES_"))))


@functools.cache
def _bare_interpreter(env: tuple[tuple[str, str], ...]) -> set[str]:
    """What this interpreter imports for `-c pass` in `env` (without the home, which it never
    reads: asked once, not once per test)."""
    return _importtime(("-c", "pass"), env)


def prepare(hermes, state: str) -> None:
    """The home as `state` says: no hold, a hold armed as `hermes pause` arms it (`Estop.engage`,
    no process), or a hand-written body."""
    if state == "held":
        hermes.estop().engage(reason="maint", ttl="1h", allow=Allow.of(["42"]))
    elif state == "hand-written":
        hermes.home.mkdir(parents=True, exist_ok=True)
        hermes.sentinel.write_text('{"expires_at": "garbage", "allow": "nobody"}')


@pytest.mark.parametrize("state", ["free", "held", "hand-written"])
@pytest.mark.parametrize("args", [["check", "--quiet"], ["check", "--user", "42", "--profile", "ops", "--json"],
                                  ["gate", "--", "true"]])
def test_the_check_path_on_the_file_store_imports_no_framework(hermes, state, args):
    prepare(hermes, state)
    names = imported_modules(hermes, *args)
    loaded = sorted(name for name in names for banned in NEVER_ON_THE_CHECK_PATH
                    if name == banned or name.startswith(banned + "."))
    assert loaded == []


# What only a writer (locks, atomic writes, the audit log), a body (json) or a PATH walk's
# library (shutil) needs: a read that writes nothing never imports it.
NOT_ON_A_READ_ONLY_CHECK = ("threading", "shutil", "fcntl", "hermes_estop.system.fsutil", "hermes_estop.fleet.policy_guard",
                            "hermes_estop.stores.audit_log")


@pytest.mark.parametrize("state", ["free", "held", "hand-written"])
@pytest.mark.parametrize("args", [["check", "--quiet"], ["gate", "--", "true"], ["check", "--user", "42", "--json"]])
def test_a_read_that_writes_nothing_imports_no_write_machinery(hermes, state, args):
    prepare(hermes, state)
    names = imported_modules(hermes, *args)
    assert sorted(name for name in NOT_ON_A_READ_ONLY_CHECK if name in names) == []


@pytest.mark.parametrize("args", [["check", "--quiet"], ["gate", "--", "true"]])
def test_a_check_with_no_hold_parses_no_json(hermes, args):
    assert "json" not in imported_modules(hermes, *args)


@pytest.mark.parametrize("name", ["true", "sh", "no-such-cmd-xyz", "/bin/sh", "/no/such/cmd", "./no-such-cmd", "."])
@pytest.mark.parametrize("path", [None, "", "/usr/bin:/bin", "/nonexistent::/bin"])
def test_the_gate_finds_a_command_exactly_as_shutil_which_does(monkeypatch, name, path):
    import shutil

    from hermes_estop.cli.fast_path import _which

    if path is None:
        monkeypatch.delenv("PATH", raising=False)
    else:
        monkeypatch.setenv("PATH", path)
    assert _which(name) == shutil.which(name)


# Issue 26: matching job globs needs `fnmatch` (which imports `re`; `pathlib`
# imports both already (3.11, 3.12), so they are no extra cost here). Only a body carrying scoped holds ever
# builds a selector, so a check of a fleet without one never imports the selector module.
@pytest.mark.parametrize("state", ["free", "held", "hand-written"])
@pytest.mark.parametrize("args", [["check", "--quiet"], ["check", "--component", "cron", "--job", "nightly-1"],
                                  ["gate", "--component", "kanban", "--", "true"]])
def test_a_check_without_scoped_holds_imports_no_selector(hermes, state, args):
    prepare(hermes, state)
    assert "hermes_estop.model.selector" not in imported_modules(hermes, *args)


def test_a_check_with_a_scoped_hold_reads_its_selector(hermes):
    hermes.estop().engage(only=["cron"], jobs=["nightly-*"])
    names = imported_modules(hermes, "check", "--component", "cron", "--job", "nightly-1")
    assert "hermes_estop.model.selector" in names and "typer" not in names
