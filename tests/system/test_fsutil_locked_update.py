"""`fsutil.locked_update`, THE locked read-modify-write (issue 14 item 8) of the cron table, the
windows file, the window ledger and the notify cursors; and `read_optional`, their read."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from hermes_estop.model.errors import StoreError
from hermes_estop.system.fsutil import NotRegularFile, locked_update, read_optional, try_lock


def test_an_absent_file_reads_as_none_and_is_created_by_replace(tmp_path):
    path = tmp_path / "sub" / "table.json"
    with locked_update(path) as file:
        assert file.current is None
        file.replace(b"one")
    assert path.read_bytes() == b"one"
    assert sorted(p.name for p in path.parent.iterdir()) == [".table.json.lock", "table.json"]


def test_the_block_sees_the_current_content_and_what_it_replaces_is_written(tmp_path):
    path = tmp_path / "t"
    path.write_bytes(b"1")
    with locked_update(path) as file:
        file.replace(str(int(file.current or b"0") + 1).encode())
    assert path.read_bytes() == b"2"


def test_a_block_that_raises_or_does_not_replace_writes_nothing(tmp_path):
    path = tmp_path / "t"
    path.write_bytes(b"before")
    identity = os.stat(path).st_ino
    with pytest.raises(ValueError), locked_update(path) as file:
        file.replace(b"after")
        raise ValueError("refused")
    with locked_update(path) as file:
        assert file.current == b"before"
    assert path.read_bytes() == b"before" and os.stat(path).st_ino == identity


def test_the_lock_is_held_for_the_block_only(tmp_path):
    path = tmp_path / "t"
    lock = tmp_path / ".t.lock"
    with locked_update(path), try_lock(lock) as free:
        assert not free
    with try_lock(lock) as free:
        assert free


def test_an_update_that_only_replaces_never_opens_what_is_there(tmp_path):
    """The windows file's `save`: a FIFO planted at the path is replaced, never opened."""
    path = tmp_path / "t"
    os.mkfifo(path)
    with locked_update(path) as file:
        file.replace(b"new")
    assert path.read_bytes() == b"new"


def test_a_fifo_is_refused_with_one_line_naming_what_was_read(tmp_path):
    path = tmp_path / "t"
    os.mkfifo(path)
    with pytest.raises(StoreError, match=r"^cannot read the cron table: .*is a FIFO"), \
            locked_update(path, what="the cron table") as file:
        file.current  # noqa: B018
    with pytest.raises(NotRegularFile):
        read_optional(path)


def test_temporaries_of_dead_writers_are_swept(tmp_path):
    path = tmp_path / "t"
    (tmp_path / ".t.tmp-1-dead").write_bytes(b"half")
    with locked_update(path) as file:
        file.replace(b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".t.lock", "t"]


def test_a_given_lock_path_is_the_one_taken(tmp_path):
    path = tmp_path / "notify-state.json"
    with locked_update(path, lock_path=tmp_path / ".notify-state.lock"), try_lock(tmp_path / ".notify-state.lock") as free:
        assert not free


def test_a_file_over_the_limit_is_refused(tmp_path):
    path = tmp_path / "t"
    path.write_bytes(b"x" * 11)
    with pytest.raises(StoreError, match="larger than 10 bytes"):
        read_optional(path, 10)


_INCREMENT = """
import sys
from pathlib import Path
from hermes_estop.system.fsutil import locked_update
for _ in range(int(sys.argv[2])):
    with locked_update(Path(sys.argv[1])) as file:
        file.replace(str(int(file.current or b"0") + 1).encode())
"""


def test_concurrent_updates_from_threads_and_processes_lose_nothing(tmp_path):
    path = tmp_path / "counter"
    children = [subprocess.Popen([sys.executable, "-c", _INCREMENT, str(path), "40"]) for _ in range(2)]

    def bump() -> None:
        for _ in range(40):
            with locked_update(path) as file:
                file.replace(str(int(file.current or b"0") + 1).encode())

    threads = [threading.Thread(target=bump) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [child.wait(timeout=120) for child in children] == [0, 0]
    assert path.read_bytes() == b"160"
