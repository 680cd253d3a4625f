"""The Typer app behind `hermes`: every command, with help. `cli.main` runs it."""

from __future__ import annotations

import os
from typing import Annotated, Optional, Sequence

import typer

try:  # typer >= 0.29 vendors its own click; older releases use the click package
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - depends on the installed typer
    from click.exceptions import UsageError

from ..config import STORE_ENV
from . import hold
from .common import EXIT_USAGE, new_app, one_line

__all__ = ["CORE_COMMANDS", "build_app", "run_app"]

#: The hold commands, served by the core app alone: they run from crontab and systemd timer
#: lines, so their start-up must not pay for building every other sub-command.
CORE_COMMANDS = frozenset({"pause", "resume", "status", "check", "gate", "history"})


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"hermes-estop {__version__}")
        raise typer.Exit(0)


def _root(
    store: Annotated[Optional[str], typer.Option("--store", help=f"Store URL (file, postgresql://...); default ${STORE_ENV}.")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    if store is not None:
        os.environ[STORE_ENV] = store


def build_app(*, extensions: bool = True) -> typer.Typer:
    """The `hermes` app; without `extensions`, only the hold commands."""
    built = new_app("hermes", "Stop all NEW work in an agent fleet for maintenance, and get it back reliably.")
    built.callback()(_root)
    hold.register(built)
    if extensions:
        from . import extensions as more

        more.register(built)
    return built


def _command_name(args: Sequence[str]) -> str | None:
    """The sub-command an argument list invokes (skipping the root options)."""
    rest = list(args)
    while rest:
        head = rest.pop(0)
        if head == "--store":
            rest = rest[1:]
        elif not head.startswith("-"):
            return head
    return None


def run_app(args: list[str]) -> int:
    """Run `args` through the Typer app (only the hold commands' app when that is all they
    need), mapping the framework's usage errors to one line and exit 2."""
    command = typer.main.get_command(build_app(extensions=_command_name(args) not in CORE_COMMANDS))
    try:
        result = command.main(args=args, prog_name="hermes", standalone_mode=False)
    except UsageError as exc:
        where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
        typer.echo(f"hermes: error: {where}{one_line(exc.format_message())}", err=True)
        return EXIT_USAGE
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        raise KeyboardInterrupt from None
    return result if isinstance(result, int) else 0
