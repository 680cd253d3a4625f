"""The hold: its body on the wire, how untrusted bytes are classified (DESIGN 3), and how a re-arm
merges with the standing hold (DESIGN 5). Pure functions only; stores do the I/O.

The body is wire-compatible with hermes-agent's `agent/estop.py`: `generation`, `engaged_at`,
`reason`, `expires_at`, `allow: {user_ids, profiles}`, plus the extra fields `armed_by` and
`window`. Readers ignore fields they do not know.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, Mapping, NamedTuple

from .errors import InvalidArgument
from .homes import Location
from .timeutil import format_instant, in_interval, parse_stamp

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_REASON",
    "clean_reason",
    "Allow",
    "Hold",
    "HoldState",
    "Fence",
    "Reading",
    "EngageRequest",
    "VACANT",
    "new_generation",
    "parse_body",
    "prepare",
    "Prepared",
    "encode_body",
    "merge_hold",
    "precondition_met",
    "NOBODY",
]

MAX_BODY_BYTES = 1024 * 1024
MAX_REASON = 1000
_MAX_ID_LEN = 256


def new_generation() -> str:
    """A fresh engagement identity: 128 random bits, so never reused across processes or hosts."""
    return os.urandom(16).hex()


def clean_reason(reason: Any) -> str | None:
    """A reason as written in a body: whitespace folded to single spaces, empty = not given.
    Refuses non-text and anything over `MAX_REASON` characters, naming it."""
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise InvalidArgument(f"invalid reason {reason!r}: expected text")
    text = " ".join(reason.split())
    if len(text) > MAX_REASON:
        raise InvalidArgument(f"invalid reason {reason[:40]!r}...: longer than {MAX_REASON} characters")
    return text or None


def _normalize_id(value: Any, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidArgument(f"invalid {what} {value!r}: expected a string or a whole number")
    text = str(value).strip()
    if not text or len(text) > _MAX_ID_LEN or any(ord(ch) < 32 for ch in text):
        raise InvalidArgument(f"invalid {what} {value!r}: expected a non-empty printable id")
    return text


@dataclass(frozen=True)
class Allow:
    """Who keeps working through a hold. `user_ids` is the only grant; `profiles`, when listed,
    narrows it. `valid` is False when a body's allowlist had the wrong shape: it admits nobody."""

    user_ids: frozenset[str] = frozenset()
    profiles: frozenset[str] = frozenset()
    valid: bool = True

    @classmethod
    def of(cls, user_ids: Any = (), profiles: Any = (), *, refuse_profile_only: bool = True) -> "Allow":
        """An allowlist from operator input; refuses bad ids and, unless told otherwise, a
        profile-only allowlist (it would admit nobody: a profile never grants on its own)."""
        if isinstance(user_ids, (str, int)):
            user_ids = [user_ids]
        if isinstance(profiles, str):
            profiles = [profiles]
        users = frozenset(_normalize_id(item, "user id") for item in (user_ids or ()))
        names = frozenset(_normalize_id(item, "profile") for item in (profiles or ()))
        if names and not users and refuse_profile_only:
            raise InvalidArgument(
                f"allowlist profiles {sorted(names)} without a user id: a profile never grants on its "
                "own (add --allow-user ID)"
            )
        return cls(users, names)

    @classmethod
    def coerce(cls, value: "Allow | Mapping[str, Any] | None") -> "Allow | None":
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

    def admits(self, user_id: Any, profile: Any) -> bool:
        """DESIGN 4 for one hold: the user is listed, and the profile is listed where any are."""
        if not self.valid or user_id is None or isinstance(user_id, bool):
            return False
        if str(user_id).strip() not in self.user_ids:
            return False
        if not self.profiles:
            return True
        return profile is not None and str(profile).strip() in self.profiles

    def to_body(self) -> dict[str, list[str]]:
        return {"user_ids": sorted(self.user_ids), "profiles": sorted(self.profiles)}

    @property
    def empty(self) -> bool:
        return not self.user_ids and not self.profiles


NOBODY = Allow()


@dataclass(frozen=True)
class Hold:
    """One engagement as written in a body."""

    generation: str | None
    engaged_at: datetime | None = None
    reason: str | None = None
    expires_at: datetime | None = None
    allow: Allow = NOBODY
    armed_by: str | None = None
    window: Mapping[str, Any] | None = None

    def active_at(self, now: datetime) -> bool:
        return in_interval(now, None, self.expires_at)


class HoldState(str, Enum):
    ABSENT = "absent"
    ACTIVE = "active"
    EXPIRED = "expired"
    UNREADABLE = "unreadable"


@dataclass(frozen=True)
class Fence:
    """What a conditional removal is fenced on: the generation when the body has one, else the
    identity of the file as it was read (a hand-written sentinel)."""

    generation: str | None = None
    file_id: tuple[int, ...] | None = None

    def describe(self) -> str:
        if self.generation is not None:
            return self.generation
        return "hand-written" if self.file_id is not None else "unknown"


@dataclass(frozen=True)
class Reading:
    """What one read found at one location. `active` covers UNREADABLE too: fail safe."""

    location: Location
    state: HoldState
    hold: Hold | None = None
    fence: Fence | None = None
    problem: str | None = None

    @property
    def active(self) -> bool:
        return self.state is HoldState.ACTIVE or self.state is HoldState.UNREADABLE

    @property
    def present(self) -> bool:
        return self.state is not HoldState.ABSENT

    def admits(self, user_id: Any, profile: Any) -> bool:
        return self.state is HoldState.ACTIVE and self.hold is not None and self.hold.allow.admits(user_id, profile)


def _parse_allow(value: Any) -> Allow:
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
            text = str(item).strip()
            if text:
                out.add(text)
        parts.append(frozenset(out))
    return Allow(parts[0], parts[1])


def parse_body(raw: bytes) -> Hold:
    """A `Hold` from sentinel bytes; raises `ValueError` with the reason when the body is
    unreadable (empty, too large, not UTF-8 JSON, not an object). Never anything else."""
    if len(raw) > MAX_BODY_BYTES:
        raise ValueError(f"body larger than {MAX_BODY_BYTES} bytes")
    if not raw.strip():
        raise ValueError("empty body")
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object ({type(data).__name__})")
    generation = data.get("generation")
    reason = data.get("reason")
    armed_by = data.get("armed_by")
    window = data.get("window")
    return Hold(
        generation=generation if isinstance(generation, str) and generation else None,
        engaged_at=parse_stamp(data.get("engaged_at")),
        reason=reason if isinstance(reason, str) and reason else None,
        expires_at=parse_stamp(data.get("expires_at")),
        allow=_parse_allow(data.get("allow")),
        armed_by=armed_by if isinstance(armed_by, str) and armed_by else None,
        window=window if isinstance(window, dict) else None,
    )


class Prepared(NamedTuple):
    """Both readings a body can give, built once per body: which one applies depends only on
    `now` (a store may cache this and pay only a comparison per check)."""

    expires_at: datetime | None
    active: Reading
    expired: Reading

    def at(self, now: datetime) -> Reading:
        return self.active if in_interval(now, None, self.expires_at) else self.expired


def prepare(location: Location, parsed: Hold | str, file_id: tuple[int, ...] | None) -> Prepared:
    """DESIGN 3 for a present sentinel: `parsed` is the body's `Hold`, or the reason it is
    unreadable (active whatever the time). Expired only for a readable body whose parsable
    deadline is at or before `now`."""
    if isinstance(parsed, str):
        unreadable = Reading(location, HoldState.UNREADABLE, None, Fence(None, file_id), parsed)
        return Prepared(None, unreadable, unreadable)
    fence = Fence(parsed.generation, None if parsed.generation else file_id)
    return Prepared(parsed.expires_at, Reading(location, HoldState.ACTIVE, parsed, fence),
                    Reading(location, HoldState.EXPIRED, parsed, fence))


def encode_body(hold: Hold) -> bytes:
    body: dict[str, Any] = {
        "generation": hold.generation,
        "engaged_at": format_instant(hold.engaged_at),
        "reason": hold.reason,
        "expires_at": format_instant(hold.expires_at),
        "allow": hold.allow.to_body(),
    }
    if hold.armed_by is not None:
        body["armed_by"] = hold.armed_by
    if hold.window is not None:
        body["window"] = dict(hold.window)
    return (json.dumps(body, indent=2, sort_keys=False) + "\n").encode("utf-8")


class _Vacant:
    """Precondition: write only where no active hold stands (a window never replaces a hold it
    did not arm)."""

    def __repr__(self) -> str:
        return "VACANT"


VACANT = _Vacant()


@dataclass(frozen=True)
class EngageRequest:
    """What a caller asked for. `None` fields are 'not supplied': a re-arm keeps them from the
    standing hold. `only_if` fences the write: None (always), `VACANT` (no active hold), or a set
    of generations the active standing hold must carry."""

    reason: str | None = None
    allow: Allow | None = None
    expires_at: datetime | None = None
    replace: bool = False
    armed_by: str | None = None
    window: Mapping[str, Any] | None = None
    only_if: Any = None


def merge_hold(standing: Hold | None, request: EngageRequest, now: datetime, generation: str) -> Hold:
    """The body a (re-)engage writes. Non-destructive: what the request leaves as None comes from
    the standing hold (unless `replace`); a kept deadline that has already passed is dropped."""
    base = None if request.replace else standing
    reason = request.reason if request.reason is not None else (base.reason if base else None)
    allow = request.allow if request.allow is not None else (base.allow if base else NOBODY)
    if not allow.valid:
        allow = NOBODY
    if request.expires_at is not None:
        expires_at = request.expires_at
    else:
        kept = base.expires_at if base else None
        expires_at = kept if kept is not None and in_interval(now, None, kept) else None
    return Hold(
        generation=generation,
        engaged_at=now,
        reason=reason,
        expires_at=expires_at,
        allow=allow,
        armed_by=request.armed_by,
        window=request.window,
    )


def precondition_met(only_if: Any, standing: Reading | None) -> bool:
    """Whether a fenced write may go ahead over `standing` (see `EngageRequest.only_if`): always
    for None; for `VACANT` only where no hold is active; for a set of generations only where the
    active hold carries one of them (a released or expired one does not count)."""
    if only_if is None:
        return True
    active = standing is not None and standing.active
    if only_if is VACANT:
        return not active
    return active and standing.hold is not None and standing.hold.generation in only_if
