"""The token store is not trusted blindly (issue 44 item 3): written 0600, refused with one
line when it is not the fleet owner's or root's or when group or others may write it (a forged
admin entry is never honoured), and `tokens create` / `revoke` are on the audit trail."""

from __future__ import annotations

import json
import os
import stat

import pytest
from api_helpers import hermes

from hermes_estop import Estop
from hermes_estop.api.routes import ApiRequest, WriteApi
from hermes_estop.api.tokens import hash_secret

STORE = "tokens-state.json"


def make_token(root, name: str, role: str) -> str:
    """`hermes tokens create NAME --role ROLE`, the command itself (the other tests make their
    tokens through the library): its secret, printed alone on stdout."""
    secret = hermes(root, "tokens", "create", name, "--role", role).stdout
    assert secret.startswith("hme_") and secret.count("\n") == 1, secret
    return secret.strip()


def test_the_token_store_is_written_0600(tmp_path):
    make_token(tmp_path, "ops", "operator")
    assert stat.S_IMODE(os.stat(tmp_path / STORE).st_mode) == 0o600
    hermes(tmp_path, "tokens", "revoke", "ops")
    assert stat.S_IMODE(os.stat(tmp_path / STORE).st_mode) == 0o600


def _forge(tmp_path) -> str:
    """Add an admin entry to the token store by hand, as an account that may write it would."""
    forged = "hme_forged-by-someone-else"
    data = json.loads((tmp_path / STORE).read_text())
    data["targets"]["intruder"] = {"role": "admin", "sha256": hash_secret(forged),
                                   "created_at": "2026-01-01T00:00:00Z", "expires_at": None, "revoked_at": None}
    (tmp_path / STORE).write_text(json.dumps(data))
    return forged


@pytest.mark.parametrize("how", ["another owner", "group or others may write"])
def test_a_token_store_someone_else_could_write_is_refused_with_one_line(tmp_path, how):
    make_token(tmp_path, "ops", "operator")
    forged = _forge(tmp_path)
    if how == "another owner":
        if os.geteuid() != 0:
            pytest.skip("giving a file to another account needs root")
        os.chown(tmp_path / STORE, 12345, 12345)
        os.chmod(tmp_path / STORE, 0o600)
    else:
        os.chmod(tmp_path / STORE, 0o666)
    listed = hermes(tmp_path, "tokens", "list", check=False)
    assert listed.returncode == 2 and listed.stderr.count("\n") == 1 and "refusing the token store" in listed.stderr
    assert "intruder" not in listed.stdout
    served = hermes(tmp_path, "serve", "--http", "127.0.0.1:0", "--http-write", check=False)
    assert served.returncode == 2 and "refusing the token store" in served.stderr
    estop = Estop(home=tmp_path, root=tmp_path, store="file")
    answer = WriteApi(estop, lambda: {}, write=True).handle(
        ApiRequest("POST", "/api/v1/holds", {"authorization": f"Bearer {forged}"}, b"{}", "127.0.0.1"))
    assert answer.status == 503 and "refusing the token store" in answer.body["error"]
    assert not estop.is_engaged()


def test_tokens_create_and_revoke_are_audited(tmp_path):
    make_token(tmp_path, "ops", "operator")
    hermes(tmp_path, "tokens", "revoke", "ops")
    events = json.loads(hermes(tmp_path, "history", "--json").stdout)
    kinds = [(e["event"], e["detail"]) for e in events]
    assert ("token-create", "token ops (operator)") in kinds and ("token-revoke", "token ops (operator)") in kinds
    assert all(e["actor"] for e in events)
    text = hermes(tmp_path, "history").stdout
    assert "token-create" in text and "token-revoke" in text
