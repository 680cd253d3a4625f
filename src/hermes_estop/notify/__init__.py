"""Notifications (`[[notify]]` in `<root>/estop.toml`): the audit trail's events, and stale-hold
reminders, delivered at least once, in order, to webhooks and commands by `hermes serve`.

Nothing here runs on the hot path: `gate()` never imports this package.
"""

from __future__ import annotations

from .config import (
    EVENT_KINDS,
    CommandTarget,
    InvalidNotify,
    WebhookTarget,
    load_targets,
)
from .deliver import SIGNATURE_HEADER, DeliveryFailed, sign, verify
from .service import NotifyService, notify_services
from .worker import TargetWorker, TickReport

__all__ = [
    "EVENT_KINDS",
    "SIGNATURE_HEADER",
    "CommandTarget",
    "DeliveryFailed",
    "InvalidNotify",
    "NotifyService",
    "TargetWorker",
    "TickReport",
    "WebhookTarget",
    "load_targets",
    "notify_services",
    "sign",
    "verify",
]
