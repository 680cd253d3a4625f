"""The write port's limits (issue 44 items 4 and 5), against the real HTTP server on loopback
in this process: one total deadline per request (a trickled header is cut), a deeply nested
JSON body is a 400 (never the decoder's recursion error), sign-in refuses a cross-site form and a
form without the sign-in's CSRF token, and a valid token always gets past the failure limiter."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest

from hermes_estop import Estop
from hermes_estop.api.page_actions import COOKIE, SIGN_IN_COOKIE, PageActions
from hermes_estop.api.routes import ApiRequest, WriteApi
from hermes_estop.observe.page import PAGE_CSS
from hermes_estop.observe.server import StatusServer


@pytest.fixture
def server(estop: Estop, secret: str) -> Iterator[StatusServer]:
    api = WriteApi(estop, lambda: {}, write=True)
    with StatusServer(estop, api=api, actions=PageActions(api, tls=False, css=PAGE_CSS), request_deadline=2.0) as running:
        yield running


def _connect(server: StatusServer) -> http.client.HTTPConnection:
    host, port = server.address
    return http.client.HTTPConnection(host, port, timeout=60)


def test_a_request_trickled_a_byte_at_a_time_is_cut_at_its_total_deadline(server):
    with socket.create_connection(server.address, timeout=60) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        closed = False
        for _ in range(240):  # up to two minutes of trickling, on a loaded machine too
            try:
                sock.sendall(b"X")
                sock.settimeout(0.5)
                closed = sock.recv(1024) == b""
            except TimeoutError:
                continue
            except OSError:
                closed = True
            if closed:
                break
        assert closed


def test_a_deeply_nested_json_body_is_400(estop, secret):
    api = WriteApi(estop, lambda: {}, write=True)
    body = b"[" * 30_000 + b"]" * 30_000
    request = ApiRequest("POST", "/api/v1/holds", {"authorization": f"Bearer {secret}"}, body, "127.0.0.1")
    answer = api.handle(request)
    assert answer.status == 400 and "nested too deeply" in answer.body["error"]
    assert not estop.is_engaged()


def test_a_deeply_nested_json_body_over_the_wire_is_answered_400(server, secret):
    conn = _connect(server)
    conn.request("POST", "/api/v1/holds", body=b"[" * 30_000 + b"]" * 30_000,
                 headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 400 and "nested too deeply" in json.loads(response.read())["error"]


def _sign_in_form(server: StatusServer) -> tuple[str, str]:
    """GET /signin: the sign-in cookie and the form's CSRF token."""
    conn = _connect(server)
    conn.request("GET", "/signin")
    response = conn.getresponse()
    page = response.read().decode()
    cookie = response.getheader("Set-Cookie", "").split(";")[0]
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    return cookie, csrf


def _post_sign_in(server: StatusServer, form: dict[str, str], headers: dict[str, str]) -> http.client.HTTPResponse:
    conn = _connect(server)
    conn.request("POST", "/signin", body=urlencode(form),
                 headers={"Content-Type": "application/x-www-form-urlencoded", **headers})
    response = conn.getresponse()
    response.read()
    return response


def _session(response: http.client.HTTPResponse) -> bool:
    return f"{COOKIE}=" in (response.getheader("Set-Cookie") or "") and "Max-Age=0" not in response.getheader(
        "Set-Cookie", "")


def test_a_sign_in_from_another_site_gets_no_session(server, secret):
    cookie, csrf = _sign_in_form(server)
    response = _post_sign_in(server, {"token": secret, "csrf": csrf},
                             {"Cookie": cookie, "Origin": "https://evil.example"})
    assert response.status == 403 and not _session(response)


def test_a_sign_in_without_the_forms_csrf_token_gets_no_session(server, secret):
    cookie, _ = _sign_in_form(server)
    assert cookie.startswith(f"{SIGN_IN_COOKIE}=")
    for form, headers in (({"token": secret}, {"Cookie": cookie}),
                          ({"token": secret, "csrf": "x" * 43}, {"Cookie": cookie}),
                          ({"token": secret, "csrf": cookie.split("=", 1)[1]}, {})):
        response = _post_sign_in(server, form, headers)
        assert response.status == 403 and not _session(response)


def test_a_sign_in_from_this_servers_own_form_gets_a_session(server, secret):
    cookie, csrf = _sign_in_form(server)
    host, port = server.address
    response = _post_sign_in(server, {"token": secret, "csrf": csrf},
                             {"Cookie": cookie, "Origin": f"http://{host}:{port}", "Host": f"{host}:{port}"})
    assert response.status == 303 and _session(response)


def test_a_valid_token_always_gets_past_the_failure_limiter(estop, secret):
    ticks = [0.0]
    api = WriteApi(estop, lambda: {}, write=True, monotonic=lambda: ticks[0])

    def ask(token: str) -> int:
        return api.handle(ApiRequest("GET", "/api/v1/status", {"authorization": f"Bearer {token}"}, b"",
                                     "127.0.0.1")).status

    assert [ask("hme_guess") for _ in range(10)] == [401] * 10
    for _ in range(20):  # one bad request every 2.5 s, for ever: the valid token is served throughout
        ticks[0] += 2.5
        ask("hme_guess")
        assert ask(secret) == 200
    assert ask("hme_guess") == 429
