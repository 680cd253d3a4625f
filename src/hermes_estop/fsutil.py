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
from typing import Callable, Iterator

from .errors import StoreError

__all__ = ["FILE_MODE", "LOCK_TIMEOUT", "open_shared_file", "exclusive_lock", "atomic_write", "fsync_dir", "sweep_temporaries"]

FILE_MODE = 0o644
LOCK_TIMEOUT = 10.0


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_shared_file(path: Path, flags: int) -> int:
    """`os.open` with O_CREAT and O_NOFOLLOW, and mode 0644 whatever the umask: every process
    of the fleet, whoever runs it, must be able to read what it shares."""
    fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        st = os.fstat(fd)
        if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    except OSError:
        pass
    return fd


@contextmanager
def exclusive_lock(lock_path: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold an exclusive `flock` on `lock_path` (created 0644, never through a symlink).

    Raises `StoreError` naming the lock when it cannot be opened, or is still busy after
    `timeout` seconds (a writer stopped while holding it)."""
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_shared_file(lock_path, os.O_RDWR)
    except OSError as exc:
        raise StoreError(f"cannot open the lock {lock_path}: {exc.strerror or exc}") from None
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EINTR):
                    raise StoreError(f"cannot lock {lock_path}: {exc.strerror}") from None
                if time.monotonic() > deadline:
                    raise StoreError(f"lock {lock_path} still busy after {timeout:.0f}s") from None
                time.sleep(0.002)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


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
