"""The write API meets the fleet's arming policy (issue 37) at the one write path, as the
caller its token names: a remote operator is judged by its token's role, never as the account
`hermes serve` runs as (which can write the fleet root and so could break glass)."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest
from api_helpers import make_token, self_signed, serve

from hermes_estop.fleet.fleet import Fleet

#: the account `serve` runs as is an admin here: a remote operator must not borrow that
POLICY = f'[policy]\nmax_ttl = "1h"\nlift = "admins"\n\n[policy.roles]\n"{pwd.getpwuid(os.geteuid()).pw_name}" = "admin"\n'


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet")
    (root / "estop.toml").write_text(POLICY)
    return root


@pytest.fixture(scope="module")
def tokens(fleet: Path) -> dict[str, str]:
    return {name: make_token(fleet, name, role) for name, role in (("ops", "operator"), ("boss", "admin"))}


@pytest.fixture(scope="module")
def served(fleet: Path, tokens: dict[str, str], tmp_path_factory: pytest.TempPathFactory):
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    with serve(fleet, "--http-write", "--tls-cert", str(cert), "--tls-key", str(key), cafile=cert) as running:
        yield running


def test_a_remote_pause_over_max_ttl_is_403_naming_the_rule_and_writes_nothing(fleet, served, tokens):
    status, _, body = served.client(tokens["ops"]).request("POST", "/api/v1/holds", {"reason": "x", "ttl": "2h"})
    assert status == 403 and "max_ttl" in body["error"]
    assert not Fleet.of_files(fleet).read().engaged
    events, _ = Fleet.of_files(fleet).history()
    assert events[-1].event == "refused" and events[-1].actor == "token:ops from 127.0.0.1"


def test_a_remote_operator_may_not_lift_where_only_admins_may_and_an_admin_may(fleet, served, tokens):
    ops, boss = served.client(tokens["ops"]), served.client(tokens["boss"])
    status, _, hold = ops.request("POST", "/api/v1/holds", {"reason": "deploy", "ttl": "30m"})
    assert status == 201
    status, _, body = ops.request("DELETE", f"/api/v1/holds/{hold['id']}")
    assert status == 403 and "lift" in body["error"]
    assert Fleet.of_files(fleet).read().engaged
    assert boss.request("DELETE", f"/api/v1/holds/{hold['id']}")[0] == 200
    assert not Fleet.of_files(fleet).read().engaged


def _remote(fleet: Path, served, secret: str, tmp_path: Path, *args: str):
    """`hermes --server URL --token-file F ARGS` from a home of its own."""
    import os
    import subprocess
    import sys

    from api_helpers import SRC

    (tmp_path / "token").write_text(secret + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(tmp_path), HERMES_ROOT=str(tmp_path), PYTHONPATH=SRC, SSL_CERT_FILE=str(served.cafile))
    return subprocess.run([sys.executable, "-m", "hermes_estop", "--server", served.url.rstrip("/"), "--token-file",
                           str(tmp_path / "token"), *args], env=env, capture_output=True, text=True, timeout=120)


def test_override_travels_over_server_and_is_judged_with_the_tokens_rights(fleet, served, tokens, tmp_path):
    files = Fleet.of_files(fleet)
    refused = _remote(fleet, served, tokens["boss"], tmp_path, "pause", "--reason", "long", "--ttl", "2h")
    assert refused.returncode == 2 and "max_ttl" in refused.stderr and not files.read().engaged
    broke = _remote(fleet, served, tokens["boss"], tmp_path, "pause", "--reason", "long", "--ttl", "2h",
                    "--override", "INC-42 needs the night")
    assert broke.returncode == 0, broke.stderr
    assert files.read().engaged
    events, _ = files.history()
    assert any(e.event == "override" and e.actor == "token:boss from 127.0.0.1" for e in events)
    resumed = _remote(fleet, served, tokens["boss"], tmp_path, "resume", "--override", "INC-42 done")
    assert resumed.returncode == 0 and not files.read().engaged
    assert not (tmp_path / "ESTOP").exists()
