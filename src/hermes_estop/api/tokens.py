"""Bearer tokens of the write API: `hermes tokens create | list | revoke`.

A token is `hme_<secret>`, the secret 32 random bytes (256 bits, `secrets.token_urlsafe`),
printed once and never stored: the fleet keeps only its SHA-256 (a fast hash is enough for a
random 256-bit secret: there is nothing to guess a dictionary from). The table is the fleet's
`tokens` state (`Fleet.state`): `tokens-state.json` at the fleet root on the file store, the
`tokens_cursors` table on PostgreSQL, so every `serve` of the fleet agrees and a revoke takes
effect on the next request everywhere. Lookups compare every stored hash with
`hmac.compare_digest` (no early exit on a match).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hermes_estop.model.errors import InvalidArgument
from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.timeutil import format_instant, parse_instant

__all__ = ["ROLES", "TOKEN_PREFIX", "Token", "TokenTable", "hash_secret"]

ROLES = ("viewer", "operator", "admin")
TOKEN_PREFIX = "hme_"
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SERVICE = "tokens"


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True)
class Token:
    """One stored token (its hash, never its secret)."""

    name: str
    role: str
    digest: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None

    def valid_at(self, now: datetime) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)

    def allows(self, role: str) -> bool:
        """Whether this token's role is at least `role` (viewer < operator < admin)."""
        return ROLES.index(self.role) >= ROLES.index(role)

    def to_state(self) -> dict[str, Any]:
        return {"role": self.role, "sha256": self.digest, "created_at": format_instant(self.created_at),
                "expires_at": format_instant(self.expires_at), "revoked_at": format_instant(self.revoked_at)}

    def to_json(self, now: datetime) -> dict[str, Any]:
        """What `hermes tokens list --json` shows: never the hash."""
        state = "revoked" if self.revoked_at is not None else "expired" if not self.valid_at(now) else "valid"
        return {"name": self.name, "role": self.role, "state": state, "created_at": format_instant(self.created_at),
                "expires_at": format_instant(self.expires_at), "revoked_at": format_instant(self.revoked_at)}

    @classmethod
    def from_state(cls, name: str, state: Any) -> Token | None:
        """The stored entry, or None when it is not one this version wrote (never admitted)."""
        if not isinstance(state, dict) or state.get("role") not in ROLES or not isinstance(state.get("sha256"), str):
            return None
        try:
            created = parse_instant(state.get("created_at"))
            expires = parse_instant(state["expires_at"]) if state.get("expires_at") else None
            revoked = parse_instant(state["revoked_at"]) if state.get("revoked_at") else None
        except (ValueError, TypeError):
            return None
        return cls(name, state["role"], state["sha256"], created, expires, revoked)


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidArgument(f"invalid token name {name!r}: letters, digits, '_', '.', '-' (at most 64)")
    return name


def check_role(role: str) -> str:
    if role not in ROLES:
        raise InvalidArgument(f"invalid --role {role!r}: expected one of {', '.join(ROLES)}")
    return role


class TokenTable:
    """The fleet's tokens."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.table = fleet.state(_SERVICE)

    def tokens(self) -> list[Token]:
        """Every stored token, by name; an entry this version cannot read is left out (admits nobody)."""
        loaded = self.table.load()
        found = (Token.from_state(name, state) for name, state in sorted(loaded.items()))
        return [token for token in found if token is not None]

    def any_valid(self, now: datetime) -> bool:
        return any(token.valid_at(now) for token in self.tokens())

    def create(self, name: str, role: str, lifetime: timedelta | None, now: datetime) -> tuple[Token, str]:
        """A new token and its secret (shown once). `InvalidArgument` when `name` is taken by a
        token not revoked (revoke it first: a name says who acted in the audit trail)."""
        check_name(name)
        check_role(role)
        standing = next((t for t in self.tokens() if t.name == name), None)
        if standing is not None and standing.revoked_at is None:
            raise InvalidArgument(f"a token named {name!r} exists (hermes tokens revoke {name} first)")
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = Token(name, role, hash_secret(secret), now, now + lifetime if lifetime else None, None)
        self.table.save(name, token.to_state())
        return token, secret

    def revoke(self, name: str, now: datetime) -> Token:
        token = next((t for t in self.tokens() if t.name == name), None)
        if token is None:
            raise InvalidArgument(f"no token named {name!r}")
        if token.revoked_at is not None:
            return token
        revoked = Token(token.name, token.role, token.digest, token.created_at, token.expires_at, now)
        self.table.save(name, revoked.to_state())
        return revoked

    def authenticate(self, secret: str, now: datetime) -> Token | None:
        """The valid token whose secret is `secret`, or None. Every stored hash is compared in
        constant time, whatever matches first."""
        return self.by_digest(hash_secret(secret), now)

    def by_digest(self, digest: str, now: datetime) -> Token | None:
        """The valid token whose hash is `digest` (a signed-in page's session keeps only that)."""
        found = None
        for token in self.tokens():
            if hmac.compare_digest(token.digest, digest) and found is None:
                found = token
        return found if found is not None and found.valid_at(now) else None
