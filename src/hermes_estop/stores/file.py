"""The sentinel store: the embedded default. A hold is the file `ESTOP` in its location's directory.

Reading (docs/design.md §3) takes no lock and never opens anything that could block: the entry is
`lstat`ed first, only a regular file is opened, and with `O_NONBLOCK`. The no-hold hot path costs
one `lstat` per location. A parsed body is cached on the file's identity once the file has
settled, so an active hold costs a `stat` per check, not a read and a parse.

Writing (docs/design.md §5) holds an exclusive `flock` on `.ESTOP.lock` beside the sentinel for the
read-decide-write sequence only. A new body goes to a temporary file in the same directory, is
fsync'ed, renamed over `ESTOP`, and the directory is fsync'ed: a reader sees the old body or the
new one, never a partial one, and a re-arm never makes the sentinel disappear.

`hermes check` imports this module on every run: what only a write or an odd file needs (the
locking and atomic-write helpers of `fsutil`, the audit log) is imported where it is used.

Reads and writes stay in one module (it is longer than most) because they share one thing that
must not drift apart: the cache of parsed bodies and the file identity that invalidates it. A
write replaces the file a cached read is keyed on, and the fence a write checks is the identity
a read reported.
"""

from __future__ import annotations

import os
import stat
import time
from datetime import datetime
from pathlib import Path

from hermes_estop.model.errors import StoreError
from hermes_estop.model.hold import (
    MAX_BODY_BYTES,
    Cause,
    EngageRequest,
    Fence,
    Hold,
    HoldState,
    Prepared,
    Reading,
    Sentinel,
    encode_sentinel,
    parse_sentinel,
    prepare,
)
from hermes_estop.model.homes import SENTINEL_NAME, Location
from hermes_estop.model.timeutil import WallClockGuard
from hermes_estop.stores.base import (
    FleetStateInRoot,
    HoldStore,
    SaidOnce,
    expiry_stamp,
    fence_matches,
    not_current,
    planned_engage,
    released_reading,
    scoped_detail,
    without,
)

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `hermes check` imports this module
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from contextlib import AbstractContextManager

    from hermes_estop.model.audit_event import AuditEntry, AuditEvent
    from hermes_estop.stores.audit_log import AuditLog
    from hermes_estop.stores.base import Judge

__all__ = ["FileStore", "LOCK_NAME"]


LOCK_NAME = f".{SENTINEL_NAME}.lock"
# A body is cached on its stat identity only once its timestamps are this much older than the
# read: file timestamps come from a coarse clock, so two writes inside one tick can share them.
_SETTLED_NS = 100_000_000
_VANISH_RETRIES = 5
_OPEN_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
#: the audit lines fsync'ed before the body they name is renamed in (docs/design.md §5)
_DURABLE_EVENTS = ("engage", "rearm", "void")


def _file_id(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class _Unreadable(Exception):
    """A sentinel that is not a body to parse: not a regular file, or not readable at all."""

    def __init__(self, cause: Cause, problem: str) -> None:
        super().__init__(problem)
        self.cause = cause
        self.problem = problem


def _load(path: str) -> tuple[Sentinel | str, tuple[int, ...] | None, tuple[int, ...] | None]:
    """(parsed body or the reason its bytes are not one, file identity, cache key). Raises
    `FileNotFoundError` when the sentinel was removed between the `lstat` and the open, and
    `_Unreadable` when it is not a regular file or cannot be opened or read."""
    try:
        fd = os.open(path, _OPEN_READ)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _Unreadable(Cause.CANNOT_READ, f"cannot open: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            from hermes_estop.system.fsread import describe_mode

            raise _Unreadable(Cause.NOT_A_FILE, describe_mode(st.st_mode))
        if st.st_size > MAX_BODY_BYTES:
            return f"body larger than {MAX_BODY_BYTES} bytes", _file_id(st), None
        chunks = []
        total = 0
        while total <= MAX_BODY_BYTES:
            chunk = os.read(fd, MAX_BODY_BYTES + 1 - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise _Unreadable(Cause.CANNOT_READ, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    try:
        parsed: Sentinel | str = parse_sentinel(raw)
    except ValueError as exc:
        parsed = str(exc)
    settled = time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _SETTLED_NS
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) if settled else None
    return parsed, _file_id(st), key


#: (location, sentinel path, its ABSENT reading) per candidate, and the all-absent result
_Plan = tuple[tuple[tuple[Location, str, Reading], ...], tuple[Reading, ...]]


class FileStore(FleetStateInRoot, HoldStore):
    """Holds as sentinel files; the audit trail as JSONL in the fleet root `root`."""

    name = "file"
    root: Path  # always set: the fleet root the sentinels and the audit trail live in

    def __init__(self, root: Path, *, interleave: Callable[[str], None] | None = None,
                 wall_clock: WallClockGuard | None = None) -> None:
        super().__init__()
        self.root = Path(root)
        self._wall_clock = wall_clock if wall_clock is not None else WallClockGuard()
        self._refusals = SaidOnce()
        self._audit_log: AuditLog | None = None
        self.interleave = interleave
        self._cache: dict[str, tuple[tuple[int, ...], Prepared]] = {}
        # Per location tuple (an Estop passes the same one on every check): each location with
        # its sentinel path and its ABSENT reading, and the all-absent result, so the no-hold hot
        # path is one `lstat` per location and returns a prebuilt tuple (no Location hashing).
        self._plans: dict[int, tuple[Sequence[Location], _Plan]] = {}

    @property
    def audit_log(self) -> AuditLog:
        """The audit trail in the fleet root, opened on first use (a read never needs it)."""
        if self._audit_log is None:
            from hermes_estop.stores.audit_log import AuditLog

            self._audit_log = AuditLog(self.root)
        return self._audit_log

    # -- reading -----------------------------------------------------------------------------

    def _plan(self, locations: Sequence[Location]) -> _Plan:
        entry = self._plans.get(id(locations))
        if entry is None or entry[0] is not locations:
            if len(self._plans) > 256:
                self._plans.clear()
            steps = tuple((loc, str(loc.sentinel), Reading(loc, HoldState.ABSENT)) for loc in locations)
            entry = self._plans[id(locations)] = (locations, (steps, tuple(step[2] for step in steps)))
        return entry[1]

    def read(self, locations: Sequence[Location], now: datetime) -> tuple[Reading, ...]:
        steps, all_absent = self._plan(locations)
        found: list[Reading] | None = None
        for index, (location, path, absent) in enumerate(steps):
            try:
                first: os.stat_result | None = os.lstat(path)
            except FileNotFoundError:
                if found is not None:
                    found.append(absent)
                continue
            except OSError:
                first = None  # _read_one stats again and reports the error
            if found is None:
                found = list(all_absent[:index])
            if first is not None:  # a settled body already parsed for this very file: no open, no parse
                entry = self._cache.get(path)
                if entry is not None and entry[0] == (first.st_dev, first.st_ino, first.st_size, first.st_mtime_ns,
                                                      first.st_ctime_ns):
                    found.append(entry[1].at(now))
                    continue
            found.append(self._read_one(location, path, absent, now, True, first))
        return all_absent if found is None else tuple(found)

    def _read_fresh(self, location: Location, now: datetime) -> Reading:
        """The reading at `location`, from the file itself (never the cache): for writers."""
        return self._read_one(location, str(location.sentinel), Reading(location, HoldState.ABSENT), now, False)

    def _read_one(self, location: Location, path: str, absent: Reading, now: datetime, cached: bool,
                  first: os.stat_result | None = None) -> Reading:
        try:
            for _ in range(_VANISH_RETRIES):
                try:
                    return self._read_path(location, path, absent, now, cached, first)
                except FileNotFoundError:
                    first = None
                    continue  # retired or released between the lstat and the open: look again
            return self._unreadable(location, "the sentinel keeps vanishing while being read", Cause.CANNOT_READ)
        except _Unreadable as exc:
            return self._unreadable(location, exc.problem, exc.cause)
        except OSError as exc:
            return self._unreadable(location, f"cannot stat: {exc.strerror or exc}", Cause.CANNOT_READ)
        except Exception as exc:  # reading never raises into a consumer
            return self._unreadable(location, f"unexpected {type(exc).__name__}: {exc}", Cause.CANNOT_READ)

    def _read_path(self, location: Location, path: str, absent: Reading, now: datetime, cached: bool,
                   first: os.stat_result | None) -> Reading:
        if first is not None:
            st = first
        else:
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                return absent
        if stat.S_ISLNK(st.st_mode):
            try:
                st = os.stat(path)
            except OSError as exc:
                return self._unreadable(location, f"symlink that cannot be followed: {exc.strerror or exc}",
                                        Cause.NOT_A_FILE)
        if not stat.S_ISREG(st.st_mode):
            from hermes_estop.system.fsread import describe_mode

            return self._unreadable(location, describe_mode(st.st_mode), Cause.NOT_A_FILE)
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        entry = self._cache.get(path) if cached else None
        if entry is not None and entry[0] == key:
            return entry[1].at(now)
        parsed, file_id, cache_key = _load(path)
        prepared = prepare(location, parsed, file_id)
        if cache_key is not None:
            self._cache[path] = (cache_key, prepared)
        return prepared.at(now)

    @staticmethod
    def _unreadable(location: Location, problem: str, cause: Cause) -> Reading:
        return Reading(location, HoldState.UNREADABLE, None, Fence(None, None), problem, cause)

    def where(self, location: Location) -> str:
        return str(location.sentinel)

    # -- writing -----------------------------------------------------------------------------

    def _locked(self, location: Location, arming: bool = False) -> AbstractContextManager[None]:
        """`.ESTOP.lock` held for one read-decide-write sequence (contextlib is a write's import)."""
        from contextlib import contextmanager

        return contextmanager(self._holding_lock)(location, arming)

    def _holding_lock(self, location: Location, arming: bool = False) -> Iterator[None]:
        """With `arming`, an audit trail that cannot be written does not refuse the write (a stop
        always stops; the failed append is reported by `_audit`); any other write is refused."""
        from hermes_estop.system.fsutil import LOCK_TIMEOUT, exclusive_lock, sweep_temporaries

        with exclusive_lock(location.path / LOCK_NAME, LOCK_TIMEOUT):
            if not arming:
                self.audit_log.check_writable()
            sweep_temporaries(location.sentinel)
            yield

    def _write(self, location: Location, body: bytes) -> None:
        from hermes_estop.system.fsutil import atomic_write

        location.path.mkdir(parents=True, exist_ok=True)
        atomic_write(location.sentinel, body, before_rename=lambda: self.step("write:before-rename"))

    def _remove(self, location: Location) -> None:
        """Unlink without a directory fsync: a removal lost to a crash brings back a hold that
        was released or expired, which fails safe (held) or is inert (still expired)."""
        try:
            os.unlink(location.sentinel)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreError(f"cannot remove {location.sentinel}: {exc.strerror or exc}") from None

    def engage(self, location: Location, request: EngageRequest, now: datetime, actor: str,
               judge: Judge | None = None) -> Hold:
        """The audit line naming the new generation is appended and fsynced BEFORE the body is
        renamed in (docs/design.md §5): a writer killed at any instruction never leaves a
        generation standing that the trail does not name. A line whose write then failed is
        followed by a `void` line; one whose writer died before the rename names a generation
        that never stood, which is harmless (`history` shows the line as written).

        Every hold of a location (the full one and the scoped ones) lives in the one body, so one
        lock, one fence check and one atomic rename cover them all (docs/design.md, scoped holds)."""
        with self._locked(location, arming=True):
            standing = self._read_fresh(location, now)
            arming = planned_engage(location, standing, request, now)
            if judge is not None:
                judge(standing, arming.sentinel, self._wall_clock.trusted()[0])
            for expired in arming.lifted:
                self._audit_expiry(location, expired, actor, now)
            hold = arming.hold
            self._audit(arming.event, location, hold.generation, actor, hold.reason, hold.expires_at, now,
                        detail=scoped_detail(hold))
            self.step("engage:audited")
            try:
                self._write_sentinel(location, arming.sentinel, now)
            except StoreError as exc:
                self._audit("void", location, hold.generation, actor, hold.reason, hold.expires_at, now,
                            detail=f"never written: {exc}")
                raise
        return hold

    def _write_sentinel(self, location: Location, sentinel: Sentinel, now: datetime) -> None:
        body = encode_sentinel(sentinel, now)
        if body is None:
            self._remove(location)
        else:
            self._write(location, body)

    def retire(self, location: Location, fence: Fence, now: datetime, actor: str, event: str = "retire",
               judge: Judge | None = None, detail: str | None = None) -> bool:
        with self._locked(location):
            return self._retire_locked(location, fence, now, actor, event, judge, detail)

    def _retire_locked(self, location: Location, fence: Fence, now: datetime, actor: str, event: str,
                       judge: Judge | None = None, detail: str | None = None) -> bool:
        standing = self._read_fresh(location, now)
        candidates = (standing, *standing.scoped)
        removed = next((reading for reading in candidates if fence_matches(reading, fence)), None)
        if removed is None:
            return False
        stamp = now
        if event == "expire":
            confirmed = self._expiry_confirmed(location, removed, now)
            if confirmed is None:
                return False
            stamp = confirmed
        if judge is not None:
            judge(standing, without(standing, removed), self._wall_clock.trusted()[0])
        self.step("retire:before-unlink")
        self._drop(location, standing, removed, now)
        self._audit_removal(event, location, removed, fence.describe(), actor, stamp, detail)
        return True

    def _expiry_confirmed(self, location: Location, expired: Reading, now: datetime) -> datetime | None:
        """The stamp of the `expire` line of `expired` (`base.expiry_stamp`), or None, with one
        WARNING line per hold, when the wall clock as the monotonic clock confirms it says the
        deadman is still ahead: whatever clock `now` came from, it decides only for itself."""
        trusted, ahead = self._wall_clock.trusted()
        stamp = expiry_stamp(expired, now, trusted)
        if stamp is None:
            self._refused_expiry(location, expired, trusted, ahead)
        return stamp

    def _refused_expiry(self, location: Location, expired: Reading, trusted: datetime, ahead: float) -> None:
        import logging

        from hermes_estop.model.timeutil import format_instant

        key = (location.key, expired.fence or Fence())
        if not self._refusals.first(key):
            return
        hold = expired.hold
        why = (f"the wall clock jumped {ahead:.0f}s ahead of what the monotonic clock confirms"
               if ahead else f"this host's clock says {format_instant(trusted)}")
        logging.getLogger("hermes_estop").warning(
            "not retiring the hold at %s (generation %s): its deadman %s has not passed by the store's clock (%s); "
            "retried when it has", location.describe(), expired.fence.describe() if expired.fence else "?",
            format_instant(hold.expires_at) if hold is not None else "?", why)

    def _drop(self, location: Location, standing: Reading, removed: Reading, now: datetime) -> None:
        """Remove one hold of the location's body: the file itself when nothing else stands
        (or the body is unreadable), else the body rewritten without it."""
        self._write_sentinel(location, without(standing, removed), now)

    def _audit_removal(self, event: str, location: Location, removed: Reading, generation: str | None, actor: str,
                       now: datetime, why: str | None = None) -> None:
        hold = removed.hold
        detail = "; ".join(filter(None, (scoped_detail(hold), why))) or None
        self._audit(event, location, generation, actor, hold.reason if hold else None,
                    hold.expires_at if hold else None, now, detail=detail)

    def _audit_expiry(self, location: Location, expired: Reading, actor: str, now: datetime) -> None:
        """A write that replaces an expired hold nobody retired yet records its lift first, so
        the trail shows every engagement's end whichever process got there first; never stamped
        before its deadline by the store's clock (`base.expiry_stamp`)."""
        trusted, _ahead = self._wall_clock.trusted()
        hold = expired.hold
        stamp = expiry_stamp(expired, now, trusted) or (hold.expires_at if hold and hold.expires_at else now)
        self._audit_removal("expire", location, expired, expired.fence.describe() if expired.fence else None,
                            actor, stamp)

    def release(self, location: Location, generation: str | None, now: datetime, actor: str,
                judge: Judge | None = None) -> Reading | None:
        """A plain release lifts the full hold and leaves the scoped holds standing; with
        `generation`, the full or scoped hold carrying it."""
        with self._locked(location):
            standing = self._read_fresh(location, now)
            removed = released_reading(standing, generation)
            if removed is None:
                if generation is not None:
                    current = standing if standing.state is not HoldState.ABSENT else None
                    raise not_current(location, generation, current)
                return None
            if judge is not None:
                judge(standing, without(standing, removed), self._wall_clock.trusted()[0])
            self._drop(location, standing, removed, now)
            self._audit_removal("release", location, removed, removed.fence.describe() if removed.fence else None,
                                actor, now)
        return removed

    # -- audit -------------------------------------------------------------------------------

    def _audit(self, event: str, location: Location, generation: str | None, actor: str,
               reason: str | None, deadline: datetime | None, now: datetime, detail: str | None = None) -> None:
        """A failure to audit is never a reason not to stop: it is counted and remembered
        (`audit_failures`, `last_audit_failure`: stderr of `hermes pause`, `hermes status`, the
        metrics) and logged, never raised."""
        from hermes_estop.model.audit_event import AuditEvent

        try:
            self.append_audit(AuditEvent(now, event, location.scope, generation, actor, reason, deadline, detail),
                              sync=event in _DURABLE_EVENTS)
        except StoreError as exc:
            import logging  # only here: the read path never imports logging

            self.note_audit_failure(str(exc))
            logging.getLogger("hermes_estop").warning("%s", exc)

    def append_audit(self, event: AuditEvent, sync: bool = True) -> None:
        """`sync=False` for the line of a removal (`AuditLog.append`)."""
        try:
            self.audit_log.append(event, sync=sync)
        except OSError as exc:
            raise StoreError(f"cannot append to the audit log {self.audit_log.path}: {exc.strerror or exc}") from None

    def history(self, limit: int | None = None) -> list[AuditEvent]:
        return self.audit_log.read(limit)

    def audit_problem(self) -> str | None:
        try:
            self.audit_log.check_writable()
        except StoreError as exc:
            return str(exc)
        return None

    def history_counted(self, limit: int | None = None, since: datetime | None = None) -> tuple[list[AuditEvent], int]:
        return self.audit_log.read_counted(limit, since)

    def audit_after(self, position: int, limit: int) -> list[AuditEntry]:
        return self.audit_log.read_after(position, limit)

    def audit_head(self) -> int:
        return self.audit_log.head()

    def describe(self) -> dict[str, object]:
        return {"backend": self.name, "root": str(self.root), "audit_log": str(self.audit_log.path)}
