"""Checked reads of files in a fleet root or home: `open_regular` (never blocks on a FIFO, never
follows a symlink, refuses anything but a regular file) and `read_regular`, which every such
read goes through; `read_config`, the one reader of the fleet's `estop.toml` (the fleet's
policy, the store's audit rotation and the process's configuration all read it).

They live apart from the write primitives in `fsutil` (which re-exports them) because every
`hermes check` reads its configuration through them, and that path must not import what only a
writer needs (`fcntl`, `contextlib`)."""

from __future__ import annotations

import errno
import os
import stat

from hermes_estop.model.errors import InvalidArgument, StoreError
from hermes_estop.model.text import printable

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `hermes check` imports this module
if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "FILE_MODE",
    "MAX_CONFIG_BYTES",
    "MAX_READ_BYTES",
    "NotRegularFile",
    "FileSnapshot",
    "describe_mode",
    "file_identity",
    "foreign_control",
    "open_regular",
    "open_regular_with_stat",
    "read_config",
    "read_regular",
    "read_regular_with_stat",
    "read_snapshot",
]

FILE_MODE = 0o644
MAX_READ_BYTES = 64 * 1024 * 1024
#: a configuration file is a few lines; anything larger is refused, not read into memory
MAX_CONFIG_BYTES = 64 * 1024
_OPEN_SAFE = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class NotRegularFile(StoreError):
    """A path in a fleet root or home that is not a plain file the program may use: a directory,
    a FIFO, a device, a symlink, a hard-linked or foreign lock/audit file. Never opened for I/O."""


def foreign_control(path: Path | str, owner: int) -> str | None:
    """Why a file that grants rights (the policy, the token store) may not be believed: it is
    owned by someone other than uid `owner` (the fleet's owner) or root, or writable by group or
    others (None: it may be, or it is absent). Anyone who could write it could grant themselves
    what it grants."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be checked: {exc.strerror or exc}"
    if st.st_uid not in (owner, 0):
        return f"owned by uid {st.st_uid}, not by the fleet's owner (uid {owner}) or root"
    if st.st_mode & 0o022:
        return f"writable by group or others (mode {st.st_mode & 0o7777:04o})"
    return None


def describe_mode(mode: int) -> str:
    """What a non-regular file is, for a one-line message."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


def open_regular(path: Path | str, flags: int = os.O_RDONLY, mode: int = FILE_MODE) -> int:
    """THE way to open a file in a fleet root or home: `O_NONBLOCK|O_NOFOLLOW` (a FIFO or a
    symlink can never block or redirect the open), then `fstat` to check it is a regular file.
    Raises `FileNotFoundError` when it is missing (and `flags` has no `O_CREAT`),
    `NotRegularFile` naming the path and what it is, or `OSError` from the open itself."""
    return open_regular_with_stat(path, flags, mode)[0]


def open_regular_with_stat(path: Path | str, flags: int = os.O_RDONLY,
                           mode: int = FILE_MODE) -> tuple[int, os.stat_result]:
    """`open_regular`, and the `fstat` it checked the file with (the caller's own checks need
    no second one)."""
    try:
        fd = os.open(path, flags | _OPEN_SAFE, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(f"{path} is a symlink: refusing to follow it") from None
        if exc.errno == errno.ENXIO:  # a FIFO with no reader, opened for writing
            raise NotRegularFile(f"{path} is a FIFO: refusing to use it") from None
        raise
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegularFile(f"{path} is {describe_mode(st.st_mode)}: refusing to use it")
    return fd, st


def read_regular(path: Path | str, limit: int = MAX_READ_BYTES) -> bytes:
    """The whole content of a regular file, opened with `open_regular`. Raises
    `FileNotFoundError` when missing, `NotRegularFile`, `OSError`, or `StoreError` when it is
    larger than `limit` bytes."""
    return read_regular_with_stat(path, limit)[0]


def read_regular_with_stat(path: Path | str, limit: int = MAX_READ_BYTES) -> tuple[bytes, os.stat_result]:
    """`read_regular`, and the `fstat` of the very file the bytes came from (for a reader that
    must tell whether a later read saw the same version)."""
    fd, st = open_regular_with_stat(path)
    try:
        chunks: list[bytes] = []
        total = 0
        # The first read asks for the whole file as fstat sizes it (one buffer, not a list of
        # chunks joined into a second copy: a 10 MiB windows file); a file still growing is
        # read on in chunks.
        first = max(1, min(st.st_size + 1, limit + 1))
        while True:
            chunk = os.read(fd, first if not chunks else min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise StoreError(f"{path} is larger than {limit} bytes: refusing to read it")
        return (chunks[0] if len(chunks) == 1 else b"".join(chunks)), st
    finally:
        os.close(fd)


def file_identity(st: os.stat_result) -> tuple[int, ...]:
    """What changes whenever a file is replaced or edited in place."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class FileSnapshot:
    """One read of a file: the identity of the very file its bytes came from (None: no file, `raw`
    empty), so a reader can tell a re-save in place from a file that stayed as it was."""

    __slots__ = ("identity", "raw")

    def __init__(self, identity: tuple[int, ...] | None, raw: bytes) -> None:
        self.identity, self.raw = identity, raw


def read_snapshot(path: Path, limit: int = MAX_READ_BYTES) -> FileSnapshot:
    """`read_regular_with_stat`, a missing file read as none; `StoreError` (one line naming the
    path) when it cannot be read, is not a regular file or is larger than `limit`."""
    try:
        raw, st = read_regular_with_stat(path, limit)
    except FileNotFoundError:
        return FileSnapshot(None, b"")
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    return FileSnapshot(file_identity(st), raw)


def read_config(path: Path) -> dict[str, object] | None:
    """The parsed `estop.toml`, None when there is none; `InvalidArgument` (one line naming the
    file and the problem) for anything that cannot be read as a TOML document."""
    try:
        raw = read_regular(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:  # NotRegularFile and StoreError are OSErrors too
        why = exc.strerror or str(exc)
        raise InvalidArgument(f"invalid config {printable(path)}: {printable(why)}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(f"invalid config {printable(path)}: not UTF-8 (byte {exc.start})") from None
    import tomli  # the project's one TOML reader (see windows/windows_file.py)

    try:
        return tomli.loads(text)
    except tomli.TOMLDecodeError as exc:
        raise InvalidArgument(f"invalid config {printable(path)}: {printable(' '.join(str(exc).split()))}") from None
