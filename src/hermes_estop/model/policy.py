"""The arming policy (issue 37): limits a fleet sets on its own holds, and the pure decision.

A `Policy` is parsed from the `[policy]` table of `estop.toml` (or the copy a PostgreSQL store
keeps, so every host enforces the same one) by `parse_policy`, which names every unknown key
and bad value (`InvalidArgument`, CLI exit 2). `decide_arm` and `decide_lift` are pure: a
policy, an `Actor`, what the write would leave behind, and `now` in; a `Refusal` naming the
rule and the value, or None, out. The fleet's writes (`Fleet.engage`, `Fleet.release*`) call
them, so the CLI, `hermes run`, the Python API, windows and a remote caller meet the same rules.

What a policy cannot stop: anyone who can write the fleet root (or the database) can write a
sentinel by hand. Such a hold is honoured like any other; the policy governs hermes' writes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from hermes_estop.model.durations import format_duration, parse_with_unit
from hermes_estop.model.errors import EstopError, InvalidArgument
from hermes_estop.model.record import Record, set_field
from hermes_estop.model.text import printable

__all__ = ["ADMIN", "LIFT_RULES", "NO_POLICY", "OPERATOR", "Actor", "HoldToArm", "HoldToLift", "Policy", "PolicyRefused",
           "Refusal", "Rules", "arm_refusals", "check_pattern", "decide_arm", "decide_lift", "decide_window",
           "may_override", "parse_policy", "pattern_matches", "policy_document", "window_refusals"]

ADMIN = "admin"
OPERATOR = "operator"
#: who may lift a hold before its deadman
LIFT_RULES = ("anyone", "owner-or-admin", "admins")
SCOPES = ("fleet", "profile")
#: `armed_by` of a hold `hermes run` holds for its job (`run:<actor>`): its owner ending it is its end, not a lift
LEASE_PREFIX = "run:"
WINDOW_PREFIX = "window:"

_RULE_KEYS = frozenset({"max_ttl", "require_ttl", "reason_pattern", "lift", "lift_windows"})
_TOP_KEYS = _RULE_KEYS | {"max_scope", "roles", "profiles"}


class PolicyRefused(EstopError, PermissionError):
    """A write the fleet's arming policy refuses; the message names every rule it breaks
    (`refusals`, the first also as `refusal`)."""

    def __init__(self, refusal: Refusal, *more: Refusal) -> None:
        self.refusals = (refusal, *more)
        super().__init__("; ".join(r.message for r in self.refusals))
        self.refusal = refusal


class Actor(Record):
    """Who makes a write. Local callers: `user@host` (`name`), their user name and groups, and
    whether they can write the fleet root (break glass). Remote callers: `Actor.remote(token,
    role)`, named `token:NAME`, with the role their token carries."""

    __slots__ = ("name", "user", "groups", "role", "can_write_root", "principal", "lift_floor")  # noqa: RUF023 (constructor order)
    name: str
    user: str | None
    groups: frozenset[str]
    role: str | None
    can_write_root: bool
    #: who this actor is when a hold's owner is compared (None: `name`); a remote caller's
    #: `name` carries its address for the record, its principal is the token alone
    principal: str | None
    #: the least strict lift rule this actor is held to whatever the policy says (an operator
    #: token lifts only what it armed: "owner-or-admin")
    lift_floor: str

    def __init__(self, name: str, user: str | None = None, groups: frozenset[str] = frozenset(), role: str | None = None,
                 can_write_root: bool = False, principal: str | None = None, lift_floor: str = "anyone") -> None:
        set_field(self, "name", name)
        set_field(self, "user", user)
        set_field(self, "groups", groups)
        set_field(self, "role", role)
        set_field(self, "can_write_root", can_write_root)
        set_field(self, "principal", principal)
        set_field(self, "lift_floor", lift_floor)

    @classmethod
    def remote(cls, token: str, role: str, address: str | None = None) -> Actor:
        """A token's caller: owner `token:NAME`, recorded as `token:NAME from ADDRESS`; an
        operator token lifts only the holds it armed, under any policy."""
        principal = f"token:{token}"
        return cls(name=f"{principal} from {address}" if address else principal, role=role, principal=principal,
                   lift_floor="anyone" if role == ADMIN else "owner-or-admin")

    @property
    def owner(self) -> str:
        """What a hold this actor arms records as `armed_by`, and what ownership compares."""
        return self.principal if self.principal is not None else self.name


class Rules(Record):
    """The rules that a profile may override."""

    __slots__ = ("max_ttl", "require_ttl", "reason_pattern", "lift", "lift_windows")  # noqa: RUF023 (constructor order)
    max_ttl: timedelta | None
    require_ttl: bool
    reason_pattern: str | None
    lift: str
    lift_windows: str

    def __init__(self, max_ttl: timedelta | None = None, require_ttl: bool = False, reason_pattern: str | None = None,
                 lift: str = "anyone", lift_windows: str = "anyone") -> None:
        set_field(self, "max_ttl", max_ttl)
        set_field(self, "require_ttl", require_ttl)
        set_field(self, "reason_pattern", reason_pattern)
        set_field(self, "lift", lift)
        set_field(self, "lift_windows", lift_windows)

    def values(self) -> dict[str, Any]:
        """Each rule by name."""
        return {name: getattr(self, name) for name in self.__slots__}


class Policy(Record):
    __slots__ = ("rules", "max_scope", "roles", "profiles")  # noqa: RUF023 (constructor order)
    rules: Rules
    max_scope: str
    #: member (`alice`, `group:ops`, an actor's name) -> role (`admin`, `operator`)
    roles: Mapping[str, str]
    #: profile name -> its rules (the fleet's, with that profile's overrides applied)
    profiles: Mapping[str, Rules]

    def __init__(self, rules: Rules | None = None, max_scope: str = "fleet", roles: Mapping[str, str] | None = None,
                 profiles: Mapping[str, Rules] | None = None) -> None:
        set_field(self, "rules", Rules() if rules is None else rules)
        set_field(self, "max_scope", max_scope)
        set_field(self, "roles", {} if roles is None else roles)
        set_field(self, "profiles", {} if profiles is None else profiles)

    def rules_for(self, scope: str) -> Rules:
        return self.profiles.get(scope, self.rules) if scope != "fleet" else self.rules

    def role_of(self, actor: Actor) -> str:
        """The actor's role: the one a remote token carries, else the policy's mapping of its
        name (`gateway:424242@host`), its user or any of its groups (admin wins), else operator."""
        if actor.role is not None:
            return actor.role
        members = [actor.name, *([actor.user] if actor.user else []), *(f"group:{g}" for g in sorted(actor.groups))]
        found = [self.roles[m] for m in members if m in self.roles]
        return ADMIN if ADMIN in found else (found[0] if found else OPERATOR)

    @property
    def empty(self) -> bool:
        """No rule, role or profile: what no `[policy]` table reads as."""
        return self is NO_POLICY or (self.max_scope == "fleet" and not self.roles and not self.profiles
                                     and self.rules.values() == _NO_RULES)


NO_POLICY = Policy()
_NO_RULES = Rules().values()


class Refusal(Record):
    __slots__ = ("rule", "value", "message")  # noqa: RUF023 (constructor order)
    rule: str
    value: str
    message: str

    def __init__(self, rule: str, value: str, message: str) -> None:
        set_field(self, "rule", rule)
        set_field(self, "value", value)
        set_field(self, "message", message)


class HoldToArm(Record):
    """The hold a write would leave at `scope` (after a re-arm's merge)."""

    __slots__ = ("scope", "expires_at", "reason")  # noqa: RUF023 (constructor order)
    scope: str
    expires_at: datetime | None
    reason: str | None

    def __init__(self, scope: str, expires_at: datetime | None, reason: str | None) -> None:
        set_field(self, "scope", scope)
        set_field(self, "expires_at", expires_at)
        set_field(self, "reason", reason)


class HoldToLift(Record):
    """A hold at `scope` someone would remove before its deadman."""

    __slots__ = ("scope", "armed_by", "expires_at")  # noqa: RUF023 (constructor order)
    scope: str
    armed_by: str | None
    expires_at: datetime | None

    def __init__(self, scope: str, armed_by: str | None, expires_at: datetime | None) -> None:
        set_field(self, "scope", scope)
        set_field(self, "armed_by", armed_by)
        set_field(self, "expires_at", expires_at)


def _refusal(rule: str, value: str, why: str) -> Refusal:
    return Refusal(rule, value, f"refused by policy {rule}: {why}")


def _format(delta: timedelta) -> str:
    return format_duration(delta)


def arm_refusals(policy: Policy, actor: Actor, arm: HoldToArm, now: datetime) -> tuple[Refusal, ...]:
    """Every rule of `policy` that `actor` leaving `arm` standing at `now` breaks (empty: none)."""
    found: list[Refusal] = []
    if arm.scope == "fleet" and policy.max_scope == "profile" and policy.role_of(actor) != ADMIN:
        found.append(_refusal("max_scope", "fleet", f"{printable(actor.name)} may hold a profile, not the fleet"))
    rules = policy.rules_for(arm.scope)
    if arm.expires_at is None:
        if rules.require_ttl:
            found.append(_refusal("require_ttl", "none", "a hold needs a deadman (--ttl or --until)"))
    elif rules.max_ttl is not None and arm.expires_at - now > rules.max_ttl:
        ttl = _format(arm.expires_at - now)
        found.append(_refusal("max_ttl", ttl, f"ttl {ttl} is longer than max_ttl {_format(rules.max_ttl)}"))
    if rules.reason_pattern is not None and not pattern_matches(rules.reason_pattern, arm.reason or ""):
        found.append(_refusal("reason_pattern", printable(arm.reason or ""),
                              f"reason {printable(repr(arm.reason or ''))} does not match "
                              f"{printable(repr(rules.reason_pattern))}"))
    return tuple(found)


def decide_arm(policy: Policy, actor: Actor, arm: HoldToArm, now: datetime) -> Refusal | None:
    """None when `policy` lets `actor` leave `arm` standing at `now`, else the first rule it breaks."""
    found = arm_refusals(policy, actor, arm, now)
    return found[0] if found else None


def _owner(armed_by: str | None) -> str | None:
    if armed_by is not None and armed_by.startswith(LEASE_PREFIX):
        return armed_by[len(LEASE_PREFIX):]
    return armed_by


def decide_lift(policy: Policy, actor: Actor, lift: HoldToLift, now: datetime) -> Refusal | None:
    """None when `policy` lets `actor` remove `lift`'s hold at `now`. A hold past its deadman is
    no longer held, and a `hermes run` hold ended by the actor it runs for is its end: neither
    is a lift."""
    if lift.expires_at is not None and lift.expires_at <= now:
        return None
    if lift.armed_by is not None and lift.armed_by == LEASE_PREFIX + actor.owner:
        return None
    rules = policy.rules_for(lift.scope)
    window = lift.armed_by is not None and lift.armed_by.startswith(WINDOW_PREFIX)
    rule, who = ("lift_windows", rules.lift_windows) if window else ("lift", rules.lift)
    if LIFT_RULES.index(actor.lift_floor) > LIFT_RULES.index(who):
        rule, who = "token", actor.lift_floor
    if who == "anyone" or policy.role_of(actor) == ADMIN:
        return None
    if who == "owner-or-admin" and _owner(lift.armed_by) == actor.owner:
        return None
    armed = printable(lift.armed_by) if lift.armed_by else "outside hermes"
    return _refusal(rule, who, f"{printable(actor.name)} may not lift a hold armed by {armed} ({rule} = {who})")


def may_override(policy: Policy, actor: Actor) -> bool:
    """Break glass: an admin, or a local operator who can write the fleet root anyway."""
    return policy.role_of(actor) == ADMIN or actor.can_write_root


# -- parsing -----------------------------------------------------------------------------------


#: the longest `reason_pattern` a policy may hold
MAX_PATTERN = 512


def _linear(pattern: str) -> Any:
    """`pattern` compiled by RE2 (linear time in the text, whatever the pattern), or `ValueError`.
    Why RE2: a policy is input, and one backtracking pattern with a crafted reason would stall
    every write of the fleet (and `hermes serve`) in Python's `re`."""
    import re2

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options=options)
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(detail) from None


def _nested_repeat(pattern: str) -> bool:
    """Whether `pattern` repeats something that itself repeats (`(a+)*`, `(\\w+\\s?)+`): the
    shape that backtracks catastrophically in a backtracking engine (hermes matches with RE2,
    but a policy is also read by tools that may not)."""
    from re import _parser  # type: ignore[attr-defined]

    repeats = {_parser.MAX_REPEAT, _parser.MIN_REPEAT, getattr(_parser, "POSSESSIVE_REPEAT", None)}

    def walk(items: Any, inside: bool) -> bool:
        for op, arg in items:
            if op in repeats:
                _low, high, body = arg
                unbounded = high == _parser.MAXREPEAT or high > 1
                if inside and unbounded:
                    return True
                if walk(body, inside or unbounded):
                    return True
            elif op == _parser.SUBPATTERN:
                if walk(arg[-1], inside):
                    return True
            elif op == _parser.BRANCH:
                if any(walk(branch, inside) for branch in arg[1]):
                    return True
            elif op in (_parser.ASSERT, _parser.ASSERT_NOT) and walk(arg[1], inside):
                return True
        return False

    return walk(_parser.parse(pattern), False)


def check_pattern(pattern: str) -> str | None:
    """Why `pattern` may not be a `reason_pattern` (None: it may): too long, not a regular
    expression, a feature RE2 does not run in linear time (back-references, look-around), or a
    repeated group that itself repeats."""
    if len(pattern) > MAX_PATTERN:
        return f"longer than {MAX_PATTERN} characters"
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"not a regular expression ({exc})"
    except RecursionError:
        return "nested too deeply"
    try:
        _linear(pattern)
    except ValueError as exc:
        return (f"{printable(repr(pattern))} cannot be matched in linear time ({printable(str(exc))}): back-references "
                "and look-around are not allowed")
    if _nested_repeat(pattern):
        return (f"{printable(repr(pattern))} repeats a group that itself repeats, which can backtrack catastrophically; "
                "write it without the nested repetition (e.g. '^[A-Za-z0-9 ]*$')")
    return None


_COMPILED: dict[str, Any] = {}


def pattern_matches(pattern: str, text: str) -> bool:
    """`re.search` semantics in linear time (RE2); a pattern RE2 refuses matches nothing (a
    policy that holds one was never parsed by `parse_policy`)."""
    compiled = _COMPILED.get(pattern)
    if compiled is None:
        try:
            compiled = _linear(pattern)
        except ValueError:
            return False
        if len(_COMPILED) > 64:
            _COMPILED.clear()
        _COMPILED[pattern] = compiled
    return compiled.search(text) is not None


def _bad(where: str, key: str, why: str) -> InvalidArgument:
    return InvalidArgument(f"invalid policy in {printable(where)}: {printable(key)}: {why}")


def _unknown(where: str, table: str, data: Mapping[str, Any], known: frozenset[str]) -> None:
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise InvalidArgument(f"invalid policy in {printable(where)}: unknown key {printable(repr(unknown[0]))} in "
                              f"[{table}] (known: {', '.join(sorted(known))})")


def _table(where: str, key: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(where, key, f"must be a table, not {printable(repr(value))}")
    return value


def _rules(where: str, table: str, data: Mapping[str, Any], base: Rules) -> Rules:
    values = base.values()
    if "max_ttl" in data:
        raw = data["max_ttl"]
        try:
            values["max_ttl"] = parse_with_unit(raw)
        except EstopError as exc:
            raise _bad(where, f"{table}.max_ttl", str(exc)) from None
    if "require_ttl" in data:
        if not isinstance(data["require_ttl"], bool):
            raise _bad(where, f"{table}.require_ttl", f"must be true or false, not {printable(repr(data['require_ttl']))}")
        values["require_ttl"] = data["require_ttl"]
    if "reason_pattern" in data:
        pattern = data["reason_pattern"]
        if not isinstance(pattern, str):
            raise _bad(where, f"{table}.reason_pattern", f"must be a string, not {printable(repr(pattern))}")
        problem = check_pattern(pattern)
        if problem is not None:
            raise _bad(where, f"{table}.reason_pattern", problem)
        values["reason_pattern"] = pattern
    for key in ("lift", "lift_windows"):
        if key in data:
            if data[key] not in LIFT_RULES:
                raise _bad(where, f"{table}.{key}", f"{printable(repr(data[key]))} is not one of {', '.join(LIFT_RULES)}")
            values[key] = data[key]
    return Rules(**values)


def parse_policy(data: object, where: str) -> Policy:
    """The `[policy]` table `data` (None: no policy) read from `where` (a file, a store), or
    `InvalidArgument` naming the first unknown key or bad value."""
    if data is None:
        return NO_POLICY
    data = _table(where, "policy", data)
    _unknown(where, "policy", data, _TOP_KEYS)
    rules = _rules(where, "policy", data, Rules())
    max_scope = data.get("max_scope", "fleet")
    if max_scope not in SCOPES:
        raise _bad(where, "policy.max_scope", f"{printable(repr(max_scope))} is not one of {', '.join(SCOPES)}")
    roles: dict[str, str] = {}
    for member, role in _table(where, "policy.roles", data.get("roles", {})).items():
        if role not in (ADMIN, OPERATOR):
            raise _bad(where, f"policy.roles.{member}", f"{printable(repr(role))} is not one of {ADMIN}, {OPERATOR}")
        roles[str(member)] = role
    profiles: dict[str, Rules] = {}
    for name, table in _table(where, "policy.profiles", data.get("profiles", {})).items():
        section = f"policy.profiles.{name}"
        body = _table(where, section, table)
        _unknown(where, section, body, _RULE_KEYS)
        profiles[str(name)] = _rules(where, section, body, rules)
    return Policy(rules, max_scope, roles, profiles)


def _rules_document(rules: Rules, base: Rules | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in rules.values().items():
        if base is not None and getattr(base, key) == value:
            continue
        if value is None or (base is None and value == getattr(Rules(), key)):
            continue
        out[key] = _format(value) if isinstance(value, timedelta) else value
    return out


def policy_document(policy: Policy) -> dict[str, Any]:
    """The `[policy]` table that `parse_policy` reads back as `policy` (what `policy show`
    prints and `policy set` stores)."""
    out = _rules_document(policy.rules, None)
    if policy.max_scope != "fleet":
        out["max_scope"] = policy.max_scope
    if policy.roles:
        out["roles"] = dict(policy.roles)
    if policy.profiles:
        out["profiles"] = {name: _rules_document(rules, policy.rules) for name, rules in policy.profiles.items()}
    return out


def window_refusals(policy: Policy, actor: Actor, scope: str, length: timedelta, reason: str | None) -> tuple[Refusal, ...]:
    """Every rule a window (or a calendar's event) breaks when `actor` (the scheduler) holds
    `scope` for `length` (its drain lead and duration) with `reason` (the window's own reason,
    the one an operator wrote: never the derived "draining for ..." one); a window that breaks
    one is not armed."""
    epoch = datetime(2000, 1, 1)
    return arm_refusals(policy, actor, HoldToArm(scope, epoch + length, reason), epoch)


def decide_window(policy: Policy, actor: Actor, scope: str, length: timedelta, reason: str | None) -> Refusal | None:
    """The first of `window_refusals`, or None."""
    found = window_refusals(policy, actor, scope, length, reason)
    return found[0] if found else None
