"""One window's failure never stops another window from arming (issue 20 item 2): an instant the
schedule math cannot compute from is refused at validation, naming the window and the field,
and the scheduler acts on every other window; a property test feeds generated windows over the
whole range of every field beside a window covering now."""

from __future__ import annotations

import tempfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings, strategies as st
from schedule_queries import wakeups_for

from hermes_estop import Estop
from hermes_estop.model.hold import HoldState
from hermes_estop.windows.forecast import planned_holds, window_ahead
from hermes_estop.windows.model import InvalidWindow, Window
from hermes_estop.windows.occurrences import covering, next_armed, upcoming
from hermes_estop.windows.scheduler import WindowService
from hermes_estop.windows.windows_file import WindowsFile

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def covering_now(name: str = "now") -> dict[str, object]:
    return {"name": name, "at": NOW - timedelta(minutes=1), "duration": "1h"}


@pytest.mark.parametrize(("field", "value"), [
    ("at", datetime(9999, 12, 31, 23, 30, tzinfo=UTC)),
    ("not_before", datetime(9999, 12, 31, tzinfo=UTC)),
    ("at", datetime(1, 1, 1, tzinfo=UTC)),
])
def test_an_instant_beyond_the_computable_range_is_refused_naming_window_and_field(field, value):
    data = {"name": "far", "duration": "1h", field: value}
    if field != "at":
        data["cron"] = "0 3 * * *"
    with pytest.raises(InvalidWindow) as caught:
        Window.parse(data)
    assert caught.value.field == field and caught.value.window == "'far'"


def test_a_far_future_window_never_stops_the_one_covering_now_from_arming(harness):
    harness.file.path.write_text(tomlkit.dumps({"windows": [
        {"name": "far", "at": datetime(9999, 12, 31, 23, 30, tzinfo=UTC), "duration": "1h"},
        {"name": "maint", "at": harness.clock.now - timedelta(minutes=1), "duration": "1h"},
    ]}))
    report = harness.start()
    assert harness.reading().state is HoldState.ACTIVE
    assert harness.reading().hold.armed_by == "window:maint"
    assert report.failed and "window 'far': field 'at'" in report.failed[0]
    assert report.errors == []


def test_a_holding_window_that_stops_validating_stays_held_while_another_arms(harness):
    start = harness.clock.now + timedelta(hours=1)
    harness.write({"name": "maint", "at": start.isoformat(), "duration": "30m"})
    harness.start()
    harness.run_until(start)
    generation = harness.reading().hold.generation
    later = start + timedelta(minutes=1)
    harness.file.path.write_text(tomlkit.dumps({"windows": [
        {"name": "maint", "at": start, "duration": "30m", "scope": "no such scope!"},
        {"name": "extra", "at": later, "duration": "1h", "reason": "extra"},
    ]}))
    harness.run_until(later, poll=True)
    harness.run_until(start + timedelta(minutes=20), poll=True)  # far past the confirmation period
    hold = harness.reading().hold
    assert hold.reason and "extra" in hold.reason
    assert {c["name"] for c in hold.window["covers"]} == {"maint", "extra"}
    assert harness.events("retire") == [] and generation
    assert harness.entries()[f"fleet/maint@{start.isoformat()}"].state == "armed"


# -- the property: every generated window validates or is refused; never an exception; isolation

_INSTANTS = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59),
                         timezones=st.just(UTC))
_CRON_PART = st.one_of(st.just("*"), st.integers(0, 99).map(str), st.sampled_from(["*/7", "1-5", "0,30", "29", "L"]))
_CRON = st.one_of(st.lists(_CRON_PART, min_size=5, max_size=5).map(" ".join), st.text(max_size=20))
_DURATION = st.one_of(
    st.tuples(st.integers(0, 10**7), st.sampled_from(["s", "m", "h", "d", "w", ""])).map(lambda t: f"{t[0]}{t[1]}"),
    st.integers(-10, 10**9), st.sampled_from(["PT2H", "P400D", "1h30m", "-1h", "0s"]))
_VALID_DURATION = st.tuples(st.integers(1, 366), st.sampled_from(["m", "h", "d"])).map(lambda t: f"{t[0]}{t[1]}")
_SCHEDULE = st.one_of(st.fixed_dictionaries({"cron": _CRON}), st.fixed_dictionaries({"at": st.one_of(_INSTANTS, st.text(max_size=10))}),
                      st.fixed_dictionaries({}, optional={"cron": _CRON, "at": _INSTANTS}))
_WINDOW = st.builds(lambda base, schedule: base | schedule, st.fixed_dictionaries(
    {"name": st.one_of(st.just("gen"), st.text(max_size=8)),
     "duration": st.one_of(_VALID_DURATION, _DURATION)},
    optional={
        "timezone": st.sampled_from(["UTC", "Europe/Berlin", "Pacific/Kiritimati", "America/St_Johns", "Nowhere/X"]),
        "drain": st.one_of(_VALID_DURATION, _DURATION),
        "reason": st.text(max_size=30),
        "allow": st.fixed_dictionaries({}, optional={"user_ids": st.lists(st.text(max_size=5), max_size=3),
                                                     "profiles": st.lists(st.text(max_size=5), max_size=2)}),
        "scope": st.one_of(st.just("fleet"), st.text(max_size=6)),
        "enabled": st.booleans(),
        "not_before": _INSTANTS,
        "not_after": _INSTANTS,
        "exclude": st.lists(st.dates(min_value=date(1, 1, 1), max_value=date(9999, 12, 31)), max_size=3),
        "exclude_cron": _CRON,
    },
), _SCHEDULE)


@settings(max_examples=200, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated=_WINDOW, before=st.booleans())
def test_generated_windows_validate_or_are_refused_and_never_stop_the_window_covering_now(generated, before):
    tables = [generated, covering_now()] if before else [covering_now(), generated]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "windows.toml").write_text(tomlkit.dumps({"windows": tables}))
        parsed = WindowsFile(root).parse_each((root / "windows.toml").read_bytes())
        assert "now" in {w.name for w in parsed.windows}
        for window in parsed.windows:
            upcoming(window, NOW, 3)
            covering(window, NOW)
            next_armed(window, NOW)
            planned_holds(window_ahead(window, NOW), NOW + timedelta(days=7), limit=50)
        wakeups_for(parsed.windows, NOW)
        estop = Estop(root=root, home=root, clock=lambda: NOW, actor="test")
        report = WindowService(estop.fleet).tick(NOW)
        assert report.errors == []
        assert estop.store.read((estop.layout.location("fleet"),), NOW)[0].active  # the fleet is held
