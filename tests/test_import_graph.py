"""The package's import graph (issue 14 items 3 and 4, docs/design.md §8): no module imports,
directly or through others, a module that imports it back (a cycle makes import order matter and
hides which module owns what), and the core (the top-level modules and `stores/`) never imports
the layers built on it: windows, consumers, cli, notify, observe.

Every import counts, also one inside a function or under `TYPE_CHECKING`: a lazy import that
closes a cycle is still a cycle, it only fails later.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import hermes_estop

PACKAGE = Path(hermes_estop.__file__).parent
UPPER_LAYERS = ("windows", "consumers", "cli", "notify", "observe", "daemon", "api")
#: the levels every layer above builds on (docs/design.md, the map of the levels)
CORE_LEVELS = ("model", "system", "stores", "fleet", "process")


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["hermes_estop", *path.relative_to(PACKAGE).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


MODULES = _modules()


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The package modules `node` imports: `from P import name` is P.name when that is a module,
    else P."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".")[: len(module.split(".")) - (0 if is_package else 1)]
        base = base[: len(base) - (node.level - 1)]
        package = ".".join(base + ([node.module] if node.module else []))
    else:
        package = node.module or ""
    return [f"{package}.{alias.name}" if f"{package}.{alias.name}" in MODULES else package for alias in node.names]


@functools.cache
def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, (path, is_package) in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[module] = {
            target
            for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
            for target in _targets(module, is_package, node)
            if target in MODULES and target != module
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def core_modules() -> list[str]:
    return sorted(m for m in MODULES if m.split(".")[1:2] and m.split(".")[1] in CORE_LEVELS)


def test_the_graph_sees_relative_lazy_and_package_imports():
    graph = import_graph()
    assert "hermes_estop.fleet.fleet" in graph["hermes_estop.windows.ledger"]
    assert "hermes_estop.stores.state" in graph["hermes_estop.stores.base"]  # inside `open_state`
    assert "hermes_estop.stores.file" in graph["hermes_estop.fleet.fleet"]  # inside `Fleet.of_files`
    assert "hermes_estop.stores.file" in graph["hermes_estop.stores"]
    assert "hermes_estop.model.hold" in core_modules() and "hermes_estop.stores.postgresql" in core_modules()
    assert "hermes_estop.daemon.demo_fleet" not in core_modules() and "hermes_estop.cli" not in core_modules()


def test_the_cycle_finder_finds_a_lazy_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_the_package_is_in_an_import_cycle():
    assert cycles(import_graph()) == []


@pytest.mark.parametrize("module", core_modules())
def test_the_core_never_imports_a_layer_built_on_it(module):
    upper = tuple(f"hermes_estop.{layer}" for layer in UPPER_LAYERS)
    assert sorted(t for t in import_graph()[module] if t.startswith(upper)) == []


#: the layers that act for the whole fleet: they reach holds, the audit trail, the ledger and
#: leadership through `hermes_estop.fleet.fleet`, never a store module directly (issue 19)
FLEET_WIDE_LAYERS = ("windows", "notify", "observe", "cli")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.split(".")[1:2] and m.split(".")[1] in FLEET_WIDE_LAYERS))
def test_fleet_wide_code_reaches_the_stores_only_through_the_fleet(module):
    stores = sorted(t for t in import_graph()[module] if t == "hermes_estop.stores" or t.startswith("hermes_estop.stores."))
    assert stores == []


def test_the_fleet_object_is_where_the_stores_are_reached():
    assert "hermes_estop.stores.base" in import_graph()["hermes_estop.fleet.fleet"]


def test_the_window_ledger_is_chosen_by_the_store_not_by_its_name():
    """Issue 14 item 3: `windows.ledger` imports no backend; the store hands out the storage."""
    source = (PACKAGE / "windows" / "ledger.py").read_text(encoding="utf-8")
    assert "pg_ledger" not in import_graph()["hermes_estop.windows.ledger"]
    assert '"postgresql"' not in source
