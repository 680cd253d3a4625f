"""windows.compiled: a validated windows file and the starts computed for it, kept between
processes. What the cache answers must be exactly what validating and croniter would: the same
windows (field by field), the same starts; a changed byte, a corrupt or planted cache file, a
changed zone database are never trusted, and nothing about the cache ever fails a read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, UTC
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from hermes_estop.model import cronspec
from hermes_estop.windows import compiled, windows_file
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import upcoming
from hermes_estop.windows.windows_file import WindowsFile

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

VARIED = '''
[[windows]]
name = "nightly"
cron = "30 2 * * *"
timezone = "Europe/Berlin"
duration = "1h"
drain = "15m"
reason = "nightly maintenance"
allow = { user_ids = ["424242", "ops"], profiles = ["alpha"] }

[[windows]]
name = "once"
at = 2026-07-01T10:00:00Z
duration = "2h30m"
scope = "alpha"
only = ["cron", "kanban"]
jobs = ["backup-*"]

[[windows]]
name = "weekly"
cron = "0 4 * * 0"
timezone = "America/New_York"
duration = "45m"
enabled = false
not_before = 2026-06-10T00:00:00Z
not_after = 2027-01-01T00:00:00Z
exclude = [2026-12-25, 2027-01-01]
exclude_cron = "* * 24-26 12 *"

[[windows]]
name = "task"
cron = "15 3 1 * *"
duration = "20m"
run = ["/usr/bin/true", "--flag"]
on_failure_ttl = "2h"
'''


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    root = tmp_path / "fleet"
    (root / "profiles" / "alpha").mkdir(parents=True)
    (root / "windows.toml").write_text(VARIED)
    return root


@pytest.fixture(autouse=True)
def new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each read as a new process makes it: nothing remembered in memory, only on disk."""
    monkeypatch.setattr(windows_file, "_VERSIONS", {})
    monkeypatch.setattr(compiled, "_FOLLOWING", [])
    monkeypatch.setattr(compiled.atexit, "register", lambda func: None)
    cronspec.RUNS.clear()


def read(root: Path) -> list[Window]:
    windows_file._VERSIONS.clear()
    return WindowsFile(root).load()


def identical(a: Window, b: Window) -> bool:
    return (a.__dict__ == b.__dict__ and a.model_fields_set == b.model_fields_set
            and a.__pydantic_private__ == b.__pydantic_private__ and type(a) is type(b))


def refuse_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    def no(*args: object, **kwargs: object) -> None:
        raise AssertionError("validated again")

    monkeypatch.setattr(Window, "parse", no)


def test_every_field_of_a_window_has_a_codec() -> None:
    assert compiled._codecs() is not None, "a Window field without a codec turns the cache off"


def test_a_second_read_builds_the_same_windows_without_validating(fleet: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = read(fleet)
    refuse_validation(monkeypatch)
    second = read(fleet)
    assert len(second) == len(first) == 4
    assert all(identical(a, b) for a, b in zip(first, second, strict=False))
    assert [w.to_toml() for w in second] == [w.to_toml() for w in first]
    assert [upcoming(w, NOW, 3) for w in second] == [upcoming(w, NOW, 3) for w in first]


def test_a_file_changed_by_one_byte_is_validated_again(fleet: Path) -> None:
    read(fleet)
    path = fleet / "windows.toml"
    path.write_text(VARIED.replace('duration = "1h"', 'duration = "2h"'))
    assert read(fleet)[0].duration == timedelta(hours=2)


def test_a_file_that_fails_is_never_kept(fleet: Path, estop_cache: Path) -> None:
    (fleet / "windows.toml").write_text(VARIED + '\n[[windows]]\nname = "bad"\ncron = "61 * * * *"\nduration = "1h"\n')
    parsed = WindowsFile(fleet).parse_each((fleet / "windows.toml").read_bytes())
    assert [f.window for f in parsed.failures] == ["'bad'"]
    assert not list(estop_cache.glob("*.windows.json"))


def corrupt_lines(path: Path) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[4] = b'["not a duration", 1, 2, 3]'  # the `timezone` column
    path.write_bytes(b"\n".join(lines))


def wrong_count(path: Path) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[2] = b'["only-one"]'
    path.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("damage", [
    pytest.param(lambda p: p.write_bytes(b"garbage\x00\xff"), id="garbage"),
    pytest.param(lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), id="truncated"),
    pytest.param(lambda p: p.write_bytes(b""), id="empty"),
    pytest.param(wrong_count, id="a-column-of-the-wrong-length"),
    pytest.param(lambda p: p.write_bytes(p.read_bytes().replace(b'"stamp":"', b'"stamp":"x', 1)), id="another-code-stamp"),
    pytest.param(lambda p: (p.unlink(), os.mkfifo(p)), id="a-fifo-planted-in-its-place"),
    pytest.param(lambda p: (p.unlink(), p.mkdir()), id="a-directory-in-its-place"),
])
def test_a_damaged_cache_is_ignored_and_the_file_validated(fleet: Path, estop_cache: Path, damage,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    expected = read(fleet)
    (kept,) = estop_cache.glob("*.windows.json")
    damage(kept)
    again = read(fleet)
    assert all(identical(a, b) for a, b in zip(expected, again, strict=False)) and len(again) == len(expected)


def test_a_value_of_the_wrong_type_in_a_column_is_not_trusted(fleet: Path, estop_cache: Path) -> None:
    expected = read(fleet)
    (kept,) = estop_cache.glob("*.windows.json")
    lines = kept.read_bytes().split(b"\n")
    names = json.loads(lines[0])["fields"]
    lines[2 + names.index("duration")] = b'["1h", "2h", "3h", "4h"]'
    kept.write_bytes(b"\n".join(lines))
    assert all(identical(a, b) for a, b in zip(expected, read(fleet), strict=False))


def test_the_cache_can_be_turned_off(fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_ESTOP_CACHE", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    read(fleet)
    read(fleet)
    assert compiled.cache_dir() is None
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()


def test_the_cache_lives_under_xdg_cache_home_made_private(fleet: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HERMES_ESTOP_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    read(fleet)
    where = tmp_path / "xdg" / "hermes-estop"
    assert len(list(where.glob("*.windows.json"))) == 1
    assert where.stat().st_mode & 0o777 == 0o700


# -- starts -------------------------------------------------------------------------------------

def next_starts(windows: list[Window], now: datetime) -> list[list[datetime]]:
    return [[o.start for o in upcoming(w, now, 3)] for w in windows]


def test_starts_kept_by_one_process_answer_the_next_without_croniter(fleet: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    expected = next_starts(read(fleet), NOW)
    compiled.save_starts()
    cronspec.RUNS.clear()
    monkeypatch.setattr(compiled, "_FOLLOWING", [])

    def no_croniter(expr: str) -> None:
        raise AssertionError(f"croniter asked for {expr!r}")

    windows = read(fleet)
    monkeypatch.setattr(cronspec, "_parsed", no_croniter)
    assert next_starts(windows, NOW) == expected


def rewrite_kept_starts(estop_cache: Path, line: int, change, monkeypatch: pytest.MonkeyPatch) -> None:
    """Save this process's starts, put `change` of line `line` of the starts file in its place,
    and start over as a new process would (nothing remembered in memory)."""
    compiled.save_starts()
    (kept,) = estop_cache.glob("*.starts.json")
    lines = kept.read_bytes().split(b"\n")
    lines[line] = json.dumps(change(json.loads(lines[line]))).encode()
    kept.write_bytes(b"\n".join(lines))
    cronspec.RUNS.clear()
    monkeypatch.setattr(compiled, "_FOLLOWING", [])


def test_starts_of_a_zone_whose_data_changed_are_computed_again(fleet: Path, estop_cache: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    expected = next_starts(read(fleet), NOW)

    def other_zone_data(header: dict) -> dict:
        return header | {"zones": {name: "0" * 64 for name in header["zones"]}}

    rewrite_kept_starts(estop_cache, 0, other_zone_data, monkeypatch)
    windows = read(fleet)
    assert list(cronspec.RUNS.items()) == []
    assert next_starts(windows, NOW) == expected


@pytest.mark.parametrize("starts", [[5, 3], ["1"], [1.5], [1, 1]])
def test_a_run_that_is_not_ascending_whole_seconds_is_refused(fleet: Path, estop_cache: Path, starts,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    expected = next_starts(read(fleet), NOW)
    rewrite_kept_starts(estop_cache, 5, lambda column: [starts, *column[1:]], monkeypatch)
    assert next_starts(read(fleet), NOW) == expected


def test_zone_digest_is_the_data_zoneinfo_reads() -> None:
    assert compiled._zone_digest("Europe/Berlin") is not None
    assert compiled._zone_digest("../../etc/passwd") is None
    assert compiled._zone_digest("No/Such_Zone") is None
    assert ZoneInfo("Europe/Berlin").key == "Europe/Berlin"


def hermes(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HERMES_ROOT=str(root), HERMES_HOME=str(root), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "hermes_estop", *args], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args", [("windows", "next", "--json"), ("windows", "list", "--json"), ("status", "--json"),
                                  ("windows", "validate", "--json")])
def test_a_command_answers_the_same_cold_warm_and_without_the_cache(fleet: Path, args: tuple[str, ...],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cold, warm = hermes(fleet, *args), hermes(fleet, *args)
    monkeypatch.setenv("HERMES_ESTOP_CACHE", "off")
    plain = hermes(fleet, *args)

    def stable(out: str) -> object:
        data = json.loads(out)
        data.pop("now", None)
        return data["windows"] if args[0] == "status" else data  # status: the windows section

    assert cold.returncode == warm.returncode == plain.returncode == 0, cold.stderr + warm.stderr + plain.stderr
    assert stable(cold.stdout) == stable(warm.stdout) == stable(plain.stdout)


# -- a cache is an accelerator, never an authority (issue 32 item 10) ---------------------------

PLANTED = ["/bin/sh", "-c", "echo planted"]
NOBODY = 65534


def nobody() -> int:
    import pwd

    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        return NOBODY


def plant_run(kept: Path) -> None:
    """Rewrite the `run` column of a kept windows file: the command someone else chose."""
    lines = kept.read_bytes().split(b"\n")
    names = json.loads(lines[0])["fields"]
    column = json.loads(lines[2 + names.index("run")])
    column = [PLANTED if value is not None else None for value in column] if isinstance(column, list) else column
    lines[2 + names.index("run")] = json.dumps(column).encode()
    kept.write_bytes(b"\n".join(lines))


def task_run(windows: list[Window]) -> list[str] | None:
    return next(w.run for w in windows if w.name == "task")


@pytest.mark.parametrize("distrust", [
    pytest.param(lambda kept: os.chmod(kept.parent, 0o770), id="directory-group-writable"),
    pytest.param(lambda kept: os.chmod(kept.parent, 0o757), id="directory-other-writable"),
    pytest.param(lambda kept: os.chown(kept.parent, nobody(), -1), id="directory-owned-by-nobody"),
    pytest.param(lambda kept: os.chmod(kept, 0o664), id="file-group-writable"),
    pytest.param(lambda kept: os.chmod(kept, 0o646), id="file-other-writable"),
    pytest.param(lambda kept: os.chown(kept, nobody(), -1), id="file-owned-by-nobody"),
])
def test_a_cache_someone_else_could_write_is_ignored_and_the_windows_file_read_again(
        fleet: Path, estop_cache: Path, distrust, caplog: pytest.LogCaptureFixture) -> None:
    expected = read(fleet)
    (kept,) = estop_cache.glob("*.windows.json")
    plant_run(kept)
    assert task_run(read(fleet)) == PLANTED  # a private cache is taken as it is: the plant would work
    distrust(kept)
    with caplog.at_level("WARNING", logger="hermes_estop"):
        again, once_more = read(fleet), read(fleet)
    assert task_run(again) == task_run(once_more) == ["/usr/bin/true", "--flag"]
    assert all(identical(a, b) for a, b in zip(expected, again, strict=False)) and len(again) == len(expected)
    lines = [r.getMessage() for r in caplog.records if "never an authority" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]


@pytest.mark.parametrize("distrust", [
    pytest.param(lambda where: os.chmod(where, 0o777), id="world-writable"),
    pytest.param(lambda where: os.chown(where, nobody(), -1), id="owned-by-nobody"),
])
def test_nothing_is_written_into_a_cache_directory_someone_else_could_write(
        fleet: Path, estop_cache: Path, distrust, caplog: pytest.LogCaptureFixture) -> None:
    distrust(estop_cache)
    with caplog.at_level("WARNING", logger="hermes_estop"):
        read(fleet)
        next_starts(read(fleet), NOW)
        compiled.save_starts()
    assert list(estop_cache.iterdir()) == []
    lines = [r.getMessage() for r in caplog.records if "never an authority" in r.getMessage()]
    assert len(lines) == 1 and str(estop_cache) in lines[0]


@pytest.mark.parametrize("distrust", [
    pytest.param(lambda kept: os.chmod(kept, 0o666), id="file-writable-by-all"),
    pytest.param(lambda kept: os.chown(kept, nobody(), -1), id="file-owned-by-nobody"),
])
def test_starts_someone_else_could_write_are_ignored(fleet: Path, estop_cache: Path, distrust,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    next_starts(read(fleet), NOW)
    rewrite_kept_starts(estop_cache, 0, lambda header: header, monkeypatch)
    (kept,) = estop_cache.glob("*.starts.json")
    distrust(kept)
    read(fleet)
    assert list(cronspec.RUNS.items()) == []


@pytest.mark.parametrize(("field", "value"), [
    ("run", [[""], None, None, None]),
    ("run", [["a\x00b"], None, None, None]),
    ("run", [[1, 2], None, None, None]),
    ("scope", ["../etc", "fleet", "fleet", "fleet"]),
    ("only", [["\x1b[2J"], [], [], []]),
    ("jobs", [[3], [], [], []]),
])
def test_a_cached_value_validation_refuses_is_never_taken(fleet: Path, estop_cache: Path, field, value) -> None:
    expected = read(fleet)
    (kept,) = estop_cache.glob("*.windows.json")
    lines = kept.read_bytes().split(b"\n")
    names = json.loads(lines[0])["fields"]
    order = [w.name for w in expected]
    column = [value[0] if name == order[0] else None for name in order] if field == "run" else value
    lines[2 + names.index(field)] = json.dumps(column).encode()
    kept.write_bytes(b"\n".join(lines))
    assert all(identical(a, b) for a, b in zip(expected, read(fleet), strict=False))
