"""Windows and calendars meet the fleet's arming policy when they are validated (issue 37), so
a schedule never surprises at 03:00: a window whose hold would break a rule (longer than
`max_ttl`, a reason `reason_pattern` refuses, a scope the scheduler's actor may not hold) is named by `hermes windows validate` and is
not armed by `hermes serve` (it fails the way a window that does not validate fails)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_estop.model.policy import Actor, Policy, Refusal, window_refusals
from hermes_estop.windows.invalid import InvalidWindow

if TYPE_CHECKING:  # pragma: no cover
    from hermes_estop.windows.model import Window
    from hermes_estop.windows.windows_file import Parsed

__all__ = ["against_policy", "refused_window", "refusals_of"]

_FIELDS = {"max_ttl": "duration", "reason_pattern": "reason", "require_ttl": "duration", "max_scope": "scope"}


def refusals_of(policy: Policy, actor: Actor, window: Window) -> tuple[Refusal, ...]:
    """Every rule `window`, armed by `actor`, breaks: its hold lasts its drain lead and its
    duration, and is judged by the reason the operator wrote (`hold_reason`), never the derived
    "draining for ..." one, as the fleet judges its hold when it is armed."""
    length = window.duration + (window.drain or timedelta(0))
    return window_refusals(policy, actor, window.scope, length, window.hold_reason)


def refused_window(window: Window, refusals: tuple[Refusal, ...], path: Path | None = None) -> InvalidWindow:
    """The failure naming every rule `window` breaks (the field of the first)."""
    return InvalidWindow("; ".join(r.message for r in refusals), path=path, window=repr(window.name),
                         field=_FIELDS.get(refusals[0].rule))


def against_policy(parsed: Parsed, policy: Policy, actor: Actor, path: Path) -> Parsed:
    """`parsed` with every window the policy refuses `actor` (who arms them) moved to its failures."""
    if policy.empty:
        return parsed
    kept, failures = [], list(parsed.failures)
    for window in parsed.windows:
        refusals = refusals_of(policy, actor, window)
        if not refusals:
            kept.append(window)
        else:
            failures.append(refused_window(window, refusals, path))
    return replace(parsed, windows=kept, failures=failures)
