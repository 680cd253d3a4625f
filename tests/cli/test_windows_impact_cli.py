"""`hermes windows impact NAME` and `hermes check --at T --for D --impact` (issue 47), run as real
subprocesses against a real fleet root (a profile home, cron tables, the board). The subprocesses
read the real clock, so the window is a one-shot well ahead of it (as `check --at`'s tests do)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop.consumers.board import Board
from hermes_estop.consumers.crontable import CronTable
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile

#: a one-shot window well ahead of the real clock the subprocesses read
WINDOW_AT = (datetime.now(UTC) + timedelta(days=20)).replace(minute=0, second=0, microsecond=0)


def iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


@pytest.fixture
def fleet(hermes):
    """A fleet root with one window `upgrade` ([WINDOW_AT, +1h), drained 15 min, admitting 42),
    one-shot jobs inside it in the root (owner 7 and 42) and in profile ops, and two ready cards."""
    root = hermes.home
    (root / "profiles" / "ops").mkdir(parents=True)
    WindowsFile(root).save([Window.parse({"name": "upgrade", "at": iso(WINDOW_AT), "duration": "1h", "drain": "15m",
                                          "allow": {"user_ids": ["42"]}})])
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
