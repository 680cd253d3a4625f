"""`--wait` of `hermes pause`, `resume` and `drain`: wait until every consumer the hold covers
acknowledged the write (or is lost), with a progress line; the lines and the exit code."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import typer

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.fleet.registry.acks import AckSurvey, wait_for_acks
from hermes_estop.fleet.registry.entries import Ack
from hermes_estop.model.durations import parse_with_unit
from hermes_estop.model.errors import InvalidArgument, InvalidDuration
from hermes_estop.model.text import printable

__all__ = ["DEFAULT_WAIT", "EXIT_NOT_ACKNOWLEDGED", "ack_lines", "echo_ack_survey", "owed_lines", "parse_wait_timeout",
           "wait_with_progress"]

#: EX_TEMPFAIL: not every covered consumer acknowledged within --wait-timeout
EXIT_NOT_ACKNOWLEDGED = 75
DEFAULT_WAIT = "60s"


def parse_wait_timeout(value: str | None) -> float:
    """Seconds of `--wait-timeout DUR` (one line naming a bad value)."""
    try:
        seconds = parse_with_unit(value if value is not None else DEFAULT_WAIT).total_seconds()
    except InvalidDuration as exc:
        raise InvalidArgument(f"--wait-timeout: {exc}") from None
    return seconds


def _lost(found: AckSurvey) -> str:
    return ", ".join(e.describe() for e in found.lost)


def owed_lines(found: AckSurvey) -> list[str]:
    """Which consumers owed the acknowledgement (those the hold covers) and which did not."""
    owed = ", ".join(e.describe() for e in found.owed) or "none"
    lines = [printable(f"  owed by the consumers the hold covers ({found.covers}): {owed}")]
    if found.not_owed:
        others = ", ".join(e.describe() for e in found.not_owed)
        lines.append(printable(f"  not owed (the hold does not cover them): {others}"))
    return lines


def _progress_line(found: AckSurvey, what: str) -> str:
    if found.problem is not None:
        return printable(f"waiting ({found.waited:.1f}s): {found.problem}")
    names = "; ".join(a.describe(found.now) for a in found.awaited)
    return printable(f"waiting ({found.waited:.1f}s) for {len(found.awaited)} of {found.covered} consumer(s) to "
                     f"acknowledge the {what}: {names}")


def wait_with_progress(fleet: Fleet, ack: Ack, timeout: float, *, show: bool) -> AckSurvey:
    """`wait_for_acks` with a progress line on stderr each time the set of awaited consumers
    (or the registry's problem) changes."""
    what = "hold" if ack.engaged else "release"
    last: list[Any] = [None]

    def progress(found: AckSurvey) -> None:
        key = (found.problem, tuple(sorted((a.entry.key, a.state) for a in found.awaited)))
        if show and not found.done and key != last[0]:
            typer.echo(_progress_line(found, what), err=True)
        last[0] = key

    return wait_for_acks(fleet, ack, timeout=timeout, on_progress=progress)


def ack_lines(found: AckSurvey, *, verb: str, now: datetime | None = None) -> tuple[list[str], list[str]]:
    """(stdout lines, stderr lines) reporting `found`: "stopped: N of N consumers acknowledged
    in X s" (lost ones beside it), or at the timeout each consumer that neither acknowledged nor
    is lost (component, host, pid, last seen)."""
    when = now if now is not None else found.now
    out: list[str] = []
    err: list[str] = []
    lost = f"; {len(found.lost)} lost (not waited for): {_lost(found)}" if found.lost else ""
    if found.done:
        extra = "" if found.covered else " (no registered consumer covers it)"
        out.append(printable(f"{verb}: {len(found.acknowledged)} of {found.covered} consumers acknowledged in "
                             f"{found.waited:.1f} s{extra}{lost}"))
        out.extend(owed_lines(found))
        return out, err
    if found.problem is not None:
        err.append(printable(f"hermes: not acknowledged after {found.waited:.1f} s: {found.problem}"))
        return out, err
    err.append(printable(f"hermes: not acknowledged after {found.waited:.1f} s: {len(found.acknowledged)} of "
                         f"{found.covered} consumers acknowledged{lost}"))
    for awaited in found.awaited:
        err.append(printable(f"  not acknowledged: {awaited.describe(when)}"))
    err.extend(owed_lines(found))
    return out, err


def echo_ack_survey(found: AckSurvey, *, verb: str) -> int:
    """Print `ack_lines`; the exit code (0, or 75 when not every consumer acknowledged)."""
    out, err = ack_lines(found, verb=verb)
    for line in out:
        typer.echo(line)
    for line in err:
        typer.echo(line, err=True)
    return 0 if found.done else EXIT_NOT_ACKNOWLEDGED
