"""While a weakening edit waits for confirmation, the scheduler's schedule work is for the file
as it is (issue 45): it never writes the last confirmed version's schedule over the current
one (the next command would run cold). And `Schedule.covering_row` never misses an occurrence
whose drain lead reaches back to `t` but which starts past the horizon: it declines instead,
and the exact functions answer. Real files, the real scheduler on the fake clock."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from schedule_queries import covering_all, schedule_path

from hermes_estop.windows import schedule
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import covering
from hermes_estop.windows.windows_file import WindowsFile

A = {"name": "a", "cron": "0 * * * *", "duration": "30m"}
B = {"name": "b", "cron": "30 3 * * *", "duration": "1h"}


def test_a_pending_weakening_never_writes_the_confirmed_versions_schedule_over_the_current(harness, kept_schedule):
    harness.root.chmod(0o700)
    harness.write(A, B)
    harness.start()
    path = schedule_path(harness.file.path)
    harness.clock.advance(schedule.REFRESH + timedelta(seconds=1))
    harness.write(B)  # `a` removed: a weakening, confirmed only after the stability period
    raw = harness.file.path.read_bytes()
    assert schedule.load(harness.file.path, raw, harness.file.load, harness.clock()) is not None  # a command
    assert harness.service.reconcile().pending is not None
    kept = kept_schedule(harness.file.path, raw, harness.clock())
    assert kept is not None, "serve wrote another version's schedule over the current file's"
    assert kept.digest == hashlib.sha256(raw).hexdigest() and list(kept.names) == ["b"]
    assert path.is_file()


def test_covering_declines_when_a_drain_reaches_past_the_horizon(tmp_path):
    tmp_path.chmod(0o700)
    (tmp_path / "windows.toml").write_text(
        '[[windows]]\nname = "m"\ncron = "*/5 * * * *"\nduration = "1m"\ndrain = "20m"\n')
    wf = WindowsFile(tmp_path)
    now = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    compiled = schedule.load(wf.path, wf.path.read_bytes(), wf.load, now)
    assert compiled is not None
    (window,) = wf.load()
    for back in (timedelta(minutes=1), timedelta(minutes=7), timedelta(minutes=19), timedelta(microseconds=1)):
        t = schedule.instant_of(compiled.hi) - back
        found = covering_all(compiled, t)
        exact = covering(Window.model_validate(window.model_dump()), t)
        assert found is None or found == exact, (t, found, exact)
