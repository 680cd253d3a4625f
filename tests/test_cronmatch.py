"""Issue 24: plain crontab expressions are matched without croniter (`cronmatch`), and agree
with croniter on every expression that module takes; everything else stays with croniter."""

from __future__ import annotations

import copy
import random
from datetime import datetime, timedelta

import pytest
from croniter import croniter

from hermes_estop.cronmatch import next_match, parse


def croniter_next(expr: str, base: datetime, count: int) -> list[datetime]:
    iterator = copy.copy(croniter(expr, base, ret_type=datetime))
    return [iterator.get_next(datetime) for _ in range(count)]


def ours_next(expr: str, base: datetime, count: int) -> list[datetime]:
    cron = parse(expr)
    assert cron is not None, expr
    out: list[datetime] = []
    for _ in range(count):
        found = next_match(cron, base)
        assert found is not None
        out.append(found)
        base = found
    return out


def field(rng: random.Random, low: int, high: int) -> str:
    def item() -> str:
        kind = rng.randrange(4)
        if kind == 0:
            return "*" + (f"/{rng.randint(1, 15)}" if rng.random() < 0.5 else "")
        first = rng.randint(low, high)
        if kind == 1:
            return str(first)
        last = rng.randint(first, high)
        return f"{first}-{last}" + (f"/{rng.randint(1, 6)}" if kind == 3 else "")
    return ",".join(item() for _ in range(rng.choice((1, 1, 1, 2, 3))))


def expressions(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        expr = " ".join([field(rng, 0, 59), field(rng, 0, 23), rng.choice(["*", "*", field(rng, 1, 31)]),
                         rng.choice(["*", "*", field(rng, 1, 12)]), rng.choice(["*", "*", field(rng, 0, 7)])])
        if parse(expr) is not None and next_match(parse(expr), datetime(2000, 1, 1)) is not None:
            out.append(expr)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_plain_expressions_match_as_croniter_matches_them(seed):
    rng = random.Random(1000 + seed)
    for expr in expressions(seed, 60):
        base = datetime(2024, 1, 1) + timedelta(minutes=rng.randrange(60 * 24 * 365 * 3), seconds=rng.randrange(60))
        assert ours_next(expr, base, 4) == croniter_next(expr, base, 4), (expr, base)


@pytest.mark.parametrize("expr", ["0 0 29 2 *", "59 23 31 * *", "0 12 31 4,6,9,11,12 *",
                                  "0 0 13 * 5", "0 0 * * 7", "30 2 * 1-12 1-5", "0 0 1,15 * 1-5"])
def test_edge_days_match_as_croniter_matches_them(expr):
    for base in (datetime(2023, 2, 27, 23, 59), datetime(2096, 2, 28), datetime(2099, 12, 31, 23, 59, 30)):
        assert ours_next(expr, base, 3) == croniter_next(expr, base, 3), (expr, base)


@pytest.mark.parametrize("expr", ["0 0 30 2 *", "0 0 31 4,6 *"])
def test_an_expression_that_never_fires_has_no_next_match(expr):
    assert next_match(parse(expr), datetime(2026, 1, 1)) is None


@pytest.mark.parametrize("expr", ["0 0 * * MON", "0 0 L * *", "0 0 * * 1#2", "0 0 15W * *", "5/10 * * * *",
                                  "0 0 */2 * *", "0 0 * * */2", "10-5 * * * *", "60 * * * *", "0 24 * * *",
                                  "0 0 0 * *", "0 0 * 13 *", "0 0 * * 8", "*/0 * * * *", "0 0 * JAN *", "0 0 ? * *",
                                  "0 0 1-31 * 1", "0 0 * * 0-7", "0 5-5 * * *", "*,5 * * * *"])
def test_anything_else_is_left_to_croniter(expr):
    assert parse(expr) is None


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "UTC"])
@pytest.mark.parametrize("expr", ["30 2 * * *", "*/20 1-3 * * *", "0,30 0-4 * * 0", "15 2 8-14 3,10,11 *"])
def test_starts_through_the_dst_rule_are_croniters(monkeypatch, zone, expr):
    from zoneinfo import ZoneInfo

    from hermes_estop import cronmatch
    from hermes_estop.cronspec import starts

    tz = ZoneInfo(zone)
    for since in (datetime(2026, 3, 7, tzinfo=tz), datetime(2026, 10, 24, tzinfo=tz), datetime(2026, 3, 28, tzinfo=tz)):
        ours = [start for start, _ in zip(starts(expr, tz, since), range(40))]
        with monkeypatch.context() as patched:
            patched.setattr(cronmatch, "parse", lambda expr: None)
            theirs = [start for start, _ in zip(starts(expr, tz, since), range(40))]
        assert ours == theirs
