"""`GET /metrics`: the fleet's state in the Prometheus text format, through `prometheus_client`.

A custom collector: every scrape builds ONE `FleetView` (one snapshot of the holds, the windows
at the same `now`) and yields gauge and counter families from it, so the samples of a scrape
never mix two reads. Nothing is registered in prometheus_client's global registry: each server
has its own `CollectorRegistry`, so several servers (tests) never collide.

`hermes_estop_work_held_total{consumer}` counts work the gate refused, fed by the consumer loops
of `hermes serve` (`WorkHeldCounter.observe`, a `LoopService` observer): a kanban card or cron
job is counted once each time it becomes held (a job that stays due and held across many
passes is one refusal, not one per pass); a gateway turn is counted per refused turn.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from hermes_estop.fleet.policy_guard import refusals
from hermes_estop.fleet.registry.entries import ConsumerState
from hermes_estop.fleet.registry.roster import Roster
from hermes_estop.model.hold import HoldState
from hermes_estop.observe.view import FleetView, Observer
from hermes_estop.process.describe import covers

__all__ = ["CONSUMERS", "EstopCollector", "MetricsEndpoint", "WorkHeldCounter", "new_registry"]

#: the consumers `hermes_estop_work_held_total` has a series for, from the first scrape
CONSUMERS = ("cron", "kanban", "gateway")


class WorkHeldCounter:
    """Refused work per consumer, for `hermes_estop_work_held_total`. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.totals: dict[str, int] = {name: 0 for name in CONSUMERS}
        self._held_now: dict[str, frozenset[Hashable]] = {}

    def observe(self, consumer: str, report: Any) -> None:
        """A `LoopService` observer: count the items of `report.held` that were not held in
        the consumer's previous pass. Never raises (it runs inside a consumer loop)."""
        try:
            keys = frozenset(held.key for held in getattr(report, "held", ()) or ())
        except Exception:  # noqa: BLE001 - a metric must never break a consumer pass
            return
        with self._lock:
            new = len(keys - self._held_now.get(consumer, frozenset()))
            self._held_now[consumer] = keys
            if new:
                self.totals[consumer] = self.totals.get(consumer, 0) + new

    def add(self, consumer: str, count: int = 1) -> None:
        """Count `count` refusals (a gateway turn refused is one)."""
        with self._lock:
            self.totals[consumer] = self.totals.get(consumer, 0) + count

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.totals)


class EstopCollector(Collector):
    """Yields the `hermes_estop_*` families of ONE `FleetView` (set in `view` by the caller
    before each exposition): `part` "holds" (the holds, the work held, leadership, the store)
    or "windows" (each window's next start, active, skipped occurrences)."""

    def __init__(self, part: str, work_held: WorkHeldCounter, observer: Observer) -> None:
        self.part = part
        self.work_held = work_held
        self.observer = observer
        self.view: FleetView | None = None

    def describe(self) -> Iterable[Metric]:
        return ()  # computed per scrape; nothing to describe ahead of it

    def collect(self) -> Iterator[Metric]:
        view = self.view
        if view is None:
            return iter(())
        return self._holds(view) if self.part == "holds" else self._windows(view)

    def _holds(self, view: FleetView) -> Iterator[Metric]:
        yield from _hold_gauges(view)
        held = CounterMetricFamily("hermes_estop_work_held",
                                   "Work the gate refused: cron jobs and kanban cards (once per held spell), "
                                   "gateway turns", labels=["consumer"])
        for consumer, total in sorted(self.work_held.snapshot().items()):
            held.add_metric([consumer], float(total))
        yield held
        leader = GaugeMetricFamily("hermes_estop_scheduler_leader",
                                   "1 while this process's window scheduler is the elected one "
                                   "(always 1 on the file store)")
        leader.add_metric([], 1.0 if view.leader is None or view.leader else 0.0)
        yield leader
        reachable = GaugeMetricFamily("hermes_estop_store_reachable", "1 while the hold store answers")
        reachable.add_metric([], 1.0 if view.store_reachable else 0.0)
        yield reachable
        fleet = self.observer.fleet
        problem = view.status.audit_problem if view.status is not None else fleet.audit_problem()
        writable = GaugeMetricFamily("hermes_estop_audit_writable",
                                     "1 while the audit trail can be appended to (0: holds still arm, unrecorded)")
        writable.add_metric([], 0.0 if problem is not None else 1.0)
        yield writable
        failures = CounterMetricFamily("hermes_estop_audit_failures",
                                       "Audit lines this process could not write (the holds were written all the same)")
        failures.add_metric([], float(fleet.audit_failures))
        yield failures
        yield from self._policy(view)
        yield from self._windows_file(view)
        yield from self._consumers(view)

    @staticmethod
    def _policy(view: FleetView) -> Iterator[Metric]:
        """The arming policy (issue 37): writes this process refused, overrides standing now."""
        refused = CounterMetricFamily("hermes_estop_policy_refusals",
                                      "Writes the fleet's arming policy refused in this process (hermes serve: "
                                      "windows, remote callers), by rule; every refusal is also in the audit trail",
                                      labels=["rule"])
        for rule, count in sorted(refusals().items()):
            refused.add_metric([rule], float(count))
        yield refused
        standing = GaugeMetricFamily("hermes_estop_policy_overrides_standing",
                                     "Holds standing now that were written with --override")
        standing.add_metric([], float(len(view.status.record.overrides)) if view.status is not None else 0.0)
        yield standing

    @staticmethod
    def _windows_file(view: FleetView) -> Iterator[Metric]:
        """The state of windows.toml, in the part built every scrape: something to alert on
        while the file does not read (no window armed or retired) or a window fails."""
        valid = GaugeMetricFamily("hermes_estop_windows_file_valid",
                                  "1 while windows.toml reads, parses and every window in it validates "
                                  "(0: the scheduler acts on none of it, or not on the failing windows)")
        valid.add_metric([], 1.0 if view.extra.get("windows_valid", True) else 0.0)
        yield valid
        failed = GaugeMetricFamily("hermes_estop_window_failed",
                                   "1 for each window of windows.toml that does not validate (held as it was; "
                                   "the others proceed)", labels=["window"])
        for label in sorted(view.extra.get("windows_failed") or {}):
            failed.add_metric([label.strip("'")], 1.0)
        yield failed
        stale = GaugeMetricFamily("hermes_estop_calendar_stale",
                                  "1 for each calendar of windows.toml that cannot be fetched, read or parsed "
                                  "(its last good copy holds)", labels=["calendar"])
        for name in sorted(view.extra.get("calendars_stale") or {}):
            stale.add_metric([name], 1.0)
        yield stale

    def _consumers(self, view: FleetView) -> Iterator[Metric]:
        """The consumer registry (the view's status document's roster): how many per component
        and state, and each one's lag (seconds since its last report) and whether it
        acknowledged the holds standing now."""
        roster = view.status.roster if view.status is not None and view.status.roster is not None else Roster(view.now)
        counts = GaugeMetricFamily("hermes_estop_consumers", "Registered consumers by component and state "
                                   "(live, stalled, lost)", labels=["component", "state"])
        per: dict[tuple[str, str], int] = {}
        for row in roster.rows:
            for known in ConsumerState:
                per.setdefault((row.entry.component, known.value), 0)
            per[row.entry.component, row.state.value] += 1
        for (component, state_name), count in sorted(per.items()):
            counts.add_metric([component, state_name], float(count))
        yield counts
        lag = GaugeMetricFamily("hermes_estop_consumer_lag_seconds", "Seconds since the consumer's last report: "
                                "how old its view of the holds may be", labels=["component", "host", "pid"])
        acked = GaugeMetricFamily("hermes_estop_consumer_acknowledged", "1 while the consumer has seen exactly the "
                                  "holds covering it now", labels=["component", "host", "pid"])
        for row in roster.rows:
            labels = [row.entry.component, row.entry.host, str(row.entry.pid)]
            lag.add_metric(labels, row.lag)
            acked.add_metric(labels, 1.0 if row.acknowledged else 0.0)
        yield lag
        yield acked

    def _windows(self, view: FleetView) -> Iterator[Metric]:
        next_start = GaugeMetricFamily("hermes_estop_window_next_start_timestamp_seconds",
                                       "Unix time of the window's next occurrence start "
                                       "(absent: none ahead, or disabled)", labels=["window"])
        window_active = GaugeMetricFamily("hermes_estop_window_active",
                                          "1 while an occurrence of the (enabled) window covers now",
                                          labels=["window"])
        for state in view.windows:
            name = state.window.name
            if state.next_start is not None:
                next_start.add_metric([name], state.next_start.timestamp())
            window_active.add_metric([name], 1.0 if state.active else 0.0)
        yield next_start
        yield window_active
        skipped = CounterMetricFamily("hermes_estop_occurrences_skipped",
                                      "Window occurrences skipped: a hold the window did not arm stood, or an operator skipped it",
                                      labels=["window"])
        totals = dict(self.observer.skipped_total)
        for state in view.windows:
            totals.setdefault(state.window.name, 0)
        for name, total in sorted(totals.items()):
            skipped.add_metric([name], float(total))
        yield skipped


class MetricsEndpoint:
    """`GET /metrics`: one `FleetView` per scrape, exposed by prometheus_client.

    The per-window families (three samples per window: most of a scrape with many windows) only
    change at a window's next start or end, when `windows.toml` changes or an occurrence is
    skipped; their exposition is reused until one of those happens, so a scrape of 1,000
    windows formats the holds, not 3,000 unchanged samples. Each part has a registry of its own
    (never prometheus_client's global one), so several servers never collide."""

    def __init__(self, observer: Observer, work_held: WorkHeldCounter | None = None) -> None:
        self.observer = observer
        self.work_held = work_held or WorkHeldCounter()
        self.holds = EstopCollector("holds", self.work_held, observer)
        self.windows = EstopCollector("windows", self.work_held, observer)
        self._holds_registry = new_registry(self.holds)
        self._windows_registry = new_registry(self.windows)
        self._lock = threading.Lock()
        self._windows_text: tuple[Any, bytes] | None = None

    def render(self) -> bytes:
        """The exposition of one scrape (Prometheus text format 0.0.4)."""
        with self._lock:
            view = self.observer.view(bars=False)
            self.holds.view = self.windows.view = view
            head = generate_latest(self._holds_registry)
            key = (view.extra.get("windows_identity"), len(view.windows), view.stable_until,
                   self.observer.skipped_version)
            cached = self._windows_text
            if cached is None or cached[0] != key:
                cached = self._windows_text = (key, generate_latest(self._windows_registry))
            return head + cached[1]


def new_registry(collector: Collector) -> CollectorRegistry:
    """A registry of its own holding `collector` (never prometheus_client's global one)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def _hold_gauges(view: FleetView) -> Iterator[Metric]:
    """Per scope: the full hold active, unreadable, its seconds remaining; per scoped hold: active."""
    now = view.now
    active = GaugeMetricFamily("hermes_estop_hold_active",
                               "1 while the full hold (it covers all work) is active at the scope (an "
                               "unreadable one too: fail safe); scoped holds: hermes_estop_scoped_hold_active",
                               labels=["scope"])
    unreadable = GaugeMetricFamily("hermes_estop_hold_unreadable",
                                   "1 while the hold at the scope cannot be read (held, admits nobody)",
                                   labels=["scope"])
    remaining = GaugeMetricFamily("hermes_estop_hold_seconds_remaining",
                                  "Seconds until the active hold's deadman lifts it (absent: no deadman)",
                                  labels=["scope"])
    scoped = GaugeMetricFamily("hermes_estop_scoped_hold_active",
                               "1 while a scoped hold is active at the scope (it holds only the work its "
                               "selector covers)", labels=["scope", "hold", "selector"])
    for lane in view.lanes:
        reading = lane.reading
        active.add_metric([lane.scope], 1.0 if reading is not None and reading.active else 0.0)
        unreadable.add_metric([lane.scope], 1.0 if reading is not None and reading.state is HoldState.UNREADABLE else 0.0)
        if (reading is not None and reading.state is HoldState.ACTIVE and reading.hold is not None
                and reading.hold.expires_at is not None):
            remaining.add_metric([lane.scope], max((reading.hold.expires_at - now).total_seconds(), 0.0))
    for lane in view.lanes:
        for part in lane.reading.scoped if lane.reading is not None else ():
            if part.hold is not None and part.hold.selector is not None:
                scoped.add_metric([lane.scope, part.hold.hold_id or "", covers(part.hold.selector)],
                                  1.0 if part.active else 0.0)
    yield from (active, unreadable, remaining, scoped)
