"""What every CLI module shares: the process's `Estop`, one-line errors, rendering of holds.

CLI modules import only typer and the core at module level; heavy packages (pydantic, croniter,
apscheduler, psycopg) are imported inside the commands that need them, so `hermes check` stays
a cheap process to start.
"""

from __future__ import annotations

import json
import logging
import shutil
import textwrap
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from typing import Annotated, Any, NoReturn

import typer

from hermes_estop.cli.exits import EXIT_HELD, EXIT_OK, EXIT_USAGE
from hermes_estop.model.durations import parse_with_unit
from hermes_estop.model.errors import InvalidArgument, InvalidDuration
from hermes_estop.model.text import one_line, printable
from hermes_estop.model.timeutil import parse_operator_time
from hermes_estop.process.describe import describe_hold, describe_reading, hold_json, reading_json
from hermes_estop.process.estop import Estop
from hermes_estop.process.fleet_config import check_components

__all__ = [
    "EXIT_HELD",
    "EXIT_OK",
    "EXIT_USAGE",
    "HELP_OPTIONS",
    "JsonOpt",
    "current_estop",
    "describe_hold",
    "check_components",
    "describe_reading",
    "duration_option",
    "emit_json",
    "echo_lines",
    "fit_lines",
    "fail",
    "hold_json",
    "new_app",
    "one_line",
    "operator_time",
    "printable",
    "reading_json",
    "refuse_blank",
    "terminal_width",
    "warn_if_policy_unread",
]


#: `-h` is `--help` everywhere (a sub-command's context inherits it from the root's)
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}
#: the `--json` option of every command that has one
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def new_app(name: str, help_text: str, *, completion: bool = False) -> typer.Typer:
    """A Typer app or sub-app as every `hermes` command wants it: plain help text, `-h`, and
    errors left to `cli.main` (one line, an exit code). `completion` adds Typer's
    `--install-completion` / `--show-completion` (the root app only)."""
    return typer.Typer(name=name, help=help_text, no_args_is_help=True, add_completion=completion,
                       pretty_exceptions_enable=False, rich_markup_mode=None, context_settings=HELP_OPTIONS)


def current_estop() -> Estop:
    """The `Estop` this command acts on, from the environment (`--store` has set it)."""
    return Estop()


def retire_expired(estop: Estop) -> None:
    """An operator's write retires every expired generation of the fleet (`Fleet.retire_expired`,
    fenced, each deadline checked against the clock the store trusts): on a fleet with no
    `hermes serve` running, an operator's next `pause`, `resume` or `run` is what takes a lapsed
    hold out of the sentinel that other readers (hermes-agent's own) still read (docs/design.md
    "Who retires"). Never raises and never stops the write; what it would log (a hold that cannot
    be retired yet) is left for the next pass, not printed over the command's own lines."""
    quiet = logging.NullHandler()
    logging.getLogger("hermes_estop").addHandler(quiet)
    try:
        estop.fleet.retire_expired()
    except Exception:  # noqa: BLE001, S110 - it never raises by contract; the write goes ahead regardless
        pass
    finally:
        logging.getLogger("hermes_estop").removeHandler(quiet)


def refuse_blank(flag: str, value: str | None) -> None:
    """Refuse an empty or blank deadline option: the Python drop-in reads "" as "not given", and
    a script's unset `$TTL` must not drop the deadman (exit 2, nothing written)."""
    if value is not None and not value.strip():
        raise InvalidArgument(f"invalid {flag} {value!r}: empty; omit {flag} to keep the standing deadline")


def duration_option(flag: str, value: str) -> timedelta:
    """A duration typed on the command line (`durations.parse_with_unit`: `30` is refused with
    `30m? 30s?`); `InvalidDuration` naming the flag."""
    try:
        return parse_with_unit(value)
    except InvalidDuration as exc:
        raise InvalidDuration(f"{flag}: {exc}") from None


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print `hermes: error: <message>` as one line on stderr and exit with `code`."""
    typer.echo(f"hermes: error: {one_line(message)}", err=True)
    raise typer.Exit(code)


def operator_time(flag: str, value: str, now: datetime) -> datetime:
    """`value` of the option `flag` (`--at`, `--until`) as an instant (`timeutil.parse_operator_time`:
    `15:00`, `tomorrow 03:00`, a zone, ISO-8601); the zone it assumed, when it assumed one, is
    said on stderr (stdout stays what scripts parse)."""
    instant, note = parse_operator_time(value, now, what=flag)
    if note is not None:
        typer.echo(f"hermes: note: {one_line(note)}", err=True)
    return instant


def terminal_width() -> int:
    """The columns output must fit: the terminal's, `COLUMNS`, else 80 (a pipe, a log)."""
    return max(shutil.get_terminal_size((80, 24)).columns, 20)


def fit_lines(lines: Iterable[str], width: int) -> Iterator[str]:
    """Each line broken at spaces to at most `width` columns, continuation lines indented two
    more than the line they continue (a word longer than a line is cut: it must still fit)."""
    for line in lines:
        line = line.rstrip()
        if len(line) <= width:
            yield line
            continue
        indent = " " * min(len(line) - len(line.lstrip()) + 2, width // 2)
        yield from textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False,
                                 drop_whitespace=True) or [""]


#: lines written per write by `echo_lines`
_ECHOED = 2048


def echo_lines(lines: Iterable[str]) -> None:
    """`lines` on stdout, a few thousand per write: one write per line is most of the time of a
    command listing 100,000 windows, and one string of them all doubles its memory."""
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= _ECHOED:
            typer.echo("\n".join(chunk))
            chunk.clear()
    if chunk:
        typer.echo("\n".join(chunk))


def warn_if_policy_unread(estop: Estop) -> None:
    """The line every write door prints when it armed under no policy because the fleet's
    policy cannot be read (a stop always stops; the operator must still be told)."""
    problem = estop.fleet.policy.problem
    if problem is not None:
        typer.echo(f"hermes: warning: the fleet's policy cannot be read ({one_line(problem)}): this hold was armed "
                   "under no policy, and no hold is lifted or shortened until it is fixed (hermes policy check)",
                   err=True)


def emit_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
