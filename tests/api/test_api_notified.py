"""A remote write is notified like any other write: the notifier of the same `hermes serve`
delivers the engage and the release made through the API, with the token as actor."""

from __future__ import annotations

import json
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from api_helpers import make_token, serve

pytestmark = pytest.mark.slow


def _receiver() -> tuple[ThreadingHTTPServer, queue.Queue[dict[str, Any]]]:
    received: queue.Queue[dict[str, Any]] = queue.Queue()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            received.put(json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0")))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()  # a quick shutdown()
    return server, received


def test_a_remote_pause_and_lift_are_notified_with_the_token_as_actor(tmp_path):
    server, received = _receiver()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        (tmp_path / "estop.toml").write_text(f'[[notify]]\nname = "ops-chat"\ntype = "webhook"\nurl = "{url}"\n')
        token = make_token(tmp_path, "chatbot", "operator")
        with serve(tmp_path, "--http-write") as served:
            client = served.client(token)
            assert client.request("POST", "/api/v1/holds", {"reason": "from chat"})[0] == 201
            assert client.request("DELETE", "/api/v1/holds/fleet")[0] == 200
            events = [received.get(timeout=180) for _ in range(2)]
    finally:
        server.shutdown()
        server.server_close()
    assert [(e["event"], e["actor"]) for e in events] == [("engage", "token:chatbot from 127.0.0.1"),
                                                          ("release", "token:chatbot from 127.0.0.1")]
    assert events[0]["reason"] == "from chat"
