"""`hermes cron add --no-overlap-window` (issue 11 section 3): before starting such a job the
runner forecasts `[now, now + timeout)` and does not start a run that a window (or a hold's
deadline-less stand) would cut off: it is held like a gated run (not run, `next_run_at` unmoved,
reported with the reason naming the window). A job without the flag is untouched."""

from __future__ import annotations

import json
import logging

import pytest

from hermes_estop.cli import main
from hermes_estop.consumers.cron import CronRunner
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile

from .helpers import T0, at


def window(root, **fields):
    data = {"name": "maint", "at": at(10, 30).isoformat(), "duration": "1h", "reason": "db upgrade", **fields}
    WindowsFile(root).save([Window.parse(data)])


def add_job(table, marker, *, flag=True, timeout="30m", owner=None, profile="p1"):
    return table.add("report", f"echo report >> {marker}", now=T0, schedule="*/5 * * * *", owner=owner,
                     profile=profile, timeout=timeout, no_overlap_window=flag)


@pytest.mark.parametrize(("fields", "timeout", "runs"), [
    pytest.param({}, "30m", False, id="timeout-crosses-the-window-start"),
    pytest.param({}, "25m", True, id="timeout-ends-at-the-window-start-half-open"),
    pytest.param({"drain": "10m"}, "20m", False, id="timeout-crosses-the-drain-lead"),
    pytest.param({"drain": "10m"}, "15m", True, id="timeout-ends-at-the-drain-start"),
    pytest.param({"allow": {"user_ids": ["op"]}}, "30m", True, id="owner-admitted-by-the-window"),
    pytest.param({"scope": "p2"}, "30m", True, id="window-on-a-profile-the-job-does-not-run-under"),
])
def test_a_run_the_window_would_cut_off_is_held(p1, root, clock, table, marker, appended, fields, timeout, runs):
    window(root, **fields)
    add_job(table, marker, timeout=timeout, owner="op")
    report = CronRunner(p1).tick(clock.set(at(10, 5)))
    if runs:
        assert (report.executed, report.held) == (1, ())
        assert appended(marker) == ["report"]
        assert table.get("report").next_run_at == at(10, 10)
    else:
        assert report.executed == 0 and [h.name for h in report.held] == ["report"]
        assert "window:maint" in report.held[0].notice and "--no-overlap-window" in report.held[0].notice
        assert appended(marker) == []
        assert table.get("report").next_run_at == at(10, 5)


def test_a_job_without_the_flag_runs_into_the_window(p1, root, clock, table, marker, appended):
    window(root)
    add_job(table, marker, flag=False)
    assert CronRunner(p1).tick(clock.set(at(10, 5))).executed == 1
    assert appended(marker) == ["report"]


def test_a_window_on_the_profile_the_job_runs_for_holds_it(p1, root, clock, table, marker, appended):
    """The job is in p1's table but runs for p2: its forecast covers p2's locations too."""
    window(root, scope="p2")
    add_job(table, marker, profile="p2")
    report = CronRunner(p1).tick(clock.set(at(10, 5)))
    assert [h.name for h in report.held] == ["report"] and "window:maint at p2" in report.held[0].notice


def test_held_across_ticks_then_runs_once_after_the_window(p1, root, clock, table, marker, appended, caplog):
    window(root)
    add_job(table, marker)
    runner = CronRunner(p1)
    with caplog.at_level(logging.INFO, logger="hermes_estop.cron"):
        for minute in (5, 6, 11, 40):
            assert runner.tick(clock.set(at(10, minute))).held
    assert table.get("report").next_run_at == at(10, 5)
    logged = [r.getMessage() for r in caplog.records if r.name == "hermes_estop.cron"]
    assert len(logged) == 1 and "window:maint" in logged[0]  # logged once, not once per tick
    report = runner.tick(clock.set(at(11, 30)))  # the window has ended (half-open)
    assert report.executed == 1
    assert appended(marker) == ["report"]
    assert table.get("report").next_run_at == at(11, 35)


def test_a_windows_file_that_does_not_validate_holds_the_run_and_does_not_park_it(p1, root, clock, table, marker,
                                                                                   appended):
    (root / "windows.toml").write_text('[[windows]]\nname = "x"\ncron = "bad"\nduration = "1h"\n')
    add_job(table, marker)
    report = CronRunner(p1).tick(clock.set(at(10, 5)))
    assert [h.name for h in report.held] == ["report"] and "windows.toml" in report.held[0].notice
    job = table.get("report")
    assert job.next_run_at == at(10, 5) and job.last is None
    assert appended(marker) == []


def test_the_flag_without_a_timeout_is_refused_before_anything_is_written(table, marker):
    with pytest.raises(InvalidArgument, match="--timeout"):
        add_job(table, marker, timeout=None)
    assert table.jobs() == []


def test_cli_add_records_the_flag_and_refuses_it_without_timeout(cli_env, capsys):
    assert main(["cron", "add", "guarded", "--cron", "0 3 * * *", "--command", "true", "--no-overlap-window"]) == 2
    _, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "--timeout" in err
    assert main(["cron", "add", "guarded", "--cron", "0 3 * * *", "--command", "true", "--timeout", "2h",
                 "--no-overlap-window", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["no_overlap_window"] is True
    assert main(["cron", "add", "plain", "--cron", "0 3 * * *", "--command", "true", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["no_overlap_window"] is False
    assert main(["cron", "list", "--json"]) == 0
    jobs = {job["name"]: job["no_overlap_window"] for job in json.loads(capsys.readouterr().out)["jobs"]}
    assert jobs == {"guarded": True, "plain": False}
