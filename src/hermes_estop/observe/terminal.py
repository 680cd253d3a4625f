"""`hermes windows timeline`: the status page's timeline in a terminal, drawn with `rich`.

One row per scope, as wide as the terminal (each column is `(end - start) / columns` of real
time, placed by UTC instants like the SVG, so DST days are drawn as long as they last). It
reads without colour: every state has its own character, colour only repeats it.

    #  a window occurrence        @  one covering now       x  skipped
    ~  its drain lead (held before the start)
    -  released early/disabled    H  the current hold       |  its deadman
    >  a hold with no deadman (continues past the edge)     ^  now (the first column)
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from rich.console import Console
from rich.text import Text

from hermes_estop.model.hold import HoldState
from hermes_estop.model.text import printable
from hermes_estop.observe.svg import day_ticks
from hermes_estop.observe.view import FleetView, ScopeLane

__all__ = ["CHARS", "LEGEND", "print_timeline", "render_timeline_text"]

#: the character of each state; a later entry wins where two overlap in one column
CHARS = {"hold": "H", "drain": "~", "disabled": "-", "released": "-", "upcoming": "#", "active": "@", "skipped": "x"}
_STYLES = {"H": "on red3", "#": "bold blue", "@": "bold yellow", "x": "dim", "-": "dim", "|": "bold red",
           ">": "bold red", "^": "bold", "~": "blue"}
LEGEND = ("# window  ~ drain lead  @ covering now  x skipped  - released/disabled  H hold  | deadman  "
          "> no deadman  ^ now")
_MIN_PLOT = 20


def _cells(lane: ScopeLane, view: FleetView, width: int) -> list[str]:
    t0 = view.start.timestamp()
    span = max(view.end.timestamp() - t0, 1.0)

    def col(when: datetime) -> int:
        return int(min(max((when.timestamp() - t0) / span, 0.0), 1.0) * width)

    cells = [" "] * width
    reading = lane.reading
    if reading is not None and reading.active:
        deadman = reading.hold.expires_at if reading.hold is not None and reading.state is HoldState.ACTIVE else None
        stop = col(deadman) if deadman is not None else width
        for i in range(max(stop, 1)):
            cells[min(i, width - 1)] = CHARS["hold"]
        if deadman is not None and deadman < view.end:
            cells[min(stop, width - 1)] = "|"
        elif deadman is None:
            cells[width - 1] = ">"
    for bar in lane.bars:
        if bar.drain_from is not None:
            for i in range(col(bar.drain_from), min(col(bar.start), width)):
                if cells[i] == " ":  # never over another bar or the hold
                    cells[i] = CHARS["drain"]
        first = col(bar.start)
        last = max(col(bar.end), first + 1)
        char = CHARS.get(bar.state, "#")
        for i in range(first, min(last, width)):
            cells[i] = char
    if cells[0] == " ":
        cells[0] = "^"
    return cells


def _axis(view: FleetView, width: int) -> str:
    """A `|` at each UTC midnight, labelled in ONE format the whole axis can carry: `Mon 14`,
    else `14`, else every n-th midnight only, as `14` (never a mix of day names and numbers)."""
    t0 = view.start.timestamp()
    span = max(view.end.timestamp() - t0, 1.0)
    ticks = [(int((tick.timestamp() - t0) / span * width), tick) for tick in day_ticks(view.start, view.end)]
    gap = min((b - a for (a, _), (b, _) in itertools.pairwise(ticks)), default=width)
    if gap >= 8:
        fmt, every = "|%a %d", 1
    else:
        fmt, every = "|%d", max(1, -(-4 // max(gap, 1)))  # at least 4 columns per label: "|14 "
    line = [" "] * width
    for at, tick in ticks[::every]:
        if at >= width:
            continue
        label = f"{tick:{fmt}}"
        if at + len(label) > width or any(c != " " for c in line[at:at + len(label)]):
            label = "|"
        line[at:at + len(label)] = list(label)
    return "".join(line).rstrip()


def _short(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _wrap(items: list[str], width: int, sep: str = "  ") -> list[str]:
    """`items` joined by `sep`, broken into lines of at most `width` between items."""
    lines: list[str] = []
    current = ""
    for item in items:
        candidate = f"{current}{sep}{item}" if current else item
        if len(candidate) > width and current:
            lines.append(current)
            current = item
        else:
            current = candidate
    if current:
        lines.append(current)
    return lines


def render_timeline_text(view: FleetView, width: int, *, color: bool = False) -> list[Text]:
    """The timeline as `rich` Text lines fitting `width` columns: a heading, the day axis, one
    row per scope, the legend."""
    label_width = min(max((len(printable(lane.scope)) for lane in view.lanes), default=5), 16)
    label_width = max(min(label_width, width - 2 - _MIN_PLOT), 3, 5 if width >= 40 else 3)
    plot = max(width - label_width - 2, 1)
    step = (view.end - view.start) / plot
    minutes = max(int(step.total_seconds() // 60), 1)
    column = f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"
    heading = [f"{_short(view.start)} ..", f"{_short(view.end)},", f"one column = {column}"]
    lines = [Text(line[:width]) for line in _wrap(heading, width, sep=" ")]
    lines.append(Text(" " * (label_width + 1) + "|" + _axis(view, plot)[: plot]))
    for lane in view.lanes:
        label = printable(lane.scope)
        if len(label) > label_width:
            label = label[: label_width - 1] + "~"
        row = Text(label.ljust(label_width) + " |")
        cells = "".join(_cells(lane, view, plot)).rstrip()
        if color:
            for ch in cells:
                row.append(ch, style=_STYLES.get(ch))
        else:
            row.append(cells)
        lines.append(row)
    if not view.lanes:
        lines.append(Text("(no scope: no hold and no window)"))
    lines.extend(Text(line) for line in _wrap(LEGEND.split("  "), width))
    for problem in view.problems:
        lines.extend(Text(line) for line in _wrap(f"problem: {printable(problem)}".split(" "), width, sep=" "))
    return lines


def print_timeline(view: FleetView, console: Console | None = None) -> None:
    """Print the timeline on `console` (default: stdout, its width from the terminal or
    `COLUMNS`), coloured only where the console supports colour."""
    console = console or Console(highlight=False, soft_wrap=False)
    for line in render_timeline_text(view, console.width, color=console.color_system is not None):
        console.print(line, overflow="crop", no_wrap=True, crop=True)
