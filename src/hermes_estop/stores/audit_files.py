"""The files of the audit trail: the one appenders write and the rotated ones before it.

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
import os

from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.text import printable

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: a reader's expiry appends through this module
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path

__all__ = ["AUDIT_KEEP", "AUDIT_MAX_BYTES", "ROTATE_LOCK", "SEQ_SHIFT", "Trail", "audit_rotation", "audit_table", "decode",
           "encode", "lines_backward"]

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
        from hermes_estop.system.fsutil import open_regular

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
        from hermes_estop.system.fsutil import open_regular

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
        from hermes_estop.model.errors import StoreError
        from hermes_estop.system.fsutil import exclusive_lock, fsync_dir

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
    path = root / "estop.toml"  # config.CONFIG_FILE: config imports the stores, which append through here
    try:
        return audit_table(_read_toml(path), path)
    except InvalidArgument as exc:
        import logging

        logging.getLogger("hermes_estop").warning("%s; the audit trail rotates at the defaults", exc)
        return AUDIT_MAX_BYTES, AUDIT_KEEP


def _read_toml(path: Path) -> dict[str, object] | None:
    """The document at `path` (None when absent), the way `config.read_config` reads it
    (`InvalidArgument` for anything that is not one)."""
    from hermes_estop.model.text import printable
    from hermes_estop.system.fsread import read_regular

    try:
        raw = read_regular(path, 64 * 1024)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidArgument(f"invalid config {printable(path)}: {printable(exc.strerror or str(exc))}") from None
    import tomli

    try:
        return tomli.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, tomli.TOMLDecodeError) as exc:
        raise InvalidArgument(f"invalid config {printable(path)}: {printable(' '.join(str(exc).split()))}") from None
