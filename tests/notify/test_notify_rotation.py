"""Issue 24: the audit trail rotates while several processes append to it and the notifier
delivers from its cursor: every line is delivered once, none lost, none twice."""

from __future__ import annotations

import subprocess
import sys

from notify_helpers import webhook, write_config

from hermes_estop.notify.notifier import build_workers
from hermes_estop.stores.audit_log import AUDIT_FILE, AuditLog

APPENDER = """
import sys
from datetime import UTC, datetime
from pathlib import Path

from hermes_estop.model.audit_event import AuditEvent
from hermes_estop.stores.audit_log import AuditLog

root, writer, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
log = AuditLog(root)  # the rotation estop.toml sets
for n in range(count):
    log.append(AuditEvent(datetime.now(UTC), "engage", "fleet", detail=f"{writer}:{n}"), sync=n % 25 == 0)
"""
WRITERS, EACH = 4, 250


def test_rotation_under_four_appending_processes_loses_nothing_and_delivers_nothing_twice(estop, receiver, clock):
    root = estop.layout.root
    write_config(root, "[audit]\nmax_bytes = 4096\nkeep = 1000\n", webhook("hook", receiver.url, events=["engage"]))
    [worker] = build_workers(estop.fleet)
    assert worker.tick(clock()).caught_up
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, str(root), f"w{i}", str(EACH)]) for i in range(WRITERS)]
    try:
        while any(proc.poll() is None for proc in procs):
            assert worker.tick(clock()).error is None
    finally:
        codes = [proc.wait(timeout=300) for proc in procs]
    assert codes == [0] * WRITERS
    while not worker.tick(clock()).caught_up:
        pass
    delivered = [event["detail"] for event in receiver.events()]
    expected = [f"w{i}:{n}" for i in range(WRITERS) for n in range(EACH)]
    assert sorted(delivered) == sorted(expected)
    rotated = [path for path in root.iterdir() if path.name.startswith(AUDIT_FILE + ".")]
    assert len(rotated) > 10
    assert sorted(e.detail for e in AuditLog(root).read()) == sorted(expected)
    assert all(path.stat().st_size < 4096 + 4096 for path in rotated)
