"""Bearer tokens of the write API: `hermes tokens create | list | revoke`.

A token is `hme_<secret>`, the secret 32 random bytes (256 bits, `secrets.token_urlsafe`),
printed once and never stored: the fleet keeps only its SHA-256 (a fast hash is enough for a
random 256-bit secret: there is nothing to guess a dictionary from). The table is the fleet's
`tokens` state (`Fleet.state`): `tokens-state.json` at the fleet root on the file store, the
`tokens_cursors` table on PostgreSQL, so every `serve` of the fleet agrees and a revoke takes
effect on the next request everywhere. Lookups compare every stored hash with
`hmac.compare_digest` (no early exit on a match).

The file is written 0600, and one not owned by the fleet's owner (the owner of the fleet root)
or root, or writable by group or others, is refused with one line (`StoreRefused`): anyone who
can write it could add an admin. `create` and `revoke` are audited (`token-create`,
`token-revoke`, with the name and role).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.errors import InvalidArgument, StoreRefused
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import format_instant, parse_instant
from hermes_estop.system.fsread import foreign_control

__all__ = ["ROLES", "TOKEN_PREFIX", "Token", "TokenTable", "hash_secret", "store_problem"]

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


def store_problem(path: Path, fleet_root: Path) -> str | None:
    """Why the token file `path` is not to be trusted (None: it is, or there is none): it must
    be owned by the fleet root's owner or root and writable by nobody else."""
    try:
        owner = os.stat(fleet_root).st_uid
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be checked: {exc.strerror or exc}"
    problem = foreign_control(path, owner)  # the rule the policy file meets too
    return f"it is {problem}" if problem is not None and not problem.startswith("cannot") else problem


class TokenTable:
    """The fleet's tokens."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.table = fleet.state(_SERVICE)
        #: the file the table is kept in (None: the store keeps it elsewhere, PostgreSQL)
        self.path: Path | None = getattr(self.table, "path", None)

    def _trusted(self) -> None:
        """`StoreRefused` (one line) when the token file may have been written by someone else."""
        if self.path is None:
            return
        problem = store_problem(self.path, self.fleet.root)
        if problem is not None:
            where = printable(self.path)
            raise StoreRefused(f"refusing the token store {where}: {problem} (anyone who can write it can add "
                               f"a token; chown it to the fleet's owner and chmod 600 {where})")

    @contextlib.contextmanager
    def _private(self) -> Iterator[None]:
        """A write of the token file, created 0600 (and kept so)."""
        self._trusted()
        mask = os.umask(0o077)
        try:
            yield
        finally:
            os.umask(mask)
        if self.path is not None:
            os.chmod(self.path, 0o600)

    def tokens(self) -> list[Token]:
        """Every stored token, by name; an entry this version cannot read is left out (admits
        nobody). `StoreRefused` for a token file that is not to be trusted."""
        self._trusted()
        loaded = self.table.load()
        found = (Token.from_state(name, state) for name, state in sorted(loaded.items()))
        return [token for token in found if token is not None]

    def any_valid(self, now: datetime) -> bool:
        return any(token.valid_at(now) for token in self.tokens())

    def create(self, name: str, role: str, lifetime: timedelta | None, now: datetime) -> tuple[Token, str]:
        """A new token and its secret (shown once), audited. `InvalidArgument` when `name` is
        taken by a token not revoked (revoke it first: a name says who acted in the audit trail)."""
        check_name(name)
        check_role(role)
        standing = next((t for t in self.tokens() if t.name == name), None)
        if standing is not None and standing.revoked_at is None:
            raise InvalidArgument(f"a token named {name!r} exists (hermes tokens revoke {name} first)")
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = Token(name, role, hash_secret(secret), now, now + lifetime if lifetime else None, None)
        with self._private():
            self.table.save(name, token.to_state())
        expires = f", expires {format_instant(token.expires_at)}" if token.expires_at is not None else ""
        self.fleet.record("token-create", self.fleet.fleet_location, detail=f"token {name} ({role}{expires})", now=now)
        return token, secret

    def revoke(self, name: str, now: datetime) -> Token:
        token = next((t for t in self.tokens() if t.name == name), None)
        if token is None:
            raise InvalidArgument(f"no token named {name!r}")
        if token.revoked_at is not None:
            return token
        revoked = Token(token.name, token.role, token.digest, token.created_at, token.expires_at, now)
        with self._private():
            self.table.save(name, revoked.to_state())
        self.fleet.record("token-revoke", self.fleet.fleet_location, detail=f"token {name} ({token.role})", now=now)
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
