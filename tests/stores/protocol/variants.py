"""Deliberately broken variants of the file store's write protocol, for the checker to catch.
Each calls the OS through `file_module.os` (the OS layer the checker replaces)."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime
from typing import Any

from hermes_estop.model.audit_event import AuditEvent
from hermes_estop.model.errors import StoreError
from hermes_estop.model.hold import (
    EngageRequest,
    Fence,
    Hold,
    Reading,
    encode_body,
    merge_hold,
    new_generation,
    precondition_met,
)
from hermes_estop.model.homes import Location
from hermes_estop.stores import file as file_module
from hermes_estop.stores.base import fence_matches, refused_write, released_reading
from hermes_estop.stores.file import FileStore


class WriteThenAudit(FileStore):
    """The order before issue 20: the body is renamed in, THEN its audit line is appended."""

    def engage(self, location: Location, request: EngageRequest, now: datetime, actor: str,
               judge: Any = None) -> Hold:
        with self._locked(location, arming=True):
            standing = self._read_fresh(location, now)
            if not precondition_met(request.only_if, standing):
                raise refused_write(location, standing)
            hold = merge_hold(standing.hold if standing.active else None, request, now, new_generation())
            self._write(location, encode_body(hold))
            event = "rearm" if standing.active else "engage"
            self._audit(event, location, hold.generation, actor, hold.reason, hold.expires_at, now)
        return hold


class UnlinkBeforeFenceCheck(FileStore):
    """A retire that removes first and checks the fence after."""

    def _retire_locked(self, location: Location, fence: Fence, now: datetime, actor: str, event: str,
                       judge: Any = None, detail: str | None = None) -> bool:
        standing = self._read_fresh(location, now)
        self._remove(location)
        if not fence_matches(standing, fence):
            return False
        self._audit(event, location, fence.describe(), actor, None, None, now)
        return True


def _write_tmp(location: Location, body: bytes, *, fsync: bool) -> tuple[str, int]:
    os = file_module.os
    tmp = str(location.sentinel.with_name(".ESTOP.tmp-variant"))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, body)
    if fsync:
        os.fsync(fd)
    return tmp, fd


def _fsync_dir(location: Location) -> None:
    os = file_module.os
    fd = os.open(str(location.path), os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)


class FsyncAfterRename(FileStore):
    """Atomic replace with the body's fsync moved after the rename (and the directory fsync)."""

    def _write(self, location: Location, body: bytes) -> None:
        os = file_module.os
        tmp, fd = _write_tmp(location, body, fsync=False)
        os.rename(tmp, str(location.sentinel))
        _fsync_dir(location)
        os.fsync(fd)
        os.close(fd)


class UnlinkThenCreate(FileStore):
    """A re-arm that removes the old sentinel and then renames the new one in."""

    def _write(self, location: Location, body: bytes) -> None:
        os = file_module.os
        tmp, fd = _write_tmp(location, body, fsync=True)
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(location.sentinel))
        os.rename(tmp, str(location.sentinel))
        _fsync_dir(location)


class AuditWithoutFsync(FileStore):
    """The audit append without its fsync (the trail existed before: no directory fsync due)."""

    def append_audit(self, event: AuditEvent, sync: bool = True) -> None:
        os = file_module.os
        try:
            fd = os.open(str(self.audit_log.path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(fd, (json.dumps(event.to_json()) + "\n").encode())
            os.close(fd)
        except OSError as exc:
            raise StoreError(str(exc)) from None


class AuditDirFsyncOnlyWhenNew(FileStore):
    """The audit append as first written for issue 20: the directory fsync'ed only by the call
    that found no trail. A writer killed between creating the trail and that fsync leaves a
    name the next writer never makes durable (the checker found it with a home's sentinel)."""

    def append_audit(self, event: AuditEvent, sync: bool = True) -> None:
        os = file_module.os
        path = str(self.audit_log.path)
        try:
            try:
                os.lstat(path)
                new = False
            except FileNotFoundError:
                new = True
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(fd, (json.dumps(event.to_json()) + "\n").encode())
            os.fsync(fd)
            os.close(fd)
            if new:
                fd = os.open(str(self.audit_log.path.parent), os.O_RDONLY | os.O_DIRECTORY)
                os.fsync(fd)
                os.close(fd)
        except OSError as exc:
            raise StoreError(str(exc)) from None


class ReleaseWithoutLock(FileStore):
    """The operator's release without `.ESTOP.lock` (issue 32 item 12): it reads G1, an operator
    renames G2 in, it unlinks G2 and writes "release G1"."""

    def release(self, location: Location, generation: str | None, now: datetime, actor: str,
                judge: Any = None) -> Reading | None:
        standing = self._read_fresh(location, now)
        removed = released_reading(standing, generation)
        if removed is None:
            return None
        self._drop(location, standing, removed, now)
        self._audit_removal("release", location, removed, removed.fence.describe() if removed.fence else None,
                            actor, now)
        return removed


class NoDirFsyncOnFirstArm(FileStore):
    """A first arm (no sentinel yet) renamed in without the directory fsync: the body is durable,
    its name is not, so a power loss after the arm was acknowledged loses it (issue 32 item 12)."""

    def _write(self, location: Location, body: bytes) -> None:
        os = file_module.os
        try:
            os.lstat(str(location.sentinel))
            first = False
        except FileNotFoundError:
            first = True
        tmp, fd = _write_tmp(location, body, fsync=True)
        os.close(fd)
        os.rename(tmp, str(location.sentinel))
        if not first:
            _fsync_dir(location)


class JudgeBeforeLock(FileStore):
    """The lift before issue 43: the policy judged what stood, then the release took the lock
    and removed whatever stood by then (a re-arm in between was lifted unjudged)."""

    def release(self, location: Location, generation: str | None, now: datetime, actor: str,
                judge: Any = None) -> Reading | None:
        if judge is not None:
            judge(self._read_fresh(location, now), None, now)
        return super().release(location, generation, now, actor)
