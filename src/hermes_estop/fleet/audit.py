"""The audit trail as the fleet writes and shows it: who a write is by (`default_actor`) and the
renewals `hermes history` folds (`coalesce_renewals`). The records are `model.audit_event`; the
trail itself is kept by the stores (`stores.audit_log` for a file store, `stores.pg_audit`).
"""

from __future__ import annotations

import os

from hermes_estop.model.audit_event import AuditEvent

__all__ = ["account_name", "coalesce_renewals", "default_actor"]


def account_name() -> str:
    """The account of this process's effective uid (its uid where it has no name). Never
    `$USER` or `$LOGNAME`: the environment is input, and root with `USER=alice` is root."""
    import pwd

    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OSError):
        return str(uid)


def default_actor() -> str:
    """Who did it, as far as this process can tell: `user@host` (`account_name`)."""
    import socket

    return f"{account_name()}@{socket.gethostname()}"


def coalesce_renewals(events: list[AuditEvent]) -> list[tuple[AuditEvent, int]]:
    """`events` with each run of consecutive renewals folded into its last one: a `rearm` at the
    same scope, by the same actor, with the same reason as the `engage`/`rearm` just before it
    (a lease renewed every ttl/3 writes one per renewal). Each item is (the event shown, how many
    renewals it stands for: 1 for an event that folds nothing)."""
    out: list[tuple[AuditEvent, int]] = []
    for event in events:
        if out and event.event == "rearm":
            last, count = out[-1]
            if (last.event in ("engage", "rearm") and last.location == event.location and last.actor == event.actor
                    and last.reason == event.reason) and last.event == "rearm":
                out[-1] = (event, count + 1)
                continue
        out.append((event, 1))
    return out
