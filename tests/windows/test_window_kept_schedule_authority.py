"""A kept schedule (`.windows.toml.schedule`) is never an authority (issue 45, docs/design.md
§8a): one that claims the current file's digest but was built from other bytes (its header
edited, also one built in the file's own directory), a symlink, a truncated one, one another
account wrote or anyone may write, or an older one of other bytes put back is rebuilt or
refused, and the scheduler never leaves the fleet free inside a window the file declares while
it does so. Real files, the real scheduler on the fake clock."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from schedule_queries import covering_all, schedule_path

from hermes_estop.windows import schedule
from hermes_estop.windows.windows_file import WindowsFile

REAL = '[[windows]]\nname = "real"\ncron = "0 12 * * *"\ntimezone = "UTC"\nduration = "2h"\n'
EVIL = '[[windows]]\nname = "evil"\ncron = "0 12 * * *"\ntimezone = "UTC"\nduration = "2h"\nscope = "victim"\n'
NOW = datetime(2026, 6, 1, 12, 30, tzinfo=UTC)  # the `clock` fixture's day, inside `real`


def _built(where: Path, text: str) -> Path:
    """A schedule hermes-estop built for the windows file `text` in the directory `where`."""
    where.mkdir(mode=0o700, exist_ok=True)
    (where / "windows.toml").write_text(text)
    wf = WindowsFile(where)
    assert schedule.load(wf.path, wf.path.read_bytes(), wf.load, NOW) is not None
    return schedule_path(wf.path)


def _forge(kept: Path, digest_of: bytes) -> None:
    """`kept`'s header digest set to the SHA-256 of `digest_of`: its rows stay another file's."""
    lines = kept.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    header["digest"] = hashlib.sha256(digest_of).hexdigest()
    lines[0] = json.dumps(header, separators=(",", ":")).encode()
    kept.write_bytes(b"\n".join(lines))


def _plant(root: Path, text: str, tmp_path: Path) -> Path:
    """A schedule built from `text` elsewhere, put beside `root`'s windows file with that file's digest."""
    kept = schedule_path(root / "windows.toml")
    shutil.copyfile(_built(tmp_path / "elsewhere", text), kept)
    kept.chmod(0o644)
    _forge(kept, (root / "windows.toml").read_bytes())
    return kept


@pytest.mark.parametrize("text", ["", EVIL], ids=["empty", "evil-at-victim"])
def test_a_kept_schedule_with_the_files_digest_but_other_rows_is_not_believed(tmp_path: Path, text: str, kept_schedule) -> None:
    root = tmp_path / "fleet"
    _built(root, REAL)
    _plant(root, text, tmp_path)
    wf = WindowsFile(root)
    raw = wf.path.read_bytes()
    assert kept_schedule(wf.path, raw, NOW) is None
    found = schedule.load(wf.path, raw, wf.load, NOW)
    assert found is not None and list(found.names) == ["real"]
    assert [o.window for o in covering_all(found, NOW) or ()] == ["real"]


@pytest.mark.parametrize("text", ["", EVIL], ids=["empty", "evil-at-victim"])
def test_the_scheduler_arms_the_files_window_never_a_forged_schedules(harness, tmp_path: Path, text: str) -> None:
    harness.root.chmod(0o700)
    (harness.root / "windows.toml").write_text(REAL)
    _plant(harness.root, text, tmp_path)
    harness.clock.set(NOW)
    report = harness.start()
    assert report.active == [f"fleet/real@{NOW.replace(minute=0).isoformat()}"]
    assert harness.reading().hold is not None and harness.reading().hold.expires_at == NOW + timedelta(minutes=90)
    assert harness.reading("victim").hold is None


def test_a_symlinked_kept_schedule_is_refused_and_built_again(tmp_path: Path, kept_schedule) -> None:
    root = tmp_path / "fleet"
    kept = _built(root, REAL)
    elsewhere = _built(tmp_path / "elsewhere", REAL)
    kept.unlink()
    os.symlink(elsewhere, kept)
    wf = WindowsFile(root)
    assert kept_schedule(wf.path, wf.path.read_bytes(), NOW) is None
    found = schedule.load(wf.path, wf.path.read_bytes(), wf.load, NOW)
    assert found is not None and list(found.names) == ["real"]


def test_an_older_schedule_put_back_after_an_edit_is_not_taken_for_the_new_bytes(tmp_path: Path, kept_schedule) -> None:
    root = tmp_path / "fleet"
    kept = _built(root, EVIL.replace('scope = "victim"\n', ""))
    older = kept.read_bytes()
    _built(root, REAL)
    kept.write_bytes(older)  # bytes (and mtime) rolled back
    os.utime(kept, (0, 0))
    wf = WindowsFile(root)
    assert kept_schedule(wf.path, wf.path.read_bytes(), NOW) is None
    found = schedule.load(wf.path, wf.path.read_bytes(), wf.load, NOW)
    assert found is not None and list(found.names) == ["real"]


def _same_directory_forgery(root: Path, tmp_path: Path) -> None:
    """Issue 45's attack as written: a schedule built beside the real file from an empty file
    (so sealed with this directory's key), its header digest set to the real file's."""
    wf = WindowsFile(root)
    real = wf.path.read_bytes()
    wf.path.write_text("")
    assert schedule.load(wf.path, b"", wf.load, NOW) is not None
    wf.path.write_bytes(real)
    _forge(schedule_path(wf.path), real)


def _another_accounts(root: Path, tmp_path: Path) -> None:
    """The file's schedule, rewritten by another account (it passes every other check)."""
    if os.geteuid() != 0:
        pytest.skip("making a file another account's needs root")
    os.chown(schedule_path(root / "windows.toml"), 65534, 65534)


def _symlinked(root: Path, tmp_path: Path) -> None:
    kept = schedule_path(root / "windows.toml")
    target = kept.with_name(".elsewhere")
    kept.rename(target)
    kept.symlink_to(target.name)


def _truncated(root: Path, tmp_path: Path) -> None:
    kept = schedule_path(root / "windows.toml")
    kept.write_bytes(kept.read_bytes()[: kept.stat().st_size // 2])


def _older_put_back(root: Path, tmp_path: Path) -> None:
    """The schedule of the file before an edit put back, its mtime rolled back too."""
    wf = WindowsFile(root)
    real = wf.path.read_bytes()
    wf.path.write_text(EVIL)
    assert schedule.load(wf.path, wf.path.read_bytes(), wf.load, NOW) is not None
    older = schedule_path(wf.path).read_bytes()
    wf.path.write_bytes(real)
    assert schedule.load(wf.path, real, wf.load, NOW) is not None
    schedule_path(wf.path).write_bytes(older)
    os.utime(schedule_path(wf.path), (0, 0))


TAMPERS = [_same_directory_forgery, _another_accounts, _symlinked, _truncated, _older_put_back,
           lambda root, tmp_path: schedule_path(root / "windows.toml").chmod(0o666)]


@pytest.mark.parametrize("tamper", TAMPERS, ids=["forged-in-its-directory", "another-account", "symlink", "truncated",
                                                 "older-put-back", "world-writable"])
def test_whatever_was_done_to_the_kept_schedule_commands_and_the_scheduler_hold_the_files_window(
        harness, tmp_path: Path, tamper, kept_schedule) -> None:
    harness.root.chmod(0o700)
    _built(harness.root, REAL)
    tamper(harness.root, tmp_path)
    wf = WindowsFile(harness.root)
    raw = wf.path.read_bytes()
    assert kept_schedule(wf.path, raw, NOW) is None
    found = schedule.schedule_of(wf, NOW)  # what `windows list` and `check --at` read
    assert list(found.names) == ["real"] and [o.window for o in covering_all(found, NOW) or ()] == ["real"]
    harness.clock.set(NOW)
    report = harness.start()
    assert report.active == [f"fleet/real@{NOW.replace(minute=0).isoformat()}"]
    assert harness.engaged_at(NOW) and harness.reading("victim").hold is None
