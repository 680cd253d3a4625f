"""The checks every consumer runs on what an operator types (and a hand-edited row carries):
names, owners, profiles and worker timeouts. Each raises `InvalidArgument` naming the bad value,
so the CLI answers in one line (exit 2) and a tick parks the row instead of retrying it."""

from __future__ import annotations

import re
from datetime import timedelta

from hermes_estop.model.durations import parse_ttl
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.homes import validate_profile_name
from hermes_estop.model.text import unsafe_char

__all__ = ["DEFAULT_TIMEOUT", "parse_timeout", "validate_name", "validate_owner", "validate_profile"]

DEFAULT_TIMEOUT = timedelta(hours=1)
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def validate_name(value: object, what: str) -> str:
    """A name an operator types and a file may be named after: letters, digits, '.', '_', '-'."""
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
        raise InvalidArgument(
            f"invalid {what} {value!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return value


def validate_profile(value: object) -> str | None:
    """None (no profile) or a profile name the profile-name rules accept."""
    return None if value is None else validate_profile_name(value)


def validate_owner(value: object) -> str | None:
    """An owner is an authenticated principal id, compared as a string (docs/design.md §3): no spaces,
    control characters or bidirectional overrides."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidArgument(f"invalid owner {value!r}: expected a user id")
    text = str(value).strip()
    if not text or len(text) > 256 or any(ch.isspace() for ch in text) or unsafe_char(text) is not None:
        raise InvalidArgument(f"invalid owner {value!r}: expected a non-empty user id without spaces")
    return text


def parse_timeout(value: object) -> timedelta:
    """A worker timeout, in the one duration grammar (`90s`, `10m`, `PT1H`); None: one hour."""
    if value is None:
        return DEFAULT_TIMEOUT
    return parse_ttl(value)
