"""Notifications (`[[notify]]` in `<root>/estop.toml`): the audit trail's events, and stale-hold
reminders, delivered at least once, in order, to webhooks and commands by `hermes serve`.

Nothing here runs on the hot path: `gate()` never imports this package.
"""

from __future__ import annotations

from hermes_estop.notify.config import EVENT_KINDS, CommandTarget, InvalidNotify, WebhookTarget, load_targets
from hermes_estop.notify.deliver import SIGNATURE_HEADER, DeliveryFailed, sign, verify
from hermes_estop.notify.notifier import NotifyService, notify_services
from hermes_estop.notify.target import DeliveryReport, TargetWorker

__all__ = [
    "EVENT_KINDS",
    "SIGNATURE_HEADER",
    "CommandTarget",
    "DeliveryFailed",
    "InvalidNotify",
    "NotifyService",
    "TargetWorker",
    "DeliveryReport",
    "WebhookTarget",
    "load_targets",
    "notify_services",
    "sign",
    "verify",
]
