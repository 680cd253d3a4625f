"""What only the sentinel store has: the file-system rows of docs/design.md §3, hand edits, file modes,
the lock that never follows a symlink, and a hot path that opens nothing."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from hermes_estop import Estop, StoreError
from hermes_estop.model.hold import HoldState
from hermes_estop.model.homes import Layout
from hermes_estop.model.timeutil import format_instant
from hermes_estop.stores import FileStore
from hermes_estop.stores.file import LOCK_NAME


@pytest.fixture
def estop(fleet_root, clock) -> Estop:
    return Estop(layout=Layout(home=fleet_root, root=fleet_root), store=FileStore(fleet_root), clock=clock,
                 actor="test@host")


def state_of(estop: Estop):
    return estop.store.read((estop.layout.own,), estop.clock())[0]


def test_directory_at_the_sentinel_is_active_unreadable(estop):
    estop.sentinel_path().mkdir()
    reading = state_of(estop)
    assert reading.state is HoldState.UNREADABLE
    assert "directory" in reading.problem
    assert estop.is_engaged()
    assert not estop.is_allowed("alice")


def test_fifo_at_the_sentinel_is_active_and_never_blocks(estop):
    os.mkfifo(estop.sentinel_path())
    result: dict[str, object] = {}
    thread = threading.Thread(target=lambda: result.setdefault("engaged", estop.is_engaged()), daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "reading a FIFO sentinel blocked"
    assert result["engaged"] is True
    assert state_of(estop).problem == "a FIFO"


def test_dangling_symlink_is_active_unreadable(estop, fleet_root):
    estop.sentinel_path().symlink_to(fleet_root / "nowhere")
    assert state_of(estop).state is HoldState.UNREADABLE
    assert estop.is_engaged()


def test_symlink_to_a_body_is_read_through(estop, fleet_root):
    target = fleet_root / "elsewhere.json"
    target.write_text(json.dumps({"generation": "g1", "allow": {"user_ids": ["alice"]}}))
    estop.sentinel_path().symlink_to(target)
    assert estop.is_allowed("alice")


def test_home_that_cannot_be_stated_is_active(tmp_path, clock):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    estop = Estop(layout=Layout(home=blocker, root=blocker), store=FileStore(blocker), clock=clock)
    reading = state_of(estop)
    assert reading.state is HoldState.UNREADABLE
    assert "cannot stat" in reading.problem
    assert estop.is_engaged()


READ_AS_NOBODY = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from hermes_estop import Estop
    from hermes_estop.model.homes import Layout
    from hermes_estop.stores import FileStore
    root = Path(sys.argv[1])
    estop = Estop(layout=Layout(home=root, root=root), store=FileStore(root))
    os.setgid(65534); os.setuid(65534)  # after the imports: the interpreter lives in root's home
    reading = estop.store.read(estop.locations, estop.clock())[0]
    print(reading.state.value, reading.problem, estop.is_engaged(), estop.is_allowed("alice"))
    """
)


@pytest.mark.parametrize("blocked", ["file", "directory"])
def test_unreadable_for_permissions_is_active(tmp_path, blocked):
    """Run as an unprivileged user (root reads everything), against a file or home it may not read."""
    root = tmp_path / "perm-fleet"
    root.mkdir()
    (root / "ESTOP").write_text(json.dumps({"generation": "g1", "allow": {"user_ids": ["alice"]}}))
    os.chmod(tmp_path, 0o755)
    if blocked == "file":
        os.chmod(root / "ESTOP", 0o000)
    else:
        os.chmod(root, 0o000)
    try:
        if os.getuid() == 0:
            cmd = [sys.executable, "-c", READ_AS_NOBODY, str(root)]
        else:
            cmd = [sys.executable, "-c", READ_AS_NOBODY.replace("os.setgid(65534); os.setuid(65534)", ""), str(root)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=_child_env())
    finally:
        os.chmod(root, 0o755)
    assert out.returncode == 0, out.stderr
    state, *_rest = out.stdout.split()
    assert state == "unreadable"
    assert out.stdout.split()[-2:] == ["True", "False"]


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_touch_is_a_valid_emergency_stop(estop):
    estop.sentinel_path().touch()
    assert estop.is_engaged()
    assert not estop.is_allowed("alice")
    state = estop.get_state()
    assert state["expires_at"] is None and state["reason"] is None


def test_rm_is_a_valid_release(estop):
    estop.engage(reason="maint")
    os.unlink(estop.sentinel_path())
    assert not estop.is_engaged()


def test_hand_written_expired_body_is_retired_by_file_identity(estop, clock):
    past = format_instant(clock.now - timedelta(minutes=1))
    estop.sentinel_path().write_text(json.dumps({"reason": "by hand", "expires_at": past}))
    assert not estop.is_engaged()
    estop.fleet.retire_expired()
    assert not estop.sentinel_path().exists()


def test_hand_written_successor_survives_retirement_of_its_predecessor(estop):
    clock = estop.clock
    past = format_instant(clock.now - timedelta(minutes=1))
    estop.sentinel_path().write_text(json.dumps({"reason": "by hand", "expires_at": past}))

    def interleave(step):
        if step == "expiry:decided":
            # a second hand edit replaces the file between the expiry decision and the retirement
            tmp = estop.sentinel_path().with_name("edit")
            tmp.write_text(json.dumps({"reason": "edited again"}))
            os.replace(tmp, estop.sentinel_path())

    estop.store.interleave = interleave
    try:
        estop.fleet.retire_expired()
    finally:
        estop.store.interleave = None
    assert estop.is_engaged()
    assert estop.get_state()["reason"] == "edited again"


def test_written_files_are_0644_whatever_the_umask(estop, fleet_root):
    old = os.umask(0o077)
    try:
        estop.engage(reason="maint")
    finally:
        os.umask(old)
    for name in ("ESTOP", LOCK_NAME, "estop-audit.jsonl"):
        mode = stat.S_IMODE(os.stat(fleet_root / name).st_mode)
        assert mode & 0o644 == 0o644, f"{name} is {oct(mode)}"
    assert stat.S_IMODE(os.stat(fleet_root / "ESTOP").st_mode) == 0o644


def test_lock_is_never_opened_through_a_symlink(estop, fleet_root, tmp_path):
    standing = estop.engage(reason="standing")
    target = tmp_path / "victim"
    (fleet_root / LOCK_NAME).unlink()
    (fleet_root / LOCK_NAME).symlink_to(target)
    with pytest.raises(StoreError, match="lock"):
        estop.engage(reason="through the link")
    assert not target.exists()
    assert estop.get_state()["generation"] == standing.generation


def test_leftover_temporaries_of_a_dead_writer_are_swept(estop, fleet_root):
    leftover = fleet_root / ".ESTOP.tmp-99999-deadbeef"
    leftover.write_text('{"partial')
    estop.engage(reason="maint")
    assert not leftover.exists()
    assert estop.is_engaged()


def test_rearm_writes_a_new_file_never_in_place(estop):
    estop.engage(reason="one")
    before = os.stat(estop.sentinel_path()).st_ino
    estop.engage(reason="two")
    assert os.stat(estop.sentinel_path()).st_ino != before


def test_in_place_edit_of_a_settled_body_is_seen(estop):
    path = estop.sentinel_path()
    path.write_text(json.dumps({"generation": "aaaa", "allow": {"user_ids": ["alice"]}}))
    time.sleep(0.15)  # past the settling time, so the body is cached on its identity
    assert estop.is_allowed("alice")
    assert estop.is_allowed("alice")
    with open(path, "r+") as handle:  # same inode, same size
        handle.write(json.dumps({"generation": "bbbb", "allow": {"user_ids": ["bobby"]}}))
    assert estop.is_allowed("bobby")
    assert not estop.is_allowed("alice")


HOT_PATH_OPENS = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from hermes_estop import Estop
    from hermes_estop.model.homes import Layout
    root = Path(sys.argv[1])
    estop = Estop(layout=Layout(home=root / "profiles" / "ops", root=root))
    estop.gate("warm-up")
    opened = []
    sys.addaudithook(lambda event, args: opened.append((event, args)) if event in ("open", "os.listdir", "os.scandir") else None)
    for _ in range(200):
        assert estop.gate("alice", "ops")
    print(len(opened))
    """
)


def test_no_hold_hot_path_opens_no_file(fleet_root):
    out = subprocess.run([sys.executable, "-c", HOT_PATH_OPENS, str(fleet_root)], capture_output=True, text=True,
                         timeout=60, env=_child_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"
