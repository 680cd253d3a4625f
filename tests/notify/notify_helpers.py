"""A real webhook receiver (stdlib `http.server` in a thread on 127.0.0.1:0) whose answers a
test scripts: a status code per request, or a stall longer than the sender's timeout."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

STALL = "stall"


class Received:
    def __init__(self, headers: dict[str, str], body: bytes) -> None:
        self.headers = headers
        self.body = body
        self.event: dict[str, Any] = json.loads(body)


class Receiver:
    """`script` is consumed one entry per request (an int status, or STALL: answer only after
    `stall_seconds`); when empty, `default` answers. Every request is recorded, also a failed
    one; `accepted` lists the events answered with a 2xx."""

    def __init__(self, default: int | str = 200, stall_seconds: float = 3.0, delay: float = 0.0) -> None:
        self.default = default
        self.stall_seconds = stall_seconds
        self.delay = delay
        self.script: deque[int | str] = deque()
        self.requests: list[Received] = []
        self.accepted: list[Received] = []
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    answer = receiver.script.popleft() if receiver.script else receiver.default
                    record = Received(dict(self.headers.items()), body)
                    receiver.requests.append(record)
                if receiver.delay:
                    time.sleep(receiver.delay)
                if answer == STALL:
                    time.sleep(receiver.stall_seconds)
                    answer = 200  # too late: the sender has given up and counts it failed
                    accepted = False
                else:
                    accepted = 200 <= int(answer) < 300
                # recorded BEFORE the 2xx goes out: once the sender has its answer, a test that
                # looks must find the event (recording after the reply raced the test under load)
                if accepted:
                    with receiver.changed:
                        receiver.accepted.append(record)
                try:
                    self.send_response(int(answer))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    if accepted:
                        with receiver.changed:
                            receiver.accepted.remove(record)
                with receiver.changed:
                    receiver.changed.notify_all()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # a short poll: `shutdown()` waits for the loop's next poll (0.5 s by default), at every teardown
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def ids(self) -> list[str]:
        with self.lock:
            return [r.event["id"] for r in self.accepted]

    def events(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r.event for r in self.accepted]

    def wait_for(self, count: int, timeout: float = 180.0) -> bool:
        """Until `count` events were accepted (a generous bound for a loaded machine)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while len(self.accepted) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.changed.wait(remaining)
        return True

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def write_config(root: Path, *tables: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "estop.toml"
    path.write_text("\n".join(tables))
    return path


def webhook(name: str, url: str, **fields: Any) -> str:
    lines = ["[[notify]]", f'name = "{name}"', 'type = "webhook"', f'url = "{url}"']
    lines += [f"{key} = {json.dumps(value)}" for key, value in fields.items()]
    return "\n".join(lines) + "\n"


def command(name: str, argv: list[str], **fields: Any) -> str:
    lines = ["[[notify]]", f'name = "{name}"', 'type = "command"', f"argv = {json.dumps(argv)}"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in fields.items()]
    return "\n".join(lines) + "\n"
