"""The TTL grammar: what is accepted, and every refusal naming the value."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hermes_estop.model.durations import (
    MAX_DURATION,
    format_duration,
    parse_duration,
    parse_ttl,
    parse_with_unit,
)
from hermes_estop.model.errors import InvalidDuration


@pytest.mark.parametrize(
    "text, expected",
    [
        ("45m", timedelta(minutes=45)),
        ("90m", timedelta(minutes=90)),
        ("2h", timedelta(hours=2)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("90s", timedelta(seconds=90)),
        ("90", timedelta(seconds=90)),
        ("1d", timedelta(days=1)),
        ("1d2h3m4s", timedelta(days=1, hours=2, minutes=3, seconds=4)),
        ("PT45M", timedelta(minutes=45)),
        ("pt45m", timedelta(minutes=45)),
        ("P1DT2H", timedelta(days=1, hours=2)),
        ("P2W", timedelta(weeks=2)),
        (" 45M ", timedelta(minutes=45)),
        ("366d", MAX_DURATION),
        (90, timedelta(seconds=90)),
        (90.0, timedelta(seconds=90)),
        (timedelta(minutes=5), timedelta(minutes=5)),
    ],
)
def test_accepted_durations(text, expected):
    assert parse_ttl(text) == expected


@pytest.mark.parametrize(
    "value",
    ["banana", "0", "-5m", "2915000d", "999999999d", "367d", "8785h", "nan", "inf", "", " ", "1.5h", "45x", "m",
     "PT0S", "P", "PT", "5m30", "1h-5m", "PT-5M", "1e3", "0x10", None, True, float("nan"), float("inf"), -1, 0,
     1.5, timedelta(0), timedelta(days=400), "9" * 40, "P" + "9" * 40 + "D"],
)
def test_refused_durations_name_the_value(value):
    with pytest.raises(InvalidDuration) as info:
        parse_ttl(value)
    assert repr(value) in str(info.value)


@pytest.mark.parametrize("value", [timedelta(minutes=45), timedelta(hours=1, minutes=30), timedelta(days=1, seconds=5)])
def test_format_duration_round_trips(value):
    assert parse_ttl(format_duration(value)) == value


@pytest.mark.parametrize(
    "value, seconds",
    [("45m", 2700), ("90", 90), (90, 90), ("2h", 7200), (" 45 m ", 2700), ("1d", 86400), ("1h30m", 5400)],
)
def test_parse_duration_keeps_the_upstream_contract_of_whole_seconds(value, seconds):
    assert parse_duration(value) == seconds and type(parse_duration(value)) is int


@pytest.mark.parametrize("value", [None, "", "soon", "0", 0, -5, "-5m", True, "367d", 1.5, float("nan")])
def test_parse_duration_is_none_when_unusable_and_never_raises(value):
    assert parse_duration(value) is None


# parse_ttl remembers what a text parsed to (a windows file repeats a few durations): the
# answers must be the ones an unremembered parse gives, and a refusal is never remembered.
@pytest.mark.parametrize("text", ["45m", " 1H30m ", "PT45M", "90", "P2W"])
def test_a_remembered_duration_is_the_one_parsed(text):
    from hermes_estop.model import durations

    durations._PARSED.clear()
    first = parse_ttl(text)
    assert durations._PARSED[text] == first == durations._parse_text(text) == parse_ttl(text)


@pytest.mark.parametrize("text", ["0m", "-5m", "soon", "400d", ""])
def test_a_refused_duration_is_refused_every_time(text):
    from hermes_estop.model import durations

    for _ in range(2):
        with pytest.raises(InvalidDuration):
            parse_ttl(text)
    assert text not in durations._PARSED


def test_the_memory_of_parsed_durations_is_bounded():
    from hermes_estop.model import durations

    for seconds in range(1, durations._MAX_PARSED * 3):
        parse_ttl(str(seconds))
    assert len(durations._PARSED) <= durations._MAX_PARSED
    assert parse_ttl("3600") == parse_ttl("1h")


@pytest.mark.parametrize("text", ["٣h", "٣", "PT٣H", "１h", "1h٣0m", "৩d"])
def test_durations_take_ascii_digits_only(text):
    """Issue 20 item 6: `int()` and `\\d` read any script's digits; a deadman never does."""
    with pytest.raises(InvalidDuration, match="ASCII"):
        parse_ttl(text)
    assert parse_duration(text) is None


@pytest.mark.parametrize("value", ["30", " 30 ", 30, 30.0, "3600"])
def test_what_an_operator_writes_needs_a_unit(value):
    """Issue 32 item 14: `--ttl 30` and `duration = 30` are refused with a hint, not read as seconds."""
    with pytest.raises(InvalidDuration, match=r"needs a unit: \d+m\? \d+s\?"):
        parse_with_unit(value)


@pytest.mark.parametrize(("value", "seconds"), [("30s", 30), ("30m", 1800), ("PT30S", 30), (timedelta(minutes=5), 300)])
def test_what_an_operator_writes_with_a_unit_is_taken(value, seconds):
    assert parse_with_unit(value) == timedelta(seconds=seconds)


@pytest.mark.parametrize("value", ["0", 0])
def test_zero_gets_no_unit_hint(value):
    with pytest.raises(InvalidDuration, match="must be positive"):
        parse_with_unit(value)


def test_the_library_keeps_bare_seconds_for_upstream_compatibility():
    """hermes-agent's `parse_duration("90")` is 90 seconds: the drop-in and `parse_ttl` keep it;
    only the CLI and windows.toml (`parse_with_unit`) refuse it."""
    assert parse_duration("90") == 90 and parse_ttl("90") == timedelta(seconds=90)
