"""The remote client's own rules (issue 44 items 2 and 5): a redirect is never followed with the
bearer token (not to plain HTTP, not to another port), a token never goes over plain HTTP to a
host that is not loopback, and every call has one total deadline, whatever the server trickles."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import typer
from api_helpers import SRC, self_signed

from hermes_estop.cli.api_client import Remote


class _Recorder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.seen: list[dict[str, str]] = []


class _Catch(BaseHTTPRequestHandler):
    """Records the headers of every request it gets (where a redirect would take the token)."""

    def do_GET(self) -> None:
        self.server.seen.append(dict(self.headers.items()))  # type: ignore[attr-defined]
        body = b'{"error": "caught"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def running(server: ThreadingHTTPServer) -> Iterator[ThreadingHTTPServer]:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _redirecting(target: str) -> type[BaseHTTPRequestHandler]:
    class Redirect(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    return Redirect


def _hermes(home: Path, *args: str, cert: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(home), HERMES_ROOT=str(home), PYTHONPATH=SRC)
    if cert is not None:
        env["SSL_CERT_FILE"] = str(cert)
    return subprocess.run([sys.executable, "-m", "hermes_estop", *args], env=env, capture_output=True, text=True,
                          timeout=180)


@pytest.mark.parametrize("to", ["plain http", "another port"])
def test_a_redirect_never_carries_the_token(tmp_path, to):
    cert, key = self_signed(tmp_path)
    (tmp_path / "token").write_text("hme_secret-of-the-operator\n")
    with running(_Recorder(_Catch)) as catcher:
        elsewhere = _Recorder(_Catch)
        if to == "another port":
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            elsewhere.socket = context.wrap_socket(elsewhere.socket, server_side=True)
        with running(elsewhere):
            scheme = "https" if to == "another port" else "http"
            target = f"{scheme}://127.0.0.1:{elsewhere.server_address[1]}"
            redirect = _Recorder(_redirecting(target))
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            redirect.socket = context.wrap_socket(redirect.socket, server_side=True)
            with running(redirect):
                url = f"https://127.0.0.1:{redirect.server_address[1]}"
                result = _hermes(tmp_path, "--server", url, "--token-file", str(tmp_path / "token"), "status",
                                 cert=cert)
            assert elsewhere.seen == []  # type: ignore[attr-defined]
        assert catcher.seen == []  # type: ignore[attr-defined]
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "redirect" in result.stderr and "not followed" in result.stderr
    assert "hme_secret" not in result.stderr + result.stdout


def test_a_token_never_travels_over_plain_http_to_a_host_that_is_not_loopback(tmp_path):
    (tmp_path / "token").write_text("hme_x\n")
    result = _hermes(tmp_path, "--server", "http://192.0.2.1:9477", "--token-file", str(tmp_path / "token"),
                     "status")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "over plain HTTP" in result.stderr and "192.0.2.1" in result.stderr


class _Trickle(BaseHTTPRequestHandler):
    """Answers with a status line, then one header byte a second, for ever (until closed)."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            self.wfile.flush()
            while True:
                self.wfile.write(b"X")
                self.wfile.flush()
                time.sleep(0.5)
        except OSError:
            return

    def log_message(self, *args: object) -> None:
        pass


def test_a_remote_call_has_one_total_deadline_whatever_the_server_trickles(capsys):
    with running(_Recorder(_Trickle)) as trickle:
        remote = Remote(f"http://127.0.0.1:{trickle.server_address[1]}", "hme_x", deadline=2.0)
        with pytest.raises(typer.Exit) as exited:
            remote.call("GET", "/api/v1/status")
    assert exited.value.exit_code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did not answer within 2 s" in err


def test_a_refused_connection_is_still_cannot_reach(capsys):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(typer.Exit):
        Remote(f"http://127.0.0.1:{port}", "hme_x").call("GET", "/api/v1/status")
    assert "cannot reach server" in capsys.readouterr().err
