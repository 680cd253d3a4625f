"""The TTL / duration grammar, shared by `--ttl`, window durations and anything else that takes a
span of time. Refusal happens here, before anything is written.

Accepted: a unit string built from `d`, `h`, `m`, `s` in that order (`45m`, `1h30m`, `1d`, `90s`),
a bare whole number of seconds (`90`: the library only, see `parse_with_unit`), or an ISO-8601
duration (`PT45M`, `P1DT2H`, `P2W`).
Refused: zero, negative, unparsable, non-finite, fractional, digits of other scripts (`٣h`), and
anything longer than `MAX_DURATION` (366 days): a deadman that far out is a typo, not a plan.

Three names, three contracts: `parse_ttl` is the strict parser every writer uses (a `timedelta`
or `InvalidDuration`); `parse_duration` keeps hermes-agent's `agent/estop.py` contract (whole
seconds as an `int`, or None when unusable) for code written against that module, bare numbers
included; `parse_with_unit` is what an operator types or writes (the CLI, windows.toml): a number
must carry its unit, since `--ttl 30` meant 30 minutes as often as 30 seconds (issue 32 item 14).
"""

from __future__ import annotations

import math
from datetime import timedelta

from hermes_estop.model.errors import InvalidDuration

__all__ = ["MAX_DURATION", "format_duration", "parse_duration", "parse_ttl", "parse_with_unit"]

MAX_DURATION = timedelta(days=366)
_MAX_SECONDS = int(MAX_DURATION.total_seconds())

# Patterns as text: `re` compiles (and caches) them on the first parse, so importing this module
# (every check does, for `MAX_DURATION`) compiles nothing.
_UNIT_RE = r"(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?"
_ISO_RE = r"P(?:([0-9]+)W)?(?:([0-9]+)D)?(?:T(?:([0-9]+)H)?(?:([0-9]+)M)?(?:([0-9]+)S)?)?"
_MAX_DIGITS = 12
#: what a refusal suggests: the forms every caller takes (bare seconds only the library does)
_EXPECTED = "expected e.g. 45m, 1h30m, 90s, 1d or PT45M"
#: text -> the duration it parsed to: a file of 10,000 windows repeats a handful of durations, and
#: parsing one costs more than the rest of a window's validation (bounded: cleared when full)
_PARSED: dict[str, timedelta] = {}
_MAX_PARSED = 1024


def _refuse(value: object, why: str) -> InvalidDuration:
    return InvalidDuration(f"invalid duration {_shown(value)}: {why}")


def _shown(value: object) -> str:
    """`value` as a refusal names it: a long text or number by its start and its size (a number
    of thousands of digits has no `repr` at all: `sys.set_int_max_str_digits`)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"{'-' if value < 0 else ''}<a number of about {int(value.bit_length() * 0.30103) + 1} digits>"
    if isinstance(value, str) and len(value) > 48:
        return f"{value[:24]!r}... ({len(value)} characters)"
    return repr(value)


def _bounded(value: object, total_seconds: int) -> timedelta:
    if total_seconds <= 0:
        raise _refuse(value, "must be positive")
    if total_seconds > MAX_DURATION.total_seconds():
        raise _refuse(value, f"longer than the {MAX_DURATION.days}-day bound")
    return timedelta(seconds=total_seconds)


def _from_parts(value: object, parts: tuple[str | None, ...], weights: tuple[int, ...]) -> timedelta:
    if all(part is None for part in parts):
        raise _refuse(value, _EXPECTED)
    if any(part is not None and len(part) > _MAX_DIGITS for part in parts):
        raise _refuse(value, f"longer than the {MAX_DURATION.days}-day bound")
    total = sum(int(part) * weight for part, weight in zip(parts, weights, strict=False) if part is not None)
    return _bounded(value, total)


def parse_ttl(value: object) -> timedelta:
    """A positive `timedelta` no longer than `MAX_DURATION`, or `InvalidDuration` naming `value`.

    Accepts a string in the grammar above, a whole or finite `int`/`float` number of seconds,
    or a `timedelta`."""
    if isinstance(value, str):
        parsed = _PARSED.get(value)
        if parsed is None:
            parsed = _parse_text(value)
            if len(_PARSED) >= _MAX_PARSED:
                _PARSED.clear()
            _PARSED[value] = parsed
        return parsed
    if isinstance(value, bool) or value is None:
        raise _refuse(value, _EXPECTED)
    if isinstance(value, timedelta):
        if value <= timedelta(0):
            raise _refuse(value, "must be positive")
        if value > MAX_DURATION:
            raise _refuse(value, f"longer than the {MAX_DURATION.days}-day bound")
        return value
    if isinstance(value, (int, float)):
        if isinstance(value, int) and abs(value) > _MAX_SECONDS:  # an int too large for a float
            raise _refuse(value, "must be positive" if value < 0 else f"longer than the {MAX_DURATION.days}-day bound")
        if not math.isfinite(value):
            raise _refuse(value, "not a finite number")
        if value != int(value):
            raise _refuse(value, "must be a whole number of seconds")
        return _bounded(value, int(value))
    raise _refuse(value, _EXPECTED)


def parse_with_unit(value: object) -> timedelta:
    """`parse_ttl` of what an operator wrote, where a number without a unit (`30`, `"30"`) is
    refused with a hint (`30m? 30s?`) rather than read as seconds. Zero and fractions are left
    to `parse_ttl` (refused as not positive, not whole), not hinted at."""
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        if len(value.strip()) > _MAX_DIGITS:  # bounded before `int()`: 400 digits is no duration
            raise _refuse(value, f"longer than the {MAX_DURATION.days}-day bound")
        number = int(value.strip())
    if number is not None and abs(number) > _MAX_SECONDS:  # before `math.isfinite` (OverflowError)
        raise _refuse(value, f"longer than the {MAX_DURATION.days}-day bound")
    if number is not None and number != 0 and math.isfinite(number) and number == int(number):
        raise _refuse(value, f"a number needs a unit: {int(number)}m? {int(number)}s?")
    return parse_ttl(value)


def _parse_text(value: str) -> timedelta:
    """`parse_ttl` of a string (a pure function of it: `parse_ttl` remembers the answers)."""
    import re

    text = value.strip().lower()
    if not text.isascii():  # `int()` and `\d` take any script's digits: `٣h` must not read as 3h
        raise _refuse(value, "durations take ASCII digits and units only (45m, 1h30m, PT45M)")
    if text.startswith("-"):
        raise _refuse(value, "must be positive")
    if text.isdigit():
        if len(text) > _MAX_DIGITS:
            raise _refuse(value, f"longer than the {MAX_DURATION.days}-day bound")
        return _bounded(value, int(text))
    if text.startswith("p"):
        match = re.fullmatch(_ISO_RE, text.upper())
        if match is None or text.upper().endswith("T"):
            raise _refuse(value, "not an ISO-8601 duration such as PT45M")
        return _from_parts(value, match.groups(), (604800, 86400, 3600, 60, 1))
    match = re.fullmatch(_UNIT_RE, text)
    if match is None or not text:
        raise _refuse(value, _EXPECTED)
    return _from_parts(value, match.groups(), (86400, 3600, 60, 1))


def parse_duration(value: object) -> int | None:
    """hermes-agent's contract: the whole number of seconds `value` stands for, or None when it
    is unusable. Accepts what `parse_ttl` accepts (blanks between a number and its unit too,
    `"45 m"`); None for anything it refuses, including beyond the 366-day bound."""
    if isinstance(value, str):
        value = "".join(value.split())
    try:
        return int(parse_ttl(value).total_seconds())
    except InvalidDuration:
        return None


def format_duration(value: timedelta) -> str:
    """The compact unit form `parse_ttl` reads back: `1h30m`, `45m`, `1d`."""
    total = int(value.total_seconds())
    if total <= 0:
        return "0s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, total = divmod(total, size)
        if count:
            out.append(f"{count}{unit}")
    return "".join(out)
