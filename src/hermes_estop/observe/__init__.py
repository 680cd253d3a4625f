"""What an operator sees of a fleet: the status document (`status.FleetStatus`: `hermes status`,
/api/status, /metrics, the status page and serve's shutdown line are renderings of one build),
served by `hermes serve --http` as Prometheus metrics, the JSON status, and a status page with
the week's timeline; and the same timeline in a terminal (`hermes windows timeline`).
Read-only: nothing here writes a hold. `gate()` and the consumers never pay for it.
"""

from __future__ import annotations

from .metrics import EstopCollector, MetricsEndpoint, WorkHeldCounter, new_registry
from .page import render_page
from .server import HttpService, StatusServer, parse_listen, status_document
from .status import FleetStatus, fleet_status
from .svg import render_timeline_svg
from .terminal import print_timeline, render_timeline_text
from .view import DEFAULT_DAYS, Bar, FleetView, Lane, Observer

__all__ = [
    "DEFAULT_DAYS",
    "Bar",
    "EstopCollector",
    "FleetStatus",
    "FleetView",
    "HttpService",
    "Lane",
    "MetricsEndpoint",
    "Observer",
    "StatusServer",
    "WorkHeldCounter",
    "fleet_status",
    "new_registry",
    "parse_listen",
    "print_timeline",
    "render_page",
    "render_timeline_svg",
    "render_timeline_text",
    "status_document",
]
