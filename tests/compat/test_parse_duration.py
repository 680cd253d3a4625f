"""Upstream: `parse_duration(v)` is whole seconds (`int`) or None when unusable; it never
raises. `cmd_pause` refuses a `--ttl` for which it returns None."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("value, seconds", [("45m", 2700), ("90m", 5400), ("2h", 7200), ("90", 90), (90, 90),
                                            ("1d", 86400), (" 45m ", 2700), ("30s", 30)])
def test_seconds_as_an_int(estop, value, seconds):
    result = estop.parse_duration(value)
    assert result == seconds and type(result) is int


@pytest.mark.parametrize("value", [None, True, False, "", "soon", "0", 0, -1, "-5m", "5x"])
def test_none_when_unusable(estop, value):
    assert estop.parse_duration(value) is None


def test_cmd_pause_check_refuses_what_parse_duration_refuses(estop):
    ttl = "banana"
    assert ttl and estop.parse_duration(ttl) is None
