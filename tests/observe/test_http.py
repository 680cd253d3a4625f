"""The HTTP endpoints against the real server on 127.0.0.1:0: /metrics (parsed with
prometheus_client's parser), /api/status (the `hermes status --json` document plus the
timeline), the status page's text, read-only (405), loopback-only binding, and the held-work
counter fed by the consumer loops."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from obs_helpers import fetch, scrape, write_windows

from hermes_estop.consumers.loops import LoopService
from hermes_estop.consumers.pass_report import Held
from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.observe.metrics import WorkHeldCounter
from hermes_estop.observe.server import StatusServer, attach, parse_listen
from hermes_estop.windows.ledger import SKIPPED, LedgerEntry, open_ledger
from hermes_estop.windows.model import occurrence_key
from inprocess_cli import completed

SRC = str(Path(__file__).resolve().parents[2] / "src")
NIGHTLY = {"name": "nightly", "cron": "0 2 * * *", "timezone": "UTC", "duration": "2h"}
WEEKLY_OPS = {"name": "ops-weekly", "cron": "30 9 * * 3", "timezone": "UTC", "duration": "3h", "scope": "ops"}


def test_metrics_report_holds_deadman_and_windows(estop, fleet_root, clock, server):
    write_windows(fleet_root, NIGHTLY, WEEKLY_OPS)
    estop.engage(reason="kernel", ttl="90m", fleet=True)
    m = scrape(server)
    assert m[("hermes_estop_hold_active", (("scope", "fleet"),))] == 1
    assert m[("hermes_estop_hold_active", (("scope", "ops"),))] == 0
    assert m[("hermes_estop_hold_unreadable", (("scope", "fleet"),))] == 0
    assert m[("hermes_estop_hold_seconds_remaining", (("scope", "fleet"),))] == 5400
    assert ("hermes_estop_hold_seconds_remaining", (("scope", "ops"),)) not in m
    assert m[("hermes_estop_window_next_start_timestamp_seconds", (("window", "nightly"),))] == \
        datetime(2026, 6, 2, 2, tzinfo=UTC).timestamp()
    assert m[("hermes_estop_window_next_start_timestamp_seconds", (("window", "ops-weekly"),))] == \
        datetime(2026, 6, 3, 9, 30, tzinfo=UTC).timestamp()
    assert m[("hermes_estop_window_active", (("window", "nightly"),))] == 0
    assert m[("hermes_estop_scheduler_leader", ())] == 1
    assert m[("hermes_estop_store_reachable", ())] == 1
    for consumer in ("cron", "kanban", "gateway"):
        assert m[("hermes_estop_work_held_total", (("consumer", consumer),))] == 0
    assert m[("hermes_estop_occurrences_skipped_total", (("window", "nightly"),))] == 0


def test_metrics_follow_the_clock_and_the_hold(estop, fleet_root, clock, server):
    write_windows(fleet_root, NIGHTLY)
    scrape(server)
    clock.set(datetime(2026, 6, 2, 3, tzinfo=UTC))
    m = scrape(server)
    assert m[("hermes_estop_window_active", (("window", "nightly"),))] == 1
    assert m[("hermes_estop_window_next_start_timestamp_seconds", (("window", "nightly"),))] == \
        datetime(2026, 6, 3, 2, tzinfo=UTC).timestamp()
    estop.engage(reason="manual", fleet=True)
    m = scrape(server)
    assert m[("hermes_estop_hold_active", (("scope", "fleet"),))] == 1
    assert ("hermes_estop_hold_seconds_remaining", (("scope", "fleet"),)) not in m  # no deadman
    clock.set(datetime(2026, 6, 2, 4, tzinfo=UTC))
    assert scrape(server)[("hermes_estop_window_active", (("window", "nightly"),))] == 0


def test_an_unreadable_sentinel_is_active_and_unreadable(fleet_root, server):
    (fleet_root / "ESTOP").write_text("{not json")
    m = scrape(server)
    assert m[("hermes_estop_hold_active", (("scope", "fleet"),))] == 1
    assert m[("hermes_estop_hold_unreadable", (("scope", "fleet"),))] == 1


def test_a_skipped_occurrence_counts_once(estop, fleet_root, server):
    write_windows(fleet_root, NIGHTLY)
    start = datetime(2026, 6, 1, 2, tzinfo=UTC)
    key = occurrence_key("fleet", "nightly", start.isoformat())
    entry = LedgerEntry(key, "nightly", start.isoformat(), "fleet", start + timedelta(hours=2), SKIPPED)
    assert scrape(server)[("hermes_estop_occurrences_skipped_total", (("window", "nightly"),))] == 0
    open_ledger(Fleet.of_files(fleet_root)).commit([entry])
    for _ in range(2):
        assert scrape(server)[("hermes_estop_occurrences_skipped_total", (("window", "nightly"),))] == 1


def test_api_status_is_the_status_json_plus_the_timeline(estop, fleet_root, server):
    write_windows(fleet_root, NIGHTLY, WEEKLY_OPS)
    hold = estop.engage(reason="kernel", ttl="1h", fleet=True)
    status, headers, body = fetch(server.url + "api/status")
    assert status == 200 and headers["Content-Type"] == "application/json"
    data = json.loads(body)
    assert set(data) >= {"engaged", "now", "store", "locations", "holds", "windows", "timeline"}
    assert data["engaged"] is True
    assert [h["generation"] for h in data["holds"]] == [hold.generation]
    assert data["holds"][0]["reason"] == "kernel"
    assert [w["name"] for w in data["windows"]] == ["nightly", "ops-weekly"]
    occurrences = data["timeline"]["occurrences"]
    assert len(occurrences) == 8
    assert occurrences[0] == {"window": "nightly", "scope": "fleet", "start": "2026-06-02T02:00:00+00:00",
                              "end": "2026-06-02T04:00:00+00:00", "state": "upcoming"}
    assert data["timeline"]["lanes"] == ["fleet", "ops"]


def test_api_status_has_the_keys_of_hermes_status_json(tmp_path):
    """The same document as the CLI's: the builder is shared (`cli.hold.status_json`)."""
    root = tmp_path / "fleet"
    root.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        """`hermes ARGS` in this process (`completed`): its output is what is compared."""
        done = completed(_env(root), *args)
        assert done.returncode == 0, done.stderr
        return done

    run("pause", "--reason", "same", "--ttl", "1h")
    cli = json.loads(run("status", "--json").stdout)
    from hermes_estop import Estop

    estop = Estop(home=root, root=root, store="file")
    with StatusServer(estop) as server:
        api = json.loads(fetch(server.url + "api/status")[2])
    api.pop("timeline")
    assert list(api) == list(cli)
    for drop in ("expires_in", "deadline_in"):  # relative to each reader's now
        for hold in api["holds"] + cli["holds"]:
            hold.pop(drop)
    assert api["holds"] == cli["holds"]
    assert api["locations"] == cli["locations"]


def test_the_page_shows_the_hold_escaped(estop, server):
    estop.engage(reason='<b>upgrade</b> & "reboot" \x1b[2J \u202e', ttl="2h", fleet=True,
                 allow={"user_ids": ["424242"], "profiles": []})
    status, headers, body = fetch(server.url)
    page = body.decode()
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert '<meta http-equiv="refresh"' in page
    assert "<script" not in page
    assert "&lt;b&gt;upgrade&lt;/b&gt; &amp; &quot;reboot&quot; \\x1b[2J \\u202e" in page
    assert "\x1b" not in page and "\u202e" not in page
    assert "424242" in page and "operator@test" in page
    assert "in 2h00m" in page


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "FOO"])
def test_every_method_but_get_is_refused_and_changes_nothing(estop, server, method):
    hold = estop.engage(reason="stays", fleet=True)
    for path in ("", "metrics", "api/status", "api/resume"):
        status, headers, _ = fetch(server.url + path, method=method, data=b"{}")
        assert status == 405
        assert headers["Allow"] == "GET, HEAD"
    assert [r.hold.generation for r in estop.snapshot().active] == [hold.generation]


def _hang_up(server, request: bytes) -> None:
    """Send `request` and reset the connection at once (SO_LINGER 0), before any answer."""
    with socket.create_connection(server.address, timeout=30) as conn:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.sendall(request)


def test_clients_that_hang_up_mid_request_cost_one_debug_line_each_and_no_traceback(server, capfd, caplog):
    caplog.set_level(logging.DEBUG, logger="hermes_estop.http")
    count = 20
    for index in range(count):
        _hang_up(server, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" if index % 2 else b"GET / HTTP/1.1\r\nHost: x")
    stderr = []

    def handled() -> int:
        stderr.append(capfd.readouterr().err)
        gone = [r for r in caplog.records if "went away mid-request" in r.getMessage()]
        return len(gone) + "".join(stderr).count("Traceback")

    deadline = time.monotonic() + 60
    while handled() < count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "Traceback" not in "".join(stderr)
    assert len([r for r in caplog.records if r.name == "hermes_estop.http" and r.levelno > logging.DEBUG]) == 0
    assert fetch(server.url + "metrics")[0] == 200


def test_head_and_unknown_paths(server):
    status, headers, body = fetch(server.url + "metrics", method="HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
    assert fetch(server.url + "nope")[0] == 404


@pytest.mark.parametrize("value, expected", [
    ("127.0.0.1:9477", ("127.0.0.1", 9477)),
    ("localhost:0", ("localhost", 0)),
    ("[::1]:9477", ("::1", 9477)),
    ("127.8.9.10:80", ("127.8.9.10", 80)),
])
def test_loopback_addresses_are_accepted(value, expected):
    assert parse_listen(value) == expected


@pytest.mark.parametrize("value", ["0.0.0.0:9477", "192.168.1.5:80", "[::]:9477", "example.com:80"])
def test_other_addresses_need_allow_remote(value):
    with pytest.raises(InvalidArgument, match=r"not a loopback address.*--http-allow-remote"):
        parse_listen(value)
    assert parse_listen(value, allow_remote=True)[1] in (80, 9477)


@pytest.mark.parametrize("value", ["9477", "127.0.0.1", "127.0.0.1:port", "127.0.0.1:70000", ":80", ""])
def test_malformed_listen_values_are_refused(value):
    with pytest.raises(InvalidArgument, match="--http"):
        parse_listen(value)


class _Pass:
    def __init__(self, *held: object) -> None:
        self.held = tuple(Held(key, "paused") for key in held)


def test_held_work_is_counted_once_per_held_spell_from_the_consumer_loops(estop, clock):
    """`attach` hooks the counter to every loop's passes: a job held across many passes is one
    refusal; held again after a free pass, it is another."""
    passes = iter([_Pass("a", "b"), _Pass("a", "b"), _Pass("a", "b", "c"), _Pass(), _Pass("a")])
    loop = LoopService("cron", lambda now: next(passes), interval=1, clock=clock)
    with StatusServer(estop) as server:
        attach(server, [loop])
        for _ in range(5):
            loop.tick()
        m = scrape(server)
    assert m[("hermes_estop_work_held_total", (("consumer", "cron"),))] == 4
    assert m[("hermes_estop_work_held_total", (("consumer", "kanban"),))] == 0


def test_the_counter_never_breaks_a_pass():
    counter = WorkHeldCounter()
    counter.observe("kanban", object())  # a report without `held`
    counter.observe("kanban", _Pass(1, 2))
    assert counter.snapshot()["kanban"] == 2


def test_the_leader_gauge_asks_the_window_scheduler(estop):
    class Scheduler:
        name = "windows"
        leader = False

        def is_leader(self) -> bool:
            return self.leader

    scheduler = Scheduler()
    with StatusServer(estop) as server:
        attach(server, [scheduler])
        assert scrape(server)[("hermes_estop_scheduler_leader", ())] == 0
        scheduler.leader = True
        assert scrape(server)[("hermes_estop_scheduler_leader", ())] == 1


# -- the CLI -----------------------------------------------------------------------------------

def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(root), HERMES_ROOT=str(root), PYTHONPATH=SRC)
    return env


@pytest.mark.parametrize("address", ["0.0.0.0:0", "10.1.2.3:9477"])
def test_serve_refuses_a_remote_address_with_one_line_and_exit_2(tmp_path, address):
    result = subprocess.run([sys.executable, "-m", "hermes_estop", "serve", "--http", address],
                            env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "not a loopback address" in result.stderr and "--http-allow-remote" in result.stderr


def _serve(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "hermes_estop", "serve", "--interval", "0.2", *args],
                            env=_env(root), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_url(process: subprocess.Popen[str], deadline: float) -> str:
    assert process.stderr is not None
    seen = []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line)
        if "http: serving" in line:
            return line.split(" on ", 1)[1].split(" ", 1)[0]
    raise AssertionError("".join(seen))


@pytest.mark.slow
def test_serve_http_serves_metrics_and_the_page_until_sigterm(tmp_path):
    root = tmp_path / "fleet"
    root.mkdir()
    assert completed(_env(root), "pause", "--reason", "from the cli").returncode == 0  # set-up: not a process
    process = _serve(root, "--http", "127.0.0.1:0")
    try:
        url = _wait_for_url(process, time.monotonic() + 60)
        status, _, body = fetch(url + "metrics")
        assert status == 200 and 'hermes_estop_hold_active{scope="fleet"} 1.0' in body.decode()
        assert "from the cli" in fetch(url)[2].decode()
        assert fetch(url, method="POST")[0] == 405
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_serve_warns_when_allowed_on_a_remote_address(tmp_path):
    process = _serve(tmp_path, "--http", "0.0.0.0:0", "--http-allow-remote")
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert first.startswith("hermes: warning: --http on 0.0.0.0, not a loopback address")
        url = _wait_for_url(process, time.monotonic() + 60)
        assert fetch(url.replace("0.0.0.0", "127.0.0.1") + "metrics")[0] == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("extra", [["--once"], ["--dry-run"]])
def test_serve_refuses_http_with_once_or_dry_run(tmp_path, extra):
    result = subprocess.run([sys.executable, "-m", "hermes_estop", "serve", "--http", "127.0.0.1:0", *extra],
                            env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "--http" in result.stderr


def test_serve_refuses_a_port_in_use_with_one_line_and_exit_2(tmp_path, server):
    host, port = server.address
    result = subprocess.run([sys.executable, "-m", "hermes_estop", "serve", "--http", f"{host}:{port}"],
                            env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and f"cannot listen on {host}:{port}" in result.stderr


def test_a_skip_recorded_before_the_process_started_is_not_counted(estop, fleet_root, clock, server):
    write_windows(fleet_root, NIGHTLY)
    start = datetime(2026, 6, 3, 2, tzinfo=UTC)
    key = occurrence_key("fleet", "nightly", start.isoformat())
    before = LedgerEntry(key, "nightly", start.isoformat(), "fleet", start + timedelta(hours=2), SKIPPED,
                         updated_at=clock() - timedelta(minutes=5))
    open_ledger(Fleet.of_files(fleet_root)).commit([before])
    assert scrape(server)[("hermes_estop_occurrences_skipped_total", (("window", "nightly"),))] == 0
    later = datetime(2026, 6, 4, 2, tzinfo=UTC)
    after = LedgerEntry(occurrence_key("fleet", "nightly", later.isoformat()), "nightly", later.isoformat(), "fleet",
                        later + timedelta(hours=2), SKIPPED, updated_at=clock())
    open_ledger(Fleet.of_files(fleet_root)).commit([after])
    assert scrape(server)[("hermes_estop_occurrences_skipped_total", (("window", "nightly"),))] == 1
