"""The occurrence of a window after a given one, and a memo of it kept across passes.

Why a memo: while a scope is held by a chain of occurrences, every reconciliation pass walks the
same chain again (`reconcile.chain_end`, up to `CHAIN_LIMIT` occurrences a scope) to find when
the scope may lift, and each step of it is a croniter computation. Ten scopes held by a week of
back-to-back windows made a pass take a second (issue 24); remembered, a step is a dict lookup.
The chain only ever asks about occurrences armed after `now`, so what the clock has passed is
forgotten (`forget_armed_by`) and the memo stays as small as the chains being held.
"""

from __future__ import annotations

from datetime import datetime

from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import Occurrence, occurrences

__all__ = ["FollowingMemo", "following"]


def following(window: Window, occurrence: Occurrence) -> Occurrence | None:
    """The occurrence of `window` after `occurrence`, in the order `occurrences` yields them (a
    calendar may have two events starting at the same instant); None when there is none."""
    passed = False
    for candidate in occurrences(window, occurrence.start):
        if passed or candidate.start > occurrence.start:
            return candidate
        passed = candidate == occurrence
    return None


class FollowingMemo:
    """`following`, remembered per occurrence. A window is recognised by identity or, read
    again as another object, by equality field for field (an edited window is computed afresh)."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[Window, datetime, Occurrence | None]] = {}

    def __len__(self) -> int:
        return len(self._memo)

    def __call__(self, window: Window, occurrence: Occurrence) -> Occurrence | None:
        key = occurrence.key
        hit = self._memo.get(key)
        if hit is not None and (hit[0] is window or hit[0] == window):
            return hit[2]
        found = following(window, occurrence)
        self._memo[key] = (window, occurrence.arm_at, found)
        return found

    def forget_armed_by(self, now: datetime) -> None:
        """Forget the occurrences armed at or before `now`: no chain starting at `now` or later
        asks about them."""
        stale = [key for key, (_, arm_at, _) in self._memo.items() if arm_at <= now]
        for key in stale:
            del self._memo[key]
