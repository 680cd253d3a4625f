"""The 503 + Retry-After middleware under real servers: WSGI under `wsgiref`, ASGI under
uvicorn, each on 127.0.0.1 in this process (the fleet on a fake clock, so Retry-After is exact):
held work is refused with the seconds until the caller could be admitted (a deadman, a window's
end, a configured default, bounded), admitted and uncovered work reaches the app."""

from __future__ import annotations

import asyncio
import http.client
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest

from hermes_estop import Estop
from hermes_estop.consumers.http_gate import AsgiGate, Work, WsgiGate
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile

NIGHTLY = {"name": "nightly", "cron": "0 2 * * *", "timezone": "UTC", "duration": "2h"}


def _wsgi_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ran"]


async def _asgi_app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ran"})


def _work_of_wsgi(environ: Any) -> Work:
    return Work(user_id=environ.get("HTTP_X_USER"), component=environ.get("HTTP_X_COMPONENT", "gateway"))


def _work_of_asgi(scope: Any) -> Work:
    headers = dict(scope["headers"])
    user = headers.get(b"x-user")
    return Work(user_id=user.decode() if user else None,
                component=headers.get(b"x-component", b"gateway").decode())


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def _wsgi(estop: Estop, **bounds: int) -> Iterator[int]:
    server = make_server("127.0.0.1", 0, WsgiGate(_wsgi_app, estop, identify=_work_of_wsgi, **bounds),
                         handler_class=_Quiet)
    # a short poll: `shutdown()` waits for the loop's next poll (0.5 s by default)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def _asgi(estop: Estop, **bounds: int) -> Iterator[int]:
    uvicorn = pytest.importorskip("uvicorn")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(AsgiGate(_asgi_app, estop, identify=_work_of_asgi, **bounds), lifespan="off",
                            log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


SERVERS = {"wsgi": _wsgi, "asgi": _asgi}


def _get(port: int, **headers: str) -> tuple[int, str | None, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/webhook", body=b"{}", headers={k.replace("_", "-"): v for k, v in headers.items()})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, response.getheader("Retry-After"), body


@pytest.fixture
def fleet(fleet_root, clock) -> Iterator[Estop]:
    estop = Estop(home=fleet_root, root=fleet_root, clock=clock, store="file", actor="operator@test")
    yield estop
    estop.close()


@pytest.mark.parametrize("kind", SERVERS)
def test_work_reaches_the_app_when_nothing_holds(fleet, kind):
    with SERVERS[kind](fleet) as port:
        assert _get(port)[0] == 200


@pytest.mark.parametrize("kind", SERVERS)
def test_held_work_is_503_with_the_seconds_to_the_deadman(fleet, kind):
    fleet.engage(reason="db upgrade", ttl="90m", fleet=True)
    with SERVERS[kind](fleet) as port:
        status, retry_after, body = _get(port)
    assert status == 503 and retry_after == "5400" and b"db upgrade" in body


@pytest.mark.parametrize("kind", SERVERS)
def test_a_covering_window_lifts_at_its_end_not_at_the_holds_deadman(fleet, fleet_root, clock, kind):
    WindowsFile(fleet_root).save([Window.parse(NIGHTLY)])
    clock.set(datetime(2026, 6, 2, 3, 0, tzinfo=UTC))
    fleet.engage(reason="short", ttl="10m", fleet=True)
    with SERVERS[kind](fleet) as port:
        assert _get(port)[:2] == (503, "3600")  # the window holds 02:00-04:00


@pytest.mark.parametrize("kind", SERVERS)
@pytest.mark.parametrize(("ttl", "expected"), [(None, "120"), ("30d", "7200"), ("1s", "5")])
def test_no_known_end_is_the_default_and_every_answer_is_bounded(fleet, kind, ttl, expected):
    fleet.engage(reason="x", ttl=ttl, fleet=True)
    with SERVERS[kind](fleet, default=120, minimum=5, maximum=7200) as port:
        assert _get(port)[:2] == (503, expected)


@pytest.mark.parametrize("kind", SERVERS)
def test_the_allowlist_and_scoped_holds_apply(fleet, kind):
    fleet.engage(reason="maintenance", ttl="1h", fleet=True, allow={"user_ids": ["42"]})
    with SERVERS[kind](fleet) as port:
        assert _get(port, x_user="42")[0] == 200
        assert _get(port, x_user="7")[0] == 503
    fleet.release(fleet=True)
    fleet.engage(reason="cron only", fleet=True, only=["cron"])
    with SERVERS[kind](fleet) as port:
        assert _get(port)[0] == 200
        assert _get(port, x_component="cron")[0] == 503
