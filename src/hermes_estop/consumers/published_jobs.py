"""A cron consumer's job table as it publishes it in its registry entry (issue 47 item 5 of the
issue: fleet-wide impact on PostgreSQL), so that `hermes windows impact` run on any host sees
every host's jobs, not only the homes under its own fleet root.

The entry's `extra["cron_jobs"]` is `{"format": 1, "total": N, "jobs": [[name, schedule, zone,
at, owner, profile, next_run_at, timeout seconds, no_overlap], ...]}`: what the impact needs of
each row, no command, no claim, no result. Bounded: rows are added while the encoded list stays
under `MAX_BYTES` (a registry entry is at most 64 KiB), `total` counting them all. Reading is
reading untrusted input: each row is checked (types, lengths, instants); a bad row is skipped
and counted, never raised. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from hermes_estop.consumers.crontable import CronJob
from hermes_estop.model.timeutil import format_instant, parse_stamp

__all__ = ["KEY", "MAX_BYTES", "published", "read_published"]

KEY = "cron_jobs"
#: the encoded rows stay under this (the rest of an entry is well under 2 KiB of its 64)
MAX_BYTES = 48 * 1024
_FORMAT = 1
_MAX_TEXT = 256
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def published(jobs: Iterable[CronJob]) -> dict[str, Any]:
    """The `extra` a cron consumer reports for its table: its rows, as many as fit."""
    rows: list[list[Any]] = []
    size = total = 0
    for job in jobs:
        total += 1
        row = [job.name, job.schedule, job.timezone, format_instant(job.at), job.owner, job.profile,
               format_instant(job.next_run_at), int(job.timeout.total_seconds()), job.no_overlap_window]
        cost = len(json.dumps(row)) + 2  # and its ", " in the list
        if size + cost > MAX_BYTES:
            continue
        size += cost
        rows.append(row)
    return {KEY: {"format": _FORMAT, "total": total, "jobs": rows}}


def _text(value: object, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > _MAX_TEXT:
        raise ValueError("bad text")
    return value


def _row(row: object) -> CronJob:
    if not isinstance(row, list) or len(row) != 9:
        raise ValueError("bad row")
    name, schedule, zone, at, owner, profile, next_run, timeout, no_overlap = row
    when = parse_stamp(at) if at is not None else None
    following = parse_stamp(next_run) if next_run is not None else None
    if (at is not None and when is None) or (next_run is not None and following is None):
        raise ValueError("bad instant")
    if not isinstance(timeout, int) or isinstance(timeout, bool) or not 0 < timeout <= 366 * 86400:
        raise ValueError("bad timeout")
    if (schedule is None) == (when is None):
        raise ValueError("a job needs a schedule or an instant")
    return CronJob(str(_text(name, False)), "", _text(schedule), str(_text(zone, False)), when, _text(owner),
                   _text(profile), timedelta(seconds=timeout), _EPOCH, following, no_overlap_window=no_overlap is True)


def read_published(extra: Mapping[str, object]) -> tuple[tuple[CronJob, ...], str | None]:
    """The jobs an entry's `extra` publishes, and a one-line problem (rows skipped as bad, rows
    left out for size, a shape not understood) or None. Never raises."""
    data = extra.get(KEY)
    if data is None:
        return (), None
    if not isinstance(data, Mapping) or data.get("format") != _FORMAT or not isinstance(data.get("jobs"), list):
        return (), "its published cron jobs are not in a format this version reads"
    jobs: list[CronJob] = []
    bad = 0
    for row in data["jobs"]:
        try:
            jobs.append(_row(row))
        except (ValueError, TypeError, OverflowError):
            bad += 1
    total = data.get("total")
    missing = total - len(data["jobs"]) if isinstance(total, int) and not isinstance(total, bool) else 0
    notes = ([f"{bad} published row(s) unreadable"] if bad else []) + (
        [f"{missing} job(s) not published (the entry is bounded)"] if missing > 0 else [])
    return tuple(jobs), "; ".join(notes) or None
