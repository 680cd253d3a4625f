"""The one exception root. Every error an operator can cause derives from `EstopError`, and also
from the builtin it resembles, so callers may catch either. The CLI maps the root to exit 2 with
its message as the single line on stderr, which is why every message names the bad value."""

from __future__ import annotations

__all__ = [
    "EstopError",
    "HoldConflict",
    "InvalidArgument",
    "InvalidDuration",
    "InvalidInstant",
    "StoreError",
    "StoreRefused",
    "StoreUnavailable",
]


class EstopError(Exception):
    """Root of every error hermes-estop raises on purpose."""


class InvalidDuration(EstopError, ValueError):
    """A TTL or duration that does not parse, is not positive, or is beyond the bound."""


class InvalidInstant(EstopError, ValueError):
    """An absolute time (`--until`, `at`) that does not parse or is out of range."""


class InvalidArgument(EstopError, ValueError):
    """Any other refused input: a bad id, a profile-only allowlist, a bad scope name."""


class HoldConflict(EstopError, RuntimeError):
    """A conditional write found a different hold than the one it was fenced on."""

    def __init__(self, message: str, standing: object = None) -> None:
        super().__init__(message)
        self.standing = standing


class StoreError(EstopError, OSError):
    """A store could not carry out a write (permissions, I/O, a broken database)."""


class StoreUnavailable(StoreError):
    """The store cannot be reached at all (the database is down, the URL is wrong)."""


class StoreRefused(StoreError):
    """The store answers but will not let this role in (a failed password authentication)."""
