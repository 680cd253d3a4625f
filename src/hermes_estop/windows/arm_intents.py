"""Remembering from the audit trail what the ledger missed (issue 9 item 2).

The scheduler writes the hold first and the ledger second. If it dies in between and the
operator then releases the hold (`hermes resume`), a restart finds no hold and no ledger entry:
without more memory it would arm the occurrence again, although the operator ended it.

So before every arm the scheduler appends an intent to the audit trail (`window-arm`, naming
the occurrence keys and the deadline it is about to write). The store then audits the write
itself (`engage` / `rearm`, with the generation it minted and the same deadline, by the same
actor). `recall` pairs each intent with the first such write after it: that generation is what
the window armed for those occurrences. `plan_scope` treats a recalled occurrence like an armed
ledger entry: still standing -> adopted; gone -> released early, never re-armed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime

from hermes_estop.model.audit_event import AuditEvent

__all__ = ["INTENT", "intent_detail", "recall"]

#: the audit event a window scheduler appends right before it arms
INTENT = "window-arm"
_PREFIX = "arming "


def intent_detail(keys: Iterable[str]) -> str:
    """The intent's detail: the occurrence keys (`<scope>/<window>@<start>`, no spaces)."""
    return _PREFIX + " ".join(keys)


def _named(event: AuditEvent) -> list[str]:
    detail = event.detail or ""
    return detail[len(_PREFIX):].split() if detail.startswith(_PREFIX) else []


def recall(events: Iterable[AuditEvent], scope: str, keys: Collection[str]) -> dict[str, str]:
    """occurrence key -> the generation armed for it, for those of `keys` the audit trail
    (`events`, oldest first) shows armed at `scope`. The latest arm of a key wins."""
    out: dict[str, str] = {}
    waiting: dict[str, tuple[str | None, datetime | None]] = {}
    for event in events:
        if event.location != scope:
            continue
        if event.event == INTENT:
            for key in _named(event):
                if key in keys:
                    waiting[key] = (event.actor, event.deadline)
        elif event.event in ("engage", "rearm") and event.generation and waiting:
            for key, (actor, deadline) in list(waiting.items()):
                if actor == event.actor and deadline == event.deadline:
                    out[key] = event.generation
                    del waiting[key]
    return out
