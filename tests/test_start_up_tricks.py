"""Start-up tricks where they pay, nowhere else (issue 34 item 4). The modules that `hermes check`,
`hermes gate`, `hermes history` and `gate()` import are the hot path: there, imports inside
functions and `TYPE_CHECKING = False` keep a check cheap (tests/test_imports.py,
tests/cli/test_fast_path.py). Everywhere else a module says what it needs at its top, except for the
heavy optional libraries below and the named imports that must stay late, each with its reason."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: Libraries a module may import inside a function anywhere: each costs a command that does not
#: need it real time, and only some commands need it.
HEAVY = {
    "psycopg": "the PostgreSQL driver loads libpq; only a PostgreSQL store needs it",
    "icalendar": "the calendar stack; only a windows.toml with calendar sources needs it",
    "recurring_ical_events": "the calendar stack (RRULE expansion), as icalendar",
    "x_wr_timezone": "the calendar stack (X-WR-TIMEZONE), as icalendar",
    "dateutil": "the calendar stack (icalendar's recurrence engine), as icalendar",
    "apscheduler": "the scheduler of `hermes serve`; no other command runs one",
    "croniter": "only computing cron starts needs it: a command that validates a cron line or reads windows "
                "without their starts does not (tests/model/test_cronspec.py)",
    "prometheus_client": "only the /metrics endpoint renders its format",
    "rich": "only the terminal views draw tables",
    "tomlkit": "only `hermes windows add/remove` edit windows.toml in place",
    "ssl": "only an https listener or feed needs OpenSSL",
    "http.server": "only the status page serves HTTP",
}

#: Named late imports outside the hot path: (module, what it imports) -> why it stays inside a function.
LATE = {
    # `hermes pause` imports at most `PAUSE_MODULES` of the package (issue 45: it was 81, through
    # cli.hold -> cli.remote -> observe.status -> windows.status); what only another command or
    # `--wait` needs is imported where it is used
    ("hermes_estop.cli.hold", "hermes_estop.observe.status"): "`hermes status` and resume's report only",
    ("hermes_estop.cli.hold", "hermes_estop.cli.wait"): "only --wait waits",
    ("hermes_estop.cli.hold", "hermes_estop.fleet.registry.acks"): "only --wait waits",
    ("hermes_estop.cli.hold", "hermes_estop.cli.history"): "the history command's own",
    ("hermes_estop.cli.hold", "hermes_estop.cli.check_impact"): "only `check --impact` reads the consumers' tables",
    # every `hermes windows` command loads cli.windows_impact (it registers `impact`): the
    # consumers' readers are for `windows impact` and `windows validate` only
    ("hermes_estop.cli.windows_impact", "hermes_estop.observe.impact_preview"): "`windows impact` and `validate` only",
    ("hermes_estop.cli.windows_impact", "hermes_estop.consumers.impact"): "`windows validate`'s starvation check only",
    ("hermes_estop.cli.windows_impact", "hermes_estop.windows.kept_files"): "`windows validate`'s starvation check only",
    ("hermes_estop.cli.hold", "hermes_estop.cli.fast_path"): "`check`, `gate` and `history` run the check path's code",
    ("hermes_estop.cli.application", "hermes_estop.cli.subcommands"): "the commands outside the core: not for a hold command",
    ("hermes_estop.cli.write_outcome", "hermes_estop.cli.wait"): "only --wait waits",
    ("hermes_estop.cli.hold", "hermes_estop.cli.api_client"): "the remote client only when a server is named",
    ("hermes_estop.cli.application", "hermes_estop.windows.windows_file"): "shell completion of window names only",
    ("hermes_estop.cli.application", "hermes_estop.consumers.cron"): "shell completion of job names only",
    ("hermes_estop.fleet.policy_guard", "hermes_estop.model.judgement"):
        "only a fleet with a policy (or an API caller) judges a write: a pause under no policy does not",
}

#: package modules `hermes pause --help` may import (issue 45's target: 35; 77 before it), and a
#: real `hermes pause` (81 before, then 41, 39, 38; 35 once the file trail's rotated files joined
#: `stores.audit_log`, the actor `fleet.policy_guard` and the snapshot `model.hold`; 34 once the
#: allowlist joined `model.hold` too: what is left past the CLI is the write path: the fleet, the
#: stores, the policy and the audit trail; the check path's `cli.fast_path`, the other commands'
#: `cli.subcommands` and, for a full hold, the selectors' `model.selector` are not on it)
PAUSE_HELP_MODULES = 35
PAUSE_MODULES = 34

PROBE = """
import json, sys
from hermes_estop.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""

GATE = "import json, sys, hermes_estop; hermes_estop.gate(); print(json.dumps(sorted(sys.modules)), file=sys.stderr)"


def _loaded(env: dict[str, str], code: str, *args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120)
    return {name for name in json.loads(done.stderr.splitlines()[-1]) if name.startswith("hermes_estop")}


@pytest.fixture(scope="module")
def hot_path(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every module the check path imports: free, held, and held by a scoped hold (which reads selectors)."""
    home = tmp_path_factory.mktemp("hot") / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("HERMES_")}
    env["HERMES_HOME"] = str(home)
    loaded = _loaded(env, PROBE, "check") | _loaded(env, PROBE, "history") | _loaded(env, GATE)
    subprocess.run([sys.executable, "-m", "hermes_estop", "pause", "--only", "cron", "--reason", "scoped"], env=env,
                   check=True, capture_output=True, timeout=120)
    loaded |= _loaded(env, PROBE, "check") | _loaded(env, PROBE, "history") | _loaded(env, GATE)
    (home / "ESTOP").write_text('{"reason": "maintenance"}')
    loaded |= _loaded(env, PROBE, "check") | _loaded(env, PROBE, "gate", "--", "true") | _loaded(env, GATE)
    return loaded


def _module_name(path: Path) -> str:
    name = ".".join(path.relative_to(SRC).with_suffix("").parts)
    return name.removesuffix(".__init__")


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return ["." * node.level + (node.module or "")]


def _heavy(name: str) -> bool:
    return any(name == lib or name.startswith(lib + ".") for lib in HEAVY)


def _probes_an_optional_module(node: ast.AST, parents: list[ast.AST]) -> bool:
    """`try: import x / except ImportError:` asks whether x is installed: that cannot move to the top."""
    return any(isinstance(p, ast.Try) and any(h.type is not None and "ImportError" in ast.unparse(h.type)
                                               for h in p.handlers) for p in parents)


def _late_imports(tree: ast.Module) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, parents: list[ast.AST], in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import | ast.ImportFrom) \
                    and not _probes_an_optional_module(child, [*parents, node]):
                found.extend((child.lineno, name) for name in _imported(child) if not _heavy(name))
            visit(child, [*parents, node], in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(tree, [], False)
    return found


def _sets_type_checking_false(tree: ast.Module) -> bool:
    return any(isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TYPE_CHECKING" for t in stmt.targets)
               and isinstance(stmt.value, ast.Constant) and stmt.value.value is False for stmt in tree.body)


def _modules_off_the_hot_path(hot_path: set[str]) -> list[tuple[str, ast.Module]]:
    modules = []
    for path in sorted((SRC / "hermes_estop").rglob("*.py")):
        name = _module_name(path)
        if name not in hot_path:
            modules.append((name, ast.parse(path.read_text(), str(path))))
    return modules


def test_the_hot_path_is_the_check_path(hot_path):
    assert {"hermes_estop.process.check", "hermes_estop.stores.file", "hermes_estop.cli.fast_path",
            "hermes_estop.model.selector"} <= hot_path
    assert not any(name.startswith(("hermes_estop.windows", "hermes_estop.observe", "hermes_estop.daemon"))
                   for name in hot_path)


def test_no_module_off_the_hot_path_imports_inside_a_function(hot_path):
    offenders = [f"{name}:{line} imports {what}" for name, tree in _modules_off_the_hot_path(hot_path)
                 for line, what in _late_imports(tree) if (name, what) not in LATE]
    assert offenders == []


def test_no_module_off_the_hot_path_sets_type_checking_false(hot_path):
    offenders = [name for name, tree in _modules_off_the_hot_path(hot_path) if _sets_type_checking_false(tree)]
    assert offenders == []


def test_every_late_import_named_is_still_needed(hot_path):
    """An entry of LATE whose import moved to the top is stale: the list stays the short list it claims to be."""
    found = {(name, what) for name, tree in _modules_off_the_hot_path(hot_path) for _, what in _late_imports(tree)}
    assert sorted(set(LATE) - found) == []


def test_hermes_pause_imports_neither_the_status_stack_nor_windows_nor_consumers(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("HERMES_")}
    env["HERMES_HOME"] = str(home)
    helped = _loaded(env, PROBE, "pause", "--help")
    paused = _loaded(env, PROBE, "pause", "--reason", "maintenance")
    assert (home / "ESTOP").is_file()
    assert len(helped) <= PAUSE_HELP_MODULES, sorted(helped)
    assert len(paused) <= PAUSE_MODULES, sorted(paused)
    assert not [name for name in paused if name.startswith(("hermes_estop.windows", "hermes_estop.observe",
                                                            "hermes_estop.consumers", "hermes_estop.daemon"))]
    assert not {"hermes_estop.cli.fast_path", "hermes_estop.cli.subcommands", "hermes_estop.model.selector"} & paused
