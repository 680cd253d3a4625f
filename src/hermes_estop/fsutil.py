"""The two file primitives everything on disk is written with: an exclusive `flock` on a lock file
beside the data, and an atomic replace (temporary file in the same directory, fsync, rename,
directory fsync), so a reader sees the old content or the new, never a partial one, and a
writer killed at any point leaves one of the two."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from contextlib import contextmanager
from pathlib import Path

from .errors import StoreError

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `hermes check` imports this module
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = [
    "FILE_MODE",
    "LOCK_TIMEOUT",
    "MAX_READ_BYTES",
    "NotRegularFile",
    "describe_mode",
    "open_regular",
    "read_regular",
    "read_regular_with_stat",
    "open_shared_file",
    "exclusive_lock",
    "try_lock",
    "atomic_write",
    "fsync_dir",
    "sweep_temporaries",
]

FILE_MODE = 0o644
LOCK_TIMEOUT = 10.0
MAX_READ_BYTES = 64 * 1024 * 1024
_OPEN_SAFE = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class NotRegularFile(StoreError):
    """A path in a fleet root or home that is not a plain file the program may use: a directory,
    a FIFO, a device, a symlink, a hard-linked or foreign lock/audit file. Never opened for I/O."""


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
    return fd


def read_regular(path: Path | str, limit: int = MAX_READ_BYTES) -> bytes:
    """The whole content of a regular file, opened with `open_regular`. Raises
    `FileNotFoundError` when missing, `NotRegularFile`, `OSError`, or `StoreError` when it is
    larger than `limit` bytes."""
    return read_regular_with_stat(path, limit)[0]


def read_regular_with_stat(path: Path | str, limit: int = MAX_READ_BYTES) -> tuple[bytes, os.stat_result]:
    """`read_regular`, and the `fstat` of the very file the bytes came from (for a reader that
    must tell whether a later read saw the same version)."""
    fd = open_regular(path)
    try:
        st = os.fstat(fd)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise StoreError(f"{path} is larger than {limit} bytes: refusing to read it")
        return b"".join(chunks), st
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_shared_file(path: Path, flags: int) -> int:
    """Open (creating it 0644 whatever the umask) a file the fleet shares and this process
    writes: a lock or the audit trail. Every process of the fleet, whoever runs it, must be able
    to read it. Refused with `NotRegularFile` when it is not a regular file, has other hard
    links, or belongs to another user: a planted link must never let a write reach (or a
    `chmod` change) a file the program did not create. The mode is set only on a file this
    call created."""
    created = False
    try:
        fd = open_regular(path, flags | os.O_CREAT | os.O_EXCL)
        created = True
    except FileExistsError:
        fd = open_regular(path, flags)
    try:
        st = os.fstat(fd)
        if st.st_nlink > 1:
            raise NotRegularFile(f"{path} has {st.st_nlink} hard links: refusing to use it")
        if st.st_uid != os.geteuid():
            raise NotRegularFile(f"{path} belongs to uid {st.st_uid}, not this user: refusing to use it")
        if created and stat.S_IMODE(st.st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_lock(lock_path: Path) -> int:
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        return open_shared_file(lock_path, os.O_RDWR)
    except StoreError:
        raise
    except OSError as exc:
        raise StoreError(f"cannot open the lock {lock_path}: {exc.strerror or exc}") from None


def _flock_now(fd: int, lock_path: Path) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EINTR):
            raise StoreError(f"cannot lock {lock_path}: {exc.strerror}") from None
        return False


@contextmanager
def exclusive_lock(lock_path: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold an exclusive `flock` on `lock_path` (created 0644, never through a symlink, never a
    hard-linked or foreign file).

    Raises `StoreError` naming the lock when it cannot be opened, or is still busy after
    `timeout` seconds (a writer stopped while holding it)."""
    fd = _open_lock(lock_path)
    try:
        deadline = time.monotonic() + timeout
        while not _flock_now(fd, lock_path):
            if time.monotonic() > deadline:
                raise StoreError(f"lock {lock_path} still busy after {timeout:.0f}s")
            time.sleep(0.002)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


@contextmanager
def try_lock(lock_path: Path) -> Iterator[bool]:
    """The lock if it is free right now, without waiting: yields True while held, False when
    someone else holds it (or it cannot be opened). For readers, which must never wait."""
    try:
        fd = _open_lock(lock_path)
    except StoreError:
        yield False
        return
    try:
        try:
            acquired = _flock_now(fd, lock_path)
        except StoreError:
            acquired = False
        yield acquired
    finally:
        os.close(fd)


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{os.urandom(6).hex()}")


def sweep_temporaries(path: Path) -> None:
    """Remove leftovers of writers of `path` that died mid-write. Call it only while holding the
    lock that every writer of `path` takes: then no write is in flight."""
    prefix = f".{path.name}.tmp-"
    try:
        with os.scandir(path.parent) as entries:
            for entry in entries:
                if entry.name.startswith(prefix):
                    try:
                        os.unlink(entry.path)
                    except OSError:
                        pass
    except OSError:
        pass


def atomic_write(path: Path, data: bytes, *, before_rename: Callable[[], None] | None = None) -> None:
    """Replace `path` with `data` atomically and durably (mode 0644). Raises `StoreError` naming
    the path; on failure `path` is untouched and no temporary is left behind."""
    tmp = _temporary(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if before_rename is not None:
            before_rename()
        os.rename(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None
