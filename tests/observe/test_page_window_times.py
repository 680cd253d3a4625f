"""The present on the status page (issue 23 item 4): `#covering-now` names each occurrence
covering now and each standing hold with its end, in UTC and in the window's own zone, or says
that nothing does and what comes next; the timeline draws what covers now wider than its
scale would (`g.now-cover`) with a row naming it; every tooltip and table cell gives UTC and the
window's local time with its zone; the legend names the drain lead."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from obs_helpers import Dom, write_windows

from hermes_estop.observe.page import render_page
from hermes_estop.observe.svg import render_timeline_svg
from hermes_estop.observe.view import Observer
from hermes_estop.observe.window_times import span_in_zones

SVG = "{http://www.w3.org/2000/svg}"
NY_BACKUP = {"name": "nightly-backup", "cron": "0 8 * * *", "timezone": "America/New_York", "duration": "2h",
             "reason": "backup"}
#: 08:40 EDT: the 08:00-10:00 EDT occurrence (12:00-14:00 UTC) covers now
COVERED = datetime(2026, 6, 1, 12, 40, tzinfo=UTC)
#: what covers now is never drawn narrower than this (svg.NOW_MIN)
NOW_MIN = 12


def page_of(estop, days: int = 7) -> Dom:
    dom = Dom()
    dom.feed(render_page(Observer(estop).view(days)))
    return dom


def test_what_covers_now_comes_first_named_with_its_end_in_utc_and_the_windows_zone(estop, fleet_root, clock):
    clock.set(COVERED)
    write_windows(fleet_root, NY_BACKUP)
    estop.engage(reason="patching", ttl="3h", fleet=True)
    dom = page_of(estop)
    ids = [e.get("id") for e in dom.elements]
    assert ids.index("verdict") < ids.index("covering-now") < ids.index("holds")
    items = dom.having("now-item")
    assert [(i["data-kind"], i["data-scope"], i["data-window"], i["data-end"]) for i in items] == [
        ("window", "fleet", "nightly-backup", "2026-06-01T14:00:00+00:00"),
        ("hold", "fleet", "", "2026-06-01T15:40:00+00:00")]
    window, hold = (" ".join(i["text"].split()) for i in items)
    assert window == ("nightly-backup (fleet) covers now, until 2026-06-01 14:00:00 UTC "
                      "= 2026-06-01 10:00:00 EDT (America/New_York) (in 1h20m)")
    assert hold == "fleet is held, until 2026-06-01 15:40:00 UTC (in 3h00m)"


@pytest.mark.parametrize("ttl, words", [(None, "with no deadman: until hermes resume"),
                                         ("45m", "until 2026-06-01 13:25:00 UTC (in 45m)")])
def test_a_hold_covering_now_is_named_with_its_deadman_or_none(estop, clock, ttl, words):
    clock.set(COVERED)
    estop.engage(reason="incident", ttl=ttl, fleet=True)
    items = page_of(estop).having("now-item")
    assert [(i["data-kind"], i["data-scope"]) for i in items] == [("hold", "fleet")]
    assert " ".join(items[0]["text"].split()) == f"fleet is held, {words}"


@pytest.mark.parametrize("body, words", [(b"", "(a hand-made stop with no details: admits nobody)"),
                                         (b"{", "(unreadable: admits nobody)")])
def test_an_unreadable_hold_covering_now_is_named_as_such(estop, clock, body, words):
    clock.set(COVERED)
    estop.sentinel_path().write_bytes(body)
    items = page_of(estop).having("now-item")
    assert [(i["data-kind"], i["data-scope"], i["data-end"]) for i in items] == [("hold", "fleet", "")]
    assert " ".join(items[0]["text"].split()) == f"fleet is held {words}, until hermes resume"


def test_nothing_covering_now_is_said_with_what_comes_next(estop, fleet_root, clock):
    clock.set(datetime(2026, 6, 1, 15, tzinfo=UTC))
    write_windows(fleet_root, NY_BACKUP)
    dom = page_of(estop)
    panel = [e for e in dom.elements if e.get("id") == "covering-now"]
    assert panel and panel[0]["data-covering"] == "false" and not dom.having("now-item")
    assert " ".join(panel[0]["text"].split()).endswith(
        "Nothing covers now: no window occurrence, no hold. Next: nightly-backup (fleet) at 2026-06-02 12:00:00 UTC "
        "= 2026-06-02 08:00:00 EDT (America/New_York) (in 21h00m).")


@pytest.mark.parametrize("zone, cron, start, span", [
    ("America/New_York", "0 8 * * *", "2026-06-02 12:00:00 UTC = 2026-06-02 08:00:00 EDT (America/New_York)",
     "2026-06-02 12:00-14:00 UTC = 08:00-10:00 EDT (America/New_York)"),
    ("Europe/Berlin", "0 8 * * *", "2026-06-02 06:00:00 UTC = 2026-06-02 08:00:00 CEST (Europe/Berlin)",
     "2026-06-02 06:00-08:00 UTC = 08:00-10:00 CEST (Europe/Berlin)"),
    ("Asia/Tokyo", "0 5 * * *", "2026-06-01 20:00:00 UTC = 2026-06-02 05:00:00 JST (Asia/Tokyo)",
     "2026-06-01 20:00-22:00 UTC = 2026-06-02 05:00-07:00 JST (Asia/Tokyo)"),
    ("UTC", "0 8 * * *", "2026-06-02 08:00:00 UTC", "2026-06-02 08:00-10:00 UTC"),
])
def test_tooltips_and_table_give_utc_and_the_windows_local_time_with_its_zone(estop, fleet_root, clock, zone, cron,
                                                                               start, span):
    clock.set(datetime(2026, 6, 1, 15, tzinfo=UTC))
    write_windows(fleet_root, NY_BACKUP | {"timezone": zone, "cron": cron})
    dom = page_of(estop)
    titles = [e["text"] for e in dom.elements if e["tag"] == "title"]
    assert f"nightly-backup upcoming: {span}" in titles, titles[:3]
    first = next(e for e in dom.elements if e["tag"] == "tr" and e.get("data-window") == "nightly-backup")
    cells = [e for e in dom.elements[dom.elements.index(first):] if e["tag"] == "td"][:4]
    assert cells[2]["title"] == start and cells[2]["data-label"] == "start"
    assert " = " not in start or start.split(" = ")[1] in cells[2]["text"]  # shown, not only in the tooltip


def test_the_legend_names_the_drain_lead_and_what_covers_now(estop):
    legend = " ".join(e["text"] for e in page_of(estop).having("legend"))
    assert "drain lead" in legend
    assert "covering now, to its end" in legend


@pytest.mark.parametrize("days", [1, 7, 31])
def test_what_covers_now_is_drawn_over_the_deadman_at_least_now_min_wide_at_any_scale(estop, fleet_root, clock,
                                                                                       days):
    clock.set(COVERED)
    write_windows(fleet_root, NY_BACKUP)
    estop.engage(reason="nightly-backup", ttl="1h20m", fleet=True)  # as the window arms it: deadman at its end
    svg = ET.fromstring(render_timeline_svg(Observer(estop).view(days)))
    lane = next(g for g in svg.iter(f"{SVG}g") if g.get("data-scope") == "fleet" and "lane" in g.get("class", ""))
    drawn = list(lane.iter())
    cover = next(e for e in drawn if e.get("class") == "now-cover")
    assert (cover.get("data-windows"), cover.get("data-end")) == ("nightly-backup", "2026-06-01T14:00:00+00:00")
    block = cover.find(f"{SVG}rect[@class='now-block']")
    plot = float(svg.get("viewBox").split()[2]) - 150 - 10
    span = plot * (80 * 60) / (days * 86400)  # 80 minutes, to the deadman
    assert float(block.get("width")) == pytest.approx(max(span, NOW_MIN), abs=0.2)
    hold = next(e for e in drawn if "hold" in (e.get("class") or "").split())
    deadman = next(e for e in drawn if e.get("class") == "deadman")
    assert drawn.index(hold) < drawn.index(cover) < drawn.index(deadman)  # over the band, under its deadman line
    assert cover.find(f"{SVG}text").text == "now: nightly-backup until Mon 01 Jun 14:00 UTC"
    assert "14:00:00 UTC = 2026-06-01 10:00:00 EDT (America/New_York)" in cover.find(f"{SVG}title").text
    # named once: in the now row, not again beside its bar
    bar_labels = [e.text for e in drawn if e.get("class") == "bar-label"]
    assert "nightly-backup" not in bar_labels


@pytest.mark.parametrize("start, end, zone, text", [
    (datetime(2026, 11, 1, 5, tzinfo=UTC), datetime(2026, 11, 1, 7, tzinfo=UTC), "America/New_York",
     "2026-11-01 05:00-07:00 UTC = 01:00 EDT-02:00 EST (America/New_York)"),  # 2 h across the fall-back hour
    (datetime(2026, 6, 2, 2, tzinfo=UTC), datetime(2026, 6, 2, 4, tzinfo=UTC), "America/New_York",
     "2026-06-02 02:00-04:00 UTC = 2026-06-01 22:00-2026-06-02 00:00 EDT (America/New_York)"),
    (datetime(2026, 6, 5, 23, tzinfo=UTC), datetime(2026, 6, 6, 5, tzinfo=UTC), "UTC",
     "2026-06-05 23:00-2026-06-06 05:00 UTC"),
])
def test_a_span_names_each_date_and_abbreviation_where_they_change(start, end, zone, text):
    assert span_in_zones(start, end, ZoneInfo(zone)) == text
