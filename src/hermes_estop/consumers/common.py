"""The names the consumers share, gathered for callers that imported them from here before the
split: the checks live in `validate`, the gate question in `passgate`, the worker subprocesses in
`worker`. This module defines nothing of its own."""

from __future__ import annotations

from .passgate import PASS_SNAPSHOT_AGE, PassGate, gate_work, work_snapshot, work_views
from .validate import (
    DEFAULT_TIMEOUT,
    parse_timeout,
    validate_name,
    validate_owner,
    validate_profile,
)
from .worker import Worker, WorkerPool, WorkResult, worker_env

__all__ = [
    "DEFAULT_TIMEOUT",
    "PASS_SNAPSHOT_AGE",
    "PassGate",
    "WorkResult",
    "Worker",
    "WorkerPool",
    "gate_work",
    "parse_timeout",
    "validate_name",
    "validate_owner",
    "validate_profile",
    "work_snapshot",
    "work_views",
    "worker_env",
]
