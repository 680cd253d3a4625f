"""The `hermes` command (Typer). `python -m hermes_estop` runs the same app.

Exit codes: 0 success or "may proceed"; 1 held (or the named generation is not current);
2 invalid input, with one line on stderr naming the bad value; 75 `hermes gate` held (default);
127 `hermes gate` command not found.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Optional, Sequence

import typer

try:  # typer >= 0.29 vendors its own click; older releases use the click package
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - depends on the installed typer
    from click.exceptions import UsageError

from ..config import STORE_ENV
from ..errors import EstopError
from . import hold
from .common import EXIT_USAGE, new_app, one_line

__all__ = ["app", "main"]

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


def __getattr__(name: str) -> typer.Typer:
    """`hermes_estop.cli.app`, the full app, built on first use."""
    if name == "app":
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(name)


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


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry: runs the app and maps errors to one line and an exit code."""
    args = list(argv) if argv is not None else sys.argv[1:]
    command = typer.main.get_command(build_app(extensions=_command_name(args) not in CORE_COMMANDS))
    try:
        result = command.main(args=args, prog_name="hermes", standalone_mode=False)
    except UsageError as exc:
        where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
        typer.echo(f"hermes: error: {where}{one_line(exc.format_message())}", err=True)
        return EXIT_USAGE
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("hermes: interrupted", err=True)
        return 130
    except EstopError as exc:
        typer.echo(f"hermes: error: {one_line(str(exc))}", err=True)
        return EXIT_USAGE
    except BrokenPipeError:
        return 0
    except Exception as exc:  # one line, never a traceback; HERMES_DEBUG=1 shows it
        if os.environ.get("HERMES_DEBUG"):
            raise
        typer.echo(f"hermes: internal error: {type(exc).__name__}: {one_line(str(exc))}", err=True)
        return 70
    return result if isinstance(result, int) else 0
