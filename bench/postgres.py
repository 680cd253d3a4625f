"""Benchmarks of the PostgreSQL store: how fast a change reaches another process, and what a
check costs when the rows are in memory.

Propagation: a watcher subprocess (`tests/stores/pg_watcher.py`, its own store and connections,
full re-reads only hourly, so only LISTEN/NOTIFY delivers) polls its reading every 0.5 ms and
reports each change with its CLOCK_MONOTONIC time, which is system-wide on Linux. A sample is
the time from just before the writing call in this process (so it includes the whole write
transaction) to the watcher's observation; for an expiry, from the deadline to the observation.

A hundred hosts on one database (issue 24): a hundred waiter processes
(`tests/stores/pg_waiter.py`, each its own store, so its own LISTEN connection; they block on the
listener's version counter instead of polling) see each new hold, and, as a second figure, a
hundred listening connections from ten processes of ten listeners each; 1,000 profile scopes in the
table against one, for `gate()`; three real `hermes serve` processes on one database, sampled
for how many of them say they lead (each one's `/metrics`) and who holds the advisory lock
(`pg_locks`), across a SIGKILL of the leader; and each process's connections, counted in
`pg_stat_activity` by the `application_name` every connection of the store carries
(`hermes-estop <role> <pid>`).

The database is `$HERMES_TEST_PG_DSN`, or a throwaway cluster started for the run.
Run: `python bench/run.py --only postgres` (add `--quick` for a smoke run).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from datetime import timedelta
from pathlib import Path

import psycopg

from harness import Figure, compare, percentile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from core import _script
from hermes_estop import Estop
from hermes_estop.model.homes import Layout
from hermes_estop.process.fleet_config import STORE_ENV
from hermes_estop.stores import FileStore
from hermes_estop.stores.pg_leader import DEFAULT_POLL
from hermes_estop.stores.pg_schema import LOCK_CLASS
from hermes_estop.stores.postgresql import PostgresStore
from pg_helpers import JsonLines, _free_port, _stop_cluster, start_cluster

__all__ = ["run"]

REPO = Path(__file__).resolve().parents[1]
WATCHER = REPO / "tests" / "stores" / "pg_watcher.py"
SCHEDULER = REPO / "tests" / "windows" / "pg_scheduler.py"
WAITER = REPO / "tests" / "stores" / "pg_waiter.py"
TARGET_MS = 100.0
#: issue 24: a hundred listening processes on one database see a new hold within these
HOSTS = 100
HOSTS_P99_MS, HOSTS_MAX_MS = 50.0, 250.0
#: resident memory one waiter process needs at most (Python, psycopg, the package), for the count
WAITER_MIB = 60
#: profile scopes with a hold in the table, against one, for `gate()`
SCOPES = 1000
#: the connections each kind of process keeps, by role (`Backend.connect`'s application_name):
#: a consumer only reads (its listener); `hermes serve` also writes (the writer connection) and
#: campaigns for the window scheduler (one leader connection per role; the notifier's is a
#: second role, only with `[[notify]]` targets, which this fleet has none of)
EXPECTED = {"listening process": {"listener": 1},
            "`hermes serve`": {"listener": 1, "writer": 1, "leader": 1}}


def _server():
    """(dsn, cleanup)."""
    dsn = os.environ.get("HERMES_TEST_PG_DSN")
    if dsn:
        return dsn, lambda: None
    server, work = start_cluster()
    return server.dsn, lambda: _stop_cluster(server, work)


def _with_schema(dsn: str, schema: str) -> str:
    return dsn + ("&" if "?" in dsn else "?") + f"schema={schema}"


def _ms(values: list[float]) -> list[float]:
    return [v * 1000 for v in values]


def _figures(what: str, samples: list[float]) -> list[Figure]:
    ms = _ms(samples)
    p50, p99 = percentile(ms, 50), percentile(ms, 99)
    detail = {"samples": len(ms), "p50_ms": p50, "p99_ms": p99, "max_ms": max(ms), "min_ms": min(ms)}
    return [
        Figure(f"{what} seen by another process, p50 (PostgreSQL, loopback)", p50, "ms",
               target=f"< {TARGET_MS:g} ms", met=p50 < TARGET_MS, detail=detail),
        Figure(f"{what} seen by another process, p99 (PostgreSQL, loopback)", p99, "ms",
               target=f"< {TARGET_MS:g} ms", met=p99 < TARGET_MS, detail=detail),
    ]


def propagation(dsn: str, tmp: Path, quick: bool) -> list[Figure]:
    url = _with_schema(dsn, f"bench_{os.getpid()}")
    root = tmp / "fleet"
    root.mkdir()
    layout = Layout(home=root, root=root)
    store = PostgresStore(url, root=root, share=False)
    store.init_schema()
    estop = Estop(layout=layout, store=store, actor="bench")
    estop.disengage()
    watcher = JsonLines(WATCHER, url, str(root), stdin=True)
    engaged, released, expired = [], [], []
    try:
        watcher.next(30)
        for _ in range(20 if quick else 200):
            started = time.monotonic()
            hold = estop.engage(reason="bench")
            seen = watcher.next(30)
            assert seen["generation"] == hold.generation, seen
            engaged.append(seen["t"] - started)
            started = time.monotonic()
            estop.release()
            seen = watcher.next(30)
            assert seen["state"] == "absent", seen
            released.append(seen["t"] - started)
        for _ in range(5 if quick else 40):
            now = estop.clock()
            deadline = now + timedelta(milliseconds=150)
            at = time.monotonic() + (deadline - now).total_seconds()
            hold = estop.engage(reason="short", expires_at=deadline)
            assert watcher.next(30)["state"] == "active"
            seen = watcher.next(30)
            assert (seen["state"], seen["generation"]) == ("expired", hold.generation), seen
            expired.append(seen["t"] - at)
            estop.release()
            watcher.next(30)
    finally:
        watcher.finish()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{store.schema}" CASCADE')
        store.close()
    return _figures("a new hold", engaged) + _figures("a release", released) + _figures("an expiry (from its deadline)", expired)


def gate_cost(dsn: str, tmp: Path, quick: bool) -> Figure:
    url = _with_schema(dsn, f"bench_gate_{os.getpid()}")
    root = tmp / "gate"
    root.mkdir()
    layout = Layout(home=root, root=root)
    pg = Estop(layout=layout, store=PostgresStore(url, root=root, share=False), actor="bench")
    files = Estop(layout=layout, store=FileStore(root), actor="bench")
    try:
        pg.engage(reason="bench", allow={"user_ids": ["alice"]})
        files.engage(reason="bench", allow={"user_ids": ["alice"]})
        subject, baseline, ratio = compare(lambda: pg.gate("alice"), lambda: files.gate("alice"),
                                           calls=500 if quick else 5000, rounds=3 if quick else 7)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{pg.store.schema}" CASCADE')
        pg.store.close()
    return Figure("gate() with an active hold (PostgreSQL store: rows in memory)", subject * 1e6, "us/call",
                  baseline_name="the same on the file store", baseline=baseline * 1e6, ratio=ratio,
                  target="no round trip: same order as the file store", met=ratio < 3)


def takeover(dsn: str, tmp: Path, quick: bool) -> list[Figure]:
    """Two scheduler processes (`tests/windows/pg_scheduler.py`, the default leader poll); the
    leader is SIGKILLed; a sample is the time until the standby says it leads."""
    url = _with_schema(dsn, f"bench_ha_{os.getpid()}")
    root = tmp / "ha"
    root.mkdir()
    creator = PostgresStore(url, share=False)
    creator.init_schema()
    samples = []
    try:
        standby = JsonLines(SCHEDULER, url, str(root), str(DEFAULT_POLL))
        assert standby.next(60)["leader"] is True
        for _ in range(3 if quick else 10):
            leader, standby = standby, JsonLines(SCHEDULER, url, str(root), str(DEFAULT_POLL))
            assert standby.next(60)["leader"] is False
            leader.proc.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            leader.finish()
            assert standby.next(60)["leader"] is True
            samples.append(time.monotonic() - killed)
        standby.finish(signal.SIGTERM)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{creator.schema}" CASCADE')
        creator.close()
    ms = _ms(samples)
    detail = {"samples": len(ms), "p50_ms": percentile(ms, 50), "max_ms": max(ms), "leader_poll_s": DEFAULT_POLL}
    return [Figure("scheduler takeover after SIGKILL of the leader, max (PostgreSQL advisory lock)", max(ms), "ms",
                   target=f"<= leader poll ({DEFAULT_POLL:g} s) + scheduling", met=max(ms) <= DEFAULT_POLL * 1000 + 500,
                   detail=detail)]


def _drop(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def connections(dsn: str) -> dict[int, Counter[str]]:
    """The store's connections per OS process, by role, from `pg_stat_activity`: every
    connection a store opens is named `hermes-estop <role> <pid>` (`Backend.connect`)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        names = [row[0] for row in conn.execute(
            "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE 'hermes-estop %'")]
    found: dict[int, Counter[str]] = {}
    for name in names:
        parts = name.split()
        if len(parts) == 3 and parts[2].isdigit():
            found.setdefault(int(parts[2]), Counter())[parts[1]] += 1
    return found


def _connection_figure(kind: str, per_process: list[Counter[str]], expected: dict[str, int] | None = None) -> Figure:
    expected = EXPECTED[kind] if expected is None else expected
    totals = [sum(roles.values()) for roles in per_process]
    roles: Counter[str] = Counter()
    for found in per_process:
        roles.update(found)
    return Figure(f"connections per {kind} (pg_stat_activity), max over {len(per_process)}", max(totals),
                  "connections", target=f"exactly {sum(expected.values())}: "
                  + ", ".join(f"{n} {role}" for role, n in expected.items()),
                  met=all(dict(found) == expected for found in per_process),
                  detail={"processes": len(per_process), "processes_by_count": dict(Counter(totals)),
                          "connections_by_role": dict(roles)})


def _host_count(dsn: str) -> tuple[int, str]:
    """How many waiter processes this machine and server allow, up to `HOSTS`, and why."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        limit = int(conn.execute("SHOW max_connections").fetchone()[0])
        reserved = int(conn.execute("SHOW superuser_reserved_connections").fetchone()[0])
        used = int(conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'").fetchone()[0])
    by_server = limit - reserved - used - 10  # the bench's own connections, and room for psql
    by_memory = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (2 * WAITER_MIB * 2**20)  # half of free
    count = min(HOSTS, by_server, by_memory)
    if count == HOSTS:
        return count, f"{HOSTS} real processes, one store (one LISTEN connection) each"
    return count, (f"{count} real processes, not {HOSTS}: the server takes {limit} connections ({used} in use) and "
                   f"half the free memory fits {by_memory} at {WAITER_MIB} MiB each")


class Waiters:
    """`count` waiter processes (`tests/stores/pg_waiter.py`, the checkout's `src` first on their
    path, as `JsonLines` runs them), each with `listeners` stores of its own (one LISTEN
    connection each), writing their JSON lines into ONE pipe (a line is shorter than PIPE_BUF,
    so lines never interleave). The bench reads that pipe every `POLL` seconds while it waits
    for a round, not once per line: the lines carry the time each waiter saw the change, so reading
    them late costs nothing, while a reader woken by every line (and a thread handing each one
    on) would take CPU from the hundred processes being measured, on the same two cores."""

    POLL = 0.005

    def __init__(self, count: int, url: str, root: Path, listeners: int = 1) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        self._errors = tempfile.TemporaryFile()
        self.expected = count * listeners
        self.procs = [subprocess.Popen([sys.executable, str(WAITER), url, str(root), str(listeners)], env=env,
                                       stdin=subprocess.PIPE, stdout=write_end, stderr=self._errors) for _ in range(count)]
        os.close(write_end)
        self._fd = read_end
        self._buffer = b""
        self._lines: list[dict] = []

    def _read(self) -> None:
        try:
            while chunk := os.read(self._fd, 1 << 16):
                self._buffer += chunk
        except BlockingIOError:
            pass
        *whole, self._buffer = self._buffer.split(b"\n")
        self._lines.extend(json.loads(line) for line in whole)

    def collect(self, timeout: float) -> dict[tuple[int, int], dict]:
        """The next line of every listener, by (pid, listener) (each has exactly one per change)."""
        seen: dict[tuple[int, int], dict] = {}
        deadline = time.monotonic() + timeout
        while True:
            self._read()
            while self._lines and len(seen) < self.expected:
                line = self._lines.pop(0)
                key = (line["pid"], line.get("listener", 0))
                assert key not in seen, line
                seen[key] = line
            if len(seen) == self.expected:
                return seen
            if time.monotonic() > deadline:
                self._errors.seek(0)
                raise AssertionError(f"{self.expected - len(seen)} listeners reported nothing in {timeout}s: "
                                     + self._errors.read()[-3000:].decode(errors="replace"))
            time.sleep(self.POLL)

    def finish(self) -> None:
        for proc in self.procs:  # every stdin first: they wind down side by side
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
        os.close(self._fd)
        self._errors.close()


def _fan_out(dsn: str, tmp: Path, quick: bool, processes: int, listeners: int) -> tuple[dict, list[int]]:
    """`processes` waiter processes with `listeners` listening connections each see each new
    hold: a sample is the time from just before the `engage()` in this process to one
    listener's observation; every round gives one per listener. The writer's connection is
    opened, and one hold armed and released, before the waiters start: opening a connection and
    the writer's first-write costs (imports, the server compiling the trigger functions for its
    session: about 10 ms) are not propagation. (detail, waiter pids)."""
    url = _with_schema(dsn, f"bench_hosts_{processes}x{listeners}_{os.getpid()}")
    root = tmp / f"hosts-{processes}x{listeners}"
    root.mkdir()
    store = PostgresStore(url, root=root, share=False)
    store.init_schema()
    estop = Estop(layout=Layout(home=root, root=root), store=store, actor="bench")
    estop.engage(reason="bench: the writer's first write")
    estop.release()
    rounds = 3 if quick else 20
    waiters: Waiters | None = None
    engaged: list[float] = []
    released: list[float] = []
    first_round: list[float] = []
    try:
        started = time.monotonic()
        waiters = Waiters(processes, url, root, listeners)
        pids = sorted({pid for pid, _ in waiters.collect(300)})  # each first line: connected, nothing held
        startup = time.monotonic() - started
        time.sleep(2.0)  # the start-up's stragglers settle before the first sample
        found = connections(dsn)
        for _ in range(rounds):
            started = time.monotonic()
            hold = estop.engage(reason="bench")
            lines = waiters.collect(30).values()
            assert all(seen["generation"] == hold.generation for seen in lines), lines
            engaged.extend(seen["t"] - started for seen in lines)
            if not first_round:
                first_round = engaged[:]
            time.sleep(0.2)
            started = time.monotonic()
            estop.release()
            lines = waiters.collect(30).values()
            assert all(seen["state"] == "absent" for seen in lines), lines
            released.extend(seen["t"] - started for seen in lines)
            time.sleep(0.2)
    finally:
        if waiters is not None:
            waiters.finish()
        _drop(dsn, store.schema)
        store.close()
    ms, off = _ms(engaged), _ms(released)
    detail = {"processes": processes, "listeners_per_process": listeners, "rounds": rounds, "samples": len(ms),
              "p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99), "max_ms": max(ms),
              "first_round_max_ms": max(_ms(first_round)),
              "p99_ms_after_the_first_round": percentile(ms[len(first_round):], 99),
              "release_p50_ms": percentile(off, 50), "release_p99_ms": percentile(off, 99),
              "release_max_ms": max(off), "startup_s": round(startup, 1), "load_average": os.getloadavg(),
              "connections": [found.get(pid, Counter()) for pid in pids]}
    return detail, pids


def hundred_hosts(dsn: str, tmp: Path, quick: bool) -> list[Figure]:
    """Issue 24's hundred hosts, two ways. The primary figure: `HOSTS` waiter processes
    (`tests/stores/pg_waiter.py`), each with its own store, hence its own LISTEN connection, as
    a hundred hosts have. The second, labelled as such: the same hundred listening connections
    from 10 processes of 10 listeners each (the issue allows connections "as the machine
    allows"), which costs the machine ten interpreters instead of a hundred."""
    count, why = _host_count(dsn)
    figures: list[Figure] = []
    for processes, listeners in ((count, 1), (max(1, count // 10), 10)):
        detail, _pids = _fan_out(dsn, tmp, quick, processes, listeners)
        per_process = detail.pop("connections")
        total = processes * listeners
        if listeners == 1:
            detail["why"] = why
            what = f"a new hold seen by each of {processes} listening processes"
            kind, expected = "listening process", None
        else:
            what = (f"a new hold seen by each of {total} listening connections "
                    f"({processes} processes x {listeners} listeners; second figure, not the primary one)")
            kind, expected = f"process of {listeners} listeners", {"listener": listeners}
        p99, worst = detail["p99_ms"], detail["max_ms"]
        figures += [
            Figure(f"{what}, p99 (PostgreSQL, loopback)", p99, "ms", target=f"< {HOSTS_P99_MS:g} ms",
                   met=p99 < HOSTS_P99_MS and total == HOSTS, detail=detail),
            Figure(f"{what}, max (PostgreSQL, loopback)", worst, "ms", target=f"< {HOSTS_MAX_MS:g} ms",
                   met=worst < HOSTS_MAX_MS and total == HOSTS, detail=detail),
            _connection_figure(kind, per_process, expected),
        ]
    return figures


def many_scopes(dsn: str, tmp: Path, quick: bool) -> list[Figure]:
    """`gate()` of a profile process with `SCOPES` profile scopes held in the table against one
    (each an active hold admitting the caller, no deadman), interleaved round by round; and the
    same for a profile with no hold of its own; the control compares the one-scope fleet's
    `gate()` with itself, the run's noise floor. Each side is the first view to read its
    location: the store's per-location caches are keyed by `Location`, and a second view of the
    same location (equal, not identical) pays for comparing them, about a third more per call."""
    calls, rounds = (2000, 5) if quick else (20000, 15)
    stores: list[PostgresStore] = []
    fleets: dict[int, Estop] = {}
    try:
        for scopes in (1, SCOPES):
            root = tmp / f"scopes-{scopes}"
            root.mkdir()
            store = PostgresStore(_with_schema(dsn, f"bench_scopes_{scopes}_{os.getpid()}"), root=root, share=False)
            stores.append(store)
            fleet = fleets[scopes] = Estop(layout=Layout(home=root, root=root), store=store, actor="bench")
            for i in range(scopes):
                fleet.for_profile(f"p{i:04d}").engage(reason="bench", allow={"user_ids": ["alice"]})
        one, many = fleets[1].for_profile("p0000"), fleets[SCOPES].for_profile("p0000")
        assert one.gate("alice").proceed and many.gate("alice").proceed and not many.gate("bob").proceed
        held = compare(lambda: many.gate("alice"), lambda: one.gate("alice"), calls=calls, rounds=rounds)
        control = compare(lambda: one.gate("alice"), lambda: one.gate("alice"), calls=calls, rounds=rounds)
        free_one, free_many = fleets[1].for_profile("other"), fleets[SCOPES].for_profile("other")
        free = compare(lambda: free_many.gate("alice"), lambda: free_one.gate("alice"), calls=calls, rounds=rounds)
    finally:
        for store in stores:
            _drop(dsn, store.schema)
            store.close()
    detail = {"calls_per_round": calls, "rounds": rounds, "control_ratio": round(control[2], 3),
              "control_us": [round(control[0] * 1e6, 2), round(control[1] * 1e6, 2)],
              "control": "the one-scope gate() against itself"}
    return [
        Figure(f"gate() of a held profile, {SCOPES:,} profile holds in the table (PostgreSQL)", held[0] * 1e6, "us/call",
               baseline_name="1 profile hold", baseline=held[1] * 1e6, ratio=held[2], target="within noise: <= 1.10x",
               met=held[2] <= 1.10, detail=detail),
        Figure(f"gate() of a profile without a hold, {SCOPES:,} other profile holds in the table (PostgreSQL)",
               free[0] * 1e6, "us/call", baseline_name="1 other profile hold", baseline=free[1] * 1e6, ratio=free[2],
               target="within noise: <= 1.10x", met=free[2] <= 1.10, detail=detail),
    ]


def _leader_metric(url: str) -> bool | None:
    """What one `hermes serve`'s `/metrics` says of its leadership; None when it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("hermes_estop_scheduler_leader "):
            return float(line.split()[1]) == 1.0
    return None


def _lock_holders(conn: psycopg.Connection, schema: str) -> list[str]:
    """The application_names of the sessions holding the window scheduler's advisory lock."""
    return [row[0] for row in conn.execute(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s::bigint::oid "
        "AND l.objid = (hashtext(%s)::bigint & 4294967295)::oid AND l.objsubid = 2",
        [LOCK_CLASS, f"{schema}/#leader/windows"])]


def three_serves(dsn: str, tmp: Path, quick: bool) -> list[Figure]:
    """Three real `hermes serve --http` processes on one store (the installed `hermes`). Every
    sample asks each live one's `/metrics` whether it leads (`hermes_estop_scheduler_leader`, its
    own `is_leader()`) and the database who holds the advisory lock; the leader is SIGKILLed (twice
    in a full run), and the takeover is the time until another says it leads."""
    url = _with_schema(dsn, f"bench_serve_{os.getpid()}")
    root = tmp / "serve"
    root.mkdir()
    creator = PostgresStore(url, share=False)
    creator.init_schema()
    env = {**os.environ, "HERMES_ROOT": str(root), "HERMES_HOME": str(root), STORE_ENV: url}
    serves: dict[int, tuple[subprocess.Popen[bytes], str]] = {}
    logs = []
    observe, kills = (4.0, 1) if quick else (15.0, 2)
    samples = 0
    most = 0
    leaderless: list[float] = []  # sample times with nobody leading, outside a takeover
    disagreements = 0
    takeovers: list[float] = []
    found: dict[int, Counter[str]] = {}
    admin = psycopg.connect(dsn, autocommit=True)
    try:
        for i in range(3):
            port = _free_port()
            log = open(tmp / f"serve-{i}.log", "wb")
            logs.append(log)
            proc = subprocess.Popen([_script("hermes"), "serve", "--interval", "1", "--http", f"127.0.0.1:{port}"],
                                    env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
            serves[proc.pid] = (proc, f"http://127.0.0.1:{port}/metrics")
        deadline = time.monotonic() + 120
        while any(_leader_metric(metrics) is None for _, metrics in serves.values()):
            if time.monotonic() > deadline or any(proc.poll() is not None for proc, _ in serves.values()):
                raise RuntimeError("a `hermes serve` did not come up: " + (tmp / "serve-0.log").read_text()[-2000:])
            time.sleep(0.2)
        time.sleep(2.0)  # every campaign has made its first attempt; the writers are open
        found = connections(dsn)
        per_serve = [found.get(pid, Counter()) for pid in serves]

        def sample() -> list[int]:
            nonlocal samples, most, disagreements
            leading = [pid for pid, (_, metrics) in serves.items() if _leader_metric(metrics)]
            holders = _lock_holders(admin, creator.schema)
            samples += 1
            most = max(most, len(leading))
            if [f"hermes-estop leader {pid}" for pid in leading] != holders:
                disagreements += 1
            return leading

        def watch(seconds: float) -> None:
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                if not sample():
                    leaderless.append(time.monotonic())
                time.sleep(0.05)

        watch(observe)
        for _ in range(kills):
            (leader,) = sample()
            proc, _ = serves.pop(leader)
            proc.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            proc.wait(30)
            while not sample():
                if time.monotonic() - killed > 30:
                    raise RuntimeError("no `hermes serve` took over within 30 s")
            takeovers.append(time.monotonic() - killed)
            watch(observe / 2)
    finally:
        admin.close()
        for proc, _ in serves.values():
            proc.send_signal(signal.SIGTERM)
        for proc, _ in serves.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
        for log in logs:
            log.close()
        _drop(dsn, creator.schema)
        creator.close()
    ms = _ms(takeovers)
    detail = {"instances": 3, "samples": samples, "observed_s": observe * (1 + kills / 2), "sigkills": kills,
              "samples_without_leader_outside_takeover": len(leaderless),
              "samples_where_metrics_and_pg_locks_disagree": disagreements,
              "how": "each live serve's /metrics (hermes_estop_scheduler_leader) + the pg_locks holder, every 50 ms"}
    return [
        Figure("`hermes serve` instances leading at once, max (3 on one PostgreSQL)", most, "leaders",
               target="exactly 1 at every sample", met=most == 1 and not leaderless, detail=detail),
        Figure("`hermes serve` takeover after SIGKILL of the leader, max (3 on one PostgreSQL)", max(ms), "ms",
               target=f"<= leader poll ({DEFAULT_POLL:g} s) + scheduling", met=max(ms) <= DEFAULT_POLL * 1000 + 500,
               detail={"samples": len(ms), "takeovers_ms": [round(v, 1) for v in ms], "leader_poll_s": DEFAULT_POLL}),
        _connection_figure("`hermes serve`", per_serve),
    ]


def run(quick: bool) -> list[Figure]:
    dsn, cleanup = _server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return [*propagation(dsn, Path(tmp), quick), gate_cost(dsn, Path(tmp), quick),
                    *takeover(dsn, Path(tmp), quick), *hundred_hosts(dsn, Path(tmp), quick),
                    *many_scopes(dsn, Path(tmp), quick), *three_serves(dsn, Path(tmp), quick)]
    finally:
        cleanup()
