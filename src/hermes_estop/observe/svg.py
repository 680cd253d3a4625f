"""The timeline of a `FleetView` as inline SVG, drawn on the server (no JavaScript).

One lane per scope; each window occurrence is one `<rect class="bar">` placed by its UTC
instants, so a DST day is drawn as the 23 or 25 hours it lasts and a 2 h window that crosses the
fall-back hour is exactly as long as one that does not. The current hold of a lane is a band
from now to its deadman (a marker line at the deadman), or to the right edge with an arrow when
it has none. Skipped occurrences are hatched and crossed. A window's drain lead (its hold arms
before the start) is a lighter `<rect class="drain">` just before its bar.

Stable hooks for tests and scripts: the `<svg id="timeline">` carries `data-start`/`data-end`;
each lane is `<g class="lane" data-scope=... data-bars=N>`; each bar has `data-window`,
`data-state`, `data-start`, `data-end` (ISO-8601 UTC), and `data-drain-from` when it has a drain
lead; the drain band is `rect.drain` with `data-window`, `data-start` (the arm) and `data-end`
(the window's start); the hold band is `rect.hold` with `data-deadman`.

The present stands out at any scale: in a lane where an occurrence covers now or a hold stands,
`g.now-cover` (`data-scope`, `data-windows`, `data-end`) is a strong block from now to the end
(never narrower than `NOW_MIN` px, drawn over the hold band and the bars, under the deadman line)
and, in a row added under the lane (where it hides no bar), a label naming what covers now and
until when. Every bar's tooltip (`<title>`) gives its start and end in UTC and in its window's
own zone.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo
from html import escape
from typing import TYPE_CHECKING

from hermes_estop.model.hold import HoldState
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import format_instant, short_utc
from hermes_estop.observe.view import Bar, FleetView, ScopeLane, Slice
from hermes_estop.observe.window_times import covering_now, in_zones, span_in_zones, utc

if TYPE_CHECKING:
    from hermes_estop.windows.model import Window

__all__ = ["WIDTH", "anchor_of", "day_ticks", "lane_id", "render_timeline_svg"]

WIDTH = 1100
LABEL = 150
LANE_H = 34
AXIS_H = 30
BAR_PAD = 7
#: lanes with at most this many windows get their names written beside the bars
MAX_LABELLED = 8
#: what covers now is never drawn narrower than this (px): a 2 h window is a sliver of a week
NOW_MIN = 12
#: the room the axis's "now" label takes (px): a day's label starts after it
NOW_LABEL_W = 34
#: a day's label pushed right of "now" by more than this (px) would name the wrong day: left out
DAY_LABEL_SLACK = 60
#: the height of the row under a lane that names what covers now
NOW_ROW = 22
#: the width of a character of a label, for placing labels apart (12 px text; 13 px bold)
CHAR_W = 6.8
NOW_CHAR_W = 7.8
_ID_RE = re.compile(r"[^A-Za-z0-9_-]")


def lane_id(scope: str) -> str:
    """The DOM id of a scope's lane: `lane-<scope>` with anything but [A-Za-z0-9_-] as `_`."""
    return "lane-" + _ID_RE.sub("_", scope)


def day_ticks(start: datetime, end: datetime) -> list[datetime]:
    """The UTC midnights in `(start, end)`: where the axis draws a day boundary."""
    first = start.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    out = []
    while first < end:
        out.append(first)
        first += timedelta(days=1)
    return out


def _text(value: object) -> str:
    return escape(printable(value), quote=True)


class _Scale:
    """Instant -> x, by UTC seconds since the start (never by wall-clock days)."""

    def __init__(self, start: datetime, end: datetime, left: float, width: float) -> None:
        self.t0 = start.timestamp()
        self.span = max(end.timestamp() - self.t0, 1.0)
        self.left = left
        self.width = width

    def x(self, when: datetime) -> float:
        frac = (when.timestamp() - self.t0) / self.span
        return self.left + self.width * min(max(frac, 0.0), 1.0)


def anchor_of(start: datetime) -> datetime:
    """The instant bars are positioned from: the UTC midnight at or before the timeline's start.
    Bars are drawn in minutes since it and the lane's group is shifted and scaled to the
    timeline, so a window's drawing stays valid all day (only the group's transform moves)."""
    return start.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def render_timeline_svg(view: FleetView) -> str:
    """The `<svg>` element of the timeline (a fragment to embed in a page)."""
    lanes = view.lanes
    scale = _Scale(view.start, view.end, LABEL, WIDTH - LABEL - 10)
    now_by_scope = covering_now(view)
    covers = [_now_cover(view, lane, scale, now_by_scope.get(lane.scope, [])) for lane in lanes]
    tops = [AXIS_H]
    for cover in covers:
        tops.append(tops[-1] + LANE_H + (NOW_ROW if cover[0] else 0))
    height = max(tops[-1], AXIS_H + LANE_H) + 8
    per_minute = scale.width / max((view.end - view.start).total_seconds() / 60, 1.0)
    out = [
        f'<svg id="timeline" class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="100%" role="img" aria-label="maintenance timeline" '
        f'data-start="{format_instant(view.start)}" data-end="{format_instant(view.end)}" data-lanes="{len(lanes)}">',
        f'<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
        f'patternTransform="scale({1 / per_minute:.6g} 1) rotate(45)">'
        '<rect width="6" height="6" fill="#f3f4f6"/><line x1="0" y1="0" x2="0" y2="6" stroke="#9ca3af" stroke-width="3"/>'
        f'</pattern><clipPath id="plot"><rect x="{LABEL}" y="0" width="{scale.width:.1f}" height="{LANE_H}"/>'
        '</clipPath></defs>',
    ]
    out.append(_axis(view, scale, height))
    for lane, top, cover in zip(lanes, tops, covers, strict=False):
        out.append(_lane(view, lane, top, scale, per_minute, cover))
    x_now = scale.x(view.now)
    out.append(f'<line class="now" x1="{x_now:.1f}" y1="{AXIS_H - 6}" x2="{x_now:.1f}" y2="{height - 8}"/>')
    out.append("</svg>")
    return "".join(out)


def _axis(view: FleetView, scale: _Scale, height: int) -> str:
    parts = ['<g class="axis">']
    x_now = scale.x(view.now)
    clear = x_now + NOW_LABEL_W  # a day's label starts right of "now", never under it
    for tick in day_ticks(view.start, view.end):
        x = scale.x(tick)
        parts.append(f'<line class="day" x1="{x:.1f}" y1="{AXIS_H - 8}" x2="{x:.1f}" y2="{height - 8}" '
                     f'data-day="{tick.date().isoformat()}"/>')
        at = max(x + 4, clear)
        if at + 70 <= scale.left + scale.width and at - x < DAY_LABEL_SLACK:
            parts.append(f'<text class="day-label" x="{at:.1f}" y="{AXIS_H - 12}">{tick:%a %d %b}</text>')
    parts.append(f'<text class="day-label now-axis-label" x="{x_now:.1f}" y="{AXIS_H - 12}">now</text>')
    parts.append("</g>")
    return "".join(parts)


def _lane(view: FleetView, lane: ScopeLane, y: float, scale: _Scale, per_minute: float,
          cover: tuple[str, set[str]]) -> str:
    """A lane at `y`, drawn in its own coordinates (`translate`); its bars in minutes since the
    anchor (`anchor_of`), scaled into place and clipped to the plot, so each window's drawing
    is the same SVG all day, wherever the lane lands: the observer reuses it."""
    scope = _text(lane.scope)
    held = " held" if lane.held else ""
    shift = LABEL - (view.start - anchor_of(view.start)).total_seconds() / 60 * per_minute
    parts = [
        f'<g class="lane{held}" id="{lane_id(lane.scope)}" data-scope="{scope}" data-bars="{lane.bar_count}" '
        f'transform="translate(0 {y})">',
        f'<rect class="lane-bg" x="{LABEL}" y="0" width="{scale.width:.1f}" height="{LANE_H - 2}"/>',
        f'<text class="lane-label" x="8" y="{LANE_H / 2 + 4:.1f}">{scope}</text>',
    ]
    band, marker = _hold(view, lane, 0, scale)
    parts.append(band)
    parts.append(f'<g clip-path="url(#plot)"><g class="bars" transform="translate({shift:.3f} 0) '
                 f'scale({per_minute:.6g} 1)">')
    parts.append(_bars(view, lane, per_minute))
    parts.append("</g></g>")
    parts.append(cover[0])
    parts.append(marker)
    parts.append(_labels(lane, scale, cover[1]))
    parts.append("</g>")
    return "".join(parts)


def _now_cover(view: FleetView, lane: ScopeLane, scale: _Scale, pairs: list[tuple[Bar, Window]]
               ) -> tuple[str, set[str]]:
    """What covers now in this lane, drawn so it is seen at any scale: a block from now to
    the latest end (at least `NOW_MIN` px), and under the lane a row (`NOW_ROW` px) with a label
    naming each thing with its end, where it hides no bar. Returns the drawing and the windows
    it names (their own labels are left out)."""
    now = view.now
    bars = [bar for bar, _ in pairs]
    reading = lane.reading
    held = reading is not None and reading.active
    if not bars and not held:
        return "", set()
    names = [printable(bar.window) for bar in bars]
    short = [f"{name} until {short_utc(bar.end)}" for name, bar in zip(names, bars, strict=True)]
    full = [f"{name} covers now, until {in_zones(bar.end, window.tz)}"
            for name, (bar, window) in zip(names, pairs, strict=True)]
    ends = [bar.end for bar in bars]
    deadman = None
    if held and reading is not None:
        hold = reading.hold
        deadman = hold.expires_at if hold is not None and reading.state is HoldState.ACTIVE else None
        if deadman is None:
            short.append("held, no deadman")
            full.append("held with no deadman: until hermes resume")
        elif deadman not in ends:
            short.append(f"held until {short_utc(deadman)}")
            full.append(f"held until {utc(deadman)}")
        if deadman is not None:
            ends.append(deadman)
    end = max(ends) if ends else None
    x1 = scale.x(now)
    right = scale.left + scale.width
    x2 = min(max(scale.x(end) if end is not None else x1, x1 + NOW_MIN), right)
    label = "now: " + "; ".join(short)
    width = NOW_CHAR_W * len(label)
    top, h = BAR_PAD - 3, LANE_H - 2 - 2 * (BAR_PAD - 3)
    ending = format_instant(end) if end is not None else ""
    drawn = (f'<g class="now-cover" data-scope="{_text(lane.scope)}" '
             f'data-windows="{_text(" ".join(names))}" data-end="{ending}">'
             f'<title>{_text("; ".join(full))}</title>'
             f'<rect class="now-block" x="{x1:.1f}" y="{top}" width="{x2 - x1:.1f}" height="{h}"/>'
             f'<rect class="now-row" x="{x1:.1f}" y="{LANE_H - 2}" width="{min(width + 10, right - x1):.1f}" '
             f'height="{NOW_ROW - 2}"/>'
             f'<text class="now-label" x="{x1 + 5:.1f}" y="{LANE_H + NOW_ROW - 8}">{escape(label, quote=True)}</text></g>')
    return drawn, {bar.window for bar in bars}


def _labels(lane: ScopeLane, scale: _Scale, named: set[str]) -> str:
    """Each window's name just after its first bar, when the lane has few windows (with many,
    names would pile up: the bars' tooltips name them); not for a window the now label names."""
    if not 0 < len(lane.slices) <= MAX_LABELLED:
        return ""
    parts = []
    taken: list[tuple[float, float]] = []
    for piece in lane.slices:
        if not piece.bars or piece.window.name in named:
            continue
        bar = piece.bars[0]
        x = scale.x(bar.end) + 4
        name = printable(bar.window)
        width = CHAR_W * len(name)
        if x + width > scale.left + scale.width or any(a < x + width and x < b for a, b in taken):
            continue
        taken.append((x, x + width))
        parts.append(f'<text class="bar-label" x="{x:.1f}" y="{LANE_H / 2 + 3:.1f}">{_text(bar.window)}</text>')
    return "".join(parts)


def _bars(view: FleetView, lane: ScopeLane, per_minute: float) -> str:
    """The bars of a lane: each window's drawing is kept with its slice, and the lane's whole
    drawing in the observer's `fragments` while the lane is made of the same slices."""
    cache: dict[str, tuple[tuple[int, ...], tuple[Slice, ...], str]] | None = view.extra.get("fragments")
    ids = tuple(id(piece) for piece in lane.slices)
    if cache is not None:
        hit = cache.get(lane.scope)
        if hit is not None and hit[0] == ids:
            return hit[2]
    for piece in lane.slices:
        if piece.fragment is None:
            anchor = anchor_of(view.start)
            zone = piece.window.tz
            piece.fragment = "".join(_bar(bar, BAR_PAD, LANE_H - 2 - 2 * BAR_PAD, anchor, 2.0 / per_minute, zone)
                                     for bar in piece.bars)
    drawn = "".join(piece.fragment or "" for piece in lane.slices)
    if cache is not None:
        cache[lane.scope] = (ids, lane.slices, drawn)  # the slices kept alive: their ids stay theirs
    return drawn


#: how a bar's tooltip names its state
_STATE_WORDS = {"active": "covering now", "upcoming": "upcoming", "skipped": "skipped (not armed)",
                "released": "released early", "disabled": "disabled"}


def _bar(bar: Bar, top: float, h: float, anchor: datetime, min_width: float, zone: tzinfo | None = None) -> str:
    """One occurrence, x and width in minutes since `anchor` (UTC instants: a DST day is
    drawn as long as it lasts); its tooltip gives its times in UTC and in `zone`, the window's."""
    x1 = (bar.start - anchor).total_seconds() / 60
    width = max((bar.end - bar.start).total_seconds() / 60, min_width)
    name = _text(bar.window)
    start = _zulu(bar.start)
    end = _zulu(bar.end)
    mark = ""
    if bar.state == "skipped":
        mark = (f'<path class="skip-mark" d="M{x1:g} {top:g}L{x1 + width:g} {top + h:g}'
                f'M{x1:g} {top + h:g}L{x1 + width:g} {top:g}"/>')
    drain = drain_from = ""
    if bar.drain_from is not None:
        dx = (bar.drain_from - anchor).total_seconds() / 60
        armed = _zulu(bar.drain_from)
        drain_from = f' data-drain-from="{armed}"'
        drain = (f'<rect class="drain" data-window="{name}" data-start="{armed}" data-end="{start}" x="{dx:g}" '
                 f'y="{top:g}" width="{max(x1 - dx, min_width):g}" height="{h:g}" fill="#bfdbfe" '
                 f'fill-opacity="0.7"><title>{name} drain lead: held from '
                 f'{_text(in_zones(bar.drain_from, zone))}</title></rect>')
    state = _STATE_WORDS.get(bar.state, bar.state)
    when = span_in_zones(bar.start, bar.end, zone)
    return (f'{drain}<rect class="bar bar-{bar.state}" data-window="{name}" data-state="{bar.state}" '
            f'data-start="{start}" data-end="{end}"{drain_from} x="{x1:g}" y="{top:g}" width="{width:g}" '
            f'height="{h:g}"><title>{name} {state}: {_text(when)}</title></rect>{mark}')


def _zulu(when: datetime) -> str:
    """ISO-8601 UTC with `Z`, to the second when that is exact (compact: 7,000 bars add up)."""
    text = when.astimezone(UTC).replace(tzinfo=None).isoformat()
    return text + "Z"


def _hold(view: FleetView, lane: ScopeLane, y: float, scale: _Scale) -> tuple[str, str]:
    """The lane's current hold: a band from now to its deadman (or to the edge: no deadman),
    and its marker (the deadman line, or the arrow off the edge), drawn over what covers now."""
    reading = lane.reading
    if reading is None or not reading.active:
        return "", ""
    hold = reading.hold
    deadman = hold.expires_at if hold is not None and reading.state is HoldState.ACTIVE else None
    x1 = scale.x(view.now)
    x2 = scale.x(deadman) if deadman is not None else scale.left + scale.width
    kind = "hold-unreadable" if reading.state is HoldState.UNREADABLE else "hold"
    reason = _text(hold.reason) if hold is not None and hold.reason else ""
    until = format_instant(deadman) if deadman is not None else ""
    title = f"held{': ' + reason if reason else ''}" + (f" until {utc(deadman)}" if deadman else " (no deadman)")
    parts = [f'<rect class="hold {kind}" data-scope="{_text(lane.scope)}" data-deadman="{until}" '
             f'x="{x1:.1f}" y="{y + 2}" width="{max(x2 - x1, 2.0):.1f}" height="{LANE_H - 6}">'
             f'<title>{title}</title></rect>']
    marker = []
    if deadman is not None and deadman <= view.end:
        marker.append(f'<line class="deadman" data-deadman="{until}" x1="{x2:.1f}" y1="{y}" x2="{x2:.1f}" '
                     f'y2="{y + LANE_H - 2}"/>')
    elif deadman is None:
        edge = scale.left + scale.width
        mid = y + (LANE_H - 2) / 2
        marker.append(f'<path class="hold-open" d="M{edge - 8:.1f} {mid - 6:.1f}L{edge:.1f} {mid:.1f}'
                     f'L{edge - 8:.1f} {mid + 6:.1f}"/>')
    return "".join(parts), "".join(marker)
