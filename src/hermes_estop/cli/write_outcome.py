"""What `hermes pause` and `hermes resume` print after their write, here and over `--server`.

Why one module: a resume over `--server` must print, exit and answer JSON exactly as a local one
(tests/api/test_remote_cli.py pins the parity). Both build one `Resumed` (the pure decision: the
exit status, the lines, the JSON) from what they read after the lifts, and `finish_resume` prints
it; only where the readings and the lift commands come from differs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

import typer

from hermes_estop.cli.command_io import EXIT_HELD, EXIT_OK, echo_lines, emit_json
from hermes_estop.model.errors import HoldConflict
from hermes_estop.model.hold import Reading, Snapshot
from hermes_estop.model.homes import Location
from hermes_estop.model.text import one_line, printable
from hermes_estop.process.describe import resumed_line

if TYPE_CHECKING:
    from hermes_estop.fleet.registry.acks import AckSurvey

__all__ = ["LiftCommand", "Resumed", "Wait", "ack_echo", "ack_exit", "ack_json", "finish_resume", "refused_resume"]

#: the command that lifts the full hold at a location from where the operator stands (None: none does)
LiftCommand = Callable[[Location], str | None]
#: waits for the consumers' acknowledgements (`show`: with progress on the terminal); None: nothing to wait for
Wait = Callable[[bool], "AckSurvey | None"]


def ack_json(found: AckSurvey | None) -> dict[str, object]:
    return {} if found is None else {"acknowledgement": found.to_json()}


def ack_exit(found: AckSurvey | None) -> int:
    if found is None or found.done:
        return EXIT_OK
    from hermes_estop.cli.wait import EXIT_NOT_ACKNOWLEDGED  # only --wait waits: not for every pause (issue 45)

    return EXIT_NOT_ACKNOWLEDGED


def ack_echo(found: AckSurvey | None, verb: str) -> int:
    if found is None:
        return EXIT_OK
    from hermes_estop.cli.wait import echo_ack_survey  # only --wait waits (issue 45)

    return echo_ack_survey(found, verb=verb)


def _unwaited(show: bool) -> AckSurvey | None:
    return None


class Resumed:
    """A resume's outcome: what it lifted at `location`, and what stands after it (`snapshot`,
    the holds of the operator's own view; `holds`, their JSON entries)."""

    def __init__(self, location: Location, where: str, removed: Sequence[Reading], addressed: Reading | None,
                 snapshot: Snapshot, holds: list[dict[str, object]], lift: LiftCommand) -> None:
        self.location = location
        self.where = where
        self.removed = tuple(removed)
        #: the scoped holds standing at `location` (`--profile NAME` may not be one of the operator's own)
        self.scoped_here = len([r for r in addressed.scoped if r.active]) if addressed is not None else 0
        self.snapshot = snapshot
        self.holds = holds
        self.lift = lift

    @property
    def code(self) -> int:
        """Exit 1 when nothing was lifted because only scoped holds stand there."""
        return EXIT_HELD if not self.removed and self.scoped_here else EXIT_OK

    def to_json(self) -> dict[str, object]:
        full = next((r for r in self.removed if r.hold is None or r.hold.selector is None), None)
        return {
            "scope": self.location.scope,
            "released": bool(self.removed),
            "generation": full.hold.generation if full is not None and full.hold else None,
            "released_holds": [r.hold.generation if r.hold else None for r in self.removed],
            "engaged": self.snapshot.engaged,
            "holds": self.holds,
        }

    def lines(self) -> list[str]:
        """What was lifted, and every hold that still stands with the command that lifts it."""
        lines = [] if self.removed else [self._nothing_lifted()]
        lines += [resumed_line(self.location, reading) for reading in self.removed]
        for reading in self.snapshot.active:
            lift = self.lift(reading.location)
            lines.append(f"still held by {printable(reading.location.describe())}{f' ({lift})' if lift else ''}")
        for reading in self.snapshot.scoped_active:
            label = reading.hold.scope_label if reading.hold is not None else "?"
            lift = self.lift(reading.location)
            hint = f" (`{lift} --hold {printable(reading.hold.hold_id or '?')}`)" if lift and reading.hold else ""
            lines.append(f"scoped hold still stands at {printable(reading.location.describe())}: {label}{hint}")
        return lines

    def _nothing_lifted(self) -> str:
        scoped = f": only scoped holds stand there ({self.scoped_here})" if self.scoped_here else ""
        return f"no hold at {printable(self.location.describe())} ({printable(self.where)}){scoped}"

    def refusal(self) -> str:
        """The error line of exit 1: how to lift the scoped holds that stood instead."""
        lift = self.lift(self.location) or "hermes resume"
        return (f"hermes: nothing was lifted; `{lift} --hold ID` lifts one scoped hold, `{lift} --all` "
                f"every hold at {printable(self.location.describe())}")


def finish_resume(resumed: Resumed, *, as_json: bool, wait: Wait = _unwaited) -> NoReturn:
    """Print `resumed` (JSON or lines), wait for the acknowledgements where asked, and exit."""
    if as_json:
        found = wait(False)
        emit_json(resumed.to_json() | ack_json(found))
        raise typer.Exit(resumed.code or ack_exit(found))
    echo_lines(resumed.lines())
    if resumed.code:
        typer.echo(resumed.refusal(), err=True)
        raise typer.Exit(resumed.code)
    raise typer.Exit(ack_echo(wait(True), "resumed"))


def refused_resume(scope: str, exc: HoldConflict, *, as_json: bool) -> NoReturn:
    """A fence or a missing scoped hold refused the resume: exit 1, the hold stands."""
    if as_json:
        emit_json({"scope": scope, "released": False, "error": str(exc)})
    else:
        typer.echo(f"hermes: {one_line(exc)}", err=True)
    raise typer.Exit(EXIT_HELD) from None
