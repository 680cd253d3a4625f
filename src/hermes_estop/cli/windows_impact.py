"""`hermes windows impact NAME`: what one occurrence of a window will hold back, before it does
(issue 47). The computation is `consumers.impact` (pure); the reading `observe.impact_preview`."""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hermes_estop.cli.command_io import current_estop, echo_lines, emit_json
from hermes_estop.cli.windows_app import JsonOpt, windows_app
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import display_instant, format_instant

if TYPE_CHECKING:
    from hermes_estop.observe.impact_preview import WindowImpact
    from hermes_estop.process.estop import Estop

__all__ = ["impact", "impact_headline", "occurrence_number", "starving_jobs"]


@windows_app.command("impact")
def impact(
    name: Annotated[str, typer.Argument(help="The window.")],
    occurrence: Annotated[str, typer.Option("--occurrence", "-o", metavar="N", help="Which occurrence: 1 the next (or the one covering now), 2 the one after...")] = "1",
    as_json: JsonOpt = False,
) -> None:
    """What an occurrence of a window will hold back (drain lead included): one totals line,
    then per home the cron runs held (and when they run after the lift) or going ahead, the
    ready kanban cards that would wait, whether gateway turns are held, and the registered
    consumers that will owe an acknowledgement. Exit 0; 2 for an unknown window."""
    from hermes_estop.observe.impact_preview import impact_lines, window_impact, window_occurrence  # this command's own

    number = occurrence_number(occurrence)
    estop = current_estop()
    now = estop.clock()
    window, found = window_occurrence(estop, name, number, now)
    if found is None:
        raise InvalidArgument(f"window {name} has fewer than {number} occurrence(s) ahead: "
                              "`hermes windows next NAME` lists them")
    result = window_impact(estop, window, found, now)
    if as_json:
        emit_json({"now": format_instant(now), **result.to_json()})
        return
    echo_lines(printable(line) for line in (impact_headline(result), *impact_lines(result.impact)))


def occurrence_number(text: str) -> int:
    """`--occurrence N` as a number (its range is `window_occurrence`'s to check); `InvalidArgument`
    naming what was given otherwise: typer's own refusal of a non-number does not say what it got,
    and `int()` takes `1_0` and other scripts' digits."""
    from hermes_estop.observe.impact_preview import MAX_OCCURRENCE  # this command's own

    stripped = text.strip()
    if re.fullmatch(r"-?[0-9]{1,9}", stripped) is None:
        raise InvalidArgument(f"invalid --occurrence {text!r}: expected a whole number from 1 (the next occurrence) "
                              f"to {MAX_OCCURRENCE}")
    return int(stripped)


def impact_headline(result: WindowImpact) -> str:
    """`window nightly, 2026-12-08 02:00:00+00:00 (drain from 01:45:00+00:00) until ...: holds back ...`."""
    occurrence = result.occurrence
    span = str(display_instant(occurrence.start))
    if occurrence.lead:
        span += f" (drain from {display_instant(occurrence.arm_at)})"
    state = " [skipped: arms nothing]" if result.skipped else " [disabled: arms nothing]" if not result.window.enabled else ""
    return (f"window {result.window.name} at {result.window.scope}, {span} until {display_instant(occurrence.end)}"
            f"{state}: {result.impact.totals()}")


def starving_jobs(estop: Estop, now: datetime) -> tuple[list[tuple[dict[str, Any], str]], list[str]]:
    """`windows validate`'s starvation warnings: each starving cron job (its JSON) and its line,
    and a line per consumers' table that could not be read (not checked)."""
    from hermes_estop.consumers.impact import starving_line  # validate's own: not for the other windows commands
    from hermes_estop.observe.impact_preview import starving
    from hermes_estop.windows.kept_files import HORIZON

    jobs, problems = starving(estop, now)
    return ([(job.to_json(), starving_line(job, HORIZON)) for job in jobs],
            [f"starvation not checked for the {problem}" for problem in problems])
