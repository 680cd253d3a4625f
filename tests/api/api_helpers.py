"""A real `hermes serve --http --http-write` for the write API's tests: the process, its URL, a
self-signed certificate made by `openssl`, tokens made through the library (what `hermes tokens
create` calls; the command itself: test_token_store.py), and a JSON client on one kept-alive
connection (`http.client`)."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from hermes_estop import Estop
from hermes_estop.api.tokens import TokenTable
from inprocess_cli import completed

SRC = str(Path(__file__).resolve().parents[2] / "src")
START_TIMEOUT = 90.0


def serve_env(root: Path, store: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(root), HERMES_ROOT=str(root), PYTHONPATH=SRC)
    if store is not None:
        env["HERMES_ESTOP_STORE"] = store
    return env


def hermes(root: Path, *args: str, store: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`hermes ARGS` on the fleet of `root` as an operator there runs it, in this process
    (`completed`: the tests check its output and exit code, not a process); `serve` is a daemon
    and still starts one. `check`: a non-zero exit raises, as `subprocess.run(check=True)`."""
    result = completed(serve_env(root, store), *args)
    if check:
        result.check_returncode()
    return result


def caller_command(home: Path, url: str, cert: Path, token_file: Path, *, via_env: bool = False) -> tuple[dict[str, str], list[str]]:
    """The environment and the argv prefix of `hermes --server URL --token-file F` run from a
    home of its own (never the server's), trusting `cert`; `via_env`: named by
    $HERMES_ESTOP_SERVER / $HERMES_ESTOP_TOKEN_FILE instead of the options."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(home), HERMES_ROOT=str(home), PYTHONPATH=SRC, SSL_CERT_FILE=str(cert))
    if via_env:
        env.update(HERMES_ESTOP_SERVER=url, HERMES_ESTOP_TOKEN_FILE=str(token_file))
        return env, [sys.executable, "-m", "hermes_estop"]
    return env, [sys.executable, "-m", "hermes_estop", "--server", url, "--token-file", str(token_file)]


def make_token(root: Path, name: str, role: str, store: str | None = None) -> str:
    """The secret of a new token `name` of `role` on the fleet of `root` (as `hermes tokens
    create` makes it: `TokenTable.create`, on the store the fleet's configuration names), for a
    test's set-up: no process started."""
    estop = Estop(env=serve_env(root, store))
    try:
        fleet = estop.fleet
        return TokenTable(fleet).create(name, role, None, fleet.clock())[1]
    finally:
        estop.close()


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by the system's `openssl` (skipped without it)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no self-signed certificate for the TLS tests")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=120)
    return cert, key


class StderrLines:
    """A process's stderr read line by line as it comes, in a thread of its own (a pipe left
    unread would stall the process once it fills)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def join(self, timeout: float) -> None:
        self._reader.join(timeout)


class Served:
    """A running `hermes serve`: its URL, its stderr lines so far, and how to reach it."""

    def __init__(self, process: subprocess.Popen[str], url: str, cafile: Path | None) -> None:
        self.process = process
        self.url = url
        self.cafile = cafile
        self.lines = StderrLines(process).lines

    def client(self, token: str | None = None) -> Client:
        return Client(self.url, token, self.cafile)


@contextmanager
def serve(root: Path, *args: str, store: str | None = None, cafile: Path | None = None,
          listen: str = "127.0.0.1:0") -> Iterator[Served]:
    process = subprocess.Popen([sys.executable, "-m", "hermes_estop", "serve", "--interval", "0.5",
                                "--http", listen, *args],
                               env=serve_env(root, store), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        seen = []
        deadline = time.monotonic() + START_TIMEOUT
        url = None
        while url is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            seen.append(line)
            if "http: serving" in line:
                url = line.split(" on ", 1)[1].split(" ", 1)[0]
        if url is None:
            raise AssertionError("hermes serve did not start:\n" + "".join(seen))
        yield Served(process, url, cafile)
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Client:
    """JSON over one kept-alive connection, with `Authorization: Bearer <token>`."""

    def __init__(self, url: str, token: str | None, cafile: Path | None) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        if parts.scheme == "https":
            context = ssl.create_default_context(cafile=str(cafile) if cafile else None)
            self.conn: http.client.HTTPConnection = http.client.HTTPSConnection(parts.hostname, parts.port,
                                                                               context=context, timeout=60)
        else:
            self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.token = token

    def request(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
        sent = dict(headers or {})
        if self.token is not None:
            sent.setdefault("Authorization", f"Bearer {self.token}")
        payload = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        if payload is not None:
            sent.setdefault("Content-Type", "application/json")
        self.conn.request(method, path, body=payload, headers=sent)
        response = self.conn.getresponse()
        data = response.read()
        found = {k.lower(): v for k, v in response.getheaders()}
        if response.getheader("Connection", "").lower() == "close":
            self.conn.close()
        return response.status, found, json.loads(data) if data and "json" in found.get("content-type", "") else data

    def close(self) -> None:
        self.conn.close()


def race_lift(served: Served, token: str, generation: str) -> list[int]:
    """Two clients, each already connected, lifting the fleet's hold with `If-Match` at once:
    their statuses, sorted."""
    clients = [served.client(token) for _ in range(2)]
    for client in clients:  # connected (a TLS handshake done) before the start line
        client.request("GET", "/api/v1/status")
    start = threading.Barrier(2)
    statuses: list[int] = []

    def lift(client: Client) -> None:
        start.wait()
        statuses.append(client.request("DELETE", "/api/v1/holds/fleet", headers={"If-Match": f'"{generation}"'})[0])

    threads = [threading.Thread(target=lift, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return sorted(statuses)
