"""The write API costs the check path nothing: a gate never imports it, nor `ssl` or the HTTP
server it runs in."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("code", [
    "import hermes_estop; hermes_estop.gate()",
    "from hermes_estop import Estop; Estop().gate('42', 'ops')",
])
def test_a_gate_never_loads_the_write_api(tmp_path, code):
    env = {key: value for key, value in os.environ.items() if not key.startswith("HERMES_")}
    env["HERMES_HOME"] = str(tmp_path / "home")
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         env=env, capture_output=True, text=True, check=True).stdout
    loaded = set(json.loads(out.splitlines()[-1]))
    assert sorted(m for m in loaded if m.startswith(("hermes_estop.api", "http.server", "ssl", "secrets"))) == []
