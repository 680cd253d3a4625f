"""The file trail: the audit trail of a file store, one JSON line per event in the fleet root
(`AuditLog`), and its rotated files (`Trail`); the PostgreSQL trail is `pg_audit`.

The file form is append-only JSONL in the fleet root; each event is a single `write(2)` on an
`O_APPEND` descriptor, so concurrent writers never interleave inside a line.

Appenders write `estop-audit.jsonl`. Once it reaches the configured size it is renamed to
`estop-audit.jsonl.<seq>`, its sequence number (larger is newer; the trail before any rotation is
file 0), and the next append starts a new file: a rotation is one rename, never a copy. The file
being written is number `1 + the newest rotated one` (0 when none is), so a reader knows which
file a descriptor is without a header line in it.

A position is `seq << 40 | byte offset`: a cursor saved before rotation existed is an offset in
file 0, which is the same line after file 0 is rotated.

Appenders hold `.estop-audit.lock` shared from the open to the write; a rotation holds it
exclusively. So a rotated file never grows again, and a reader that moved past its end misses
nothing. The lock is never waited for long: a rotation is a rename.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path

from hermes_estop.model.audit_event import AuditEntry, AuditEvent
from hermes_estop.model.errors import InvalidArgument, StoreError
from hermes_estop.model.text import printable
from hermes_estop.system.fsread import read_config
from hermes_estop.system.fsutil import (
    NotRegularFile,
    describe_mode,
    exclusive_lock,
    fsync_dir,
    open_regular,
    open_shared_file,
    shared_lock,
)

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `hermes history` imports this module
if TYPE_CHECKING:
    from collections.abc import Generator, Iterator, Mapping
    from datetime import datetime

__all__ = ["AUDIT_FILE", "AUDIT_KEEP", "AUDIT_MAX_BYTES", "ROTATE_LOCK", "SEQ_SHIFT", "AuditLog", "Trail", "audit_rotation",
           "audit_table", "decode", "encode", "lines_backward", "parse_line"]

AUDIT_FILE = "estop-audit.jsonl"
#: at most this many bytes of the file trail are read per `read_after` call
_CHUNK = 256 * 1024
#: the trail is rotated at this size, and this many rotated files are kept (`[audit]` of estop.toml)
AUDIT_MAX_BYTES = 64 * 1024 * 1024
AUDIT_KEEP = 8
SEQ_SHIFT = 40
_OFFSET_MASK = (1 << SEQ_SHIFT) - 1
ROTATE_LOCK = ".estop-audit.lock"
#: bytes read per step when reading the trail from its end
_BACK_CHUNK = 64 * 1024
#: how long an appender that found the trail full waits to rotate it
_ROTATE_WAIT = 0.5


def encode(seq: int, offset: int) -> int:
    return (seq << SEQ_SHIFT) | offset


def decode(position: int) -> tuple[int, int]:
    return position >> SEQ_SHIFT, position & _OFFSET_MASK


def lines_backward(fd: int, size: int) -> Iterator[tuple[int, bytes]]:
    """(offset, line without its newline) of every non-blank line of the first `size` bytes of
    `fd`, newest first, read in chunks from the end: the cost is what is read, not the file."""
    pos = size
    carry = b""
    while pos > 0:
        step = min(_BACK_CHUNK, pos)
        pos -= step
        data = os.pread(fd, step, pos) + carry
        parts = data.split(b"\n")
        carry = parts[0]
        end = pos + len(data)
        for raw in reversed(parts[1:]):
            end -= len(raw) + 1
            if raw.strip():
                yield end + 1, raw
    if carry.strip():
        yield 0, carry


class Trail:
    """The files of one audit trail: `path` is the file being written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.prefix = path.name + "."

    def rotated(self) -> list[int]:
        """The sequence numbers of the rotated files, oldest first."""
        try:
            names = os.listdir(self.path.parent)
        except FileNotFoundError:
            return []
        cut = len(self.prefix)
        return sorted(int(name[cut:]) for name in names
                      if name.startswith(self.prefix) and name[cut:].isdigit() and name[cut:].isascii())

    def file(self, seq: int, current: int) -> Path:
        return self.path if seq == current else self.path.with_name(f"{self.prefix}{seq}")

    def open_current(self) -> tuple[int | None, int, list[int]]:
        """(a descriptor on the file being written or None when there is none, its sequence
        number, the rotated files' numbers). The directory is listed again after the open: a
        rotation in between changes the listing, and the open is retried."""
        rotated = self.rotated()
        for _ in range(20):
            current = rotated[-1] + 1 if rotated else 0
            try:
                fd: int | None = open_regular(self.path)
            except FileNotFoundError:
                fd = None
            again = self.rotated()
            if (again[-1] if again else None) == (rotated[-1] if rotated else None):
                return fd, current, again
            if fd is not None:
                os.close(fd)
            rotated = again
        raise OSError(f"the audit trail {self.path} keeps rotating while being opened")

    def open_rotated(self, seq: int, current: int) -> int | None:
        try:
            return open_regular(self.file(seq, current))
        except FileNotFoundError:
            return None

    def full(self, max_bytes: int) -> bool:
        try:
            return os.lstat(self.path).st_size >= max_bytes
        except FileNotFoundError:
            return False

    def rotate(self, max_bytes: int, keep: int, wait: float = _ROTATE_WAIT) -> bool:
        """Rename the file being written to its sequence number when it holds `max_bytes` or
        more, under the exclusive lock (waiting at most `wait` for the appenders holding it
        shared: every appender that finds the file full comes here before appending, so they
        stop taking it shared and one of them gets it); then delete all but the newest `keep`
        rotated files. True when this call rotated."""
        try:
            with exclusive_lock(self.path.with_name(ROTATE_LOCK), wait):
                if not self.full(max_bytes):
                    return False  # another appender rotated it first
                rotated = self.rotated()
                current = rotated[-1] + 1 if rotated else 0
                os.rename(self.path, self.file(current, current + 1))
                fsync_dir(self.path.parent)
                for seq in [*rotated, current][:-max(keep, 1)]:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.file(seq, current + 1))
        except StoreError:
            return False  # busy for longer than `wait`: the next append tries again
        return True


def audit_table(data: Mapping[str, object] | None, path: Path) -> tuple[int, int]:
    """(max_bytes, keep) of the `[audit]` table of the configuration `data` read from `path`
    (the defaults for what it does not say); `InvalidArgument` naming the field otherwise.

        [audit]
        max_bytes = 67108864   # rotate the trail at this size; 0 never rotates
        keep = 8               # rotated files kept (at least 1)
    """
    table = (data or {}).get("audit", {})
    if not isinstance(table, dict):
        raise InvalidArgument(f"invalid config {printable(path)}: 'audit' must be a table ([audit])")
    values = {"max_bytes": AUDIT_MAX_BYTES, "keep": AUDIT_KEEP}
    for key, value in table.items():
        if key not in values:
            raise InvalidArgument(f"invalid config {printable(path)}: unknown key audit.{printable(key)} "
                                  "(known: keep, max_bytes)")
        least = 0 if key == "max_bytes" else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InvalidArgument(f"invalid config {printable(path)}: audit.{key} must be an integer >= {least}, "
                                  f"not {printable(repr(value))}")
        values[key] = value
    return values["max_bytes"], values["keep"]


def audit_rotation(root: Path) -> tuple[int, int]:
    """(max_bytes, keep) for the audit trail of fleet root `root`, read once per `AuditLog`.
    Never raises: an appender must write its line whatever the configuration says, so a
    configuration that cannot be read or an invalid `[audit]` table is warned about and the
    defaults apply."""
    path = root / "estop.toml"  # process.fleet_config.CONFIG_FILE: a level above the stores
    try:
        return audit_table(read_config(path), path)
    except InvalidArgument as exc:
        import logging

        logging.getLogger("hermes_estop").warning("%s; the audit trail rotates at the defaults", exc)
        return AUDIT_MAX_BYTES, AUDIT_KEEP


def parse_line(raw: bytes) -> AuditEvent | None:
    """The event of one line of the file trail, None when it is not one."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return AuditEvent.from_json(data) if isinstance(data, dict) else None


class AuditLog:
    """The JSONL audit trail of one fleet root: the file being written and its rotated
    predecessors (`Trail`). `max_bytes`/`keep` default to the `[audit]` table of the
    fleet's `estop.toml` (`config.audit_rotation`); `max_bytes` 0 never rotates."""

    def __init__(self, root: Path, *, max_bytes: int | None = None, keep: int | None = None) -> None:
        self.path = root / AUDIT_FILE
        self.trail = Trail(self.path)
        self._rotation = None if max_bytes is None or keep is None else (max_bytes, keep)

    def rotation(self) -> tuple[int, int]:
        """(rotate at this many bytes, keep this many rotated files), read once per process."""
        if self._rotation is None:
            self._rotation = audit_rotation(self.path.parent)
        return self._rotation

    def append(self, event: AuditEvent, *, sync: bool = True) -> None:
        """Append one line; with `sync`, fsync it and then the directory: a store appends an
        engagement's line before the hold is renamed in, so the line must be as durable as the
        hold that follows it. The directory every time, not only when this call created the
        file: a writer killed between creating the trail and its directory fsync leaves a file
        whose name a power loss would still take (the checker in tests/stores/protocol found
        it). Without `sync` (the line of a removal, which a reader's expiry appends inline):
        a removal lost to a power loss brings its hold back, and its line goes with it.

        The line is written under the rotation lock, shared (`ROTATE_LOCK`); when that cannot
        be had in `_LOCK_WAIT` (a rotator stopped while holding it) the line is written anyway:
        a record on disk matters more than a follower's view of one rotation. A line that
        takes the file past its size rotates it (or the next append, when the lock was busy);
        a failed rotation never fails the append."""
        line = (json.dumps(event.to_json(), sort_keys=False) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        max_bytes, keep = self.rotation()
        if not max_bytes:  # nobody rotates: no lock to order appends against a rotation
            size = self._write(line, sync)
        else:
            if self.trail.full(max_bytes):
                self._rotate(max_bytes, keep)
            with shared_lock(self.path.with_name(ROTATE_LOCK), _LOCK_WAIT):
                size = self._write(line, sync)
        if sync:
            fsync_dir(self.path.parent)
        if max_bytes and size >= max_bytes:
            self._rotate(max_bytes, keep)

    def _write(self, line: bytes, sync: bool) -> int:
        """Append `line` (fsync'ed with `sync`); the file's size after it. A writer killed
        mid-write can leave a torn line (Linux ends a write short at a page boundary on SIGKILL):
        `line` then starts on a line of its own, never glued to the torn one and lost with it."""
        fd = open_shared_file(self.path, os.O_RDWR | os.O_APPEND)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line
            os.write(fd, line)
            if sync:
                os.fsync(fd)
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def _rotate(self, max_bytes: int, keep: int) -> None:
        try:
            self.trail.rotate(max_bytes, keep)
        except OSError as exc:
            import logging  # only here: the read path never imports logging

            logging.getLogger("hermes_estop").warning("cannot rotate the audit trail %s: %s", self.path,
                                                      exc.strerror or exc)

    def check_writable(self) -> None:
        """Refuse (`NotRegularFile`, naming the file) an audit trail this process must not
        append to: not a regular file (a FIFO would block the writer while it holds the
        sentinel lock), hard-linked elsewhere, or another user's. Checked under the lock,
        before a write, so a refused write leaves nothing half-done. Absent is fine."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise NotRegularFile(f"cannot check the audit log {self.path}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(f"the audit log {self.path} is {describe_mode(st.st_mode)}: remove it by hand")
        if st.st_nlink > 1:
            raise NotRegularFile(f"the audit log {self.path} has {st.st_nlink} hard links: refusing to append to it")
        if st.st_uid != os.geteuid():
            raise NotRegularFile(f"the audit log {self.path} belongs to uid {st.st_uid}, not this user: "
                                 "refusing to append to it")

    def _files(self) -> Iterator[int]:
        """A descriptor on every file of the trail, oldest first (closed by the caller)."""
        fd, current, rotated = self.trail.open_current()
        try:
            for seq in rotated:
                older = self.trail.open_rotated(seq, current)
                if older is not None:
                    yield older
            if fd is not None:
                yield fd
                fd = None
        finally:
            if fd is not None:
                os.close(fd)

    def _lines(self) -> Iterator[AuditEvent | None]:
        """Every line's event, oldest first; None for a line that is not a valid event."""
        for fd in self._files():
            with os.fdopen(fd, "rb") as handle:
                for raw in handle:
                    if not raw.strip():
                        continue
                    yield parse_line(raw)

    def _newest(self) -> Generator[AuditEvent | None]:
        """Every line's event, newest first, read from the end of the trail backwards."""
        fd, current, rotated = self.trail.open_current()
        for seq in [current, *reversed(rotated)]:
            if seq != current:
                fd = self.trail.open_rotated(seq, current)
            if fd is None:
                continue
            try:
                for _, raw in lines_backward(fd, os.fstat(fd).st_size):
                    yield parse_line(raw)
            finally:
                os.close(fd)

    def read_counted(self, limit: int | None = None, since: datetime | None = None) -> tuple[list[AuditEvent], int]:
        """(events oldest first, with `limit` only the newest `limit`, with `since` only those
        at or after it; how many corrupt lines were skipped among those read). With either,
        the trail is read from its end and only as far as the answer needs: back to the
        `limit`-th event, or to the first event before `since` (the trail is in append
        order). Raises `NotRegularFile`/`OSError` when the file cannot be read."""
        events: list[AuditEvent] = []
        corrupt = 0
        if not limit and since is None:
            for event in self._lines():
                if event is None:
                    corrupt += 1
                else:
                    events.append(event)
            return events, corrupt
        lines = self._newest()
        try:
            for event in lines:
                if event is None:
                    corrupt += 1
                    continue
                if since is not None and event.time < since:
                    break
                events.append(event)
                if limit and len(events) >= limit:
                    break
        finally:
            lines.close()
        events.reverse()
        return events, corrupt

    def read(self, limit: int | None = None) -> list[AuditEvent]:
        """Oldest first; with `limit`, only the newest `limit` events."""
        return self.read_counted(limit)[0]

    def head(self) -> int:
        """The position just past the newest entry (where a reader told to start at the end begins)."""
        fd, current, _ = self.trail.open_current()
        if fd is None:
            return encode(current, 0)
        try:
            return encode(current, os.fstat(fd).st_size)
        finally:
            os.close(fd)

    def read_after(self, position: int, limit: int) -> list[AuditEntry]:
        """At most `limit` entries after `position` (`encode`: a file's sequence number
        and a byte offset in it), oldest first, following the trail across rotated files; a
        line still being written (no newline yet) in the file being written is left for the
        next call. A position in a file rotation has since deleted resumes at the oldest file
        left; one past the trail (it was replaced) starts it over. An id is the line's
        position plus a hash of the line, so a replaced trail never reuses one. Raises
        `OSError` when the file cannot be read."""
        fd, current, rotated = self.trail.open_current()
        seq, offset = decode(position)
        if seq > current:
            seq, offset = (rotated[0] if rotated else current), 0
        elif seq < current and seq not in rotated:
            seq, offset = next((s for s in rotated if s > seq), current), 0
        entries: list[AuditEntry] = []
        try:
            while len(entries) < limit:
                if seq == current:
                    if fd is not None:
                        _scan(fd, seq, offset, limit, entries, final=False)
                    break
                older = self.trail.open_rotated(seq, current)
                if older is not None:
                    try:
                        _scan(older, seq, offset, limit, entries, final=True)
                    finally:
                        os.close(older)
                if len(entries) >= limit:
                    break
                seq, offset = next((s for s in rotated if s > seq), current), 0
        finally:
            if fd is not None:
                os.close(fd)
        return entries


#: how long an append waits for a rotation to finish before writing without the lock
_LOCK_WAIT = 2.0


def _scan(fd: int, seq: int, offset: int, limit: int, entries: list[AuditEntry], *, final: bool) -> None:
    """Append to `entries` (up to `limit`) the lines of file `seq` from byte `offset`. A last
    line without a newline waits for it, unless the file is `final` (rotated: it never grows
    again), where it is an entry like any other."""
    import hashlib

    size = os.fstat(fd).st_size
    if offset > size:  # the trail was truncated or replaced: start it over
        offset = 0
    while len(entries) < limit and offset < size:
        data = os.pread(fd, _CHUNK, offset)
        if not data:
            break
        at = 0
        while len(entries) < limit:
            newline = data.find(b"\n", at)
            if newline < 0:
                if final and at < len(data) and offset + len(data) >= size:
                    newline = len(data)  # the unterminated last line of a rotated file
                else:
                    break
            raw = data[at:newline]
            start = offset + at
            at = min(newline + 1, len(data))
            if not raw.strip():
                continue
            digest = hashlib.sha256(raw).hexdigest()[:12]
            entries.append(AuditEntry(encode(seq, offset + at), f"audit-{encode(seq, start)}-{digest}", parse_line(raw)))
        if at == 0:
            if len(data) == _CHUNK:  # one line longer than a chunk: corrupt, step over it
                entries.append(AuditEntry(encode(seq, offset + len(data)), f"audit-{encode(seq, offset)}-long", None))
                offset += len(data)
                continue
            break  # a line still being written: wait for its newline
        offset += at
