"""`schedule.Schedules` builds each schedule without holding the one it replaces: a build
that also held the previous schedule (beside the kept copy it reads and the one it makes) had
the daemon's resident set grow by the peak at every refresh (bench/serve_scale.py --as-serve)."""

from __future__ import annotations

import gc
import hashlib
import weakref
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hermes_estop.windows import schedule
from hermes_estop.windows.model import Window
from hermes_estop.windows.schedule import HORIZON, REFRESH, Part, Schedules, ScheduleTimeline, micros

BUILT = datetime(2027, 3, 1, 6, 17, tzinfo=UTC)
RAW = b'[[windows]]\nname = "w"\ncron = "0 2 * * *"\nduration = "1h"\n'
EDITED = RAW.replace(b"1h", b"2h")


@pytest.mark.parametrize("then", [RAW, EDITED], ids=["refresh of the same bytes", "an edit"])
def test_the_holder_never_holds_the_schedule_it_replaces_while_it_builds_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: bytes) -> None:
    tmp_path.chmod(0o755)
    keeper = Schedules(tmp_path / "windows.toml")
    keeper.keep(RAW, [Window.parse({"name": "w", "cron": "0 2 * * *", "duration": "1h"})], BUILT)
    first = keeper.held(RAW)
    assert isinstance(first, ScheduleTimeline)
    previous = weakref.ref(first)
    del first
    held_while_building: list[bool] = []
    real_load = schedule.load

    def load(*args, **kwargs):  # type: ignore[no-untyped-def]
        gc.collect()
        held_while_building.append(previous() is not None)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(schedule, "load", load)
    windows = [Window.parse({"name": "w", "cron": "0 2 * * *", "duration": "2h" if then == EDITED else "1h"})]
    keeper.keep(then, windows, BUILT + REFRESH + timedelta(minutes=10))
    assert held_while_building == [False]
    ready = keeper.held(then)
    assert isinstance(ready, ScheduleTimeline) and ready.schedule.digest == hashlib.sha256(then).hexdigest()


def test_a_refresh_of_a_schedules_rows_compiles_the_bytes_without_building_the_rows(tmp_path: Path) -> None:
    """The windows a pass took as a schedule's rows are not asked for at a refresh (each row
    built would stay cached in the schedule they hold, 10,000 `Window` objects at once): the
    file's bytes are compiled table by table instead, to the same schedule."""
    tmp_path.chmod(0o755)
    path = tmp_path / "windows.toml"
    raw = b"".join(b'[[windows]]\nname = "w%d"\ncron = "%d 2 * * *"\nduration = "1h"\n' % (i, i) for i in range(20))
    path.write_bytes(raw)
    keeper = Schedules(path)
    rows = keeper.rows(raw, BUILT)
    assert rows is not None and len(rows) == 20
    first = keeper.held(raw)
    assert isinstance(first, ScheduleTimeline) and rows.timeline is first
    old = first.schedule
    keeper.keep(raw, None, BUILT + REFRESH + timedelta(minutes=10))
    assert first._built == {}  # where a row's `Window` would stay built
    ready = keeper.held(raw)
    assert isinstance(ready, ScheduleTimeline) and ready.schedule is not old
    assert ready.schedule.names == old.names and ready.schedule.lo > old.lo


@pytest.mark.parametrize(("later", "wake_in", "refreshed"), [
    (REFRESH + timedelta(minutes=10), None, True),
    (REFRESH + timedelta(minutes=10), timedelta(minutes=5), True),
    (REFRESH + timedelta(minutes=10), timedelta(seconds=20), False),
    (HORIZON / 2 + timedelta(minutes=1), timedelta(seconds=20), True),
    (REFRESH - timedelta(minutes=1), None, False),
    (-timedelta(hours=1), timedelta(seconds=20), True),
], ids=["no wake-up", "a wake-up minutes off", "a wake-up seconds off", "half the horizon gone", "not due",
        "the clock gone back before it"])
def test_a_refresh_in_the_pass_waits_for_a_quiet_moment_but_not_past_half_the_horizon(
        tmp_path: Path, later: timedelta, wake_in: timedelta | None, refreshed: bool) -> None:
    """The pass builds the refresh itself (no thread): a window arming meanwhile waits for the
    build, so a refresh waits for a pass with no wake-up due within a minute, however busy the
    fleet, at most until half the horizon is gone (the schedule still answers); one that no
    longer answers now whole (the clock went back before it) is built at once."""
    tmp_path.chmod(0o755)
    keeper = Schedules(tmp_path / "windows.toml")
    windows = [Window.parse({"name": "w", "cron": "0 2 * * *", "duration": "1h"})]
    keeper.keep(RAW, windows, BUILT)
    first = keeper.held(RAW)
    assert first is not None
    now = BUILT + later
    keeper.keep(RAW, windows, now, None if wake_in is None else now + wake_in)
    ready = keeper.held(RAW)
    assert ready is not None and (ready is not first) == refreshed
    if refreshed:
        assert ready.schedule.lo == micros(now)


@pytest.mark.parametrize(("later", "wake_in", "refreshed"), [
    (REFRESH + timedelta(minutes=10), None, True),
    (REFRESH + timedelta(minutes=10), timedelta(seconds=20), False),
    (HORIZON / 2 + timedelta(minutes=1), timedelta(seconds=20), True),
    (REFRESH - timedelta(minutes=1), None, False),
], ids=["no wake-up", "a wake-up seconds off", "half the horizon gone", "not due"])
def test_a_schedule_compiled_in_memory_is_refreshed_after_a_pass_acts_never_before(
        tmp_path: Path, later: timedelta, wake_in: timedelta | None, refreshed: bool) -> None:
    """The schedule of windows that are not one version of the file's own: a pass takes it as
    it is whatever its age while it answers now whole (it never compiles the whole list before
    acting because of its age); once the pass acted, it is compiled again from now when it is
    due, as the file's schedule is (`keep`)."""
    tmp_path.chmod(0o755)
    holder = Schedules(tmp_path / "windows.toml")
    windows = [Part.of(Window.parse({"name": f"w{i}", "cron": f"{i} 2 * * *", "duration": "1h"})) for i in range(5)]
    first = holder.compose(windows, BUILT).timeline
    now = BUILT + later
    assert holder.compose(list(windows), now).timeline is first  # before acting: as it is
    holder.refresh(now, None if wake_in is None else now + wake_in)
    ready = holder.compose(list(windows), now).timeline
    assert (ready is not first) == refreshed
    assert ready.schedule.lo == (micros(now) if refreshed else first.schedule.lo)
    assert list(ready.schedule.sources) == list(first.schedule.sources)  # of the same windows
