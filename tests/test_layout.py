"""The layout shows the architecture (issue 34 item 1, docs/design.md "The map of the levels"): a
package per level, the core (model, system, stores, fleet, process) importing nothing built on it,
the pure model importing no other level, Typer only in the CLI, and a package root that holds the
public facade and little else."""

from __future__ import annotations

import re

import pytest

from test_import_graph import MODULES, PACKAGE, import_graph

CORE = ("model", "system", "stores", "fleet", "process")
UPPER = ("windows", "consumers", "notify", "observe", "api", "daemon", "cli")
LEVELS = (*CORE, *UPPER)
#: what may sit at the package root besides the level packages
ROOT_MODULES = {"__init__", "__main__"}
MAX_ROOT_MODULES = 2


def level_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "hermes_estop" else None


def modules_of(levels: tuple[str, ...]) -> list[str]:
    return sorted(m for m in MODULES if level_of(m) in levels)


def test_every_level_is_a_package():
    assert sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()) == sorted(LEVELS)


def test_the_root_keeps_the_facade_and_little_else():
    at_root = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(at_root) <= MAX_ROOT_MODULES and set(at_root) <= ROOT_MODULES


def test_no_level_shadows_a_public_name():
    """A loaded submodule is bound to its package's attribute: a level named like a public name
    (as `hermes_estop.gate`, the predicate module, once was) would replace it."""
    import hermes_estop

    assert sorted(set(LEVELS) & set(hermes_estop.__all__)) == []


@pytest.mark.parametrize("module", modules_of(CORE))
def test_the_core_imports_nothing_built_on_it(module):
    assert sorted(t for t in import_graph()[module] if level_of(t) in UPPER) == []


@pytest.mark.parametrize("module", modules_of(("model",)))
def test_the_model_imports_no_other_level(module):
    assert sorted(t for t in import_graph()[module] if t.startswith("hermes_estop") and level_of(t) != "model") == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if level_of(m) != "cli"))
def test_only_the_cli_imports_typer(module):
    assert sorted(t for t in import_graph()[module] if t == "typer" or t.startswith("typer.")) == []


def test_the_daemon_is_assembled_outside_the_cli():
    assert "hermes_estop.daemon.supervisor" in import_graph()["hermes_estop.cli.serve"]
    assert sorted(t for t in import_graph()["hermes_estop.daemon.supervisor"] if level_of(t) == "cli") == []
    # `hermes serve` builds no service and no server itself (issue 46 item 8)
    assert sorted(t for t in import_graph()["hermes_estop.cli.serve"]
                  if t in {"hermes_estop.windows.scheduler", "hermes_estop.fleet.deadman", "hermes_estop.api.routes"}) == []


def test_no_two_modules_share_a_name_for_different_things():
    """One concept, one name: outside `cli/` (whose modules are named after the commands, which
    name the things they act on), a module name appears once, except where one concept has a part
    in two levels: `forecast` (the forecast, and the windows' contribution to it) and `status` (the
    status document, and its windows section)."""
    same_concept = {"forecast", "status"}
    names: dict[str, list[str]] = {}
    for module, (_, is_package) in MODULES.items():
        if not is_package and level_of(module) != "cli":
            names.setdefault(module.rsplit(".", 1)[-1], []).append(module)
    assert {name: found for name, found in names.items() if len(found) > 1 and name not in same_concept} == {}


def _class_names(path) -> set[str]:
    """The classes `path` defines (at any depth) and the type aliases it names at module level
    (`Name = tuple[...]`, `Name: TypeAlias = ...`): a CamelCase name bound to something other than
    a name imported from elsewhere."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if value is None or isinstance(value, ast.Name | ast.Attribute | ast.Call | ast.Constant | ast.Tuple | ast.Dict):
            continue  # a re-export, an instance or a constant, not a type
        found |= {target.id for target in targets if isinstance(target, ast.Name)
                  and re.fullmatch(r"_?[A-Z][a-z]\w*", target.id)}
    return found


def classes_defined() -> dict[str, list[str]]:
    """Every class (and type alias) name in src/ -> the modules that define it."""
    defined: dict[str, list[str]] = {}
    for module, (path, _) in sorted(MODULES.items()):
        for name in _class_names(path):
            defined.setdefault(name, []).append(module)
    return defined


def test_no_two_classes_share_a_name():
    """One name, one thing (issue 34, issue 46 item 9): every class and type alias in src/, not a
    fixed list, is defined in one module."""
    assert {name: found for name, found in classes_defined().items() if len(found) > 1} == {}


def test_the_class_scan_sees_classes_and_aliases(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("class A:\n    class Inner: ...\nRow = tuple[int, ...]\nLIMIT = 3\nFoo = other.Foo\nx = Bar()\n")
    assert _class_names(source) == {"A", "Inner", "Row"}


#: words that say nothing about what a module holds (issue 46 item 9)
VAGUE_MODULE_WORDS = {"common", "misc", "util", "utils", "helper", "helpers", "stuff", "hot", "outcome",
                      "extensions", "on_record", "present", "remote", "recall", "fields", "trust", "problems"}
#: modules still named by a vague word, each with why it is left (this list only shrinks)
VAGUE_MODULES_LEFT: dict[str, str] = {}


def test_no_module_is_named_by_a_vague_word():
    """A module's name says what it holds: no module of src/ is named by a word that says nothing
    (`common`, `hot`, `misc`, `util`, ...)."""
    vague = sorted(m for m in MODULES if m.rsplit(".", 1)[-1] in VAGUE_MODULE_WORDS)
    assert [m for m in vague if m not in VAGUE_MODULES_LEFT] == []


def test_the_vague_modules_left_still_exist():
    assert sorted(set(VAGUE_MODULES_LEFT) - set(MODULES)) == []


#: the crossings inside the core that docs/design.md's map names, and no others: none (the snapshot
#: a fleet read returns is the model's, the consumer reporter is `consumers/`); the stores import
#: nothing of the fleet (the records they keep are the model's `audit_event` and their own
#: `registry.ConsumerEntry`)
CORE_CROSSINGS: dict[tuple[str, str], set[str]] = {
    ("stores", "fleet"): set(),
    ("fleet", "process"): set(),
    ("stores", "process"): set(),
    ("system", "stores"): set(),
}


@pytest.mark.parametrize(("importer", "imported"), sorted(CORE_CROSSINGS))
def test_the_core_crosses_levels_only_where_the_map_says(importer, imported):
    reached = {t for m in modules_of((importer,)) for t in import_graph()[m] if level_of(t) == imported}
    assert reached <= CORE_CROSSINGS[(importer, imported)]


#: the levels above the core that act through the fleet (issue 46 item 7): only `fleet/` and
#: `stores/` touch a store; these ask a `Fleet` read (`Fleet.where`, `Fleet.audit_problem`, ...)
THROUGH_THE_FLEET = ("api", "cli", "daemon", "notify", "observe", "windows", "consumers")


def _store_accesses(path) -> list[str]:
    """`x.store` attribute reads in `path`'s code (not its text), and imports of the stores."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [f"line {node.lineno}: .store" for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and node.attr == "store" and not _is_own_field(node)]
    found += [f"line {node.lineno}: import {name}" for node in ast.walk(tree)
              if isinstance(node, ast.Import | ast.ImportFrom)
              for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])
              if name == "hermes_estop.stores" or name.startswith("hermes_estop.stores.")]
    return found


def _is_own_field(node) -> bool:
    """`item.store` of a consumer's in-flight item is the path of its table, not a hold store."""
    import ast

    return isinstance(node.value, ast.Name) and node.value.id == "item"


@pytest.mark.parametrize("module", modules_of(THROUGH_THE_FLEET))
def test_only_the_fleet_and_the_stores_touch_a_store(module):
    path, _ = MODULES[module]
    assert _store_accesses(path) == []


def test_the_store_check_sees_an_access():
    import ast

    tree = ast.parse("where = estop.fleet.store.where(location)\n")
    assert any(isinstance(n, ast.Attribute) and n.attr == "store" and not _is_own_field(n) for n in ast.walk(tree))


#: which upper level may import which (issue 46 item 8): windows, consumers and notify build on the
#: core only; the remote API on windows; the status views on windows and consumers' in-flight work
#: (the write API and its page forms are mounted on the status page by the daemon, which assembles
#: them all); the CLI imports everything
UPPER_MAY_IMPORT = {
    "windows": set(),
    "consumers": set(),
    "notify": set(),
    "api": {"windows"},
    "observe": {"windows", "consumers"},
    "daemon": {"windows", "consumers", "notify", "observe", "api"},
    "cli": set(UPPER) - {"cli"},
}


@pytest.mark.parametrize("level", UPPER)
def test_an_upper_level_imports_only_the_levels_below_it(level):
    reached = {level_of(t) for m in modules_of((level,)) for t in import_graph()[m]} & set(UPPER)
    assert reached - {level} <= UPPER_MAY_IMPORT[level]


#: pairs of levels that import each other: none (the snapshot a fleet read returns is the
#: model's, `model.hold.Snapshot`; the consumer reporter, built on a process view, is `consumers/`)
BOTH_WAYS: set[tuple[str, str]] = set()


def test_levels_import_each_other_in_one_direction_only():
    pairs = {(level_of(m), level_of(t)) for m in MODULES for t in import_graph()[m]
             if level_of(t) in LEVELS and level_of(m) in LEVELS and level_of(m) != level_of(t)}
    assert {tuple(sorted(pair)) for pair in pairs if pair[::-1] in pairs} == BOTH_WAYS


@pytest.mark.parametrize("module", modules_of(("cli",)))
def test_no_cli_module_starts_a_thread(module):
    """The CLI parses and prints; what runs in threads (the daemon's services, the gateway's
    line server, `hermes run`'s lease renewer) is assembled in daemon/ and fleet/."""
    import ast

    path, _ = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    started = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
               and ast.unparse(node.func) in {"threading.Thread", "Thread", "threading.Timer", "Timer"}]
    assert started == []
