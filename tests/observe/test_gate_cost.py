"""The observability code and the write API cost `gate()` nothing: they run only in `hermes
serve --http` (and `hermes windows timeline`), so a check never imports them, nor
prometheus_client, rich, `ssl` or `http.server`."""

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
def test_a_gate_never_loads_the_observability_code(tmp_path, code):
    env = {key: value for key, value in os.environ.items() if not key.startswith("HERMES_")}
    env["HERMES_HOME"] = str(tmp_path / "home")
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         env=env, capture_output=True, text=True, check=True).stdout
    loaded = set(json.loads(out.splitlines()[-1]))
    assert sorted(m for m in loaded if m.startswith(("hermes_estop.observe", "prometheus_client", "rich",
                                                     "hermes_estop.api", "ssl", "http.server"))) == []
