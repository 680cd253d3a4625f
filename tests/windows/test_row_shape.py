"""Issue 45 item 1: the decisions take one shape of rows, so no module of windows/ asks which
shape it was given: no `isinstance` on the schedule's row types (a second shape creeping back
shows here before it grows twin functions)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import hermes_estop.windows

ROW_TYPES = {"Windows", "Schedule", "ScheduleTimeline", "Part", "Row", "WindowRows", "ScheduleWindows"}
MODULES = sorted(Path(hermes_estop.windows.__file__).parent.glob("*.py"))


def _names(node: ast.expr) -> set[str]:
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node) if isinstance(n, ast.Name | ast.Attribute)}


@pytest.mark.parametrize("module", MODULES, ids=lambda path: path.name)
def test_no_module_of_windows_asks_which_row_type_it_was_given(module: Path) -> None:
    asked = [f"{module.name}:{call.lineno}" for call in ast.walk(ast.parse(module.read_text()))
             if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "isinstance"
             and len(call.args) == 2 and _names(call.args[1]) & ROW_TYPES]
    assert asked == []
