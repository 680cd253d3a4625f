"""The file store's edges (issue 9): a read never waits for the lock and does not retry a failing
retire on every check; planted FIFOs and hard links never hang a writer or let it reach a file
the program did not create."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hermes_estop import Estop, StoreError
from hermes_estop.model.homes import Layout
from hermes_estop.stores import FileStore
from hermes_estop.stores.audit_log import AUDIT_FILE
from hermes_estop.stores.file import LOCK_NAME
from hermes_estop.system import fsutil

NOBODY_UID = 65534


@pytest.fixture
def estop(fleet_root, clock) -> Estop:
    return Estop(layout=Layout(home=fleet_root, root=fleet_root), store=FileStore(fleet_root), clock=clock,
                 actor="test@host")


def plant_fifo(path: Path) -> None:
    """Replace whatever is at `path` with a FIFO nobody reads: an open that waits would hang."""
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def finishes(work: Callable[[], Any], seconds: float = 20) -> dict[str, Any]:
    """Run `work` in a thread; fail the test (instead of hanging it) if it does not return."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{work} blocked"
    return outcome


@pytest.fixture
def hold_lock_elsewhere(fleet_root):
    """Call it to have another process hold `.ESTOP.lock` (as `flock .ESTOP.lock sleep 30`
    would) until the test ends."""
    holders: list[subprocess.Popen[str]] = []

    def start() -> None:
        holder = subprocess.Popen(
            [sys.executable, "-c",
             "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644); "
             "fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); sys.stdin.read()",
             str(fleet_root / LOCK_NAME)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        holders.append(holder)
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"

    yield start
    for holder in holders:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)


def test_read_of_an_expired_hold_never_waits_for_a_busy_lock(estop, clock, hold_lock_elsewhere, monkeypatch):
    estop.engage(reason="maintenance", ttl="10m")
    clock.advance(minutes=10)
    hold_lock_elsewhere()
    # a waiting reader would hang the test (the file store looks the timeout up when it locks)
    monkeypatch.setattr(fsutil, "LOCK_TIMEOUT", 3600.0)
    outcome = finishes(estop.gate)
    assert "error" not in outcome
    assert outcome["value"].proceed, "an expired hold must not hold while its retire is left for later"
    assert estop.sentinel_path().exists(), "the retire needs the lock: it is left to the next reader"


def test_expired_hold_is_left_by_every_reader_and_retired_by_the_deadman(estop, clock, fleet_root):
    estop.engage(reason="maintenance", ttl="10m")
    clock.advance(minutes=10)
    import fcntl

    fd = os.open(fleet_root / LOCK_NAME, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert not estop.is_engaged()
    finally:
        os.close(fd)
    clock.advance(seconds=1)
    assert not estop.is_engaged()
    assert estop.sentinel_path().exists(), "a reader never retires (issue 32 item 8)"
    assert len(estop.fleet.retire_expired()) == 1
    assert not estop.sentinel_path().exists()
    assert [e.event for e in estop.history()] == ["engage", "expire"]


def test_a_retire_the_audit_trail_refuses_leaves_the_hold_for_the_next_deadman_pass(estop, clock, fleet_root):
    estop.engage(reason="maintenance", ttl="10m")
    plant_fifo(fleet_root / AUDIT_FILE)  # every write is refused: the expired hold cannot be retired
    clock.advance(minutes=10)
    for _ in range(50):
        assert not estop.is_engaged()
    assert finishes(estop.fleet.retire_expired) == {"value": []}
    assert estop.sentinel_path().exists()


def test_fifo_audit_log_refuses_a_release_and_never_hangs(estop, fleet_root):
    estop.engage(reason="standing")
    before = estop.sentinel_path().read_bytes()
    plant_fifo(fleet_root / AUDIT_FILE)
    outcome = finishes(estop.release)
    error = outcome.get("error")
    assert isinstance(error, StoreError), outcome
    assert AUDIT_FILE in str(error) and "FIFO" in str(error)
    assert estop.sentinel_path().read_bytes() == before, "a refused write leaves the hold as it was"


@pytest.mark.parametrize("standing", [False, True])
def test_unwritable_audit_log_never_stops_a_stop(estop, fleet_root, standing):
    """Issue 20 item 4: arming succeeds whenever the hold can be written; the failed append is
    counted and remembered, and the audit trail reports why it cannot be written."""
    if standing:
        estop.engage(reason="standing")
    plant_fifo(fleet_root / AUDIT_FILE)
    outcome = finishes(lambda: estop.engage(reason="new"))
    assert "value" in outcome, outcome
    assert estop.get_state()["reason"] == "new" and estop.is_engaged()
    assert estop.store.audit_failures == 1 and "FIFO" in (estop.store.last_audit_failure or "")
    assert "FIFO" in (estop.store.audit_problem() or "")


def test_fifo_lock_refuses_the_write_and_never_hangs(estop, fleet_root):
    plant_fifo(fleet_root / LOCK_NAME)
    outcome = finishes(lambda: estop.engage(reason="new"))
    assert isinstance(outcome.get("error"), StoreError)
    assert "FIFO" in str(outcome["error"])
    assert not estop.sentinel_path().exists()


def test_fifo_lock_leaves_reads_free_and_unblocked(estop, clock, fleet_root):
    estop.engage(reason="maintenance", ttl="10m")
    clock.advance(minutes=10)
    plant_fifo(fleet_root / LOCK_NAME)
    outcome = finishes(estop.gate)
    assert outcome["value"].proceed


def test_hard_linked_lock_is_refused_and_its_target_keeps_its_mode(estop, fleet_root, tmp_path):
    private = tmp_path / "private-key"
    private.write_bytes(b"secret")
    private.chmod(0o600)
    os.link(private, fleet_root / LOCK_NAME)
    with pytest.raises(StoreError, match="hard link"):
        estop.engage(reason="new")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert not estop.sentinel_path().exists()


def test_hard_linked_audit_log_gets_nothing_appended_and_the_hold_arms(estop, fleet_root, tmp_path):
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"")
    os.link(other, fleet_root / AUDIT_FILE)
    estop.engage(reason="new")
    assert other.read_bytes() == b""
    assert estop.is_engaged() and "hard link" in (estop.store.last_audit_failure or "")
    with pytest.raises(StoreError, match="hard link"):
        estop.release()
    assert estop.is_engaged()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
@pytest.mark.parametrize("name", [LOCK_NAME, AUDIT_FILE])
def test_lock_or_audit_file_of_another_user_is_refused(estop, fleet_root, name):
    planted = fleet_root / name
    planted.write_bytes(b"")
    os.chown(planted, NOBODY_UID, NOBODY_UID)
    if name == LOCK_NAME:
        with pytest.raises(StoreError, match="belongs to uid"):
            estop.engage(reason="new")
    else:  # a stop always stops: the hold arms, the trail gets nothing
        estop.engage(reason="new")
        assert "belongs to uid" in (estop.store.last_audit_failure or "")
        with pytest.raises(StoreError, match="belongs to uid"):
            estop.release()
    assert planted.read_bytes() == b""


def test_existing_lock_keeps_the_mode_it_has(estop, fleet_root):
    lock = fleet_root / LOCK_NAME
    lock.write_bytes(b"")
    lock.chmod(0o600)
    estop.engage(reason="new")
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


def test_history_of_a_fifo_audit_log_is_refused_not_hung(estop, fleet_root):
    plant_fifo(fleet_root / AUDIT_FILE)
    outcome = finishes(estop.history)
    assert isinstance(outcome.get("error"), StoreError)


def test_the_lock_a_read_finds_free_is_released_for_the_next_writer(estop, clock):
    estop.engage(reason="maintenance", ttl="10m")
    clock.advance(minutes=10)
    assert not estop.is_engaged()
    outcome = finishes(lambda: estop.engage(reason="next"), seconds=30)
    assert "error" not in outcome
    assert [e.event for e in estop.history()][-2:] == ["expire", "engage"]


def test_engage_over_an_unretired_expired_hold_records_its_expiry(fleet_root, clock):
    """A process whose reads never retired the expired hold (lock busy, say) replaces it with
    a fresh engagement: the trail still shows the lift."""
    estop = Estop(layout=Layout(home=fleet_root, root=fleet_root), store=FileStore(fleet_root), clock=clock)
    first = estop.engage(reason="old", ttl="10m", allow={"user_ids": ["7"]})
    clock.advance(minutes=11)
    second = estop.engage(reason=None)
    events = [(e.event, e.generation) for e in estop.history()]
    assert events == [("engage", first.generation), ("expire", first.generation), ("engage", second.generation)]
    assert second.allow.empty and second.reason is None
