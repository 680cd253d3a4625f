"""What one view of the fleet IS: `FleetView` and its parts (`ScopeLane`, `Slice`, `Bar`,
`WindowState`), plain values read at one `now` that /metrics, /api/status, the status page and
the terminal timeline all render. Building them (and the caches that make it cheap) is
`view.Observer`'s job; these are kept apart so a renderer depends on the shape, not the builder.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple

from hermes_estop.model.hold import Reading
from hermes_estop.process.check import Snapshot

if TYPE_CHECKING:
    from hermes_estop.observe.status import FleetStatus
    from hermes_estop.windows.model import Window

__all__ = ["Bar", "FleetView", "ScopeLane", "Slice", "WindowState"]


@dataclass(frozen=True)
class Bar:
    """One occurrence of a window on the timeline. `state`: `upcoming`, `active` (covers now),
    `skipped` (a hold the window did not arm stood: never armed), `released` (the operator
    released it early: not re-armed), `disabled` (the window is switched off). `drain_from`:
    for a window with a drain lead, when its hold arms (`[drain_from, start)` is drawn lighter)."""

    window: str
    scope: str
    start: datetime
    end: datetime
    state: str
    key: str
    drain_from: datetime | None = None


@dataclass
class Slice:
    """One window's bars in a view. `fragment` is the SVG the page drew for them, kept with the
    slice (the observer reuses a slice, so the drawing, while nothing in it changed)."""

    window: Window
    bars: tuple[Bar, ...]
    signature: tuple[Any, ...]
    fragment: str | None = None
    #: the first bar's (start, window): what the earliest bars of a view are found by
    head: tuple[datetime, str] | None = None

    def __post_init__(self) -> None:
        if self.bars and self.head is None:
            self.head = (self.bars[0].start, self.bars[0].window)


@dataclass(frozen=True)
class ScopeLane:
    """One scope: its hold now (None when nothing is there) and its windows' slices."""

    scope: str
    reading: Reading | None
    slices: tuple[Slice, ...] = ()
    bar_count: int = 0

    @property
    def held(self) -> bool:
        return self.reading is not None and self.reading.active

    @property
    def bars(self) -> tuple[Bar, ...]:
        """Every bar of the lane, by start."""
        return tuple(heapq.merge(*(s.bars for s in self.slices), key=lambda b: (b.start, b.window)))


class WindowState(NamedTuple):
    """One window's figures at `now`: whether an occurrence covers now, and the next start."""

    window: Window
    active: bool
    next_start: datetime | None


@dataclass(frozen=True)
class FleetView:
    """Everything one request shows, read at one `now`; the timeline spans `[start, end)`
    (`start` is `now` to the minute)."""

    now: datetime
    start: datetime
    end: datetime
    snapshot: Snapshot
    lanes: tuple[ScopeLane, ...]
    windows: tuple[WindowState, ...]
    problems: tuple[str, ...] = ()
    leader: bool | None = None
    store_reachable: bool = True
    #: until when the windows' figures (`windows`) stay what they are: the next start or end
    stable_until: datetime | None = None
    #: the status document the holds of this view come from (`status.fleet_status`)
    status: FleetStatus | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def bars(self) -> list[Bar]:
        return [bar for lane in self.lanes for bar in lane.bars]

    def first_bars(self, count: int) -> list[Bar]:
        """The `count` earliest bars of every lane, by start, without sorting them all: they
        lie in the `count` slices whose first bar is earliest."""
        heads = heapq.nsmallest(count, (s for lane in self.lanes for s in lane.slices if s.head is not None),
                                key=_head)
        merged: Iterator[Bar] = heapq.merge(*(s.bars for s in heads), key=lambda b: (b.start, b.window))
        return list(islice(merged, count))

    @property
    def bar_count(self) -> int:
        return sum(lane.bar_count for lane in self.lanes)


def _head(piece: Slice) -> tuple[datetime, str]:
    assert piece.head is not None
    return piece.head
