"""Sentinels cross-read both ways with a minimal, independent implementation of upstream's wire
format: its writer is plain `json.dumps` of the documented body written straight to
`$HERMES_HOME/ESTOP`; its reader follows the documented read rules (UTF-8 with an optional BOM, a
JSON object or held, a naive stamp is UTC, an unparsable stamp never expires, `user_ids` is the
only grant and `profiles` narrows it)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

# -- the minimal upstream-format writer and reader --------------------------------------------------


def upstream_write(path: Path, *, reason: str | None = None, expires_at: datetime | str | None = None,
                   allow: dict[str, Any] | None = None, naive: bool = False, bom: bool = False) -> str:
    generation = uuid.uuid4().hex
    body: dict[str, Any] = {"generation": generation, "engaged_at": datetime.now(UTC).isoformat(),
                            "reason": reason}
    if isinstance(expires_at, datetime):
        body["expires_at"] = (expires_at.replace(tzinfo=None) if naive else expires_at).isoformat()
    elif expires_at is not None:
        body["expires_at"] = expires_at
    if allow:
        body["allow"] = allow
    text = json.dumps(body, indent=2) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return generation


def upstream_read(path: Path) -> dict[str, Any] | None:
    """The body, or None when absent or unusable (which holds)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def upstream_deadline(body: dict[str, Any] | None) -> datetime | None:
    value = (body or {}).get("expires_at")
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        stamp = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def upstream_engaged(path: Path) -> bool:
    if not path.exists():
        return False
    deadline = upstream_deadline(upstream_read(path))
    return deadline is None or datetime.now(UTC) < deadline


def upstream_admits(path: Path, user_id: Any, profile: Any) -> bool:
    body = upstream_read(path)
    allow = (body or {}).get("allow") or {}
    users = [str(u) for u in allow.get("user_ids") or []]
    profiles = [str(p) for p in allow.get("profiles") or []]
    if user_id is None or str(user_id) not in users:
        return False
    return not profiles or (profile is not None and str(profile) in profiles)


# -- upstream writes, hermes-estop reads -------------------------------------------------------------

FUTURE = datetime.now(UTC) + timedelta(hours=1)
PAST = datetime.now(UTC) - timedelta(minutes=1)

WRITER_FORMS: dict[str, dict[str, Any]] = {
    "reason-only": {"reason": "maint"},
    "no-reason": {},
    "deadman": {"reason": "window", "expires_at": FUTURE},
    "naive-deadman": {"expires_at": FUTURE, "naive": True},
    "bom": {"reason": "bom", "expires_at": FUTURE, "bom": True},
    "expired": {"reason": "old", "expires_at": PAST},
    "unparsable-deadman": {"expires_at": "garbage"},
    "allow-user": {"allow": {"user_ids": ["424242"]}},
    "allow-user-profile": {"allow": {"user_ids": ["424242"], "profiles": ["ops"]}},
    "allow-int-id": {"allow": {"user_ids": [424242]}},
}


@pytest.mark.parametrize("form", list(WRITER_FORMS), ids=list(WRITER_FORMS))
def test_hermes_estop_reads_what_upstream_writes(estop, dot_hermes, form):
    path = dot_hermes / "ESTOP"
    upstream_write(path, **WRITER_FORMS[form])
    assert estop.is_engaged() is upstream_engaged(path)
    for user, profile in [("424242", "ops"), ("424242", "dev"), ("7", "ops"), (424242, None)]:
        assert estop.is_allowed(user, profile) is (upstream_engaged(path) and upstream_admits(path, user, profile))
    if upstream_engaged(path):
        assert estop.get_state()["reason"] == WRITER_FORMS[form].get("reason")


def test_hermes_estop_honours_a_touched_sentinel(estop, dot_hermes):
    (dot_hermes / "ESTOP").touch()
    assert estop.is_engaged() and not estop.is_allowed("424242")


def test_deny_wins_across_an_upstream_root_and_profile(estop, dot_hermes, monkeypatch):
    upstream_write(dot_hermes / "ESTOP", allow={"user_ids": ["alice"]})
    upstream_write(dot_hermes / "profiles" / "ops" / "ESTOP", allow={"user_ids": ["bob"]})
    monkeypatch.setenv("HERMES_HOME", str(dot_hermes / "profiles" / "ops"))
    assert estop.is_engaged()
    assert not estop.is_allowed("alice", "ops") and not estop.is_allowed("bob", "ops")


def test_a_rearm_over_an_upstream_hold_keeps_its_allowlist_and_deadman(estop, dot_hermes):
    path = dot_hermes / "ESTOP"
    upstream_write(path, reason="maint", expires_at=FUTURE, allow={"user_ids": ["424242"]})
    estop.engage(reason="still")
    body = upstream_read(path)
    assert upstream_deadline(body) == FUTURE
    assert upstream_admits(path, "424242", None) and body["reason"] == "still"


# -- hermes-estop writes, upstream reads -------------------------------------------------------------

ENGAGE_FORMS: dict[str, dict[str, Any]] = {
    "bare": {},
    "reason": {"reason": "maint"},
    "ttl": {"reason": "window", "ttl": "45m"},
    "until": {"expires_at": FUTURE},
    "allow-user": {"allow": {"user_ids": ["424242"]}},
    "allow-user-profile": {"allow": {"user_ids": ["424242"], "profiles": ["ops"]}},
}


@pytest.mark.parametrize("form", list(ENGAGE_FORMS), ids=list(ENGAGE_FORMS))
def test_upstream_reads_what_hermes_estop_writes(estop, form):
    path = estop.engage(**ENGAGE_FORMS[form])
    body = upstream_read(path)
    assert body is not None and isinstance(body["generation"], str) and body["generation"]
    assert body["reason"] == ENGAGE_FORMS[form].get("reason")
    assert upstream_engaged(path)
    datetime.fromisoformat(body["engaged_at"])
    deadline = upstream_deadline(body)
    assert (deadline is not None) is ("ttl" in ENGAGE_FORMS[form] or "expires_at" in ENGAGE_FORMS[form])
    for user, profile in [("424242", "ops"), ("424242", "dev"), ("7", "ops")]:
        assert upstream_admits(path, user, profile) is estop.is_allowed(user, profile)


def test_every_hermes_estop_engage_mints_a_generation_upstream_can_fence_on(estop):
    path = estop.engage(reason="a")
    first = upstream_read(path)["generation"]
    estop.engage(reason="b")
    assert upstream_read(path)["generation"] != first
