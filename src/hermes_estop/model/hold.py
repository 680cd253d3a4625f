"""The hold: its body on the wire, how untrusted bytes are classified (docs/design.md §3), and how a re-arm
merges with the standing hold (docs/design.md §5), and one read of every location at one instant
(`Snapshot`, what every decision is taken from). Pure functions only; stores do the I/O.
Who a hold admits is part of its body: the allowlist (`Allow`, docs/design.md §4) and the rules
an id must meet to be written into one (docs/design.md §2: ids compare as exact strings) are here.

The body is wire-compatible with hermes-agent's `agent/estop.py`: `generation`, `engaged_at`,
`reason`, `expires_at`, `allow: {user_ids, profiles}`, plus the extra fields `armed_by` and
`window`. Readers ignore fields they do not know.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import Enum

from hermes_estop.model.errors import HoldConflict, InvalidArgument
from hermes_estop.model.homes import Location
from hermes_estop.model.record import Record, set_field
from hermes_estop.model.text import printable, unsafe_char
from hermes_estop.model.timeutil import format_instant, in_interval, parse_stamp

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable
    from datetime import datetime
    from typing import Any

    from hermes_estop.model.selector import Selector, WorkNames

    #: operator input for an allowlist: one id or several (each checked by `_normalize_id`)
    UserIds = str | int | Iterable[object] | None
    ProfileNames = str | Iterable[object] | None

__all__ = [
    "covers",
    "not_current",
    "owner_after",
    "hold_from_json",
    "ALLOWLIST_MALFORMED",
    "ALL_WORK",
    "FULL_FIELD",
    "SCOPED_FIELD",
    "Cause",
    "DEADLINE_UNREADABLE",
    "GENERATION_FIELD",
    "MAX_BODY_BYTES",
    "MAX_REASON",
    "NOBODY",
    "VACANT",
    "Allow",
    "EngageRequest",
    "Fence",
    "Hold",
    "HoldState",
    "Prepared",
    "Reading",
    "ScopedReadings",
    "Sentinel",
    "Snapshot",
    "admits",
    "clean_reason",
    "encode_body",
    "encode_sentinel",
    "engaged",
    "holding",
    "merge_hold",
    "new_generation",
    "parse_allow",
    "parse_body",
    "parse_sentinel",
    "precondition_met",
    "prepare",
    "wire_summary",
]

#: the body field that carries an engagement's identity (hermes-agent's name for it)
GENERATION_FIELD = "generation"
#: what a hold without a selector covers, as every surface says it
ALL_WORK = "all"
#: `Reading.problem` of an active hold whose `expires_at` is present but does not parse
DEADLINE_UNREADABLE = "deadline unreadable: held until resumed"
#: `Reading.problem` of an active hold whose `allow` has the wrong shape
ALLOWLIST_MALFORMED = "allowlist malformed: admits nobody"

MAX_BODY_BYTES = 1024 * 1024
MAX_REASON = 1000


def new_generation() -> str:
    """A fresh engagement identity: 128 random bits, so never reused across processes or hosts."""
    return os.urandom(16).hex()


def clean_reason(reason: object) -> str | None:
    """A reason as written in a body: whitespace folded to single spaces. None means "not
    given" (a re-arm keeps the standing reason); an explicitly empty or blank reason is `""`,
    which clears it. Refuses non-text and anything over `MAX_REASON` characters, naming it."""
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise InvalidArgument(f"invalid reason {reason!r}: expected text")
    text = " ".join(reason.split())
    if len(text) > MAX_REASON:
        raise InvalidArgument(f"invalid reason {reason[:40]!r}...: longer than {MAX_REASON} characters")
    return text


def covers(selector: Selector | None) -> str:
    """What a hold with `selector` covers, for a person and a label: `all`, or its components
    and job globs in the selector's notation (`kanban`, `cron:nightly-*`, `*:db-*` for jobs of
    every component); an unreadable selector covers everything and says so. Escaped. Here, not
    in `model.selector`: a full hold is described without importing the selectors' module."""
    return ALL_WORK if selector is None else selector.describe()


# -- who a hold admits ----------------------------------------------------------------------

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


class Hold(Record):
    """One engagement as written in a body."""

    __slots__ = ("generation", "engaged_at", "reason", "expires_at", "allow", "armed_by", "window", "problems",  # noqa: RUF023 (constructor order)
                 "selector", "hold_id")
    generation: str | None
    engaged_at: datetime | None
    reason: str | None
    expires_at: datetime | None
    allow: Allow
    armed_by: str | None
    window: Mapping[str, Any] | None
    #: what a reader should be told about this body although it holds (`DEADLINE_UNREADABLE`,
    #: `ALLOWLIST_MALFORMED`); empty for a clean body
    problems: tuple[str, ...]
    #: what a scoped hold covers (None: everything, the full hold) and its id at its location
    selector: Selector | None
    hold_id: str | None

    def __init__(self, generation: str | None, engaged_at: datetime | None = None, reason: str | None = None,
                 expires_at: datetime | None = None, allow: Allow = NOBODY, armed_by: str | None = None,
                 window: Mapping[str, Any] | None = None, problems: tuple[str, ...] = (),
                 selector: Selector | None = None, hold_id: str | None = None) -> None:
        set_field(self, "generation", generation)
        set_field(self, "engaged_at", engaged_at)
        set_field(self, "reason", reason)
        set_field(self, "expires_at", expires_at)
        set_field(self, "allow", allow)
        set_field(self, "armed_by", armed_by)
        set_field(self, "window", window)
        set_field(self, "problems", problems)
        set_field(self, "selector", selector)
        set_field(self, "hold_id", hold_id)

    def scoped_as(self, selector: Selector | None, hold_id: str | None) -> Hold:
        """This hold with a selector and id (a scoped hold), or without (the full hold)."""
        return Hold(self.generation, self.engaged_at, self.reason, self.expires_at, self.allow, self.armed_by,
                    self.window, self.problems, selector, hold_id if selector is not None else None)

    @property
    def scope_label(self) -> str:
        """What the hold covers, for an operator: `everything`, or its id and selector."""
        if self.selector is None:
            return "everything"
        return f"{self.hold_id} ({self.selector.describe()})"

    def active_at(self, now: datetime) -> bool:
        return in_interval(now, None, self.expires_at)


class HoldState(str, Enum):  # noqa: UP042 - a StrEnum would change str(member), which messages print
    ABSENT = "absent"
    ACTIVE = "active"
    EXPIRED = "expired"
    UNREADABLE = "unreadable"


class Cause(str, Enum):  # noqa: UP042 - a StrEnum would change str(member), which messages print
    """Why an UNREADABLE hold is unreadable, set where the problem is found (never recovered
    from the wording of `Reading.problem`): it decides what an operator is told will lift it."""

    #: the bytes are not a hold body (not a JSON object, too large)
    BODY = "body"
    #: an empty body: `touch ESTOP`, a hand-made stop with no details (a valid stop, not a broken one)
    EMPTY = "empty"
    #: the sentinel is not a regular file (a directory, a FIFO, a dangling symlink)
    NOT_A_FILE = "not-a-file"
    #: the sentinel cannot be stat'ed, opened or read (permissions, I/O)
    CANNOT_READ = "cannot-read"
    #: the store as a whole does not answer (every location reads the same)
    STORE_DOWN = "store-down"
    #: the home is not a usable profile home (`Location.problem`)
    REFUSED_HOME = "refused-home"


class Fence(Record):
    """What a conditional removal is fenced on: the generation when the body has one, else the
    identity of the file as it was read (a hand-written sentinel)."""

    __slots__ = ("generation", "file_id")  # noqa: RUF023 (constructor order)
    generation: str | None
    file_id: tuple[int, ...] | None

    def __init__(self, generation: str | None = None, file_id: tuple[int, ...] | None = None) -> None:
        set_field(self, "generation", generation)
        set_field(self, "file_id", file_id)

    def describe(self) -> str:
        if self.generation is not None:
            return self.generation
        return "hand-written" if self.file_id is not None else "unknown"


class Reading(Record):
    """What one read found at one location. `active` covers UNREADABLE too: fail safe.
    `problem` says why an UNREADABLE hold is unreadable, and on an ACTIVE one what in its body
    could not be read (an unparsable deadline, a malformed allowlist); None otherwise. `cause`
    classifies an UNREADABLE one (`Cause.BODY` unless the reader found otherwise)."""

    __slots__ = ("location", "state", "hold", "fence", "problem", "cause", "scoped")  # noqa: RUF023 (constructor order)
    location: Location
    state: HoldState
    hold: Hold | None
    fence: Fence | None
    problem: str | None
    cause: Cause | None
    #: the scoped holds standing at this location (issue 26), each a reading of its own; this
    #: reading itself is the full hold (ABSENT when only scoped holds stand there)
    scoped: tuple[Reading, ...]

    def __init__(self, location: Location, state: HoldState, hold: Hold | None = None, fence: Fence | None = None,
                 problem: str | None = None, cause: Cause | None = None, scoped: tuple[Reading, ...] = ()) -> None:
        set_field(self, "location", location)
        set_field(self, "state", state)
        set_field(self, "hold", hold)
        set_field(self, "fence", fence)
        set_field(self, "problem", problem)
        set_field(self, "cause", cause if cause is not None or state is not HoldState.UNREADABLE else Cause.BODY)
        set_field(self, "scoped", scoped)

    def with_scoped(self, scoped: tuple[Reading, ...]) -> Reading:
        return Reading(self.location, self.state, self.hold, self.fence, self.problem, self.cause, scoped)

    def covers(self, component: str | None, job: WorkNames) -> bool:
        """Whether this hold's selector covers the work (a full or unreadable hold covers all)."""
        hold = self.hold
        return hold is None or hold.selector is None or hold.selector.covers(component, job)

    @property
    def active(self) -> bool:
        return self.state is HoldState.ACTIVE or self.state is HoldState.UNREADABLE

    @property
    def present(self) -> bool:
        return self.state is not HoldState.ABSENT

    def admits(self, user_id: object, profile: object) -> bool:
        return self.state is HoldState.ACTIVE and self.hold is not None and self.hold.allow.admits(user_id, profile)


#: the reason `parse_body` gives for an empty body (`prepare` classifies it as `Cause.EMPTY`)
EMPTY_BODY = "empty body"


#: per component: the holds covering all its work, those covering some of it by glob, one regex
#: over all those globs, and the covering holds already worked out per unit name (a pass asks
#: about the same jobs every tick)
_Entry = tuple[tuple["Reading", ...], tuple["Reading", ...], "Callable[[str], Any] | None",
               dict[tuple[str, ...], tuple["Reading", ...]]]
_MEMO = 4096


class ScopedReadings(tuple):  # type: ignore[type-arg]
    """The scoped readings of one location at one instant (`Reading.scoped`), with an index by
    component built on first use: a check then costs a dict lookup and one regex call over
    every glob of the holds of that component, however many scoped holds stand (bench/core.py).
    Built by `hold.Prepared.at` only for an interval in which no reading changes state."""

    _index: dict[str | None, _Entry]
    _expired: tuple[Reading, ...]

    @property
    def expired(self) -> tuple[Reading, ...]:
        """The expired ones (for the reader to log as lifted), worked out once."""
        try:
            return self._expired
        except AttributeError:
            self._expired = tuple(r for r in self if r.state is HoldState.EXPIRED)
            return self._expired

    def covering(self, component: str | None, job: WorkNames) -> tuple[Reading, ...]:
        """The active scoped holds that cover work of `component` named `job`."""
        try:
            index = self._index
        except AttributeError:
            index = self._index = {}
        from hermes_estop.model.selector import work_names

        entry = index.get(component)
        if entry is None:
            entry = index[component] = self._entry(component)
        whole, globbed, match, memo = entry
        names = work_names(job)
        if not names:
            return whole + globbed
        if match is None or not any(match(name) is not None for name in names):
            return whole
        found = memo.get(names)
        if found is None:
            if len(memo) >= _MEMO:
                memo.clear()
            found = memo[names] = whole + tuple(r for r in globbed if r.hold is not None and r.hold.selector is not None
                                                and r.hold.selector.covers(component, names))
        return found

    def _entry(self, component: str | None) -> _Entry:
        whole: list[Reading] = []
        globbed: list[Reading] = []
        for reading in self:
            if not reading.active or not reading.covers(component, None):
                continue
            selector = reading.hold.selector if reading.hold is not None else None
            if selector is None or selector.problem is not None or not selector.jobs:
                whole.append(reading)
            else:
                globbed.append(reading)
        from hermes_estop.model.selector import compile_globs

        globs = tuple(dict.fromkeys(g for r in globbed if r.hold and r.hold.selector for g in r.hold.selector.jobs))
        return tuple(whole), tuple(globbed), compile_globs(globs) if globs else None, {}


class Snapshot(Record):
    """One read of every candidate location, taken at `now`: what every decision is taken from
    (docs/design.md §3: "is it engaged" and "who is admitted" never come from two reads). The
    fleet returns it (`Fleet.read`); the check path decides over it (`process.check`)."""

    __slots__ = ("readings", "now")  # noqa: RUF023 (constructor order)
    readings: tuple[Reading, ...]
    now: datetime

    def __init__(self, readings: tuple[Reading, ...], now: datetime) -> None:
        set_field(self, "readings", readings)
        set_field(self, "now", now)

    @property
    def active(self) -> tuple[Reading, ...]:
        """The active full holds (a hold of everything at its location)."""
        return tuple(r for r in self.readings if r.active)

    @property
    def scoped_active(self) -> tuple[Reading, ...]:
        """The active scoped holds, whatever work they cover (issue 26)."""
        return tuple(s for r in self.readings for s in r.scoped if s.active)

    @property
    def every_active(self) -> tuple[Reading, ...]:
        """Every active hold, full then scoped: what holds SOME work."""
        return self.active + self.scoped_active

    @property
    def engaged(self) -> bool:
        return engaged(self)

    @property
    def engagement(self) -> frozenset[tuple[str, Fence | None]]:
        """The identity of what holds: one value per engagement (a re-arm is a new one), so a
        consumer logs "held" once per engagement, not once per refused piece of work."""
        return frozenset((r.location.key, r.fence) for r in self.every_active)

    def admits(self, user_id: Any = None, profile: Any = None) -> bool:
        return admits(self, user_id, profile)


def holding(snapshot: Snapshot, component: str | None = None, job: Any = None) -> tuple[Reading, ...]:
    """The active holds that cover work of `component` named `job` (one name, or several): every
    full hold, and each scoped hold whose selector covers it. Work that does not say what it is
    (`component` None) is covered by every hold; an unreadable selector covers everything."""
    found: list[Reading] | None = None
    for reading in snapshot.readings:
        if reading.active:
            if found is None:
                found = []
            found.append(reading)
        scoped = reading.scoped
        if scoped:
            covering = getattr(scoped, "covering", None)  # `selector.ScopedReadings`: indexed
            matched = covering(component, job) if covering is not None else tuple(
                s for s in scoped if s.active and s.covers(component, job))
            if matched:
                if found is None:
                    found = []
                found.extend(matched)
    return () if found is None else tuple(found)


def engaged(snapshot: Snapshot) -> bool:
    """At least one active hold, full or scoped (an unreadable hold is active)."""
    for reading in snapshot.readings:
        if reading.active:
            return True
        for scoped in reading.scoped:
            if scoped.active:
                return True
    return False


def admits(snapshot: Snapshot, user_id: Any, profile: Any, component: str | None = None, job: Any = None) -> bool:
    """At least one active hold covers the work, and EVERY one that does admits (deny wins). A
    profile narrows a principal's grant and never admits on its own; an unreadable hold admits
    nobody."""
    holds = holding(snapshot, component, job)
    return bool(holds) and all(reading.admits(user_id, profile) for reading in holds)


#: the body field that carries the scoped holds; its presence marks the scoped layout, in which
#: the top-level fields are only the wire summary upstream readers hold on (docs/design.md)
SCOPED_FIELD = "scoped_holds"
#: the body field that carries the full hold in the scoped layout (null: none stands)
FULL_FIELD = "full_hold"


def _load_json(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_BODY_BYTES:
        raise ValueError(f"body larger than {MAX_BODY_BYTES} bytes")
    if not raw.strip():
        raise ValueError(EMPTY_BODY)
    import json  # here, not at the top: `hermes check` with no hold never parses a body

    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object ({type(data).__name__})")  # noqa: TRY004 - every unreadable body is a ValueError to the caller
    return data


def parse_body(raw: bytes) -> Hold:
    """A `Hold` from sentinel bytes; raises `ValueError` with the reason when the body is
    unreadable (empty, too large, not UTF-8 JSON, not an object). Never anything else."""
    return _hold_from(_load_json(raw))


def hold_from_json(data: dict[str, Any]) -> Hold:
    """The hold `describe.hold_json` rendered (its wire names, its selector and id)."""
    from hermes_estop.model.selector import parse_selector

    selector = data.get("selector")
    return _hold_from(data).scoped_as(parse_selector(selector) if selector is not None else None, data.get("hold"))


def _hold_from(data: dict[str, Any]) -> Hold:
    generation = data.get(GENERATION_FIELD)
    reason = data.get("reason")
    armed_by = data.get("armed_by")
    window = data.get("window")
    raw_deadline = data.get("expires_at")
    expires_at = parse_stamp(raw_deadline)
    allow = parse_allow(data.get("allow"))
    problems = []
    if expires_at is None and raw_deadline is not None and raw_deadline != "":
        problems.append(DEADLINE_UNREADABLE)  # unparsable never means expired: it holds
    if not allow.valid:
        problems.append(ALLOWLIST_MALFORMED)
    return Hold(
        generation=generation if isinstance(generation, str) and generation else None,
        engaged_at=parse_stamp(data.get("engaged_at")),
        reason=reason if isinstance(reason, str) and reason else None,
        expires_at=expires_at,
        allow=allow,
        armed_by=armed_by if isinstance(armed_by, str) and armed_by else None,
        window=window if isinstance(window, dict) else None,
        problems=tuple(problems),
    )


class Sentinel(Record):
    """Everything one body holds: the full hold (None: only scoped holds stand and the body is
    their wire marker) and the scoped holds, each with its id and selector."""

    __slots__ = ("full", "scoped")
    full: Hold | None
    scoped: tuple[Hold, ...]

    def __init__(self, full: Hold | None, scoped: tuple[Hold, ...] = ()) -> None:
        set_field(self, "full", full)
        set_field(self, "scoped", scoped)


def parse_sentinel(raw: bytes) -> Sentinel:
    """`parse_body` for a body that may carry scoped holds. A scoped layout whose list, full
    hold or any entry's id cannot be read raises `ValueError`: the whole location is then
    unreadable and holds everything (an unreadable hold matches all work)."""
    data = _load_json(raw)
    if SCOPED_FIELD not in data:
        return Sentinel(_hold_from(data))
    from hermes_estop.model.selector import parse_selector

    entries = data[SCOPED_FIELD]
    full = data.get(FULL_FIELD)
    if not isinstance(entries, list) or (full is not None and not isinstance(full, dict)):
        raise ValueError("scoped holds unreadable")
    scoped = []
    seen = set()
    for entry in entries:
        hold_id = entry.get("id") if isinstance(entry, dict) else None
        if not isinstance(hold_id, str) or not hold_id or hold_id in seen:
            raise ValueError("a scoped hold without a readable id")
        seen.add(hold_id)
        selector = parse_selector(entry.get("selector"))
        hold = _hold_from(entry)
        problems = (*hold.problems, selector.problem) if selector.problem else hold.problems
        scoped.append(Hold(hold.generation, hold.engaged_at, hold.reason, hold.expires_at, hold.allow,
                           hold.armed_by, hold.window, problems, selector, hold_id))
    return Sentinel(_hold_from(full) if full is not None else None, tuple(scoped))


class Prepared(Record):
    """Both readings a body can give, built once per body: which one applies depends only on
    `now` (a store may cache this and pay only a comparison per check). A body with scoped
    holds also keeps one `Prepared` per scoped hold, and the last combined reading with the
    interval it holds for, so a check still costs a comparison, however many stand."""

    __slots__ = ("expires_at", "active", "expired", "scoped", "_memo")  # noqa: RUF023 (constructor order)
    expires_at: datetime | None
    active: Reading
    expired: Reading
    scoped: tuple[Prepared, ...]
    _memo: list[Any]

    def __init__(self, expires_at: datetime | None, active: Reading, expired: Reading,
                 scoped: tuple[Prepared, ...] = ()) -> None:
        set_field(self, "expires_at", expires_at)
        set_field(self, "active", active)
        set_field(self, "expired", expired)
        set_field(self, "scoped", scoped)
        set_field(self, "_memo", [None])

    def at(self, now: datetime) -> Reading:
        if not self.scoped:
            return self.active if in_interval(now, None, self.expires_at) else self.expired
        memo = self._memo[0]  # one tuple, replaced whole: threads sharing a store never see half of one
        if memo is not None and (memo[0] is None or memo[0] <= now) and (memo[1] is None or now < memo[1]):
            return memo[2]  # type: ignore[no-any-return]
        full = self.active if in_interval(now, None, self.expires_at) else self.expired
        reading = full.with_scoped(ScopedReadings(part.at(now) for part in self.scoped))
        deadlines = [p.expires_at for p in (self, *self.scoped) if p.expires_at is not None]
        self._memo[0] = (max((d for d in deadlines if d <= now), default=None),
                         min((d for d in deadlines if d > now), default=None), reading)
        return reading


def prepare(location: Location, parsed: Sentinel | Hold | str, file_id: tuple[int, ...] | None) -> Prepared:
    """docs/design.md §3 for a present sentinel: `parsed` is the body's `Hold` (or `Sentinel`), or
    the reason it is unreadable (active whatever the time). Expired only for a readable body
    whose parsable deadline is at or before `now`."""
    if isinstance(parsed, str):
        cause = Cause.EMPTY if parsed == EMPTY_BODY else None
        unreadable = Reading(location, HoldState.UNREADABLE, None, Fence(None, file_id), parsed, cause)
        return Prepared(None, unreadable, unreadable)
    if isinstance(parsed, Sentinel):
        scoped = tuple(prepare(location, hold, None) for hold in parsed.scoped)
        if parsed.full is None:
            absent = Reading(location, HoldState.ABSENT)
            return Prepared(None, absent, absent, scoped)
        whole = prepare(location, parsed.full, file_id)
        return Prepared(whole.expires_at, whole.active, whole.expired, scoped)
    fence = Fence(parsed.generation, None if parsed.generation else file_id)
    problem = "; ".join(parsed.problems) if parsed.problems else None
    return Prepared(parsed.expires_at, Reading(location, HoldState.ACTIVE, parsed, fence, problem),
                    Reading(location, HoldState.EXPIRED, parsed, fence))


def encode_body(hold: Hold) -> bytes:
    import json

    return (json.dumps(_fields(hold), indent=2, sort_keys=False) + "\n").encode("utf-8")


def _fields(hold: Hold) -> dict[str, Any]:
    body: dict[str, Any] = {
        GENERATION_FIELD: hold.generation,
        "engaged_at": format_instant(hold.engaged_at),
        "reason": hold.reason,
        "expires_at": format_instant(hold.expires_at),
        "allow": hold.allow.to_body(),
    }
    if hold.armed_by is not None:
        body["armed_by"] = hold.armed_by
    if hold.window is not None:
        body["window"] = dict(hold.window)
    return body


def wire_summary(sentinel: Sentinel, now: datetime, generation: str) -> Hold:
    """The top-level fields of a body carrying scoped holds: what a reader that knows no
    selectors (hermes-agent's `agent/estop.py`) holds on, for ALL work. Never less hold than any
    one of the holds for the work it covers: the deadline is the last of all deadlines (none if
    any hold has none), and the allowlist is the one every hold shares, else nobody."""
    holds = ([sentinel.full] if sentinel.full is not None else []) + list(sentinel.scoped)
    deadlines = [hold.expires_at for hold in holds]
    expires_at = None if any(d is None for d in deadlines) else max(d for d in deadlines if d is not None)
    allows = {hold.allow for hold in holds}
    allow = allows.pop() if len(allows) == 1 else NOBODY
    reasons = []
    for hold in holds:
        label = "" if hold.selector is None else f"[{hold.selector.describe()}] "
        if hold.reason or label:
            reasons.append(f"{label}{hold.reason or ''}".strip())
    return Hold(generation, now, "; ".join(reasons)[:MAX_REASON] or None, expires_at,
                allow if allow.valid else NOBODY, "hermes-estop:scoped-holds")


def encode_sentinel(sentinel: Sentinel, now: datetime) -> bytes | None:
    """The body for `sentinel`: exactly `encode_body` of the full hold when no scoped hold
    stands (the wire is unchanged), None when nothing stands (the sentinel is removed), else
    the scoped layout: the wire summary at the top, `full_hold` and `scoped_holds` beside it."""
    if not sentinel.scoped:
        return None if sentinel.full is None else encode_body(sentinel.full)
    import json

    body = _fields(wire_summary(sentinel, now, new_generation()))
    body["scoped_marker"] = sentinel.full is None
    body[FULL_FIELD] = _fields(sentinel.full) if sentinel.full is not None else None
    entries = []
    for hold in sentinel.scoped:
        entry = {"id": hold.hold_id, **_fields(hold)}
        entry["selector"] = hold.selector.to_body() if hold.selector is not None else {}
        entries.append(entry)
    body[SCOPED_FIELD] = entries
    return (json.dumps(body, indent=2, sort_keys=False) + "\n").encode("utf-8")


class _Vacant:
    """Precondition: write only where no active hold stands (a window never replaces a hold it
    did not arm)."""

    def __repr__(self) -> str:
        return "VACANT"


VACANT = _Vacant()

if TYPE_CHECKING:
    #: what fences a write (`EngageRequest.only_if`): nothing, no active hold, or one of these generations
    OnlyIf = _Vacant | Collection[str | None] | None


class EngageRequest(Record):
    """What a caller asked for. `None` fields are 'not supplied': a re-arm keeps them from the
    standing hold; `reason=""` is supplied and clears the reason. `only_if` fences the write:
    None (always), `VACANT` (no active hold), or a set of generations the active standing hold
    must carry. `selector` makes it a scoped hold (issue 26): it re-arms the scoped hold `hold_id`
    names, else the one with the same selector, else adds one; `only_if` is then judged against
    that scoped hold alone."""

    __slots__ = ("reason", "allow", "expires_at", "replace", "armed_by", "window", "only_if",  # noqa: RUF023 (constructor order)
                 "selector", "hold_id")
    reason: str | None
    allow: Allow | None
    expires_at: datetime | None
    replace: bool
    armed_by: str | None
    window: Mapping[str, Any] | None
    only_if: OnlyIf
    selector: Selector | None
    hold_id: str | None

    def __init__(self, reason: str | None = None, allow: Allow | None = None, expires_at: datetime | None = None,
                 replace: bool = False, armed_by: str | None = None, window: Mapping[str, Any] | None = None,
                 only_if: OnlyIf = None, selector: Selector | None = None, hold_id: str | None = None) -> None:
        set_field(self, "reason", reason)
        set_field(self, "allow", allow)
        set_field(self, "expires_at", expires_at)
        set_field(self, "replace", replace)
        set_field(self, "armed_by", armed_by)
        set_field(self, "window", window)
        set_field(self, "only_if", only_if)
        set_field(self, "selector", selector)
        set_field(self, "hold_id", hold_id)


def merge_hold(standing: Hold | None, request: EngageRequest, now: datetime, generation: str) -> Hold:
    """The body a (re-)engage writes. Non-destructive: what the request leaves as None comes from
    the standing hold (unless `replace`); the owner (`armed_by`) is kept (`owner_after`). Only
    an ACTIVE standing hold contributes: one whose deadline is at or before `now` has lifted,
    and a new engagement over it starts from nothing (else a pause over an unretired expired
    hold would inherit who was let through it)."""
    holding = standing if standing is not None and standing.active_at(now) else None
    base = None if request.replace else holding
    reason = request.reason if request.reason is not None else (base.reason if base else None)
    allow = request.allow if request.allow is not None else (base.allow if base else NOBODY)
    if not allow.valid:
        allow = NOBODY
    expires_at: datetime | None
    if request.expires_at is not None:
        expires_at = request.expires_at
    else:
        kept = base.expires_at if base else None
        expires_at = kept if kept is not None and in_interval(now, None, kept) else None
    return Hold(
        generation=generation,
        engaged_at=now,
        reason=reason or None,
        expires_at=expires_at,
        allow=allow,
        armed_by=owner_after(holding.armed_by if holding is not None else None, request.armed_by, holding is not None),
        window=request.window,
    )


def owner_after(standing: str | None, asking: str | None, holds: bool) -> str | None:
    """Who owns a hold after a write by `asking` over one owned by `standing` (`holds`: it is
    still held). A hold's owner is who armed it first: a re-arm (a `replace` too) keeps it, and
    the audit trail records who re-armed. The one handover is between windows: the scheduler
    names a composed hold after its earliest member (`window:<name>`), and every window is
    governed by the same `lift_windows` rule."""
    if not holds:
        return asking
    if standing is not None and asking is not None and standing.startswith("window:") and asking.startswith("window:"):
        return asking
    return standing


def precondition_met(only_if: OnlyIf, standing: Reading | None) -> bool:
    """Whether a fenced write may go ahead over `standing` (see `EngageRequest.only_if`): always
    for None; for `VACANT` only where no hold is active; for a set of generations only where the
    active hold carries one of them (a released or expired one does not count)."""
    if only_if is None:
        return True
    active = standing is not None and standing.active
    if isinstance(only_if, _Vacant):
        return not active
    return (active and standing is not None and standing.hold is not None
            and standing.hold.generation in only_if)


def not_current(location: Location, generation: str, standing: Reading | None) -> HoldConflict:
    """The error of a `release(generation)` that names a generation not standing at `location`
    (a store's, and `hermes --server URL resume --generation`'s from the server's 412)."""
    if standing is None:
        return HoldConflict(f"generation {generation} is not the current hold at {location.describe()} (none is)")
    current = standing.fence.describe() if standing.fence else "unknown"
    return HoldConflict(f"generation {generation} is not the current hold at {location.describe()} (current: {current})",
                        standing)
