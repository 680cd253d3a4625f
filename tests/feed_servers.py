"""Calendar feeds for tests: iCalendar text, a feed refused by another thread, and a feed served
slowly on 127.0.0.1."""

from __future__ import annotations

import contextlib
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HEAD = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//hermes-estop tests//EN\r\n"
TAIL = "END:VCALENDAR\r\n"


def vevent(*lines: str) -> str:
    return "BEGIN:VEVENT\r\nDTSTAMP:20260101T000000Z\r\n" + "".join(f"{line}\r\n" for line in lines) + "END:VEVENT\r\n"


def refuse_from_another_thread(feed) -> None:
    """What a window task's or a command's thread does to a feed another thread shares: asks it
    about 2060, which walks an hourly rule past its budget (the feed is refused for good)."""
    from hermes_estop.windows.ical import CalendarError

    def expand() -> None:
        with contextlib.suppress(CalendarError):
            list(feed.events(datetime(2060, 1, 1, tzinfo=UTC), timedelta(days=2)))

    thread = threading.Thread(target=expand)
    thread.start()
    thread.join(120)
    assert feed.refused is not None and "200000 steps" in feed.refused


class SlowFeed:
    """A feed on 127.0.0.1 that answers its headers at once, then its body one byte every
    `pause` seconds, until the client goes away."""

    def __init__(self, pause: float = 2.0) -> None:
        self.gone = threading.Event()
        self.requested = threading.Event()
        slow = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                slow.requested.set()
                body = (HEAD + vevent("UID:slow", "DTSTART:20260301T100000Z", "DURATION:PT1H") + TAIL).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    for byte in body:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        if slow.gone.wait(pause):
                            return
                except OSError:
                    return

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/slow.ics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.gone.set()
        self.server.shutdown()
        self.server.server_close()


class Redirecting:
    """A server on 127.0.0.1 answering every request with a 302 to `target`."""

    def __init__(self, target: str) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(302)
                self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/moved.ics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
