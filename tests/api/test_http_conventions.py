"""HTTP conventions of the write API (issue 44 item 6): a hold carries its generation as a
quoted `ETag`, `If-Match` takes it back as sent (RFC 9110: a list, `*`, strong comparison), and
a value that is not an entity-tag is a 400 that says how to quote it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hermes_estop import Estop
from hermes_estop.api.routes import ApiRequest, ApiResponse, WriteApi
from hermes_estop.api.tokens import TokenTable


@pytest.fixture
def call(estop: Estop):
    secret = TokenTable(estop.fleet).create("boss", "admin", None, estop.clock())[1]
    api = WriteApi(estop, lambda: {}, write=True)

    def request(method: str, path: str, body: Any = None, **headers: str) -> ApiResponse:
        sent = {"authorization": f"Bearer {secret}", **{k.replace("_", "-").lower(): v for k, v in headers.items()}}
        raw = json.dumps(body).encode() if body is not None else b""
        return api.handle(ApiRequest(method, path, sent, raw, "127.0.0.1"))

    return request


def test_a_hold_carries_its_generation_as_a_quoted_etag(call):
    armed = call("POST", "/api/v1/holds", {"reason": "deploy", "ttl": "1h"})
    assert armed.status == 201 and armed.headers["ETag"] == f'"{armed.body["generation"]}"'
    got = call("GET", "/api/v1/holds/fleet")
    assert got.status == 200 and got.headers["ETag"] == armed.headers["ETag"] and got.body["reason"] == "deploy"
    extended = call("POST", "/api/v1/holds/fleet/extend", {"ttl": "2h"}, if_match=got.headers["ETag"])
    assert extended.status == 200 and extended.headers["ETag"] == f'"{extended.body["generation"]}"'
    assert call("GET", "/api/v1/holds/nope").status == 404
    lifted = call("DELETE", "/api/v1/holds/fleet", if_match=extended.headers["ETag"])
    assert lifted.status == 200
    assert call("GET", "/api/v1/holds/fleet").status == 404


def test_if_match_takes_a_list_of_etags_and_star(call, estop):
    armed = call("POST", "/api/v1/holds", {"reason": "one"})
    listed = f'"{"0" * 32}", {armed.headers["ETag"]}'
    assert call("POST", "/api/v1/holds/fleet/extend", {"ttl": "1h"}, if_match=listed).status == 200
    assert call("DELETE", "/api/v1/holds/fleet", if_match="*").status == 200 and not estop.is_engaged()
    assert call("DELETE", "/api/v1/holds/fleet", if_match="*").status == 412  # nothing stands: * is false


def test_a_weak_etag_never_matches_if_match(call, estop):
    armed = call("POST", "/api/v1/holds", {"reason": "one"})
    answer = call("DELETE", "/api/v1/holds/fleet", if_match="W/" + armed.headers["ETag"])
    assert answer.status == 412 and estop.is_engaged()


@pytest.mark.parametrize("value", ["abc", '"unterminated', '"a" "b"'])
def test_an_if_match_that_is_not_an_entity_tag_is_400_saying_how_to_quote_it(call, estop, value):
    call("POST", "/api/v1/holds", {"reason": "one"})
    answer = call("DELETE", "/api/v1/holds/fleet", if_match=value)
    assert answer.status == 400 and answer.body["field"] == "If-Match" and '"<generation>"' in answer.body["error"]
    assert estop.is_engaged()


def test_if_none_match_star_arms_only_where_nothing_stands(call, estop):
    """`hermes run`'s lease over the API (issue 44 item 1): a hold that already stands is left
    exactly as it is (412 with it and its generation), never replaced or re-armed."""
    first = call("POST", "/api/v1/holds", {"reason": "lease", "ttl": "5m"}, if_none_match="*")
    assert first.status == 201
    again = call("POST", "/api/v1/holds", {"reason": "another", "ttl": "1m", "replace": True}, if_none_match="*")
    assert again.status == 412 and again.body["hold"]["generation"] == first.body["generation"]
    assert first.body["generation"] in again.body["error"]
    standing = call("GET", "/api/v1/holds/fleet")
    assert standing.headers["ETag"] == first.headers["ETag"] and standing.body["reason"] == "lease"


def test_an_if_none_match_other_than_star_is_400_naming_it(call, estop):
    answer = call("POST", "/api/v1/holds", {"reason": "one"}, if_none_match='"abc"')
    assert answer.status == 400 and answer.body["field"] == "If-None-Match" and "'\"abc\"'" in answer.body["error"]
    assert not estop.is_engaged()


def test_if_match_on_a_pause_re_arms_only_the_generation_seen(call, estop):
    """A lease's failure hold over the API: a new reason and deadline, written only over the
    generation the lease holds; a re-arm by someone else in between is 412 and stands."""
    armed = call("POST", "/api/v1/holds", {"reason": "lease", "ttl": "5m"})
    kept = call("POST", "/api/v1/holds", {"reason": "maintenance failed: x exited 1", "ttl": "1h"},
                if_match=armed.headers["ETag"])
    assert kept.status == 201 and kept.body["reason"] == "maintenance failed: x exited 1"
    stale = call("POST", "/api/v1/holds", {"reason": "late", "ttl": "1m"}, if_match=armed.headers["ETag"])
    assert stale.status == 412 and stale.body["hold"]["generation"] == kept.body["generation"]
    assert call("GET", "/api/v1/holds/fleet").body["reason"] == "maintenance failed: x exited 1"
    both = call("POST", "/api/v1/holds", {"reason": "x"}, if_match=kept.headers["ETag"], if_none_match="*")
    assert both.status == 400
    call("DELETE", "/api/v1/holds/fleet")
    gone = call("POST", "/api/v1/holds", {"reason": "x"}, if_match=kept.headers["ETag"])
    assert gone.status == 412 and not estop.is_engaged()


@pytest.mark.parametrize("if_match", [True, False], ids=["If-Match: 412", "no If-Match: 404"])
def test_an_extend_of_a_lifted_hold_with_if_match_is_412_as_a_lift_is(call, estop, if_match):
    """A lease's renewal over the API (issue 44 item 1) that finds its hold resumed meets the
    fence (412, RFC 9110 13.1.1), as a lift does; without `If-Match` nothing there is a 404."""
    armed = call("POST", "/api/v1/holds", {"reason": "lease", "ttl": "5m"})
    assert call("DELETE", "/api/v1/holds/fleet").status == 200
    headers = {"if_match": armed.headers["ETag"]} if if_match else {}
    answer = call("POST", "/api/v1/holds/fleet/extend", {"ttl": "5m"}, **headers)
    assert answer.status == (412 if if_match else 404) and not estop.is_engaged()
    if if_match:
        assert "lifted since you looked" in answer.body["error"]
