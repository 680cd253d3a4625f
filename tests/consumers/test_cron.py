"""cron: due jobs are gated by their owner and profile; held jobs keep their next run; missed
occurrences coalesce into one run after the lift."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import pytest

from hermes_estop import Allow, EstopError, StoreError
from hermes_estop.consumers.cron import CronRunner, DuplicateJob, UnknownJob

from .helpers import T0, at, finishes


def add_job(table, marker, name="report", *, schedule="*/5 * * * *", owner=None, profile="p1", now=T0, **kw):
    return table.add(name, f"echo {name} >> {marker}", now=now, schedule=schedule, owner=owner, profile=profile, **kw)


def test_held_job_does_not_run_and_keeps_next_run_at_across_held_ticks(p1, clock, table, marker, appended):
    add_job(table, marker)
    assert table.get("report").next_run_at == at(10, 5)
    p1.engage(reason="maintenance", fleet=True)
    runner = CronRunner(p1)
    for minute in (6, 11, 16):
        report = runner.tick(clock.set(at(10, minute)))
        assert [held.name for held in report.held] == ["report"]
        assert report.executed == 0
        assert "maintenance" in report.held[0].notice
        assert table.get("report").next_run_at == at(10, 5)
    assert appended(marker) == []


@pytest.mark.parametrize("lift", ["release", "deadman"])
def test_job_that_missed_three_occurrences_runs_once_after_the_lift(p1, clock, table, marker, appended, lift):
    add_job(table, marker)
    p1.engage(reason="maintenance", ttl="17m" if lift == "deadman" else None, fleet=True)
    runner = CronRunner(p1)
    for minute in (6, 11, 16):  # the 10:05, 10:10 and 10:15 occurrences are missed
        assert runner.tick(clock.set(at(10, minute))).held
    if lift == "release":
        p1.release(fleet=True)
    report = runner.tick(clock.set(at(10, 17, 30)))
    assert (report.executed, report.held, report.failed) == (1, (), ())
    assert appended(marker) == ["report"]
    job = table.get("report")
    assert job.next_run_at == at(10, 20)
    assert job.last is not None and job.last.ok
    for second in (40, 50):
        assert runner.tick(clock.set(at(10, 17, second))).executed == 0
    assert appended(marker) == ["report"]


@pytest.mark.parametrize(
    "owner, profile, runs",
    [
        ("op", "p1", True),     # the allowlisted operator's maintenance job, in its own profile
        ("bob", "p1", False),   # wrong user on the right profile
        (None, "p1", False),    # a job without an owner is nobody's: held
        ("op", "p2", False),    # right user, a profile the hold does not list
    ],
)
def test_only_a_job_the_allowlist_admits_runs_during_the_hold(p1, clock, table, marker, appended,
                                                               owner, profile, runs):
    add_job(table, marker, owner=owner, profile=profile)
    p1.engage(reason="window", allow=Allow.of(["op"], ["p1"]), fleet=True)
    report = CronRunner(p1).tick(clock.set(at(10, 6)))
    assert report.executed == (1 if runs else 0)
    assert len(report.held) == (0 if runs else 1)
    assert appended(marker) == (["report"] if runs else [])


def test_allowlisted_and_other_owners_side_by_side(p1, clock, table, marker, appended):
    add_job(table, marker, "maint", owner="op")
    add_job(table, marker, "theirs", owner="bob")
    p1.engage(allow={"user_ids": ["op"]})
    report = CronRunner(p1).tick(clock.set(at(10, 6)))
    assert report.started == ("maint",)
    assert [held.name for held in report.held] == ["theirs"]
    assert table.get("theirs").next_run_at == at(10, 5)
    assert table.get("maint").next_run_at == at(10, 10)
    assert appended(marker) == ["maint"]


def test_a_hold_in_another_profiles_home_does_not_hold_this_job(estop_for, p1, clock, table, marker, appended):
    add_job(table, marker)
    estop_for("p2").engage(reason="p2 only")
    assert CronRunner(p1).tick(clock.set(at(10, 6))).executed == 1


def test_a_job_for_another_profile_honours_that_profiles_hold(estop_for, p1, clock, table, marker):
    add_job(table, marker, profile="p2")
    estop_for("p2").engage(reason="p2 only")
    report = CronRunner(p1).tick(clock.set(at(10, 6)))
    assert [held.name for held in report.held] == ["report"]


def test_one_shot_job_waits_for_the_lift_then_never_runs_again(p1, clock, table, marker, appended):
    table.add("once", f"echo once >> {marker}", now=T0, at="2026-06-01T10:03:00Z")
    p1.engage()
    runner = CronRunner(p1)
    assert runner.tick(clock.set(at(10, 4))).held
    p1.release()
    assert runner.tick(clock.set(at(10, 30))).started == ("once",)
    assert table.get("once").next_run_at is None
    assert runner.tick(clock.set(at(11, 30))).executed == 0
    assert appended(marker) == ["once"]


def test_failing_job_is_counted_failed_with_its_exit_status(p1, clock, table, tmp_path):
    table.add("broken", "echo boom >&2; exit 3", now=T0, schedule="* * * * *")
    report = CronRunner(p1).tick(clock.set(at(10, 2)))
    assert report.executed == 1
    [run] = report.failed
    assert (run.name, run.result.status, run.result.exit_code) == ("broken", "failed", 3)
    assert "boom" in run.result.detail
    assert table.get("broken").last.exit_code == 3
    assert report.to_json()["failed"] == 1


@pytest.mark.slow
def test_job_past_its_timeout_is_stopped_and_counted_failed(p1, clock, table):
    table.add("slow", "sleep 30", now=T0, schedule="* * * * *", timeout="1s")
    report = CronRunner(p1).tick(clock.set(at(10, 2)))
    [run] = report.failed
    assert run.result.status == "timeout"
    assert table.get("slow").claim is None


def test_a_job_still_running_is_not_started_again_by_another_tick(p1, clock, table, tmp_path):
    release = tmp_path / "go"
    table.add("long", f"while [ ! -e {release} ]; do sleep 0.02; done", now=T0, schedule="* * * * *")
    first, second = CronRunner(p1), CronRunner(p1)
    assert first.tick(clock.set(at(10, 1, 30)), wait=False).started == ("long",)
    report = second.tick(clock.set(at(10, 2, 30)), wait=False)
    assert (report.started, report.busy) == ((), ("long",))
    release.touch()
    [run] = first.drain(timeout=120)
    assert run.result.ok
    assert table.get("long").claim is None
    assert table.get("long").next_run_at == at(10, 2)
    assert second.tick(clock.set(at(10, 2, 40))).started == ("long",)


def test_a_stale_claim_lapses_so_the_job_runs_again(p1, clock, table, marker, appended):
    add_job(table, marker, timeout="1m")
    with table.edit() as jobs:  # a tick that claimed the job and died
        from dataclasses import replace

        from hermes_estop.consumers.cron import Claim

        jobs[0] = replace(jobs[0], claim=Claim("dead", at(10, 0), at(10, 2), 1))
    assert CronRunner(p1).tick(clock.set(at(10, 6))).started == ("report",)


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"schedule": "61 * * * *"}, "61 * * * *"),
        ({"schedule": "* * * * * *"}, "* * * * * *"),
        ({"schedule": "*/5 * * * *", "timezone": "Mars/Olympus"}, "Mars/Olympus"),
        ({"schedule": "*/5 * * * *", "name": "bad name"}, "bad name"),
        ({"schedule": "*/5 * * * *", "profile": "../etc"}, "../etc"),
        ({"schedule": "*/5 * * * *", "timeout": "soon"}, "soon"),
        ({"schedule": None, "at": "2026-06-01T09:00:00Z"}, "2026-06-01T09:00:00"),
        ({"schedule": None, "at": "tomorrow"}, "tomorrow"),
        ({"schedule": None}, "--at"),
    ],
)
def test_bad_input_is_refused_naming_the_value_and_nothing_is_written(table, marker, kwargs, named):
    add_job(table, marker, "keep")
    before = table.path.read_bytes()
    args = {"name": "new", "command": "true", "now": T0, "profile": "p1"}
    args.update(kwargs)
    name = args.pop("name")
    with pytest.raises(EstopError) as raised:
        table.add(name, args.pop("command"), **args)
    assert isinstance(raised.value, ValueError)
    assert named in str(raised.value)
    assert table.path.read_bytes() == before


def test_duplicate_name_is_refused_and_unknown_name_cannot_be_removed(table, marker):
    add_job(table, marker, "nightly")
    with pytest.raises(DuplicateJob, match="'nightly'"):
        add_job(table, marker, "nightly", schedule="0 3 * * *")
    assert table.get("nightly").schedule == "*/5 * * * *"
    assert table.remove("nightly").name == "nightly"
    with pytest.raises(UnknownJob, match="'nightly'"):
        table.remove("nightly")


def test_a_damaged_table_is_refused_and_left_as_it_is(p1, clock, table):
    table.dir.mkdir(parents=True)
    table.path.write_text("{not json")
    with pytest.raises(StoreError, match="damaged"):
        CronRunner(p1).tick(clock.set(at(10, 6)))
    assert table.path.read_text() == "{not json"


def test_table_is_json_with_utc_stamps(table, marker):
    add_job(table, marker, owner=424242)
    body = json.loads(table.path.read_text())
    [row] = body["jobs"]
    assert (row["owner"], row["next_run_at"], row["timezone"]) == ("424242", "2026-06-01T10:05:00+00:00", "UTC")


@pytest.mark.parametrize(
    "schedule, zone, created, first, again",
    [
        # 02:30 happens twice in Berlin on 2026-10-25 (CEST, then CET): the job runs at the first
        pytest.param("30 2 * * *", "Europe/Berlin", datetime(2026, 10, 24, 12, tzinfo=UTC),
                     datetime(2026, 10, 25, 0, 30, tzinfo=UTC), datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
                     id="berlin-02:30"),
        pytest.param("30 1 * * *", "America/New_York", datetime(2026, 10, 31, 12, tzinfo=UTC),
                     datetime(2026, 11, 1, 5, 30, tzinfo=UTC), datetime(2026, 11, 1, 6, 30, tzinfo=UTC),
                     id="new-york-01:30"),
    ],
)
def test_a_daily_job_runs_once_on_the_fall_back_day(p1, clock, table, marker, appended, schedule, zone, created,
                                                     first, again):
    add_job(table, marker, "nightly", schedule=schedule, timezone=zone, now=created)
    assert table.get("nightly").next_run_at == first
    runner = CronRunner(p1)
    assert runner.tick(clock.set(first)).started == ("nightly",)
    assert table.get("nightly").next_run_at == first + timedelta(days=1, hours=1)
    assert runner.tick(clock.set(again)).executed == 0  # the same wall time again, an hour later
    assert appended(marker) == ["nightly"]


@pytest.mark.parametrize("schedule, words", [("0 30 2 * * *", "exactly 5 fields"), ("H 2 * * *", "hashed"),
                                             ("0 0 31 2 *", "never fires")])
def test_a_job_schedule_is_refused_by_the_same_rules_as_a_window(table, marker, schedule, words):
    with pytest.raises(EstopError, match=words):
        add_job(table, marker, schedule=schedule)
    assert not table.exists()


def test_exactly_at_next_run_at_the_job_is_due(p1, clock, table, marker, appended):
    add_job(table, marker)
    runner = CronRunner(p1)
    assert runner.tick(clock.set(at(10, 5) - timedelta(microseconds=1))).executed == 0
    assert runner.tick(clock.set(at(10, 5))).executed == 1


def test_a_hand_damaged_job_is_parked_with_an_error_and_the_others_still_run(p1, clock, table, marker, appended):
    add_job(table, marker, "broken")
    add_job(table, marker, "fine")
    body = json.loads(table.path.read_text())
    body["jobs"][0]["timezone"] = "Not/AZone"
    table.path.write_text(json.dumps(body))
    report = CronRunner(p1).tick(clock.set(at(10, 6)))
    assert report.started == ("fine",)
    [run] = report.failed
    assert (run.name, run.result.status) == ("broken", "error") and "Not/AZone" in run.result.detail
    assert table.get("broken").next_run_at is None
    assert appended(marker) == ["fine"]


@pytest.mark.parametrize("where", ["table home", "named profile", "fleet root"])
def test_a_job_naming_another_profile_is_gated_on_every_location_it_runs_under(estop_for, p1, clock, table,
                                                                               marker, appended, where):
    add_job(table, marker, profile="p2")  # in p1's table: it runs with p1's HERMES_HOME
    holder = {"table home": p1, "named profile": estop_for("p2"), "fleet root": estop_for(None)}[where]
    holder.engage(reason=f"held at the {where}")
    report = CronRunner(p1).tick(clock.set(at(10, 6)))
    assert [held.name for held in report.held] == ["report"]
    assert appended(marker) == []
    assert table.get("report").next_run_at == at(10, 5)


def test_deny_wins_across_the_table_home_and_the_named_profile(estop_for, p1, clock, table, marker, appended):
    add_job(table, marker, owner="op", profile="p2")
    estop_for("p2").engage(reason="p2 lane", allow={"user_ids": ["op"]})
    p1.engage(reason="p1 strict")  # admits nobody
    assert CronRunner(p1).tick(clock.set(at(10, 6))).held
    p1.release()
    assert CronRunner(p1).tick(clock.set(at(10, 7))).started == ("report",)


@pytest.mark.parametrize("planted", ["fifo", "directory"])
def test_a_fifo_or_directory_at_the_table_is_refused_in_one_line_and_never_blocks(p1, clock, table, planted):
    table.dir.mkdir(parents=True)
    if planted == "fifo":
        os.mkfifo(table.path)
    else:
        table.path.mkdir()
    for call in (lambda: CronRunner(p1).tick(clock.set(at(10, 6))), table.jobs):
        kind, error = finishes(call)
        assert kind == "raised" and isinstance(error, StoreError), error
        assert str(table.path) in str(error) and ("FIFO" if planted == "fifo" else "directory") in str(error)
        assert "\n" not in str(error)


def test_a_fifo_at_a_jobs_log_fails_that_run_in_one_line_and_never_blocks(p1, clock, table, marker):
    add_job(table, marker)
    table.log_dir.mkdir(parents=True)
    os.mkfifo(table.log_dir / "report.log")
    kind, report = finishes(lambda: CronRunner(p1).tick(clock.set(at(10, 6))))
    assert kind == "returned"
    [run] = report.failed
    assert run.result.status == "error" and "FIFO" in run.result.detail
    assert table.get("report").claim is None


@pytest.mark.parametrize("field, value, named", [("timezone", "Not/AZone", "Not/AZone"), ("profile", "fleet", "fleet"),
                                                  ("profile", "../x", "../x"), ("timeout", 10**12, "")])
def test_any_hand_damaged_row_is_parked_and_the_others_still_run(p1, clock, table, marker, appended, field, value,
                                                                  named):
    add_job(table, marker, "broken")
    add_job(table, marker, "fine")
    body = json.loads(table.path.read_text())
    body["jobs"][0][field] = value
    table.path.write_text(json.dumps(body))
    report = CronRunner(p1).tick(clock.set(at(10, 6)))
    assert report.started == ("fine",)
    [run] = report.failed
    assert (run.name, run.result.status) == ("broken", "error") and named in run.result.detail
    assert appended(marker) == ["fine"]
