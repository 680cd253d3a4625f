"""A window's drain lead on the timeline (issue 11 §1): the SVG draws a lighter `rect.drain` from
the arm to the start just before the bar (and the bar says `data-drain-from`); the terminal
timeline draws it as `~`; a window without a lead draws none."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from obs_helpers import write_windows

from hermes_estop.observe.svg import render_timeline_svg
from hermes_estop.observe.terminal import render_timeline_text
from hermes_estop.observe.view import Observer

SVG = "{http://www.w3.org/2000/svg}"
# the fake clock starts at 2026-06-01T12:00Z: the first occurrence starts 02:00Z the next day
NIGHTLY = {"name": "nightly", "cron": "0 2 * * *", "timezone": "UTC", "duration": "2h"}


def rects(view, kind: str) -> list[ET.Element]:
    svg = ET.fromstring(render_timeline_svg(view))
    return [r for r in svg.iter(f"{SVG}rect") if kind in (r.get("class") or "").split()]


def test_the_svg_draws_the_drain_lead_before_each_bar(estop, fleet_root):
    write_windows(fleet_root, NIGHTLY | {"drain": "45m"})
    view = Observer(estop).view(3)
    [first, *_] = view.lanes[0].bars
    assert first.drain_from is not None and (first.start - first.drain_from).total_seconds() == 45 * 60
    drains, bars = rects(view, "drain"), rects(view, "bar")
    assert len(drains) == len(bars) == 3
    assert [d.get("data-end") for d in drains] == [b.get("data-start") for b in bars]
    assert drains[0].get("data-start") == "2026-06-02T01:15:00Z" == bars[0].get("data-drain-from")
    assert float(drains[0].get("x")) + float(drains[0].get("width")) == float(bars[0].get("x"))


def test_a_window_without_a_drain_lead_draws_none(estop, fleet_root):
    write_windows(fleet_root, NIGHTLY)
    view = Observer(estop).view(3)
    assert rects(view, "drain") == [] and all(b.get("data-drain-from") is None for b in rects(view, "bar"))
    assert all(bar.drain_from is None for bar in view.lanes[0].bars)


def test_the_terminal_timeline_draws_the_drain_lead_as_tildes(estop, fleet_root):
    write_windows(fleet_root, NIGHTLY | {"drain": "6h"})
    [line] = [line.plain for line in render_timeline_text(Observer(estop).view(1), 96) if line.plain.startswith("fleet")]
    cells = line.split("|", 1)[1]
    assert "~" in cells and cells.index("~") < cells.index("#")
    assert cells[cells.rindex("~") + 1] == "#"


def test_api_status_timeline_gives_the_drain_start(estop, fleet_root):
    from hermes_estop.observe.server import status_document

    write_windows(fleet_root, NIGHTLY | {"drain": "45m"}, NIGHTLY | {"name": "plain", "scope": "ops"})
    occurrences = status_document(Observer(estop).view(1, sections=True))["timeline"]["occurrences"]
    by_window = {o["window"]: o for o in occurrences}
    assert by_window["nightly"]["drain_from"] == "2026-06-02T01:15:00+00:00"
    assert "drain_from" not in by_window["plain"]


def test_a_window_in_its_drain_lead_counts_as_active_and_its_bar_too(estop, fleet_root, clock):
    from datetime import UTC, datetime

    write_windows(fleet_root, NIGHTLY | {"drain": "45m"})
    observer = Observer(estop)
    clock.set(datetime(2026, 6, 2, 1, 10, tzinfo=UTC))  # five minutes before the lead
    view = observer.view(1)
    assert [s.active for s in view.windows] == [False]
    assert view.stable_until == datetime(2026, 6, 2, 1, 15, tzinfo=UTC)  # the arm, not the start
    clock.set(datetime(2026, 6, 2, 1, 20, tzinfo=UTC))  # in the lead
    view = observer.view(1)
    [state] = view.windows
    assert state.active and state.next_start == datetime(2026, 6, 3, 2, tzinfo=UTC)
    assert view.lanes[0].bars[0].state == "active"
    clock.set(datetime(2026, 6, 2, 4, tzinfo=UTC))  # the deadman
    assert [s.active for s in observer.view(1).windows] == [False]
