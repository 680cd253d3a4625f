"""The timeline model (`Observer.view`) and its SVG: one lane per scope, one bar per occurrence,
bars placed by UTC instants (DST days drawn as long as they last), the hold with its deadman,
skipped and released occurrences marked, and the caches never showing stale state."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest
from obs_helpers import write_windows

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.observe.svg import render_timeline_svg
from hermes_estop.observe.view import Observer
from hermes_estop.windows.ledger import RELEASED, SKIPPED, LedgerEntry, open_ledger
from hermes_estop.windows.model import occurrence_key

SVG = "{http://www.w3.org/2000/svg}"
NIGHTLY = {"name": "nightly", "cron": "0 2 * * *", "timezone": "UTC", "duration": "2h", "reason": "backup"}
WEEKLY_OPS = {"name": "ops-weekly", "cron": "30 9 * * 3", "timezone": "UTC", "duration": "3h", "scope": "ops"}


def svg_of(view) -> ET.Element:
    return ET.fromstring(render_timeline_svg(view))


def lanes_of(svg: ET.Element) -> dict[str, ET.Element]:
    return {g.get("data-scope"): g for g in svg.iter(f"{SVG}g") if "lane" in (g.get("class") or "").split()}


def bars_of(lane: ET.Element) -> list[ET.Element]:
    return [r for r in lane.iter(f"{SVG}rect") if "bar" in (r.get("class") or "").split()]


def test_one_lane_per_scope_fleet_first_and_one_bar_per_occurrence(estop, fleet_root, clock):
    write_windows(fleet_root, NIGHTLY, WEEKLY_OPS)
    view = Observer(estop).view(7)
    assert [lane.scope for lane in view.lanes] == ["fleet", "ops"]
    svg = svg_of(view)
    lanes = lanes_of(svg)
    assert list(lanes) == ["fleet", "ops"]
    assert len(bars_of(lanes["fleet"])) == 7 == int(lanes["fleet"].get("data-bars"))
    assert len(bars_of(lanes["ops"])) == 1
    assert {b.get("data-window") for b in bars_of(lanes["fleet"])} == {"nightly"}
    # every occurrence in [now, now + 7 days) exactly once, by its UTC instants
    starts = [b.get("data-start") for b in bars_of(lanes["fleet"])]
    expected = [(datetime(2026, 6, 2, 2, tzinfo=UTC) + timedelta(days=k)).replace(tzinfo=None).isoformat() + "Z"
                for k in range(7)]
    assert starts == expected


@pytest.mark.parametrize("days, bars", [(1, 1), (3, 3), (14, 14)])
def test_days_bound_the_range(estop, fleet_root, days, bars):
    write_windows(fleet_root, NIGHTLY)
    view = Observer(estop).view(days)
    assert view.end - view.start == timedelta(days=days)
    assert len(bars_of(lanes_of(svg_of(view))["fleet"])) == bars


def test_bars_are_placed_by_utc_instants_across_the_fall_back_night(estop, fleet_root, clock):
    """01:30 Europe/Berlin every night, 2 h: the night of 2026-10-25 has 25 hours, so that start
    is 25 h after the previous one, and every bar is 120 minutes wide."""
    clock.set(datetime(2026, 10, 22, 12, tzinfo=UTC))
    write_windows(fleet_root, {"name": "berlin", "cron": "30 1 * * *", "timezone": "Europe/Berlin", "duration": "2h"})
    bars = bars_of(lanes_of(svg_of(Observer(estop).view(7)))["fleet"])
    xs = [float(b.get("x")) for b in bars]
    gaps = [round(b - a) for a, b in itertools.pairwise(xs)]
    assert gaps == [1440, 1440, 1500, 1440, 1440, 1440]
    assert {float(b.get("width")) for b in bars} == {120.0}
    assert bars[2].get("data-start") == "2026-10-24T23:30:00Z"  # 01:30 CEST
    assert bars[3].get("data-start") == "2026-10-26T00:30:00Z"  # 01:30 CET


def test_the_current_hold_is_drawn_with_its_deadman(estop, fleet_root, clock):
    estop.engage(reason="kernel upgrade", ttl="5h", fleet=True)
    svg = svg_of(Observer(estop).view(7))
    lane = lanes_of(svg)["fleet"]
    assert "held" in lane.get("class").split()
    hold = [r for r in lane.iter(f"{SVG}rect") if "hold" in (r.get("class") or "").split()]
    assert len(hold) == 1
    deadline = (clock() + timedelta(hours=5)).isoformat()
    assert hold[0].get("data-deadman") == deadline
    assert [line.get("data-deadman") for line in lane.iter(f"{SVG}line") if line.get("class") == "deadman"] == [deadline]
    assert "kernel upgrade" in hold[0].find(f"{SVG}title").text


def test_a_hold_without_deadman_runs_off_the_edge(estop, clock):
    estop.engage(reason="manual", fleet=True)
    lane = lanes_of(svg_of(Observer(estop).view(7)))["fleet"]
    assert [p.get("class") for p in lane.iter(f"{SVG}path")] == ["hold-open"]
    assert not [line for line in lane.iter(f"{SVG}line") if line.get("class") == "deadman"]


def _ledger_entry(start: datetime, state: str, window: str = "nightly", scope: str = "fleet") -> LedgerEntry:
    ident = start.isoformat()
    return LedgerEntry(occurrence_key(scope, window, ident), window, ident, scope, start + timedelta(hours=2), state)


@pytest.mark.parametrize("state", [SKIPPED, RELEASED])
def test_skipped_and_released_occurrences_are_marked(estop, fleet_root, clock, state):
    write_windows(fleet_root, NIGHTLY)
    observer = Observer(estop)
    observer.view(7)  # cached before the ledger changes: the mark must still show
    marked = datetime(2026, 6, 3, 2, tzinfo=UTC)
    open_ledger(Fleet.of_files(fleet_root)).commit([_ledger_entry(marked, state)])
    bars = bars_of(lanes_of(svg_of(observer.view(7)))["fleet"])
    states = {b.get("data-start"): b.get("data-state") for b in bars}
    assert states.pop("2026-06-03T02:00:00Z") == state
    assert set(states.values()) == {"upcoming"}
    assert len(bars) == 7


def test_an_occurrence_covering_now_is_active_and_the_view_follows_the_clock(estop, fleet_root, clock):
    write_windows(fleet_root, NIGHTLY)
    observer = Observer(estop)
    assert observer.view(1).windows[0].active is False
    clock.set(datetime(2026, 6, 2, 2, 30, tzinfo=UTC))
    view = observer.view(1)
    assert view.windows[0].active is True
    assert [b.state for b in view.lanes[0].bars] == ["active", "upcoming"]
    clock.set(datetime(2026, 6, 2, 4, tzinfo=UTC))  # the end is excluded: [start, end)
    view = observer.view(1)
    assert view.windows[0].active is False
    assert view.windows[0].next_start == datetime(2026, 6, 3, 2, tzinfo=UTC)


def test_an_edit_of_windows_toml_shows_at_the_next_request(estop, fleet_root):
    write_windows(fleet_root, NIGHTLY)
    observer = Observer(estop)
    assert [lane.scope for lane in observer.view().lanes] == ["fleet"]
    write_windows(fleet_root, NIGHTLY, WEEKLY_OPS)
    view = observer.view()
    assert [lane.scope for lane in view.lanes] == ["fleet", "ops"]
    assert len(view.lanes[1].bars) == 1


def test_a_broken_windows_toml_keeps_the_last_good_windows_and_says_why(estop, fleet_root):
    write_windows(fleet_root, NIGHTLY)
    observer = Observer(estop)
    observer.view()
    (fleet_root / "windows.toml").write_text('[[windows]]\nname = "x"\ncron = "nope"\nduration = "1h"\n')
    view = observer.view()
    assert len(view.lanes[0].bars) == 7
    assert len(view.problems) == 1 and view.problems[0].startswith("windows.toml:")


def test_text_from_a_window_name_is_escaped_in_the_svg(estop, fleet_root):
    estop.engage(reason='<script>alert(1)</script> "\x1b[31m', fleet=True)
    text = render_timeline_svg(Observer(estop).view())
    assert "<script>" not in text and "\x1b" not in text
    assert "&lt;script&gt;" in text and "\\x1b" in text


@pytest.mark.parametrize("minutes_to_midnight", [1, 10, 30, 120])
def test_the_now_label_never_overlaps_the_first_days_label(estop, fleet_root, clock, minutes_to_midnight):
    """Issue 44 item 7: just before midnight the first day's tick is right of "now"; its label
    starts after the "now" label (or is left out), never on it."""
    from hermes_estop.observe.svg import NOW_LABEL_W

    midnight = datetime(2026, 6, 2, tzinfo=UTC)
    clock.set(midnight - timedelta(minutes=minutes_to_midnight))
    write_windows(fleet_root, NIGHTLY)
    svg = svg_of(Observer(estop).view(7))
    labels = [t for t in svg.iter(f"{SVG}text") if "day-label" in (t.get("class") or "").split()]
    now = next(t for t in labels if t.text == "now")
    x_now = float(now.get("x"))
    days = [float(t.get("x")) for t in labels if t is not now]
    assert days and all(x >= x_now + NOW_LABEL_W for x in days)
