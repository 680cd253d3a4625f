"""What a notification on the holds channel says, and which ones a listener may apply without
re-reading the table.

Why: with a hundred hosts on one database, the re-read every listener makes on every change is
most of what a new hold costs (a query per listener on the server, a round trip and its
wake-ups on every host, all on the same few cores), and it is what puts the last host's
observation past the target. So the trigger (schema version 3) puts the changed row in the
notification when it fits: the transaction's id, the scope, and the new body and revision, or
that the row was deleted.

Only ARMING is applied from a notice (docs/design.md §8a: weakening needs more certainty than
arming): a notice that creates the row of a scope the listener has no row for. Nothing can hold
less than "no row", so applying it can only add a hold (an unreadable body holds too). Every
other notice — a change or a deletion of a row the listener has, a TRUNCATE, a body too large
for a notification, the scope-only payload of schema versions 1 and 2, anything that does not
parse — makes the listener re-read the whole table as every notification did before, so a hold
is only ever weakened or released by a committed row the listener read itself.

Notifications reach a listener in commit order, but one may arrive AFTER a full re-read whose
snapshot already includes its transaction (the server delivers them when the session is next
idle): an engage notified after a re-read that already shows its release. Applying it would put
back a released hold. So every full re-read records its snapshot (`txid_current_snapshot()`)
and a notice whose transaction is visible there is skipped (`visible` is PostgreSQL's own rule);
a notice not visible there committed after the re-read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TypeVar

__all__ = ["Notice", "TxSnapshot", "parse_notice", "parse_snapshot", "visible", "apply_arming"]

R = TypeVar("R")


class TxSnapshot:
    """A transaction snapshot as `txid_current_snapshot()::text` prints it: `xmin:xmax:xip,...`."""

    __slots__ = ("running", "xmax", "xmin")

    def __init__(self, xmin: int, xmax: int, running: frozenset[int]) -> None:
        self.xmin = xmin
        self.xmax = xmax
        self.running = running


class Notice:
    """One row change: transaction `xid`, `scope`, and the new `body` and `revision` (both None
    for a deletion)."""

    __slots__ = ("body", "revision", "scope", "xid")

    def __init__(self, xid: int, scope: str, body: bytes | None, revision: int | None) -> None:
        self.xid = xid
        self.scope = scope
        self.body = body
        self.revision = revision


def parse_snapshot(text: str) -> TxSnapshot | None:
    """The snapshot `text` describes; None when it does not parse (no notice is applied then)."""
    try:
        xmin, xmax, running = text.split(":")
        return TxSnapshot(int(xmin), int(xmax), frozenset(int(x) for x in running.split(",") if x))
    except (AttributeError, ValueError):
        return None


def visible(xid: int, snapshot: TxSnapshot) -> bool:
    """Whether committed transaction `xid` is visible in `snapshot` (PostgreSQL's
    `XidInMVCCSnapshot`, negated): before `xmin`, or before `xmax` and not running then."""
    if xid < snapshot.xmin:
        return True
    if xid >= snapshot.xmax:
        return False
    return xid not in snapshot.running


def parse_notice(payload: str) -> Notice | None:
    """The change a notification carries; None when it carries none (a full re-read is needed)."""
    try:
        doc = json.loads(payload)
        if not isinstance(doc, dict) or not isinstance(doc.get("s"), str) or type(doc.get("x")) is not int:
            return None
        if doc.get("d") is True:
            return Notice(doc["x"], doc["s"], None, None)
        body, revision = doc.get("b"), doc.get("r")
        if not isinstance(body, str) or type(revision) is not int:
            return None
        return Notice(doc["x"], doc["s"], bytes.fromhex(body), revision)
    except (ValueError, RecursionError):  # json.JSONDecodeError and a bad hex string alike
        return None


def apply_arming(rows: Mapping[str, R], payloads: list[str], snapshot: TxSnapshot | None,
                 make_row: Callable[[bytes, int], R]) -> Mapping[str, R] | None:
    """`rows` with the rows `payloads` (in delivery order) create applied, skipping the notices
    the re-read of `snapshot` already shows; the same mapping object when every one was skipped.
    None — re-read the table, install nothing from these notices — when one of them does
    anything but create the row of a scope `rows` has none of (a change, a deletion, no change
    at all), or when there was no re-read yet on this connection. `rows` is never changed."""
    if snapshot is None:
        return None
    changed: dict[str, R] | None = None
    for payload in payloads:
        notice = parse_notice(payload)
        if notice is None:
            return None
        if visible(notice.xid, snapshot):
            continue
        current = rows if changed is None else changed
        if notice.body is None or notice.revision is None or notice.scope in current:
            return None  # a deletion or a change of a row we have: only a re-read may weaken
        if changed is None:
            changed = dict(rows)
        changed[notice.scope] = make_row(notice.body, notice.revision)
    return changed if changed is not None else rows
