"""Who keeps working through a hold: the allowlist (docs/design.md §4) and the rules an id must
meet to be written into one (docs/design.md §2: ids compare as exact strings).

`Allow.of` is operator input (refuses, naming the bad id); `parse_allow` is a body's `allow`
field as a reader takes it (never refuses: a malformed allowlist admits nobody). Re-exported by
`hermes_estop.model.hold`, whose bodies carry it.
"""

from __future__ import annotations

from collections.abc import Mapping

from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.record import Record, set_field
from hermes_estop.model.text import printable, unsafe_char

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    #: operator input for an allowlist: one id or several (each checked by `_normalize_id`)
    UserIds = str | int | Iterable[object] | None
    ProfileNames = str | Iterable[object] | None

__all__ = ["NOBODY", "Allow", "parse_allow"]

_MAX_ID_LEN = 256


def _normalize_id(value: object, what: str) -> str:
    """An id exactly as `str(value)`: ids compare as exact strings (no stripping, no case
    folding), so what is checked is what is stored. Refuses empty, overlong, and ids with a
    control character or bidirectional override (they could hide what an id really is)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidArgument(f"invalid {what} {value!r}: expected a string or a whole number")
    text = str(value)
    if not text or len(text) > _MAX_ID_LEN:
        raise InvalidArgument(f"invalid {what} {value!r}: expected a non-empty id of at most {_MAX_ID_LEN} characters")
    bad = unsafe_char(text)
    if bad is not None:
        raise InvalidArgument(f"invalid {what} '{printable(text)}': contains the control character or "
                              f"bidirectional override '{printable(bad)}'")
    return text


class Allow(Record):
    """Who keeps working through a hold. `user_ids` is the only grant; `profiles`, when listed,
    narrows it. `valid` is False when a body's allowlist had the wrong shape: it admits nobody."""

    __slots__ = ("user_ids", "profiles", "valid")  # noqa: RUF023 (constructor order)
    user_ids: frozenset[str]
    profiles: frozenset[str]
    valid: bool

    def __init__(self, user_ids: frozenset[str] = frozenset(), profiles: frozenset[str] = frozenset(),
                 valid: bool = True) -> None:
        set_field(self, "user_ids", user_ids)
        set_field(self, "profiles", profiles)
        set_field(self, "valid", valid)

    @classmethod
    def of(cls, user_ids: UserIds = (), profiles: ProfileNames = (), *, refuse_profile_only: bool = True) -> Allow:
        """An allowlist from operator input; refuses bad ids and, unless told otherwise, a
        profile-only allowlist (it would admit nobody: a profile never grants on its own)."""
        users = frozenset(_normalize_id(item, "user id") for item in
                          ((user_ids,) if isinstance(user_ids, (str, int)) else user_ids or ()))
        names = frozenset(_normalize_id(item, "profile") for item in
                          ((profiles,) if isinstance(profiles, str) else profiles or ()))
        if names and not users and refuse_profile_only:
            raise InvalidArgument(
                f"allowlist profiles {sorted(names)} without a user id: a profile never grants on its "
                "own (add --allow-user ID)"
            )
        return cls(users, names)

    @classmethod
    def coerce(cls, value: Allow | Mapping[str, Any] | None) -> Allow | None:
        """Library input: an `Allow`, a `{"user_ids", "profiles"}` mapping, or None (keep). As
        in hermes-agent, a profile-only allowlist is accepted (and admits nobody)."""
        if value is None or isinstance(value, Allow):
            return value
        if not isinstance(value, Mapping):
            raise InvalidArgument(f"invalid allowlist {value!r}: expected {{'user_ids': [...], 'profiles': [...]}}")
        unknown = set(value) - {"user_ids", "profiles"}
        if unknown:
            raise InvalidArgument(f"invalid allowlist key(s) {sorted(unknown)}: expected user_ids, profiles")
        return cls.of(value.get("user_ids") or (), value.get("profiles") or (), refuse_profile_only=False)

    def admits(self, user_id: object, profile: object) -> bool:
        """docs/design.md §4 for one hold: the user is listed, and the profile is listed where any are."""
        if not self.valid or user_id is None or isinstance(user_id, bool):
            return False
        if str(user_id) not in self.user_ids:
            return False
        if not self.profiles:
            return True
        return profile is not None and str(profile) in self.profiles

    def to_body(self) -> dict[str, list[str]]:
        return {"user_ids": sorted(self.user_ids), "profiles": sorted(self.profiles)}

    @property
    def empty(self) -> bool:
        return not self.user_ids and not self.profiles


NOBODY = Allow()


def parse_allow(value: object) -> Allow:
    """A body's `allow` as a reader takes it: absent is nobody; the wrong shape (a bare string
    instead of a list, a non-id item) is `Allow(valid=False)`, which admits nobody."""
    if value is None:
        return NOBODY
    if not isinstance(value, dict):
        return Allow(valid=False)
    parts: list[frozenset[str]] = []
    for key in ("user_ids", "profiles"):
        items = value.get(key)
        if items is None:
            parts.append(frozenset())
            continue
        if not isinstance(items, list):
            return Allow(valid=False)
        out = set()
        for item in items:
            if isinstance(item, bool) or not isinstance(item, (str, int)):
                return Allow(valid=False)
            text = str(item)  # exact: no stripping, no case folding (docs/design.md §2)
            if text:
                out.add(text)
        parts.append(frozenset(out))
    return Allow(parts[0], parts[1])
