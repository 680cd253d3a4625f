"""`hermes check --at T --for D --impact` (issue 47): what an unplanned pause over `[T, T+D)`
would hold back, the same preview as `hermes windows impact` gives for a window's occurrence.
The pause is a hold at the fleet root (at `--profile`'s home with `--profile`), covering what
`--component` / `--job` name (everything without them), admitting nobody."""

from __future__ import annotations

from datetime import datetime, timedelta

from hermes_estop.cli.command_io import current_estop, echo_lines, emit_json
from hermes_estop.model.durations import format_duration
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.homes import FLEET, validate_profile_name
from hermes_estop.model.selector import Selector
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import display_instant, format_instant
from hermes_estop.observe.impact_preview import impact_lines, pause_hold, read_queued

__all__ = ["run_check_impact"]


def run_check_impact(start: datetime, span: timedelta | None, user: str | None, profile: str | None, *,
                     component: str | None, job: str | None, as_json: bool) -> int:
    """Print the preview; exit 0. `InvalidArgument` (exit 2) without --for, or with --user (a
    pause admits nobody: there is no principal to ask about)."""
    if span is None:
        raise InvalidArgument("--impact needs --for DUR: it previews a pause over [--at, --at + DUR)")
    if user is not None:
        raise InvalidArgument("--impact previews a pause admitting nobody: --user does not apply (leave it out)")
    scope = validate_profile_name(profile) if profile is not None else FLEET
    selector = Selector.of([component] if component else [], [job] if job else [])
    estop = current_estop()
    end = start + span
    hold = pause_hold(scope, start, end, selector)
    found = read_queued(estop).impact([hold], start, end, estop.clock())
    if as_json:
        emit_json({"pause": {"scope": scope, "start": format_instant(start), "end": format_instant(end),
                             "covers": hold.covers_text}, **found.to_json()})
        return 0
    covers = "" if selector is None else f" of {hold.covers_text}"
    head = (f"a {format_duration(span)} pause{covers} at {scope} from {display_instant(start)} "
            f"{found.totals()}")
    echo_lines(printable(line) for line in (head, *impact_lines(found)))
    return 0
