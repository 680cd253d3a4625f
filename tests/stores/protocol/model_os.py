"""An in-memory filesystem standing in for the `os`, `fcntl` and `time` names of the file store's
modules (stores/file.py, fsutil.py, fsread.py, audit.py): the OS layer of the hold protocol
(docs/design.md §5). Production binds those names to the real modules (no indirection, no cost);
the checker (`checker.py`) binds them to a `ModelOS` whose every call an actor makes is first a
scheduling point.

What it models: a namespace of regular files in known directories; `rename` atomic; file data
durable only once fsync'ed, directory entries (create, rename, unlink) only once the directory is
fsync'ed; `flock` per open file description, released when the descriptor is closed or its
process dies. A power loss keeps exactly what is durable. Not modelled: symlinks, FIFOs, partial
writes of one `write(2)`, other file systems' weaker orderings (NFS), a disk lying about fsync.
"""

from __future__ import annotations

import errno
import os as real_os
import stat
from collections.abc import Callable
from typing import Any


class ActorKilled(BaseException):
    """Raised in an actor's thread when it is killed: no code of a killed actor has any effect."""


class Hooks:
    """What the scheduler gives the model: `point` before an observable call (raises
    `ActorKilled` in a killed actor), `alive` before any other call, `observe` after a call
    took effect, `owner` the calling actor (None: the unscheduled test thread), `wait_lock`
    blocks the caller until the lock it found busy is free."""

    def point(self, description: str) -> None: ...
    def alive(self) -> None: ...
    def observe(self, operation: str, path: str, detail: Any) -> None: ...
    def owner(self) -> Any: ...
    def wait_lock(self) -> None: ...


class Stat:
    __slots__ = ("st_ctime_ns", "st_dev", "st_ino", "st_mode", "st_mtime_ns", "st_nlink", "st_size", "st_uid")

    def __init__(self, mode: int, ino: int, size: int, mtime_ns: int, ctime_ns: int) -> None:
        self.st_mode = mode
        self.st_ino = ino
        self.st_dev = 1
        self.st_nlink = 1
        self.st_uid = real_os.geteuid()
        self.st_size = size
        self.st_mtime_ns = mtime_ns
        self.st_ctime_ns = ctime_ns


class Inode:
    __slots__ = ("ctime", "data", "ino", "mtime", "synced")

    def __init__(self, ino: int, tick: int) -> None:
        self.ino = ino
        self.data = bytearray()
        self.synced = b""
        self.mtime = self.ctime = tick


class Handle:
    __slots__ = ("directory", "flags", "inode", "locked", "owner", "path", "pos")

    def __init__(self, path: str, inode: Inode | None, flags: int, owner: Any, directory: bool = False) -> None:
        self.path = path
        self.inode = inode
        self.flags = flags
        self.pos = 0
        self.owner = owner
        self.locked = False
        self.directory = directory


def parent(path: str) -> str:
    return path.rsplit("/", 1)[0]


class ModelFS:
    """The state: volatile and durable namespaces, inodes, open descriptors, flocks."""

    def __init__(self, dirs: set[str]) -> None:
        self.dirs = set(dirs)
        self.names: dict[str, Inode] = {}
        self.durable: dict[str, Inode] = {}
        self.handles: dict[int, Handle] = {}
        self.locks: dict[int, Handle] = {}  # inode number -> the handle holding its flock
        self.next_ino = 100
        self.next_fd = 1000
        self.tick = 1

    def new_inode(self) -> Inode:
        self.next_ino += 1
        self.tick += 1
        return Inode(self.next_ino, self.tick)

    def close_all(self, owner: Any) -> None:
        """A process died: the kernel closes its descriptors and drops its flocks."""
        for fd, handle in list(self.handles.items()):
            if handle.owner is owner:
                self._close(fd)

    def _close(self, fd: int) -> None:
        handle = self.handles.pop(fd)
        if handle.locked and handle.inode is not None:
            self.locks.pop(handle.inode.ino, None)

    def power_loss(self) -> None:
        """Everything not fsync'ed is gone; every process is gone."""
        self.handles.clear()
        self.locks.clear()
        self.names = dict(self.durable)
        for inode in set(self.names.values()):
            inode.data = bytearray(inode.synced)

    def restore(self, state: ModelFS) -> None:
        """Become a copy of `state` (a filesystem with nothing open) sharing nothing mutable with
        it: an inode under two names (visible and durable) stays one inode."""
        assert not state.handles and not state.locks
        copies: dict[int, Inode] = {}
        for inode in (*state.names.values(), *state.durable.values()):
            if inode.ino not in copies:
                twin = copies[inode.ino] = Inode(inode.ino, inode.mtime)
                twin.data, twin.synced, twin.ctime = bytearray(inode.data), inode.synced, inode.ctime
        self.dirs = set(state.dirs)
        self.names = {path: copies[inode.ino] for path, inode in state.names.items()}
        self.durable = {path: copies[inode.ino] for path, inode in state.durable.items()}
        self.handles, self.locks = {}, {}
        self.next_ino, self.next_fd, self.tick = state.next_ino, state.next_fd, state.tick

    def durable_data(self, path: str) -> bytes | None:
        inode = self.durable.get(path)
        return None if inode is None else inode.synced

    def visible_data(self, path: str) -> bytes | None:
        inode = self.names.get(path)
        return None if inode is None else bytes(inode.data)


class ModelOS:
    """The subset of `os` the file store's write and read paths call. `point(name)` is called
    before every call that another process could observe or be affected by."""

    def __init__(self, fs: ModelFS, hooks: Hooks) -> None:
        self.fs = fs
        self.hooks = hooks
        self._point = hooks.point
        self._observe = hooks.observe

    def __getattr__(self, name: str) -> Any:
        if name.isupper() or name in ("getpid", "urandom", "geteuid", "strerror"):
            return getattr(real_os, name)
        raise AttributeError(f"the model OS has no {name}: route it through ModelOS or add it")

    def _handle(self, fd: int) -> Handle:
        handle = self.fs.handles.get(fd)
        if handle is None:
            raise OSError(errno.EBADF, "bad file descriptor")
        return handle

    def _stat(self, inode: Inode) -> Stat:
        return Stat(stat.S_IFREG | 0o644, inode.ino, len(inode.data), inode.mtime, inode.ctime)

    # -- calls that are scheduling points ------------------------------------------------------

    def lstat(self, path: Any) -> Stat:
        path = str(path)
        self._point(f"lstat {path}")
        inode = self.fs.names.get(path)
        if inode is None:
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        return self._stat(inode)

    stat = lstat

    def open(self, path: Any, flags: int, mode: int = 0o777) -> int:
        path = str(path)
        self._point(f"open {path}")
        fs = self.fs
        if flags & real_os.O_DIRECTORY:
            if path not in fs.dirs:
                raise FileNotFoundError(errno.ENOENT, "no such directory", path)
            handle = Handle(path, None, flags, self._owner(), directory=True)
        else:
            if parent(path) not in fs.dirs:
                raise FileNotFoundError(errno.ENOENT, "no such directory", path)
            inode = fs.names.get(path)
            if inode is not None and flags & real_os.O_CREAT and flags & real_os.O_EXCL:
                raise FileExistsError(errno.EEXIST, "file exists", path)
            if inode is None:
                if not flags & real_os.O_CREAT:
                    raise FileNotFoundError(errno.ENOENT, "no such file", path)
                inode = fs.names[path] = fs.new_inode()
                self._observe("create", path, inode)
            if flags & real_os.O_TRUNC:
                inode.data = bytearray()
            handle = Handle(path, inode, flags, self._owner())
        fs.next_fd += 1
        fs.handles[fs.next_fd] = handle
        return fs.next_fd

    def read(self, fd: int, size: int) -> bytes:
        handle = self._handle(fd)
        assert handle.inode is not None
        if handle.pos == 0:
            self._point(f"read {handle.path}")
        chunk = bytes(handle.inode.data[handle.pos:handle.pos + size])
        handle.pos += len(chunk)
        return chunk

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        """Not a scheduling point: the trail's last byte (whether a torn line ends it) decides
        only whether an append starts with a newline; the model's writes are never torn."""
        handle = self._handle(fd)
        assert handle.inode is not None
        return bytes(handle.inode.data[offset:offset + size])

    def write(self, fd: int, data: Any) -> int:
        handle = self._handle(fd)
        self._point(f"write {handle.path}")
        inode = handle.inode
        assert inode is not None
        data = bytes(data)
        if handle.flags & real_os.O_APPEND:
            inode.data += data
        else:
            inode.data[handle.pos:handle.pos + len(data)] = data
            handle.pos += len(data)
        self.fs.tick += 1
        inode.mtime = inode.ctime = self.fs.tick
        return len(data)

    def fsync(self, fd: int) -> None:
        handle = self._handle(fd)
        self._point(f"fsync {handle.path}")
        fs = self.fs
        if handle.directory:
            for path in [p for p in fs.durable if parent(p) == handle.path]:
                del fs.durable[path]
            for path, inode in fs.names.items():
                if parent(path) == handle.path:
                    fs.durable[path] = inode
        else:
            assert handle.inode is not None
            handle.inode.synced = bytes(handle.inode.data)

    def rename(self, src: Any, dst: Any) -> None:
        src, dst = str(src), str(dst)
        self._point(f"rename {src} -> {dst}")
        fs = self.fs
        inode = fs.names.get(src)
        if inode is None:
            raise FileNotFoundError(errno.ENOENT, "no such file", src)
        replaced = fs.names.get(dst)
        del fs.names[src]
        fs.names[dst] = inode
        fs.tick += 1
        inode.ctime = fs.tick
        self._observe("rename", dst, replaced)

    def unlink(self, path: Any) -> None:
        path = str(path)
        self._point(f"unlink {path}")
        inode = self.fs.names.pop(path, None)
        if inode is None:
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        self._observe("unlink", path, inode)

    def close(self, fd: int) -> None:
        self.hooks.alive()
        handle = self._handle(fd)
        if handle.locked:
            self._point(f"close (unlock) {handle.path}")
        self.fs._close(fd)

    def scandir(self, path: Any) -> Any:
        path = str(path)
        self._point(f"scandir {path}")
        names = [p for p in self.fs.names if parent(p) == path]
        return _Scan([_Entry(p) for p in names])

    def flock(self, fd: int, operation: int) -> None:
        handle = self._handle(fd)
        self._point(f"flock {handle.path}")
        assert handle.inode is not None
        holder = self.fs.locks.get(handle.inode.ino)
        if holder is not None and holder is not handle:
            self._observe("flock-busy", handle.path, handle.inode.ino)
            raise BlockingIOError(errno.EWOULDBLOCK, "resource temporarily unavailable")
        self.fs.locks[handle.inode.ino] = handle
        handle.locked = True
        self._observe("flock", handle.path, handle.inode.ino)

    # -- calls that are not -------------------------------------------------------------------

    def fstat(self, fd: int) -> Stat:
        self.hooks.alive()
        handle = self._handle(fd)
        assert handle.inode is not None
        return self._stat(handle.inode)

    def fchmod(self, fd: int, mode: int) -> None:
        self.hooks.alive()
        self._handle(fd)

    def _owner(self) -> Any:
        return self.hooks.owner()


class _Entry:
    def __init__(self, path: str) -> None:
        self.path = path
        self.name = path.rsplit("/", 1)[1]


class _Scan(list):  # type: ignore[type-arg]
    def __enter__(self) -> _Scan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class ModelFcntl:
    LOCK_EX = 2
    LOCK_NB = 4
    LOCK_UN = 8

    def __init__(self, model: ModelOS) -> None:
        self.flock = model.flock


class ModelTime:
    """fsutil's `time`: waiting for a busy lock blocks the actor until the lock is free (no spin,
    no timeout: a lock never freed is a deadlock the checker reports)."""

    def __init__(self, wait: Callable[[], None]) -> None:
        self.sleep = lambda seconds: wait()

    @staticmethod
    def monotonic() -> float:
        return 0.0
