"""`TargetWorker.tick(now)` against a real HTTP receiver and real commands, on a fake clock:
order, at-least-once through 500s and timeouts, capped backoff, the cursor surviving a new
worker, signatures, filters, and the stale reminder."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
from notify_helpers import STALL, Receiver, command, webhook, write_config

from hermes_estop import Estop
from hermes_estop.consumers.turns import pid_alive
from hermes_estop.notify.config import load_targets
from hermes_estop.notify.cursors import STATE_FILE, FleetCursorStore
from hermes_estop.notify.deliver import SIGNATURE_HEADER, sign, verify
from hermes_estop.notify.notifier import build_workers
from hermes_estop.notify.target import TargetWorker


def workers(estop: Estop, *tables: str) -> list[TargetWorker]:
    write_config(estop.layout.root, *tables)
    return build_workers(estop.fleet)


def churn(estop: Estop, rounds: int) -> list[str]:
    """`rounds` engage/release pairs; the kinds in audit order."""
    for index in range(rounds):
        estop.engage(reason=f"r{index}")
        estop.release()
    return [e.event for e in estop.history()]


def test_events_arrive_in_audit_order_with_the_audit_fields(estop, receiver):
    kinds = churn(estop, 5)
    [worker] = workers(estop, webhook("hook", receiver.url))
    report = worker.tick(estop.clock())
    assert report.error is None and report.caught_up
    got = receiver.events()
    assert [e["event"] for e in got] == kinds
    assert [e["reason"] for e in got] == [f"r{i}" for i in range(5) for _ in range(2)]
    assert all(e["scope"] == "fleet" and e["fleet"] == str(estop.layout.root) and e["actor"] == "tester" for e in got)
    assert len({e["id"] for e in got}) == len(got)
    assert worker.tick(estop.clock()).delivered == []  # nothing twice


def test_500s_are_retried_with_capped_exponential_backoff_and_nothing_is_skipped(estop, receiver, clock):
    churn(estop, 2)
    receiver.script.extend([500, 500, 503, 500, 500])
    [worker] = workers(estop, webhook("hook", receiver.url, backoff_initial=2, backoff_max=10))
    waits: list[float] = []
    for _ in range(5):
        report = worker.tick(clock())
        assert report.error == f"HTTP {500 if len(waits) != 2 else 503} " + ("Internal Server Error" if len(waits) != 2
                                                                             else "Service Unavailable")
        waits.append((report.waiting_until - clock()).total_seconds())
        assert worker.tick(clock()).delivered == []  # not due yet: no request at all
        clock.advance(report.waiting_until - clock())
    assert waits == [2, 4, 8, 10, 10]
    assert len(receiver.requests) == 5
    assert worker.tick(clock()).caught_up
    assert [e["event"] for e in receiver.events()] == ["engage", "release", "engage", "release"]
    assert worker.state.failures == 0 and worker.state.last_error is None


def test_a_receiver_that_times_out_is_retried_and_the_event_redelivered(estop, clock):
    # the sender's timeout (3 s) leaves a loaded machine room to answer the retry in time; the stall
    # (60 s, its thread a daemon) is far beyond it, so the first attempt can only time out
    stalling = Receiver(stall_seconds=60.0)
    try:
        estop.engage(reason="slow")
        stalling.script.append(STALL)
        [worker] = workers(estop, webhook("hook", stalling.url, timeout=3.0))
        report = worker.tick(clock())
        assert report.error is not None and "timed out" in report.error
        clock.advance(seconds=1)
        assert worker.tick(clock()).delivered
        assert stalling.wait_for(1)
        ids = [r.event["id"] for r in stalling.requests]
        assert len(ids) == 2 and ids[0] == ids[1]  # the same id: the receiver can de-duplicate
    finally:
        stalling.close()


def test_a_new_worker_resumes_from_the_saved_cursor(estop, receiver, clock):
    churn(estop, 2)
    [first] = workers(estop, webhook("hook", receiver.url))
    first.tick(clock())
    assert len(receiver.ids()) == 4
    estop.engage(reason="later")
    [second] = build_workers(estop.fleet)
    second.tick(clock())
    assert [e["reason"] for e in receiver.events()][-1] == "later"
    assert len(receiver.ids()) == 5 == len(set(receiver.ids()))
    saved = json.loads((estop.layout.root / STATE_FILE).read_text())["targets"]["hook"]
    assert saved["position"] == (estop.layout.root / "estop-audit.jsonl").stat().st_size


def test_start_end_skips_the_existing_trail(estop, receiver, clock):
    churn(estop, 3)
    [worker] = workers(estop, webhook("hook", receiver.url, start="end"))
    worker.tick(clock())
    assert receiver.ids() == []
    estop.engage(reason="new")
    worker.tick(clock())
    assert [e["reason"] for e in receiver.events()] == ["new"]


def test_the_signature_is_an_hmac_sha256_of_the_exact_body(estop, receiver, clock):
    estop.engage(reason="signed")
    [worker] = workers(estop, webhook("hook", receiver.url, secret="s3cret"))
    worker.tick(clock())
    [request] = receiver.accepted
    header = request.headers[SIGNATURE_HEADER]
    assert header.startswith("sha256=")
    assert verify("s3cret", request.body, header)
    assert not verify("other", request.body, header)
    assert not verify("s3cret", request.body + b" ", header)
    assert header == sign("s3cret", request.body)
    assert request.headers["X-Hermes-Event-Id"] == request.event["id"]


def test_unsigned_targets_send_no_signature_and_custom_headers_are_sent(estop, receiver, clock):
    estop.engage()
    write_config(estop.layout.root, webhook("hook", receiver.url) + 'headers = { Authorization = "Bearer t" }\n')
    [worker] = build_workers(estop.fleet)
    worker.tick(clock())
    [request] = receiver.accepted
    assert SIGNATURE_HEADER not in request.headers
    assert request.headers["Authorization"] == "Bearer t"


def test_a_command_target_gets_the_event_on_stdin_and_exit_status_decides(estop, clock, tmp_path):
    out = tmp_path / "events.jsonl"
    flag = tmp_path / "fail"
    flag.touch()
    script = (f"import sys, os\nif os.path.exists({str(flag)!r}):\n    sys.stderr.write('down\\n'); sys.exit(3)\n"
              f"open({str(out)!r}, 'a').write(sys.stdin.read() + '\\n')\n")
    estop.engage(reason="cmd")
    [worker] = workers(estop, command("cmd", [sys.executable, "-c", script]))
    report = worker.tick(clock())
    assert report.error == "exit 3: down"
    flag.unlink()
    clock.advance(seconds=5)
    assert worker.tick(clock()).caught_up
    [line] = out.read_text().splitlines()
    assert json.loads(line)["reason"] == "cmd"


@pytest.fixture
def leftovers(tmp_path):
    """A file where a command writes the pids it leaves in the background; whatever is still
    alive at the end is killed (the test has failed by then)."""
    path = tmp_path / "pids"
    yield path
    for pid in (int(p) for p in path.read_text().split()) if path.exists() else ():
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_command_that_exits_0_leaving_a_background_child_is_delivered_once(estop, clock, tmp_path, leftovers):
    out = tmp_path / "events.jsonl"
    churn(estop, 1)
    # the background sleep keeps the command's stderr open long after the command itself exits 0
    script = f"cat >> {out}; echo >> {out}; sleep 120 & echo $! >> {leftovers}; exit 0"
    [worker] = workers(estop, command("cmd", ["/bin/sh", "-c", script], timeout=30))
    report = worker.tick(clock())
    assert (report.error, report.caught_up, len(report.delivered)) == (None, True, 2)
    assert [json.loads(line)["event"] for line in out.read_text().split()] == ["engage", "release"]
    assert not any(pid_alive(int(pid)) for pid in leftovers.read_text().split())


def test_a_command_timeout_kills_its_whole_process_group(estop, clock, leftovers):
    estop.engage(reason="slow")
    script = f"sleep 120 & echo $! >> {leftovers}; wait"
    [worker] = workers(estop, command("cmd", ["/bin/sh", "-c", script], timeout=1))
    assert worker.tick(clock()).error == "timed out after 1s"
    assert leftovers.read_text().split() and not any(pid_alive(int(p)) for p in leftovers.read_text().split())


@pytest.mark.parametrize(("events", "scopes", "expected"), [
    (["engage"], None, [("engage", "fleet"), ("engage", "ops")]),
    (["release"], ["ops"], [("release", "ops")]),
    (None, ["fleet"], [("engage", "fleet"), ("release", "fleet")]),
])
def test_filters_by_event_and_scope_still_move_the_cursor(estop, receiver, clock, events, scopes, expected):
    estop.engage(reason="f")
    estop.for_profile("ops").engage(reason="o")
    estop.release()
    estop.for_profile("ops").release()
    fields = {k: v for k, v in (("events", events), ("scopes", scopes)) if v is not None}
    [worker] = workers(estop, webhook("hook", receiver.url, **fields))
    worker.tick(clock())
    assert [(e["event"], e["scope"]) for e in receiver.events()] == expected
    assert worker.state.position == (estop.layout.root / "estop-audit.jsonl").stat().st_size
    assert worker.pending() == (0, None)


def test_a_corrupt_audit_line_is_stepped_over(estop, receiver, clock):
    estop.engage(reason="a")
    with open(estop.layout.root / "estop-audit.jsonl", "a") as handle:
        handle.write("{not json\n")
    estop.release()
    [worker] = workers(estop, webhook("hook", receiver.url))
    worker.tick(clock())
    assert [e["event"] for e in receiver.events()] == ["engage", "release"]


def test_stale_reminds_about_a_hold_without_deadman_every_stale_after(estop, receiver, clock):
    estop.engage(reason="forgotten")
    estop.for_profile("ops").engage(reason="has deadman", ttl="30h")
    (estop.layout.root / "profiles" / "ops").mkdir(parents=True, exist_ok=True)
    [worker] = workers(estop, webhook("hook", receiver.url, events=["stale"], stale_after="1h"))
    worker.tick(clock())
    assert receiver.ids() == []
    clock.advance(minutes=59)
    worker.tick(clock())
    assert receiver.ids() == []
    clock.advance(minutes=1)
    worker.tick(clock())
    worker.tick(clock())
    [first] = receiver.events()
    assert (first["event"], first["scope"], first["reminder"], first["reason"]) == ("stale", "fleet", 1, "forgotten")
    assert first["held_seconds"] == 3600
    clock.advance(minutes=30)
    worker.tick(clock())
    assert len(receiver.ids()) == 1
    clock.advance(minutes=30)
    worker.tick(clock())
    assert [e["reminder"] for e in receiver.events()] == [1, 2]
    assert len(set(receiver.ids())) == 2
    estop.release()
    clock.advance(hours=5)
    worker.tick(clock())
    assert len(receiver.ids()) == 2  # released: no more reminders, the ops hold has a deadman


def test_stale_counts_a_hand_made_sentinel_from_when_it_was_first_seen(estop, receiver, clock):
    (estop.layout.root / "ESTOP").touch()
    [worker] = workers(estop, webhook("hook", receiver.url, events=["stale"], stale_after="2h"))
    worker.tick(clock())
    clock.advance(hours=2)
    [again] = build_workers(estop.fleet)  # a restart keeps when it was first seen
    again.tick(clock())
    [event] = receiver.events()
    assert (event["event"], event["reminder"], event["generation"]) == ("stale", 1, None)


def test_stale_reminder_is_retried_until_accepted(estop, receiver, clock):
    estop.engage(reason="forgotten")
    [worker] = workers(estop, webhook("hook", receiver.url, events=["stale"], stale_after="1h"))
    clock.advance(hours=1)
    receiver.script.append(500)
    assert worker.tick(clock()).error
    clock.advance(seconds=2)
    worker.tick(clock())
    assert [r.event["id"] for r in receiver.requests] == [receiver.ids()[0]] * 2


def test_the_state_file_lives_in_the_fleet_root(estop, receiver, clock):
    estop.engage()
    [worker] = workers(estop, webhook("hook", receiver.url))
    worker.tick(clock())
    assert FleetCursorStore(estop.fleet).load()["hook"].delivered == 1
    assert (estop.layout.root / STATE_FILE).stat().st_mode & 0o777 == 0o644


def test_load_targets_reads_nothing_without_a_config(tmp_path: Path):
    assert load_targets(tmp_path) == []
