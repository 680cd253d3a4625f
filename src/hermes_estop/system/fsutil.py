"""The two file primitives everything on disk is written with: an exclusive `flock` on a lock file
beside the data, and an atomic replace (temporary file in the same directory, fsync, rename,
directory fsync), so a reader sees the old content or the new, never a partial one, and a
writer killed at any point leaves one of the two. The checked reads (`open_regular`,
`read_regular`, ...) live in `fsread`, cheap to import, and are re-exported here."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from contextlib import contextmanager, suppress
from pathlib import Path

from hermes_estop.model.errors import StoreError
from hermes_estop.system.fsread import (
    FILE_MODE,
    MAX_READ_BYTES,
    NotRegularFile,
    describe_mode,
    open_regular,
    open_regular_with_stat,
    read_regular,
    read_regular_with_stat,
)

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
    "shared_lock",
    "atomic_write",
    "fsync_dir",
    "sweep_temporaries",
    "FileUpdate",
    "locked_update",
    "read_optional",
]

LOCK_TIMEOUT = 10.0


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
        fd, st = open_regular_with_stat(path, flags | os.O_CREAT | os.O_EXCL)
        created = True
    except FileExistsError:
        fd, st = open_regular_with_stat(path, flags)
    try:
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


def _flock_now(fd: int, lock_path: Path, operation: int) -> bool:
    """One attempt at the `flock` (`operation`: `LOCK_EX` or `LOCK_SH`); False when another
    holds it, `StoreError` when it cannot be taken at all."""
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EINTR):
            raise StoreError(f"cannot lock {lock_path}: {exc.strerror}") from None
        return False


def _flock_within(fd: int, lock_path: Path, operation: int, timeout: float, pause: float) -> bool:
    """The `flock`, tried every `pause` seconds for at most `timeout` (0: once); False when it
    is still held by another then."""
    deadline = time.monotonic() + timeout
    while not _flock_now(fd, lock_path, operation):
        if timeout <= 0 or time.monotonic() > deadline:
            return False
        time.sleep(pause)
    return True


@contextmanager
def exclusive_lock(lock_path: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold an exclusive `flock` on `lock_path` (created 0644, never through a symlink, never a
    hard-linked or foreign file).

    Raises `StoreError` naming the lock when it cannot be opened, or is still busy after
    `timeout` seconds (a writer stopped while holding it)."""
    fd = _open_lock(lock_path)
    try:
        if not _flock_within(fd, lock_path, fcntl.LOCK_EX, timeout, 0.002):
            raise StoreError(f"lock {lock_path} still busy after {timeout:.0f}s")
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


@contextmanager
def try_lock(lock_path: Path) -> Iterator[bool]:
    """The lock if it is free right now, without waiting: yields True while held, False when
    someone else holds it (or it cannot be opened). For readers, which must never wait."""
    with _held(lock_path, fcntl.LOCK_EX, 0) as acquired:
        yield acquired


@contextmanager
def shared_lock(lock_path: Path, timeout: float) -> Iterator[bool]:
    """A shared `flock` on `lock_path`, waiting at most `timeout` seconds for an exclusive
    holder: yields True while held, False when it could not be had (opened or acquired in
    time). A caller that must go on regardless (an audit append: a stop always stops) does."""
    with _held(lock_path, fcntl.LOCK_SH, timeout) as acquired:
        yield acquired


@contextmanager
def _held(lock_path: Path, operation: int, timeout: float) -> Iterator[bool]:
    """The lock held for the block if it can be had within `timeout` (True), else False: never
    raises for a lock that cannot be opened or taken."""
    try:
        fd = _open_lock(lock_path)
    except StoreError:
        yield False
        return
    try:
        try:
            acquired = _flock_within(fd, lock_path, operation, timeout, 0.001)
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
                    with suppress(OSError):
                        os.unlink(entry.path)
    except OSError:
        pass


def atomic_write(path: Path, data: bytes, *, before_rename: Callable[[], None] | None = None,
                 durable: bool = True) -> None:
    """Replace `path` with `data` atomically and durably (mode 0644). Raises `StoreError` naming
    the path; on failure `path` is untouched and no temporary is left behind. `durable=False`
    skips the fsyncs, for a file rewritten every second whose loss in a power cut costs nothing
    (a consumer's heartbeat): still atomic, a reader never sees half of it."""
    tmp = _temporary(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if before_rename is not None:
            before_rename()
        os.rename(tmp, path)
        if durable:
            fsync_dir(path.parent)
    except OSError as exc:
        with suppress(OSError):
            os.unlink(tmp)
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None


# -- the optional file and the locked read-modify-write ----------------------------------------


def read_optional(path: Path, limit: int = MAX_READ_BYTES, *, what: str | None = None) -> bytes | None:
    """The content of the regular file at `path`, or None when there is none (a table with no
    rows yet). Raises `StoreError` (`NotRegularFile`, larger than `limit`, cannot read) naming
    `what` ("the cron table") when given, else the path."""
    from hermes_estop.model.text import one_line

    try:
        return read_regular(path, limit)
    except FileNotFoundError:
        return None
    except StoreError as exc:
        if what is None:
            raise
        raise StoreError(f"cannot read {what}: {one_line(exc)}") from None
    except OSError as exc:
        named = f"{what} {path}" if what is not None else str(path)
        raise StoreError(f"cannot read {named}: {one_line(exc.strerror or exc)}") from None


class FileUpdate:
    """One `locked_update` of a file: `current` is its content (None: no file), read on first
    use (an update that only replaces never reads); `replace(data)` sets what is written when
    the block ends without an exception."""

    def __init__(self, path: Path, limit: int, what: str | None) -> None:
        self.path = path
        self._limit = limit
        self._what = what
        self._loaded = False
        self._current: bytes | None = None
        self.new: bytes | None = None

    @property
    def current(self) -> bytes | None:
        if not self._loaded:
            self._current = read_optional(self.path, self._limit, what=self._what)
            self._loaded = True
        return self._current

    def replace(self, data: bytes) -> None:
        self.new = data


@contextmanager
def locked_update(path: Path, *, limit: int = MAX_READ_BYTES, what: str | None = None,
                  lock_path: Path | None = None, timeout: float = LOCK_TIMEOUT) -> Iterator[FileUpdate]:
    """THE read-modify-write of a file that readers read without a lock (the cron table, the
    windows file, the window ledger, the notify cursors): under `exclusive_lock` on
    `lock_path` (default `.<name>.lock` beside `path`; every writer of `path` takes it), sweep
    the temporaries of writers that died, yield a `FileUpdate` (`current`: read with
    `read_optional`), and when the block ends without an exception and called `replace`,
    `atomic_write` the new content. A block that raises writes nothing.

    A context manager rather than a callback: the cron table's `edit()` hands the rows to a
    caller's `with` block, which must run under the same lock. Raises `StoreError` (lock busy,
    cannot read naming `what`, cannot write)."""
    lock = lock_path if lock_path is not None else path.with_name(f".{path.name}.lock")
    with exclusive_lock(lock, timeout):
        sweep_temporaries(path)  # under the writers' lock: no write is in flight
        update = FileUpdate(path, limit, what)
        yield update
        if update.new is not None:
            atomic_write(path, update.new)
