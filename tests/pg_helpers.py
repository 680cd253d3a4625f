"""A real PostgreSQL for the tests, and one fresh schema per test.

CI (`.ci/run`) starts a throwaway cluster and exports `HERMES_TEST_PG_DSN` (plus
`HERMES_TEST_PG_CTL`, `HERMES_TEST_PG_DATA`, `HERMES_TEST_PG_RUNAS` so fault tests can stop and
restart it). Without the DSN, the session starts its own throwaway cluster with the local
`initdb`/`pg_ctl` (as the `postgres` user when running as root), so `python -m pytest` works on
a fresh machine too. The PostgreSQL tests are never skipped when `CI` is set: they fail.

Import the fixtures into a test module: `from pg_helpers import pg_server, pg_url  # noqa: F401`;
`PostgresBackend` is the contract suite's backend (`conftest.BACKENDS`).
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import json
import os
import queue
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit, urlunsplit

import psycopg
import pytest

from hermes_estop.model.homes import Location
from hermes_estop.stores.postgresql import PostgresStore

__all__ = ["PgServer", "PostgresBackend", "JsonLines", "session_server", "pg_server", "pg_url", "with_params",
           "new_schema", "drop_schema"]

DSN_ENV = "HERMES_TEST_PG_DSN"


def with_params(url: str, **params: object) -> str:
    """`url` with query parameters added (e.g. `schema=`, `grace=`)."""
    parts = urlsplit(url)
    query = "&".join(filter(None, [parts.query, urlencode({k: str(v) for k, v in params.items()})]))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))


@dataclass
class PgServer:
    """A running PostgreSQL the tests may use; `ctl`/`data` are set when the tests may also
    stop, start and restart it (fault tests)."""

    dsn: str
    ctl: str | None = None
    data: str | None = None
    runas: str | None = None
    log: str | None = None
    _opts: str | None = field(default=None, repr=False)

    @property
    def controllable(self) -> bool:
        return bool(self.ctl and self.data)

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(self.dsn, autocommit=True, connect_timeout=5)

    def _ctl(self, *args: str) -> None:
        if not self.controllable:
            raise RuntimeError(f"{DSN_ENV} is set without HERMES_TEST_PG_CTL/HERMES_TEST_PG_DATA: cannot control the server")
        command = [self.ctl, "-D", self.data, *args]
        if self.runas:
            command = ["runuser", "-u", self.runas, "--", *command]
        subprocess.run(command, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=120)

    def _logfile(self) -> str:
        return self.log or os.path.join(os.path.dirname(os.path.abspath(self.data or ".")), "server-restart.log")

    def _options(self) -> str:
        """The postmaster's options as last started (`postmaster.opts`), minus argv[0] and -D."""
        with open(os.path.join(self.data or "", "postmaster.opts")) as handle:
            argv = shlex.split(handle.read())
        out, skip = [], False
        for arg in argv[1:]:
            if skip:
                skip = False
                continue
            if arg == "-D":
                skip = True
                continue
            out.append(arg)
        return shlex.join(out)

    def stop(self) -> None:
        self._opts = self._options()
        self._ctl("-m", "fast", "-w", "stop")

    def start(self) -> None:
        opts = self._opts if self._opts is not None else self._options()
        self._ctl("-w", "-l", self._logfile(), "-o", opts, "start")

    def restart(self) -> None:
        self._ctl("-m", "fast", "-w", "-l", self._logfile(), "restart")


class JsonLines:
    """A Python script run as a real subprocess (this checkout's `src` first on its path) that
    reports on stdout in JSON lines; `next()` returns the next one. Its stderr is collected."""

    def __init__(self, script: Path, *args: str, stdin: bool = False) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src") + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen([sys.executable, str(script), *args], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL)
        self.lines: queue.Queue = queue.Queue()
        self._stderr: list[bytes] = []
        self._pumps = [threading.Thread(target=self._pump, daemon=True),
                       threading.Thread(target=lambda: self._stderr.extend(self.proc.stderr), daemon=True)]
        for pump in self._pumps:
            pump.start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    def next(self, timeout: float = 10.0) -> dict:
        """The next line; kills the process and fails with its stderr when none comes in time."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            self.finish(kill=True)
            raise AssertionError(f"{self.proc.args[1]!s} reported nothing within {timeout}s: {self.stderr[-3000:]}") from None  # type: ignore[index]

    def finish(self, sig: int | None = None, *, kill: bool = False) -> str:
        """Stop it (send `sig`, or close its stdin, or kill it), wait, and return its stderr."""
        if self.proc.poll() is None:
            if kill:
                self.proc.kill()
            elif sig is not None:
                self.proc.send_signal(sig)
            elif self.proc.stdin is not None:
                self.proc.stdin.close()
            else:
                self.proc.kill()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
        for pump in self._pumps:
            pump.join(10)
        return self.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _bindir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: [int(x) for x in p.split("/")[4].split(".") if x.isdigit()])
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def start_cluster() -> tuple[PgServer, str]:
    """A throwaway cluster on loopback: (server, work dir to remove after stopping it)."""
    bindir = _bindir()
    if bindir is None:
        raise FileNotFoundError("no PostgreSQL server binaries (initdb) found: install postgresql")
    work = tempfile.mkdtemp(prefix="hermes-test-pg-")
    runas = None
    if os.geteuid() == 0:
        runas = "postgres"
        shutil.chown(work, user=runas)
    data = os.path.join(work, "data")
    prefix = ["runuser", "-u", runas, "--"] if runas else []
    subprocess.run([*prefix, f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"],
                   check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    port = _free_port()
    server = PgServer(
        dsn=f"postgresql://postgres@127.0.0.1:{port}/postgres",
        ctl=f"{bindir}/pg_ctl",
        data=data,
        runas=runas,
        log=os.path.join(work, "server.log"),
    )
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {work} -c max_connections=200 -c fsync=off"
    server._ctl("-w", "-l", server.log, "-o", opts, "start")
    _watchdog(server, work)
    return server, work


_WATCHDOG = """
import os, shutil, subprocess, sys, time
parent, command, work = int(sys.argv[1]), sys.argv[2:-1], sys.argv[-1]
while os.path.isdir(work):
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)
        break
    time.sleep(1)
"""


def _watchdog(server: PgServer, work: str) -> None:
    """Stop the throwaway cluster even when this process is killed (a timeout, SIGKILL), when
    the normal `atexit` clean-up never runs."""
    command = [server.ctl or "", "-D", server.data or "", "-m", "immediate", "stop"]
    if server.runas:
        command = ["runuser", "-u", server.runas, "--", *command]
    subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid()), *command, work], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


_session: dict[str, object] = {}


def session_server() -> PgServer:
    """The PostgreSQL of this test session, started on first use (skip, or fail under CI, when
    there is none). Tests that need one call this (directly or through `pg_server`)."""
    if "server" in _session:
        return _session["server"]  # type: ignore[return-value]
    if "error" in _session:
        _unavailable(str(_session["error"]))
    dsn = os.environ.get(DSN_ENV)
    if dsn:
        server = PgServer(dsn, os.environ.get("HERMES_TEST_PG_CTL") or None, os.environ.get("HERMES_TEST_PG_DATA") or None,
                          os.environ.get("HERMES_TEST_PG_RUNAS") or None)
    else:
        try:
            server, work = start_cluster()
        except (OSError, subprocess.SubprocessError) as exc:
            _session["error"] = exc
            _unavailable(str(exc))
        atexit.register(_stop_cluster, server, work)
    _session["server"] = server
    return server


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {DSN_ENV} is not, and no throwaway PostgreSQL could be started: {why}")
    pytest.skip(f"no PostgreSQL: set {DSN_ENV} or install postgresql ({why})")


def _stop_cluster(server: PgServer, work: str) -> None:
    with contextlib.suppress(Exception):
        server._ctl("-m", "immediate", "stop")
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> PgServer:
    return session_server()


def new_schema() -> str:
    return f"t_{uuid.uuid4().hex[:16]}"


def drop_schema(server: PgServer, schema: str) -> None:
    try:
        with server.admin() as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    except psycopg.Error:
        pass


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A store URL on a schema of its own, dropped afterwards."""
    schema = new_schema()
    yield with_params(pg_server.dsn, schema=schema)
    drop_schema(pg_server, schema)


class _SchemaStore(PostgresStore):
    """A store on a throwaway schema that drops it when closed."""

    def close(self) -> None:
        super().close()
        drop_schema(session_server(), self.schema)


class PostgresBackend:
    """The contract suite's PostgreSQL backend (see `conftest.Backend`): one fresh schema per
    fleet root, i.e. per test."""

    name = "postgresql"

    def __init__(self) -> None:
        self._urls: dict[Path, str] = {}

    def spec(self, root: Path) -> str:
        url = self._urls.get(root)
        if url is None:
            url = self._urls[root] = with_params(session_server().dsn, schema=new_schema())
        return url

    def open(self, root: Path) -> PostgresStore:
        return _SchemaStore(self.spec(root), root=root)

    def plant(self, store: PostgresStore, location: Location, raw: bytes) -> None:
        """An insert by hand, as an operator in psql would: the trigger stamps and notifies."""
        assert store.sync(), "the store's listener is not connected"
        with session_server().admin() as conn:
            conn.execute(
                f'INSERT INTO "{store.schema}".holds (scope, body) VALUES (%s, %s) '
                "ON CONFLICT (scope) DO UPDATE SET body = EXCLUDED.body",
                [location.key, raw],
            )
        assert store.sync(), "the store's listener did not catch up"

    def present(self, store: PostgresStore, location: Location) -> bool:
        """Whether the row is there once the store's pending work (expiry retires a read
        handed to its background thread) is done."""
        store.sync()
        with session_server().admin() as conn:
            if conn.execute("SELECT to_regclass(%s)", [f'"{store.schema}".holds']).fetchone()[0] is None:
                return False
            row = conn.execute(f'SELECT 1 FROM "{store.schema}".holds WHERE scope = %s', [location.key]).fetchone()
        return row is not None
