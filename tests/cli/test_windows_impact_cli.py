"""`hermes windows impact NAME` and `hermes check --at T --for D --impact` (issue 47), run in this
process against a real fleet root (a profile home, cron tables, the board). The commands read the
real clock, so the window is a one-shot well ahead of it (as `check --at`'s tests do)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cli_runner import SRC

from hermes_estop.consumers.board import Board
from hermes_estop.consumers.crontable import CronTable
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile

#: the subject is each command's output, exit code and files: `hermes` runs in this process
HERMES_IN_PROCESS = True

#: a one-shot window well ahead of the real clock the commands read
WINDOW_AT = (datetime.now(UTC) + timedelta(days=20)).replace(minute=0, second=0, microsecond=0)


def iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


@pytest.fixture
def fleet(hermes):
    """A fleet root with one window `upgrade` ([WINDOW_AT, +1h), drained 15 min, admitting 42),
    one-shot jobs inside it in the root (owner 7 and 42) and in profile ops, and two ready cards;
    beside it a disabled window `off` over the same hour and a one-shot `gone` long past."""
    root = hermes.home
    (root / "profiles" / "ops").mkdir(parents=True)
    WindowsFile(root).save([Window.parse({"name": "upgrade", "at": iso(WINDOW_AT), "duration": "1h", "drain": "15m",
                                          "allow": {"user_ids": ["42"]}}),
                            Window.parse({"name": "off", "at": iso(WINDOW_AT), "duration": "1h", "enabled": False}),
                            Window.parse({"name": "gone", "at": "2020-01-01T00:00:00Z", "duration": "1h"})])
    now = datetime.now(UTC)
    table = CronTable(root)
    table.add("migrate", "true", now=now, at=WINDOW_AT + timedelta(minutes=10), owner="7")
    table.add("operator", "true", now=now, at=WINDOW_AT + timedelta(minutes=20), owner="42")
    CronTable(root / "profiles" / "ops").add("sync", "true", now=now, at=WINDOW_AT - timedelta(minutes=5), owner="9")
    board = Board(root)
    board.add("a", "true", owner="7", profile="ops", ready=True)
    board.add("b", "true", owner="8", ready=True)
    return hermes


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_impact_prints_the_totals_first_then_each_home(fleet):
    lines = fleet("windows", "impact", "upgrade", check=0).stdout.splitlines()
    assert lines[0].startswith("window upgrade at fleet, ")
    assert lines[0].endswith(": holds back 2 cron runs in 2 homes, 2 ready cards; gateway turns held; "
                             "0 consumers will owe an acknowledgement")
    assert any(line.startswith("  held  migrate (owner 7): 1 run(s)") for line in lines)
    assert any(line.startswith("  runs  operator (owner 42): 1 run(s)") for line in lines)
    assert any(line.startswith("  held  sync (owner 9): 1 run(s)") for line in lines)  # in the drain lead
    assert "kanban: 2 ready card(s) would wait" in "\n".join(lines)


def test_impact_json_shape(fleet):
    data = json.loads(fleet("windows", "impact", "upgrade", "--json", check=0).stdout)
    assert data["totals"] == {"held_runs": 2, "held_jobs": 2, "homes": 2, "ready_cards_waiting": 2,
                              "gateway_held": True, "consumers_owing": 0}
    assert (data["window"], data["skipped"], data["start"]) == ("upgrade", False,
                                                               (WINDOW_AT - timedelta(minutes=15)).isoformat())
    migrate = next(job for job in data["cron"] if job["job"] == "migrate")
    assert migrate["held"][0]["at"] == (WINDOW_AT + timedelta(minutes=10)).isoformat()
    assert migrate["after_lift"] == {"runs_once_at": (WINDOW_AT + timedelta(hours=1)).isoformat(), "then": None}
    assert data["kanban"]["by_profile"] == {"": 1, "ops": 1}
    assert data["gateway"]["holds"] == [{"scope": "fleet", "admits": {"user_ids": ["42"], "profiles": []}}]


def test_a_skipped_occurrence_says_it_arms_nothing(fleet):
    fleet("windows", "skip", "upgrade", "--next", check=0)
    first = fleet("windows", "impact", "upgrade", check=0).stdout.splitlines()[0]
    assert "[skipped: arms nothing]: holds back 0 cron runs in 0 homes, 0 ready cards" in first


@pytest.mark.parametrize(("args", "expected"), [
    pytest.param(["windows", "impact", "upgrad"], "no window named 'upgrad'", id="unknown-name-with-a-guess"),
    pytest.param(["windows", "impact", "upgrade", "--occurrence", "2"], "fewer than 2 occurrence(s) ahead",
                 id="beyond-a-one-shot"),
    pytest.param(["windows", "impact", "upgrade", "--occurrence", "0"], "invalid --occurrence 0", id="occurrence-zero"),
    pytest.param(["windows", "impact", "upgrade", "--occurrence", "-1"], "invalid --occurrence -1", id="occurrence-negative"),
    pytest.param(["windows", "impact", "upgrade", "--occurrence", "x"], "invalid --occurrence 'x'",
                 id="occurrence-not-a-number"),
    pytest.param(["windows", "impact", "upgrade", "--occurrence", "1_0"], "invalid --occurrence '1_0'",
                 id="occurrence-python-literal"),
    pytest.param(["windows", "impact", "upgrade", "--occurrence", "10001"], "invalid --occurrence 10001",
                 id="occurrence-past-the-bound"),
    pytest.param(["windows", "impact", "gone"], "window gone has fewer than 1 occurrence(s) ahead",
                 id="one-shot-already-past"),
    pytest.param(["check", "--at", "now", "--impact"], "--impact needs --for DUR", id="impact-without-for"),
    pytest.param(["check", "--impact"], "--impact needs --at TIME --for DUR", id="impact-without-at"),
    pytest.param(["check", "--at", "now", "--for", "1h", "--impact", "--user", "7"], "--user does not apply",
                 id="impact-with-user"),
])
def test_bad_input_is_one_line_and_exit_2(fleet, args, expected):
    result = fleet(*args, check=2)
    line = one_error_line(result)
    assert expected in line
    if "upgrad'" in line:
        assert "did you mean 'upgrade'?" in line


@pytest.mark.parametrize(("extra", "held_runs", "cards"), [
    pytest.param([], 3, 2, id="fleet-pause-holds-everything"),
    pytest.param(["--profile", "ops"], 1, 1, id="profile-pause-holds-its-home-and-its-cards"),
    pytest.param(["--component", "kanban"], 0, 2, id="kanban-only-pause-holds-no-cron-run"),
    pytest.param(["--component", "cron", "--job", "mig*"], 1, 0, id="job-glob-pause-holds-the-matching-job"),
])
def test_check_impact_previews_an_unplanned_pause(fleet, extra, held_runs, cards):
    at = iso(WINDOW_AT - timedelta(minutes=30))
    data = json.loads(fleet("check", "--at", at, "--for", "2h", "--impact", "--json", *extra, check=0).stdout)
    assert (data["totals"]["held_runs"], data["totals"]["ready_cards_waiting"]) == (held_runs, cards)
    text = fleet("check", "--at", at, "--for", "2h", "--impact", *extra, check=0).stdout.splitlines()[0]
    assert text.startswith("a 2h pause") and f"holds back {held_runs} cron run" in text


def test_status_says_the_next_windows_totals(fleet):
    lines = fleet("status", check=0).stdout.splitlines()
    [line] = [line for line in lines if line.startswith("next window ")]
    assert line.startswith("next window upgrade (") and "holds back 2 cron runs, 2 ready" in line
    data = json.loads(fleet("status", "--json", check=0).stdout)
    assert data["next_window_impact"]["held_runs"] == 2 and data["next_window_impact"]["window"] == "upgrade"


def test_a_disabled_window_arms_nothing_and_holds_back_nothing(fleet):
    first = fleet("windows", "impact", "off", check=0).stdout.splitlines()[0]
    assert first.startswith("window off at fleet, ") and "[disabled: arms nothing]: holds back 0 cron runs in 0 homes, " \
        "0 ready cards; gateway turns not held" in first


def json_block_after(heading: str) -> dict:
    """The first ```json block of docs/windows.md after `heading`, parsed."""
    text = (Path(SRC).parent / "docs" / "windows.md").read_text()
    section = text[text.index(heading):]
    return json.loads(section[section.index("```json\n") + len("```json\n"):section.index("\n```", section.index("```json"))])


def shape(value):
    """The keys of `value`, nested (a list by its first item): what a script reading it relies on."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return None


def test_impact_json_has_the_shape_docs_windows_md_documents(fleet):
    documented = shape(json_block_after("## What a window will hold back"))
    data = shape(json.loads(fleet("windows", "impact", "upgrade", "--json", check=0).stdout))
    # the fixture has no registered consumer: the documented `consumers` is empty too
    assert data == documented
    pause = shape(json.loads(fleet("check", "--at", "now", "--for", "2h", "--impact", "--json", check=0).stdout))
    window_fields = {"now", "window", "scope", "enabled", "skipped", "occurrence"}
    assert set(pause) == set(documented) - window_fields | {"pause"}
    assert pause["pause"] == {"scope": None, "start": None, "end": None, "covers": None}


def write_row(table: Path, **changes: object) -> None:
    """Append to a home's cron table a copy of its first row with `changes`, as a hand edit would."""
    data = json.loads(table.read_text())
    data["jobs"].append(data["jobs"][0] | changes)
    table.write_text(json.dumps(data))


def test_control_characters_in_a_job_are_escaped_in_human_output(fleet):
    write_row(fleet.home / "cron" / "jobs.json", name="evil\x1b[31m\nforged", owner="7\x07")
    for args in (["windows", "impact", "upgrade"], ["check", "--at", iso(WINDOW_AT), "--for", "1h", "--impact"]):
        out = fleet(*args, check=0).stdout
        assert "\x1b" not in out and "\x07" not in out and not any(line.startswith("forged") for line in out.splitlines())
        assert "evil\\x1b[31m\\x0aforged (owner 7\\x07)" in out
    assert json.loads(fleet("windows", "impact", "upgrade", "--json", check=0).stdout)["cron"][0]["job"] == \
        "evil\x1b[31m\nforged"


@pytest.mark.parametrize(("path", "damage", "unreadable"), [
    pytest.param("cron/jobs.json", b'{"format": 1, "jobs": [{"name":', "cron table of ", id="truncated-cron-table"),
    pytest.param("cron/jobs.json", b"\x00\xff" * 64, "cron table of ", id="binary-cron-table"),
    pytest.param("kanban.db", b"not a database at all" * 64, "kanban board: ", id="garbage-board"),
    pytest.param("kanban.db", None, "kanban board: ", id="directory-planted-as-the-board"),
])
def test_a_damaged_table_or_board_is_one_unreadable_line_never_a_traceback(fleet, path, damage, unreadable):
    target = fleet.home / path
    for companion in (target, *(target.with_name(target.name + s) for s in ("-wal", "-shm"))):
        companion.unlink(missing_ok=True)
    if damage is None:
        target.mkdir()
    else:
        target.write_bytes(damage)
    for args in (["windows", "impact", "upgrade"], ["check", "--at", iso(WINDOW_AT), "--for", "1h", "--impact"]):
        result = fleet(*args, check=0)
        assert "Traceback" not in result.stderr + result.stdout
        lines = result.stdout.splitlines()
        assert lines[0].endswith("(1 input(s) unreadable: at least this much)")
        [line] = [line for line in lines if line.startswith("unreadable: ")]
        assert line.startswith(f"unreadable: {unreadable}")
    status = fleet("status", check=0)
    assert "Traceback" not in status.stderr
    [line] = [line for line in status.stdout.splitlines() if line.startswith("next window ")]
    assert "holds back at least " in line
