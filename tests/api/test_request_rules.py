"""One request model for every door (issue 43 item 7, the API and page half): the write API and
the page's forms apply the command line's input rules, with its words: a TTL needs a unit
(`30m? 30s?`), a component nothing gates as is refused with a did-you-mean."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from api_helpers import hermes

from hermes_estop.api.page_actions import PageActions
from hermes_estop.api.routes import ApiRequest, ApiResponse, WriteApi
from hermes_estop.observe.page import PAGE_CSS


def _call(api: WriteApi, secret: str, method: str, path: str, body: Any = None) -> ApiResponse:
    raw = json.dumps(body).encode() if body is not None else b""
    return api.handle(ApiRequest(method, path, {"authorization": f"Bearer {secret}"}, raw, "127.0.0.1"))


def test_an_api_ttl_without_a_unit_is_refused_as_on_the_command_line(api, secret, estop, fleet_root):
    answer = _call(api, secret, "POST", "/api/v1/holds", {"reason": "x", "ttl": "30"})
    assert answer.status == 400 and answer.body["field"] == "ttl" and "30m? 30s?" in answer.body["error"]
    assert not estop.is_engaged()
    local = hermes(fleet_root, "pause", "--reason", "x", "--ttl", "30", check=False)
    assert local.returncode == 2 and answer.body["error"] in local.stderr
    assert _call(api, secret, "POST", "/api/v1/holds", {"reason": "x", "ttl": "30m"}).status == 201
    extended = _call(api, secret, "POST", "/api/v1/holds/fleet/extend", {"ttl": "45"})
    assert extended.status == 400 and "45m? 45s?" in extended.body["error"]


def test_an_api_only_naming_no_component_is_refused_with_did_you_mean(api, secret, estop, fleet_root):
    answer = _call(api, secret, "POST", "/api/v1/holds", {"reason": "x", "only": ["kanbn"]})
    assert answer.status == 400 and answer.body["field"] == "only"
    assert "unknown component 'kanbn'" in answer.body["error"] and "did you mean 'kanban'" in answer.body["error"]
    assert not estop.is_engaged()
    assert _call(api, secret, "POST", "/api/v1/holds", {"reason": "x", "only": ["kanban"]}).status == 201


def _signed_in_page(api: WriteApi, secret: str) -> tuple[PageActions, str, Any]:
    """The page's actions, signed in with `secret` through the sign-in form: (actions, the
    session cookie, the signed-in (token, session) pair)."""
    actions = PageActions(api, tls=False, css=PAGE_CSS)
    form = actions.sign_in_form(None)
    cookie = form.headers["Set-Cookie"].split(";")[0]
    csrf = form.body.decode().split('name="csrf" value="', 1)[1].split('"', 1)[0]
    signed = actions.post("/signin", urlencode({"token": secret, "csrf": csrf}).encode(), cookie, "127.0.0.1")
    session = signed.headers["Set-Cookie"].split(";")[0]
    current = actions.signed_in(session)
    assert current is not None
    return actions, session, current


def test_the_pages_pause_form_refuses_a_ttl_without_a_unit(api, secret, estop):
    actions, session, current = _signed_in_page(api, secret)
    body = urlencode({"reason": "x", "ttl": "30", "csrf": current[1].csrf}).encode()
    assert actions.post("/actions/pause", body, session, "127.0.0.1").status == 303
    assert not estop.is_engaged()
    assert any(kind == "error" and "30m? 30s?" in text for kind, text in current[1].flash)


def test_an_unreadable_policy_arms_with_a_warning_on_the_api_and_the_page(api, secret, estop, fleet_root):
    """Issue 43 item 8: a [policy] that cannot be read never stops a pause, and every door says so."""
    (fleet_root / "estop.toml").write_text('[policy]\nmax_tll = "1h"\n')  # a typo
    answer = _call(api, secret, "POST", "/api/v1/holds", {"reason": "x", "ttl": "30m"})
    assert answer.status == 201 and "max_tll" in answer.body["warning"]
    actions, session, current = _signed_in_page(api, secret)
    body = urlencode({"reason": "y", "ttl": "2h", "scope": "fleet", "csrf": current[1].csrf}).encode()  # longer: an arm
    assert actions.post("/actions/pause", body, session, "127.0.0.1").status == 303
    assert estop.is_engaged()
    assert any("warning" in text and "max_tll" in text for _kind, text in current[1].flash), current[1].flash
