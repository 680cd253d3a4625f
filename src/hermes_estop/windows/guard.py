"""Whether a read of `windows.toml` may be acted on (issue 9 item 1).

A hand editor that re-saves the file in place (`open(path, 'w')`, `cat src > windows.toml`)
truncates it first: a reader can see it empty, or a valid prefix of the new content (fewer
windows, or the last window without its trailing optional fields). Acting on such a read would
retire the hold of a window that is still there: the fleet freed mid-window.

So a read that takes something away is not trusted until it is confirmed:

- "takes something away" = a window of the last trusted read is missing or different, or a
  window that the ledger says holds right now (an `armed` occurrence not yet ended) is not in the
  read, enabled, on that scope. The second rule covers a fresh process, which has no trusted
  read yet. A read that only adds windows is trusted at once.
- "confirmed" = the same file (same identity: inode, size, mtime, ctime) was seen by consecutive
  reads spanning at least `confirm_after`. Any other read in between starts over, so the
  momentary states of an editor's save (each with its own mtime) never confirm.
- A read that looks like a save caught midway (the file missing, a strict prefix of the last
  trusted bytes, or without any window in the same file as the last trusted read: same device
  and inode, the first two fields of the identity) needs the longer `torn_after`: the writer can stall between
  its truncate and its write (a journal commit on a busy disk, seen in CI to exceed one second),
  and during that stall the torn file is the same file from read to read.

Until then the scheduler takes no decision at all (as for a file that does not validate):
standing holds stay, their deadmen still lift them at the window's end. Pure: the caller passes
`now` (its injected clock).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from .ledger import ARMED, LedgerEntry
from .model import Window

__all__ = ["FileGuard", "Verdict", "vanished"]

Identity = tuple[int, ...] | None


@dataclass(frozen=True)
class Verdict:
    """`trusted`: act on this read. Otherwise `reason` says what is unconfirmed."""

    trusted: bool
    reason: str | None = None


def vanished(windows: Sequence[Window], previous: Sequence[Window] | None,
             entries: Mapping[str, LedgerEntry], now: datetime) -> list[str]:
    """What the read `windows` takes away: names of previously trusted windows missing or
    changed, and of windows holding per the ledger that are not in it (enabled, same scope)."""
    current = {w.name: w for w in windows}
    out: list[str] = []
    for old in previous or ():
        new = current.get(old.name)
        if new is not old and new != old and old.name not in out:
            out.append(old.name)
    for entry in entries.values():
        if entry.state != ARMED or entry.end <= now:
            continue
        window = current.get(entry.window)
        if (window is None or not window.enabled or window.scope != entry.scope) and entry.window not in out:
            out.append(entry.window)
    return out


@dataclass
class _Pending:
    identity: Identity
    since: datetime
    wait: timedelta


class FileGuard:
    """Remembers the last trusted read and the unconfirmed one (per scheduler process)."""

    def __init__(self, confirm_after: timedelta, torn_after: timedelta | None = None) -> None:
        self.confirm_after = confirm_after
        self.torn_after = max(confirm_after, torn_after or confirm_after)
        self.trusted: list[Window] | None = None
        self._trusted_raw: bytes | None = None
        self._trusted_identity: Identity = None
        self._pending: _Pending | None = None

    @property
    def pending(self) -> bool:
        return self._pending is not None

    @property
    def pending_wait(self) -> timedelta:
        """How long the unconfirmed read must stay the same file (the confirmation period)."""
        pending = self._pending
        return pending.wait if pending is not None else self.confirm_after

    def judge(self, identity: Identity, windows: list[Window], entries: Mapping[str, LedgerEntry],
              now: datetime, raw: bytes | None = None) -> Verdict:
        """Whether to act on `windows` (read as `raw` from the file with `identity`) at `now`."""
        gone = vanished(windows, self.trusted, entries, now)
        if not gone:
            return self._trust(windows, raw, identity)
        pending = self._pending
        if pending is None or pending.identity != identity or now < pending.since:
            wait = self.torn_after if self._looks_torn(identity, windows, raw) else self.confirm_after
            pending = self._pending = _Pending(identity, now, wait)
            return Verdict(False, self._describe(gone, identity, windows, wait))
        if now - pending.since >= pending.wait:
            return self._trust(windows, raw, identity)
        return Verdict(False, self._describe(gone, identity, windows, pending.wait))

    def interrupted(self) -> None:
        """A read failed: the next read starts its confirmation over."""
        self._pending = None

    def _looks_torn(self, identity: Identity, windows: list[Window], raw: bytes | None) -> bool:
        """Missing, a strict prefix of the last trusted bytes, or without windows in the file
        last trusted (truncated in place). A complete file put in its place by a rename, as
        `hermes windows remove` writes it, is a deliberate edit even when it holds no window."""
        if identity is None:
            return True
        trusted = self._trusted_raw
        if raw is not None and trusted is not None and len(raw) < len(trusted) and trusted.startswith(raw):
            return True
        before = self._trusted_identity
        return not windows and (before is None or identity[:2] == before[:2])

    def _trust(self, windows: list[Window], raw: bytes | None, identity: Identity) -> Verdict:
        self.trusted = list(windows)
        self._trusted_raw = raw
        self._trusted_identity = identity
        self._pending = None
        return Verdict(True)

    def _describe(self, gone: list[str], identity: Identity, windows: list[Window], wait: timedelta) -> str:
        shown = ", ".join(gone[:5]) + (f" and {len(gone) - 5} more" if len(gone) > 5 else "")
        state = "missing" if identity is None else ("without windows" if not windows else "changed")
        wait_text = f"{wait.total_seconds():g}s"
        return (f"windows.toml {state}: window(s) {shown} gone or changed; not acted on until the file "
                f"stays the same for {wait_text} (an editor may be saving it in place)")
