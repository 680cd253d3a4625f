"""What a check costs to start (issue 12 item 2): `import hermes_estop` is lazy, and one gate on
the file store imports only what one file-store read needs: none of the CLI framework, the
scheduler, the database driver or `logging`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

NEVER_ON_THE_CHECK_PATH = ["logging", "typer", "click", "pydantic", "apscheduler", "croniter", "psycopg",
                           "tomllib", "hermes_estop.windows", "hermes_estop.consumers", "hermes_estop.cli",
                           "hermes_estop.stores.postgresql"]


def modules_after(code: str, tmp_path) -> set[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("HERMES_")}
    env["HERMES_HOME"] = str(tmp_path / "home")
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         env=env, capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_importing_the_package_loads_no_submodule(tmp_path):
    loaded = modules_after("import hermes_estop", tmp_path)
    assert sorted(m for m in loaded if m.startswith("hermes_estop.")) == []


@pytest.mark.parametrize("code", [
    "import hermes_estop; assert hermes_estop.gate()",
    "import hermes_estop; assert not hermes_estop.is_engaged()",
    "from hermes_estop import Estop; assert Estop().gate('42', 'ops')",
])
def test_a_gate_on_the_file_store_imports_only_the_read_path(tmp_path, code):
    loaded = modules_after(code, tmp_path)
    unwanted = [name for name in NEVER_ON_THE_CHECK_PATH if name in loaded]
    assert unwanted == []


def test_a_held_gate_logs_nothing_and_imports_no_logging(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "ESTOP").write_text('{"reason": "maint"}')
    loaded = modules_after("import hermes_estop; assert not hermes_estop.gate()", tmp_path)
    assert "logging" not in loaded


def test_the_function_gate_survives_loading_the_gate_module():
    import importlib

    import hermes_estop

    module = importlib.import_module("hermes_estop.process.check")
    assert callable(hermes_estop.gate) and hermes_estop.gate is not module
    assert hermes_estop.gate.__module__ == "hermes_estop"
