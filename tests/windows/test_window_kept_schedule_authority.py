"""A kept schedule (`.windows.toml.schedule`) is never an authority (issue 45, docs/design.md
§8a): one that claims the current file's digest but was built from other bytes (its header
edited), a symlink, a truncated one, or an older one of other bytes put back is rebuilt or
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
from schedule_queries import schedule_path

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
def test_a_kept_schedule_with_the_files_digest_but_other_rows_is_not_believed(tmp_path: Path, text: str) -> None:
    root = tmp_path / "fleet"
    _built(root, REAL)
    _plant(root, text, tmp_path)
    wf = WindowsFile(root)
    raw = wf.path.read_bytes()
    assert schedule.kept_schedule(wf.path, raw, NOW) is None
    found = schedule.load(wf.path, raw, wf.load, NOW)
    assert found is not None and list(found.names) == ["real"]
    assert [o.window for o in found.covering(NOW) or ()] == ["real"]


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


def test_a_symlinked_kept_schedule_is_refused_and_built_again(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    kept = _built(root, REAL)
    elsewhere = _built(tmp_path / "elsewhere", REAL)
    kept.unlink()
    os.symlink(elsewhere, kept)
    wf = WindowsFile(root)
    assert schedule.kept_schedule(wf.path, wf.path.read_bytes(), NOW) is None
    found = schedule.load(wf.path, wf.path.read_bytes(), wf.load, NOW)
    assert found is not None and list(found.names) == ["real"]


def test_an_older_schedule_put_back_after_an_edit_is_not_taken_for_the_new_bytes(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    kept = _built(root, EVIL.replace('scope = "victim"\n', ""))
    older = kept.read_bytes()
    _built(root, REAL)
    kept.write_bytes(older)  # bytes (and mtime) rolled back
    os.utime(kept, (0, 0))
    wf = WindowsFile(root)
    assert schedule.kept_schedule(wf.path, wf.path.read_bytes(), NOW) is None
    found = schedule.load(wf.path, wf.path.read_bytes(), wf.load, NOW)
    assert found is not None and list(found.names) == ["real"]
