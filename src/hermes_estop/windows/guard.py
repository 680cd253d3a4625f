"""Whether a read of `windows.toml` may weaken anything (issue 9 item 1, issue 20 item 1).

A hand editor that re-saves the file in place truncates it first, and may stall before writing
the rest: a reader can see it empty, or any valid-looking part of the new content (the new
first window alone, a window without its trailing fields). No heuristic tells such a read from
a deliberate edit, so none is tried. The rule is the fleet-wide one (docs/design.md §8a):
**arming and strengthening act at the next read; every weakening waits.**

- A read "weakens" when a window the scheduler last acted on is missing from it or changed in a
  way that can take hold time away (`strengthens` says which changes cannot), or when a window
  the ledger says holds right now (an `armed` occurrence not yet ended) is not in it, enabled,
  on that scope. The second rule covers a fresh process, which has acted on nothing yet.
- A weakening is acted on only once the same file (same identity: device, inode, size, mtime,
  ctime) was read unchanged by at least two reads spanning at least `confirm_after`. Any other
  read in between starts over, so the momentary states of an editor's save never confirm.
- A calendar (`[[calendars]]`, or a window's `exclude_calendar`) weakens when a read of it (an
  edit of the file, a new fetch) removes, shortens or moves an occurrence the ledger says holds
  right now; future occurrences it moves are not held yet and weaken nothing, and a change that
  makes a window cover now (today's holiday removed) is a strengthening: armed at the next read. The feed's content
  is part of the read's identity, so the rule is the same: the same content, two reads, the
  confirmation period.
- What a window holds is part of what it is (issue 32 item 9): its selector (`only`, `jobs`)
  is compared like its times. Holding more components or wider job globs strengthens (acts at
  the next read); holding fewer waits like any weakening. An edit that does both (`cron` to
  `kanban`) acts at once on what it adds: until it is confirmed the window holds the hull of
  the two selectors (`selector.hull`), then what the read says. Calendars' windows carry the
  same fields and follow the same rule.
- An edit that moves a window to another scope moves coverage (issue 45): until it is
  confirmed the new version holds its new scope beside the version last acted on at the old
  one (`GuardVerdict.moving`), so the new scope is held at the next read and the old one is
  lifted only once the edit is confirmed.
- A window whose table no longer validates (`windows_file.Parsed.failures`) weakens nothing: the
  version last acted on stands in for it, confirmed or not, until the table validates again or
  is removed (issue 20 item 2: one window's failure never stops or frees another).
- Until then the scheduler acts on the read with everything it would take away put back (the
  versions last acted on): a window the read adds arms at once, nothing retires, shortens or is
  withdrawn. When what the read takes away cannot be put back (a fresh process: the ledger
  names a window it never read), it acts on nothing: standing holds stay, and their deadmen
  still lift them at the window's end.

Pure: the caller passes `now` (its injected clock).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from hermes_estop.model.allow import Allow
from hermes_estop.model.selector import holds_at_least, hull
from hermes_estop.windows.ledger import ARMED, LedgerEntry
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import Windows, covering

__all__ = ["FileGuard", "GuardVerdict", "meanwhile", "moves", "strengthens", "vanished"]

Identity = object
_NONE = timedelta(0)


@dataclass(frozen=True)
class GuardVerdict:
    """`trusted`: the read is confirmed (or weakens nothing). `windows`: what to act on now (the
    read, or the read with what it takes away put back; None: act on nothing). `reason` says
    what is unconfirmed."""

    trusted: bool
    reason: str | None = None
    windows: Sequence[Window] | None = None
    #: the read's versions of windows it moves to another scope (`moves`), held there at once
    #: beside `windows` (which hold the versions last acted on at their old scopes)
    moving: Sequence[Window] = ()


def _narrower(new: Allow, old: Allow) -> bool:
    """Whether `new` admits nobody `old` does not (deny wins: fewer users, narrower profiles)."""
    if not new.valid or not new.user_ids:
        return True
    if not old.valid or not new.user_ids <= old.user_ids:
        return False
    return not old.profiles or (bool(new.profiles) and new.profiles <= old.profiles)


def strengthens(old: Window, new: Window) -> bool:
    """Whether `new` holds at least wherever, whatever and whomever `old` held: the same schedule
    and scope, and reason, and only changes that add hold time, hold more work or refuse more
    people (a longer duration or drain, wider bounds, fewer exclusions, more components or
    job globs, a narrower allowlist, switched on). A changed reason
    waits like a weakening: a save caught before a table's last fields would otherwise flip the
    reason refused users read."""
    if not old.enabled:
        return True
    if (old.feed is None) != (new.feed is None) or not holds_at_least(new.selector, old.selector):
        return False
    if old.feed is not None:  # a calendar: its events are judged by what holds now (`vanished`)
        return (new.enabled and new.scope == old.scope and (new.drain or _NONE) >= (old.drain or _NONE)
                and _narrower(new.hold_allow, old.hold_allow))
    if not new.enabled or ((new.scope, new.cron, new.at, new.timezone, new.reason, new.exclude_calendar)
                           != (old.scope, old.cron, old.at, old.timezone, old.reason, old.exclude_calendar)):
        return False
    # the holidays of `exclude_calendar` (what the feed says now) are judged like a calendar's
    # events, by what holds now (`vanished`, `_drops`): a feed change that makes the window cover
    # now arms at the next read, one that takes the armed occurrence away waits (issue 45)
    return _holds_longer(old, new) and _narrower(new.hold_allow, old.hold_allow)


def _holds_longer(old: Window, new: Window) -> bool:
    """Whether `new`'s occurrences hold at least as long and as often as `old`'s: duration and
    drain no shorter, bounds no narrower, exclusions no more."""
    if new.duration < old.duration or (new.drain or _NONE) < (old.drain or _NONE):
        return False
    if new.not_before is not None and (old.not_before is None or new.not_before > old.not_before):
        return False
    if new.not_after is not None and (old.not_after is None or new.not_after < old.not_after):
        return False
    return set(new.exclude) <= set(old.exclude) and new.exclude_cron in (None, old.exclude_cron)


def moves(old: Window, new: Window) -> bool:
    """Whether the edit `old` -> `new` moves the window's cover to another scope (both enabled)."""
    return old.enabled and new.enabled and old.scope != new.scope


def vanished(windows: Sequence[Window], previous: Sequence[Window] | None,
             entries: Mapping[str, LedgerEntry], now: datetime, moving: Sequence[Window] = ()) -> list[str]:
    """What the read `windows` takes away: names of previously acted-on windows missing or
    weakened, and of windows holding per the ledger that are not in it (enabled, same scope;
    `moving`: versions also held at another scope, `GuardVerdict.moving`).
    Compared by `Windows.same`: a row's `Window` is built only for a row that changed or holds
    per the ledger."""
    read = Windows.of(windows)
    current = read.named
    elsewhere = {w.name: w for w in moving}
    out: list[str] = []
    if previous is not windows:
        for name, old, new in _changed(Windows.of(previous or ()), read):
            if (new is None or (new is not old and new != old and not strengthens(old, new))) and name not in out:
                out.append(name)
    for entry in entries.values():
        if entry.state != ARMED or entry.end <= now:
            continue
        window = current(entry.window)
        if window is not None and window.scope != entry.scope and entry.window in elsewhere:
            window = elsewhere[entry.window] if elsewhere[entry.window].scope == entry.scope else window
        if (window is None or not window.enabled or window.scope != entry.scope or _drops(window, entry, now)) \
                and entry.window not in out:
            out.append(entry.window)
    return out


def _changed(previous: Windows, windows: Windows) -> Iterator[tuple[str, Window, Window | None]]:
    """(name, the previous window, the read's window or None) of each previous window the read
    does not hold as it was (`Windows.same`)."""
    for index in range(len(previous)):
        name = previous.name(index)
        at = windows.position(name)
        if at is None or not previous.same(index, windows, at):
            yield name, previous[index], None if at is None else windows[at]


def _drops(window: Window, entry: LedgerEntry, now: datetime) -> bool:
    """Whether a calendar's read takes away the occurrence `entry` holds: it no longer covers
    `now`, or ends earlier (a window of cron or at changes only through `strengthens`)."""
    if window.feed is None and window._holidays is None:  # noqa: SLF001 - as above
        return False
    return not any(o.key == entry.key and o.end >= entry.end for o in covering(window, now))


def meanwhile(old: Window, new: Window) -> Window:
    """What an unconfirmed read holds for the window it weakens: the version last acted on,
    holding also what the read adds to it (`selector.hull`): a narrowing waits, a widening in
    the same edit acts at once."""
    if not (new.enabled and old.enabled and new.scope == old.scope) or new.selector == old.selector:
        return old
    both = hull(old.selector, new.selector)
    if both == old.selector:
        return old
    return old.model_copy(update={"only": sorted(both.components) if both else [],
                                  "jobs": list(both.jobs) if both else []})


@dataclass
class _Pending:
    identity: Identity
    since: datetime


class FileGuard:
    """Remembers the windows last acted on and the unconfirmed read (per scheduler process)."""

    def __init__(self, confirm_after: timedelta) -> None:
        self.confirm_after = confirm_after
        #: the windows the scheduler last acted on (confirmed, or with a weakening put back)
        self.trusted: Sequence[Window] | None = None
        self._pending: _Pending | None = None

    @property
    def pending(self) -> bool:
        return self._pending is not None

    @property
    def pending_wait(self) -> timedelta:
        """How long an unconfirmed read must stay the same file (the confirmation period)."""
        return self.confirm_after

    def judge(self, identity: Identity, windows: Sequence[Window], entries: Mapping[str, LedgerEntry],
              now: datetime, failing: frozenset[str] = frozenset()) -> GuardVerdict:
        """What to act on for the read `windows` of the file with `identity` at `now`;
        `failing`: names of the read's tables that do not validate."""
        if failing:
            present = {w.name for w in windows}
            windows = [*windows, *(w for w in self.trusted or () if w.name in failing and w.name not in present)]
        gone = vanished(windows, self.trusted, entries, now)
        if not gone:
            return self._trust(windows)
        unknown = sorted(set(gone) & failing)
        if unknown:  # holds per the ledger, fails, and this process never read it: nothing to put back
            self._pending = None
            return GuardVerdict(False, f"window(s) {', '.join(unknown)} hold per the ledger but do not validate: "
                                  "nothing acted on until they validate or their occurrence ends")
        pending = self._pending
        if pending is None or pending.identity != identity or now < pending.since:
            pending = self._pending = _Pending(identity, now)
        elif now - pending.since >= self.confirm_after:
            return self._trust(windows)
        kept = self._put_back(windows, gone, entries, now)
        return GuardVerdict(False, self._describe(gone, identity, windows, kept is not None),
                            None if kept is None else kept[0], () if kept is None else kept[1])

    def interrupted(self) -> None:
        """A read failed: the next read starts its confirmation over."""
        self._pending = None

    def _put_back(self, windows: Sequence[Window], gone: list[str], entries: Mapping[str, LedgerEntry],
                  now: datetime) -> tuple[list[Window], list[Window]] | None:
        """`windows` with the versions last acted on of the `gone` ones, and the read's versions
        of those it moves to another scope (held there meanwhile); None when that still takes
        something away (a window only the ledger knows)."""
        before = {w.name: w for w in self.trusted or ()}
        merged = [meanwhile(before[w.name], w) if w.name in gone and w.name in before else w for w in windows]
        moving = [w for w in windows if w.name in gone and w.name in before and moves(before[w.name], w)]
        names = {w.name for w in merged}
        merged.extend(before[name] for name in gone if name in before and name not in names)
        if vanished(merged, self.trusted, entries, now, moving):
            return None
        self.trusted = list(merged)
        return merged, moving

    def _trust(self, windows: Sequence[Window]) -> GuardVerdict:
        """Trust `windows` (a plain sequence copied: `Windows.of`)."""
        self.trusted = Windows.of(windows)
        self._pending = None
        return GuardVerdict(True, windows=self.trusted)

    def _describe(self, gone: list[str], identity: Identity, windows: Sequence[Window], kept: bool) -> str:
        shown = ", ".join(gone[:5]) + (f" and {len(gone) - 5} more" if len(gone) > 5 else "")
        state = "missing" if identity is None else ("without windows" if not windows else "changed")
        meanwhile = "they hold as they were" if kept else "no window is armed or retired"
        return (f"windows.toml {state}: window(s) {shown} gone or weakened; not acted on until the file stays the "
                f"same for {self.confirm_after.total_seconds():g}s over two reads (meanwhile {meanwhile}: an editor "
                f"may be saving it in place)")
