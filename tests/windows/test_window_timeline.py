"""The scheduler's decisions looked up in the compiled schedule plan exactly what the exact
functions plan (issue 35): `schedule.ScheduleTimeline` against the exact functions (`EXACT`) over a varied
file and random instants, before, inside and past the schedule's horizon; a daemon pass with the
schedule ready against a pass without it, through edits the file guard holds back; and a
schedule of other bytes than the windows in use is never asked."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from schedule_queries import EXACT, rows, scope_plan, wakeups_for

from hermes_estop.model.hold import Allow, Hold, HoldState, Reading
from hermes_estop.model.homes import Location
from hermes_estop.windows.model import Occurrence, Window
from hermes_estop.windows.occurrences import covering
from hermes_estop.windows.schedule import (
    HORIZON,
    Part,
    Schedules,
    ScheduleTimeline,
    Windows,
    build,
    schedule_of,
)
from hermes_estop.windows.scheduler import due_wakeups
from hermes_estop.windows.windows_file import WindowsFile

BUILT = datetime(2027, 3, 1, 6, 17, tzinfo=UTC)
#: a schedule built this late answers nothing the tests ask: every answer is the exact functions'
FAR = BUILT + timedelta(days=365)
SCOPES = ("fleet", "ops", "web")
SCOPE = Location("fleet", Path("/nonexistent"))
#: the sentinel a plan meets: none, a manual hold, a hold a window armed, an unreadable one
READINGS = [
    Reading(SCOPE, HoldState.ABSENT),
    Reading(SCOPE, HoldState.ACTIVE, Hold("manual", BUILT, "by hand", None, Allow())),
    Reading(SCOPE, HoldState.ACTIVE, Hold("g1", BUILT, "ours?", BUILT + timedelta(hours=1), Allow(), "window:c00",
                                          {"name": "c00", "occurrence": BUILT.isoformat()})),
    Reading(SCOPE, HoldState.UNREADABLE, problem="not JSON"),
]


#: the one seed of the walk and plan tests: `varied` makes every shape by index, whatever the seed
#: (a second seed doubled their 90 s for the same shapes; issue 45); the compiled answers against
#: an independent oracle over random files are tests/windows/test_schedule_oracle.py's
SEED = 35


def _by_scope(windows: list[Window]) -> dict[str, list[Window]]:
    """The enabled windows of each scope, in file order (the scheduler's lanes without selectors)."""
    out: dict[str, list[Window]] = {}
    for window in windows:
        if window.enabled:
            out.setdefault(window.scope, []).append(window)
    return out


def _lane(timeline: ScheduleTimeline, lane: list[Window]) -> Windows:
    """The windows of `lane` as rows of `timeline` (the scheduler's lane of one schedule)."""
    return timeline.windows.subset([timeline.schedule.row_of(w.name) for w in lane])


def varied(rng: random.Random, count: int = 36) -> list[Window]:
    """Windows of every shape the scheduler plans: cron with and without a drain lead, back to
    back and overlapping on one scope, every 15 minutes, DST zones, bounds, excluded dates,
    disabled, and one-shots (one off the whole second)."""
    windows = []
    for i in range(count):
        minute, hour = rng.choice([0, 15, 30, rng.randrange(60)]), rng.randrange(24)
        data: dict[str, object] = {"name": f"c{i:02d}", "cron": f"{minute} {hour} * * *",
                                   "duration": rng.choice(["15m", "1h", "3h", "25h"]),
                                   "timezone": rng.choice(["UTC", "Europe/Berlin", "America/New_York"]),
                                   "scope": rng.choice(SCOPES)}
        if i % 4 == 0:
            data["drain"] = rng.choice(["5m", "2h"])
        if i % 7 == 0:
            data["not_after"] = (BUILT + timedelta(days=rng.randrange(1, 9))).isoformat()
        if i % 9 == 0:
            data["exclude"] = [(BUILT + timedelta(days=d)).date().isoformat() for d in (1, 7)]
        if i % 11 == 0:
            data["cron"] = "*/15 * * * *"
            data["duration"] = "15m"
        if i % 13 == 5:
            data["enabled"] = False
        windows.append(Window.parse(data))
    for i in range(8):
        at = BUILT + timedelta(hours=rng.randrange(-30, 230))
        windows.append(Window.parse({"name": f"a{i}", "at": at.isoformat(), "duration": "90m",
                                     "drain": "30m" if i % 2 else None, "scope": rng.choice(SCOPES)}))
    # a lead longer than the period (eight occurrences armed at once), for ever; a one-shot off
    # the whole second (the schedule keeps whole seconds: the exact functions answer for it)
    windows.append(Window.parse({"name": "q", "cron": "*/15 * * * *", "duration": "15m", "drain": "2h",
                                 "scope": rng.choice(SCOPES)}))
    windows.append(Window.parse({"name": "frac", "at": (BUILT + timedelta(hours=5, seconds=0.5)).isoformat(),
                                 "duration": "1h", "scope": rng.choice(SCOPES)}))
    return windows


def instants(rng: random.Random, count: int) -> list[datetime]:
    """Random instants from a day before the build to two days past the horizon's end, and the
    horizon's edges themselves."""
    edges = [BUILT, BUILT + HORIZON - timedelta(seconds=1), BUILT + HORIZON, BUILT - timedelta(seconds=1),
             BUILT + HORIZON - timedelta(minutes=50), BUILT + timedelta(hours=5, minutes=30)]
    span = int((HORIZON + timedelta(days=3)).total_seconds())
    return edges + [BUILT - timedelta(days=1) + timedelta(seconds=rng.randrange(span)) for _ in range(count)]


@pytest.mark.parametrize("seed", [35, 36, 37])
def test_the_schedule_answers_each_question_as_the_exact_functions(seed):
    rng = random.Random(seed)
    windows = varied(rng)
    timeline = ScheduleTimeline(build("digest", windows, BUILT))
    for now in instants(rng, 60):
        for window in windows:
            covered = timeline.covering(window, now)
            assert covered == EXACT.covering(window, now), (window.name, now)
            assert [o.arm_at for o in covered] == [o.arm_at for o in EXACT.covering(window, now)]
            upcoming = timeline.first_armed(window, now)
            assert upcoming == EXACT.first_armed(window, now), (window.name, now)
            if upcoming is not None:
                assert timeline.after(window, upcoming) == EXACT.after(window, upcoming), (window.name, upcoming)



def _taken(armed: Iterator[Occurrence], count: int) -> list[tuple[str, datetime, datetime]]:
    return [(o.key, o.arm_at, o.end) for o in itertools.islice(armed, count)]


@pytest.mark.parametrize("seed", [SEED])
def test_the_schedule_walks_the_occurrences_in_arm_order_as_the_exact_merge(seed):
    """`armed_after` (what `chain_end` walks) read off the schedule's list sorted by arm
    instant, past the end of its horizon, with and without a window it cannot stand for."""
    rng = random.Random(seed)
    windows = varied(rng)
    timeline = ScheduleTimeline(build("digest", windows, BUILT))
    lanes = [*_by_scope(windows).values(), [w for w in windows if w.name != "frac"]]
    for now in instants(rng, 15):
        for lane in lanes:
            walk = timeline.armed_after(_lane(timeline, lane), now)
            assert _taken(walk, 400) == _taken(EXACT.armed_after(lane, now), 400), now


@pytest.mark.parametrize("seed", [SEED])
def test_a_schedule_of_some_of_a_lanes_windows_walks_it_in_arm_order_as_the_exact_merge(seed):
    """A lane whose windows are only partly rows of the schedule (the rows of another schedule,
    of which some are another version's): the rows walked off the schedule, the others merged in."""
    rng = random.Random(seed)
    windows = varied(rng)
    timeline = ScheduleTimeline(build("digest", windows[::2], BUILT))
    lanes = [*_by_scope(windows).values(), [w for w in windows if w.enabled]]
    others = [rows(lane, BUILT) for lane in lanes]  # every window a row of another schedule
    for now in instants(rng, 15):
        for lane, other in zip(lanes, others, strict=True):
            walk = timeline.armed_after(other, now)
            assert _taken(walk, 400) == _taken(EXACT.armed_after(lane, now), 400), now


#: what makes a file's windows not one version of its own: a table that fails, a calendar beside them
NOT_OWN = {
    "a failing table": lambda text: text.replace('duration = "', 'duration = "x', 1),
    "a window excluding a calendar": lambda text: text + ('\n[[windows]]\nname = "cal"\ncron = "*/20 * * * *"\n'
                                                          'duration = "25m"\nexclude_calendar = "holidays.ics"\n'),
}


@pytest.mark.parametrize("how", sorted(NOT_OWN))
def test_a_daemon_on_windows_not_the_files_own_plans_what_the_exact_timeline_plans(harness, how):
    """A file with a table that does not validate has no schedule of its bytes the daemon acts
    on: its passes plan from a schedule compiled in memory of the windows they act on
    (`Schedules.compose`, the failing table's last version included). A file with a window
    excluding a calendar's days is planned from its own schedule, of its feed as it reads (what
    covers now and the wake-ups those of the exact functions). Over two days, its plans are
    those of a fresh service at each instant."""
    rng = random.Random(36)
    _profiles(harness)
    (harness.root / "holidays.ics").write_text("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\nEND:VCALENDAR\r\n")
    windows = varied(rng)
    harness.write(*windows)
    harness.clock.set(BUILT)
    harness.start()
    exact_service = harness.new_service()  # plans only: never builds a schedule
    exact_service.plan(harness.clock.now)  # it read the file before the change, as the daemon did
    harness.file.path.write_text(NOT_OWN[how](harness.file.path.read_text()))
    harness.clock.advance(seconds=1)
    exact_service.plan(harness.clock.now)
    report = harness.service.tick(harness.clock.now)
    assert len(report.failed) == (how == "a failing table")
    # the file's own schedule (of its feed) the passes act on; none of a file with a failing table
    fed = how == "a window excluding a calendar"
    assert (harness.service.schedules.held(harness.file.path.read_bytes()) is not None) == fed
    read = harness.file.parse_each(harness.file.path.read_bytes()).windows
    while harness.clock.now < BUILT + timedelta(days=2):
        harness.clock.advance(minutes=rng.choice([1, 15, 45, 180]))
        now = harness.clock.now
        _passes_agree(harness, exact_service, now)
        if fed:
            report = harness.service.plan(now)[0]
            assert report.active == sorted(o.key for w in read if w.enabled for o in covering(w, now)), now
            assert report.wakeups == wakeups_for(read, now), now
        harness.service.tick(now)


@pytest.mark.parametrize("seed", [SEED])
def test_a_schedule_compiled_in_memory_walks_the_occurrences_in_arm_order_as_the_exact_merge(seed, tmp_path):
    """`Schedules.compose` (the schedule of windows that are not one version of the file's
    own: calendars, a table that does not validate, the guard's put-back) through passes moving
    forward (the list put together anew each time, its rows kept), for every lane and the whole
    file; what covers now and the wake-ups as the exact functions say."""
    rng = random.Random(seed)
    windows = varied(rng)
    enabled = [w for w in windows if w.enabled]
    schedules = Schedules(tmp_path / "windows.toml")
    lanes = [*_by_scope(windows).values(), enabled]
    for now in sorted(instants(rng, 25)):
        listed = schedules.compose([Part.of(w) for w in windows], now)  # a list put together anew
        timeline = listed.timeline
        for lane in lanes:
            walk = timeline.armed_after(_lane(timeline, lane), now)
            assert _taken(walk, 400) == _taken(EXACT.armed_after(lane, now), 400), now
        covered = timeline.covering_now(listed, now)
        assert covered == {w.name: covering(w, now) for w in enabled if covering(w, now)}, now
        assert due_wakeups(timeline, listed, covered, now) == wakeups_for(windows, now), now


def _shape(plan: object) -> str:
    """Everything a plan says, its occurrences' drain leads included (which `==` ignores)."""
    return repr(dataclasses.astuple(plan))  # type: ignore[call-overload]


@pytest.mark.parametrize("seed", [SEED])
def test_a_plan_from_the_schedule_is_the_exact_plan(seed):
    rng = random.Random(seed)
    windows = varied(rng)
    timeline = ScheduleTimeline(build("digest", windows, BUILT))
    lanes = _by_scope(windows)
    exact_lanes = {scope: rows(on_scope, FAR) for scope, on_scope in lanes.items()}  # before its horizon: exact
    for now in instants(rng, 40):
        for scope, on_scope in lanes.items():
            for reading in READINGS:
                exact = scope_plan(scope, now, exact_lanes[scope], {}, reading)
                assert _shape(scope_plan(scope, now, _lane(timeline, on_scope), {}, reading)) == _shape(exact), \
                    (scope, now)


def _profiles(harness) -> None:
    for scope in SCOPES[1:]:
        (harness.root / "profiles" / scope).mkdir(parents=True, exist_ok=True)


def _passes_agree(harness, exact_service, now: datetime) -> None:
    """The dry run of the service with the schedule and of one without it plan the same."""
    report, plans = harness.service.plan(now)
    exact_report, exact_plans = exact_service.plan(now)
    assert [_shape(p) for p in plans] == [_shape(p) for p in exact_plans], now
    assert (report.active, report.wakeups, report.pending) == (exact_report.active, exact_report.wakeups,
                                                               exact_report.pending), now


def test_a_daemon_pass_from_the_schedule_plans_what_the_exact_timeline_plans(harness):
    """A walk of about ten days (past the horizon's end) in steps of minutes to hours, with
    edits that arm at once and edits the guard holds back (a window shortened: its last
    version stays in force until confirmed); before each pass, the dry run of the service
    whose schedule is ready and of one that never builds one agree, then the first acts."""
    rng = random.Random(35)
    _profiles(harness)
    windows = varied(rng)
    harness.write(*windows)
    harness.clock.set(BUILT)
    harness.start()
    exact_service = harness.new_service()  # never warmed: every answer is the exact one
    exact_service.plan(BUILT)  # it validated these bytes before any schedule of them was kept
    raw = harness.file.path.read_bytes()
    assert isinstance(harness.service.schedules.held(raw), ScheduleTimeline)
    # a new scheduler: its windows are the kept schedule's rows (and again after each edit
    # whose schedule was kept before it read it)
    rows_service = harness.new_service()
    _passes_agree(harness, rows_service, harness.clock.now)
    assert isinstance(rows_service.schedules.held(raw), ScheduleTimeline)  # its windows were the schedule's rows
    while harness.clock.now < BUILT + HORIZON + timedelta(days=3):
        harness.clock.advance(minutes=rng.choice([1, 15, 45, 180, 400]))
        if rng.random() < 0.06:
            k = rng.randrange(len(windows))
            longer = rng.random() < 0.5  # longer: acts at once; shorter: the guard holds it back
            windows[k] = windows[k].model_copy(update={"duration": windows[k].duration * (2 if longer else 0.5)})
            harness.write(*windows)
        _passes_agree(harness, exact_service, harness.clock.now)
        _passes_agree(harness, rows_service, harness.clock.now)
        harness.service.tick(harness.clock.now)


def test_a_schedule_of_other_bytes_is_never_used(harness):
    """`long` holds 02:00-06:00 and `next` 06:00-07:00 back to back: one hold until 07:00. An
    edit moves `next` to 07:00 (a weakening: the guard keeps its 06:00 version in force until
    confirmed). A schedule of the edited bytes, ready, must not answer for the version in force:
    the chain still runs to 07:00, as the exact functions compute it (asked of the edited
    bytes, `next` would arm after `long` lifts and the hold would be cut to 06:00)."""
    start = BUILT.replace(hour=2, minute=0)
    harness.write({"name": "long", "cron": "0 2 * * *", "duration": "4h"},
                  {"name": "next", "cron": "0 6 * * *", "duration": "1h"})
    harness.clock.set(start + timedelta(minutes=10))
    harness.start()
    assert harness.reading().hold.expires_at == start + timedelta(hours=5)
    edited = [Window.parse({"name": "long", "cron": "0 2 * * *", "duration": "4h"}),
              Window.parse({"name": "next", "cron": "0 7 * * *", "duration": "1h"})]
    harness.write(*edited)
    raw = harness.file.path.read_bytes()
    service = harness.service
    service.schedules.keep(raw, edited, harness.clock.now)  # the edited bytes' schedule, ready
    assert isinstance(service.schedules.held(raw), ScheduleTimeline)
    harness.clock.advance(seconds=1)
    report = service.tick(harness.clock.now)
    assert report.pending is not None  # the guard keeps the 06:00 version of `next` in force
    assert harness.reading().hold.expires_at == start + timedelta(hours=5)


def test_the_holder_answers_only_for_the_bytes_its_schedule_is_of(tmp_path):
    windows = [Window.parse({"name": "w", "cron": "0 2 * * *", "duration": "1h"})]
    raw = b'[[windows]]\nname = "w"\ncron = "0 2 * * *"\nduration = "1h"\n'
    holder = Schedules(tmp_path / "windows.toml")
    assert holder.held(raw) is None  # nothing built yet
    holder.keep(raw, windows, BUILT)
    ready = holder.held(raw)
    assert isinstance(ready, ScheduleTimeline) and ready.schedule.digest == hashlib.sha256(raw).hexdigest()
    for other in (raw + b"\n", raw.replace(b"1h", b"2h"), None):
        assert holder.held(other) is None


def test_the_holder_acts_on_a_schedule_of_a_feed_only_while_the_feed_reads_the_same(tmp_path, kept_schedule):
    """A row excluding a feed's days is of the feed as read: the schedule is written with the
    feed's fingerprint for the operators' commands and held for the passes (a new holder takes
    the one written), whose windows the pass still validates (`rows` is None: a feed may fail);
    once the feed reads otherwise, neither holder answers with it."""
    tmp_path.chmod(0o755)
    holidays = tmp_path / "holidays.ics"
    holidays.write_text("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\nEND:VCALENDAR\r\n")
    raw = (b'[[windows]]\nname = "w"\ncron = "0 2 * * *"\nduration = "1h"\n\n[[windows]]\nname = "x"\n'
           b'cron = "0 3 * * *"\nduration = "1h"\nexclude_calendar = "holidays.ics"\n')
    (tmp_path / "windows.toml").write_bytes(raw)
    windows = WindowsFile(tmp_path).load()
    holder = Schedules(tmp_path / "windows.toml")
    holder.keep(raw, windows, BUILT)
    assert isinstance(holder.held(raw), ScheduleTimeline)
    kept = kept_schedule(tmp_path / "windows.toml", raw, BUILT)
    assert kept is not None and list(kept.names) == ["w", "x"] and list(kept.feeds or ()) == ["holidays.ics"]
    reader = Schedules(tmp_path / "windows.toml")
    assert reader.rows(raw, BUILT) is None and isinstance(reader.held(raw), ScheduleTimeline)
    holidays.write_text("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:y\r\nEND:VCALENDAR\r\n")
    assert holder.held(raw) is None and reader.held(raw) is None


def _spread(count: int, *, every: int = 1, extra: str = "") -> str:
    """`count` daily windows of 5 minutes, starting `every` minutes apart from 00:00, all on the
    fleet scope, every third one with a selector (its own lane)."""
    tables = []
    for i in range(count):
        minute = i * every
        selector = 'only = ["cron"]\n' if i % 3 == 2 else ""
        tables.append(f'[[windows]]\nname = "w{i:03d}"\ncron = "{minute % 60} {minute // 60 % 24} * * *"\n'
                      f'duration = "5m"\n{selector}')
    return "\n".join(tables) + extra


def _as_a_new_process(parses: list[str]) -> None:
    """Forget the parses counted so far (a new `hermes serve`)."""
    parses.clear()


def _kept_by_a_first_service(harness, kept_schedule) -> bytes:
    """The schedule of the file as it is, written by an operator's command."""
    schedule_of(harness.file, harness.clock.now)
    raw = harness.file.path.read_bytes()
    assert kept_schedule(harness.file.path, raw, harness.clock.now) is not None
    return raw


@pytest.mark.parametrize("minutes", [10, 62, 125])
def test_a_warm_pass_builds_windows_only_for_the_rows_it_acts_on(harness, parses, minutes, kept_schedule):
    """200 windows with a trusted compiled schedule of the file's bytes: a new scheduler's
    passes validate a `Window` only for the windows whose occurrences cover now (the ones its
    holds are made of), not the 200 (the old code validated the whole file first), and arm what
    the exact functions say."""
    harness.file.path.write_text(_spread(200))
    harness.clock.set(BUILT.replace(hour=0, minute=0))
    _kept_by_a_first_service(harness, kept_schedule)
    exact_report = harness.service.plan(BUILT.replace(hour=0, minute=0) + timedelta(minutes=minutes))[0]
    _as_a_new_process(parses)
    harness.clock.set(BUILT.replace(hour=0, minute=0) + timedelta(minutes=minutes))
    service = harness.new_service()
    report = service.tick(harness.clock.now)
    covering = {key.split("/", 1)[1].split("@", 1)[0] for key in report.active}
    assert report.active == exact_report.active and covering
    assert set(parses) <= covering, sorted(set(parses) - covering)
    assert {e.window for e in harness.entries().values()} == covering
    parses.clear()
    harness.clock.advance(minutes=7)  # those end, the next ones cover now
    report = service.tick(harness.clock.now)
    now_covering = {key.split("/", 1)[1].split("@", 1)[0] for key in report.active}
    assert set(parses) <= now_covering | covering and len(parses) <= 2 * len(now_covering | covering)


@pytest.mark.parametrize("edit", ["lengthened", "added"])
def test_a_pass_after_an_edit_validates_only_the_edited_table_and_keeps_its_schedule(harness, parses, edit, kept_schedule):
    """A running scheduler whose file is edited compiles the new bytes table by table, an
    unchanged table's row taken from the schedule kept before (as an operator's command does),
    instead of validating all 200 windows again; it plans what the exact functions plan, and
    the schedule it compiled is kept for the next command."""
    text = _spread(200)
    harness.file.path.write_text(text)
    harness.clock.set(BUILT.replace(hour=0, minute=0))
    _kept_by_a_first_service(harness, kept_schedule)
    _as_a_new_process(parses)
    service = harness.new_service()
    service.tick(harness.clock.now)
    if edit == "lengthened":
        text = text.replace('name = "w001"\ncron = "1 0 * * *"\nduration = "5m"', 'name = "w001"\ncron = "1 0 * * *"\nduration = "1h"')
    else:
        text += '\n[[windows]]\nname = "w150b"\ncron = "1 0 * * *"\nduration = "5m"\n'
    assert text != harness.file.path.read_text()
    harness.file.path.write_text(text)
    parses.clear()
    harness.clock.advance(minutes=2)
    report = service.tick(harness.clock.now)
    covering = {key.split("/", 1)[1].split("@", 1)[0] for key in report.active}
    assert ("w150b" if edit == "added" else "w001") in covering
    assert len(parses) <= 1 + 2 * len(covering), f"{len(parses)} windows validated after a one-table edit"
    assert kept_schedule(harness.file.path, harness.file.path.read_bytes(), harness.clock.now) is not None
    _as_a_new_process(parses)
    assert report.active == harness.new_service().plan(harness.clock.now)[0].active


def test_a_scheduler_started_on_a_kept_schedule_sees_edits_and_holds_back_a_removal(harness, parses, kept_schedule):
    """A scheduler that took its windows from the schedule (no `Window` validated, not even the
    armed one's: its reason and allowlist are read off its table, issue 45) still
    arms a window an edit adds at the next pass, and still holds back an edit that takes away a
    window holding now until the file stays the same (the guard compares the rows it trusted)."""
    harness.file.path.write_text(_spread(30, every=2))
    harness.clock.set(BUILT.replace(hour=0, minute=1))
    _kept_by_a_first_service(harness, kept_schedule)
    _as_a_new_process(parses)
    service = harness.new_service()
    report = service.tick(harness.clock.now)
    assert report.active and parses == []
    held = harness.reading().hold
    assert held is not None and held.window["name"] == "w000"
    harness.file.path.write_text(_spread(30, every=2) + '\n[[windows]]\nname = "added"\ncron = "0 0 * * *"\n'
                                 'duration = "3h"\n')
    harness.clock.advance(seconds=5)
    report = service.tick(harness.clock.now)
    assert report.pending is None and harness.reading().hold.expires_at == BUILT.replace(hour=3, minute=0)
    harness.file.path.write_text(_spread(30, every=2).replace('name = "w000"', 'name = "gone"'))
    harness.clock.advance(seconds=5)
    report = service.tick(harness.clock.now)
    assert report.pending is not None and "w000" in report.pending
    assert harness.reading().hold.expires_at == BUILT.replace(hour=3, minute=0)


def test_a_failing_table_has_no_schedule_and_is_reported_by_a_new_scheduler(harness, parses, kept_schedule):
    """A schedule is written only for a file that validates whole, so a table that does not
    validate sends every new scheduler to the whole validation: reported, the others armed."""
    harness.file.path.write_text(_spread(20) + '\n[[windows]]\nname = "bad"\ncron = "61 * * * *"\nduration = "1h"\n')
    harness.clock.set(BUILT.replace(hour=0, minute=1))
    harness.service.tick(harness.clock.now)
    raw = harness.file.path.read_bytes()

    assert kept_schedule(harness.file.path, raw, harness.clock.now) is None
    _as_a_new_process(parses)
    report = harness.new_service().tick(harness.clock.now)
    assert len(report.failed) == 1 and "bad" in report.failed[0]
    assert report.active and harness.reading().hold is not None


@pytest.mark.parametrize("count", [1, 2, 10])
def test_next_arms_reads_the_arm_order_only_until_every_row_is_met(count, monkeypatch):
    """A week of minutely starts is 10,080 arms a row: asked for more windows than a lane has,
    the walk stops at the last row's first arm, not at the end of the horizon."""
    windows = [Window.parse({"name": f"w{n}", "cron": f"{n} * * * *", "duration": "2m"}) for n in range(2)]
    windows.append(Window.parse({"name": "every", "cron": "* * * * *", "duration": "1m"}))
    timeline = ScheduleTimeline(build("digest", windows, BUILT))
    walked = []
    rows_armed = ScheduleTimeline._rows_armed

    def counted(self, *args):
        for item in rows_armed(self, *args):
            walked.append(item)
            yield item

    monkeypatch.setattr(ScheduleTimeline, "_rows_armed", counted)
    found = timeline.next_arms(timeline.windows, BUILT, count)
    armed = sorted((EXACT.first_armed(window, BUILT), window.name) for window in windows)
    assert [(name, o) for name, o in found] == [(name, o) for o, name in armed[:count]]
    assert 0 < len(walked) <= 60 + 2, len(walked)  # at most an hour of minutely arms, and the two hourly
