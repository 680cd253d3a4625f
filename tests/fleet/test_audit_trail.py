"""Issue 24: the file audit trail is read from its end for `history --limit/--since`, rotates at a
configured size, and a cursor follows it across rotated files."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hermes_estop.model.audit_event import AuditEvent
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.stores.audit_log import AUDIT_FILE, AUDIT_KEEP, AUDIT_MAX_BYTES, AuditLog, audit_rotation, audit_table

T0 = datetime(2026, 6, 1, tzinfo=UTC)


def event(n: int, *, detail_size: int = 0) -> AuditEvent:
    return AuditEvent(T0 + timedelta(seconds=n), "engage", "fleet", f"g{n}", "op@h", "maint",
                      detail=f"{n}:" + "x" * detail_size)


def numbers(events) -> list[int]:
    return [int(e.detail.split(":")[0]) for e in events]


def write_lines(path: Path, lines: list[bytes], *, final_newline: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(lines) + (b"\n" if final_newline else b""))


def line(n: int, detail_size: int = 0) -> bytes:
    return json.dumps(event(n, detail_size=detail_size).to_json()).encode()


def a_trail(tmp_path: Path, *, final_newline: bool = True) -> tuple[AuditLog, list[bytes]]:
    """200 events of varying length (some longer than a read chunk), corrupt lines and blank
    lines among them, and with `final_newline` False an unterminated last line."""
    lines: list[bytes] = []
    for n in range(200):
        lines.append(line(n, detail_size=(n * 7919) % 3000 + (70_000 if n % 50 == 7 else 0)))
        if n % 13 == 5:
            lines.append(b"{not json")
        if n % 17 == 3:
            lines.append(b"   ")
    write_lines(tmp_path / AUDIT_FILE, lines, final_newline=final_newline)
    return AuditLog(tmp_path, max_bytes=0, keep=1), lines


def corrupt_after(lines: list[bytes], oldest: int) -> int:
    """Corrupt lines after the event numbered `oldest`."""
    index = lines.index(next(raw for raw in lines if raw.startswith(b"{") and raw.endswith(b"}")
                             and json.loads(raw)["detail"].startswith(f"{oldest}:")))
    return sum(1 for raw in lines[index:] if raw.strip() and not raw.endswith(b"}"))


@pytest.mark.parametrize("limit", [1, 2, 5, 49, 50, 51, 199, 200])
def test_the_newest_n_are_the_end_of_a_full_read_and_count_the_corrupt_lines_read(tmp_path, limit):
    log, lines = a_trail(tmp_path)
    everything, corrupt_total = log.read_counted()
    assert numbers(everything) == list(range(200))
    events, corrupt = log.read_counted(limit)
    assert numbers(events) == numbers(everything[-limit:])
    assert corrupt == corrupt_after(lines, numbers(events)[0])
    assert corrupt <= corrupt_total


def test_more_than_the_trail_holds_is_the_whole_trail(tmp_path):
    log, _ = a_trail(tmp_path)
    assert log.read_counted(10_000) == log.read_counted()


def test_an_unterminated_last_line_reads_as_a_full_read_reads_it(tmp_path):
    log, lines = a_trail(tmp_path, final_newline=False)
    (tmp_path / AUDIT_FILE).open("ab").write(b'{"time": "2026-06-0')
    assert log.read_counted(3) == (log.read()[-3:], 1)
    assert log.read_counted()[1] == sum(1 for raw in lines if raw.strip() and not raw.endswith(b"}")) + 1


def test_the_newest_events_never_read_the_corrupt_lines_far_behind_them(tmp_path):
    write_lines(tmp_path / AUDIT_FILE, [b"garbage"] * 1000 + [line(n) for n in range(10)])
    assert AuditLog(tmp_path).read_counted(5) == (AuditLog(tmp_path).read()[-5:], 0)


@pytest.mark.parametrize(("since", "limit", "expected"), [
    (T0 + timedelta(seconds=190), None, list(range(190, 200))),
    (T0 + timedelta(seconds=190), 3, [197, 198, 199]),
    (T0 + timedelta(seconds=500), None, []),
    (T0 - timedelta(days=1), None, list(range(200))),
])
def test_since_reads_back_to_the_first_older_event(tmp_path, since, limit, expected):
    log, _ = a_trail(tmp_path)
    assert numbers(log.read_counted(limit, since)[0]) == expected


def test_since_stops_at_the_first_older_event(tmp_path):
    write_lines(tmp_path / AUDIT_FILE, [b"garbage"] * 100 + [line(n) for n in range(10)])
    assert AuditLog(tmp_path).read_counted(None, T0 + timedelta(seconds=5))[1] == 0


# -- rotation ------------------------------------------------------------------------------------


def rotating(root: Path, max_bytes: int = 2000, keep: int = 100) -> AuditLog:
    return AuditLog(root, max_bytes=max_bytes, keep=keep)


def files(root: Path) -> list[str]:
    return sorted(name for name in os.listdir(root) if name.startswith(AUDIT_FILE))


def test_the_trail_rotates_at_its_size_into_numbered_files(tmp_path):
    log = rotating(tmp_path)
    for n in range(100):
        log.append(event(n), sync=False)
    names = files(tmp_path)
    assert AUDIT_FILE in names and f"{AUDIT_FILE}.0" in names and f"{AUDIT_FILE}.1" in names
    assert all((tmp_path / name).stat().st_size < 2000 + 300 for name in names)
    assert numbers(log.read()) == list(range(100))
    assert numbers(log.read(7)) == list(range(93, 100))
    assert numbers(log.read_counted(None, T0 + timedelta(seconds=40))[0]) == list(range(40, 100))


def test_rotation_keeps_only_the_newest_files(tmp_path):
    log = rotating(tmp_path, keep=2)
    for n in range(100):
        log.append(event(n), sync=False)
    rotated = [name for name in files(tmp_path) if name != AUDIT_FILE]
    assert len(rotated) == 2
    kept = numbers(log.read())
    assert kept == list(range(kept[0], 100)) and kept[0] > 0


def read_all(log: AuditLog, position: int, step: int) -> tuple[list, int]:
    entries = []
    while True:
        batch = log.read_after(position, step)
        entries += batch
        if batch:
            position = batch[-1].end
        if len(batch) < step:
            return entries, position


@pytest.mark.parametrize("step", [1, 3, 1000])
def test_a_cursor_follows_the_trail_across_rotations(tmp_path, step):
    log = rotating(tmp_path)
    position = log.head()
    seen = []
    for n in range(120):
        log.append(event(n), sync=False)
        if n % 11 == 0:
            entries, position = read_all(log, position, step)
            seen += entries
    entries, position = read_all(log, position, step)
    seen += entries
    assert numbers(e.event for e in seen) == list(range(120))
    assert len({e.id for e in seen}) == 120
    assert log.read_after(position, 10) == [] == log.read_after(log.head(), 10)


def test_a_cursor_saved_before_rotation_existed_still_names_its_line(tmp_path):
    plain = AuditLog(tmp_path, max_bytes=0, keep=1)
    for n in range(5):
        plain.append(event(n), sync=False)
    saved = plain.read_after(0, 3)[-1].end  # a byte offset, as every cursor was before rotation
    log = rotating(tmp_path, max_bytes=300)
    for n in range(5, 30):
        log.append(event(n), sync=False)
    assert f"{AUDIT_FILE}.0" in files(tmp_path)
    assert numbers(e.event for e in read_all(log, saved, 4)[0]) == list(range(3, 30))


def test_a_cursor_into_a_deleted_file_resumes_at_the_oldest_file_left(tmp_path):
    log = rotating(tmp_path, max_bytes=300, keep=2)
    log.append(event(0), sync=False)
    position = log.head()
    for n in range(1, 40):
        log.append(event(n), sync=False)
    got = numbers(e.event for e in read_all(log, position, 5)[0])
    assert got == numbers(log.read()) and got[-1] == 39 and got[0] > 1


def test_a_position_past_a_replaced_trail_starts_it_over(tmp_path):
    log = rotating(tmp_path, max_bytes=300)
    for n in range(20):
        log.append(event(n), sync=False)
    position = log.head()
    for name in files(tmp_path):
        (tmp_path / name).unlink()
    for n in range(3):
        log.append(event(n), sync=False)
    assert numbers(e.event for e in log.read_after(position, 10)) == [0, 1, 2]


def test_a_rotated_files_unterminated_last_line_is_read_once_as_corrupt(tmp_path):
    log = rotating(tmp_path, max_bytes=300)
    log.append(event(0), sync=False)
    with (tmp_path / AUDIT_FILE).open("ab") as handle:
        handle.write(b'{"time": "2026-')  # a writer killed mid-line
    for n in range(1, 10):
        log.append(event(n), sync=False)
    entries, _ = read_all(log, 0, 2)
    assert [e.event is None for e in entries].count(True) == 1
    assert numbers(e.event for e in entries if e.event) == list(range(10))  # line 1 starts a line of its own


# -- configuration -------------------------------------------------------------------------------


@pytest.mark.parametrize(("table", "expected"), [
    ({}, (AUDIT_MAX_BYTES, AUDIT_KEEP)),
    ({"audit": {"max_bytes": 1000}}, (1000, AUDIT_KEEP)),
    ({"audit": {"max_bytes": 0, "keep": 3}}, (0, 3)),
])
def test_the_audit_table_sets_the_rotation(table, expected):
    assert audit_table(table, Path("estop.toml")) == expected


@pytest.mark.parametrize(("table", "named"), [
    ({"audit": 5}, "'audit' must be a table"),
    ({"audit": {"max_bytes": -1}}, "audit.max_bytes"),
    ({"audit": {"max_bytes": "64M"}}, "audit.max_bytes"),
    ({"audit": {"keep": 0}}, "audit.keep"),
    ({"audit": {"keep": True}}, "audit.keep"),
    ({"audit": {"size": 1}}, "audit.size"),
])
def test_an_invalid_audit_table_is_refused_naming_the_field(table, named):
    with pytest.raises(InvalidArgument, match=named):
        audit_table(table, Path("estop.toml"))


def test_an_appender_rotates_at_the_size_estop_toml_sets(tmp_path):
    (tmp_path / "estop.toml").write_text("[audit]\nmax_bytes = 500\nkeep = 2\n")
    assert audit_rotation(tmp_path) == (500, 2)
    log = AuditLog(tmp_path)
    for n in range(30):
        log.append(event(n), sync=False)
    rotated = [name for name in files(tmp_path) if name != AUDIT_FILE]
    assert len(rotated) == 2 and f"{AUDIT_FILE}.0" not in rotated


def test_an_invalid_audit_table_never_stops_an_append(tmp_path):
    (tmp_path / "estop.toml").write_text("[audit]\nmax_bytes = -5\n")
    assert audit_rotation(tmp_path) == (AUDIT_MAX_BYTES, AUDIT_KEEP)
    AuditLog(tmp_path).append(event(0))
    assert numbers(AuditLog(tmp_path).read()) == [0]
