"""`consumers.impact` (issue 47): what a window's occurrence, or a pause, holds back, decided as
the consumers' own gates decide: a table of windows (selectors, allowlists, scopes, drain, DST,
one-shots) against cron jobs, then the cards, the gateway, the consumers and the catch-up rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hermes_estop.consumers.board import Card
from hermes_estop.consumers.crontable import CronJob, next_occurrence
from hermes_estop.consumers.impact import MAX_RUNS, HomeJobs, Impact, impact, starving_line
from hermes_estop.fleet.registry.entries import ConsumerState
from hermes_estop.fleet.registry.roster import ConsumerRow
from hermes_estop.model.homes import Layout
from hermes_estop.stores.registry import ConsumerEntry
from hermes_estop.windows.forecast import planned_holds, window_ahead
from hermes_estop.windows.ledger import SKIPPED, entry_for
from hermes_estop.windows.model import Window
from hermes_estop.windows.occurrences import upcoming

#: a Monday noon; the nightly window's next occurrence is [02:00, 04:00) the next day, drained from 01:45
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
NIGHTLY = {"name": "nightly", "cron": "0 2 * * *", "duration": "2h", "drain": "15m", "allow": {"user_ids": ["42"]}}


def job(name: str, schedule: str | None = "30 2 * * *", *, tz: str = "UTC", owner: str | None = "7",
        profile: str | None = None, at: datetime | None = None, now: datetime = NOW,
        timeout: timedelta = timedelta(hours=1), no_overlap: bool = False) -> CronJob:
    first = at if schedule is None else next_occurrence(schedule, tz, now)
    return CronJob(name, "true", schedule, tz, at, owner, profile, timeout, now, first, no_overlap_window=no_overlap)


def window_impact(layout: Layout, window: dict[str, Any], tables: list[HomeJobs], now: datetime = NOW,
                  **inputs: Any) -> Impact:
    """The impact of `window`'s next occurrence (the holds its scheduler would arm for it)."""
    parsed = Window.parse(window)
    occurrence = upcoming(parsed, now, 1)[0]
    holds = [h for h in planned_holds(window_ahead(parsed, occurrence.arm_at), occurrence.end) if h.occurrence == occurrence.ident]
    scopes = {"fleet": layout.location("fleet"), "ops": layout.location("ops")}
    return impact(holds, occurrence.arm_at, occurrence.end, now, tables=tables, locations=scopes, **inputs)


def counts(found: Impact) -> dict[str, tuple[int, int]]:
    return {j.name: (j.held_count, j.run_count) for j in found.jobs}


ROOT, OPS = "/fleet", "/fleet/profiles/ops"


@pytest.mark.parametrize(("window", "tables", "now", "expected"), [
    pytest.param(NIGHTLY, [HomeJobs(ROOT, None, (job("backup"), job("late", "0 5 * * *")))], NOW,
                 {"backup": (1, 0)}, id="full-hold-holds-a-run-inside-and-lists-no-run-outside"),
    pytest.param(NIGHTLY, [HomeJobs(ROOT, None, (job("maint", owner="42"), job("backup")))], NOW,
                 {"maint": (0, 1), "backup": (1, 0)}, id="a-job-in-its-own-windows-allowlist-runs"),
    pytest.param(NIGHTLY | {"only": ["kanban"]}, [HomeJobs(ROOT, None, (job("backup"),))], NOW,
                 {"backup": (0, 1)}, id="only-kanban-leaves-cron-running"),
    pytest.param(NIGHTLY | {"only": ["cron"]}, [HomeJobs(ROOT, None, (job("backup"),))], NOW,
                 {"backup": (1, 0)}, id="only-cron-holds-cron"),
    pytest.param(NIGHTLY | {"jobs": ["backup-*"]}, [HomeJobs(ROOT, None, (job("backup-db"), job("report")))], NOW,
                 {"backup-db": (1, 0), "report": (0, 1)}, id="jobs-glob-holds-only-matching-jobs"),
    pytest.param(NIGHTLY | {"scope": "ops"},
                 [HomeJobs(ROOT, None, (job("root-own"), job("root-for-ops", profile="ops"))),
                  HomeJobs(OPS, "ops", (job("ops-own"),))], NOW,
                 {"root-own": (0, 1), "root-for-ops": (1, 0), "ops-own": (1, 0)},
                 id="profile-window-holds-its-home-and-jobs-naming-it"),
    pytest.param(NIGHTLY | {"allow": {"profiles": ["ops"], "user_ids": ["42"]}},
                 [HomeJobs(OPS, "ops", (job("ops-job", owner="42", profile="ops"), job("ops-anon", owner="42")))], NOW,
                 {"ops-job": (0, 1), "ops-anon": (1, 0)}, id="allowlist-with-profiles-admits-only-jobs-naming-one"),
    pytest.param(NIGHTLY, [HomeJobs(ROOT, None, (job("in-drain", "50 1 * * *"), job("before", "40 1 * * *")))], NOW,
                 {"in-drain": (1, 0)}, id="the-drain-lead-holds-too"),
    pytest.param(NIGHTLY, [HomeJobs(ROOT, None, (job("at-end", "0 4 * * *"),))], NOW, {}, id="the-end-is-open"),
    pytest.param(NIGHTLY, [HomeJobs(ROOT, None, (job("half-hourly", "*/30 * * * *"),))], NOW,
                 {"half-hourly": (4, 0)}, id="every-run-inside-is-held"),
    pytest.param(NIGHTLY, [HomeJobs(ROOT, None, (job("long", "30 1 * * *", timeout=timedelta(minutes=30),
                                                     no_overlap=True),))], NOW,
                 {"long": (1, 0)}, id="no-overlap-job-held-before-the-drain"),
    pytest.param({"name": "spring", "cron": "0 1 * * *", "timezone": "Europe/Berlin", "duration": "3h"},
                 [HomeJobs(ROOT, None, (job("gap", tz="Europe/Berlin", now=datetime(2027, 3, 27, 12, tzinfo=UTC)),
                                        job("four", "0 4 * * *", tz="Europe/Berlin",
                                            now=datetime(2027, 3, 27, 12, tzinfo=UTC)),
                                        job("five", "0 5 * * *", tz="Europe/Berlin",
                                            now=datetime(2027, 3, 27, 12, tzinfo=UTC))))],
                 datetime(2027, 3, 27, 12, tzinfo=UTC),
                 # [00:00, 03:00) UTC = 01:00 CET to 05:00 CEST: 02:30 (in the gap: 03:00 CEST) and 04:00 held
                 {"gap": (1, 0), "four": (1, 0)}, id="dst-spring-forward-window"),
    pytest.param({"name": "autumn", "cron": "0 2 * * *", "timezone": "Europe/Berlin", "duration": "90m"},
                 [HomeJobs(ROOT, None, (job("twice", tz="Europe/Berlin", now=datetime(2026, 10, 24, 12, tzinfo=UTC)),
                                        job("utc-half", "*/30 * * * *", now=datetime(2026, 10, 24, 12, tzinfo=UTC))))],
                 datetime(2026, 10, 24, 12, tzinfo=UTC),
                 # [00:00, 01:30) UTC from 02:00 CEST: 02:30 local happens twice, runs once; 00:00, 00:30, 01:00 UTC
                 {"twice": (1, 0), "utc-half": (3, 0)}, id="dst-fall-back-window"),
    # a Berlin window 02:00-04:00 and a New York job at 20:30: the two zones change clocks two weeks apart
    pytest.param({"name": "berlin", "cron": "0 2 * * *", "timezone": "Europe/Berlin", "duration": "2h"},
                 [HomeJobs(ROOT, None, (job("ny", "30 20 * * *", tz="America/New_York",
                                           now=datetime(2027, 3, 20, 12, tzinfo=UTC)),))],
                 datetime(2027, 3, 20, 12, tzinfo=UTC),
                 # New York on EDT, Berlin still on CET: 00:30 UTC, before [01:00, 03:00) UTC
                 {}, id="job-in-another-zone-between-the-two-dst-changes-runs-before-it"),
    pytest.param({"name": "berlin", "cron": "0 2 * * *", "timezone": "Europe/Berlin", "duration": "2h"},
                 [HomeJobs(ROOT, None, (job("ny", "30 20 * * *", tz="America/New_York",
                                           now=datetime(2027, 3, 28, 12, tzinfo=UTC)),))],
                 datetime(2027, 3, 28, 12, tzinfo=UTC),
                 # both on summer time: [00:00, 02:00) UTC holds 00:30 UTC (20:30 EDT)
                 {"ny": (1, 0)}, id="job-in-another-zone-after-both-dst-changes-is-held"),
    pytest.param({"name": "once", "at": "2026-06-03T10:00:00Z", "duration": "1h"},
                 [HomeJobs(ROOT, None, (job("one-shot", None, at=datetime(2026, 6, 3, 10, 30, tzinfo=UTC)),
                                        job("after", None, at=datetime(2026, 6, 3, 11, 0, tzinfo=UTC))))], NOW,
                 {"one-shot": (1, 0)}, id="one-shot-window-holds-a-one-shot-job"),
])
def test_window_holds_back_the_runs_its_gate_would_hold(root_layout, window, tables, now, expected):
    assert counts(window_impact(root_layout, window, tables, now)) == expected


def test_held_job_runs_once_at_the_lift_then_at_its_next_occurrence(root_layout):
    found = window_impact(root_layout, NIGHTLY, [HomeJobs(ROOT, None, (job("half-hourly", "*/30 * * * *"),))])
    [held] = found.jobs
    assert held.held == tuple(datetime(2026, 6, 2, h, m, tzinfo=UTC) for h, m in ((2, 0), (2, 30), (3, 0), (3, 30)))
    assert (held.catch_up, held.then) == (datetime(2026, 6, 2, 4, tzinfo=UTC), datetime(2026, 6, 2, 4, 30, tzinfo=UTC))
    assert held.to_json()["after_lift"] == {"runs_once_at": "2026-06-02T04:00:00+00:00",
                                            "then": "2026-06-02T04:30:00+00:00"}


def test_one_shot_job_runs_at_the_lift_and_never_again(root_layout):
    window = {"name": "once", "at": "2026-06-03T10:00:00Z", "duration": "1h"}
    found = window_impact(root_layout, window, [HomeJobs(ROOT, None, (
        job("one-shot", None, at=datetime(2026, 6, 3, 10, 30, tzinfo=UTC)),))])
    assert (found.jobs[0].catch_up, found.jobs[0].then) == (datetime(2026, 6, 3, 11, tzinfo=UTC), None)


def test_totals_count_runs_and_homes(root_layout):
    found = window_impact(root_layout, NIGHTLY, [HomeJobs(ROOT, None, (job("a", "*/30 * * * *"), job("m", owner="42"))),
                                                 HomeJobs(OPS, "ops", (job("b"),))])
    assert (found.held_runs, found.homes, len(found.held_jobs)) == (5, 2, 2)
    assert found.totals().startswith("holds back 5 cron runs in 2 homes, 0 ready cards; gateway turns held")


def test_runs_past_the_bound_are_counted_not_listed(root_layout):
    window = NIGHTLY | {"duration": "8h"}
    found = window_impact(root_layout, window, [HomeJobs(ROOT, None, (job("minutely", "* * * * *"),))])
    [held] = found.jobs
    assert (len(held.held), held.held_count) == (MAX_RUNS, 8 * 60 + 15)


def card(id_: int, owner: str | None, profile: str | None, status: str = "ready", minutes_ago: int = 0) -> Card:
    since = NOW - timedelta(minutes=minutes_ago)
    return Card(id_, f"card-{id_}", "true", status, owner, profile, since, since)


@pytest.mark.parametrize(("window", "waiting", "by_profile", "oldest"), [
    pytest.param(NIGHTLY, 3, {None: 1, "ops": 1, "dev": 1}, 3, id="fleet-window-holds-every-ready-card-but-the-admitted"),
    pytest.param(NIGHTLY | {"scope": "ops"}, 1, {"ops": 1}, 2, id="profile-window-holds-its-assignees-cards"),
    pytest.param(NIGHTLY | {"only": ["cron"]}, 0, {}, None, id="cron-only-window-holds-no-card"),
    pytest.param(NIGHTLY | {"jobs": ["dev"]}, 1, {"dev": 1}, 3, id="jobs-glob-matches-the-assignee"),
])
def test_ready_cards_that_would_wait(root_layout, window, waiting, by_profile, oldest):
    cards = [card(1, "7", None, minutes_ago=5), card(2, "7", "ops", minutes_ago=10), card(3, "8", "dev", minutes_ago=60),
             card(4, "42", None, minutes_ago=90), card(5, "7", None, status="todo", minutes_ago=120)]
    layout_scopes = {"fleet": root_layout.location("fleet"), "ops": root_layout.location("ops"),
                     "dev": root_layout.location("dev")}
    parsed = Window.parse(window)
    occurrence = upcoming(parsed, NOW, 1)[0]
    holds = planned_holds(window_ahead(parsed, occurrence.arm_at), occurrence.end)
    found = impact(holds, occurrence.arm_at, occurrence.end, NOW, cards=cards, locations=layout_scopes).cards
    assert (found.waiting, dict(found.by_profile), found.oldest_id) == (waiting, by_profile, oldest)
    assert found.proceeding == 4 - waiting  # the admitted owner's card always goes ahead; todo never counts


@pytest.mark.parametrize(("window", "held"), [
    pytest.param(NIGHTLY, [{"scope": "fleet", "admits": {"user_ids": ["42"], "profiles": []}}], id="full-window"),
    pytest.param(NIGHTLY | {"only": ["cron", "kanban"]}, [], id="not-covering-the-gateway"),
    pytest.param(NIGHTLY | {"only": ["gateway"], "scope": "ops", "allow": {}},
                 [{"scope": "ops", "admits": {"user_ids": [], "profiles": []}}], id="gateway-only-at-a-profile"),
])
def test_gateway_turns_held_where_a_hold_covers_the_gateway(root_layout, window, held):
    found = window_impact(root_layout, window, [])
    assert found.to_json()["gateway"] == {"held": bool(held), "holds": held}


def consumer(component: str, scopes: tuple[str, ...], pid: int, state: ConsumerState = ConsumerState.LIVE) -> ConsumerRow:
    entry = ConsumerEntry(component=component, host="h", pid=pid, pid_start=1, home="/f", profile=None, scopes=scopes,
                          version="t", interval=5.0, registered_at=NOW, reported_at=NOW)
    return ConsumerRow(entry, state, True, 0.0)


@pytest.mark.parametrize(("window", "owing"), [
    pytest.param(NIGHTLY, [1, 2, 3], id="full-fleet-window-every-live-consumer"),
    pytest.param(NIGHTLY | {"only": ["kanban"]}, [2], id="kanban-only-window-the-dispatcher"),
    pytest.param(NIGHTLY | {"scope": "ops"}, [2, 3], id="profile-window-the-consumers-honouring-it"),
])
def test_consumers_that_will_owe_an_acknowledgement(root_layout, window, owing):
    rows = [consumer("cron", ("fleet",), 1), consumer("kanban", ("*",), 2), consumer("cron", ("ops", "fleet"), 3),
            consumer("cron", ("*",), 4, ConsumerState.LOST)]
    found = window_impact(root_layout, window, [], consumers=rows)
    assert [row.entry.pid for row in found.consumers] == owing


def test_an_unreadable_table_and_a_bad_row_are_problem_lines(root_layout):
    bad = job("bad")
    bad = CronJob("bad", "true", "61 * * * *", "UTC", None, "7", None, timedelta(hours=1), NOW, bad.next_run_at)
    found = window_impact(root_layout, NIGHTLY, [HomeJobs(ROOT, None, (bad, job("good"))),
                                                 HomeJobs(OPS, "ops", problem="damaged")])
    assert counts(found) == {"good": (1, 0)}
    assert [p.split(":")[0] for p in found.problems] == ["cron job bad of /fleet", "cron table of /fleet/profiles/ops"]
    assert "at least this much" in found.totals()


WEEK = timedelta(days=7)


def week_impact(layout: Layout, window: dict[str, Any], jobs: tuple[CronJob, ...], skip: int | None = None) -> Impact:
    """The impact of every occurrence of `window` over the week from NOW (the `skip`-th, counted
    from 0, skipped in the ledger), as `windows validate` asks it."""
    parsed = Window.parse(window)
    entries = {}
    if skip is not None:
        target = upcoming(parsed, NOW, skip + 1)[skip]
        entries[target.key] = entry_for(target, SKIPPED, NOW, None, "skipped by the operator (test)")
    holds = planned_holds(window_ahead(parsed, NOW), NOW + WEEK, entries)
    return impact(holds, NOW, NOW + WEEK, NOW, tables=[HomeJobs(ROOT, None, jobs)],
                  locations={"fleet": layout.location("fleet")})


@pytest.mark.parametrize(("window", "jobs", "skip", "starving"), [
    pytest.param({"name": "nightly", "cron": "0 2 * * *", "duration": "2h"}, (job("nightly-job"), job("other", "0 5 * * *")),
                 None, ["nightly-job"], id="nightly-job-inside-a-nightly-window-starves"),
    pytest.param({"name": "nightly", "cron": "0 2 * * *", "duration": "2h"}, (job("nightly-job"),),
                 3, [], id="a-skip-that-frees-one-run-saves-it"),
    pytest.param({"name": "nightly", "cron": "0 2 * * *", "duration": "2h", "allow": {"user_ids": ["7"]}},
                 (job("nightly-job"),), None, [], id="an-admitted-owner-never-starves"),
    pytest.param({"name": "weekdays", "cron": "0 2 * * 1-5", "duration": "2h"}, (job("nightly-job"),),
                 None, [], id="weekend-runs-free-it"),
    pytest.param({"name": "nightly", "cron": "0 2 * * *", "duration": "2h", "jobs": ["other"]}, (job("nightly-job"),),
                 None, [], id="a-window-not-covering-it"),
])
def test_starving_jobs_are_those_every_run_of_which_is_held(root_layout, window, jobs, skip, starving):
    found = week_impact(root_layout, window, jobs, skip)
    assert [j.name for j in found.jobs if j.starves] == starving


def test_the_starving_line_names_the_job_and_the_window(root_layout):
    found = week_impact(root_layout, {"name": "nightly", "cron": "0 2 * * *", "duration": "2h"}, (job("nightly-job"),))
    [starved] = found.jobs
    assert starved.held_by == ("window:nightly",)
    assert starving_line(starved, WEEK).startswith(
        "cron job nightly-job (home /fleet, owner 7) never runs on its schedule in the next 7d: all 7 of its runs "
        "fall inside nightly")


def test_a_run_is_shown_in_the_local_zone_and_in_the_jobs_own(root_layout, zone_pinner):
    zone_pinner("Asia/Tokyo")
    found = window_impact(root_layout, {"name": "berlin", "cron": "0 2 * * *", "timezone": "Europe/Berlin",
                                        "duration": "2h"},
                          [HomeJobs(ROOT, None, (job("ny", "30 20 * * *", tz="America/New_York"),))])
    [held] = found.to_json()["cron"]
    # 2026-06-02 00:30 UTC: 09:30 in Tokyo (the reader's zone), 20:30 the evening before in New York
    assert held["held"] == [{"at": "2026-06-02T00:30:00+00:00", "local": "2026-06-02T09:30:00+09:00",
                             "job_zone": "2026-06-01T20:30:00-04:00"}]
