"""The scheduler's decisions, pure functions of their inputs and `now` (`scheduler` is the I/O
shell around them), so that a late, missed or repeated wake-up, a restart or an edit all converge.

`plan_scope`: what should stand at one scope, from its windows, ledger entries and one reading of
its sentinel: ONE hold the scheduler owns covering every occurrence that covers now, never a hold
it did not arm replaced, never an occurrence the operator released re-armed (docs/design.md,
"Level-triggered scheduling"). `FileGuard`: whether a read of `windows.toml` may weaken anything;
an editor saving in place can show any valid-looking part of the new content, so arming and
strengthening act at the next read and every weakening waits for the same file over two reads
(docs/design.md, "Edits of `windows.toml` must never free the fleet"; issues 20, 32, 45).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hermes_estop.model.durations import MAX_DURATION
from hermes_estop.model.errors import StoreError
from hermes_estop.model.hold import VACANT, Allow, Hold, HoldState, Reading
from hermes_estop.model.selector import holds_at_least, hull
from hermes_estop.windows.ledger import ARMED, CLOSED, ENDED, RELEASED, WITHDRAWN, LedgerEntry, entry_for
from hermes_estop.windows.model import MAX_REASON, WINDOWS_FILE, Occurrence, Window, occurrence_key, reason_of
from hermes_estop.windows.occurrences import covering, refusal
from hermes_estop.windows.schedule import Part, Schedules, Windows

__all__ = ["ARMED_BY_PREFIX", "CHAIN_LIMIT", "Arm", "Desired", "FileGuard", "GuardVerdict", "Retire", "ScopePlan",
           "Skip", "chain_end", "claims", "compose", "idle", "intersect_allow", "meanwhile", "plan_scope",
           "strengthens", "terms", "vanished"]

ARMED_BY_PREFIX = "window:"
#: at most this many future occurrences extend one deadline; the next start re-extends it
CHAIN_LIMIT = 256


@dataclass(frozen=True)
class Desired:
    """The hold the scheduler wants standing at a scope."""

    deadline: datetime
    allow: Allow
    reason: str
    armed_by: str
    window: Mapping[str, Any]


@dataclass(frozen=True)
class Arm:
    """Write `desired` at `scope` for `members`, fenced by `only_if` (VACANT, or {G} to change our
    own hold G); with `selector`, the scoped hold of that selector."""

    scope: str
    members: tuple[Occurrence, ...]
    desired: Desired
    only_if: Any
    replaces: str | None = None
    selector: Any = None


@dataclass(frozen=True)
class Retire:
    """Then close `entries` as ended."""

    scope: str
    generation: str
    entries: tuple[LedgerEntry, ...]


@dataclass(frozen=True)
class Skip:
    """`occurrence` is due but a hold the scheduler did not arm stands: record the skip."""

    scope: str
    occurrence: Occurrence
    standing: str
    standing_generation: str | None = None


@dataclass(frozen=True)
class ScopePlan:
    """What to do at one scope. `notes` are ledger changes that hold whatever the actions do."""

    scope: str
    covering: tuple[Occurrence, ...]
    actions: tuple[Arm | Retire | Skip, ...] = ()
    notes: tuple[LedgerEntry, ...] = ()


def intersect_allow(allows: Iterable[Allow]) -> Allow:
    """The allowlist admitting exactly whom every one of `allows` admits (deny wins)."""
    users: frozenset[str] | None = None
    profiles: frozenset[str] | None = None
    for allow in allows:
        if not allow.valid:
            return Allow()
        users = allow.user_ids if users is None else users & allow.user_ids
        if allow.profiles:
            profiles = allow.profiles if profiles is None else profiles & allow.profiles
    if not users or profiles == frozenset():  # no user, or no profile in common: nobody
        return Allow()
    return Allow(users, profiles or frozenset())


def claims(hold: Hold | None, scope: str) -> frozenset[str]:
    """The occurrence keys a hold body at `scope` says a window scheduler armed it for (`window`
    field, `armed_by = "window:..."`). An operator's re-arm carries neither, so it never claims."""
    if hold is None or not (hold.armed_by or "").startswith(ARMED_BY_PREFIX) or not hold.window:
        return frozenset()
    return frozenset(occurrence_key(scope, item["name"], item["occurrence"])
                     for item in [hold.window, *list(hold.window.get("covers") or [])]
                     if isinstance(item, Mapping) and isinstance(item.get("name"), str) and isinstance(item.get("occurrence"), str))


def chain_end(members: Sequence[Occurrence], windows: Windows, now: datetime,
              closed: frozenset[str] = frozenset(), limit: int = CHAIN_LIMIT) -> datetime:
    """When the scope may lift: the latest end among `members` and every later occurrence (not
    closed) armed before or exactly at the lift reached so far (half-open intervals: lifting at `b`
    to re-arm at `b` would leave a free instant); capped at `now + MAX_DURATION`. One walk in arm
    order, never rounds over every window: a scope held for a week by a thousand windows took a
    minute a pass that way (issue 24)."""
    end = max(o.end for o in members)
    seen = {o.key for o in members} | set(closed)
    horizon = now + MAX_DURATION
    armed = windows.timeline.armed_after(windows, now)
    chained = 0
    while chained < limit and end < horizon:
        occurrence = next(armed, None)
        if occurrence is None or occurrence.arm_at > end:
            break
        key = occurrence.key
        if key not in seen:
            seen.add(key)
            chained += 1
            end = max(end, occurrence.end)
    return min(end, horizon)


def terms(windows: Windows, name: str) -> tuple[str | None, Allow]:
    """Read off its table: a hold is composed without validating a `Window` in the middle of
    planning (issue 45). No such window: its name's default reason, and nobody allowed."""
    at = windows.position(name)
    if at is None:
        return None, Allow()
    try:
        shown = json.loads(windows.table(at))
        return shown.get("reason"), Allow.of(shown["allow"]["user_ids"], shown["allow"]["profiles"])
    except (ValueError, TypeError, KeyError) as exc:
        raise StoreError(f"window {name}: its table does not read ({exc})") from None


def compose(members: Sequence[Occurrence], windows: Windows, deadline: datetime, now: datetime) -> Desired:
    """Intersection of allowlists, their reasons (a member in its drain lead at `now`: "draining
    for <window>"); named after the earliest-starting member, `covers` lists them all."""
    ordered = sorted(members, key=lambda o: (o.start, o.window))
    primary = ordered[0]
    of = {name: terms(windows, name) for name in dict.fromkeys(o.window for o in ordered)}
    reason = "; ".join(dict.fromkeys(reason_of(o.window, of[o.window][0], o.reason, draining=o.draining(now))
                                     for o in ordered))
    if len(reason) > MAX_REASON:
        reason = reason[: MAX_REASON - 3].rstrip() + "..."
    body: dict[str, Any] = {"name": primary.window, "occurrence": primary.ident}
    if len(ordered) > 1:
        body["covers"] = [{"name": o.window, "occurrence": o.ident} for o in ordered]
    return Desired(deadline, intersect_allow(of[o.window][1] for o in ordered), reason,
                   f"{ARMED_BY_PREFIX}{primary.window}", body)


def _describe_standing(reading: Reading) -> str:
    if reading.state is HoldState.UNREADABLE:
        return f"an unreadable sentinel ({reading.problem})"
    hold = reading.hold
    if hold is None or hold.generation is None:
        return "a hand-written hold"
    return f"generation {hold.generation}" + (f" (armed by {hold.armed_by})" if hold.armed_by else "")


def idle(covered: Sequence[Occurrence], entries: Mapping[str, LedgerEntry]) -> bool:
    """Whether `plan_scope` has nothing to do at a scope whatever its sentinel holds (nothing
    covers now, nothing armed): then the scope is not read (issue 24: 1,000 profiles)."""
    return not covered and all(entry.state != ARMED for entry in entries.values())


def plan_scope(scope: str, now: datetime, windows: Windows, entries: Mapping[str, LedgerEntry],
               reading: Reading, *, covered: Sequence[Occurrence], recalled: Mapping[str, str] | None = None,
               selector: Any = None) -> ScopePlan:
    """From its enabled windows, its ledger entries and its sentinel as read at `now`. `covered`:
    the windows' occurrences covering `now`; `recalled`: key -> generation the audit trail says was
    armed for occurrences the ledger does not know (`ledger.recall`); `selector`: the plan is for
    the scoped hold of that selector (one lane of the scope)."""
    covering = tuple(sorted(covered))
    closed = frozenset(k for k, e in entries.items() if e.state in CLOSED)
    candidates = [o for o in covering if o.key not in closed]
    armed = {k: e for k, e in entries.items() if e.state == ARMED}
    ours = {e.generation for e in armed.values() if e.generation}
    hold, recalled = reading.hold, recalled or {}
    standing = hold.generation if hold is not None else None
    notes: list[LedgerEntry] = []
    if reading.active and standing is not None and standing not in ours:
        # the candidates the standing hold's body names (`claims`): the ledger missed them (a
        # crash between the arm and the ledger write)
        claimed = claims(hold, scope)
        notes = [entry_for(o, ARMED, now, standing, "adopted: the hold body names this occurrence")
                 for o in candidates if o.key in claimed]
        armed.update((e.key, e) for e in notes)
    # alive: our hold for them (`standing`) stands; fresh: to arm; the others' hold went away before the end
    # (released: never re-armed). One the ledger lacks but the audit trail says G armed (`recalled`) counts as armed as G.
    gone = f"replaced by {_describe_standing(reading)}" if reading.active else "released"
    alive: list[Occurrence] = []
    fresh: list[Occurrence] = []
    for o in candidates:
        entry = armed.get(o.key)
        if entry is None and o.key not in entries and o.key in recalled:
            generation = recalled[o.key]
            if reading.active and generation == standing:
                alive.append(o)
                notes.append(entry_for(o, ARMED, now, generation, "adopted: the audit trail says the window armed it"))
            else:
                notes.append(entry_for(o, RELEASED, now, generation,
                                       f"generation {generation} {gone} before the end (from the audit trail)"))
        elif entry is None:
            fresh.append(o)
        elif reading.active and entry.generation == standing:
            alive.append(o)
        else:
            notes.append(entry.moved(RELEASED, now, detail=f"generation {entry.generation} {gone} before the end"))
    keys = {o.key for o in candidates}
    # armed entries no longer candidates: ended when over; withdrawn (re-armed if the window is
    # back before the end) when their window went away
    closing = [e.moved(ENDED if e.end <= now else WITHDRAWN, now,
                       detail=None if e.end <= now else "its window was removed, disabled or moved")
               for k, e in armed.items() if k not in keys]
    ours.update(e.generation for e in notes if e.state == ARMED and e.generation)
    members = alive + fresh
    actions: tuple[Arm | Retire | Skip, ...] = ()
    if reading.active and standing not in ours:
        actions = tuple(Skip(scope, o, _describe_standing(reading), standing) for o in fresh)
    elif not members:  # retire the standing hold when it is ours, its closing entries with it
        if reading.present and standing is not None and standing in ours:
            actions = (Retire(scope, standing, tuple(e for e in closing if e.generation == standing)),)
            closing = [e for e in closing if e.generation != standing]
    else:
        deadline = chain_end(members, windows, now, closed)
        desired = compose(members, windows, deadline, now)
        if not reading.active:
            actions = (Arm(scope, tuple(members), desired, VACANT, selector=selector),)
        elif (hold is not None and hold.expires_at == desired.deadline and hold.allow == desired.allow
              and hold.reason == desired.reason):  # it stands: the fresh ones are noted as armed by it, last
            closing += [entry_for(o, ARMED, now, standing) for o in fresh]
        else:
            actions = (Arm(scope, tuple(members), desired, frozenset({standing}), standing, selector),)
    return ScopePlan(scope, covering, actions, tuple(notes + closing))


@dataclass(frozen=True)
class GuardVerdict:
    """`trusted`: the read is confirmed (or weakens nothing). `windows`: what to act on now (None:
    nothing). `reason`: what is unconfirmed. `moving`: the read's versions of windows it moves to
    another scope, held there beside `windows` (which hold the old versions at the old scopes).
    `unread`: the read's failing windows that hold per the ledger and of which this process never
    read a version (nothing to put back: the pass leaves their scopes as they are)."""

    trusted: bool
    reason: str | None = None
    windows: Windows | None = None
    moving: Sequence[Window] = ()
    unread: frozenset[str] = frozenset()


def strengthens(old: Window, new: Window) -> bool:
    """Whether `new` holds at least wherever, whatever and whomever `old` held: the same schedule,
    scope and reason (a torn save must not flip the reason refused users read), and only changes
    that add hold time, hold more work or refuse more people."""
    if not old.enabled:
        return True
    if (not new.enabled or new.scope != old.scope or (old.feed is None) != (new.feed is None)
            or not holds_at_least(new.selector, old.selector) or (new.drain or timedelta()) < (old.drain or timedelta())
            or intersect_allow((new.hold_allow, old.hold_allow)) != intersect_allow((new.hold_allow,))):
        return False
    if old.feed is not None:  # a calendar: its events are judged by what holds now (`vanished`)
        return True
    # `exclude_calendar`'s holidays are judged by what holds now (`_drops`, issue 45); the rest:
    # duration no shorter, bounds no narrower, exclusions no more
    if (new.cron, new.at, new.timezone, new.reason, new.exclude_calendar) != \
            (old.cron, old.at, old.timezone, old.reason, old.exclude_calendar) or new.duration < old.duration:
        return False
    if new.not_before is not None and (old.not_before is None or new.not_before > old.not_before):
        return False
    if new.not_after is not None and (old.not_after is None or new.not_after < old.not_after):
        return False
    return set(new.exclude) <= set(old.exclude) and new.exclude_cron in (None, old.exclude_cron)


def vanished(read: Windows, before: Windows | None,
             entries: Mapping[str, LedgerEntry], now: datetime, moving: Sequence[Window] = ()) -> list[str]:
    """Acted on before and missing or weakened, or holding per the ledger and not in it, enabled,
    on that scope (`moving`: versions held at another scope too)."""
    elsewhere = {w.name: w for w in moving}
    out: dict[str, None] = {}  # each name once, in the order found
    if before is not None and before is not read:
        for index in range(len(before)):  # the very row, or of an equal table: no row's `Window` built
            name, at = before.name(index), read.position(before.name(index))
            if at is not None and before.table(index) == read.table(at):
                continue
            old, new = before[index], None if at is None else read[at]
            if new is None or (new != old and not strengthens(old, new)):
                out[name] = None
    for entry in entries.values():
        if entry.state != ARMED or entry.end <= now:
            continue
        window = None if (at := read.position(entry.window)) is None else read[at]
        if window is not None and window.scope != entry.scope:  # moved: its version held at this scope, if any
            window = elsewhere.get(entry.window)
        if window is None or not window.enabled or window.scope != entry.scope or _drops(window, entry, now):
            out[entry.window] = None
    return list(out)


def _drops(window: Window, entry: LedgerEntry, now: datetime) -> bool:
    """No longer covering `now`, or ending earlier. A feed refused takes nothing away (a refusal is
    not an edit): the pass holds its window as it was."""
    if (window.feed is None and window._holidays is None) or refusal(window) is not None:  # noqa: SLF001
        return False
    return not any(o.key == entry.key and o.end >= entry.end for o in covering(window, now))


def meanwhile(old: Window, new: Window) -> Window:
    """What an unconfirmed read holds for a window it weakens: the version last acted on, with
    what the read adds to its selector (`selector.hull`): a widening in the same edit acts at once."""
    if not (new.enabled and old.enabled and new.scope == old.scope) or new.selector == old.selector:
        return old
    both = hull(old.selector, new.selector)
    if both == old.selector:
        return old
    return old.model_copy(update={"only": sorted(both.components) if both else [],
                                  "jobs": list(both.jobs) if both else []})


class FileGuard:
    """Remembers the windows last acted on and the unconfirmed read (per scheduler process)."""

    def __init__(self, confirm_after: timedelta, schedules: Schedules | None = None) -> None:
        self.confirm_after = confirm_after
        self.schedules = schedules or Schedules(Path(WINDOWS_FILE))
        #: the windows the scheduler last acted on (confirmed, or with a weakening put back)
        self.trusted: Windows | None = None
        #: the unconfirmed read's identity (the file's and its feeds') and when it was first read
        self._pending: tuple[object, datetime] | None = None
        #: the identity of the file last acted on whole (a read of the same file whose feeds
        #: changed is described as that, not as an edit of the file)
        self._file: object = None

    def judge(self, identity: object, windows: Windows, entries: Mapping[str, LedgerEntry],
              now: datetime, failing: frozenset[str] = frozenset(), feeds: object = ()) -> GuardVerdict:
        """`failing`: the read's tables that do not validate, held as last acted on."""
        before = self.trusted
        if failing and before is not None and (missing := {name for name in failing if windows.position(name) is None}):
            # the last version acted on of each, its row as it is (no other row built)
            windows = self.schedules.compose([*map(windows.part, range(len(windows))),
                                              *(before.part(i) for i in range(len(before)) if before.name(i) in missing)],
                                             now)
        gone = vanished(windows, before, entries, now)
        # `GuardVerdict.unread`: no version to put back, nor a weakening to confirm (an edit that fixes it is read as new)
        unread = frozenset(gone) & failing
        gone = [name for name in gone if name not in unread]
        pending = self._pending
        if not gone or (pending is not None and pending[0] == (identity, feeds)
                        and now - pending[1] >= self.confirm_after):  # weakens nothing, or confirmed
            self.trusted = windows
            self._pending, self._file = None, identity
            return GuardVerdict(True, windows=windows, unread=unread)
        if pending is None or pending[0] != (identity, feeds) or now < pending[1]:
            self._pending = ((identity, feeds), now)
        kept, moving = self._put_back(windows, gone, entries, now, unread)
        shown = ", ".join(gone[:5]) + (f" and {len(gone) - 5} more" if len(gone) > 5 else "")
        held = "they hold as they were" if kept is not None else "no window is armed or retired"
        state = "missing" if identity is None else "without windows" if not windows else "changed"
        what, read = (("the calendar feeds of windows.toml changed", "they stay") if feeds and identity == self._file
                      else (f"windows.toml {state}", "the file stays"))
        reason = (f"{what}: window(s) {shown} gone or weakened; not acted on until {read} the same for "
                  f"{self.confirm_after.total_seconds():g}s over two reads (meanwhile {held}: an editor may be "
                  "saving it in place)")
        return GuardVerdict(False, reason, kept, moving, unread)

    def interrupted(self) -> None:
        """A read failed: the next read starts its confirmation over."""
        self._pending = None

    def _put_back(self, windows: Windows, gone: list[str], entries: Mapping[str, LedgerEntry],
                  now: datetime, unread: frozenset[str]) -> tuple[Windows | None, list[Window]]:
        """`windows` with the `gone` ones put back (`meanwhile`), and the read's versions of those it
        moves to another scope; None when that still takes something away (or nothing was acted on
        before: nothing to put back). Only the gone ones are built."""
        before = self.trusted
        if before is None:
            return None, []
        parts: list[Part] = []
        moving: list[Window] = []
        for index in range(len(windows)):
            name = windows.name(index)
            at = before.position(name) if name in gone else None
            if at is None:
                parts.append(windows.part(index))
                continue
            old, new = before[at], windows[index]
            both = meanwhile(old, new)
            parts.append(before.part(at) if both is old else Part.of(both))
            if old.enabled and new.enabled and old.scope != new.scope:  # moved to another scope
                moving.append(new)
        parts.extend(before.part(at) for name in gone
                     if windows.position(name) is None and (at := before.position(name)) is not None)
        merged = self.schedules.compose(parts, now)
        if set(vanished(merged, before, entries, now, moving)) - unread:
            return None, []
        self.trusted = merged
        return merged, moving
