"""cronspec, the one cron math: croniter on the wall clock of the zone, placed on the time line by
the DST rule (a repeated fall-back start occurs once, at its first instant; a non-existent
spring-forward start moves to the first valid instant after it), and the refusals of bad
expressions and zones, each naming the value."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from croniter import CroniterBadDateError, croniter
from hypothesis import given, settings, strategies as st

from hermes_estop.model import cronspec
from hermes_estop.model.cronspec import (
    fires,
    first_start_after,
    probe_deferred,
    starts,
    validate_cron,
    validate_timezone,
    wall_to_instant,
)
from hermes_estop.model.errors import EstopError, InvalidArgument


def utc(*parts: int) -> datetime:
    return datetime(*parts).replace(tzinfo=UTC)  # type: ignore[arg-type]  # parts are year..second


def first(expr: str, zone: str, since: datetime, count: int) -> list[datetime]:
    out = []
    for start in starts(expr, ZoneInfo(zone), since):
        out.append(start)
        if len(out) == count:
            break
    return out


@pytest.mark.parametrize(
    "expr, zone, since, expected",
    [
        pytest.param("30 2 * * *", "Europe/Berlin", utc(2026, 3, 27, 12),
                     [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)],
                     id="berlin-spring-forward-moves-to-03:00-CEST"),
        pytest.param("30 2 * * *", "Europe/Berlin", utc(2026, 10, 23, 12),
                     [utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)],
                     id="berlin-fall-back-once-at-02:30-CEST"),
        pytest.param("30 2 * * *", "America/New_York", utc(2026, 3, 7, 0),
                     [utc(2026, 3, 7, 7, 30), utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30)],
                     id="new-york-spring-forward-moves-to-03:00-EDT"),
        pytest.param("30 1 * * *", "America/New_York", utc(2026, 10, 31, 0),
                     [utc(2026, 10, 31, 5, 30), utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)],
                     id="new-york-fall-back-once-at-01:30-EDT"),
        pytest.param("0 * * * *", "Europe/Berlin", utc(2026, 10, 24, 23, 30),
                     [utc(2026, 10, 25, 0), utc(2026, 10, 25, 2), utc(2026, 10, 25, 3)],
                     id="berlin-hourly-repeated-02:00-once"),
        pytest.param("*/15 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 12),
                     [utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 0), utc(2026, 3, 30, 0, 15)],
                     id="berlin-starts-inside-the-gap-collapse-into-one"),
        pytest.param("0 9 * * 1-5", "Asia/Kolkata", utc(2026, 6, 5, 0),
                     [utc(2026, 6, 5, 3, 30), utc(2026, 6, 8, 3, 30), utc(2026, 6, 9, 3, 30)],
                     id="kolkata-half-hour-offset-weekdays"),
        pytest.param("0 0 * * 0", "UTC", utc(2026, 6, 1),
                     [utc(2026, 6, 7), utc(2026, 6, 14), utc(2026, 6, 21)],
                     id="weekday-0-is-sunday"),
        pytest.param("0 0 * * *", "Pacific/Apia", utc(2011, 12, 28, 0),
                     [utc(2011, 12, 28, 10), utc(2011, 12, 29, 10), utc(2011, 12, 30, 10), utc(2011, 12, 31, 10)],
                     id="apia-skipped-day-collapses"),
        pytest.param("0 12 * * *", "UTC", utc(2026, 6, 1, 12),
                     [utc(2026, 6, 1, 12), utc(2026, 6, 2, 12)],
                     id="a-start-exactly-at-since-is-included"),
    ],
)
def test_starts_follow_the_dst_rule(expr, zone, since, expected):
    assert first(expr, zone, since, len(expected)) == expected


@pytest.mark.parametrize(
    "expr, zone, day",
    [
        pytest.param("30 2 * * *", "Europe/Berlin", (2026, 10, 25), id="berlin-02:30"),
        pytest.param("30 1 * * *", "America/New_York", (2026, 11, 1), id="new-york-01:30"),
    ],
)
def test_a_daily_start_in_the_repeated_hour_occurs_once_on_the_fall_back_day(expr, zone, day):
    tz = ZoneInfo(zone)
    local_midnight = datetime(*day).replace(tzinfo=tz)
    on_that_day = [s for s in first(expr, zone, local_midnight, 3) if s.astimezone(tz).date() == local_midnight.date()]
    assert len(on_that_day) == 1
    assert on_that_day[0].astimezone(tz).fold == 0
    assert wall_to_instant(datetime(*day).replace(hour=int(expr.split()[1]), minute=30), tz) == on_that_day[0]


@pytest.mark.parametrize(
    "zone, after, gap_end",
    [
        pytest.param("Europe/Berlin", utc(2026, 3, 28, 12), utc(2026, 3, 29, 1), id="berlin-03:00-CEST"),
        pytest.param("America/New_York", utc(2026, 3, 8, 0), utc(2026, 3, 8, 7), id="new-york-03:00-EDT"),
    ],
)
def test_a_start_in_the_spring_forward_gap_moves_to_the_gaps_end(zone, after, gap_end):
    start = first_start_after("30 2 * * *", ZoneInfo(zone), after)
    assert start == gap_end
    assert start.astimezone(ZoneInfo(zone)).strftime("%H:%M") == "03:00"


def test_croniter_alone_would_repeat_the_fall_back_start():
    """Why the wall-clock iteration exists: croniter in an aware zone yields 02:30 twice."""
    from croniter import croniter

    tz = ZoneInfo("Europe/Berlin")
    it = croniter("30 2 * * *", datetime(2026, 10, 24, 12, tzinfo=tz))
    raw = [it.get_next(datetime) for _ in range(2)]
    assert [d.astimezone(UTC) for d in raw] == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 30)]
    assert first("30 2 * * *", "Europe/Berlin", utc(2026, 10, 24, 12), 2) == [
        utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


@pytest.mark.parametrize(
    "wall, zone, expected",
    [
        pytest.param(datetime(2026, 3, 29, 2, 30), "Europe/Berlin", utc(2026, 3, 29, 1), id="gap"),
        pytest.param(datetime(2026, 3, 29, 2, 0), "Europe/Berlin", utc(2026, 3, 29, 1), id="gap-start"),
        pytest.param(datetime(2026, 3, 29, 3, 0), "Europe/Berlin", utc(2026, 3, 29, 1), id="gap-end"),
        pytest.param(datetime(2026, 10, 25, 2, 30), "Europe/Berlin", utc(2026, 10, 25, 0, 30), id="repeat-first"),
        pytest.param(datetime(2026, 3, 8, 2, 30), "America/New_York", utc(2026, 3, 8, 7), id="new-york-gap"),
        pytest.param(datetime(2026, 11, 1, 1, 30), "America/New_York", utc(2026, 11, 1, 5, 30),
                     id="new-york-repeat-first"),
        pytest.param(datetime(2026, 6, 1, 12, 0), "Europe/Berlin", utc(2026, 6, 1, 10), id="ordinary"),
        pytest.param(datetime(2026, 4, 5, 1, 45), "Australia/Lord_Howe", utc(2026, 4, 4, 14, 45), id="half-hour-repeat"),
    ],
)
def test_wall_to_instant(wall, zone, expected):
    assert wall_to_instant(wall, ZoneInfo(zone)) == expected


@pytest.mark.parametrize(
    "expr, zone, after, expected",
    [
        pytest.param("0 9 * * *", "America/New_York", utc(2026, 6, 1, 12), utc(2026, 6, 1, 13), id="in-the-zone"),
        pytest.param("*/5 * * * *", "UTC", utc(2026, 6, 1, 10, 5), utc(2026, 6, 1, 10, 10), id="strictly-after"),
        pytest.param("*/5 * * * *", "UTC", utc(2026, 6, 1, 10, 4, 59), utc(2026, 6, 1, 10, 5), id="just-before"),
        pytest.param("30 2 * * *", "Europe/Berlin", utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30),
                     id="not-the-repeated-02:30"),
    ],
)
def test_first_start_after_is_strictly_after(expr, zone, after, expected):
    assert first_start_after(expr, ZoneInfo(zone), after) == expected


@pytest.mark.parametrize(
    "expr, words",
    [
        pytest.param("61 2 * * *", "'61 2 * * *'", id="out-of-range"),
        pytest.param("not a cron at all", "croniter cannot parse it", id="garbage"),
        pytest.param("0 30 2 * * *", "exactly 5 fields", id="six-fields"),
        pytest.param("30 2 * *", "exactly 5 fields", id="four-fields"),
        pytest.param("@daily", "exactly 5 fields", id="alias"),
        pytest.param("0 0 31 2 *", "never fires", id="never-fires"),
        pytest.param("R 2 * * *", "random (R) and hashed (H)", id="random"),
        pytest.param("H 2 * * *", "random (R) and hashed (H)", id="hashed"),
        pytest.param(None, "None", id="not-text"),
        pytest.param(30, "30", id="a-number"),
    ],
)
def test_a_bad_cron_expression_is_refused_naming_it(expr, words):
    with pytest.raises(InvalidArgument) as caught:
        validate_cron(expr)
    message = str(caught.value)
    assert message.startswith(f"invalid cron expression {expr!r}")
    assert words in message and "\n" not in message
    assert isinstance(caught.value, EstopError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize("expr, normal", [("30  2 * * *", "30 2 * * *"), (" */15 * * * 1-5 ", "*/15 * * * 1-5"),
                                          ("0 0 * * SUN", "0 0 * * SUN")])
def test_a_good_cron_expression_comes_back_normalized(expr, normal):
    assert validate_cron(expr) == normal


@pytest.mark.parametrize(
    "name, words",
    [
        pytest.param("Mars/Olympus_Mons", "unknown timezone 'Mars/Olympus_Mons'", id="unknown"),
        pytest.param("../../etc/passwd", "unknown timezone '../../etc/passwd'", id="a-path"),
        pytest.param("Europe", "unknown timezone 'Europe'", id="a-directory"),
        pytest.param("", "invalid timezone ''", id="empty"),
        pytest.param(None, "invalid timezone None", id="not-text"),
    ],
)
def test_a_bad_timezone_is_refused_naming_it(name, words):
    with pytest.raises(InvalidArgument) as caught:
        validate_timezone(name)
    assert words in str(caught.value) and "IANA" in str(caught.value)


def test_a_timezone_is_read_without_surrounding_blanks():
    assert validate_timezone(" Europe/Berlin ").key == "Europe/Berlin"


def test_starts_refuses_an_expression_croniter_cannot_read_at_the_call():
    with pytest.raises(InvalidArgument, match="'not a cron'"):
        starts("not a cron", ZoneInfo("UTC"), utc(2026, 6, 1))


def test_importing_cronspec_loads_no_croniter():
    probe = "import sys, hermes_estop.model.cronspec; print(sorted(m for m in sys.modules if m.startswith('croniter')))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(("expr", "fired"), [("0 0 31 2 *", False), ("0 0 29 2 *", True), ("30 2 * * *", True)])
def test_a_deferred_probe_leaves_whether_it_fires_to_fires(expr: str, fired: bool) -> None:
    with probe_deferred():
        assert validate_cron(expr) == expr
    assert fires(expr) is fired
    if not fired:
        with pytest.raises(InvalidArgument, match="never fires"):
            validate_cron(expr)



#: per field: its bounds and the forms croniter reads besides numbers, ranges, steps and lists
#: (names, `L`, `W`, `#`, `?`, hashed), which the composed parse leaves to croniter whole
_FIELDS = ((0, 59, ("H", "h/5")), (0, 23, ("H(0-5)",)), (1, 31, ("L", "15W", "W1", "?", "L-2", "l")),
           (1, 12, ("jan", "jan-mar", "DEC/3", "feb,aug")), (0, 7, ("mon", "mon-fri", "1#2", "5L", "L", "?", "sun,tue")))


def _field(index: int) -> st.SearchStrategy[str]:
    low, high, special = _FIELDS[index]
    value = st.integers(low - 1, high + 1).map(str)
    step = st.integers(0, high + 1).map(str)
    atom = st.one_of(st.just("*"), value, st.tuples(value, value).map("-".join), st.builds("{}/{}".format, value, step),
                     st.builds("{}-{}/{}".format, value, value, step), step.map("*/{}".format), st.sampled_from(special))
    return st.lists(atom, min_size=1, max_size=3).map(",".join)


_PLAIN_OR_STAR = [st.one_of(st.just("*"), _field(i)) for i in range(5)]
_EXPRESSION = st.one_of(
    st.tuples(*_PLAIN_OR_STAR).map(" ".join),
    st.tuples(*_PLAIN_OR_STAR).map("  ".join),
    st.tuples(*_PLAIN_OR_STAR, _field(0)).map(" ".join),  # with seconds
    st.sampled_from(("@daily", "@hourly", "@weekly")))


def _parse(kind: type, expr: str) -> object:
    try:
        return kind._expand(expr)  # type: ignore[attr-defined]  # croniter is untyped
    except Exception as exc:  # a refusal is compared by its type
        return type(exc)


def _next_starts(kind: type, expr: str, since: datetime) -> list[datetime | None]:
    found: list[datetime | None] = []
    iterator = kind(expr, since, ret_type=datetime, max_years_between_matches=4)
    for _ in range(4):
        try:
            found.append(iterator.get_next(datetime))
        except CroniterBadDateError:
            found.append(None)
            break
    return found


@settings(max_examples=200, deadline=None)
@given(_EXPRESSION, st.datetimes(datetime(2020, 1, 1), datetime(2030, 1, 1)))
def test_the_composed_parse_is_croniters_own(expr: str, since: datetime) -> None:
    """The parse composed of memoized per-field expansions gives what croniter's own parse
    gives (or refuses with the same error), special forms included, and so the same starts."""
    composed = cronspec._composing()
    found = _parse(composed, expr)
    assert found == _parse(croniter, expr)
    if not isinstance(found, type):
        assert _next_starts(composed, expr, since) == _next_starts(croniter, expr, since)


@pytest.mark.parametrize("expr", ["17 5 3 1-12 *", "0 0 1-31 * 1", "0 0 * * 0-7", "59/15 * * * *", "*/5 1-3 * * *"])
def test_a_plain_expression_is_composed_of_its_fields(expr: str) -> None:
    """A plain expression's parse asks croniter once per distinct field (10,000 distinct
    expressions have a few hundred), and parses as croniter does."""
    cronspec._field.cache_clear()
    assert cronspec._composing()._expand(expr) == croniter._expand(expr)
    assert cronspec._field.cache_info().misses == 5
