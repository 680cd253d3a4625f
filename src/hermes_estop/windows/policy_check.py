"""Windows and calendars meet the fleet's arming policy when they are validated (issue 37), so
a schedule never surprises at 03:00: a window whose hold would break a rule (longer than
`max_ttl`, a reason `reason_pattern` refuses, a scope the scheduler's actor may not hold) is named by `hermes windows validate` and is
not armed by `hermes serve` (it fails the way a window that does not validate fails)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_estop.model.policy import Actor, Policy, Refusal, decide_window
from hermes_estop.windows.invalid import InvalidWindow

if TYPE_CHECKING:  # pragma: no cover
    from hermes_estop.windows.model import Window
    from hermes_estop.windows.windows_file import Parsed

__all__ = ["against_policy", "window_refusal"]

_FIELDS = {"max_ttl": "duration", "reason_pattern": "reason", "require_ttl": "duration", "max_scope": "scope"}


def window_refusal(policy: Policy, actor: Actor, window: Window) -> Refusal | None:
    """The first rule `window`, armed by `actor`, breaks: its hold lasts its drain lead and its
    duration, under its drain reason, then its own."""
    length = window.duration + (window.drain or timedelta(0))
    reasons = [window.drain_reason, window.hold_reason] if window.drain else [window.hold_reason]
    for reason in reasons:
        refusal = decide_window(policy, actor, window.scope, length, reason)
        if refusal is not None:
            return refusal
    return None


def against_policy(parsed: Parsed, policy: Policy, actor: Actor, path: Path) -> Parsed:
    """`parsed` with every window the policy refuses `actor` (who arms them) moved to its failures."""
    if policy.empty:
        return parsed
    kept, failures = [], list(parsed.failures)
    for window in parsed.windows:
        refusal = window_refusal(policy, actor, window)
        if refusal is None:
            kept.append(window)
        else:
            failures.append(InvalidWindow(refusal.message, path=path, window=repr(window.name),
                                          field=_FIELDS.get(refusal.rule)))
    return replace(parsed, windows=kept, failures=failures)
